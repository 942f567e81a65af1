/* format_impl.h: the format engine's encode/decode as inline functions (internal: format.c, convert.c, hist.c). */
#ifndef MIXPAR_FP_FORMAT_IMPL_H
#define MIXPAR_FP_FORMAT_IMPL_H

/* Why inline: convert.c's scalar reference loops call these with a format that is a compile-time
 * constant, so the compiler folds the layout arithmetic away and the scalar path is a fair baseline for
 * the SIMD paths. They use integer bit operations only, so they do not depend on the rounding mode or
 * the denormal flags of the FPU. Public entry points are fp_encode/fp_decode in format.h. */

#include "fp/format.h"
#include "fp/half.h"

static inline uint32_t fpi_exp_all_ones(const fp_format *f) { return (1u << f->ebits) - 1u; }
static inline uint32_t fpi_magnitude_mask(const fp_format *f) { return (1u << (f->ebits + f->mbits)) - 1u; }

/* The largest finite magnitude's pattern. */
static inline uint32_t fpi_max_bits(const fp_format *f) {
    switch (f->specials) {
    case FP_SPECIALS_IEEE: return (fpi_exp_all_ones(f) << f->mbits) - 1u; /* exponent all-ones - 1, mantissa all ones */
    case FP_SPECIALS_FN: return fpi_magnitude_mask(f) - 1u;                /* all ones is NaN: one below it */
    default: return fpi_magnitude_mask(f);                                 /* every pattern is a number */
    }
}

/* The largest unbiased exponent a finite value can have. */
static inline int fpi_max_exponent(const fp_format *f) {
    return (int)(fpi_max_bits(f) >> f->mbits) - f->bias;
}

/* The pattern (magnitude only) a NaN with fp32 magnitude bits abs_bits becomes. */
static inline uint32_t fpi_nan_magnitude(const fp_format *f, uint32_t abs_bits) {
    switch (f->specials) {
    case FP_SPECIALS_IEEE: {
        /* quiet bit = top mantissa bit; keep the payload bits just below fp32's quiet bit */
        uint32_t quiet = 1u << (f->mbits - 1);
        uint32_t payload = (abs_bits >> (23 - f->mbits)) & (quiet - 1u);
        return (fpi_exp_all_ones(f) << f->mbits) | quiet | payload;
    }
    case FP_SPECIALS_FN: return fpi_magnitude_mask(f);
    default: return fpi_max_bits(f); /* no NaN pattern exists */
    }
}

/* fp_encode: see format.h for the contract. */
static inline uint32_t fpi_encode(const fp_format *f, float x, fp_round mode, int saturate, uint32_t random_bits) {
    const int mbits = f->mbits;
    const int min_exponent = 1 - f->bias; /* exponent of the smallest normal */
    uint32_t bits = fp_float_bits(x);
    uint32_t sign = (bits >> 31) << (f->ebits + mbits);
    uint32_t abs_bits = bits & 0x7fffffffu;

    if (abs_bits > 0x7f800000u) return sign | fpi_nan_magnitude(f, abs_bits);
    if (f->specials == FP_SPECIALS_NONE) saturate = 1; /* nothing else to overflow to */
    uint32_t overflow_magnitude = saturate                            ? fpi_max_bits(f)
                                  : f->specials == FP_SPECIALS_IEEE ? fpi_exp_all_ones(f) << mbits
                                                                      : fpi_magnitude_mask(f);
    if (abs_bits == 0x7f800000u) return sign | overflow_magnitude;
    if (mode == FP_ROUND_TOWARD_ZERO) overflow_magnitude = fpi_max_bits(f);

    /* |x| = significand * 2^(exponent - 23): fp32 normals carry the implicit 1, subnormals do not. */
    uint32_t exponent_field = abs_bits >> 23;
    int exponent = exponent_field ? (int)exponent_field - 127 : -126;
    uint32_t significand = (abs_bits & 0x007fffffu) | (exponent_field ? 0x00800000u : 0u);
    if (exponent > fpi_max_exponent(f)) return sign | overflow_magnitude; /* >= 2^(emax+1) > max */

    /* The result is k * 2^(target_exponent - mbits): the format's spacing in x's binade, or its
     * subnormal spacing below the smallest normal. Dropping `shift` bits of the significand gives k. */
    int target_exponent = exponent < min_exponent ? min_exponent : exponent;
    int shift = 23 - mbits + (target_exponent - exponent);
    uint64_t kept = shift < 64 ? (uint64_t)significand >> shift : 0;
    uint64_t dropped = shift < 64 ? significand & ((1ull << shift) - 1ull) : significand;
    uint32_t exponent_part = (uint32_t)(target_exponent - min_exponent) << mbits;
    if (shift > 0) {
        int round_up = 0;
        if (mode == FP_ROUND_NEAREST_EVEN) {
            /* halfway = 2^(shift-1); significand < 2^24, so past shift 25 it is always below halfway.
             * "Even" is the last bit of the resulting pattern: kept's last bit, except with no mantissa
             * bits (mbits = 0), where kept is the implicit 1 and the exponent's last bit decides. */
            uint64_t halfway = shift <= 40 ? 1ull << (shift - 1) : 1ull << 40;
            uint32_t odd = (exponent_part + (uint32_t)kept) & 1u;
            round_up = dropped > halfway || (dropped == halfway && odd);
        } else if (mode == FP_ROUND_STOCHASTIC) {
            /* P(up) = dropped / 2^shift: compare 32 random bits with dropped scaled to 32 bits */
            uint64_t threshold = shift <= 32 ? dropped << (32 - shift) : shift < 64 ? dropped >> (shift - 32) : 0;
            round_up = (uint64_t)random_bits < threshold;
        }
        kept += (uint64_t)round_up;
    }
    /* Normals: the exponent field (target_exponent - min_exponent + 1) and the implicit 1 inside kept
     * add up, so a carry out of the mantissa moves into the exponent. Subnormals: just kept. */
    uint32_t magnitude = exponent_part + (uint32_t)kept;
    if (magnitude > fpi_max_bits(f)) return sign | overflow_magnitude;
    return sign | magnitude;
}

/* fp_decode as fp32 bits. */
static inline uint32_t fpi_decode_bits(const fp_format *f, uint32_t bits) {
    const int mbits = f->mbits;
    uint32_t sign = ((bits >> (f->ebits + mbits)) & 1u) << 31;
    uint32_t magnitude = bits & fpi_magnitude_mask(f);
    uint32_t exponent_field = magnitude >> mbits;
    uint32_t mantissa = magnitude & ((1u << mbits) - 1u);
    if (f->specials == FP_SPECIALS_IEEE && exponent_field == fpi_exp_all_ones(f))
        return sign | 0x7f800000u | (mantissa ? 0x00400000u | (mantissa << (23 - mbits)) : 0u);
    if (f->specials == FP_SPECIALS_FN && magnitude == fpi_magnitude_mask(f)) return sign | 0x7fc00000u;
    if (magnitude == 0) return sign;
    /* Subnormals (exponent field 0) mean 0.m x 2^(1-bias): shift the leading 1 up to the implicit-bit
     * position, one exponent step per place. Every format here is inside fp32's range and precision,
     * so the result is an exact fp32 normal or subnormal. */
    int exponent = exponent_field ? (int)exponent_field - f->bias : 1 - f->bias;
    if (!exponent_field) {
        while (!(mantissa & (1u << mbits))) {
            mantissa <<= 1;
            exponent -= 1;
        }
    }
    mantissa &= (1u << mbits) - 1u;
    if (exponent >= -126) return sign | ((uint32_t)(exponent + 127) << 23) | (mantissa << (23 - mbits));
    /* below fp32's smallest normal: an fp32 subnormal, (1.m) shifted right; exact since k >= 2^-149 */
    uint32_t significand = (mantissa | (1u << mbits)) << (23 - mbits);
    return sign | (significand >> (-126 - exponent));
}

#endif
