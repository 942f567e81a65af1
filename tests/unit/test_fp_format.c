/* test_fp_format.c: Criterion tests of the generic format engine (fp/format.c): names, constants from the research
 * notes, agreement with fp/half.c, a brute-force nearest-value oracle for small formats, saturation, RZ, stochastic. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "fp/format.h"
#include "fp/half.h"

/* ------------------------------------------------------------------ names */

Test(fp_format, lookup_by_name) {
    cr_assert_eq(fp_format_by_name("fp32"), &FP_FP32);
    cr_assert_eq(fp_format_by_name("tf32"), &FP_TF32);
    cr_assert_eq(fp_format_by_name("fp16"), &FP_FP16);
    cr_assert_eq(fp_format_by_name("bf16"), &FP_BF16);
    cr_assert_eq(fp_format_by_name("e4m3"), &FP_E4M3);
    cr_assert_eq(fp_format_by_name("e5m2"), &FP_E5M2);
    cr_assert_eq(fp_format_by_name("fp8_e4m3"), &FP_E4M3);

    const fp_format *e3m2 = fp_format_by_name("e3m2");
    cr_assert_not_null(e3m2);
    cr_assert_str_eq(e3m2->name, "e3m2");
    cr_assert_eq(e3m2->ebits, 3);
    cr_assert_eq(e3m2->mbits, 2);
    cr_assert_eq(e3m2->bias, 3, "IEEE-style bias 2^(X-1)-1");
    cr_assert_eq(e3m2->specials, FP_SPECIALS_NONE);
    cr_assert_eq(fp_format_by_name("e3m2"), e3m2, "the same name gives the same, lasting pointer");

    const fp_format *e8m7 = fp_format_by_name("e8m7");
    cr_assert(e8m7 && e8m7->bias == 127 && e8m7->specials == FP_SPECIALS_IEEE, "e8mY is IEEE (bf16's layout)");
    const fp_format *e5m10 = fp_format_by_name("e5m10ieee");
    cr_assert(e5m10 && e5m10->bias == 15 && e5m10->specials == FP_SPECIALS_IEEE);
    const fp_format *e4m3fn = fp_format_by_name("e4m3fn");
    cr_assert(e4m3fn && e4m3fn->bias == 7 && e4m3fn->specials == FP_SPECIALS_FN);
    cr_assert_not_null(fp_format_by_name("e2m0"), "no mantissa bits is a valid all-finite format");
    cr_assert_not_null(fp_format_by_name("e7m23"));

    static const char *const bad[] = {"", "fp64", "FP16", "e1m2", "e9m1", "e8m0", "e3m24", "e4m3x", "e04m3",
                                      "e4", "m3", "e4m", "e8m1fn", "e5m0ieee", "e 4m3", "e4m3 ", "e100m1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_null(fp_format_by_name(bad[i]), "'%s' is not a format", bad[i]);
    cr_expect_null(fp_format_by_name(NULL));
}

/* ------------------------------------------------------------------ constants (research notes, section 5) */

Test(fp_format, constants_match_research_table) {
    static const struct {
        const char *name;
        double max, min_normal, min_subnormal, epsilon;
        int bits;
    } rows[] = {
        {"e4m3", 448, 0x1p-6, 0x1p-9, 0x1p-3, 8},
        {"e5m2", 57344, 0x1p-14, 0x1p-16, 0x1p-2, 8},
        {"fp16", 65504, 0x1p-14, 0x1p-24, 0x1p-10, 16},
        {"bf16", 0x1.fep127, 0x1p-126, 0x1p-133, 0x1p-7, 16},
        {"tf32", 0x1.ffcp127, 0x1p-126, 0x1p-136, 0x1p-10, 19},
        {"fp32", FLT_MAX, 0x1p-126, 0x1p-149, 0x1p-23, 32},
        {"e2m1", 6, 1, 0.5, 0.5, 4},     /* OCP MX FP4 */
        {"e2m3", 7.5, 1, 0.125, 0.125, 6}, /* OCP MX FP6 */
        {"e3m2", 28, 0.25, 0.0625, 0.25, 6},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const fp_format *f = fp_format_by_name(rows[i].name);
        cr_assert_not_null(f, "%s", rows[i].name);
        cr_expect_eq(fp_max(f), rows[i].max, "%s max %.9g, expected %.9g", rows[i].name, fp_max(f), rows[i].max);
        cr_expect_eq(fp_min_normal(f), rows[i].min_normal, "%s min normal", rows[i].name);
        cr_expect_eq(fp_min_subnormal(f), rows[i].min_subnormal, "%s min subnormal", rows[i].name);
        cr_expect_eq(fp_epsilon(f), rows[i].epsilon, "%s epsilon", rows[i].name);
        cr_expect_eq(fp_format_bits(f), rows[i].bits, "%s bits", rows[i].name);
    }
    cr_expect_eq(fp_max_bits(&FP_E4M3), 0x7e, "e4m3 max is S.1111.110");
    cr_expect_eq(fp_max_bits(&FP_E5M2), 0x7b);
    cr_expect_eq(fp_max_bits(&FP_FP16), 0x7bff);
}

Test(fp_format, e4m3_has_no_inf_and_nan_only_at_all_ones) {
    for (uint32_t b = 0; b < 256; b++) {
        fp_class c = fp_classify_bits(&FP_E4M3, b);
        float v = fp_decode(&FP_E4M3, b);
        if ((b & 0x7f) == 0x7f) {
            cr_expect_eq(c, FP_CLASS_NAN, "0x%02x is NaN", b);
            cr_expect(isnan(v));
        } else {
            cr_expect(c != FP_CLASS_NAN && c != FP_CLASS_INF, "e4m3 0x%02x must be a number", b);
            cr_expect(isfinite(v), "e4m3 0x%02x decodes to %g", b, (double)v);
        }
    }
    cr_expect_eq(fp_decode(&FP_E4M3, 0x7e), 448.0f);
    cr_expect_eq(fp_decode(&FP_E4M3, 0xfe), -448.0f);
    cr_expect_eq(fp_decode(&FP_E4M3, 0x78), 256.0f, "S.1111.000 is a number in e4m3 (inf in IEEE)");
    cr_expect_eq(fp_decode(&FP_E4M3, 0x01), 0x1p-9f);
}

Test(fp_format, e5m2_ieee_specials) {
    for (uint32_t b = 0; b < 256; b++) {
        fp_class c = fp_classify_bits(&FP_E5M2, b);
        uint32_t m = b & 0x7f;
        fp_class expected = m == 0x7c ? FP_CLASS_INF : m > 0x7c ? FP_CLASS_NAN : m == 0 ? FP_CLASS_ZERO
                                                               : m < 4     ? FP_CLASS_SUBNORMAL
                                                                           : FP_CLASS_NORMAL;
        cr_expect_eq(c, expected, "e5m2 0x%02x is %s, expected %s", b, fp_class_name(c), fp_class_name(expected));
    }
    cr_expect(isinf(fp_decode(&FP_E5M2, 0x7c)) && fp_decode(&FP_E5M2, 0xfc) < 0);
    cr_expect_eq(fp_decode(&FP_E5M2, 0x7b), 57344.0f);
    /* e5m2 is the top byte of fp16 */
    for (uint32_t b = 0; b < 256; b++)
        cr_expect_eq(fp_float_bits(fp_decode(&FP_E5M2, b)), fp_float_bits(fp16_to_float((uint16_t)(b << 8))),
                     "e5m2 0x%02x == fp16 0x%02x00", b, b);
}

Test(fp_format, all_finite_formats_have_no_specials) {
    const fp_format *f = fp_format_by_name("e2m1");
    static const float values[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6}; /* the OCP MX FP4 value set */
    for (uint32_t b = 0; b < 16; b++) {
        float expected = (b & 8) ? -values[b & 7] : values[b & 7];
        cr_expect_eq(fp_decode(f, b), expected, "e2m1 0x%x", b);
    }
    cr_expect_eq(fp_encode(f, INFINITY, FP_ROUND_NEAREST_EVEN, 0, 0), 0x7, "inf saturates: nothing else to go to");
    cr_expect_eq(fp_encode(f, -100.0f, FP_ROUND_NEAREST_EVEN, 0, 0), 0xf);
    cr_expect_eq(fp_encode(f, NAN, FP_ROUND_NEAREST_EVEN, 0, 0), 0x7, "NaN has no pattern: max");
}

/* ------------------------------------------------------------------ agreement with fp/half.c */

/* Every fp16 value, the fp32 values either side of it, the midpoints to its neighbour and either side of those,
 * NaNs with payloads, and random fp32 patterns: the generic engine must give half.c's bits. */
static void check_engine_matches(const fp_format *f, uint16_t (*encode)(float), float (*decode)(uint16_t)) {
    int mismatches = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float v = decode((uint16_t)h);
        /* fp_decode always returns quiet NaNs; bf16_to_float is a plain shift that keeps a signalling NaN */
        uint32_t quiet = isnan(v) ? 0x00400000u : 0u;
        cr_assert_eq(fp_float_bits(fp_decode(f, h)), fp_float_bits(v) | quiet, "%s decode 0x%04x", f->name, h);
        float next = decode((uint16_t)(h + 1));
        float probes[6] = {v, nextafterf(v, 0.0f), nextafterf(v, INFINITY), nextafterf(v, -INFINITY), v, v};
        if (isfinite(v) && isfinite(next) && (h & 0x7fff) != 0x7fff) {
            float mid = (float)(((double)v + (double)next) / 2);
            probes[4] = nextafterf(mid, INFINITY);
            probes[5] = nextafterf(mid, -INFINITY);
            probes[0] = mid;
        }
        for (int p = 0; p < 6; p++) {
            uint32_t generic = fp_encode(f, probes[p], FP_ROUND_NEAREST_EVEN, 0, 0);
            uint32_t reference = encode(probes[p]);
            if (generic != reference && mismatches++ < 5)
                cr_expect_fail("%s: fp_encode(fp32 0x%08x) = 0x%04x, half.c gives 0x%04x", f->name,
                               fp_float_bits(probes[p]), generic, reference);
        }
    }
    mp_rng rng;
    mp_rng_seed(&rng, 11);
    for (int i = 0; i < 2000000; i++) {
        float x = fp_float_from_bits(mp_rng_u32(&rng));
        uint32_t generic = fp_encode(f, x, FP_ROUND_NEAREST_EVEN, 0, 0), reference = encode(x);
        if (generic != reference && mismatches++ < 10)
            cr_expect_fail("%s: fp_encode(fp32 0x%08x) = 0x%04x, half.c gives 0x%04x", f->name, fp_float_bits(x),
                           generic, reference);
    }
    cr_assert_eq(mismatches, 0, "%d mismatches between the engine and half.c for %s", mismatches, f->name);
}

Test(fp_format, engine_matches_half_fp16) { check_engine_matches(&FP_FP16, fp16_from_float, fp16_to_float); }
Test(fp_format, engine_matches_half_bf16) { check_engine_matches(&FP_BF16, bf16_from_float, bf16_to_float); }

Test(fp_format, fp32_and_generic_ieee_layouts_agree) {
    mp_rng rng;
    mp_rng_seed(&rng, 5);
    const fp_format *e8m7 = fp_format_by_name("e8m7"), *e5m10 = fp_format_by_name("e5m10ieee");
    const fp_format *e8m23 = fp_format_by_name("e8m23");
    for (int i = 0; i < 300000; i++) {
        uint32_t u = mp_rng_u32(&rng);
        float x = fp_float_from_bits(u);
        cr_assert_eq(fp_encode(e8m7, x, FP_ROUND_NEAREST_EVEN, 0, 0), bf16_from_float(x));
        cr_assert_eq(fp_encode(e5m10, x, FP_ROUND_NEAREST_EVEN, 0, 0), fp16_from_float(x));
        uint32_t expected = isnan(x) ? u | 0x00400000u : u;
        cr_assert_eq(fp_encode(&FP_FP32, x, FP_ROUND_NEAREST_EVEN, 0, 0), expected, "fp32 is the identity");
        cr_assert_eq(fp_encode(e8m23, x, FP_ROUND_TOWARD_ZERO, 0, 0), expected);
        if (!isnan(x)) cr_assert_eq(fp_float_bits(fp_decode(&FP_FP32, u)), u);
    }
}

/* ------------------------------------------------------------------ a brute-force oracle for small formats */

typedef struct {
    const fp_format *f;
    double values[1 << 12];  /* every non-negative finite value, increasing */
    uint32_t patterns[1 << 12];
    int n;
} value_list;

static void list_values(value_list *l, const fp_format *f) {
    l->f = f;
    l->n = 0;
    uint32_t count = 1u << (f->ebits + f->mbits);
    for (uint32_t b = 0; b < count; b++) {
        fp_class c = fp_classify_bits(f, b);
        if (c == FP_CLASS_NAN || c == FP_CLASS_INF) continue;
        double v = fp_decode(f, b);
        cr_assert(l->n == 0 || v > l->values[l->n - 1], "%s values increase with the pattern", f->name);
        l->values[l->n] = v;
        l->patterns[l->n] = b;
        l->n++;
    }
}

/* The oracle: find lo <= |x| < hi among the values (hi may be the first value past max, which does not
 * exist: it stands for overflow) and pick by the rounding rule. Returns the pattern, or UINT32_MAX for
 * "past max". */
static uint32_t oracle(const value_list *l, double ax, fp_round mode) {
    int n = l->n;
    double top_spacing = fp_ulp(l->f, (float)l->values[n - 1]);
    if (ax >= l->values[n - 1]) {
        if (ax == l->values[n - 1] || mode == FP_ROUND_TOWARD_ZERO) return l->patterns[n - 1];
        double next = l->values[n - 1] + top_spacing; /* virtual value past max, pattern max+1 */
        double mid = (l->values[n - 1] + next) / 2;
        if (ax < mid) return l->patterns[n - 1];
        if (ax > mid) return UINT32_MAX;
        return (l->patterns[n - 1] & 1) ? UINT32_MAX : l->patterns[n - 1];
    }
    int lo = 0, hi = n - 1; /* values[lo] <= ax < values[hi] */
    while (hi - lo > 1) {
        int m = (lo + hi) / 2;
        if (l->values[m] <= ax)
            lo = m;
        else
            hi = m;
    }
    if (mode == FP_ROUND_TOWARD_ZERO || ax == l->values[lo]) return l->patterns[lo];
    double dlo = ax - l->values[lo], dhi = l->values[hi] - ax;
    if (dlo < dhi) return l->patterns[lo];
    if (dhi < dlo) return l->patterns[hi];
    return (l->patterns[lo] & 1) ? l->patterns[hi] : l->patterns[lo];
}

static uint32_t expected_overflow(const fp_format *f, int saturate, fp_round mode) {
    if (saturate || mode == FP_ROUND_TOWARD_ZERO || f->specials == FP_SPECIALS_NONE) return fp_max_bits(f);
    if (f->specials == FP_SPECIALS_IEEE) return ((1u << f->ebits) - 1u) << f->mbits;
    return (1u << (f->ebits + f->mbits)) - 1u;
}

static void check_against_oracle(const value_list *l, float x, fp_round mode, int saturate, int *mismatches) {
    const fp_format *f = l->f;
    if (isinf(x)) return; /* probes past FLT_MAX; infinities have their own rules (overflow_and_saturation) */
    uint32_t sign = signbit(x) ? 1u << (f->ebits + f->mbits) : 0;
    uint32_t expected = oracle(l, fabs((double)x), mode);
    if (expected == UINT32_MAX) expected = expected_overflow(f, saturate, mode);
    expected |= sign;
    uint32_t got = fp_encode(f, x, mode, saturate, 0);
    if (got != expected && (*mismatches)++ < 5)
        cr_expect_fail("%s %s%s: encode(%.9g = fp32 0x%08x) = 0x%x, nearest-value search says 0x%x", f->name,
                       fp_round_name(mode), saturate ? " saturating" : "", (double)x, fp_float_bits(x), got, expected);
}

static void check_format_against_oracle(const char *name) {
    static value_list l;
    const fp_format *f = fp_format_by_name(name);
    cr_assert_not_null(f, "%s", name);
    list_values(&l, f);
    int mismatches = 0;
    static const fp_round modes[2] = {FP_ROUND_NEAREST_EVEN, FP_ROUND_TOWARD_ZERO};
    mp_rng rng;
    mp_rng_seed(&rng, 17);
    for (int m = 0; m < 2; m++)
        for (int saturate = 0; saturate < 2; saturate++) {
            for (int i = 0; i < l.n; i++) {
                double v = l.values[i];
                double next = i + 1 < l.n ? l.values[i + 1] : v + fp_ulp(f, (float)v);
                float mid = (float)((v + next) / 2);
                float probes[] = {(float)v, nextafterf((float)v, INFINITY), nextafterf((float)v, 0), mid,
                                  nextafterf(mid, 0), nextafterf(mid, INFINITY), (float)next,
                                  nextafterf((float)next, INFINITY)};
                for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++) {
                    check_against_oracle(&l, probes[p], modes[m], saturate, &mismatches);
                    check_against_oracle(&l, -probes[p], modes[m], saturate, &mismatches);
                }
            }
            for (int i = 0; i < 20000; i++) {
                /* log-uniform over the format's range and a little beyond */
                double lo = log2(fp_min_subnormal(f)) - 3, hi = log2(fp_max(f)) + 2;
                float x = (float)exp2(lo + (hi - lo) * mp_rng_uniform(&rng));
                check_against_oracle(&l, (mp_rng_u32(&rng) & 1) ? -x : x, modes[m], saturate, &mismatches);
            }
            check_against_oracle(&l, 0.0f, modes[m], saturate, &mismatches);
            check_against_oracle(&l, -0.0f, modes[m], saturate, &mismatches);
            check_against_oracle(&l, 1e-40f, modes[m], saturate, &mismatches);
            check_against_oracle(&l, FLT_MAX, modes[m], saturate, &mismatches);
        }
    cr_assert_eq(mismatches, 0, "%s: %d mismatches with the nearest-value search", name, mismatches);
}

Test(fp_format, e4m3_matches_nearest_value_search) { check_format_against_oracle("e4m3"); }
Test(fp_format, e5m2_matches_nearest_value_search) { check_format_against_oracle("e5m2"); }
Test(fp_format, mx_formats_match_nearest_value_search) {
    check_format_against_oracle("e2m1");
    check_format_against_oracle("e2m3");
    check_format_against_oracle("e3m2");
    check_format_against_oracle("e2m0");
}
Test(fp_format, other_layouts_match_nearest_value_search) {
    check_format_against_oracle("e3m4ieee");
    check_format_against_oracle("e5m3");
    check_format_against_oracle("e6m1fn");
    check_format_against_oracle("e3m0fn");
    check_format_against_oracle("e7m4");
    check_format_against_oracle("e8m3");
}

/* ------------------------------------------------------------------ overflow, saturation, RZ, NaN */

Test(fp_format, overflow_and_saturation) {
    const struct {
        const fp_format *f;
        float x;
        fp_round mode;
        int saturate;
        uint32_t expected;
        const char *why;
    } cases[] = {
        {&FP_E4M3, 448.0f, FP_ROUND_NEAREST_EVEN, 0, 0x7e, "max"},
        {&FP_E4M3, 464.0f, FP_ROUND_NEAREST_EVEN, 0, 0x7e, "tie between 448 (even) and 480: down"},
        {&FP_E4M3, 464.5f, FP_ROUND_NEAREST_EVEN, 0, 0x7f, "past the tie: overflow to NaN, e4m3 has no inf"},
        {&FP_E4M3, 464.5f, FP_ROUND_NEAREST_EVEN, 1, 0x7e, "saturating: max"},
        {&FP_E4M3, -1e6f, FP_ROUND_NEAREST_EVEN, 0, 0xff, "negative overflow: NaN with the sign"},
        {&FP_E4M3, INFINITY, FP_ROUND_NEAREST_EVEN, 0, 0x7f, "inf -> NaN"},
        {&FP_E4M3, INFINITY, FP_ROUND_NEAREST_EVEN, 1, 0x7e, "inf saturates"},
        {&FP_E4M3, -INFINITY, FP_ROUND_NEAREST_EVEN, 1, 0xfe, "-inf saturates"},
        {&FP_E4M3, NAN, FP_ROUND_NEAREST_EVEN, 1, 0x7f, "NaN stays NaN when saturating"},
        {&FP_E4M3, 500.0f, FP_ROUND_TOWARD_ZERO, 0, 0x7e, "toward zero never passes max"},
        {&FP_E5M2, 57344.0f, FP_ROUND_NEAREST_EVEN, 0, 0x7b, "max"},
        {&FP_E5M2, 61440.0f, FP_ROUND_NEAREST_EVEN, 0, 0x7c, "tie between max (odd) and 65536: inf"},
        {&FP_E5M2, 61439.0f, FP_ROUND_NEAREST_EVEN, 0, 0x7b, "below the tie"},
        {&FP_E5M2, 1e9f, FP_ROUND_NEAREST_EVEN, 1, 0x7b, "saturating"},
        {&FP_E5M2, -INFINITY, FP_ROUND_NEAREST_EVEN, 0, 0xfc, "-inf"},
        {&FP_E5M2, INFINITY, FP_ROUND_TOWARD_ZERO, 0, 0x7c, "inf is exact: stays inf"},
        {&FP_FP16, 70000.0f, FP_ROUND_TOWARD_ZERO, 0, 0x7bff, "RZ overflow: max"},
        {&FP_FP16, 65519.0f, FP_ROUND_TOWARD_ZERO, 0, 0x7bff, "RZ just below the RNE overflow point"},
        {&FP_FP16, 70000.0f, FP_ROUND_NEAREST_EVEN, 1, 0x7bff, "saturating"},
        {&FP_FP16, INFINITY, FP_ROUND_NEAREST_EVEN, 1, 0x7bff, "inf saturates"},
        {&FP_FP16, 0.1f, FP_ROUND_TOWARD_ZERO, 0, 0x2e66, "0.1 truncates to the same as RNE here"},
        {&FP_FP16, 0.3f, FP_ROUND_TOWARD_ZERO, 0, 0x34cc, "0.3: RNE gives 0x34cd, RZ 0x34cc"},
        {&FP_FP16, -0.3f, FP_ROUND_TOWARD_ZERO, 0, 0xb4cc, "RZ is symmetric"},
        {&FP_FP16, 0x1.ffcp-25f, FP_ROUND_TOWARD_ZERO, 0, 0x0000, "below the smallest subnormal: 0"},
        {&FP_BF16, FLT_MAX, FP_ROUND_TOWARD_ZERO, 0, 0x7f7f, "bf16 RZ of FLT_MAX: max bf16"},
        {&FP_TF32, 1.0f + 0x1p-11f, FP_ROUND_NEAREST_EVEN, 0, 0x1fc00, "tf32 tie: to even"},
        {&FP_TF32, NAN, FP_ROUND_NEAREST_EVEN, 0, 0x3fe00, "tf32 NaN: quiet"},
        {&FP_E5M2, fp_float_from_bits(0x7fa00000), FP_ROUND_NEAREST_EVEN, 0, 0x7f, "e5m2 NaN payload bit kept"},
        {&FP_E5M2, fp_float_from_bits(0xff800001), FP_ROUND_NEAREST_EVEN, 0, 0xfe, "signalling NaN made quiet"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t got = fp_encode(cases[i].f, cases[i].x, cases[i].mode, cases[i].saturate, 0);
        cr_expect_eq(got, cases[i].expected, "%s %s%s of %.9g: 0x%x, expected 0x%x (%s)", cases[i].f->name,
                     fp_round_name(cases[i].mode), cases[i].saturate ? " saturating" : "", (double)cases[i].x, got,
                     cases[i].expected, cases[i].why);
    }
}

Test(fp_format, ulp_and_classify) {
    cr_expect_eq(fp_ulp(&FP_FP16, 1.0f), 0x1p-10);
    cr_expect_eq(fp_ulp(&FP_FP16, 1.99f), 0x1p-10);
    cr_expect_eq(fp_ulp(&FP_FP16, 2.0f), 0x1p-9);
    cr_expect_eq(fp_ulp(&FP_FP16, 65504.0f), 32.0);
    cr_expect_eq(fp_ulp(&FP_FP16, 1e6f), 32.0, "past max: the top binade's spacing");
    cr_expect_eq(fp_ulp(&FP_FP16, 0.0f), 0x1p-24);
    cr_expect_eq(fp_ulp(&FP_FP16, 1e-6f), 0x1p-24, "subnormal range: constant spacing");
    cr_expect_eq(fp_ulp(&FP_FP16, -1.0f), 0x1p-10);
    cr_expect_eq(fp_ulp(&FP_BF16, 1.0f), 0x1p-7);
    cr_expect_eq(fp_ulp(&FP_E4M3, 448.0f), 32.0);
    cr_expect_eq(fp_ulp(&FP_FP32, 1.0f), 0x1p-23);
    cr_expect(isnan(fp_ulp(&FP_FP16, INFINITY)));
    cr_expect_eq(fp_classify_bits(&FP_FP16, 0x8000), FP_CLASS_ZERO);
    cr_expect_eq(fp_classify_bits(&FP_FP16, 0x03ff), FP_CLASS_SUBNORMAL);
    cr_expect_eq(fp_classify_bits(&FP_FP16, 0x0400), FP_CLASS_NORMAL);
    cr_expect_eq(fp_classify_bits(&FP_FP16, 0xfc00), FP_CLASS_INF);
    cr_expect_eq(fp_classify_bits(&FP_FP16, 0x7c01), FP_CLASS_NAN);
    cr_expect_str_eq(fp_class_name(FP_CLASS_SUBNORMAL), "subnormal");
    cr_expect_str_eq(fp_round_name(FP_ROUND_STOCHASTIC), "stochastic");
}

/* ------------------------------------------------------------------ stochastic rounding */

/* The rule that makes it exactly unbiased: it rounds up iff random_bits < dropped * 2^(32-shift), i.e. for
 * exactly (dropped * 2^(32-shift)) of the 2^32 possible random words. Check the boundary on both sides. */
Test(fp_format, stochastic_rounds_up_for_exactly_the_right_share_of_random_words) {
    static const struct {
        const fp_format *f;
        float x;
        uint32_t lo, hi;
        uint64_t up_words; /* how many of the 2^32 random words round up */
    } cases[] = {
        /* bf16: 1 + 2^-9 is a quarter of the way from 1 to 1 + 2^-7 */
        {&FP_BF16, 1.0f + 0x1p-9f, 0x3f80, 0x3f81, 1ull << 30},
        /* fp16 subnormal range: 1.25 * 2^-24 */
        {&FP_FP16, 0x1.4p-24f, 0x0001, 0x0002, 1ull << 30},
        /* e4m3: 0.3 between 0.28125 and 0.3125 */
        {&FP_E4M3, 0.3f, 0x29, 0x2a, 0},
        /* fp16 near max: 65505 rounds up (to inf) rarely */
        {&FP_FP16, 65505.0f, 0x7bff, 0x7c00, (1ull << 32) / 32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const fp_format *f = cases[i].f;
        float x = cases[i].x;
        uint64_t up = cases[i].up_words;
        if (up == 0) {
            /* from the values: share = (x - lo) / (hi - lo), exact in double for fp32 x */
            double lo = fp_decode(f, cases[i].lo), hi = fp_decode(f, cases[i].hi);
            up = (uint64_t)(((double)x - lo) / (hi - lo) * 4294967296.0);
        }
        cr_assert(up > 0 && up < (1ull << 32));
        cr_expect_eq(fp_encode(f, x, FP_ROUND_STOCHASTIC, 0, 0), cases[i].hi, "%s: random 0 -> up", f->name);
        cr_expect_eq(fp_encode(f, x, FP_ROUND_STOCHASTIC, 0, (uint32_t)(up - 1)), cases[i].hi,
                     "%s %.9g: random word %llu (just below the share) rounds up", f->name, (double)x,
                     (unsigned long long)(up - 1));
        cr_expect_eq(fp_encode(f, x, FP_ROUND_STOCHASTIC, 0, (uint32_t)up), cases[i].lo,
                     "%s %.9g: random word %llu (the share) rounds down", f->name, (double)x, (unsigned long long)up);
        cr_expect_eq(fp_encode(f, x, FP_ROUND_STOCHASTIC, 0, UINT32_MAX), cases[i].lo, "%s: random max -> down",
                     f->name);
    }
    /* representable values never move */
    for (uint32_t r = 0; r < 1000; r++) cr_assert_eq(fp_encode(&FP_BF16, 1.0f, FP_ROUND_STOCHASTIC, 0, r * 4294967u), 0x3f80);
}

/* Statistical check: the mean of decode(encode(x)) over N draws is x within 5 standard errors
 * (sigma = spacing * sqrt(p(1-p)/N); a correct implementation fails this about once in 1.7 million runs). */
Test(fp_format, stochastic_rounding_is_unbiased) {
    static const struct {
        const char *format;
        float x;
    } cases[] = {
        {"bf16", 0.1f}, {"bf16", 1.0f + 0x1p-12f}, {"fp16", 0.1f}, {"fp16", 3e-7f}, {"fp16", -1234.567f},
        {"e4m3", 0.3f}, {"e4m3", 0.001f}, {"e5m2", 1000.0f}, {"e5m2", -3e-5f}, {"e2m1", 2.4f},
    };
    enum { N = 200000 };
    mp_rng rng;
    mp_rng_seed(&rng, 2024);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const fp_format *f = fp_format_by_name(cases[i].format);
        float x = cases[i].x;
        double lo = fp_decode(f, fp_encode(f, x, FP_ROUND_TOWARD_ZERO, 0, 0));
        double spacing = fp_ulp(f, x);
        double p = fabs(x - lo) / spacing;
        double sum = 0;
        for (int k = 0; k < N; k++) {
            double v = fp_decode(f, fp_encode(f, x, FP_ROUND_STOCHASTIC, 0, mp_rng_u32(&rng)));
            cr_assert(fabs(v - x) < spacing, "%s SR of %.9g gave %.9g: not a neighbour", f->name, (double)x, v);
            sum += v;
        }
        double mean = sum / N, sigma = spacing * sqrt(p * (1 - p) / N);
        cr_expect(fabs(mean - x) <= 5 * sigma + 1e-300, "%s SR of %.9g: mean %.12g over %d draws, more than 5 sigma (%.3g) off",
                  f->name, (double)x, mean, N, sigma);
        /* and round to nearest would have been biased for these inputs */
        double rne = fp_decode(f, fp_encode(f, x, FP_ROUND_NEAREST_EVEN, 0, 0));
        cr_expect(rne != x, "test input %.9g should not be representable in %s", (double)x, f->name);
    }
}
