/* scale_choice.h: a static loss scale read off a gradient exponent histogram: the largest power of two that fits. */
#ifndef MIXPAR_AMP_SCALE_CHOICE_H
#define MIXPAR_AMP_SCALE_CHOICE_H

/* A static loss scale (静态损失缩放) is one number S for the whole run (DeepSpeed "loss_scale": S, mixpar
 * precision.loss_scaler "static"). It has to lift the small gradients out of fp16's flush zone without
 * pushing the largest ones past 65504. The exponent histogram of the gradients (fp/hist.h) shows both ends
 * at once: S = 2^k moves every binade up by k, exactly, so the choice is arithmetic on binade numbers:
 *
 *     top     = the histogram's highest non-empty binade (the largest |g| is in [2^top, 2^(top+1)))
 *     fmt_top = floor(log2 max) of the format (fp16: 15, since 65504 = 1.999 * 2^15)
 *     k       = fmt_top - margin - top       the largest k with top + k <= fmt_top - margin
 *
 * With margin = 1 the largest scaled gradient stays below 2^fmt_top = 32768, so nothing can overflow even in
 * the worst case (a value just under 2^(top+1)); margin = 0 allows the top binade to reach fp16's own top
 * binade, where values from 65520 up would overflow. Each extra binade of margin is headroom for gradients
 * that grow later in training: a static scale is chosen once and never backs off.
 *
 *     fp_hist h;
 *     fp_hist_clear(&h);
 *     fp_hist_add(&h, grads, n, 1.0f);                        // unscaled fp32 gradients of a few steps
 *     amp_scale_choice c = amp_scale_choose(&h, &FP_FP16, 1);
 *     // c.scale = 2^c.log2_scale; c.flushed: values that flush even at that scale
 */

#include <stdbool.h>
#include <stdint.h>

#include "fp/format.h"
#include "fp/hist.h"

enum {
    /* The scale is an fp32 normal power of two, as a loss scaler's is: 2^-126 .. 2^127. */
    AMP_SCALE_MIN_LOG2 = -126,
    AMP_SCALE_MAX_LOG2 = 127,
};

typedef struct {
    int log2_scale;      /* k: the chosen scale is 2^k */
    float scale;         /* 2^k */
    bool empty;          /* no finite nonzero value in the histogram: nothing to go by, k = 0 */
    bool clamped;        /* k was limited to [AMP_SCALE_MIN_LOG2, AMP_SCALE_MAX_LOG2] */
    int top_binade;      /* the histogram's highest non-empty binade (unscaled); 0 when empty */
    int top_after;       /* top_binade + k: where the largest values land in the format */
    uint64_t nonzero;    /* finite nonzero values in the histogram */
    uint64_t flushed;    /* of them, in binades that still round to 0 in the format after scaling by 2^k */
} amp_scale_choice;

/* floor(log2 max) of a format: the binade of its largest finite value (fp16 15, bf16 127, e4m3 8, e5m2 15). */
int amp_format_top_binade(const fp_format *f);

/* The largest power-of-two scale that keeps the histogram's top binade at least margin binades below the
 * format's top binade (see above), clamped to an fp32 power of two. h holds unscaled values (fp_hist_add
 * with scale 1). margin >= 0 (margin < 0 stops with exit 2: it would aim past the format's largest binade). */
amp_scale_choice amp_scale_choose(const fp_hist *h, const fp_format *f, int margin);

/* Values of h in binades that flush to 0 in f once scaled by 2^log2_scale: binade b flushes entirely when
 * b + k <= log2(min subnormal) - 2 (every value there is below half the smallest subnormal); the binade just
 * above loses only a value exactly at the tie, which a histogram cannot see, so it is counted as kept. */
uint64_t amp_scale_flushed(const fp_hist *h, const fp_format *f, int log2_scale);

#endif
