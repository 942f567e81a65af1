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
 * whole tile (columns T..Tp-1 are zero, so a row's last tile reads finite numbers), one row of T floats, one
 * tile's sums, and for backward two (T, T) squares: a head's probabilities and its score gradients, both
 * transposed. */
typedef struct {
    float *transposed, *row, *att_t, *dscore_t, *tile;
    int Tp;
} attention_scratch;

static attention_scratch attention_scratch_alloc(int T, int HS, bool backward) {
    const int Tp = (T + ATT_TILE_MAX - 1) / ATT_TILE_MAX * ATT_TILE_MAX;
    const size_t square = backward ? (size_t)T * T * sizeof(float) : sizeof(float);
    attention_scratch s = {mem_alloc((size_t)HS * Tp * sizeof(float), MEM_OTHER, "attention k/v transposed"),
                           mem_alloc((size_t)T * sizeof(float), MEM_OTHER, "attention row"),
                           mem_alloc(square, MEM_OTHER, "attention probabilities transposed"),
                           mem_alloc(square, MEM_OTHER, "attention score gradients transposed"),
                           mem_alloc(ATT_TILE_MAX * sizeof(float), MEM_OTHER, "attention tile sums"), Tp};
    memset(s.transposed, 0, (size_t)HS * Tp * sizeof(float));
    return s;
}

static void attention_scratch_free(attention_scratch *s) {
    mem_free(s->transposed);
    mem_free(s->row);
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

/* Batch b, query head h: att (T, T) and the head's HS columns of out, for every position t. */
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
    for (int t = 0; t < T; t++) {
        const float *restrict q = seq + (size_t)t * row + (size_t)h * HS;
        float *restrict p = att + (((size_t)b * NH + h) * T + t) * T;
        float *restrict o = out + ((size_t)b * T + t) * C + (size_t)h * HS;
        const int n = t + 1; /* keys t2 <= t */
        attention_dots(level, p, scratch->tile, q, kt, n, scratch->Tp, HS);
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
        attention_weighted_rows(level, o, scratch->tile, p, v_base, (size_t)row, n, HS, false);
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
 * is a register tile (no running sum kept in memory). */
OPS_ISA_INLINE void attention_backward_kv_head(const ops_isa level, float *dqkv, const float *dout, const float *qkv,
                                               const float *att, attention_scratch *scratch, int b, int kvh, int T,
                                               int NH, int KVH, int HS) {
    const int row = (NH + 2 * KVH) * HS;
    const int C = NH * HS;
    const int group = NH / KVH;
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t seq = (size_t)b * T * row, k_off = (size_t)(NH + kvh) * HS, v_off = (size_t)(NH + KVH + kvh) * HS;
    float *restrict datt = scratch->row, *restrict att_t = scratch->att_t, *restrict dscore_t = scratch->dscore_t;
    attention_transpose(scratch->transposed, qkv + seq + v_off, (size_t)row, T, scratch->Tp, HS);
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        const float *head_att = att + ((size_t)b * NH + h) * T * T;
        const float *head_dy = dout + (size_t)b * T * C + (size_t)h * HS;
        for (int t = 0; t < T; t++) {
            const size_t bt = (size_t)b * T + t;
            float *restrict dq = dqkv + bt * row + (size_t)h * HS;
            const float *restrict p = head_att + (size_t)t * T;
            const int n = t + 1;
            /* out = sum att * v:  datt[t2] = dy . v[t2] */
            attention_dots(level, datt, scratch->tile, head_dy + (size_t)t * C, scratch->transposed, n, scratch->Tp,
                           HS);
            /* softmax: dscore[t2] = att[t2] * (datt[t2] - sum_j att[j] datt[j]); then the 1/sqrt(HS) scale
             * (dscore overwrites datt); then score = q . k:  dq += dscore k */
            float p_datt = 0.0f;
#pragma omp simd reduction(+ : p_datt)
            for (int t2 = 0; t2 < n; t2++) p_datt += p[t2] * datt[t2];
#pragma omp simd
            for (int t2 = 0; t2 < n; t2++) datt[t2] = p[t2] * (datt[t2] - p_datt) * scale;
            attention_weighted_rows(level, dq, scratch->tile, datt, qkv + seq + k_off, (size_t)row, n, HS, true);
            for (int t2 = 0; t2 < n; t2++) {
                dscore_t[(size_t)t2 * T + t] = datt[t2];
                att_t[(size_t)t2 * T + t] = p[t2];
            }
        }
        /* column t2, rows t = t2..T-1:  dk[t2] += sum_t dscore[t][t2] q[t],  dv[t2] += sum_t att[t][t2] dy[t] */
        for (int t2 = 0; t2 < T; t2++) {
            const size_t at = (size_t)t2 * T + t2, bt2 = (size_t)b * T + t2;
            float *dk = dqkv + seq + (size_t)t2 * row + k_off, *dv = dqkv + seq + (size_t)t2 * row + v_off;
            attention_weighted_rows(level, dk, scratch->tile, dscore_t + at, qkv + bt2 * row + (size_t)h * HS,
                                    (size_t)row, T - t2, HS, true);
            attention_weighted_rows(level, dv, scratch->tile, att_t + at, head_dy + (size_t)t2 * C, (size_t)C, T - t2,
                                    HS, true);
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
