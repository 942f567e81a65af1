/* layernorm.c: layer normalisation forward (saving mean and rstd) and backward. */
#include "ops/layernorm.h"

#include "ops/parallel.h"

#include <math.h>
#include <stddef.h>

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                       const float *bias, int N, int C) {
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * C))
    for (int n = 0; n < N; n++) {
        const float *restrict x = inp + (size_t)n * C;
        float *restrict y = out + (size_t)n * C;
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (int c = 0; c < C; c++) sum += x[c];
        double m = sum / C;
        double sq = 0.0;
#pragma omp simd reduction(+ : sq)
        for (int c = 0; c < C; c++) sq += ((double)x[c] - m) * ((double)x[c] - m);
        float s = (float)(1.0 / sqrt(sq / C + LAYERNORM_EPS));
        float mf = (float)m;
#pragma omp simd
        for (int c = 0; c < C; c++) y[c] = (x[c] - mf) * s * weight[c] + bias[c];
        if (mean) mean[n] = mf;
        if (rstd) rstd[n] = s;
    }
}

void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                        const float *weight, const float *mean, const float *rstd, int N, int C) {
    if (dinp) {
        /* With xhat = (x - mean) * rstd and g = weight * dout (the gradient at xhat), the mean and the
         * variance both depend on every x of the row, which gives the two correction terms:
         *     dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) */
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * C))
        for (int n = 0; n < N; n++) {
            const float *restrict x = inp + (size_t)n * C;
            const float *restrict dy = dout + (size_t)n * C;
            float *restrict dx = dinp + (size_t)n * C;
            float m = mean[n], s = rstd[n];
            float g_sum = 0.0f, g_xhat_sum = 0.0f;
#pragma omp simd reduction(+ : g_sum, g_xhat_sum)
            for (int c = 0; c < C; c++) {
                float g = weight[c] * dy[c];
                g_sum += g;
                g_xhat_sum += g * (x[c] - m) * s;
            }
            float g_mean = g_sum / C, g_xhat_mean = g_xhat_sum / C;
#pragma omp simd
            for (int c = 0; c < C; c++) {
                float xhat = (x[c] - m) * s;
                dx[c] += s * (weight[c] * dy[c] - g_mean - xhat * g_xhat_mean);
            }
        }
    }
    if (dweight || dbias) {
#pragma omp parallel if (ops_worth_threads((long)N * C))
        {
            int c0, c1;
            ops_thread_range(C, OPS_SIMD_FLOATS, &c0, &c1);
            for (int n = 0; n < N; n++) {
                const float *restrict x = inp + (size_t)n * C;
                const float *restrict dy = dout + (size_t)n * C;
                float m = mean[n], s = rstd[n];
                if (dweight) {
#pragma omp simd
                    for (int c = c0; c < c1; c++) dweight[c] += dy[c] * (x[c] - m) * s;
                }
                if (dbias) {
#pragma omp simd
                    for (int c = c0; c < c1; c++) dbias[c] += dy[c];
                }
            }
        }
    }
}
