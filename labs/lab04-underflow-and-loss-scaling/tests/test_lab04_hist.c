/* test_lab04_hist.c: lab 04 visible tests, part A: the binade of a value (fp_hist_binade) and the range edges of a
 * target format (range_edges in core/fp/hist.c), on crafted values exactly at fp16's edges: 2^-24, 2^-25, 65504,
 * 65520. Each expected fate is worked out beside it. */
#include "lab04_util.h"

#include <float.h>

/* floor(log2|v|), from the bits: the exponent field minus 127 for normals; for fp32 subnormals (exponent
 * field 0) the position of the leading mantissa bit minus 149. */
MPT_TEST(hist_binade_of_values) {
    static const struct {
        float v;
        int binade;
        const char *why;
    } cases[] = {
        {1.0f, 0, "1.0 = 1.0 * 2^0: exponent field 127, minus the bias 127"},
        {1.5f, 0, "1.5 = 1.1b * 2^0: the mantissa does not change the binade"},
        {1.9999999f, 0, "just below 2 is still binade 0 (floor, not round)"},
        {2.0f, 1, "2 = 1.0 * 2^1"},
        {-2.0f, 1, "the sign does not matter: the binade of |v|"},
        {0.1f, -4, "0.1 = 1.6 * 2^-4"},
        {65504.0f, 15, "fp16's largest value, 1.1111111111b * 2^15"},
        {0x1p-24f, -24, "fp16's smallest subnormal 2^-24 (a normal fp32)"},
        {0x1p-25f, -25, "2^-25"},
        {0x1p-126f, -126, "fp32's smallest normal 2^-126: exponent field 1"},
        {FLT_MAX, 127, "fp32's largest value: exponent field 254"},
        {0x1p-149f, -149, "fp32's smallest subnormal: exponent field 0, mantissa 1 -> the leading bit is bit 0, 0 - 149"},
        {0x1p-140f, -140, "an fp32 subnormal: mantissa 1 << 9, leading bit 9, 9 - 149 = -140"},
        {0x1.fffffcp-127f, -127, "fp32's largest subnormal (mantissa 0x7fffff): leading bit 22, 22 - 149 = -127"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = fp_hist_binade(cases[i].v);
        MPT_OBSERVE(got);
        if (got != cases[i].binade)
            mpt_fail(__FILE__, __LINE__,
                     "fp_hist_binade(%a = %.9g)\n      expected: %d\n      got:      %d\n      hint: %s", (double)cases[i].v,
                     (double)cases[i].v, cases[i].binade, got, cases[i].why);
    }
}

/* Every finite nonzero value lands in exactly one bin; zeros, infinities and NaNs in none. */
MPT_TEST(hist_bins_of_a_crafted_tensor) {
    const float x[] = {
        1.0f, -1.5f, 1.75f,   /* binade 0: 3 */
        0.1f,                 /* binade -4 */
        65504.0f, 40000.0f,   /* binade 15: 2 */
        0x1p-24f,             /* binade -24 */
        0x1p-25f, 0x1.8p-25f, /* binade -25: 2 */
        0x1p-140f,            /* binade -140 (an fp32 subnormal) */
        0.0f, -0.0f, INFINITY, NAN,
    };
    fp_hist h;
    fp_hist_clear(&h);
    fp_hist_add(&h, x, sizeof x / sizeof x[0], 1.0f);
    static const struct {
        int binade;
        uint64_t count;
    } want[] = {{0, 3}, {-4, 1}, {15, 2}, {-24, 1}, {-25, 2}, {-140, 1}, {1, 0}, {-26, 0}, {16, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char what[96];
        snprintf(what, sizeof what, "values counted in binade %d", want[i].binade);
        MPT_CHECK_EQ_U64(want[i].count, fp_hist_bin(&h, want[i].binade), what);
    }
    uint64_t binned = 0;
    for (int b = FP_HIST_MIN_BINADE; b <= FP_HIST_MAX_BINADE; b++) binned += fp_hist_bin(&h, b);
    MPT_CHECK_EQ_U64(10, binned, "finite nonzero values binned (zeros, inf and NaN go to no bin)");
    MPT_CHECK_EQ_U64(2, h.zeros, "zeros");
    int lo = 0, hi = 0;
    MPT_REQUIRE(fp_hist_range(&h, &lo, &hi), "fp_hist_range found no nonzero bin");
    MPT_CHECK_EQ_I64(-140, lo, "lowest non-empty binade");
    MPT_CHECK_EQ_I64(15, hi, "highest non-empty binade");
}

/* fp16's bottom edge. Smallest subnormal 2^-24; smallest normal 2^-14. */
MPT_TEST(hist_fp16_underflow_edges) {
    static const lab04_case cases[] = {
        {0x1p-24f, "2^-24", LAB04_SUBNORMAL, "2^-24 is fp16's smallest subnormal itself: it is kept, as a subnormal"},
        {0x1p-25f, "2^-25", LAB04_UNDERFLOW,
         "2^-25 is exactly half of 2^-24: a tie between 0 (even) and 2^-24 (mantissa 1, odd); round to nearest even "
         "sends it to 0, so zero_max is 2^-25 itself (compare with <=)"},
        {0x1.000002p-25f, "2^-25 (1 + 2^-23)", LAB04_SUBNORMAL,
         "one fp32 step above 2^-25 is nearer to 2^-24 than to 0: it rounds up to the smallest subnormal"},
        {0x1.8p-25f, "1.5 * 2^-25", LAB04_SUBNORMAL, "below 2^-24 but above the midpoint: rounds up to 2^-24, kept"},
        {0x1p-26f, "2^-26", LAB04_UNDERFLOW, "below half the smallest subnormal: 0"},
        {1e-8f, "1e-8", LAB04_UNDERFLOW, "1e-8 < 2^-25 = 2.98e-8: 0"},
        {-0x1p-25f, "-2^-25", LAB04_UNDERFLOW, "the sign does not matter: the tie goes to -0"},
        {0x1p-14f, "2^-14", LAB04_NORMAL, "2^-14 is fp16's smallest normal"},
        {0x1.ff8p-15f, "1023 * 2^-24", LAB04_SUBNORMAL, "fp16's largest subnormal, 2^-14 - 2^-24: kept as subnormal"},
        {0x1.ffcp-15f, "2^-14 - 2^-25", LAB04_NORMAL,
         "the midpoint between the largest subnormal (mantissa all ones, odd) and 2^-14 (even): the tie goes up to "
         "the normal 2^-14, so normal_min is this midpoint"},
        {0x1.ffbffep-15f, "just below that midpoint", LAB04_SUBNORMAL, "rounds down to the largest subnormal"},
        {6.0e-5f, "6.0e-5", LAB04_SUBNORMAL, "below 2^-14 = 6.1035e-5 and not near it: a subnormal"},
    };
    CHECK_CASES(FP_HIST_FP16, cases);
}

/* fp16's top edge: max 65504 = (2 - 2^-10) * 2^15; the next step up would be 65536 = 2^16. */
MPT_TEST(hist_fp16_overflow_edges) {
    static const lab04_case cases[] = {
        {65504.0f, "65504", LAB04_NORMAL, "65504 is fp16's largest finite value"},
        {65519.0f, "65519", LAB04_NORMAL, "below the midpoint 65520: rounds down to 65504"},
        {0x1.ffdffep15f, "65519.996", LAB04_NORMAL, "the last fp32 below 65520 still rounds to 65504"},
        {65520.0f, "65520", LAB04_OVERFLOW,
         "65520 is the midpoint between 65504 (mantissa all ones, odd) and 65536 (past max); the tie goes to the even "
         "side, past max, so overflow_min is 65520 itself"},
        {-65520.0f, "-65520", LAB04_OVERFLOW, "the sign does not matter"},
        {70000.0f, "70000", LAB04_OVERFLOW, "past max"},
        {1.0f, "1", LAB04_NORMAL, "an ordinary value"},
    };
    CHECK_CASES(FP_HIST_FP16, cases);
    /* The same edge in e4m3, whose max 448 = S.1111.110 ends in 0 (even): the tie at 464 stays at 448. */
    static const lab04_case e4m3[] = {
        {448.0f, "448", LAB04_NORMAL, "448 is e4m3's largest value"},
        {464.0f, "464", LAB04_NORMAL,
         "464 is the midpoint between 448 (S.1111.110, last bit 0: even) and 480 (past max); the tie goes to the "
         "even 448, so in e4m3 overflow starts one fp32 step above 464 (check the parity of max's pattern)"},
        {0x1.d00002p8f, "464.00003", LAB04_OVERFLOW, "the first fp32 above the midpoint 464 rounds past max"},
    };
    CHECK_CASES(FP_HIST_E4M3, e4m3);
}
