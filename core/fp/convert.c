/* convert.c: array conversions: the scalar reference loops and the run-time choice of SIMD level. */
#include "fp/convert.h"

#include "base/rng.h"
#include "fp/convert_kernels.h"
#include "fp/format_impl.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Local copies of the formats, visible to the compiler as constants, so the inlined engine folds the
 * layout arithmetic (the extern FP_FP16 etc. live in another file). */
static const fp_format fp16_layout = {"fp16", 5, 10, 15, FP_SPECIALS_IEEE};
static const fp_format bf16_layout = {"bf16", 8, 7, 127, FP_SPECIALS_IEEE};
static const fp_format e4m3_layout = {"e4m3", 4, 3, 7, FP_SPECIALS_FN};
static const fp_format e5m2_layout = {"e5m2", 5, 2, 15, FP_SPECIALS_IEEE};

/* ------------------------------------------------------------------ scalar reference */

/* The reference converts one element at a time, as written: the compiler is told not to vectorize these
 * loops, so "scalar" in the benchmark means scalar and the SIMD code is the only vector code. */
#if defined(__GNUC__) && !defined(__clang__)
#define SCALAR_REFERENCE __attribute__((optimize("no-tree-vectorize")))
#else
#define SCALAR_REFERENCE
#endif

SCALAR_REFERENCE void fp_f32_to_f16_scalar(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (uint16_t)fpi_encode(&fp16_layout, src[i], FP_ROUND_NEAREST_EVEN, 0, 0);
}

SCALAR_REFERENCE void fp_f16_to_f32_scalar(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = fp_float_from_bits(fpi_decode_bits(&fp16_layout, src[i]));
}

SCALAR_REFERENCE void fp_f32_to_bf16_scalar(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (uint16_t)fpi_encode(&bf16_layout, src[i], FP_ROUND_NEAREST_EVEN, 0, 0);
}

SCALAR_REFERENCE void fp_bf16_to_f32_scalar(float *dst, const uint16_t *src, size_t n) {
    /* bf16 is the top half of an fp32: no rounding, no special cases, NaN bits kept as they are */
    for (size_t i = 0; i < n; i++) dst[i] = fp_float_from_bits((uint32_t)src[i] << 16);
}

SCALAR_REFERENCE void fp_f32_to_e4m3_scalar(uint8_t *dst, const float *src, size_t n, int saturate) {
    for (size_t i = 0; i < n; i++)
        dst[i] = (uint8_t)fpi_encode(&e4m3_layout, src[i], FP_ROUND_NEAREST_EVEN, saturate != 0, 0);
}

SCALAR_REFERENCE void fp_e4m3_to_f32_scalar(float *dst, const uint8_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = fp_float_from_bits(fpi_decode_bits(&e4m3_layout, src[i]));
}

SCALAR_REFERENCE void fp_f32_to_e5m2_scalar(uint8_t *dst, const float *src, size_t n, int saturate) {
    for (size_t i = 0; i < n; i++)
        dst[i] = (uint8_t)fpi_encode(&e5m2_layout, src[i], FP_ROUND_NEAREST_EVEN, saturate != 0, 0);
}

SCALAR_REFERENCE void fp_e5m2_to_f32_scalar(float *dst, const uint8_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = fp_float_from_bits(fpi_decode_bits(&e5m2_layout, src[i]));
}

SCALAR_REFERENCE void fp_f32_to_bf16_stochastic_scalar(uint16_t *dst, const float *src, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++)
        dst[i] = (uint16_t)fpi_encode(&bf16_layout, src[i], FP_ROUND_STOCHASTIC, 0, mp_hash32(seed, i));
}

const fp_convert_kernels fp_kernels_scalar = {
    fp_f32_to_f16_scalar,  fp_f16_to_f32_scalar,  fp_f32_to_bf16_scalar,
    fp_bf16_to_f32_scalar, fp_f32_to_e4m3_scalar, fp_e4m3_to_f32_scalar,
    fp_f32_to_e5m2_scalar, fp_e5m2_to_f32_scalar, fp_f32_to_bf16_stochastic_scalar,
};

/* ------------------------------------------------------------------ constants for the SIMD fp8 paths */

void fp8_consts_init(fp8_consts *c, const fp_format *f) {
    memset(c, 0, sizeof *c);
    const int mbits = f->mbits;
    const uint32_t max_bits = fpi_max_bits(f);
    c->drop = 23u - (uint32_t)mbits;
    c->half_minus_one = (1u << (c->drop - 1)) - 1u;
    c->rebias = (uint32_t)(127 - f->bias) << mbits;
    c->min_normal_bits = (uint32_t)(128 - f->bias) << 23;
    /* subnormal k = significand >> (min_exponent - mbits + 150 - exponent field) */
    c->subnormal_base = (uint32_t)(1 - f->bias - mbits + 150);
    /* The largest finite value as fp32 bits, plus half its spacing, is the first value that rounds past it,
     * unless its last mantissa bit is even: then that exact tie rounds down, and the threshold is one more. */
    uint32_t max_as_f32 = fpi_decode_bits(f, max_bits);
    c->overflow_bits = max_as_f32 + (1u << (c->drop - 1)) + ((max_bits & 1u) ? 0u : 1u);
    c->overflow_result[0] = f->specials == FP_SPECIALS_IEEE ? fpi_exp_all_ones(f) << mbits : fpi_magnitude_mask(f);
    c->overflow_result[1] = max_bits;
    /* NaN in: IEEE keeps the payload bits below the quiet bit (see fpi_nan_magnitude); FN has one NaN */
    uint32_t quiet = 1u << (mbits - 1);
    c->nan_base = f->specials == FP_SPECIALS_IEEE ? (fpi_exp_all_ones(f) << mbits) | quiet : fpi_magnitude_mask(f);
    c->nan_payload = f->specials == FP_SPECIALS_IEEE ? quiet - 1u : 0u;
    c->sign_shift = 31u - (uint32_t)(f->ebits + mbits);
    c->mantissa_mask = (1u << mbits) - 1u;
    c->decode_rebias = (uint32_t)(127 - f->bias) << 23;
    c->special_start = f->specials == FP_SPECIALS_IEEE ? fpi_exp_all_ones(f) << mbits : fpi_magnitude_mask(f);
    c->special_base = f->specials == FP_SPECIALS_IEEE ? 0x7f800000u : 0x7fc00000u;
    c->special_payload = f->specials == FP_SPECIALS_IEEE ? 0xffffffffu : 0u;
    for (uint32_t m = 0; m <= c->mantissa_mask; m++) c->subnormal_value[m] = fpi_decode_bits(f, m);
}

/* ------------------------------------------------------------------ dispatch */

static const fp_convert_kernels *level_kernels(fp_simd level) {
    switch (level) {
    case FP_SIMD_AVX512: return fp_kernels_avx512;
    case FP_SIMD_AVX2: return fp_kernels_avx2;
    default: return &fp_kernels_scalar;
    }
}

static fp_simd detect_max_level(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    if (avx512 && fp_kernels_avx512) return FP_SIMD_AVX512;
    if (avx2 && fp_kernels_avx2) return FP_SIMD_AVX2;
#endif
    return FP_SIMD_SCALAR;
}

static const char *const level_names[FP_SIMD_NLEVELS] = {"scalar", "avx2", "avx512"};

/* -1 until first use; then the level in use. The kernel table pointer follows it. */
static _Atomic int current_level = -1;
static _Atomic int max_level = -1;
static const fp_convert_kernels *_Atomic current_kernels;

fp_simd fp_simd_max_level(void) {
    int level = atomic_load(&max_level);
    if (level < 0) {
        level = detect_max_level();
        atomic_store(&max_level, level);
    }
    return (fp_simd)level;
}

static void use_level(fp_simd level) {
    atomic_store(&current_kernels, level_kernels(level));
    atomic_store(&current_level, (int)level);
}

fp_simd fp_simd_level(void) {
    int level = atomic_load(&current_level);
    if (level < 0) {
        fp_simd chosen = fp_simd_max_level();
        const char *env = getenv("MIXPAR_SIMD");
        int wanted = env ? fp_simd_from_name(env) : -1;
        if (wanted >= 0 && wanted < (int)chosen) chosen = (fp_simd)wanted;
        use_level(chosen);
        level = (int)chosen;
    }
    return (fp_simd)level;
}

fp_simd fp_set_simd_level(fp_simd level) {
    fp_simd best = fp_simd_max_level();
    if ((int)level < 0) level = FP_SIMD_SCALAR;
    if (level > best) level = best;
    use_level(level);
    return level;
}

const char *fp_simd_name(fp_simd level) {
    return (unsigned)level < FP_SIMD_NLEVELS ? level_names[level] : "?";
}

int fp_simd_from_name(const char *name) {
    for (int i = 0; i < FP_SIMD_NLEVELS; i++)
        if (name && strcmp(name, level_names[i]) == 0) return i;
    return -1;
}

static const fp_convert_kernels *kernels(void) {
    const fp_convert_kernels *k = atomic_load(&current_kernels);
    if (!k) {
        fp_simd_level();
        k = atomic_load(&current_kernels);
    }
    return k;
}

void fp_f32_to_f16(uint16_t *dst, const float *src, size_t n) { kernels()->f32_to_f16(dst, src, n); }
void fp_f16_to_f32(float *dst, const uint16_t *src, size_t n) { kernels()->f16_to_f32(dst, src, n); }
void fp_f32_to_bf16(uint16_t *dst, const float *src, size_t n) { kernels()->f32_to_bf16(dst, src, n); }
void fp_bf16_to_f32(float *dst, const uint16_t *src, size_t n) { kernels()->bf16_to_f32(dst, src, n); }
void fp_f32_to_e4m3(uint8_t *dst, const float *src, size_t n, int saturate) {
    kernels()->f32_to_e4m3(dst, src, n, saturate != 0);
}
void fp_e4m3_to_f32(float *dst, const uint8_t *src, size_t n) { kernels()->e4m3_to_f32(dst, src, n); }
void fp_f32_to_e5m2(uint8_t *dst, const float *src, size_t n, int saturate) {
    kernels()->f32_to_e5m2(dst, src, n, saturate != 0);
}
void fp_e5m2_to_f32(float *dst, const uint8_t *src, size_t n) { kernels()->e5m2_to_f32(dst, src, n); }
void fp_f32_to_bf16_stochastic(uint16_t *dst, const float *src, size_t n, uint64_t seed) {
    kernels()->f32_to_bf16_stochastic(dst, src, n, seed);
}
