/* test_bf16_encode.c: lab 03 visible tests, part C: fp32 -> bf16 with round-to-nearest-even and NaN handling.
 * bf16 is the top half of a float, so the tests can be stated in float bits: which 16 bits should survive. */
#include "base/rng.h"
#include "fp/half.h"
#include "lab03_reference.h"
#include "mptest.h"

#include <math.h>

/* bf16 bits from fields: sign, biased exponent field (0..255, the same bias as fp32), 7-bit mantissa. */
static uint32_t bf16_fields(int sign, int exp_field, int mantissa) {
    return (uint32_t)(sign << 15 | exp_field << 7 | mantissa);
}

MPT_TEST(bf16_rounds_ties_to_even) {
    CHECK_BF16_ENCODE(1.0f, bf16_fields(0, 127, 0), "1.0 is exact");
    CHECK_BF16_ENCODE(0.1f, 0x3dcd, "0.1 (float bits 0x3dcccccd): the dropped half 0xcccd > 0x8000 rounds up");
    CHECK_BF16_ENCODE(1.0f / 3.0f, 0x3eab, "1/3 (float bits 0x3eaaaaab) rounds up");
    CHECK_BF16_ENCODE(3.14159265f, 0x4049, "pi (float bits 0x40490fdb) rounds down");
    CHECK_BF16_ENCODE(3.0e38f, 0x7f62, "3e38 is inside bf16's range (float bits 0x7f61b1e6)");
    CHECK_BF16_ENCODE(1e-40f, 0x0001, "a float subnormal becomes a bf16 subnormal (float bits 0x000116c2)");
    CHECK_BF16_ENCODE(ref_bits_float(0x7f7fffffu), 0x7f80,
                      "FLT_MAX (float bits 0x7f7fffff) is past the midpoint above bf16's max 0x7f7f: it rounds to inf "
                      "(the carry into the exponent field is right; do not saturate)");
    CHECK_BF16_ENCODE(ref_bits_float(0x7f7f7fffu), 0x7f7f, "just below that midpoint: bf16's max 3.3895e38");
    static const int exponents[] = {-126, -100, -1, 0, 1, 50, 126};
    static const int mantissas[] = {0, 1, 0x2a, 0x55, 0x7e, 0x7f};
    for (size_t i = 0; i < sizeof exponents / sizeof *exponents; i++)
        for (size_t j = 0; j < sizeof mantissas / sizeof *mantissas; j++) {
            int e = exponents[i], m = mantissas[j];
            uint32_t lower = bf16_fields(0, e + 127, m);
            uint32_t even = (m & 1) ? lower + 1 : lower;
            float mid = (float)ldexp(2.0 * (128 + m) + 1, e - 8); /* float bits: lower << 16 | 0x8000 */
            CHECK_BF16_ENCODE(mid, even, m & 1 ? "an exact tie above an odd mantissa rounds UP to even"
                                               : "an exact tie above an even mantissa rounds DOWN to even");
            CHECK_BF16_ENCODE(-mid, 0x8000u | even, "a negative tie rounds to even too");
            CHECK_BF16_ENCODE(nextafterf(mid, 0), lower, "just below a midpoint rounds toward zero");
            CHECK_BF16_ENCODE(nextafterf(mid, INFINITY), lower + 1, "just above a midpoint rounds away from zero");
        }
}

MPT_TEST(bf16_nan_stays_nan) {
    CHECK_BF16_ENCODE(INFINITY, 0x7f80, "+inf");
    CHECK_BF16_ENCODE(-INFINITY, 0xff80, "-inf");
    CHECK_BF16_ENCODE(-0.0f, 0x8000, "-0 keeps its sign");
    CHECK_BF16_ENCODE(ref_bits_float(0x7fc00000u), 0x7fc0, "the default quiet NaN");
    CHECK_BF16_ENCODE(ref_bits_float(0x7f800001u), 0x7fc0,
                      "a NaN whose payload is only in the low 16 bits: rounding it naively gives inf (0x7f80)");
    CHECK_BF16_ENCODE(ref_bits_float(0xff800001u), 0xffc0, "the same, negative");
    CHECK_BF16_ENCODE(ref_bits_float(0x7fffffffu), 0x7fff,
                      "all payload bits set: rounding it naively carries into the sign bit");
    CHECK_BF16_ENCODE(ref_bits_float(0x7f810000u), 0x7fc1, "payload bit 16 -> bf16 bit 0, plus the quiet bit");
}

MPT_TEST(bf16_random_floats_match_reference) {
    enum { DRAWS = 1 << 20, MAX_REPORTED = 8 };
    int wrong = 0;
    for (uint32_t i = 0; i < DRAWS; i++) {
        uint32_t u = mp_hash32(0x3ab03 ^ mpt_seed(), i);
        if (i % 8 == 1) u = (u & ~0xffffu) | 0x8000u; /* an exact tie */
        float x = ref_bits_float(u);
        if (!CHECK_BF16_ENCODE(x, ref_encode(&REF_BF16, x), "(random float)") && ++wrong >= MAX_REPORTED) {
            mpt_fail(__FILE__, __LINE__, "stopped after %d wrong answers out of %u draws", wrong, i + 1);
            return;
        }
    }
}
