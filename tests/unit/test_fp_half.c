/* test_fp_half.c: Criterion tests of the fp16/bf16 scalar codecs (fp/half.c): every pattern, every tie, NaN payloads,
 * and agreement with the CPU's own conversion instructions where the CPU has them. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "base/rng.h"
#include "fp/half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

/* The value of an fp16 pattern from its definition, in double: an independent reference for decoding. */
static double fp16_value(uint16_t h) {
    int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    double magnitude = exponent == 0 ? ldexp(mantissa, -24) : ldexp(1024 + mantissa, exponent - 25);
    return sign ? -magnitude : magnitude;
}

static int fp16_is_nan(uint16_t h) { return (h & 0x7fff) > 0x7c00; }
static int bf16_is_nan(uint16_t b) { return (b & 0x7fff) > 0x7f80; }

Test(fp_half, fp16_decode_every_pattern_matches_definition) {
    for (uint32_t h = 0; h < 65536; h++) {
        float got = fp16_to_float((uint16_t)h);
        uint32_t bits = fp_float_bits(got);
        if ((h & 0x7c00) == 0x7c00) {
            uint32_t mantissa = h & 0x3ff;
            uint32_t expected = ((h & 0x8000u) << 16) | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0);
            cr_assert_eq(bits, expected, "fp16 0x%04x (inf/NaN) -> fp32 0x%08x, expected 0x%08x (payload kept, quiet)",
                         h, bits, expected);
        } else {
            double expected = fp16_value((uint16_t)h);
            cr_assert(got == expected && !signbit(got) == !signbit(expected),
                      "fp16 0x%04x -> %.9g, expected %.9g", h, (double)got, expected);
        }
    }
}

Test(fp_half, fp16_encode_decode_roundtrip_every_pattern) {
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t back = fp16_from_float(fp16_to_float((uint16_t)h));
        uint16_t expected = fp16_is_nan((uint16_t)h) ? (uint16_t)(h | 0x0200) : (uint16_t)h;
        cr_assert_eq(back, expected, "fp16 0x%04x -> float -> 0x%04x, expected 0x%04x", h, back, expected);
    }
}

Test(fp_half, bf16_encode_decode_roundtrip_every_pattern) {
    for (uint32_t b = 0; b < 65536; b++) {
        float value = bf16_to_float((uint16_t)b);
        cr_assert_eq(fp_float_bits(value), b << 16, "bf16 decode is the top half of an fp32: 0x%04x", b);
        uint16_t back = bf16_from_float(value);
        uint16_t expected = bf16_is_nan((uint16_t)b) ? (uint16_t)(b | 0x0040) : (uint16_t)b;
        cr_assert_eq(back, expected, "bf16 0x%04x -> float -> 0x%04x, expected 0x%04x", b, back, expected);
    }
}

/* Between consecutive fp16 values lo < hi (positive, finite, and from max to the virtual 65536): the midpoint
 * goes to the one with the even last bit, and one fp32 ulp either side goes to the nearer one. */
Test(fp_half, fp16_encode_every_midpoint_and_its_neighbours) {
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double lo = fp16_value((uint16_t)h);
        double hi = h + 1 == 0x7c00 ? 65536.0 : fp16_value((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2); /* exact: 12 significant bits */
        cr_assert_eq((double)mid, (lo + hi) / 2);
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        for (int sign = 0; sign < 2; sign++) {
            float s = sign ? -1.0f : 1.0f;
            uint16_t sb = (uint16_t)(sign << 15);
            cr_assert_eq(fp16_from_float(s * mid), sb | even, "tie %.9g between 0x%04x and 0x%04x: to even", (double)mid,
                         h, h + 1);
            cr_assert_eq(fp16_from_float(s * nextafterf(mid, 0.0f)), sb | h, "just below the midpoint of 0x%04x", h);
            cr_assert_eq(fp16_from_float(s * nextafterf(mid, INFINITY)), sb | (h + 1),
                         "just above the midpoint of 0x%04x", h);
        }
    }
}

Test(fp_half, fp16_known_values) {
    static const struct {
        uint32_t in;
        uint16_t out;
        const char *why;
    } cases[] = {
        {0x3f800000, 0x3c00, "1.0"},
        {0x3dcccccd, 0x2e66, "0.1 rounds to 0.0999755859375"},
        {0x477fe000, 0x7bff, "65504 = max"},
        {0x477fefff, 0x7bff, "just below 65520 rounds down to max"},
        {0x477ff000, 0x7c00, "65520: tie between max (odd) and 65536: overflow to inf"},
        {0x47800000, 0x7c00, "65536 -> inf"},
        {0x7f7fffff, 0x7c00, "FLT_MAX -> inf"},
        {0x7f800000, 0x7c00, "inf"},
        {0xff800000, 0xfc00, "-inf"},
        {0x38800000, 0x0400, "2^-14: smallest normal"},
        {0x387fc000, 0x03ff, "largest subnormal"},
        {0x387fe000, 0x0400, "tie between largest subnormal (odd) and min normal: up"},
        {0x33800000, 0x0001, "2^-24: smallest subnormal"},
        {0x33000000, 0x0000, "2^-25: tie between 0 and 2^-24: to even, 0"},
        {0x33000001, 0x0001, "just above 2^-25: up"},
        {0x33c00000, 0x0002, "1.5 * 2^-24: tie, to even 2"},
        {0x80000000, 0x8000, "-0"},
        {0x00000001, 0x0000, "smallest fp32 subnormal -> +0"},
        {0x80000001, 0x8000, "smallest negative fp32 subnormal -> -0"},
        {0x7f800001, 0x7e00, "signalling NaN: quiet bit set, low payload dropped"},
        {0x7fa00000, 0x7f00, "NaN payload bit 21 -> fp16 bit 8"},
        {0x7f802000, 0x7e01, "lowest kept payload bit"},
        {0x7fc00000, 0x7e00, "canonical quiet NaN"},
        {0xffc00001, 0xfe00, "negative NaN keeps its sign"},
        {0x7fbfffff, 0x7fff, "all payload bits set"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = fp16_from_float(fp_float_from_bits(cases[i].in));
        cr_expect_eq(got, cases[i].out, "fp16(fp32 0x%08x) = 0x%04x, expected 0x%04x (%s)", cases[i].in, got,
                     cases[i].out, cases[i].why);
    }
}

Test(fp_half, bf16_known_values) {
    static const struct {
        uint32_t in;
        uint16_t out;
        const char *why;
    } cases[] = {
        {0x3f800000, 0x3f80, "1.0"},
        {0x3f808000, 0x3f80, "tie, kept part even: down"},
        {0x3f818000, 0x3f82, "tie, kept part odd: up"},
        {0x3f808001, 0x3f81, "just above the tie: up"},
        {0x3dcccccd, 0x3dcd, "0.1"},
        {0x7f7f7fff, 0x7f7f, "just below the overflow tie: max bf16"},
        {0x7f7f8000, 0x7f80, "tie between max (odd) and 2^128: inf"},
        {0x7f7fffff, 0x7f80, "FLT_MAX -> inf"},
        {0xff800000, 0xff80, "-inf"},
        {0x00010000, 0x0001, "fp32 subnormal -> bf16 subnormal (not flushed)"},
        {0x00008000, 0x0000, "tie between 0 and the smallest bf16 subnormal: to even, 0"},
        {0x00018000, 0x0002, "subnormal tie, odd: up"},
        {0x007fffff, 0x0080, "largest fp32 subnormal rounds up to the smallest normal"},
        {0x80000000, 0x8000, "-0"},
        {0x7f800001, 0x7fc0, "signalling NaN: quiet, not inf"},
        {0x7fa00000, 0x7fe0, "NaN payload kept"},
        {0xff812345, 0xffc1, "negative NaN: sign and top payload bits kept"},
        {0x7fffffff, 0x7fff, "NaN whose rounding would carry: stays NaN"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = bf16_from_float(fp_float_from_bits(cases[i].in));
        cr_expect_eq(got, cases[i].out, "bf16(fp32 0x%08x) = 0x%04x, expected 0x%04x (%s)", cases[i].in, got,
                     cases[i].out, cases[i].why);
    }
}

/* The research notes' formula for fp32 -> bf16 (NaN handled first), on a stride through every fp32 pattern. */
Test(fp_half, bf16_encode_matches_integer_formula_on_a_stride) {
    for (uint64_t u = 0; u < (1ull << 32); u += 61) {
        uint32_t x = (uint32_t)u;
        uint16_t expected = (x & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((x >> 16) | 0x40)
                                                             : (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
        uint16_t got = bf16_from_float(fp_float_from_bits(x));
        cr_assert_eq(got, expected, "bf16(fp32 0x%08x) = 0x%04x, expected 0x%04x", x, got, expected);
    }
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("f16c"))) static uint16_t f16c_encode(float x) {
    return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
__attribute__((target("f16c"))) static float f16c_decode(uint16_t h) { return _cvtsh_ss(h); }

/* The CPU's vcvtps2ph as an independent oracle: every 31st fp32 pattern (all classes, both signs) and
 * every fp16 pattern decoded. (A full sweep of all 2^32 floats agreed too; it takes 20 s.) */
Test(fp_half, fp16_matches_f16c_instructions) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("f16c")) cr_skip_test("this CPU has no F16C");
    for (uint64_t u = 0; u < (1ull << 32); u += 31) {
        float x = fp_float_from_bits((uint32_t)u);
        uint16_t ours = fp16_from_float(x), cpu = f16c_encode(x);
        cr_assert_eq(ours, cpu, "fp16(fp32 0x%08x): ours 0x%04x, vcvtps2ph 0x%04x", (uint32_t)u, ours, cpu);
    }
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t ours = fp_float_bits(fp16_to_float((uint16_t)h)), cpu = fp_float_bits(f16c_decode((uint16_t)h));
        cr_assert_eq(ours, cpu, "fp16 0x%04x -> ours 0x%08x, vcvtph2ps 0x%08x", h, ours, cpu);
    }
}

__attribute__((target("avx512f,avx512vl,avx512bf16"))) static uint16_t avx512bf16_encode(float x) {
    __m128bh r = _mm_cvtneps_pbh(_mm_set1_ps(x));
    uint16_t out[8];
    __builtin_memcpy(out, &r, sizeof(uint16_t) * 4);
    return out[0];
}

/* vcvtneps2bf16 as an oracle for everything but fp32 subnormal inputs, which it flushes to +-0 (we round
 * them, see fp/half.h). */
Test(fp_half, bf16_matches_avx512_bf16_instruction) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512bf16")) cr_skip_test("this CPU has no AVX512-BF16");
    for (uint64_t u = 0; u < (1ull << 32); u += 61) {
        uint32_t x = (uint32_t)u;
        uint16_t ours = bf16_from_float(fp_float_from_bits(x)), cpu = avx512bf16_encode(fp_float_from_bits(x));
        if ((x & 0x7f800000u) == 0) {
            cr_assert_eq(cpu & 0x7fff, 0, "vcvtneps2bf16 flushes fp32 subnormal 0x%08x to zero", x);
            continue;
        }
        cr_assert_eq(ours, cpu, "bf16(fp32 0x%08x): ours 0x%04x, vcvtneps2bf16 0x%04x", x, ours, cpu);
    }
}
#endif

/* Random floats, spread over all exponents: encoding then decoding moves a value by at most half a spacing. */
Test(fp_half, fp16_error_within_half_ulp_on_random_floats) {
    mp_rng rng;
    mp_rng_seed(&rng, 3);
    for (int i = 0; i < 1000000; i++) {
        float x = fp_float_from_bits(mp_rng_u32(&rng));
        if (!(fabsf(x) < 65504.0f)) continue;
        double back = fp16_to_float(fp16_from_float(x));
        double spacing = fabs(x) < 6.103515625e-05 ? ldexp(1, -24) : ldexp(1, ilogb(x) - 10);
        cr_assert(fabs(back - x) <= spacing / 2, "fp16 of %.9g came back as %.9g: more than half an ulp (%.3g) away",
                  (double)x, back, spacing);
    }
}
