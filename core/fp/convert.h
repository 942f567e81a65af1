/* convert.h: array conversion between fp32 and fp16/bf16/fp8: a scalar reference and SIMD paths that match it bit for bit. */
#ifndef MIXPAR_FP_CONVERT_H
#define MIXPAR_FP_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every function converts n elements, src[i] -> dst[i], i in [0, n); src and dst must not overlap.
 * Rounding is to nearest even; NaN, inf, -0, subnormals and overflow follow fp/half.h (fp16, bf16) and
 * fp/format.h (e4m3, e5m2: saturate = 1 clamps overflow and +-inf to +-max finite, saturate = 0 gives
 * +-inf for e5m2 and NaN for e4m3, which has no inf).
 *
 * The plain names dispatch at run time to the best SIMD level the CPU has (or the one fp_set_simd_level
 * chose); the *_scalar versions are the reference, one element at a time, built on the format engine.
 * Every SIMD path gives the same bits as the reference for every input, NaN payloads included, so
 * results never depend on the machine. None of them uses the lab 03 functions of fp/half.c. */

void fp_f32_to_f16(uint16_t *dst, const float *src, size_t n);
void fp_f16_to_f32(float *dst, const uint16_t *src, size_t n);
void fp_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
void fp_bf16_to_f32(float *dst, const uint16_t *src, size_t n);
void fp_f32_to_e4m3(uint8_t *dst, const float *src, size_t n, int saturate);
void fp_e4m3_to_f32(float *dst, const uint8_t *src, size_t n);
void fp_f32_to_e5m2(uint8_t *dst, const float *src, size_t n, int saturate);
void fp_e5m2_to_f32(float *dst, const uint8_t *src, size_t n);
/* Stochastic rounding to bf16 (llm.c-style master weights -> bf16): element i uses the 32 random bits
 * mp_hash32(seed, i), so the result depends only on (seed, i, src[i]), not on SIMD width or threads.
 * Element i equals fp_encode(&FP_BF16, src[i], FP_ROUND_STOCHASTIC, 0, mp_hash32(seed, i)). */
void fp_f32_to_bf16_stochastic(uint16_t *dst, const float *src, size_t n, uint64_t seed);

void fp_f32_to_f16_scalar(uint16_t *dst, const float *src, size_t n);
void fp_f16_to_f32_scalar(float *dst, const uint16_t *src, size_t n);
void fp_f32_to_bf16_scalar(uint16_t *dst, const float *src, size_t n);
void fp_bf16_to_f32_scalar(float *dst, const uint16_t *src, size_t n);
void fp_f32_to_e4m3_scalar(uint8_t *dst, const float *src, size_t n, int saturate);
void fp_e4m3_to_f32_scalar(float *dst, const uint8_t *src, size_t n);
void fp_f32_to_e5m2_scalar(uint8_t *dst, const float *src, size_t n, int saturate);
void fp_e5m2_to_f32_scalar(float *dst, const uint8_t *src, size_t n);
void fp_f32_to_bf16_stochastic_scalar(uint16_t *dst, const float *src, size_t n, uint64_t seed);

/* SIMD levels, each a superset of the one before. */
typedef enum {
    FP_SIMD_SCALAR = 0, /* the reference loops */
    FP_SIMD_AVX2 = 1,   /* AVX2 + F16C: 8 floats per step */
    FP_SIMD_AVX512 = 2, /* AVX-512 F/BW/VL/DQ: 16 floats per step, masked tails */
    FP_SIMD_NLEVELS
} fp_simd;

/* The level the dispatching functions use now: the best the CPU supports, unless lowered by
 * fp_set_simd_level or by the environment variable MIXPAR_SIMD=scalar|avx2|avx512 (read once, at the
 * first conversion or level query). */
fp_simd fp_simd_level(void);
/* The best level this CPU supports (__builtin_cpu_supports). */
fp_simd fp_simd_max_level(void);
/* Use `level` from now on, clamped to fp_simd_max_level(); returns the level now in use. Meant for tests
 * and benchmarks: call it while no other thread is converting. */
fp_simd fp_set_simd_level(fp_simd level);
const char *fp_simd_name(fp_simd level); /* "scalar", "avx2", "avx512" */
/* Parses "scalar", "avx2", "avx512"; -1 when unknown. */
int fp_simd_from_name(const char *name);

#ifdef __cplusplus
}
#endif

#endif
