/* half.h: fp16 and bf16 scalar codecs (lab 03): fp32 <-> 16-bit formats by bit manipulation. */
#ifndef MIXPAR_FP_HALF_H
#define MIXPAR_FP_HALF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The two 16-bit formats of mixed-precision training, as bit patterns in a uint16_t:
 *
 *            sign  exponent  mantissa   bias   max          min normal   min subnormal
 *     fp16   1     5         10         15     65504        2^-14        2^-24
 *     bf16   1     8         7          127    ~3.3895e38   2^-126       2^-133
 *
 * Encoding (fp32 -> 16 bits) rounds to nearest, ties to even, like the hardware does by default:
 *   - results below the smallest normal become subnormals (fp16: k * 2^-24), tiny values round to +-0;
 *   - fp16: magnitudes >= 65520 (halfway between 65504 and the next power of two) overflow to +-inf;
 *     bf16: values past the largest finite bf16 overflow to +-inf the same way;
 *   - +-inf stays +-inf, -0 stays -0.
 *
 * NaN rules (the same bits x86 produces, so the SIMD paths in convert.c agree with these bit for bit):
 *   - fp16_from_float(NaN) = sign | 0x7e00 | (fp32 mantissa bits 21..13): the sign is kept, the quiet
 *     bit (0x0200) is set, and the top 9 payload bits below fp32's quiet bit are kept; the rest of the
 *     payload is dropped. This is what F16C vcvtps2ph does (checked on an Intel CPU with F16C).
 *     Example: 0x7f800001 (a signalling NaN) -> 0x7e00; 0x7fa00000 -> 0x7f00.
 *   - bf16_from_float(NaN) = (fp32 bits >> 16) | 0x0040: sign kept, quiet bit (0x0040) set, the top 6
 *     payload bits kept. This is what AVX512-BF16 vcvtneps2bf16 does for NaNs.
 *     Note: vcvtneps2bf16 also flushes fp32 subnormal inputs to zero; bf16_from_float does not (it
 *     rounds them to the bf16 subnormal they are nearest to), so the SIMD code does not use it.
 *   - fp16_to_float(NaN) = sign | 0x7fc00000 | (payload << 13): payload kept, quiet bit set (like
 *     vcvtph2ps). bf16_to_float is a plain shift, so a bf16 NaN comes back with its exact bits.
 * So encode(decode(h)) == h for every non-NaN pattern, and for a NaN pattern h it is h | quiet bit. */

uint16_t fp16_from_float(float x); /* round to nearest even; subnormals; overflow -> +-inf */
float fp16_to_float(uint16_t h);   /* exact */
uint16_t bf16_from_float(float x); /* round to nearest even; subnormals; overflow -> +-inf */
float bf16_to_float(uint16_t b);   /* exact: the 16 bits become the top half of an fp32 */

/* The bit pattern of a float and back (memcpy: the portable way to reinterpret bits; it compiles to
 * a register move). */
static inline uint32_t fp_float_bits(float x) {
    uint32_t u;
    __builtin_memcpy(&u, &x, sizeof u);
    return u;
}
static inline float fp_float_from_bits(uint32_t u) {
    float x;
    __builtin_memcpy(&x, &u, sizeof x);
    return x;
}

#ifdef __cplusplus
}
#endif

#endif
