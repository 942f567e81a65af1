/* test_decode.c: lab 03 visible tests, part A: decoding every fp16 and bf16 bit pattern, and round trips. */
#include "fp/half.h"
#include "lab03_reference.h"
#include "mptest.h"

#include <math.h>
#include <stdbool.h>

enum { MAX_REPORTED = 6 }; /* per test: enough examples to see the pattern, not 65,536 of them */

/* Decode every pattern with the student's function and compare with the value built from the fields in double
 * arithmetic (ref_decode uses ldexp, not bit moves). NaNs: still NaN, same sign, the payload below the quiet bit
 * in the float's top mantissa bits. fp16_to_float must set the quiet bit (the handout: the payload kept, made
 * quiet, as F16C's vcvtph2ps does); bf16_to_float, the top half of the float, may leave a signalling NaN as it is. */
static void check_decode_all(const ref_format *f, ref_decode_fn decode, const char *fn_name, bool must_quiet) {
    int wrong = 0;
    uint32_t first_wrong = 0;
    for (uint32_t bits = 0; bits < 65536; bits++) {
        float got = decode((uint16_t)bits);
        uint32_t got_bits = ref_float_bits(got);
        MPT_OBSERVE(isnan(got) ? got_bits | 0x400000u : got_bits); /* a NaN may come back quiet or not */
        char d[96];
        if (ref_is_nan(f, bits)) {
            uint32_t shift = 23 - (uint32_t)f->man_bits;
            uint32_t payload = bits & (ref_quiet_bit(f) - 1); /* the bits below the quiet bit */
            uint32_t sign_ok = (got_bits >> 31) == ((bits & ref_sign_bit(f)) ? 1u : 0u);
            uint32_t payload_ok = (got_bits & 0x3fffffu) == payload << shift;
            uint32_t quiet_ok = (!must_quiet && !(bits & ref_quiet_bit(f))) || (got_bits & 0x400000u);
            if (isnan(got) && sign_ok && payload_ok && quiet_ok) continue;
            if (wrong++ == 0) first_wrong = bits;
            if (wrong <= MAX_REPORTED)
                mpt_fail(__FILE__, __LINE__,
                         "%s(%s): a NaN must decode to a NaN with the same sign, quiet bit and payload\n"
                         "      expected: NaN with float bits 0x%08x%s\n"
                         "      got:      %.9g (bits 0x%08x)\n      likely mistake: %s",
                         fn_name, ref_describe(f, bits, d, sizeof d),
                         ((bits & ref_sign_bit(f)) ? 0x80000000u : 0) | 0x7f800000u |
                             ((bits & ref_man_mask(f)) << shift) | (must_quiet ? 0x400000u : 0),
                         must_quiet ? " (made quiet: bit 22 set)" : " (bit 22, the quiet bit, may also be set)",
                         (double)got, got_bits,
                         !isnan(got) ? "exponent all ones with a nonzero mantissa is NaN, not a number or inf"
                         : !sign_ok  ? "keep the sign bit of a NaN"
                         : !quiet_ok ? "a decoded fp16 NaN is quiet: set fp32's quiet bit 0x00400000 (a signalling "
                                       "NaN comes out quiet, as vcvtph2ps gives it)"
                                     : "shift the payload to the top of the float mantissa (by 23 - mantissa bits)");
            continue;
        }
        double expected = ref_decode(f, bits);
        float expected_f = (float)expected; /* exact: every fp16 and bf16 value is a float */
        if (got_bits == ref_float_bits(expected_f)) continue;
        if (wrong++ == 0) first_wrong = bits;
        if (wrong <= MAX_REPORTED)
            mpt_fail(__FILE__, __LINE__,
                     "%s(%s)\n      expected: %.9g (float bits 0x%08x)\n      got:      %.9g (float bits 0x%08x)\n"
                     "      likely mistake: %s",
                     fn_name, ref_describe(f, bits, d, sizeof d), expected, ref_float_bits(expected_f), (double)got,
                     got_bits, ref_likely_decode_mistake(f, bits, expected, got));
    }
    MPT_CHECK(wrong == 0, "%s: %d of 65536 bit patterns decoded wrong (the first is 0x%04x)", fn_name, wrong,
              first_wrong);
}

MPT_TEST(fp16_decode_all_patterns) { check_decode_all(&REF_FP16, fp16_to_float, "fp16_to_float", true); }

MPT_TEST(bf16_decode_all_patterns) { check_decode_all(&REF_BF16, bf16_to_float, "bf16_to_float", false); }

/* Every fp16/bf16 value is exactly a float, so encoding the decoded value must give the same bits back: an exact
 * value never rounds. A NaN comes back quiet: the same bits with the quiet bit set. */
static void check_roundtrip_all(const ref_format *f, ref_decode_fn decode, ref_encode_fn encode, const char *what) {
    int wrong = 0;
    for (uint32_t bits = 0; bits < 65536; bits++) {
        float value = decode((uint16_t)bits);
        uint32_t back = encode(value);
        MPT_OBSERVE(back);
        uint32_t expected = ref_is_nan(f, bits) ? bits | ref_quiet_bit(f) : bits;
        if (back == expected) continue;
        if (++wrong <= MAX_REPORTED) {
            char e[96], g[96];
            mpt_fail(__FILE__, __LINE__,
                     "%s: encode(decode(bits)) must give the bits back%s\n      expected: %s\n"
                     "      got:      %s (via the float %.9g, bits 0x%08x)\n      likely mistake: %s",
                     what, ref_is_nan(f, bits) ? " (a NaN with its quiet bit set)" : "",
                     ref_describe(f, expected, e, sizeof e), ref_describe(f, back, g, sizeof g), (double)value,
                     ref_float_bits(value),
                     (float)ref_decode(f, bits) != value && !ref_is_nan(f, bits)
                         ? "the decode is already wrong here; fix the decode test first"
                         : ref_likely_mistake(f, value, expected, back));
        }
    }
    MPT_CHECK(wrong == 0, "%s: %d of 65536 bit patterns did not survive decode then encode", what, wrong);
}

MPT_TEST(fp16_roundtrip_all_patterns) {
    check_roundtrip_all(&REF_FP16, fp16_to_float, fp16_from_float, "fp16_from_float(fp16_to_float(h))");
}

MPT_TEST(bf16_roundtrip_all_patterns) {
    check_roundtrip_all(&REF_BF16, bf16_to_float, bf16_from_float, "bf16_from_float(bf16_to_float(b))");
}
