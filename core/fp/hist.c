/* hist.c: exponent histograms: binade counts, zeros, non-finite, and per-format subnormal/underflow/overflow counts. */
#include "fp/hist.h"

#include "fp/half.h"

#include <pthread.h>
#include <string.h>

static const fp_format *const target_formats[FP_HIST_NTARGETS] = {&FP_FP16, &FP_BF16, &FP_E4M3, &FP_E5M2, &FP_TF32};

/* Rounding to nearest is monotone in |x|, so each loss is a range of fp32 magnitudes (bit patterns of
 * non-negative floats sort like their values). Per target:
 *   |x| bits <= zero_max          -> rounds to 0          (underflow, when x != 0)
 *   zero_max < bits < normal_min  -> a nonzero subnormal
 *   bits >= overflow_min          -> past max             (overflow, when finite)
 * The thresholds are found once by bisection with the format engine itself, so they agree with
 * fp_encode by construction (ties included). */
typedef struct {
    uint32_t zero_max, normal_min, overflow_min;
} thresholds;

static thresholds target_thresholds[FP_HIST_NTARGETS];
static pthread_once_t thresholds_once = PTHREAD_ONCE_INIT;

typedef int (*magnitude_test)(const fp_format *f, uint32_t encoded);
static int is_nonzero(const fp_format *f, uint32_t encoded) { return fp_classify_bits(f, encoded) != FP_CLASS_ZERO; }
static int is_normal_or_more(const fp_format *f, uint32_t encoded) {
    fp_class c = fp_classify_bits(f, encoded);
    return c == FP_CLASS_NORMAL || c == FP_CLASS_INF || c == FP_CLASS_NAN;
}
static int is_overflow(const fp_format *f, uint32_t encoded) {
    fp_class c = fp_classify_bits(f, encoded);
    return c == FP_CLASS_INF || c == FP_CLASS_NAN;
}

/* The smallest magnitude bits in [0, 0x7f800000] whose encoding passes `test` (0x7f800000 if none
 * finite does: +inf always rounds past max). */
static uint32_t first_magnitude(const fp_format *f, magnitude_test test) {
    uint32_t lo = 0, hi = 0x7f800000u;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (test(f, fp_encode(f, fp_float_from_bits(mid), FP_ROUND_NEAREST_EVEN, 0, 0)))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static void compute_thresholds(void) {
    for (int t = 0; t < FP_HIST_NTARGETS; t++) {
        const fp_format *f = target_formats[t];
        target_thresholds[t].zero_max = first_magnitude(f, is_nonzero) - 1u;
        target_thresholds[t].normal_min = first_magnitude(f, is_normal_or_more);
        target_thresholds[t].overflow_min = first_magnitude(f, is_overflow);
    }
}

void fp_hist_clear(fp_hist *h) { memset(h, 0, sizeof *h); }

int fp_hist_binade(float v) {
    uint32_t a = fp_float_bits(v) & 0x7fffffffu;
    if (a == 0 || a >= 0x7f800000u) return FP_HIST_MIN_BINADE - 1;
    uint32_t exponent_field = a >> 23;
    if (exponent_field) return (int)exponent_field - 127;
    /* fp32 subnormal: a * 2^-149, so the binade is the leading bit's position - 149 */
    return (31 - __builtin_clz(a)) - 149;
}

void fp_hist_add(fp_hist *h, const float *x, size_t n, float scale) {
    pthread_once(&thresholds_once, compute_thresholds);
    thresholds th[FP_HIST_NTARGETS];
    memcpy(th, target_thresholds, sizeof th);
    h->count += n;
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * scale;
        uint32_t a = fp_float_bits(v) & 0x7fffffffu;
        if (a >= 0x7f800000u) {
            if (a == 0x7f800000u)
                h->infs++;
            else
                h->nans++;
            continue;
        }
        if (a == 0) {
            h->zeros++;
            continue;
        }
        h->bins[fp_hist_binade(v) - FP_HIST_MIN_BINADE]++;
        for (int t = 0; t < FP_HIST_NTARGETS; t++) {
            if (a <= th[t].zero_max)
                h->target[t].underflow++;
            else if (a < th[t].normal_min)
                h->target[t].subnormal++;
            else if (a >= th[t].overflow_min)
                h->target[t].overflow++;
        }
    }
}

void fp_hist_merge(fp_hist *into, const fp_hist *from) {
    into->count += from->count;
    into->zeros += from->zeros;
    into->infs += from->infs;
    into->nans += from->nans;
    for (int b = 0; b < FP_HIST_NBINS; b++) into->bins[b] += from->bins[b];
    for (int t = 0; t < FP_HIST_NTARGETS; t++) {
        into->target[t].subnormal += from->target[t].subnormal;
        into->target[t].underflow += from->target[t].underflow;
        into->target[t].overflow += from->target[t].overflow;
    }
}

uint64_t fp_hist_bin(const fp_hist *h, int binade) {
    if (binade < FP_HIST_MIN_BINADE || binade > FP_HIST_MAX_BINADE) return 0;
    return h->bins[binade - FP_HIST_MIN_BINADE];
}

int fp_hist_range(const fp_hist *h, int *lowest, int *highest) {
    int lo = -1, hi = -1;
    for (int b = 0; b < FP_HIST_NBINS; b++)
        if (h->bins[b]) {
            if (lo < 0) lo = b;
            hi = b;
        }
    if (lo < 0) return 0;
    *lowest = lo + FP_HIST_MIN_BINADE;
    *highest = hi + FP_HIST_MIN_BINADE;
    return 1;
}

uint64_t fp_hist_nonfinite(const fp_hist *h) { return h->infs + h->nans; }

const fp_format *fp_hist_target_format(fp_hist_target t) {
    return (unsigned)t < FP_HIST_NTARGETS ? target_formats[t] : NULL;
}

const char *fp_hist_target_name(fp_hist_target t) {
    return (unsigned)t < FP_HIST_NTARGETS ? target_formats[t]->name : "?";
}
