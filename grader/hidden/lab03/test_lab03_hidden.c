/* test_lab03_hidden.c: lab 03 hidden tests: the tie pattern at every fp32 exponent, negative subnormals, the gap
 * between the largest subnormal and the smallest normal, NaN payload rules, a sweep of all floats, bf16 edges. */
#include "../../../labs/lab03-float-formats/tests/lab03_reference.h" /* the visible tests' double-based model */
#include "base/rng.h"
#include "fp/half.h"
#include "mptest.h"

#include <float.h>
#include <math.h>

enum { MAX_REPORTED = 8 };

/* Stop a long loop after a few reported mismatches: the first ones show the pattern. */
#define STOP_AFTER_TOO_MANY(wrong, where) \
    do { \
        if ((wrong) >= MAX_REPORTED) { \
            mpt_fail(__FILE__, __LINE__, "stopped after %d wrong answers (%s)", (wrong), (where)); \
            return; \
        } \
    } while (0)

/* For every fp32 exponent field 0..254 (both signs): the number of float mantissa bits the format drops there,
 * then mantissas whose dropped part is exactly half (the tie), half - 1, half + 1, zero and all ones, with kept
 * parts whose last bit is even and odd. Expected bits come from the double reference. */
static void check_ties_at_every_exponent(const ref_format *f, ref_encode_fn encode, const char *fn_name) {
    int wrong = 0;
    int bias = ref_bias(f);
    for (int exp_field = 0; exp_field <= 254; exp_field++) {
        int e = exp_field == 0 ? -126 : exp_field - 127;   /* the float's scale (subnormal floats: -126) */
        int format_e = e < 1 - bias ? 1 - bias : e;        /* the format's scale for this magnitude */
        int dropped = (format_e - f->man_bits) - (e - 23); /* float bits below the format's last bit */
        for (int variant = 0; variant < 12; variant++) {
            uint32_t high = mp_hash32(0x7e5 ^ mpt_seed(), (uint64_t)exp_field * 16 + variant) & 0x7fffffu;
            uint32_t mantissa;
            if (dropped <= 0) {
                mantissa = high; /* (does not happen for fp16/bf16: every float has bits to drop) */
            } else if (dropped <= 23) {
                uint32_t half = 1u << (dropped - 1), low_mask = (1u << dropped) - 1;
                uint32_t lows[] = {half, half - 1, half + 1, 0, low_mask, half};
                uint32_t kept = (high & ~low_mask) & 0x7fffffu;
                if (variant % 2) kept ^= 1u << dropped; /* flip the kept part's last bit: even and odd */
                kept &= 0x7fffffu;
                mantissa = kept | (lows[variant % 6] & low_mask);
            } else {
                /* The whole stored mantissa (and maybe the implicit 1) is dropped: value < one format spacing. */
                static const uint32_t patterns[] = {0, 1, 0x400000, 0x7fffff, 0x3fffff, 0x400001};
                mantissa = patterns[variant % 6];
            }
            for (uint32_t sign = 0; sign < 2; sign++) {
                float x = ref_bits_float(sign << 31 | (uint32_t)exp_field << 23 | mantissa);
                if (!ref_check_encode_at(__FILE__, __LINE__, f, encode, fn_name, x, ref_encode(f, x),
                                         "(a tie pattern at this fp32 exponent, or a neighbour of one)"))
                    wrong++;
                STOP_AFTER_TOO_MANY(wrong, "ties at every fp32 exponent");
            }
        }
    }
}

MPT_TEST(fp16_ties_at_every_fp32_exponent) {
    check_ties_at_every_exponent(&REF_FP16, fp16_from_float, "fp16_from_float");
}

MPT_TEST(bf16_ties_at_every_fp32_exponent) {
    check_ties_at_every_exponent(&REF_BF16, bf16_from_float, "bf16_from_float");
}

/* -k * 2^-24 for every subnormal k, the midpoints between them (ties to even), and values just off the midpoints.
 * The expected bits are written from k here: 0x8000 | k. */
MPT_TEST(fp16_negative_subnormals) {
    int wrong = 0;
    for (int k = 0; k < 1024; k++) {
        float exact = -(float)ldexp(k, -24), mid = -(float)ldexp(2.0 * k + 1, -25);
        uint32_t even = (uint32_t)((k & 1) ? k + 1 : k); /* k = 1023: 1024 is 0x0400, the smallest normal */
        wrong += !CHECK_FP16_ENCODE(exact, 0x8000u | (uint32_t)k, "-k * 2^-24 is an exact negative subnormal");
        wrong += !CHECK_FP16_ENCODE(mid, 0x8000u | even, "-(k + 1/2) * 2^-24 is a tie: to the even k");
        wrong += !CHECK_FP16_ENCODE(nextafterf(mid, 0), 0x8000u | (uint32_t)k, "just inside a negative tie");
        wrong += !CHECK_FP16_ENCODE(nextafterf(mid, -INFINITY), 0x8000u | (uint32_t)(k + 1), "just beyond a tie");
        STOP_AFTER_TOO_MANY(wrong, "negative subnormals");
    }
}

/* Every float between 1023 * 2^-24 (the largest subnormal) and 2^-14 (the smallest normal), both signs: 16,385
 * floats per sign. The lower half (below 1023.5 * 2^-24) gives 0x03ff, the tie and above give 0x0400. */
MPT_TEST(fp16_between_largest_subnormal_and_min_normal) {
    uint32_t first = ref_float_bits(0x3ffp-24f), last = ref_float_bits(0x1p-14f), tie = ref_float_bits(0x7ffp-25f);
    int wrong = 0;
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t u = first; u <= last; u++) {
            float x = ref_bits_float(sign << 31 | u);
            uint32_t expected = sign << 15 | (u < tie ? 0x03ffu : 0x0400u);
            if (!CHECK_FP16_ENCODE(x, expected, "between the largest subnormal and the smallest normal")) wrong++;
            STOP_AFTER_TOO_MANY(wrong, "between the largest subnormal and the smallest normal");
        }
}

/* All NaN shapes: sign, fp32 quiet bit, each of the 512 values of payload bits 21..13, and low bits 12..0 that
 * are zero, one, the top one or all ones. Result: sign | 0x7c00 | quiet bit 0x0200 | payload bits 21..13. */
MPT_TEST(fp16_nan_payload_rules) {
    static const uint32_t lows[] = {0, 1, 0x1000, 0x1fff};
    int wrong = 0;
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t quiet = 0; quiet < 2; quiet++)
            for (uint32_t top = 0; top < 512; top++)
                for (size_t l = 0; l < sizeof lows / sizeof *lows; l++) {
                    uint32_t mantissa = quiet << 22 | top << 13 | lows[l];
                    if (mantissa == 0) continue; /* that is inf */
                    float x = ref_bits_float(sign << 31 | 0x7f800000u | mantissa);
                    if (!CHECK_FP16_ENCODE(x, sign << 15 | 0x7c00u | 0x0200u | top, "a NaN: quiet, sign and payload"))
                        wrong++;
                    STOP_AFTER_TOO_MANY(wrong, "NaN payloads");
                }
}

/* The same for bf16: sign | 0x7f80 | quiet bit 0x0040 | payload bits 21..16; the low 16 bits never round. */
MPT_TEST(bf16_nan_payload_rules) {
    static const uint32_t lows[] = {0, 1, 0x8000, 0xffff};
    int wrong = 0;
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t quiet = 0; quiet < 2; quiet++)
            for (uint32_t top = 0; top < 64; top++)
                for (size_t l = 0; l < sizeof lows / sizeof *lows; l++) {
                    uint32_t mantissa = quiet << 22 | top << 16 | lows[l];
                    if (mantissa == 0) continue;
                    float x = ref_bits_float(sign << 31 | 0x7f800000u | mantissa);
                    if (!CHECK_BF16_ENCODE(x, sign << 15 | 0x7f80u | 0x0040u | top, "a NaN: quiet, sign and payload"))
                        wrong++;
                    STOP_AFTER_TOO_MANY(wrong, "NaN payloads");
                }
}

/* Every 257th float bit pattern from 0 to 2^17 (and the negatives), then every 65,537th of all 2^32 patterns. */
MPT_TEST(fp16_strided_sweep_of_all_floats) {
    int wrong = 0;
    uint32_t top = ref_float_bits(131072.0f);
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t u = sign; u < top; u += 257) {
            float x = ref_bits_float(sign << 31 | u);
            if (!CHECK_FP16_ENCODE(x, ref_encode(&REF_FP16, x), "(sweep of the fp16 range)")) wrong++;
            STOP_AFTER_TOO_MANY(wrong, "sweep of the fp16 range");
        }
    for (uint64_t u = 12345; u < (1ull << 32); u += 65537) {
        float x = ref_bits_float((uint32_t)u);
        if (!CHECK_FP16_ENCODE(x, ref_encode(&REF_FP16, x), "(sweep of all floats)")) wrong++;
        STOP_AFTER_TOO_MANY(wrong, "sweep of all floats");
    }
}

MPT_TEST(bf16_overflow_boundary) {
    CHECK_BF16_ENCODE(ref_bits_float(0x7f7f0000u), 0x7f7f, "the largest finite bf16 (about 3.3895e38)");
    CHECK_BF16_ENCODE(ref_bits_float(0x7f7f7fffu), 0x7f7f, "just below the tie above it: rounds down");
    CHECK_BF16_ENCODE(ref_bits_float(0x7f7f8000u), 0x7f80, "the tie above the largest bf16 (odd): rounds up to inf");
    CHECK_BF16_ENCODE(FLT_MAX, 0x7f80, "FLT_MAX rounds to inf in bf16");
    CHECK_BF16_ENCODE(-FLT_MAX, 0xff80, "-FLT_MAX rounds to -inf");
    CHECK_BF16_ENCODE(ref_bits_float(0xff7f7fffu), 0xff7f, "negative, just inside");
    CHECK_BF16_ENCODE(ref_bits_float(0x7f7e8000u), 0x7f7e, "a tie just below the top with an even mantissa: down");
    CHECK_BF16_ENCODE(ref_bits_float(0x7effffffu), 0x7f00, "a carry from the mantissa into the exponent");
}

MPT_TEST(bf16_subnormals_and_signed_zero) {
    CHECK_BF16_ENCODE(-0.0f, 0x8000, "-0 keeps its sign");
    CHECK_BF16_ENCODE(ref_bits_float(0x00000001u), 0x0000, "the smallest float subnormal rounds to +0");
    CHECK_BF16_ENCODE(ref_bits_float(0x80000001u), 0x8000, "the smallest negative float subnormal rounds to -0");
    CHECK_BF16_ENCODE(ref_bits_float(0x00008000u), 0x0000, "a subnormal tie with an even kept part: down to 0");
    CHECK_BF16_ENCODE(ref_bits_float(0x00008001u), 0x0001, "just above that tie: up to the smallest bf16 subnormal");
    CHECK_BF16_ENCODE(ref_bits_float(0x00010000u), 0x0001, "2^-133, the smallest bf16 subnormal, is exact");
    CHECK_BF16_ENCODE(ref_bits_float(0x00018000u), 0x0002, "a subnormal tie with an odd kept part: up");
    CHECK_BF16_ENCODE(ref_bits_float(0x807f8000u), 0x8080, "a negative tie that carries into the smallest normal");
    CHECK_BF16_ENCODE(ref_bits_float(0x007fffffu), 0x0080, "the largest float subnormal rounds to 2^-126");
    CHECK_BF16_ENCODE(ref_bits_float(0x007f7fffu), 0x007f, "just below that tie: the largest bf16 subnormal");
}
