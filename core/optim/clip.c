/* clip.c: sums of squares in double with a fixed summation order, the global norm, and clipping. */
#include "optim/clip.h"

#include <math.h>

/* The span is cut into CLIP_CHUNKS equal chunks (the cut depends on n only), each chunk is summed on its own,
 * and the chunk sums are added in order. Threads take whole chunks, so the order of additions, and hence the
 * bits of the result, do not depend on how many threads there are. */
#define CLIP_CHUNKS 64
#define CLIP_PARALLEL_MIN 65536
/* Within a chunk, eight running sums: element i goes to sum i % 8. One running sum would make every addition
 * wait for the previous one (about 4 cycles); eight independent sums overlap, sit in SIMD registers (they are
 * separate variables so that the compiler keeps them in registers), and leave the pass bound by memory. */
static double chunk_sum_squares(const float *x, size_t n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 += (double)x[i + 0] * x[i + 0], s1 += (double)x[i + 1] * x[i + 1];
        s2 += (double)x[i + 2] * x[i + 2], s3 += (double)x[i + 3] * x[i + 3];
        s4 += (double)x[i + 4] * x[i + 4], s5 += (double)x[i + 5] * x[i + 5];
        s6 += (double)x[i + 6] * x[i + 6], s7 += (double)x[i + 7] * x[i + 7];
    }
    double tail = 0;
    for (; i < n; i++) tail += (double)x[i] * x[i];
    return (((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))) + tail;
}

double clip_sum_squares(const float *x, size_t n) {
    double partial[CLIP_CHUNKS];
    size_t chunk = (n + CLIP_CHUNKS - 1) / CLIP_CHUNKS;
#pragma omp parallel for schedule(static) if (n >= CLIP_PARALLEL_MIN)
    for (int c = 0; c < CLIP_CHUNKS; c++) {
        size_t lo = (size_t)c * chunk, hi = lo + chunk;
        if (lo > n) lo = n;
        if (hi > n) hi = n;
        partial[c] = chunk_sum_squares(x + lo, hi - lo);
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
