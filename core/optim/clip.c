/* clip.c: sums of squares in double with a fixed summation order, the global norm, and clipping. */
#include "optim/clip.h"

#include <math.h>

/* The span is cut into CLIP_CHUNKS equal chunks (the cut depends on n only), each chunk is summed on its own,
 * and the chunk sums are added in order. Threads take whole chunks, so the order of additions, and hence the
 * bits of the result, do not depend on how many threads there are. */
#define CLIP_CHUNKS 64
#define CLIP_PARALLEL_MIN 65536

double clip_sum_squares(const float *x, size_t n) {
    double partial[CLIP_CHUNKS];
    size_t chunk = (n + CLIP_CHUNKS - 1) / CLIP_CHUNKS;
#pragma omp parallel for schedule(static) if (n >= CLIP_PARALLEL_MIN)
    for (int c = 0; c < CLIP_CHUNKS; c++) {
        size_t lo = (size_t)c * chunk, hi = lo + chunk;
        if (lo > n) lo = n;
        if (hi > n) hi = n;
        double sum = 0;
#pragma omp simd reduction(+ : sum)
        for (size_t i = lo; i < hi; i++) sum += (double)x[i] * x[i];
        partial[c] = sum;
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
#pragma omp parallel for simd if (n >= CLIP_PARALLEL_MIN)
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
