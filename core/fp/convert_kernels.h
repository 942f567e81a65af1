/* convert_kernels.h: the table of conversion kernels per SIMD level (internal to convert.c and convert_simd.c). */
#ifndef MIXPAR_FP_CONVERT_KERNELS_H
#define MIXPAR_FP_CONVERT_KERNELS_H

#include "fp/format.h"

#include <stddef.h>
#include <stdint.h>

/* One entry per conversion; every level fills every slot (a level may reuse a lower level's kernel). */
typedef struct {
    void (*f32_to_f16)(uint16_t *dst, const float *src, size_t n);
    void (*f16_to_f32)(float *dst, const uint16_t *src, size_t n);
    void (*f32_to_bf16)(uint16_t *dst, const float *src, size_t n);
    void (*bf16_to_f32)(float *dst, const uint16_t *src, size_t n);
    void (*f32_to_e4m3)(uint8_t *dst, const float *src, size_t n, int saturate);
    void (*e4m3_to_f32)(float *dst, const uint8_t *src, size_t n);
    void (*f32_to_e5m2)(uint8_t *dst, const float *src, size_t n, int saturate);
    void (*e5m2_to_f32)(float *dst, const uint8_t *src, size_t n);
    void (*f32_to_bf16_stochastic)(uint16_t *dst, const float *src, size_t n, uint64_t seed);
} fp_convert_kernels;

extern const fp_convert_kernels fp_kernels_scalar;
/* NULL on machines where the level cannot exist (not x86-64). */
extern const fp_convert_kernels *const fp_kernels_avx2;
extern const fp_convert_kernels *const fp_kernels_avx512;

/* Constants that turn an 8-bit format (e4m3, e5m2) into the integer steps of the SIMD encoder and
 * decoder; computed from the format so the SIMD code has no format-specific numbers in it. */
typedef struct {
    /* encode: fp32 magnitude bits a -> 8-bit pattern */
    uint32_t drop;              /* 23 - mbits: fp32 mantissa bits dropped in the normal range */
    uint32_t half_minus_one;    /* 2^(drop-1) - 1: with the kept lsb added, rounds to nearest even */
    uint32_t rebias;            /* (127 - bias) << mbits: fp32 exponent field -> format exponent field */
    uint32_t min_normal_bits;   /* fp32 bits of the format's smallest normal */
    uint32_t subnormal_base;    /* below it, drop (subnormal_base - fp32 exponent field) significand bits */
    uint32_t overflow_bits;     /* smallest fp32 magnitude whose rounding passes the largest finite */
    uint32_t overflow_result[2];/* [saturate]: inf (IEEE) or NaN (FN) / max finite */
    uint32_t nan_base;          /* NaN in: nan_base | ((a >> drop) & nan_payload) */
    uint32_t nan_payload;
    uint32_t sign_shift;        /* fp32 sign (bit 31) -> format sign (bit ebits+mbits) */
    /* decode: magnitude field mag (7 bits) -> fp32 bits */
    uint32_t mantissa_mask;     /* 2^mbits - 1 */
    uint32_t decode_rebias;     /* (127 - bias) << 23 */
    uint32_t special_start;     /* mag >= this is inf/NaN */
    uint32_t special_base;      /* 0x7f800000 (IEEE: | payload, quiet bit) or 0x7fc00000 (FN) */
    uint32_t special_payload;   /* all ones (IEEE) or 0 (FN) */
    uint32_t subnormal_value[16];/* fp32 bits of the subnormals m * 2^(1-bias-mbits), m < 2^mbits <= 16 */
} fp8_consts;

/* For a format of 8 bits with mbits <= 3 and IEEE or FN specials (e4m3, e5m2). */
void fp8_consts_init(fp8_consts *c, const fp_format *f);

#endif
