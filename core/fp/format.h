/* format.h: the generic number-format engine: any (exponent bits, mantissa bits) format, three rounding modes. */
#ifndef MIXPAR_FP_FORMAT_H
#define MIXPAR_FP_FORMAT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    FP_ROUND_NEAREST_EVEN, /* IEEE default: nearest value, ties to the one with an even last bit */
    FP_ROUND_TOWARD_ZERO,  /* truncate the dropped bits */
    FP_ROUND_STOCHASTIC,   /* up with probability (dropped part)/(spacing): unbiased on average */
} fp_round;

/* What the all-ones exponent means. */
typedef enum {
    FP_SPECIALS_IEEE, /* all-ones exponent: mantissa 0 is +-inf, anything else NaN (fp32, fp16, bf16, e5m2) */
    FP_SPECIALS_FN,   /* "finite + NaN" (OCP e4m3): no inf; only S.1111.111 is NaN, S.1111.000-110 are numbers */
    FP_SPECIALS_NONE, /* every pattern is a finite number (the OCP MX element formats e2m1, e2m3, e3m2) */
} fp_specials;

/* A binary floating-point format: 1 sign bit, ebits exponent bits, mbits stored mantissa bits.
 * A pattern with exponent field E and mantissa field m is
 *     E == 0:  (-1)^s * m/2^mbits * 2^(1-bias)           (zero and subnormals)
 *     E >= 1:  (-1)^s * (1 + m/2^mbits) * 2^(E-bias)      (normals), except where `specials` says otherwise. */
typedef struct {
    const char *name;
    int ebits, mbits, bias;
    fp_specials specials;
} fp_format;

/*            bits  ebits mbits bias  max            min normal  min subnormal  specials
 *   fp32      32     8    23   127   3.40282347e38  2^-126      2^-149         IEEE
 *   tf32      19     8    10   127   3.40116213e38  2^-126      2^-136         IEEE  (stored right-aligned)
 *   fp16      16     5    10    15   65504          2^-14       2^-24          IEEE
 *   bf16      16     8     7   127   3.38953139e38  2^-126      2^-133         IEEE
 *   e4m3       8     4     3     7   448            2^-6        2^-9           FN   (OCP FP8 E4M3)
 *   e5m2       8     5     2    15   57344          2^-14       2^-16          IEEE (OCP FP8 E5M2) */
extern const fp_format FP_FP32, FP_TF32, FP_FP16, FP_BF16, FP_E4M3, FP_E5M2;

/* The six formats above, in that order (what `mixpar float` shows by default). */
extern const fp_format *const FP_STANDARD_FORMATS[6];
enum { FP_NSTANDARD_FORMATS = 6 };

/* Look a format up by name; NULL when the name is unknown. The pointer stays valid for the whole run.
 *   "fp32" "tf32" "fp16" "bf16" "e4m3" "e5m2"   the formats above (also "fp8_e4m3", "fp8_e5m2")
 *   "eXmY"      2 <= X <= 7, 0 <= Y <= 23: bias 2^(X-1)-1, every pattern finite, like the OCP MX element
 *               formats e2m1 (FP4: max 6), e2m3 and e3m2 (FP6: max 7.5 and 28)
 *   "e8mY"      1 <= Y <= 23: bias 127 with IEEE inf/NaN (an all-finite top binade would not fit in fp32):
 *               e8m7 is bf16's layout, e8m10 tf32's, e8m23 fp32's
 *   "eXmYieee"  2 <= X <= 8, 1 <= Y <= 23: IEEE inf/NaN at the all-ones exponent (e5m10ieee = fp16's layout)
 *   "eXmYfn"    2 <= X <= 7, 0 <= Y <= 23: no inf, NaN only S.1..1.1..1 (e4m3fn = e4m3)
 * The named formats win: "e4m3" is OCP E4M3 (fn) and "e5m2" is OCP E5M2 (IEEE). */
const fp_format *fp_format_by_name(const char *name);
/* The names fp_format_by_name accepts, for help and error messages. */
extern const char FP_FORMAT_NAMES_HELP[];

/* Round x to the format and return its bit pattern (1+ebits+mbits bits, right-aligned: the sign is bit
 * ebits+mbits). Rounding of finite values follows `mode`; results below the smallest subnormal round to
 * +-0 or to it, as the mode says.
 * Overflow (the rounded magnitude is past the largest finite value, or x is +-inf):
 *   saturate = 1:            +-max finite (inf in too); NaN stays NaN
 *   saturate = 0, RNE or SR: +-inf (IEEE), NaN (FN); finite-only formats always saturate
 *   FP_ROUND_TOWARD_ZERO:    +-max finite for finite x (rounding toward zero never passes max); +-inf stays
 *                            +-inf unless saturating (FN: NaN)
 * NaN in: IEEE: sign kept, quiet bit (top mantissa bit) set, the next mbits-1 payload bits kept (the x86
 * F16C / AVX512-BF16 rule, see fp/half.h); FN: S.1..1.1..1 with the sign kept; finite-only formats have no
 * NaN: it becomes +-max finite.
 * Stochastic rounding uses random_bits (32 uniform bits): it rounds up when random_bits < (dropped part)
 * scaled to 32 bits, so P(up) = dropped/spacing and E[fp_decode(fp_encode(x))] = x exactly whenever the
 * dropped part has at most 32 bits (x no smaller than 2^-8 of the smallest subnormal; below that the
 * probability is truncated to 32 bits). Other modes ignore random_bits.
 * fp_encode(&FP_FP16, x, FP_ROUND_NEAREST_EVEN, 0, 0) == fp16_from_float(x) for every float; same for bf16. */
uint32_t fp_encode(const fp_format *f, float x, fp_round mode, int saturate, uint32_t random_bits);
/* The value of a bit pattern (bits above the format's width are ignored). Exact: every format here fits in
 * fp32. NaNs come back quiet with their payload (IEEE) or as +-0x7fc00000 (FN). */
float fp_decode(const fp_format *f, uint32_t bits);

int fp_format_bits(const fp_format *f);        /* 1 + ebits + mbits */
uint32_t fp_max_bits(const fp_format *f);      /* the largest finite magnitude's pattern (sign 0) */
double fp_max(const fp_format *f);             /* largest finite value */
double fp_min_normal(const fp_format *f);      /* 2^(1-bias) */
double fp_min_subnormal(const fp_format *f);   /* smallest positive value, 2^(1-bias-mbits) */
double fp_epsilon(const fp_format *f);         /* 2^-mbits: spacing just above 1.0 */
/* Spacing of the format's values at |x|: 2^(max(floor(log2|x|), 1-bias) - mbits); the smallest subnormal
 * at 0; the top binade's spacing past max; NaN for non-finite x. */
double fp_ulp(const fp_format *f, float x);

typedef enum { FP_CLASS_ZERO, FP_CLASS_SUBNORMAL, FP_CLASS_NORMAL, FP_CLASS_INF, FP_CLASS_NAN } fp_class;
fp_class fp_classify_bits(const fp_format *f, uint32_t bits);
const char *fp_class_name(fp_class c);         /* "zero", "subnormal", "normal", "inf", "nan" */
const char *fp_specials_name(fp_specials s);   /* "ieee", "fn", "none" */
const char *fp_round_name(fp_round r);         /* "nearest", "zero", "stochastic" */

#ifdef __cplusplus
}
#endif

#endif
