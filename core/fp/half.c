/* half.c: fp16 and bf16 scalar codecs (lab 03): rounding, subnormals, inf and NaN with integer bit operations. */
#include "fp/half.h"

#include "base/lab.h"

/* fp32 layout: sign bit 31, exponent bits 30..23 (bias 127), mantissa bits 22..0.
 * fp16 layout: sign bit 15, exponent bits 14..10 (bias 15),  mantissa bits 9..0.
 * bf16 layout: sign bit 15, exponent bits 14..7  (bias 127), mantissa bits 6..0 (the top half of an fp32). */

uint16_t fp16_from_float(float x) {
    uint32_t bits = fp_float_bits(x);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
    uint32_t abs_bits = bits & 0x7fffffffu; /* |x| as bits: ordered like the magnitudes they encode */
    uint16_t magnitude = 0;                 /* the 15 low bits of the fp16 result */
    /* LAB 03 BEGIN fp16 encode: round to nearest even, subnormals, overflow to inf, NaN */
    if (abs_bits > 0x7f800000u) {
        /* NaN: keep it a NaN whatever the payload: set the quiet bit, keep the top 9 payload bits. */
        magnitude = (uint16_t)(0x7e00u | ((abs_bits >> 13) & 0x01ffu));
    } else if (abs_bits >= 0x477ff000u) {
        /* >= 65520, halfway between 65504 (the largest fp16) and 65536: the tie goes to the even
         * neighbour 65536, which does not exist, so everything from here up (inf too) is inf. */
        magnitude = 0x7c00;
    } else if (abs_bits >= 0x38800000u) {
        /* Normal in fp16 (|x| >= 2^-14). Re-bias the exponent from 127 to 15, which moves the
         * exponent field down by 112 << 23, then drop 13 mantissa bits with rounding. A carry out of
         * the mantissa moves to the exponent, which is exactly right (1.111..1 x 2^e -> 1.0 x 2^(e+1)). */
        uint32_t rebased = abs_bits - (112u << 23);
        uint32_t kept = rebased >> 13;
        uint32_t dropped = rebased & 0x1fffu; /* the 13 bits below fp16's last mantissa bit */
        if (dropped > 0x1000u || (dropped == 0x1000u && (kept & 1u))) kept += 1;
        magnitude = (uint16_t)kept;
    } else if (abs_bits >= 0x00800000u) {
        /* Below 2^-14: an fp16 subnormal k * 2^-24, or zero. The fp32 value is m * 2^(e-150) with the
         * 24-bit significand m (implicit 1 included) and exponent field e, so k = m * 2^(e-126), i.e.
         * m shifted right by 126 - e >= 14 places, rounded to nearest even. */
        uint32_t significand = (abs_bits & 0x007fffffu) | 0x00800000u;
        uint32_t shift = 126u - (abs_bits >> 23);
        if (shift <= 24) {
            uint32_t kept = significand >> shift;
            uint32_t dropped = significand & ((1u << shift) - 1u);
            uint32_t half = 1u << (shift - 1);
            if (dropped > half || (dropped == half && (kept & 1u))) kept += 1;
            magnitude = (uint16_t)kept; /* may round up to 0x0400, the smallest normal: correct */
        }
        /* shift > 24: below 2^-25, less than half the smallest subnormal: rounds to zero */
    }
    /* fp32 zeros and subnormals (< 2^-126) are far below 2^-25: they become zero. */
    /* LAB 03 END */
    return sign | magnitude;
}

float fp16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x03ffu;
    uint32_t magnitude = 0; /* the 31 low bits of the fp32 result */
    /* LAB 03 BEGIN fp16 decode: normals, subnormals, zero, inf and NaN */
    if (exponent == 0x1f) {
        /* inf (mantissa 0) or NaN: fp32's all-ones exponent; a NaN keeps its payload, made quiet. */
        magnitude = 0x7f800000u | (mantissa << 13);
        if (mantissa != 0) magnitude |= 0x00400000u;
    } else if (exponent != 0) {
        /* normal: re-bias 15 -> 127 and widen the mantissa by 13 bits */
        magnitude = ((exponent + 112u) << 23) | (mantissa << 13);
    } else if (mantissa != 0) {
        /* subnormal: mantissa * 2^-24. fp32 can hold it as a normal number: shift the mantissa left
         * until its leading 1 reaches the implicit-bit position (bit 10), lowering the exponent by
         * one per step; 2^-14 has fp32 exponent field 113. */
        uint32_t exponent32 = 113;
        while ((mantissa & 0x0400u) == 0) {
            mantissa <<= 1;
            exponent32 -= 1;
        }
        magnitude = (exponent32 << 23) | ((mantissa & 0x03ffu) << 13);
    }
    /* exponent 0 and mantissa 0: +-0, magnitude stays 0 */
    /* LAB 03 END */
    return fp_float_from_bits(sign | magnitude);
}

uint16_t bf16_from_float(float x) {
    uint32_t bits = fp_float_bits(x);
    uint16_t result = 0;
    /* LAB 03 BEGIN bf16 encode: round to nearest even, keep NaN a NaN */
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        /* NaN: rounding could carry the payload into the exponent and make inf; keep the top half, quiet. */
        result = (uint16_t)((bits >> 16) | 0x0040u);
    } else {
        /* Add just under half of the dropped part's range, plus the kept part's lowest bit: values
         * above the halfway point carry into bit 16, exact ties carry only when that bit is odd
         * (ties to even). The same integer add handles subnormals and overflow to inf. */
        uint32_t lowest_kept_bit = (bits >> 16) & 1u;
        result = (uint16_t)((bits + 0x7fffu + lowest_kept_bit) >> 16);
    }
    /* LAB 03 END */
    return result;
}

float bf16_to_float(uint16_t b) {
    uint32_t bits = 0;
    /* LAB 03 BEGIN bf16 decode: the top half of an fp32 */
    bits = (uint32_t)b << 16;
    /* LAB 03 END */
    return fp_float_from_bits(bits);
}
