/* attention.c: causal self-attention forward (softmax probabilities saved) and backward, with grouped-query heads. */
#include "ops/attention.h"

#include "base/error.h"
#include "base/mem.h"
#include "ops/fastmath.h"
#include "ops/isa.h"
#include "ops/parallel.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

static void check_heads(int NH, int KVH, int HS) {
    MP_ASSERT(NH > 0 && KVH > 0 && HS > 0 && NH % KVH == 0,
              "attention needs NH > 0, KVH > 0 dividing NH, HS > 0: NH=%d KVH=%d HS=%d", NH, KVH, HS);
}

/* Both passes work on one head of one sequence at a time: for T = 64 its T x T probabilities, its keys
 * and values (T x HS each) fit in L1/L2 together. The causal half only: masked scores (t2 > t) are never
 * computed, beyond the rest of the last tile of a row.
 *
 * The sums are register tiles (see attention_tile_sum):
 *   a score row q . k[t2] is a sum over i of q[i] * kt[i][t2..t2+width), with kt the keys TRANSPOSED into a
 *   per-thread copy, so each term is a vector operation along t2 and no dot product ends in a sum across
 *   the lanes of a vector;
 *   an output row sum_t2 att[t2] v[t2][i..i+width) runs down t2 with its sums in registers.
 * Every such sum runs over i (or t2) in ascending order, one lane per output, whatever the tile width: the
 * scores are the same floats on every instruction set level (ops/isa.h) and thread count. The softmax
 * denominator is a sum across lanes and may differ in its last bit between levels, and with it the
 * probabilities and what is computed from them (tests/unit/test_ops_isa.c: within 1e-6). */

enum { ATT_TILE_MAX = 64 }; /* floats in the widest tile (AVX-512) */

/* Scratch per thread: a transposed (HS, Tp) copy of one key or value head, its Tp = T rounded up to a
 * whole tile (columns T..Tp-1 are zero, so a row's last tile reads finite numbers), two rows of T floats (a
 * pair of query rows), the sums of a tile for each of two rows, and for backward two (T, T) squares: a head's
 * probabilities and its score gradients, both transposed. */
typedef struct {
    float *transposed, *row, *row2, *att_t, *dscore_t, *tile;
    int Tp;
} attention_scratch;

static attention_scratch attention_scratch_alloc(int T, int HS, bool backward) {
    const int Tp = (T + ATT_TILE_MAX - 1) / ATT_TILE_MAX * ATT_TILE_MAX;
    const size_t square = backward ? (size_t)T * T * sizeof(float) : sizeof(float);
    attention_scratch s = {mem_alloc((size_t)HS * Tp * sizeof(float), MEM_OTHER, "attention k/v transposed"),
                           mem_alloc((size_t)T * sizeof(float), MEM_OTHER, "attention row"),
                           mem_alloc((size_t)T * sizeof(float), MEM_OTHER, "attention second row"),
                           mem_alloc(square, MEM_OTHER, "attention probabilities transposed"),
                           mem_alloc(square, MEM_OTHER, "attention score gradients transposed"),
                           mem_alloc(2 * ATT_TILE_MAX * sizeof(float), MEM_OTHER, "attention tile sums"), Tp};
    memset(s.transposed, 0, (size_t)HS * Tp * sizeof(float));
    return s;
}

static void attention_scratch_free(attention_scratch *s) {
    mem_free(s->transposed);
    mem_free(s->row);
    mem_free(s->row2);
    mem_free(s->att_t);
    mem_free(s->dscore_t);
    mem_free(s->tile);
}

/* dst (HS, Tp) = the HS floats at src + t * stride, for t < T; columns T..Tp-1 stay as they are (zero) */
OPS_ISA_INLINE void attention_transpose(float *restrict dst, const float *restrict src, size_t stride, int T, int Tp,
                                        int HS) {
    for (int t = 0; t < T; t++)
        for (int i = 0; i < HS; i++) dst[(size_t)i * Tp + t] = src[(size_t)t * stride + i];
}

/* The running sums of a tile: four vectors of the level's width (4, 8 or 16 floats) in four variables, so a
 * tile is 16, 32 or 64 floats wide and its sums stay in registers. (Written as a float array or a loop over
 * vectors, GCC -O2 keeps the sums in memory, and every step waits on the store and reload of the sum it just
 * wrote: measured, no faster in AVX-512 than in SSE2.) Four independent sums also hide the adds' latency.
 * Each lane adds its terms in ascending order whatever the width, so the result does not depend on it.
 * The vectors are declared with a float's alignment, and a tile's sums go out to a heap buffer (the scratch's
 * `tile`), not a stack array: the compiler then never assumes a 16-, 32- or 64-byte aligned stack slot
 * (AddressSanitizer's detect_stack_use_after_return gives stack variables no such alignment, and an aligned
 * AVX-512 store there faults). Unaligned moves are as fast on these CPUs. */
typedef float attention_v4 __attribute__((vector_size(4 * sizeof(float)), aligned(sizeof(float))));
typedef float attention_v8 __attribute__((vector_size(8 * sizeof(float)), aligned(sizeof(float))));
typedef float attention_v16 __attribute__((vector_size(16 * sizeof(float)), aligned(sizeof(float))));
OPS_ISA_INLINE int attention_tile_width(const ops_isa level) {
    return level == OPS_ISA_AVX512 ? 64 : level == OPS_ISA_AVX2 ? 32 : 16;
}

/* sums[0..width) = sum_k w[k] * src[k * stride + 0..width), k < count ascending; vectors moved with memcpy
 * (rows are not aligned). */
#define ATTENTION_TILE_SUM(vec, sums, w, src, stride, count)                                                    \
    do {                                                                                                        \
        const size_t lanes = sizeof(vec) / sizeof(float);                                                       \
        vec a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, r0, r1, r2, r3;                                             \
        for (int k = 0; k < (count); k++) {                                                                     \
            const float *restrict r = (src) + (size_t)k * (stride);                                            \
            const float wk = (w)[k];                                                                            \
            memcpy(&r0, r, sizeof r0), memcpy(&r1, r + lanes, sizeof r1);                                       \
            memcpy(&r2, r + 2 * lanes, sizeof r2), memcpy(&r3, r + 3 * lanes, sizeof r3);                       \
            a0 += wk * r0, a1 += wk * r1, a2 += wk * r2, a3 += wk * r3;                                         \
        }                                                                                                       \
        memcpy((sums), &a0, sizeof a0), memcpy((sums) + lanes, &a1, sizeof a1);                                 \
        memcpy((sums) + 2 * lanes, &a2, sizeof a2), memcpy((sums) + 3 * lanes, &a3, sizeof a3);                 \
    } while (0)

OPS_ISA_INLINE void attention_tile_sum(const ops_isa level, float *restrict sums, const float *restrict w,
                                       const float *restrict src, size_t stride, int count) {
    if (level == OPS_ISA_AVX512)
        ATTENTION_TILE_SUM(attention_v16, sums, w, src, stride, count);
    else if (level == OPS_ISA_AVX2)
        ATTENTION_TILE_SUM(attention_v8, sums, w, src, stride, count);
    else
        ATTENTION_TILE_SUM(attention_v4, sums, w, src, stride, count);
}

/* dots[t2] = sum_i x[i] * mt[i][t2] for t2 < n, mt (HS, Tp): x against n rows of the matrix mt transposes.
 * tile: ATT_TILE_MAX floats of scratch. */
OPS_ISA_INLINE void attention_dots(const ops_isa level, float *restrict dots, float *restrict tile,
                                   const float *restrict x, const float *restrict mt, int n, int Tp, int HS) {
    const int width = attention_tile_width(level);
    for (int j0 = 0; j0 < n; j0 += width) {
        attention_tile_sum(level, tile, x, mt + j0, (size_t)Tp, HS);
        const int m = n - j0 < width ? n - j0 : width;
        for (int j = 0; j < m; j++) dots[j0 + j] = tile[j];
    }
}

/* y[i] (+)= sum_t2 w[t2] * rows[t2 * stride + i] for i < HS, t2 < n: `add` adds to y, else y is overwritten. */
OPS_ISA_INLINE void attention_weighted_rows(const ops_isa level, float *restrict y, float *restrict tile,
                                            const float *restrict w, const float *restrict rows, size_t stride, int n,
                                            int HS, bool add) {
    const int width = attention_tile_width(level);
    int i0 = 0;
    for (; i0 + width <= HS; i0 += width) {
        attention_tile_sum(level, tile, w, rows + i0, stride, n);
#pragma omp simd
        for (int j = 0; j < width; j++) y[i0 + j] = add ? y[i0 + j] + tile[j] : tile[j];
    }
    for (int i = i0; i < HS; i++) { /* the columns left over, each summed the same way, one by one */
        float acc = 0.0f;
        for (int t2 = 0; t2 < n; t2++) acc += w[t2] * rows[(size_t)t2 * stride + i];
        y[i] = add ? y[i] + acc : acc;
    }
}

/* Two rows of sums at once, each lane adding its terms in ascending k as ATTENTION_TILE_SUM does:
 *     sums0[0..width) = sum_{b0 <= k < e0} w0[k] * src[k * stride + 0..width)
 *     sums1[0..width) = sum_{b1 <= k < e1} w1[k] * src[k * stride + 0..width)
 * for b0 <= b1 <= e0 <= e1: row 0 may start earlier (a column of dk or dv, then the next column), row 1 may end
 * later (a query row, then the next one, which sees one more key). Each load of src serves both rows, and the
 * eight running sums are independent: twice the additions in flight of one row, whose sums otherwise wait on
 * the adds' latency. The same terms in the same order as two calls of ATTENTION_TILE_SUM: the same bits. */
#define ATTENTION_LOAD4(r, r0, r1, r2, r3, lanes)                                                               \
    (memcpy(&r0, r, sizeof r0), memcpy(&r1, (r) + (lanes), sizeof r1), memcpy(&r2, (r) + 2 * (lanes), sizeof r2), \
     memcpy(&r3, (r) + 3 * (lanes), sizeof r3))
#define ATTENTION_ADD4(a0, a1, a2, a3, wk, r0, r1, r2, r3) (a0 += wk * r0, a1 += wk * r1, a2 += wk * r2, a3 += wk * r3)
#define ATTENTION_TILE_SUM2(vec, sums0, sums1, w0, w1, src, stride, b0, b1, e0, e1)                             \
    do {                                                                                                        \
        const size_t lanes = sizeof(vec) / sizeof(float);                                                       \
        vec a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0}, r0, r1, r2, r3;     \
        int k = (b0);                                                                                           \
        for (; k < (b1); k++) { /* row 0 alone */                                                               \
            ATTENTION_LOAD4((src) + (size_t)k * (stride), r0, r1, r2, r3, lanes);                               \
            ATTENTION_ADD4(a0, a1, a2, a3, (w0)[k], r0, r1, r2, r3);                                            \
        }                                                                                                       \
        for (; k < (e0); k++) { /* both rows */                                                                 \
            ATTENTION_LOAD4((src) + (size_t)k * (stride), r0, r1, r2, r3, lanes);                               \
            ATTENTION_ADD4(a0, a1, a2, a3, (w0)[k], r0, r1, r2, r3);                                            \
            ATTENTION_ADD4(c0, c1, c2, c3, (w1)[k], r0, r1, r2, r3);                                            \
        }                                                                                                       \
        for (; k < (e1); k++) { /* row 1 alone */                                                               \
            ATTENTION_LOAD4((src) + (size_t)k * (stride), r0, r1, r2, r3, lanes);                               \
            ATTENTION_ADD4(c0, c1, c2, c3, (w1)[k], r0, r1, r2, r3);                                            \
        }                                                                                                       \
        memcpy((sums0), &a0, sizeof a0), memcpy((sums0) + lanes, &a1, sizeof a1);                               \
        memcpy((sums0) + 2 * lanes, &a2, sizeof a2), memcpy((sums0) + 3 * lanes, &a3, sizeof a3);               \
        memcpy((sums1), &c0, sizeof c0), memcpy((sums1) + lanes, &c1, sizeof c1);                               \
        memcpy((sums1) + 2 * lanes, &c2, sizeof c2), memcpy((sums1) + 3 * lanes, &c3, sizeof c3);               \
    } while (0)

/* tile: 2 * ATT_TILE_MAX floats, the sums of row 0 then those of row 1. */
OPS_ISA_INLINE void attention_tile_sum2(const ops_isa level, float *restrict tile, const float *restrict w0,
                                        const float *restrict w1, const float *restrict src, size_t stride, int b0,
                                        int b1, int e0, int e1) {
    float *restrict sums1 = tile + ATT_TILE_MAX;
    if (level == OPS_ISA_AVX512)
        ATTENTION_TILE_SUM2(attention_v16, tile, sums1, w0, w1, src, stride, b0, b1, e0, e1);
    else if (level == OPS_ISA_AVX2)
        ATTENTION_TILE_SUM2(attention_v8, tile, sums1, w0, w1, src, stride, b0, b1, e0, e1);
    else
        ATTENTION_TILE_SUM2(attention_v4, tile, sums1, w0, w1, src, stride, b0, b1, e0, e1);
}

/* attention_dots for two rows x0, x1 at once: dots0[t2] for t2 < n0, dots1[t2] for t2 < n1 (n0 <= n1). */
OPS_ISA_INLINE void attention_dots2(const ops_isa level, float *restrict dots0, float *restrict dots1,
                                    float *restrict tile, const float *restrict x0, const float *restrict x1,
                                    const float *restrict mt, int n0, int n1, int Tp, int HS) {
    const int width = attention_tile_width(level);
    for (int j0 = 0; j0 < n1; j0 += width) {
        attention_tile_sum2(level, tile, x0, x1, mt + j0, (size_t)Tp, 0, 0, HS, HS);
        const int m0 = n0 - j0 < 0 ? 0 : n0 - j0 < width ? n0 - j0 : width;
        const int m1 = n1 - j0 < width ? n1 - j0 : width;
        for (int j = 0; j < m0; j++) dots0[j0 + j] = tile[j];
        for (int j = 0; j < m1; j++) dots1[j0 + j] = tile[ATT_TILE_MAX + j];
    }
}

/* attention_weighted_rows for two outputs at once, over the rows k of `rows` (k * stride apart) in
 * [b0, e0) for y0 and [b1, e1) for y1, weights w0[k] and w1[k] (b0 <= b1 <= e0 <= e1). */
OPS_ISA_INLINE void attention_weighted_rows2(const ops_isa level, float *restrict y0, float *restrict y1,
                                             float *restrict tile, const float *restrict w0, const float *restrict w1,
                                             const float *restrict rows, size_t stride, int b0, int b1, int e0, int e1,
                                             int HS, bool add) {
    const int width = attention_tile_width(level);
    int i0 = 0;
    for (; i0 + width <= HS; i0 += width) {
        attention_tile_sum2(level, tile, w0, w1, rows + i0, stride, b0, b1, e0, e1);
#pragma omp simd
        for (int j = 0; j < width; j++) y0[i0 + j] = add ? y0[i0 + j] + tile[j] : tile[j];
#pragma omp simd
        for (int j = 0; j < width; j++) y1[i0 + j] = add ? y1[i0 + j] + tile[ATT_TILE_MAX + j] : tile[ATT_TILE_MAX + j];
    }
    for (int i = i0; i < HS; i++) { /* the columns left over, each summed the same way, one by one */
        float acc0 = 0.0f, acc1 = 0.0f;
        for (int k = b0; k < e0; k++) acc0 += w0[k] * rows[(size_t)k * stride + i];
        for (int k = b1; k < e1; k++) acc1 += w1[k] * rows[(size_t)k * stride + i];
        y0[i] = add ? y0[i] + acc0 : acc0;
        y1[i] = add ? y1[i] + acc1 : acc1;
    }
}

/* Row t's probabilities from its n = t + 1 scores in p (T floats): scaled, softmax, zeros past the diagonal. */
OPS_ISA_INLINE void attention_softmax_row(float *restrict p, int n, int T, float scale) {
    float max = -INFINITY;
#pragma omp simd reduction(max : max)
    for (int t2 = 0; t2 < n; t2++) {
        p[t2] *= scale;
        max = p[t2] > max ? p[t2] : max;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int t2 = 0; t2 < n; t2++) {
        p[t2] = ops_expf(p[t2] - max);
        sum += p[t2];
    }
    const float inv_sum = 1.0f / sum; /* >= 1/(t+1): the max term contributes exp(0) = 1 */
#pragma omp simd
    for (int t2 = 0; t2 < n; t2++) p[t2] *= inv_sum;
    for (int t2 = n; t2 < T; t2++) p[t2] = 0.0f;
}

/* Row t's score gradients, in place of datt (the gradient of its n probabilities p): through the softmax,
 * dscore[t2] = p[t2] * (datt[t2] - sum_j p[j] datt[j]), then the 1/sqrt(HS) scale. */
OPS_ISA_INLINE void attention_softmax_row_backward(float *restrict datt, const float *restrict p, int n, float scale) {
    float p_datt = 0.0f;
#pragma omp simd reduction(+ : p_datt)
    for (int t2 = 0; t2 < n; t2++) p_datt += p[t2] * datt[t2];
#pragma omp simd
    for (int t2 = 0; t2 < n; t2++) datt[t2] = p[t2] * (datt[t2] - p_datt) * scale;
}

/* Batch b, query head h: att (T, T) and the head's HS columns of out, for every position t. Query rows go in
 * pairs (t, t + 1), which share every load of the keys and values (attention_dots2, attention_weighted_rows2);
 * an odd T's last row goes alone. */
OPS_ISA_INLINE void attention_forward_head(const ops_isa level, float *out, float *att, const float *qkv,
                                           attention_scratch *scratch, int b, int h, int T, int NH, int KVH, int HS) {
    const int row = (NH + 2 * KVH) * HS; /* floats per position in qkv */
    const int C = NH * HS;               /* floats per position in out */
    const int kvh = h / (NH / KVH);      /* the kv head this query head reads */
    const float scale = 1.0f / sqrtf((float)HS);
    const float *seq = qkv + (size_t)b * T * row;
    const float *v_base = seq + (size_t)(NH + KVH + kvh) * HS;
    float *restrict kt = scratch->transposed;
    attention_transpose(kt, seq + (size_t)(NH + kvh) * HS, (size_t)row, T, scratch->Tp, HS);
    for (int t = 0; t < T; t += 2) {
        const float *restrict q = seq + (size_t)t * row + (size_t)h * HS;
        float *restrict p = att + (((size_t)b * NH + h) * T + t) * T;
        float *restrict o = out + ((size_t)b * T + t) * C + (size_t)h * HS;
        const int n = t + 1; /* keys t2 <= t */
        if (t + 1 == T) {
            attention_dots(level, p, scratch->tile, q, kt, n, scratch->Tp, HS);
            attention_softmax_row(p, n, T, scale);
            attention_weighted_rows(level, o, scratch->tile, p, v_base, (size_t)row, n, HS, false);
            break;
        }
        float *restrict p_next = p + T, *restrict o_next = o + C; /* row t + 1, which sees n + 1 keys */
        attention_dots2(level, p, p_next, scratch->tile, q, q + row, kt, n, n + 1, scratch->Tp, HS);
        attention_softmax_row(p, n, T, scale);
        attention_softmax_row(p_next, n + 1, T, scale);
        attention_weighted_rows2(level, o, o_next, scratch->tile, p, p_next, v_base, (size_t)row, 0, 0, n, n + 1, HS,
                                 false);
    }
}
OPS_ISA_CLONES_LEVEL(attention_forward_head,
                     (float *out, float *att, const float *qkv, attention_scratch *scratch, int b, int h, int T, int NH,
                      int KVH, int HS),
                     (out, att, qkv, scratch, b, h, T, NH, KVH, HS));

void attention_forward(float *out, float *att, const float *qkv, int B, int T, int NH, int KVH, int HS) {
    check_heads(NH, KVH, HS);
    void (*const head)(float *, float *, const float *, attention_scratch *, int, int, int, int, int, int) =
        attention_forward_head_isa[ops_isa_current()];
#pragma omp parallel if (ops_worth_threads((long)B * NH * T * T * HS / 2))
    {
        attention_scratch scratch = attention_scratch_alloc(T, HS, false);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) head(out, att, qkv, &scratch, b, h, T, NH, KVH, HS);
        attention_scratch_free(&scratch);
    }
}

/* Batch b, kv head kvh and the query heads that share it, in order: their dq, and the kv head's dk and dv. */
/* Batch b, kv head kvh and the query heads that share it, in order: their dq, and the kv head's dk and dv.
 * Row by row (query t) come datt = dy . v, the score gradients and dq; dk and dv, which sum over the rows
 * t >= t2 of a column t2, follow per head from the transposed squares, so every one of the four products
 * is a register tile (no running sum kept in memory). Rows go in pairs (t, t + 1) and columns in pairs
 * (t2, t2 + 1), which share every load of the other operand (attention_dots2, attention_weighted_rows2); an
 * odd T's last row and last column go alone. */
OPS_ISA_INLINE void attention_backward_kv_head(const ops_isa level, float *dqkv, const float *dout, const float *qkv,
                                               const float *att, attention_scratch *scratch, int b, int kvh, int T,
                                               int NH, int KVH, int HS) {
    const int row = (NH + 2 * KVH) * HS;
    const int C = NH * HS;
    const int group = NH / KVH;
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t seq = (size_t)b * T * row, k_off = (size_t)(NH + kvh) * HS, v_off = (size_t)(NH + KVH + kvh) * HS;
    float *restrict datt = scratch->row, *restrict datt_next = scratch->row2;
    float *restrict att_t = scratch->att_t, *restrict dscore_t = scratch->dscore_t, *restrict tile = scratch->tile;
    const float *restrict k_rows = qkv + seq + k_off;
    attention_transpose(scratch->transposed, qkv + seq + v_off, (size_t)row, T, scratch->Tp, HS);
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        const float *head_att = att + ((size_t)b * NH + h) * T * T;
        const float *head_dy = dout + (size_t)b * T * C + (size_t)h * HS;
        const float *q_rows = qkv + seq + (size_t)h * HS;
        float *dq_rows = dqkv + seq + (size_t)h * HS;
        for (int t = 0; t < T; t += 2) {
            const bool pair = t + 1 < T;
            const float *restrict p = head_att + (size_t)t * T, *restrict dy = head_dy + (size_t)t * C;
            float *restrict dq = dq_rows + (size_t)t * row;
            const int n = t + 1; /* row t + 1 sees n + 1 keys */
            /* out = sum att * v:  datt[t2] = dy . v[t2] */
            if (pair) attention_dots2(level, datt, datt_next, tile, dy, dy + C, scratch->transposed, n, n + 1,
                                      scratch->Tp, HS);
            else attention_dots(level, datt, tile, dy, scratch->transposed, n, scratch->Tp, HS);
            /* through the softmax and the scale (dscore overwrites datt); then score = q . k:  dq += dscore k */
            attention_softmax_row_backward(datt, p, n, scale);
            if (pair) {
                attention_softmax_row_backward(datt_next, p + T, n + 1, scale);
                attention_weighted_rows2(level, dq, dq + row, tile, datt, datt_next, k_rows, (size_t)row, 0, 0, n,
                                         n + 1, HS, true);
            } else attention_weighted_rows(level, dq, tile, datt, k_rows, (size_t)row, n, HS, true);
            for (int t2 = 0; t2 < n; t2++) {
                dscore_t[(size_t)t2 * T + t] = datt[t2];
                att_t[(size_t)t2 * T + t] = p[t2];
            }
            for (int t2 = 0; pair && t2 <= n; t2++) {
                dscore_t[(size_t)t2 * T + t + 1] = datt_next[t2];
                att_t[(size_t)t2 * T + t + 1] = p[T + t2];
            }
        }
        /* column t2, rows t = t2..T-1:  dk[t2] += sum_t dscore[t][t2] q[t],  dv[t2] += sum_t att[t][t2] dy[t] */
        for (int t2 = 0; t2 < T; t2 += 2) {
            float *dk = dqkv + seq + (size_t)t2 * row + k_off, *dv = dqkv + seq + (size_t)t2 * row + v_off;
            const float *ds = dscore_t + (size_t)t2 * T, *pt = att_t + (size_t)t2 * T;
            if (t2 + 1 == T) {
                attention_weighted_rows(level, dk, tile, ds + t2, q_rows + (size_t)t2 * row, (size_t)row, 1, HS, true);
                attention_weighted_rows(level, dv, tile, pt + t2, head_dy + (size_t)t2 * C, (size_t)C, 1, HS, true);
                break;
            }
            attention_weighted_rows2(level, dk, dk + row, tile, ds, ds + T, q_rows, (size_t)row, t2, t2 + 1, T, T, HS,
                                     true);
            attention_weighted_rows2(level, dv, dv + row, tile, pt, pt + T, head_dy, (size_t)C, t2, t2 + 1, T, T, HS,
                                     true);
        }
    }
}
OPS_ISA_CLONES_LEVEL(attention_backward_kv_head,
                     (float *dqkv, const float *dout, const float *qkv, const float *att, attention_scratch *scratch,
                      int b, int kvh, int T, int NH, int KVH, int HS),
                     (dqkv, dout, qkv, att, scratch, b, kvh, T, NH, KVH, HS));

void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int NH,
                        int KVH, int HS) {
    check_heads(NH, KVH, HS);
    void (*const kv_head)(float *, const float *, const float *, const float *, attention_scratch *, int, int, int,
                          int, int, int) = attention_backward_kv_head_isa[ops_isa_current()];
    /* Split over (batch, kv head) pairs: the query heads that share a kv head add into its dk and dv in one
     * thread, in a fixed order. */
#pragma omp parallel if (ops_worth_threads((long)B * NH * T * T * HS / 2))
    {
        attention_scratch scratch = attention_scratch_alloc(T, HS, true);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int kvh = 0; kvh < KVH; kvh++)
                kv_head(dqkv, dout, qkv, att, &scratch, b, kvh, T, NH, KVH, HS);
        attention_scratch_free(&scratch);
    }
}
