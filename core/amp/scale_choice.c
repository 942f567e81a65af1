/* scale_choice.c: choosing a static loss scale from a gradient exponent histogram (lab 04). */
#include "amp/scale_choice.h"

#include "base/error.h"
#include "base/lab.h"

#include <math.h>

int amp_format_top_binade(const fp_format *f) { return ilogb(fp_max(f)); }

uint64_t amp_scale_flushed(const fp_hist *h, const fp_format *f, int log2_scale) {
    /* fp16: the smallest subnormal is 2^-24, half of it (2^-25) is the last value that rounds to 0, so a binade
     * b with b + k <= -26 (all values < 2^-25 after scaling) flushes whole. */
    int last_flushed = ilogb(fp_min_subnormal(f)) - 2;
    uint64_t flushed = 0;
    for (int b = FP_HIST_MIN_BINADE; b <= FP_HIST_MAX_BINADE; b++)
        if (b + log2_scale <= last_flushed) flushed += fp_hist_bin(h, b);
    return flushed;
}

amp_scale_choice amp_scale_choose(const fp_hist *h, const fp_format *f, int margin) {
    if (margin < 0)
        MP_FAIL_HINT("a margin of 0 or more binades", "margin 1 keeps the largest scaled gradient below 2^15 in fp16",
                     "margin %d", margin);
    amp_scale_choice c = {.log2_scale = 0, .scale = 1.0f};
    for (int b = FP_HIST_MIN_BINADE; b <= FP_HIST_MAX_BINADE; b++) c.nonzero += fp_hist_bin(h, b);
    int lowest;
    c.empty = !fp_hist_range(h, &lowest, &c.top_binade);
    if (c.empty) return c; /* all zeros (or nothing): any scale keeps them zero; stay at 1 */
    int format_top = amp_format_top_binade(f);
    int k = 0;
    /* LAB 04 BEGIN choose a static scale: the largest 2^k that keeps the top binade margin binades below the format's */
    /* The largest gradient is below 2^(top+1); times 2^k it is below 2^(top+k+1). Asking top + k <= format_top -
     * margin leaves `margin` binades of the format unused above it. Scales are fp32 powers of two, so k is kept
     * in fp32's normal exponent range (a histogram of huge values asks for a scale below 1: that is allowed). */
    k = format_top - margin - c.top_binade;
    if (k > AMP_SCALE_MAX_LOG2) {
        k = AMP_SCALE_MAX_LOG2;
        c.clamped = true;
    } else if (k < AMP_SCALE_MIN_LOG2) {
        k = AMP_SCALE_MIN_LOG2;
        c.clamped = true;
    }
    /* LAB 04 END */
    c.log2_scale = k;
    c.scale = ldexpf(1.0f, k);
    c.top_after = c.top_binade + k;
    c.flushed = amp_scale_flushed(h, f, k);
    return c;
}
