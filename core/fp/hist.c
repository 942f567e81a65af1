/* hist.c: exponent histograms: binade counts, zeros, non-finite, and per-format subnormal/underflow/overflow counts. */
#include "fp/hist.h"

#include "base/lab.h"
#include "fp/half.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

static const fp_format *const target_formats[FP_HIST_NTARGETS] = {&FP_FP16, &FP_BF16, &FP_E4M3, &FP_E5M2, &FP_TF32};

/* Rounding to nearest is monotone in |x|, so each loss is a range of fp32 magnitudes (bit patterns of
 * non-negative floats sort like their values). Per target:
 *   |x| bits <= zero_max          -> rounds to 0          (underflow, when x != 0)
 *   zero_max < bits < normal_min  -> a nonzero subnormal
 *   bits >= overflow_min          -> past max             (overflow, when finite)
 * The three edges follow from the format's parameters and the tie rule (lab 04); the lab's tests find each
 * edge again by bisection with fp_encode, for every target. */
typedef struct {
    uint32_t zero_max, normal_min, overflow_min;
} thresholds;

static thresholds target_thresholds[FP_HIST_NTARGETS];
static pthread_once_t thresholds_once = PTHREAD_ONCE_INIT;

/* The edges of f's range under round-to-nearest-even, as fp32 magnitude bit patterns. Each edge is the
 * midpoint between two neighbouring values of f, and the tie rule (to the value whose last mantissa bit is
 * 0) decides on which side the midpoint itself falls. Every midpoint here is exact in fp32 (the targets have
 * at most 11 significant bits and fp32's exponent range). */
static thresholds range_edges(const fp_format *f) {
    thresholds th = {0, 0, 0};
    /* LAB 04 BEGIN range edges of a format: what rounds to 0, what stays normal, what overflows */
    double min_subnormal = fp_min_subnormal(f); /* 2^(1-bias-mbits): the last step before 0 */
    double min_normal = fp_min_normal(f);       /* 2^(1-bias) */
    double max = fp_max(f);
    double top_spacing = fp_ulp(f, (float)max); /* 2^(floor(log2 max) - mbits) */
    /* Between 0 (even) and the smallest subnormal (mantissa ...001, odd) the midpoint is a tie that goes to 0:
     * half the smallest subnormal still flushes (fp16: 2^-25 -> 0, anything above it -> 2^-24). */
    th.zero_max = fp_float_bits((float)(min_subnormal / 2));
    /* Between the largest subnormal (mantissa all ones: odd) and the smallest normal (mantissa 0: even) the
     * tie goes up, so the midpoint itself becomes a normal. */
    th.normal_min = fp_float_bits((float)(min_normal - min_subnormal / 2));
    /* Past max the next step would be max + top_spacing, which f cannot hold: from the midpoint up, a value
     * rounds past max. At the midpoint itself the tie goes to the even neighbour: IEEE formats end in a mantissa
     * of all ones (odd), so the tie overflows (fp16: 65520 -> inf); e4m3's max S.1111.110 is even, so its tie
     * stays at 448 and overflow starts one fp32 step above 464. */
    bool max_is_even = (fp_max_bits(f) & 1u) == 0;
    th.overflow_min = fp_float_bits((float)(max + top_spacing / 2)) + (max_is_even ? 1u : 0u);
    /* LAB 04 END */
    return th;
}

static void compute_thresholds(void) {
    for (int t = 0; t < FP_HIST_NTARGETS; t++) target_thresholds[t] = range_edges(target_formats[t]);
}

void fp_hist_clear(fp_hist *h) { memset(h, 0, sizeof *h); }

int fp_hist_binade(float v) {
    uint32_t a = fp_float_bits(v) & 0x7fffffffu;
    if (a == 0 || a >= 0x7f800000u) return FP_HIST_MIN_BINADE - 1;
    /* LAB 04 BEGIN binade of a value: floor(log2|v|) from the exponent field; fp32 subnormals from the leading bit */
    /* A normal fp32 is 1.m * 2^(E-127), and 1.m is in [1, 2), so the binade is E - 127 exactly. A subnormal
     * (E = 0) is a * 2^-149 for its 23-bit mantissa a: the binade is the leading 1's position - 149. */
    uint32_t exponent_field = a >> 23;
    if (exponent_field) return (int)exponent_field - 127;
    return (31 - __builtin_clz(a)) - 149;
    /* LAB 04 END */
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
