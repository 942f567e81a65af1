/* rmsnorm.h: root-mean-square normalisation (LLaMA), forward and backward. */
#ifndef MIXPAR_OPS_RMSNORM_H
#define MIXPAR_OPS_RMSNORM_H

/* For each of the N rows of C channels:
 *     rstd = 1 / sqrt(sum(x^2) / C + eps),   out = x * rstd * weight
 * No mean is subtracted and there is no bias. LLaMA uses eps = 1e-5 (LLaMA 2) or 1e-6 (LLaMA 1).
 * The sum of squares runs in double. rstd (N) is saved for backward; it may be NULL at inference.
 *
 * out (N,C); rstd (N); inp (N,C); weight (C). */
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps);

/* dinp (N,C) += rstd * (g - xhat * mean(g * xhat)) with xhat = x * rstd and g = weight * dout;
 * dweight (C) += sum_n dout * xhat. Either may be NULL. Thread-count independent, as layernorm. */
void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C);

#endif
