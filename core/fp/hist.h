/* hist.h: exponent histograms of tensors, and how many values each low-precision format would lose. */
#ifndef MIXPAR_FP_HIST_H
#define MIXPAR_FP_HIST_H

#include "fp/format.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A value's binade is floor(log2|v|): 1.5 is in binade 0, 0.1 in binade -4, 65504 in binade 15.
 * fp32 spans binades -149 (its smallest subnormal, 2^-149) to 127. */
enum {
    FP_HIST_MIN_BINADE = -149,
    FP_HIST_MAX_BINADE = 127,
    FP_HIST_NBINS = FP_HIST_MAX_BINADE - FP_HIST_MIN_BINADE + 1, /* 277 */
};

/* The formats whose losses a histogram counts, in this order. */
typedef enum { FP_HIST_FP16, FP_HIST_BF16, FP_HIST_E4M3, FP_HIST_E5M2, FP_HIST_TF32, FP_HIST_NTARGETS } fp_hist_target;

/* What rounding to a target format (to nearest even, not saturating) would do to the values seen. */
typedef struct {
    uint64_t subnormal; /* nonzero values that become a nonzero subnormal of the target (precision lost) */
    uint64_t underflow; /* nonzero values that become +-0 in the target (the value is lost) */
    uint64_t overflow;  /* finite values that round past the target's max (inf, or NaN for e4m3) */
} fp_hist_losses;

typedef struct {
    uint64_t count;                          /* values seen */
    uint64_t zeros;                          /* +-0 */
    uint64_t infs, nans;                     /* non-finite (after scaling: x*scale can overflow fp32) */
    uint64_t bins[FP_HIST_NBINS];            /* bins[b - FP_HIST_MIN_BINADE]: finite nonzero values in binade b */
    fp_hist_losses target[FP_HIST_NTARGETS]; /* per format, indexed by fp_hist_target */
} fp_hist;

/* Start empty. */
void fp_hist_clear(fp_hist *h);
/* Add the n values x[i] * scale (the fp32 product, as a loss scaler forms it; scale = 1 for x itself).
 * Nothing is allocated, so the gradients scaled by a candidate loss scale can be examined in place:
 *
 *     fp_hist h;
 *     fp_hist_clear(&h);
 *     fp_hist_add(&h, grad, n, 65536.0f);           // what fp16 would see under loss scale 2^16
 *     if (h.target[FP_HIST_FP16].overflow) ...      // that scale would overflow: back off
 *     double lost = (double)h.target[FP_HIST_FP16].underflow / h.count;
 */
void fp_hist_add(fp_hist *h, const float *x, size_t n, float scale);
/* into += from (histograms of shards, threads or ranks add up). */
void fp_hist_merge(fp_hist *into, const fp_hist *from);

/* floor(log2|v|) for finite nonzero v, in [FP_HIST_MIN_BINADE, FP_HIST_MAX_BINADE]; for 0 or non-finite
 * v it returns FP_HIST_MIN_BINADE - 1. Exact (from the bits, no log2). */
int fp_hist_binade(float v);
/* Count in binade b (0 outside the range). */
uint64_t fp_hist_bin(const fp_hist *h, int binade);
/* The lowest and highest non-empty binades; returns 0 (and leaves them alone) when no finite nonzero value. */
int fp_hist_range(const fp_hist *h, int *lowest, int *highest);
uint64_t fp_hist_nonfinite(const fp_hist *h); /* infs + nans */

const fp_format *fp_hist_target_format(fp_hist_target t);
const char *fp_hist_target_name(fp_hist_target t); /* the format's name: "fp16", ... */

#ifdef __cplusplus
}
#endif

#endif
