/* clip.c: sums of squares in double with a fixed summation order, the global norm, and clipping. */
#include "optim/clip.h"

#include "ops/isa.h"

#include <math.h>

/* The span is cut into CLIP_CHUNKS equal chunks (the cut depends on n only), each chunk is summed on its own,
 * and the chunk sums are added in order. Threads take whole chunks, so the order of additions, and hence the
 * bits of the result, do not depend on how many threads there are. */
#define CLIP_CHUNKS 64
#define CLIP_PARALLEL_MIN 65536
/* Within a chunk, eight running sums: element i goes to sum i % 8, and the eight are added in the fixed tree
 * of chunk_total. One running sum would make every addition wait for the previous one (about 4 cycles). */
typedef double clip_v8d __attribute__((vector_size(8 * sizeof(double))));
typedef float clip_v8f __attribute__((vector_size(8 * sizeof(float)), aligned(sizeof(float))));

static double chunk_total(const double s[8], double tail) {
    return (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))) + tail;
}

static double chunk_sum_squares(const float *x, size_t n) {
    double s[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += (double)x[i + j] * x[i + j];
    double tail = 0;
    for (; i < n; i++) tail += (double)x[i] * x[i];
    return chunk_total(s, tail);
}

/* CLIP_GROUP whole chunks of n values, `stride` apart, summed side by side: the eight sums of one chunk form
 * one vector (one AVX-512 register), and the chunks' vectors are independent, so their additions overlap
 * where one chunk alone would wait for each addition. Each lane still adds its own elements in the order of
 * chunk_sum_squares, and the totals are formed the same way: the same bits, on every ops/isa.h level. */
#define CLIP_GROUP 4
/* (a macro, not a function: a function returning a 512-bit vector would change the baseline build's ABI) */
#define CLIP_SQUARES_OF_EIGHT(x)                                                                               \
    ({                                                                                                         \
        clip_v8d v_ = __builtin_convertvector(*(const clip_v8f *)(x), clip_v8d);                               \
        v_ * v_;                                                                                               \
    })
OPS_ISA_INLINE void group_sum_squares(const float *x, size_t stride, size_t n, double *out) {
    /* four named vectors, not an array: GCC keeps named ones in registers */
    clip_v8d a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    const float *x0 = x, *x1 = x + stride, *x2 = x + 2 * stride, *x3 = x + 3 * stride;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 += CLIP_SQUARES_OF_EIGHT(x0 + i);
        a1 += CLIP_SQUARES_OF_EIGHT(x1 + i);
        a2 += CLIP_SQUARES_OF_EIGHT(x2 + i);
        a3 += CLIP_SQUARES_OF_EIGHT(x3 + i);
    }
    const clip_v8d acc[CLIP_GROUP] = {a0, a1, a2, a3};
    for (int q = 0; q < CLIP_GROUP; q++) {
        double s[8], tail = 0;
        for (int j = 0; j < 8; j++) s[j] = acc[q][j];
        for (size_t k = i; k < n; k++) tail += (double)x[q * stride + k] * x[q * stride + k];
        out[q] = chunk_total(s, tail);
    }
}
OPS_ISA_CLONES(group_sum_squares, (const float *x, size_t stride, size_t n, double *out), (x, stride, n, out));

double clip_sum_squares(const float *x, size_t n) {
    double partial[CLIP_CHUNKS];
    size_t chunk = (n + CLIP_CHUNKS - 1) / CLIP_CHUNKS;
    /* chunks [0, whole) hold `chunk` values each; the ones after them fewer, or none */
    const int whole = chunk ? (int)(n / chunk < CLIP_CHUNKS ? n / chunk : CLIP_CHUNKS) : 0;
    const ops_isa level = ops_isa_current();
#pragma omp parallel for schedule(static) if (n >= CLIP_PARALLEL_MIN)
    for (int g = 0; g < CLIP_CHUNKS / CLIP_GROUP; g++) {
        const int c0 = g * CLIP_GROUP;
        if (c0 + CLIP_GROUP <= whole) {
            group_sum_squares_isa[level](x + (size_t)c0 * chunk, chunk, chunk, partial + c0);
            continue;
        }
        for (int c = c0; c < c0 + CLIP_GROUP; c++) {
            size_t lo = (size_t)c * chunk, hi = lo + chunk;
            if (lo > n) lo = n;
            if (hi > n) hi = n;
            partial[c] = chunk_sum_squares(x + lo, hi - lo);
        }
    }
    double total = 0;
    for (int c = 0; c < CLIP_CHUNKS; c++) total += partial[c];
    return total;
}

double clip_norm_finish(double sum_squares) { return sqrt(sum_squares); }

bool clip_norm_is_finite(double norm) { return isfinite(norm); }

float clip_scale_for(double norm, double max_norm) {
    if (!isfinite(norm) || max_norm <= 0 || norm <= max_norm) return 1.0f;
    return (float)(max_norm / (norm + 1e-6));
}

void clip_scale(float *x, size_t n, float scale) {
#pragma omp parallel for simd if (parallel: n >= CLIP_PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) x[i] *= scale;
}

double clip_global_norm(const clip_span *spans, int nspans) {
    double sum = 0;
    for (int s = 0; s < nspans; s++) sum += clip_sum_squares(spans[s].data, spans[s].n);
    return clip_norm_finish(sum);
}

double clip_grad_norm(const clip_span *spans, int nspans, double max_norm) {
    double norm = clip_global_norm(spans, nspans);
    float scale = clip_scale_for(norm, max_norm);
    if (scale != 1.0f)
        for (int s = 0; s < nspans; s++) clip_scale(spans[s].data, spans[s].n, scale);
    return norm;
}
