/* lab03_reference.h: the lab 03 tests' own model of fp16 and bf16, written in double arithmetic (frexp, ldexp,
 * rint) so that it shares no bit tricks with the code under test, plus messages that name the likely mistake. */
#ifndef LAB03_REFERENCE_H
#define LAB03_REFERENCE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A binary format with 1 sign bit, exp_bits exponent bits and man_bits stored mantissa bits, IEEE-style:
 * bias 2^(exp_bits-1)-1, exponent field 0 = zero/subnormal, all ones = inf/NaN. */
typedef struct {
    const char *name;
    int exp_bits, man_bits;
} ref_format;

static const ref_format REF_FP16 = {"fp16", 5, 10};
static const ref_format REF_BF16 = {"bf16", 8, 7};

static inline int ref_bias(const ref_format *f) { return (1 << (f->exp_bits - 1)) - 1; }
static inline uint32_t ref_sign_bit(const ref_format *f) { return 1u << (f->exp_bits + f->man_bits); }
static inline uint32_t ref_inf_bits(const ref_format *f) { return ((1u << f->exp_bits) - 1) << f->man_bits; }
static inline uint32_t ref_quiet_bit(const ref_format *f) { return 1u << (f->man_bits - 1); }
static inline uint32_t ref_man_mask(const ref_format *f) { return (1u << f->man_bits) - 1; }
static inline int ref_is_nan(const ref_format *f, uint32_t bits) {
    return (bits & ref_inf_bits(f)) == ref_inf_bits(f) && (bits & ref_man_mask(f)) != 0;
}

static inline uint32_t ref_float_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float ref_bits_float(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* How the reference rounds: the right way, and two wrong ways it uses to recognise a student's mistake. */
typedef enum { REF_NEAREST_EVEN, REF_TRUNCATE, REF_HALF_AWAY } ref_rounding;

/* The value of a bit pattern, from its fields: (-1)^s * 2^(e-bias) * 1.m, or 2^(1-bias) * 0.m when e == 0. */
static inline double ref_decode(const ref_format *f, uint32_t bits) {
    int bias = ref_bias(f);
    uint32_t exp_field = (bits >> f->man_bits) & ((1u << f->exp_bits) - 1);
    uint32_t man = bits & ref_man_mask(f);
    double sign = (bits & ref_sign_bit(f)) ? -1.0 : 1.0;
    if (exp_field == (1u << f->exp_bits) - 1) return man ? NAN : sign * INFINITY;
    if (exp_field == 0) return sign * ldexp((double)man, 1 - bias - f->man_bits);
    return sign * ldexp((double)(man + (1u << f->man_bits)), (int)exp_field - bias - f->man_bits);
}

/* float -> format bits. A finite |x| is written as q * 2^(e - man_bits) with e = max(floor(log2|x|), 1 - bias):
 * q is |x| measured in units of the format's spacing there, and rounding q to an integer is the whole job.
 * The bit pattern is then ((e + bias) << man_bits) + q - 2^man_bits, which is right for subnormals (e = 1 - bias,
 * q < 2^man_bits), for a carry into the next binade (q = 2^(man_bits+1)) and for overflow (reaches the inf
 * pattern). NaN: sign kept, quiet bit set, the float's top mantissa bits kept. */
static inline uint32_t ref_encode_with(const ref_format *f, float x, ref_rounding how) {
    uint32_t xb = ref_float_bits(x);
    uint32_t sign = (xb >> 31) ? ref_sign_bit(f) : 0;
    if (isnan(x)) return sign | ref_inf_bits(f) | ref_quiet_bit(f) | ((xb & 0x7fffffu) >> (23 - f->man_bits));
    if (isinf(x)) return sign | ref_inf_bits(f);
    double a = fabs((double)x);
    if (a == 0) return sign;
    int k;
    frexp(a, &k); /* a = frac * 2^k, frac in [0.5, 1): floor(log2 a) = k - 1 */
    int bias = ref_bias(f);
    int e = k - 1 < 1 - bias ? 1 - bias : k - 1;
    double scaled = ldexp(a, f->man_bits - e); /* exact: a has 24 significant bits, a double 53 */
    double q = how == REF_NEAREST_EVEN ? rint(scaled) : how == REF_TRUNCATE ? floor(scaled) : floor(scaled + 0.5);
    double bits = ldexp((double)(e + bias), f->man_bits) + q - ldexp(1.0, f->man_bits);
    if (bits >= (double)ref_inf_bits(f)) return sign | (how == REF_TRUNCATE ? ref_inf_bits(f) - 1 : ref_inf_bits(f));
    return sign | (uint32_t)bits;
}
static inline uint32_t ref_encode(const ref_format *f, float x) { return ref_encode_with(f, x, REF_NEAREST_EVEN); }

/* Is finite x exactly halfway between two neighbours of the format? */
static inline int ref_is_tie(const ref_format *f, float x) {
    double a = fabs((double)x);
    if (!isfinite(a) || a == 0) return 0;
    int k;
    frexp(a, &k);
    int e = k - 1 < 1 - ref_bias(f) ? 1 - ref_bias(f) : k - 1;
    double scaled = ldexp(a, f->man_bits - e);
    return scaled - floor(scaled) == 0.5;
}

/* "0x3c00 = 0|01111|0000000000 = 1" : the bits as sign|exponent|mantissa, and the value. */
static inline const char *ref_describe(const ref_format *f, uint32_t bits, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "0x%0*x = %u|", (1 + f->exp_bits + f->man_bits + 3) / 4, bits,
                     (bits & ref_sign_bit(f)) ? 1u : 0u);
    for (int i = f->exp_bits + f->man_bits - 1; i >= 0 && n < (int)cap; i--) {
        n += snprintf(buf + n, cap - (size_t)n, "%u%s", (bits >> i) & 1u, i == f->man_bits ? "|" : "");
    }
    if (n < (int)cap) snprintf(buf + n, cap - (size_t)n, " = %.9g", ref_decode(f, bits));
    return buf;
}

/* "0x3dcccccd = 0|01111011|10011001100110011001101 = 0.100000001" for a float input. */
static inline const char *ref_describe_float(float x, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "0x%08x = %u|", ref_float_bits(x), ref_float_bits(x) >> 31);
    for (int i = 30; i >= 0 && n < (int)cap; i--)
        n += snprintf(buf + n, cap - (size_t)n, "%u%s", (ref_float_bits(x) >> i) & 1u, i == 23 ? "|" : "");
    if (n < (int)cap) snprintf(buf + n, cap - (size_t)n, " = %.9g", (double)x);
    return buf;
}

/* The mistake that best explains getting `got` instead of `expected` when encoding x. */
static inline const char *ref_likely_mistake(const ref_format *f, float x, uint32_t expected, uint32_t got) {
    uint32_t sign = ref_sign_bit(f), inf = ref_inf_bits(f), mag_e = expected & ~sign, mag_g = got & ~sign;
    if (ref_is_nan(f, expected)) {
        if (mag_g == inf) return "a NaN became inf: when the exponent is all ones and the mantissa is not zero you "
                                 "must set the quiet bit so the mantissa cannot end up zero";
        if (!ref_is_nan(f, got)) return "a NaN input must give a NaN (exponent all ones, quiet bit set)";
        if ((got & sign) != (expected & sign)) return "a NaN keeps its sign bit";
        if (!(got & ref_quiet_bit(f))) return "a NaN must come out quiet: set the top mantissa bit";
        return "keep the float's top mantissa bits as the NaN payload (shift right, do not round a NaN)";
    }
    if ((got & sign) != (expected & sign)) return "the sign bit is wrong: copy bit 31 of the float to the top bit "
                                                  "(zero and tiny negative values keep their sign too)";
    if (mag_e == inf && mag_g == inf - 1)
        return "overflow must give inf: a value that rounds past the largest finite number is inf, not saturated";
    if (mag_e == inf) return "this value rounds past the largest finite number, so the answer is inf";
    if (mag_g == inf) return "you overflowed to inf too early: only values that ROUND past the largest finite one "
                             "are inf";
    if (got == ref_encode_with(f, x, REF_TRUNCATE))
        return ref_is_tie(f, x) ? "you truncated instead of rounding: this is an exact tie (guard bit 1, no sticky "
                                  "bits) and the kept mantissa is odd, so it rounds up to the even neighbour"
                                : "you truncated instead of rounding: more than half an ulp was dropped (guard bit 1 "
                                  "and a sticky bit below it set), so the kept part must go up by one";
    if (got == ref_encode_with(f, x, REF_HALF_AWAY))
        return "you rounded a tie away from zero: an exact tie goes to the neighbour whose last mantissa bit is 0";
    uint32_t exp_field_e = mag_e >> f->man_bits;
    if (exp_field_e == 0 && mag_g == 0) return "you flushed a subnormal to zero: below the smallest normal number, "
                                               "keep 2^(1-bias) * 0.mantissa";
    if (exp_field_e == 0 && (mag_g == mag_e * 2 || mag_g == mag_e * 2 + 1 || mag_g == mag_e / 2 ||
                             mag_g == (mag_e + 1) / 2 || mag_g + 1 == mag_e * 2 || mag_g == mag_e / 2 + 1))
        return "subnormal shift off by one: the subnormal spacing is 2^(1-bias-man_bits), the same as the smallest "
               "normal binade's";
    if (exp_field_e <= 1 && (mag_g >> f->man_bits) == 0)
        return "the subnormal path is wrong: there is no implicit leading 1, and rounding may carry into the "
               "smallest normal";
    if (mag_g + 1 == mag_e || mag_g == mag_e + 1)
        return "off by one ulp: check the round/sticky decision (a tie only when the dropped bits are exactly 100..0)";
    if ((mag_g & ref_man_mask(f)) == (mag_e & ref_man_mask(f)))
        return "the exponent field is wrong: rebias (subtract 127, add the format's bias) and check the carry";
    return "compare the fields above bit by bit";
}

/* ------------------------------------------------------------------ checks with a helpful message */

#include "mptest.h"

typedef uint16_t (*ref_encode_fn)(float x);
typedef float (*ref_decode_fn)(uint16_t bits);

/* Encode x with the student's function and compare with `expected`; on a mismatch the message shows the input,
 * both answers as sign|exponent|mantissa and the likely mistake. Returns 1 when they agree. */
static inline int ref_check_encode_at(const char *file, int line, const ref_format *f, ref_encode_fn encode,
                                      const char *fn_name, float x, uint32_t expected, const char *why) {
    uint32_t got = encode(x);
    mpt_observe(file, line, got); /* what the grader compares with the reference regions' answer */
    if (got == expected) return 1;
    char in[160], e[96], g[96];
    mpt_fail(file, line,
             "%s(%.9g) %s\n      input:    %s\n      expected: %s\n      got:      %s\n      likely mistake: %s",
             fn_name, (double)x, why, ref_describe_float(x, in, sizeof in), ref_describe(f, expected, e, sizeof e),
             ref_describe(f, got, g, sizeof g), ref_likely_mistake(f, x, expected, got));
    return 0;
}
#define CHECK_FP16_ENCODE(x, expected, why) \
    ref_check_encode_at(__FILE__, __LINE__, &REF_FP16, fp16_from_float, "fp16_from_float", (x), (expected), (why))
#define CHECK_BF16_ENCODE(x, expected, why) \
    ref_check_encode_at(__FILE__, __LINE__, &REF_BF16, bf16_from_float, "bf16_from_float", (x), (expected), (why))

/* The mistake that best explains decoding `bits` to `got` instead of the value `expected`. */
static inline const char *ref_likely_decode_mistake(const ref_format *f, uint32_t bits, double expected, float got) {
    int bias = ref_bias(f);
    uint32_t exp_field = (bits >> f->man_bits) & ((1u << f->exp_bits) - 1), man = bits & ref_man_mask(f);
    double sign = (bits & ref_sign_bit(f)) ? -1.0 : 1.0, g = (double)got;
    if (exp_field == (1u << f->exp_bits) - 1)
        return man ? "exponent all ones with a nonzero mantissa is NaN: keep the sign and the payload bits"
                   : "exponent all ones with a zero mantissa is inf (with the sign)";
    if (signbit(g) != signbit(expected)) return "the sign bit is wrong: it moves to bit 31 (zeros keep it too)";
    if (exp_field == 0 && man != 0) {
        if (g == sign * ldexp((double)(man + (1u << f->man_bits)), 1 - bias - f->man_bits))
            return "a subnormal has no implicit leading 1: its value is 2^(1-bias) * 0.mantissa";
        if (g == sign * ldexp((double)man, -bias - f->man_bits))
            return "subnormal exponent off by one: a subnormal's scale is 2^(1-bias), the same as the smallest "
                   "normal's, not 2^(0-bias)";
        if (g == 0) return "you flushed a subnormal to zero";
    }
    if (g == 2 * expected || 2 * g == expected) return "exponent off by one: check the bias you subtract and add";
    if (fabs(g) >= 1e30 && fabs(expected) < 1e30) return "wrong rebias: fp32's bias is 127";
    return "rebuild the float from the fields: sign to bit 31, exponent - bias + 127 to bits 30..23, mantissa to the "
           "top of bits 22..0";
}

#endif
