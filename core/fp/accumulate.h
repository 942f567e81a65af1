/* accumulate.h: rounding error that piles up in a running sum kept in a low-precision format, and the dynamic-range probe. */
#ifndef MIXPAR_FP_ACCUMULATE_H
#define MIXPAR_FP_ACCUMULATE_H

/* Two ways a 16-bit format fails, measured (lab 06).
 *
 * Precision (精度): a running sum kept in a format with p significant bits (fp32 24, fp16 11, bf16 8) is
 * rounded after every add. Once the sum is 2^p times larger than the addend, the addend is below half the
 * sum's spacing and the add changes nothing: the sum stalls ("swamping", 大数吃小数). bf16 adding 1.0 stalls
 * at 256 (spacing 2 there, and 256 + 1 is a tie that goes back to 256); fp16 adding 0.01 stalls at 32. Kahan's
 * compensated sum (Kahan 求和) carries each add's rounding error into the next add and keeps the error near
 * one rounding of the result, in the same format.
 *
 * Range (动态范围): a format holds normals between 2^(1-bias) and max, subnormals below that down to
 * 2^(1-bias-mbits), and nothing else: smaller values flush to 0, larger ones overflow. fp16 spans 40 binades
 * (30 normal, 10 subnormal), bf16 261 (254 + 7), like fp32's 277 (254 + 23). The probe counts, for a tensor,
 * how many values a format keeps.
 *
 *     float s = fp_sum_rounded(&FP_BF16, x, n);        // the bf16 running sum
 *     fp_sum_report r = fp_sum_measure(&FP_BF16, FP_SUM_KAHAN, x, n);
 *     fp_range_counts c = {0};
 *     fp_range_count(&FP_FP16, grads, n, 1.0f, &c);   // c.flushed: gradients fp16 turns into 0
 */

#include <stddef.h>
#include <stdint.h>

#include "fp/format.h"

/* x rounded to f (nearest even, overflow to inf) and decoded: the value of f that x becomes. fp32: x itself. */
float fp_round_to(const fp_format *f, float x);

/* The sum of x[0..n) as a tensor of f summed into an accumulator of f: every addend is a value of f
 * (x[i] rounded to f) and the running sum is rounded to f after every add, in index order. */
float fp_sum_rounded(const fp_format *f, const float *x, size_t n);
/* The same sum with Kahan's compensation, every operation rounded to f: the compensation c (the low part
 * the last add lost) is subtracted from the next addend before it is added. */
float fp_sum_kahan(const fp_format *f, const float *x, size_t n);

/* The same values of f summed into an fp32 accumulator: what tensor cores and every AMP reduction do (bf16 or
 * fp16 inputs, fp32 accumulation). Only the addends carry f's rounding. */
float fp_sum_fp32_accumulator(const fp_format *f, const float *x, size_t n);

typedef enum { FP_SUM_ROUNDED, FP_SUM_KAHAN, FP_SUM_FP32_ACCUMULATOR, FP_SUM_NMETHODS } fp_sum_method;
const char *fp_sum_method_name(fp_sum_method m); /* "rounded", "kahan", "fp32-acc" */

typedef struct {
    double result;       /* the sum f ends with */
    double exact;        /* the sum of the addends as given (fp32 values), in double: what was wanted */
    double exact_in_f;   /* the sum of the addends rounded to f, in double: the best a sum of f values can do */
    double rel_error;    /* |result - exact| / |exact| (0 when both are 0) */
} fp_sum_report;

/* Sums with the method and compares with double sums (the double sum of up to 2^29 values of fp32 is exact
 * to far below any error shown here). */
fp_sum_report fp_sum_measure(const fp_format *f, fp_sum_method method, const float *x, size_t n);

/* ------------------------------------------------------------------ the range probe */

/* Where a format's values sit, in binades (a binade is [2^e, 2^(e+1))). */
typedef struct {
    int top_binade;            /* floor(log2 max): fp16 15, bf16 127, e4m3 8 */
    int min_normal_binade;     /* 1 - bias: fp16 -14, bf16 -126 */
    int min_subnormal_binade;  /* 1 - bias - mbits: fp16 -24, bf16 -133 (the smallest subnormal's binade) */
    int normal_binades;        /* top_binade - min_normal_binade + 1: fp16 30, bf16 254 */
    int subnormal_binades;     /* binades holding subnormals: mbits (fp16 10, bf16 7) */
    double max, min_normal, min_subnormal; /* 2^.. values, from the binades above and the top mantissa */
    double decades;            /* log10(max / min_subnormal): the dynamic range in powers of ten */
} fp_range;

/* The probe of f, from its fields (ebits, mbits, bias, specials) alone. */
fp_range fp_range_probe(const fp_format *f);

/* What rounding to f (nearest even, not saturating) does to the values x[i] * scale. Counts add up over calls
 * (start from a zeroed struct). */
typedef struct {
    uint64_t count;            /* values seen */
    uint64_t zero;             /* +-0 in the input: every format keeps them */
    uint64_t nonfinite;        /* inf or NaN in the input (or x*scale overflowing fp32): not counted below */
    uint64_t normal;           /* finite nonzero, round to a normal of f */
    uint64_t subnormal;        /* finite nonzero, round to a nonzero subnormal (kept, with fewer bits) */
    uint64_t flushed;          /* finite nonzero, round to +-0: lost */
    uint64_t overflow;         /* finite, round past max (inf, or NaN in e4m3): lost */
} fp_range_counts;

void fp_range_count(const fp_format *f, const float *x, size_t n, float scale, fp_range_counts *c);
/* The share of the finite values that f keeps (zero, subnormal or normal): 1 - (flushed + overflow) / finite;
 * 1 when there is no finite value. */
double fp_range_kept_share(const fp_range_counts *c);

#endif
