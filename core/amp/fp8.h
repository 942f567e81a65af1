/* fp8.h: fp8 tensors with per-tensor delayed scaling (amax history), as Transformer Engine's DelayedScaling does. */
#ifndef MIXPAR_AMP_FP8_H
#define MIXPAR_AMP_FP8_H

/* fp8 has so little range (e4m3: 2^-9 .. 448; e5m2: 2^-16 .. 57344) that a tensor is multiplied by a
 * scale before the cast, chosen so that its largest magnitude (amax) lands near the format's largest
 * value, and divided by it after:
 *
 *     q = fp8(x * scale)            (saturating: beyond +-max clamps to +-max, as TE's casts do)
 *     x ~ decode(q) * scale_inv     (scale_inv = 1/scale, exact for a power of two)
 *
 * "Delayed" scaling (Transformer Engine's recipe.DelayedScaling, Micikevicius et al. 2022, "FP8 formats
 * for deep learning"): the scale used at step t comes from the amaxes recorded at earlier steps, so the
 * cast needs no extra pass over the tensor to find its amax first. Each quantize records the tensor's
 * amax into a history window; amp_fp8_update_scale (once per step, after the step's casts) computes the
 * next scale from the window:
 *
 *     amax  = max(history)              (amax_compute_algo "max", TE's default)
 *           | history[newest]           ("most_recent")
 *     scale = 2^(floor(log2(fmax / amax)) - margin)
 *
 * with fmax the format's largest value (448 or 57344) and margin a number of binades of headroom
 * (TE's default margin is 0). This is the formula of TE's first releases (`_default_sf_compute`:
 * exp = floor(log2(fp8_max / amax)) - margin; sf = 2^exp). Later releases drop the floor and use
 * scale = fmax / amax / 2^margin; the power of two is kept here because multiplying by a power of two is
 * exact: the scaling itself adds no rounding error, and x * scale * scale_inv == x unless x*scale lands
 * outside fp32. An amax of 0 or a non-finite amax keeps the previous scale (TE does the same), and the
 * exponent is clamped to [-126, 127] so that scale and 1/scale stay finite normal fp32 numbers.
 *
 * A tensor whose values grow faster than the history reacts saturates (values clamp to +-fmax; counted
 * in `saturated`); one that shrinks underflows (values below the smallest subnormal become 0; counted in
 * `underflowed`). Both are the price of the delay; the history length trades reaction speed against
 * stability (TE: amax_history_len, default 1024 in recent releases; here 16 by default, for small runs).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp/format.h"

enum { AMP_FP8_DEFAULT_HISTORY = 16, AMP_FP8_MAX_HISTORY = 4096 };

typedef enum { AMP_AMAX_MAX, AMP_AMAX_MOST_RECENT } amp_amax_algo;

typedef struct {
    const fp_format *format;   /* &FP_E4M3 (forward: weights, activations) or &FP_E5M2 (gradients) */
    int history_len;           /* 1 .. AMP_FP8_MAX_HISTORY */
    int margin;                /* binades of headroom [0] */
    amp_amax_algo algo;
    float *history;            /* (history_len) amaxes of the last casts; 0 where none yet */
    int newest;                /* index of the newest entry */
    long recorded;             /* amaxes recorded so far */
    float scale;               /* the scale the next quantize uses [1 until the first update] */
    float scale_inv;           /* 1 / scale */
    uint64_t saturated;        /* values clamped to +-fmax by the last quantize */
    uint64_t underflowed;      /* nonzero values that became 0 in the last quantize */
} amp_fp8_meta;

/* format: &FP_E4M3 or &FP_E5M2; history_len 0 means the default (16). Bad arguments stop (exit 2). */
void amp_fp8_init(amp_fp8_meta *m, const fp_format *format, int history_len, int margin, amp_amax_algo algo);
void amp_fp8_free(amp_fp8_meta *m);

/* The formula above for one amax: the scale a cast with that amax should use. `previous` is returned
 * unchanged when amax is 0 or not finite. */
float amp_fp8_scale_for_amax(float amax, double fmax, int margin, float previous);
/* The amax the next scale is computed from (max over the window, or the newest). */
float amp_fp8_history_amax(const amp_fp8_meta *m);
/* Records one amax into the window (what quantize does). */
void amp_fp8_record_amax(amp_fp8_meta *m, float amax);
/* Sets scale and scale_inv from the window. Call once per step, after the step's casts. */
void amp_fp8_update_scale(amp_fp8_meta *m);

/* The largest |x[i]| (NaN if any x[i] is NaN). */
float amp_fp8_amax(const float *x, size_t n);
/* q[i] = fp8(x[i] * m->scale), saturating; records amax(x) into the history; counts saturated and
 * underflowed values. Returns amax(x). A NaN stays NaN (e4m3: S.1111.111). */
float amp_fp8_quantize(amp_fp8_meta *m, const float *x, uint8_t *q, size_t n);
/* x[i] = decode(q[i]) * scale_inv, with the scale_inv the values were quantized with. */
void amp_fp8_dequantize(const fp_format *format, const uint8_t *q, float *x, size_t n, float scale_inv);

#endif
