/* test_fp16_encode.c: lab 03 visible tests, part B: fp32 -> fp16 with round-to-nearest-even, subnormals,
 * overflow, signed zero, inf and NaN. Expected bits are written from the fields here, or come from the
 * double-arithmetic reference in lab03_reference.h. */
#include "base/rng.h"
#include "fp/half.h"
#include "lab03_reference.h"
#include "mptest.h"

#include <float.h>
#include <math.h>

/* fp16 bits from fields: sign, biased exponent field (0..31), 10-bit mantissa. */
static uint32_t fp16_fields(int sign, int exp_field, int mantissa) {
    return (uint32_t)(sign << 15 | exp_field << 10 | mantissa);
}

MPT_TEST(fp16_encodes_exact_values) {
    CHECK_FP16_ENCODE(1.0f, fp16_fields(0, 15, 0), "1 = 2^0 * 1.0: exponent field 0 + 15");
    CHECK_FP16_ENCODE(-2.0f, fp16_fields(1, 16, 0), "-2 = -(2^1 * 1.0)");
    CHECK_FP16_ENCODE(0.5f, fp16_fields(0, 14, 0), "0.5 = 2^-1");
    CHECK_FP16_ENCODE(1.5f, fp16_fields(0, 15, 0x200), "1.5 = 2^0 * 1.1b");
    CHECK_FP16_ENCODE(1.0f + 1.0f / 1024, fp16_fields(0, 15, 1), "1 + 2^-10, the next fp16 after 1");
    CHECK_FP16_ENCODE(3.0f, fp16_fields(0, 16, 0x200), "3 = 2^1 * 1.1b");
    CHECK_FP16_ENCODE(-1000.0f, fp16_fields(1, 24, 0x3d0), "-1000 = -(2^9 * 1.953125)");
    CHECK_FP16_ENCODE(65504.0f, fp16_fields(0, 30, 0x3ff), "65504, the largest finite fp16");
    CHECK_FP16_ENCODE(0x1p-14f, fp16_fields(0, 1, 0), "2^-14, the smallest normal fp16");
    CHECK_FP16_ENCODE(0x1p-24f, fp16_fields(0, 0, 1), "2^-24, the smallest subnormal fp16");
    CHECK_FP16_ENCODE(0x3ffp-24f, fp16_fields(0, 0, 0x3ff), "1023 * 2^-24, the largest subnormal");
    CHECK_FP16_ENCODE(-0x155p-24f, fp16_fields(1, 0, 0x155), "-341 * 2^-24, a negative subnormal");
}

/* Exponents (unbiased) and mantissas where the tie tests run: the subnormal-adjacent binade, small, around 1,
 * large, and the top binade below 65504; even and odd last bits; the mantissa that carries into the exponent. */
static const int tie_exponents[] = {-14, -9, -1, 0, 1, 7, 14, 15};
static const int tie_mantissas[] = {0, 1, 2, 0x155, 0x2aa, 0x3fe, 0x3ff};

MPT_TEST(fp16_rounds_to_nearest) {
    /* Familiar values first: the fp16 nearest to each, worked out by hand in the handout. */
    CHECK_FP16_ENCODE(0.1f, fp16_fields(0, 11, 0x266), "0.1 -> 0.0999755859375");
    CHECK_FP16_ENCODE(1.0f / 3.0f, fp16_fields(0, 13, 0x155), "1/3 -> 0.333251953125");
    CHECK_FP16_ENCODE(3.14159265f, fp16_fields(0, 16, 0x248), "pi -> 3.140625");
    CHECK_FP16_ENCODE(2.0f / 3.0f, fp16_fields(0, 14, 0x155), "2/3 -> 0.66650390625");
    CHECK_FP16_ENCODE(1000.2f, fp16_fields(0, 24, 0x3d0), "1000.2 -> 1000 (spacing 0.5 here)");
    CHECK_FP16_ENCODE(1000.3f, fp16_fields(0, 24, 0x3d1), "1000.3 -> 1000.5 (spacing 0.5 here)");
    CHECK_FP16_ENCODE(2049.0f, fp16_fields(0, 26, 0), "2049 -> 2048 (a tie, to even)");
    /* Just above and just below each midpoint: the nearest neighbour, whatever its last bit. */
    for (size_t i = 0; i < sizeof tie_exponents / sizeof *tie_exponents; i++)
        for (size_t j = 0; j < sizeof tie_mantissas / sizeof *tie_mantissas; j++) {
            int e = tie_exponents[i], m = tie_mantissas[j];
            if (e == 15 && m == 0x3ff) continue; /* above 65504: the overflow test */
            uint32_t lower = fp16_fields(0, e + 15, m);
            float mid = (float)ldexp(2.0 * (1024 + m) + 1, e - 11); /* halfway between lower and lower + 1 */
            for (int sign = 0; sign < 2; sign++) {
                float s = sign ? -1.0f : 1.0f;
                uint32_t sbit = sign ? 0x8000u : 0;
                CHECK_FP16_ENCODE(s * nextafterf(mid, 0), sbit | lower, "just below a midpoint rounds toward zero");
                CHECK_FP16_ENCODE(s * nextafterf(mid, INFINITY), sbit | (lower + 1),
                                  "just above a midpoint rounds away from zero");
                CHECK_FP16_ENCODE(s * (float)ldexp(4.0 * (1024 + m) + 1, e - 12), sbit | lower,
                                  "a quarter of the way up rounds down");
                CHECK_FP16_ENCODE(s * (float)ldexp(4.0 * (1024 + m) + 3, e - 12), sbit | (lower + 1),
                                  "three quarters of the way up rounds up");
            }
        }
}

MPT_TEST(fp16_rounds_ties_to_even) {
    for (size_t i = 0; i < sizeof tie_exponents / sizeof *tie_exponents; i++)
        for (size_t j = 0; j < sizeof tie_mantissas / sizeof *tie_mantissas; j++) {
            int e = tie_exponents[i], m = tie_mantissas[j];
            if (e == 15 && m == 0x3ff) continue;
            uint32_t lower = fp16_fields(0, e + 15, m);
            uint32_t even = (m & 1) ? lower + 1 : lower; /* lower + 1 may carry into the exponent: still right */
            float mid = (float)ldexp(2.0 * (1024 + m) + 1, e - 11);
            CHECK_FP16_ENCODE(mid, even, m & 1 ? "an exact tie above an odd mantissa rounds UP to even"
                                               : "an exact tie above an even mantissa rounds DOWN to even");
            CHECK_FP16_ENCODE(-mid, 0x8000u | even, "a negative tie rounds to even too (same magnitude rule)");
        }
    /* Ties in the subnormal range: halfway between k * 2^-24 and (k + 1) * 2^-24. */
    static const int subnormal_ks[] = {0, 1, 2, 3, 100, 511, 512, 1022};
    for (size_t i = 0; i < sizeof subnormal_ks / sizeof *subnormal_ks; i++) {
        int k = subnormal_ks[i];
        float mid = (float)ldexp(2.0 * k + 1, -25);
        CHECK_FP16_ENCODE(mid, (uint32_t)((k & 1) ? k + 1 : k), "a subnormal tie rounds to the even neighbour");
    }
}

MPT_TEST(fp16_overflow_boundary) {
    uint32_t inf = fp16_fields(0, 31, 0), max = fp16_fields(0, 30, 0x3ff);
    CHECK_FP16_ENCODE(65504.0f, max, "65504 is the largest finite fp16");
    CHECK_FP16_ENCODE(65519.0f, max, "65519 is nearer 65504 than 65536");
    CHECK_FP16_ENCODE(nextafterf(65520.0f, 0), max, "the largest float below 65520 still rounds to 65504");
    CHECK_FP16_ENCODE(65520.0f, inf, "65520 is the tie between 65504 (odd mantissa) and 65536, which is inf");
    CHECK_FP16_ENCODE(65536.0f, inf, "65536 = 2^16 is past the fp16 range");
    CHECK_FP16_ENCODE(1e5f, inf, "1e5 overflows fp16");
    CHECK_FP16_ENCODE(3.0e38f, inf, "3e38 overflows fp16");
    CHECK_FP16_ENCODE(FLT_MAX, inf, "FLT_MAX overflows fp16");
    CHECK_FP16_ENCODE(-65504.0f, 0x8000u | max, "-65504");
    CHECK_FP16_ENCODE(-nextafterf(65520.0f, 0), 0x8000u | max, "just above -65520 rounds to -65504");
    CHECK_FP16_ENCODE(-65520.0f, 0x8000u | inf, "-65520 rounds to -inf");
    CHECK_FP16_ENCODE(-1e10f, 0x8000u | inf, "-1e10 overflows to -inf");
}

MPT_TEST(fp16_subnormal_edges) {
    CHECK_FP16_ENCODE(0x1p-24f, 0x0001, "2^-24 is the smallest subnormal");
    CHECK_FP16_ENCODE(0x1p-25f, 0x0000, "2^-25 is the tie between 0 and 2^-24: to even, which is 0");
    CHECK_FP16_ENCODE(nextafterf(0x1p-25f, 1), 0x0001, "just above 2^-25 rounds up to 2^-24");
    CHECK_FP16_ENCODE(nextafterf(0x1p-25f, 0), 0x0000, "just below 2^-25 rounds to zero");
    CHECK_FP16_ENCODE(0x1.8p-24f, 0x0002, "1.5 * 2^-24 is a tie: rounds to 2 * 2^-24 (even)");
    CHECK_FP16_ENCODE(0x1.4p-23f, 0x0002, "2.5 * 2^-24 is a tie: rounds to 2 * 2^-24 (even)");
    CHECK_FP16_ENCODE(0x1.8p-23f, 0x0003, "3 * 2^-24 is exact");
    CHECK_FP16_ENCODE(6e-8f, 0x0001, "6e-8 is about 1.007 * 2^-24");
    CHECK_FP16_ENCODE(1e-8f, 0x0000, "1e-8 is about 0.17 * 2^-24: rounds to zero");
    CHECK_FP16_ENCODE(5e-5f, 0x0347, "5e-5 = 838.86 * 2^-24: a subnormal");
    CHECK_FP16_ENCODE(0x3ffp-24f, 0x03ff, "1023 * 2^-24 is the largest subnormal");
    CHECK_FP16_ENCODE(0x7fdp-25f, 0x03fe, "1022.5 * 2^-24 is a tie: to 1022 * 2^-24 (even)");
    CHECK_FP16_ENCODE(0x7ffp-25f, 0x0400, "1023.5 * 2^-24 is the tie between the largest subnormal (odd) and 2^-14");
    CHECK_FP16_ENCODE(nextafterf(0x1p-14f, 0), 0x0400, "2^-14 minus a bit rounds up to the smallest normal");
    CHECK_FP16_ENCODE(0x1p-14f, 0x0400, "2^-14 is the smallest normal");
    CHECK_FP16_ENCODE(nextafterf(0x1p-14f, 1), 0x0400, "2^-14 plus a bit rounds back to 2^-14");
    CHECK_FP16_ENCODE(1e-40f, 0x0000, "a float subnormal is far below 2^-25: zero");
    CHECK_FP16_ENCODE(0x1p-30f, 0x0000, "2^-30 rounds to zero");
}

MPT_TEST(fp16_signed_zero_inf_nan) {
    CHECK_FP16_ENCODE(0.0f, 0x0000, "+0");
    CHECK_FP16_ENCODE(-0.0f, 0x8000, "-0 keeps its sign");
    CHECK_FP16_ENCODE(-1e-30f, 0x8000, "a tiny negative value rounds to -0, not +0");
    CHECK_FP16_ENCODE(-0x1p-25f, 0x8000, "-2^-25 ties to -0");
    CHECK_FP16_ENCODE(INFINITY, 0x7c00, "+inf");
    CHECK_FP16_ENCODE(-INFINITY, 0xfc00, "-inf");
    /* NaN: sign kept, quiet bit 0x0200 set, the float's top 9 payload bits (bits 21..13) kept. */
    CHECK_FP16_ENCODE(ref_bits_float(0x7fc00000u), 0x7e00, "the default quiet NaN");
    CHECK_FP16_ENCODE(ref_bits_float(0xffc00000u), 0xfe00, "a negative quiet NaN keeps its sign");
    CHECK_FP16_ENCODE(ref_bits_float(0x7f800001u), 0x7e00,
                      "a signalling NaN whose payload is only in the low bits must not become inf");
    CHECK_FP16_ENCODE(ref_bits_float(0x7fa00000u), 0x7f00, "payload bit 21 -> fp16 bit 8, plus the quiet bit");
    CHECK_FP16_ENCODE(ref_bits_float(0xff802000u), 0xfe01, "payload bit 13 -> fp16 bit 0, plus the quiet bit");
    CHECK_FP16_ENCODE(ref_bits_float(0x7fffffffu), 0x7fff, "all payload bits set");
}

/* Random floats against the reference: most draws land in and around the fp16 range (exponents 2^-27..2^17),
 * an eighth of them are forced onto a tie, and some are any 32-bit pattern (NaNs, infs, huge and tiny values). */
MPT_TEST(fp16_random_floats_match_reference) {
    enum { DRAWS = 1 << 20, MAX_REPORTED = 8 };
    int wrong = 0;
    for (uint32_t i = 0; i < DRAWS; i++) {
        uint32_t r = mp_hash32(0x1ab03 ^ mpt_seed(), i), r2 = mp_hash32(0x2ab03 ^ mpt_seed(), i);
        uint32_t u;
        if (i % 4 == 3) {
            u = r;
        } else {
            uint32_t exp_field = 127 - 27 + r2 % 45; /* 2^-27 .. 2^17 */
            uint32_t mantissa = r & 0x7fffffu;
            if (i % 8 == 1) mantissa = (mantissa & ~0x1fffu) | 0x1000u; /* a tie in the fp16 normal range */
            u = (r2 & 0x80000000u) | exp_field << 23 | mantissa;
        }
        float x = ref_bits_float(u);
        if (!CHECK_FP16_ENCODE(x, ref_encode(&REF_FP16, x), "(random float)") && ++wrong >= MAX_REPORTED) {
            mpt_fail(__FILE__, __LINE__, "stopped after %d wrong answers out of %u draws", wrong, i + 1);
            return;
        }
    }
}
