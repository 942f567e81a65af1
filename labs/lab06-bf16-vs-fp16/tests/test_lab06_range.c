/* test_lab06_range.c: lab 06 visible tests, part C: the range probe (fp_range_probe) and the classification of a
 * tensor's values against a format (fp_range_count), in core/fp/accumulate.c, checked against fp_max,
 * fp_min_normal and fp_min_subnormal of core/fp/format.h and against values exactly at fp16's edges. */
#include "lab06_util.h"

#define CHECK_PROBE_INT(f, field, want, why) \
    MPT_CHECK((field) == (want), "%s: " #field "\n      expected: %d\n      got:      %d\n      likely mistake: %s", \
              (f)->name, (int)(want), (int)(field), (why))
#define CHECK_PROBE_VALUE(f, field, want, what) \
    MPT_CHECK((field) == (want), "%s: %s\n      expected: %.9g (core/fp/format.h)\n      got:      %.9g", (f)->name, \
              (what), (double)(want), (double)(field))

/* fp16: 5 exponent bits, bias 15. Fields 1 .. 30 are normals (31 is inf/NaN): binades -14 .. 15, 30 of them.
 * Subnormals m * 2^-24 for m = 1 .. 1023: binades -24 .. -15, 10 of them. max = 1.1111111111b * 2^15 = 65504. */
MPT_TEST(range_probe_fp16) {
    const fp_format *f = &FP_FP16;
    fp_range r = fp_range_probe(f);
    CHECK_PROBE_INT(f, r.top_binade, 15, "the all-ones exponent field (31) is inf/NaN in IEEE formats: the top is 30 - 15");
    CHECK_PROBE_INT(f, r.min_normal_binade, -14, "exponent field 1 means 2^(1 - bias)");
    CHECK_PROBE_INT(f, r.min_subnormal_binade, -24, "the smallest subnormal is 2^(1 - bias - mbits)");
    CHECK_PROBE_INT(f, r.normal_binades, 30, "binades -14 .. 15");
    CHECK_PROBE_INT(f, r.subnormal_binades, 10, "one binade per mantissa bit below the smallest normal");
    CHECK_PROBE_VALUE(f, r.max, fp_max(f), "max");
    CHECK_PROBE_VALUE(f, r.min_normal, fp_min_normal(f), "min normal");
    CHECK_PROBE_VALUE(f, r.min_subnormal, fp_min_subnormal(f), "min subnormal");
    MPT_CHECK_NEAR(log10(65504.0 / 0x1p-24), r.decades, 1e-12, 0, "fp16's range in decades, log10(max / min subnormal)");
    /* e4m3 (FN: only S.1111.111 is NaN): its top field 15 holds numbers, so binades -6 .. 8, and its max is
     * 1.110b * 2^8 = 448 (1.111b * 2^8 = 480 is the NaN pattern). */
    const fp_format *e = &FP_E4M3;
    fp_range q = fp_range_probe(e);
    CHECK_PROBE_INT(e, q.top_binade, 8, "an FN format keeps numbers in its all-ones exponent field: the top is 15 - 7");
    CHECK_PROBE_INT(e, q.normal_binades, 15, "binades -6 .. 8");
    CHECK_PROBE_VALUE(e, q.max, fp_max(e), "max 448: in the top field the all-ones mantissa is NaN, so one unit less");
}

/* bf16 keeps fp32's 8 exponent bits: the same 254 binades of normals (-126 .. 127); only 7 subnormal binades
 * (fp32 has 23). Its max 3.3895e38 = 1.1111111b * 2^127. */
MPT_TEST(range_probe_bf16_has_fp32s_range) {
    fp_range b = fp_range_probe(&FP_BF16), s = fp_range_probe(&FP_FP32);
    LAB06_OBSERVE_RANGE(&b);
    LAB06_OBSERVE_RANGE(&s);
    CHECK_PROBE_INT(&FP_BF16, b.normal_binades, 254, "exponent fields 1 .. 254");
    CHECK_PROBE_INT(&FP_BF16, b.normal_binades, s.normal_binades, "bf16 and fp32 have the same normal binades");
    CHECK_PROBE_INT(&FP_BF16, b.subnormal_binades, 7, "7 mantissa bits");
    CHECK_PROBE_INT(&FP_FP32, s.subnormal_binades, 23, "23 mantissa bits");
    CHECK_PROBE_VALUE(&FP_BF16, b.max, fp_max(&FP_BF16), "max");
    CHECK_PROBE_VALUE(&FP_BF16, b.min_subnormal, fp_min_subnormal(&FP_BF16), "min subnormal");
    CHECK_PROBE_VALUE(&FP_FP32, s.max, fp_max(&FP_FP32), "max");
}

/* What fp16 keeps is decided by rounding, not by comparing with its limits. */
MPT_TEST(range_count_fp16_edges) {
    static const lab06_case cases[] = {
        {0.0f, "0", LAB06_ZERO, "zeros are kept by every format and counted as zero, not as flushed"},
        {-0.0f, "-0", LAB06_ZERO, "-0 is a zero too"},
        {0x1p-24f, "2^-24", LAB06_SUBNORMAL, "fp16's smallest subnormal"},
        {0x1.8p-25f, "1.5 * 2^-25", LAB06_SUBNORMAL,
         "below the smallest subnormal, but it rounds up to it: kept (round first, then classify)"},
        {0x1p-25f, "2^-25", LAB06_FLUSHED, "half the smallest subnormal: a tie that goes to 0"},
        {1e-8f, "1e-8", LAB06_FLUSHED, "far below 2^-25"},
        {0x1p-14f, "2^-14", LAB06_NORMAL, "the smallest normal"},
        {6.103e-5f, "6.103e-5", LAB06_NORMAL,
         "just below 2^-14 = 6.10352e-5, within half a subnormal spacing (2^-25) of it: rounds up to the normal"},
        {6.1e-5f, "6.1e-5", LAB06_SUBNORMAL, "3.5e-8 below 2^-14, more than half a spacing: the largest subnormal"},
        {65504.0f, "65504", LAB06_NORMAL, "fp16's max"},
        {65510.0f, "65510", LAB06_NORMAL, "above max, but it rounds down to 65504: kept"},
        {65520.0f, "65520", LAB06_OVERFLOW, "the midpoint between 65504 and 2^16; the tie goes past max: inf"},
        {-1e6f, "-1e6", LAB06_OVERFLOW, "far past max"},
        {INFINITY, "inf", LAB06_NONFINITE, "an inf in the input is counted as nonfinite, not as an overflow"},
        {NAN, "NaN", LAB06_NONFINITE, "a NaN in the input is counted as nonfinite"},
    };
    CHECK_CASES(&FP_FP16, cases);
    /* bf16 keeps what fp16 loses at both ends. */
    static const lab06_case bf16[] = {
        {1e-8f, "1e-8", LAB06_NORMAL, "bf16 has fp32's range: 1e-8 is a normal"},
        {65520.0f, "65520", LAB06_NORMAL, "bf16 reaches 3.4e38"},
        {0x1p-134f, "2^-134", LAB06_FLUSHED, "half of bf16's smallest subnormal 2^-133: a tie that goes to 0"},
    };
    CHECK_CASES(&FP_BF16, bf16);
    /* The share kept: of the 13 finite values of the fp16 table, 4 are lost (2^-25 and 1e-8 flushed, 65520 and -1e6
     * overflowed): 9 of 13 kept. */
    fp_range_counts all = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) fp_range_count(&FP_FP16, &cases[i].value, 1, 1.0f, &all);
    MPT_CHECK_NEAR(9.0 / 13.0, fp_range_kept_share(&all), 1e-12, 0, "share of the 13 finite values fp16 keeps");
    /* The scale multiplies each value before it is classified: at 1024, 2^-25 becomes 2^-15 (a subnormal, kept) and
     * 64 becomes 65536 (past max: overflow). */
    const float scaled[] = {0x1p-25f, 64.0f};
    fp_range_counts sc = {0};
    fp_range_count(&FP_FP16, scaled, 2, 1024.0f, &sc);
    MPT_CHECK(sc.subnormal == 1 && sc.overflow == 1 && sc.flushed == 0 && sc.normal == 0,
              "fp16, scale 1024, values 2^-25 and 64\n      expected: subnormal 1 (2^-15), overflow 1 (65536)\n"
              "      got:      subnormal %llu, overflow %llu, flushed %llu, normal %llu\n"
              "      likely mistake: classify x[i] * scale, not x[i]",
              (unsigned long long)sc.subnormal, (unsigned long long)sc.overflow, (unsigned long long)sc.flushed,
              (unsigned long long)sc.normal);
}
