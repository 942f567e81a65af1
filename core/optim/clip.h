/* clip.h: the global L2 norm of the gradients over many spans, and clipping them to a maximum norm.
 *
 * The norm is split in two so that sharded training (ZeRO, FSDP) can reduce across ranks in between:
 *     double local = 0;
 *     for each span this rank holds: local += clip_sum_squares(span, n);
 *     total = allreduce_sum(local);                     (one double per rank)
 *     double norm = clip_norm_finish(total);
 *     float scale = clip_scale_for(norm, max_norm);     (1 when no clipping is needed)
 *     if (scale != 1) for each span: clip_scale(span, n, scale);
 * Squares are summed in double: a float sum over 10^8 values loses the small ones, and a double sum of
 * float squares cannot overflow (1e9 * FLT_MAX^2 < DBL_MAX). So the norm is inf or NaN exactly when some
 * gradient is inf or NaN: clip_norm_finish's result doubles as the overflow check of AMP.
 *
 * Clipping follows torch.nn.utils.clip_grad_norm_: scale = max_norm / (norm + 1e-6), applied when
 * norm > max_norm. Two deliberate differences: PyTorch also multiplies by min(1, scale) when norm <= max_norm
 * (a factor just below 1 when norm is within 1e-6 of max_norm); here nothing changes at or under the limit.
 * And on a non-finite norm PyTorch scales by 0 or NaN, while here the gradients are left alone and the
 * caller, told by the non-finite norm, skips the step.
 */
#ifndef MIXPAR_OPTIM_CLIP_H
#define MIXPAR_OPTIM_CLIP_H

#include <stdbool.h>
#include <stddef.h>

/* A span of gradients (a tensor's, or a shard's). */
typedef struct {
    float *data;   /* (n) */
    size_t n;
} clip_span;

/* Sum of x[i]^2 in double. Deterministic: the bits of the result do not depend on the number of threads. */
double clip_sum_squares(const float *x, size_t n);
/* sqrt of a (reduced) sum of squares. */
double clip_norm_finish(double sum_squares);
/* false for inf and NaN norms: some gradient overflowed or is NaN. */
bool clip_norm_is_finite(double norm);
/* max_norm / (norm + 1e-6) when norm > max_norm, else 1; 1 for a non-finite norm (nothing to clip; skip). */
float clip_scale_for(double norm, double max_norm);
/* x[i] *= scale. */
void clip_scale(float *x, size_t n, float scale);

/* The global norm over spans (no reduction across ranks). */
double clip_global_norm(const clip_span *spans, int nspans);
/* Global norm, then clipping to max_norm (max_norm <= 0: measure only). Returns the norm before clipping;
 * check it with clip_norm_is_finite. */
double clip_grad_norm(const clip_span *spans, int nspans, double max_norm);

#endif
