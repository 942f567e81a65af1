/* layernorm.h: layer normalisation over channels (GPT-2), forward and backward. */
#ifndef MIXPAR_OPS_LAYERNORM_H
#define MIXPAR_OPS_LAYERNORM_H

/* GPT-2's epsilon, added to the variance before the square root. */
#define LAYERNORM_EPS 1e-5f

/* For each of the N rows of C channels:
 *     mean = sum(x) / C,  var = sum((x - mean)^2) / C,  rstd = 1 / sqrt(var + eps)
 *     out  = (x - mean) * rstd * weight + bias
 * Sums run in double and the variance is taken around the mean (two passes), so a row with a large
 * mean (1e4 with unit spread) keeps its precision; the naive E[x^2] - E[x]^2 would lose all of it.
 * mean and rstd (N floats each) are saved for backward; either may be NULL at inference.
 *
 * out (N,C); mean (N); rstd (N); inp (N,C); weight (C); bias (C). */
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                       const float *bias, int N, int C);

/* dinp (N,C) += ..., dweight (C) += sum_n dout * xhat, dbias (C) += sum_n dout, where xhat = (x - mean) * rstd.
 * Any of dinp, dweight, dbias may be NULL. Rows are split over threads for dinp; channels are split over
 * threads for dweight and dbias, so the result does not depend on the thread count. */
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                        const float *weight, const float *mean, const float *rstd, int N, int C);

#endif
