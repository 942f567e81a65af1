/* norm_precision.h: layer norm statistics with the arithmetic in a chosen format: why they stay fp32 (lab 25). */
#ifndef MIXPAR_OPS_NORM_PRECISION_H
#define MIXPAR_OPS_NORM_PRECISION_H

/* Every mixed-precision recipe keeps the statistics of a normalisation (mean and variance, or the mean
 * square of RMSNorm) in fp32, even where the norm's input and output are fp16 or bf16 (amp/policy.h: the
 * norm_stats class). This file computes them with every operation rounded to another format, to see
 * what goes wrong. Two ways to compute them over the n values of one row (x_i = x[i] rounded to the
 * format first, as an activation stored in it; r() rounds a result to the format, nearest even, overflow
 * to inf; the loops run i = 0, 1, ..., n-1 in that order):
 *
 *   two-pass (LayerNorm kernels: llm.c, apex, PyTorch):
 *       s = 0;  s = r(s + x_i)                        mean = r(s / n)
 *       q = 0;  d = r(x_i - mean);  q = r(q + r(d * d))       var = r(q / n)
 *   one-pass (the textbook shortcut var = E[x^2] - E[x]^2, sum and sum of squares in one sweep):
 *       s = 0, q = 0;  s = r(s + x_i);  q = r(q + r(x_i * x_i))
 *       mean = r(s / n);  var = r(r(q / n) - r(mean * mean))
 *
 * What breaks, for activations with a large mean M and a small spread sigma (a residual stream, or a
 * channel with an outlier: both common in trained transformers):
 *   - range: the running sum reaches n*M; in fp16 that passes 65504 at n*M > 65504 (768 channels of mean
 *     86), and the sum of squares at n*M^2 > 65504 (mean 9.3): the mean or the variance becomes inf/NaN;
 *   - cancellation: the one-pass variance subtracts two numbers near M^2 that agree in their leading
 *     bits; with p significant bits the difference is lost once sigma^2 < M^2 * 2^-p, so it comes out
 *     0, negative (rstd NaN) or noise: in fp16 (p = 11) at M/sigma of about 45, in fp32 (p = 24) at
 *     about 4000;
 *   - rounding of the sum: each add to a running sum of size S rounds by up to ulp(S)/2, so even the
 *     two-pass mean drifts in a 16-bit format, and the variance around a wrong mean is too large by
 *     (mean error)^2.
 * Two passes in fp32 avoid all three for any realistic activation; that is what layernorm_forward does
 * (in double, even). */

#include <stddef.h>

#include "fp/format.h"

typedef enum { NORM_TWO_PASS, NORM_ONE_PASS, NORM_NMETHODS } norm_method;

typedef struct {
    float mean; /* as the format computed it */
    float var;  /* the biased variance (LayerNorm's), as computed: may come out negative, inf or NaN */
    float rstd; /* 1 / sqrt(var + eps) in fp32, from that var: NaN when var + eps < 0 */
} norm_stats;

/* x rounded to fmt (nearest even, overflow to inf, NaN stays NaN), as an fp32 number. fmt = &FP_FP32
 * gives x: fp32 arithmetic already rounds every result to fp32. */
float norm_round(const fp_format *fmt, float x);

/* The statistics of x[0..n) (n >= 1) computed as above with every operation rounded to fmt. */
void norm_stats_in_format(const float *x, size_t n, const fp_format *fmt, norm_method method, float eps,
                          norm_stats *out);

const char *norm_method_name(norm_method method); /* "two-pass", "one-pass" */

#endif
