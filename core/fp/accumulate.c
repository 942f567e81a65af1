/* accumulate.c: running sums rounded to a format (plain and Kahan), their errors, and the dynamic-range probe (lab 06). */
#include "fp/accumulate.h"

#include "base/error.h"
#include "base/lab.h"

#include <math.h>
#include <stdbool.h>

float fp_round_to(const fp_format *f, float x) {
    if (f == &FP_FP32) return x;
    return fp_decode(f, fp_encode(f, x, FP_ROUND_NEAREST_EVEN, 0, 0));
}

/* Why the adds below are written in fp32 and then rounded to f: the exact sum of two values of a format with
 * at most 11 significant bits fits in fp32 whenever it can be near a rounding tie of f (the smaller addend is
 * then at least about half a spacing of f at the larger one, so the exact sum has at most ~22 significant
 * bits); when it does not fit, the smaller addend is far below half a spacing of f and fp32's rounding cannot
 * move the result across a midpoint of f. So round_f(fp32 add) is the correctly rounded add in f. For f =
 * fp32 the add is fp32's own. */

float fp_sum_rounded(const fp_format *f, const float *x, size_t n) {
    float sum = 0.0f;
    /* LAB 06 BEGIN rounded running sum: every addend and every partial sum is a value of the format */
    /* An accumulator of f holds only values of f, so after each add the sum is rounded back to f: a sum that
     * is 2^p times its addend (p significant bits) no longer moves. */
    for (size_t i = 0; i < n; i++) sum = fp_round_to(f, sum + fp_round_to(f, x[i]));
    /* LAB 06 END */
    return sum;
}

float fp_sum_kahan(const fp_format *f, const float *x, size_t n) {
    float sum = 0.0f;
    /* LAB 06 BEGIN Kahan-compensated sum in the format: each add's lost low part goes into the next addend */
    /* t = sum + y loses the low bits of y; (t - sum) is what was really added (exact: t and sum are close),
     * and (t - sum) - y is minus what was lost. Subtracting it from the next addend puts it back. Every
     * operation is rounded to f, as it would be on hardware that computes in f. */
    float compensation = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float y = fp_round_to(f, fp_round_to(f, x[i]) - compensation);
        float t = fp_round_to(f, sum + y);
        compensation = fp_round_to(f, fp_round_to(f, t - sum) - y);
        sum = t;
    }
    /* LAB 06 END */
    return sum;
}

float fp_sum_fp32_accumulator(const fp_format *f, const float *x, size_t n) {
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) sum += fp_round_to(f, x[i]);
    return sum;
}

static const char *const METHOD_NAMES[FP_SUM_NMETHODS] = {"rounded", "kahan", "fp32-acc"};

const char *fp_sum_method_name(fp_sum_method m) { return (unsigned)m < FP_SUM_NMETHODS ? METHOD_NAMES[m] : "?"; }

fp_sum_report fp_sum_measure(const fp_format *f, fp_sum_method method, const float *x, size_t n) {
    MP_ASSERT((unsigned)method < FP_SUM_NMETHODS, "sum method %d", (int)method);
    fp_sum_report r = {0};
    switch (method) {
    case FP_SUM_ROUNDED: r.result = fp_sum_rounded(f, x, n); break;
    case FP_SUM_KAHAN: r.result = fp_sum_kahan(f, x, n); break;
    default: r.result = fp_sum_fp32_accumulator(f, x, n); break;
    }
    for (size_t i = 0; i < n; i++) {
        r.exact += x[i];
        r.exact_in_f += fp_round_to(f, x[i]);
    }
    r.rel_error = r.exact != 0 ? fabs(r.result - r.exact) / fabs(r.exact) : fabs(r.result);
    return r;
}

/* ------------------------------------------------------------------ the range probe */

fp_range fp_range_probe(const fp_format *f) {
    fp_range r = {0};
    double top_mantissa = 1.0; /* the significand of max, 1.m in [1, 2) */
    /* LAB 06 BEGIN range probe: the format's binades of normals and subnormals, from its fields */
    /* Exponent fields 1 .. 2^ebits - 1 are normals, except that IEEE formats keep the all-ones field for inf
     * and NaN; FN formats (e4m3) keep only S.1..1.1..1 for NaN, so their top field holds numbers up to mantissa
     * 1..10 (with no mantissa bits there is nothing left in it); finite-only formats use every pattern. A
     * field E means binade E - bias, and the subnormals (field 0) are m * 2^(1-bias-mbits) for m < 2^mbits:
     * one binade per mantissa bit below the smallest normal. */
    int top_field = (1 << f->ebits) - 1;
    bool top_field_reserved = f->specials == FP_SPECIALS_IEEE || (f->specials == FP_SPECIALS_FN && f->mbits == 0);
    if (top_field_reserved) top_field -= 1;
    r.top_binade = top_field - f->bias;
    r.min_normal_binade = 1 - f->bias;
    r.min_subnormal_binade = 1 - f->bias - f->mbits;
    r.normal_binades = r.top_binade - r.min_normal_binade + 1;
    r.subnormal_binades = f->mbits;
    /* the largest significand: all mantissa bits set, one less in an FN format's top field (all ones is NaN) */
    int top_units = (1 << f->mbits) - 1 - (f->specials == FP_SPECIALS_FN && !top_field_reserved ? 1 : 0);
    top_mantissa = 1.0 + ldexp(top_units, -f->mbits);
    /* LAB 06 END */
    r.max = ldexp(top_mantissa, r.top_binade);
    r.min_normal = ldexp(1.0, r.min_normal_binade);
    r.min_subnormal = ldexp(1.0, r.min_subnormal_binade);
    r.decades = log10(r.max / r.min_subnormal);
    return r;
}

void fp_range_count(const fp_format *f, const float *x, size_t n, float scale, fp_range_counts *c) {
    c->count += n;
    /* LAB 06 BEGIN classify each value against the format: kept (zero, normal, subnormal), flushed or overflowed */
    /* Whether f keeps a value is decided by rounding it, not by comparing it with max or the smallest
     * subnormal: 1.5 * 2^-25 is below fp16's smallest subnormal but rounds up to it, 65510 is above 65504 and
     * rounds down to it. So round (nearest even, no saturation) and look at what came out. */
    for (size_t i = 0; i < n; i++) {
        float v = x[i] * scale;
        if (!isfinite(v)) {
            c->nonfinite++;
            continue;
        }
        if (v == 0.0f) {
            c->zero++;
            continue;
        }
        switch (fp_classify_bits(f, fp_encode(f, v, FP_ROUND_NEAREST_EVEN, 0, 0))) {
        case FP_CLASS_ZERO: c->flushed++; break;
        case FP_CLASS_SUBNORMAL: c->subnormal++; break;
        case FP_CLASS_NORMAL: c->normal++; break;
        default: c->overflow++; break; /* inf, or NaN for e4m3, which has no inf */
        }
    }
    /* LAB 06 END */
}

double fp_range_kept_share(const fp_range_counts *c) {
    uint64_t finite = c->count - c->nonfinite;
    if (finite == 0) return 1.0;
    return 1.0 - (double)(c->flushed + c->overflow) / (double)finite;
}
