/* rmsnorm.c: RMS normalisation forward (saving rstd) and backward (lab 21 writes the backward). */
#include "ops/rmsnorm.h"

#include "base/lab.h"
#include "ops/parallel.h"

#include <math.h>
#include <stddef.h>

void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps) {
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * C))
    for (int n = 0; n < N; n++) {
        const float *restrict x = inp + (size_t)n * C;
        float *restrict y = out + (size_t)n * C;
        double sq = 0.0;
#pragma omp simd reduction(+ : sq)
        for (int c = 0; c < C; c++) sq += (double)x[c] * x[c];
        float s = (float)(1.0 / sqrt(sq / C + eps));
#pragma omp simd
        for (int c = 0; c < C; c++) y[c] = x[c] * s * weight[c];
        if (rstd) rstd[n] = s;
    }
}

void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C) {
    if (dinp) {
        /* rstd depends on every x of the row, hence the one correction term (layernorm has two). */
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * C))
        for (int n = 0; n < N; n++) {
            const float *restrict x = inp + (size_t)n * C;
            const float *restrict dy = dout + (size_t)n * C;
            float *restrict dx = dinp + (size_t)n * C;
            /* LAB 21 BEGIN RMSNorm backward, one row: dx += rstd * (g - xhat * mean(g * xhat)), g = weight * dy, xhat = x * rstd */
            float s = rstd[n];
            float g_xhat_sum = 0.0f;
#pragma omp simd reduction(+ : g_xhat_sum)
            for (int c = 0; c < C; c++) g_xhat_sum += weight[c] * dy[c] * x[c] * s;
            float g_xhat_mean = g_xhat_sum / C;
#pragma omp simd
            for (int c = 0; c < C; c++) dx[c] += s * (weight[c] * dy[c] - x[c] * s * g_xhat_mean);
            /* LAB 21 END */
        }
    }
    if (dweight) {
#pragma omp parallel if (ops_worth_threads((long)N * C))
        {
            int c0, c1;
            ops_thread_range(C, OPS_SIMD_FLOATS, &c0, &c1);
            for (int n = 0; n < N; n++) {
                const float *restrict x = inp + (size_t)n * C;
                const float *restrict dy = dout + (size_t)n * C;
                /* LAB 21 BEGIN RMSNorm backward, the gain: dweight[c] += dy * xhat over this row's channels c0..c1-1 */
                float s = rstd[n];
#pragma omp simd
                for (int c = c0; c < c1; c++) dweight[c] += dy[c] * x[c] * s;
                /* LAB 21 END */
            }
        }
    }
}
