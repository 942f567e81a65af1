/* batchnorm.c: BatchNorm forward and backward with fp32 statistics and SyncBN across ranks (lab 25, part D). */
#include "ops/batchnorm.h"

#include "base/error.h"
#include "base/lab.h"
#include "ops/norm_precision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *bn_alloc(int n, float value) {
    float *p = malloc((size_t)n * sizeof *p);
    MP_ASSERT(p, "out of memory for %d floats", n);
    for (int i = 0; i < n; i++) p[i] = value;
    return p;
}

void bn_init(bn_layer *bn, int channels, float momentum, float eps) {
    MP_ASSERT(channels >= 1 && momentum >= 0 && momentum <= 1 && eps >= 0, "BatchNorm of %d channels", channels);
    memset(bn, 0, sizeof *bn);
    bn->channels = channels;
    bn->momentum = momentum;
    bn->eps = eps;
    bn->stats_fmt = &FP_FP32;
    bn->gamma = bn_alloc(channels, 1);
    bn->beta = bn_alloc(channels, 0);
    bn->running_mean = bn_alloc(channels, 0);
    bn->running_var = bn_alloc(channels, 1);
    bn->mean = bn_alloc(channels, 0);
    bn->var = bn_alloc(channels, 0);
    bn->rstd = bn_alloc(channels, 0);
    bn->work = bn_alloc(2 * channels + 1, 0);
}

void bn_free(bn_layer *bn) {
    float *arrays[] = {bn->gamma, bn->beta, bn->running_mean, bn->running_var, bn->mean, bn->var, bn->rstd, bn->work};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++) free(arrays[i]);
    memset(bn, 0, sizeof *bn);
}

/* The batch's mean and variance per channel into bn->mean, bn->var and bn->count (M, all ranks' values). */
static void bn_batch_stats(bn_layer *bn, const float *x, int n, int s) {
    /* LAB 25 BEGIN batch statistics: per-channel sums in stats_fmt (fp32), two passes, allreduced over the ranks (SyncBN) */
    const int C = bn->channels;
    const fp_format *f = bn->stats_fmt;   /* &FP_FP32: norm_round(f, v) is v */
    float *sum = bn->work;                 /* [C] sums, then [C] sums of squared deviations */
    for (int c = 0; c < C; c++) sum[c] = 0;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++)
            for (int k = 0; k < s; k++) sum[c] = norm_round(f, sum[c] + x[((size_t)i * C + c) * s + k]);
    sum[C] = (float)n * (float)s;          /* this rank's count rides along: uneven batches weigh by their size */
    if (bn->comm) comm_allreduce(bn->comm, sum, sum, (size_t)C + 1, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
    bn->count = sum[C];
    for (int c = 0; c < C; c++) bn->mean[c] = norm_round(f, sum[c] / norm_round(f, (float)bn->count));
    for (int c = 0; c < C; c++) sum[c] = 0;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++)
            for (int k = 0; k < s; k++) {
                float d = norm_round(f, x[((size_t)i * C + c) * s + k] - bn->mean[c]);
                sum[c] = norm_round(f, sum[c] + norm_round(f, d * d));
            }
    if (bn->comm) comm_allreduce(bn->comm, sum, sum, (size_t)C, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
    for (int c = 0; c < C; c++) bn->var[c] = norm_round(f, sum[c] / norm_round(f, (float)bn->count));
    /* LAB 25 END */
}

void bn_forward(bn_layer *bn, const float *x, int n, int s, float *y, bool training) {
    const int C = bn->channels;
    MP_ASSERT(n >= 0 && s >= 1 && (n == 0 || (x && y)), "BatchNorm of %d x %d x %d values", n, C, s);
    const float *mean = bn->running_mean, *var = bn->running_var;
    if (training) {
        bn_batch_stats(bn, x, n, s);
        MP_ASSERT(bn->count >= 2, "BatchNorm in training needs more than 1 value per channel (got %g over all ranks)",
                  bn->count);
        /* LAB 25 BEGIN running statistics: fp32 buffers, momentum, the unbiased variance */
        const float m = bn->momentum;
        double unbias = bn->count / (bn->count - 1);
        for (int c = 0; c < C; c++) {
            bn->running_mean[c] = (1 - m) * bn->running_mean[c] + m * bn->mean[c];
            bn->running_var[c] = (1 - m) * bn->running_var[c] + m * (float)(bn->var[c] * unbias);
        }
        /* LAB 25 END */
        bn->steps++;
        mean = bn->mean;
        var = bn->var;
    }
    for (int c = 0; c < C; c++) bn->rstd[c] = 1.0f / sqrtf(var[c] + bn->eps);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++) {
            const size_t at = ((size_t)i * C + c) * s;
            const float a = bn->rstd[c] * bn->gamma[c];
            for (int k = 0; k < s; k++) y[at + k] = (x[at + k] - mean[c]) * a + bn->beta[c];
        }
}

void bn_backward(bn_layer *bn, const float *x, const float *dy, int n, int s, float *dx, float *dgamma, float *dbeta) {
    const int C = bn->channels;
    MP_ASSERT(n >= 0 && s >= 1 && bn->count >= 2 && dgamma && dbeta, "BatchNorm backward of %d x %d x %d values "
              "(after a training forward)", n, C, s);
    /* LAB 25 BEGIN backward: the per-channel sums of dy and dy * xhat, allreduced under SyncBN, then dx */
    float *sum_dy = bn->work, *sum_dy_xhat = bn->work + C; /* [C] each, contiguous: one allreduce */
    for (int c = 0; c < 2 * C; c++) bn->work[c] = 0;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++)
            for (int k = 0; k < s; k++) {
                const size_t at = ((size_t)i * C + c) * s + k;
                sum_dy[c] += dy[at];
                sum_dy_xhat[c] += dy[at] * (x[at] - bn->mean[c]) * bn->rstd[c];
            }
    for (int c = 0; c < C; c++) {
        dbeta[c] = sum_dy[c];
        dgamma[c] = sum_dy_xhat[c];
    }
    if (bn->comm) comm_allreduce(bn->comm, bn->work, bn->work, 2 * (size_t)C, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
    const float inv_m = (float)(1.0 / bn->count);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++)
            for (int k = 0; k < s; k++) {
                const size_t at = ((size_t)i * C + c) * s + k;
                const float xhat = (x[at] - bn->mean[c]) * bn->rstd[c];
                dx[at] = bn->gamma[c] * bn->rstd[c] * (dy[at] - inv_m * sum_dy[c] - xhat * inv_m * sum_dy_xhat[c]);
            }
    /* LAB 25 END */
}
