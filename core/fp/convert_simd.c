/* convert_simd.c: AVX2/F16C and AVX-512 conversion kernels; each gives the scalar reference's bits for every input. */
#include "base/rng.h"
#include "fp/convert.h"
#include "fp/convert_kernels.h"
#include "fp/format_impl.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <pthread.h>

/* Each function carries its instruction set in a target attribute, so this file builds with the
 * project's plain CFLAGS and the CPU is checked at run time (convert.c) before any of it runs. */
#define AVX2_TARGET __attribute__((target("avx2,f16c")))
#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")))

/* Rounding for vcvtps2ph from the instruction, not from MXCSR: to nearest even, whatever the caller set. */
#define F16C_ROUNDING (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* The hash of base/rng.h, mp_hash32(seed, i) = top 32 bits of a splitmix64 finalizer of
 * seed + 0x9e3779b97f4a7c15 * (i + 1), computed in 64-bit lanes. */
#define HASH_STEP 0x9e3779b97f4a7c15ULL
#define HASH_MUL1 0xbf58476d1ce4e5b9ULL
#define HASH_MUL2 0x94d049bb133111ebULL

/* ================================================================== AVX2 (8 floats per step) */

/* fp32 -> fp16: F16C's vcvtps2ph rounds to nearest even and treats NaNs exactly as fp/half.h describes
 * (quiet bit set, top payload bits kept), so it needs no fix-ups. */
AVX2_TARGET static void avx2_f32_to_f16(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i lo = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), F16C_ROUNDING);
        __m128i hi = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), F16C_ROUNDING);
        _mm_storeu_si128((__m128i *)(dst + i), lo);
        _mm_storeu_si128((__m128i *)(dst + i + 8), hi);
    }
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), F16C_ROUNDING));
    fp_f32_to_f16_scalar(dst + i, src + i, n - i);
}

/* fp16 -> fp32: vcvtph2ps is exact and quiets NaNs keeping the payload, like the reference. */
AVX2_TARGET static void avx2_f16_to_f32(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i)));
        __m256 hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i + 8)));
        _mm256_storeu_ps(dst + i, lo);
        _mm256_storeu_ps(dst + i + 8, hi);
    }
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    fp_f16_to_f32_scalar(dst + i, src + i, n - i);
}

/* fp32 bits -> bf16 in the low 16 bits of each lane: (u + 0x7fff + lsb) >> 16, NaNs quieted instead.
 * (AVX512-BF16's vcvtneps2bf16 would flush fp32 subnormals to zero, so it is not used.) */
AVX2_TARGET static inline __m256i avx2_bf16_round(__m256i u) {
    __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
    __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x0040));
    return _mm256_blendv_epi8(rounded, nan, is_nan);
}

/* Two vectors of 8 values < 2^16 -> 16 uint16 in order (packus works per 128-bit lane: fix the order). */
AVX2_TARGET static inline __m256i avx2_pack16(__m256i a, __m256i b) {
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
}

AVX2_TARGET static void avx2_f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = avx2_bf16_round(_mm256_loadu_si256((const __m256i *)(src + i)));
        __m256i b = avx2_bf16_round(_mm256_loadu_si256((const __m256i *)(src + i + 8)));
        _mm256_storeu_si256((__m256i *)(dst + i), avx2_pack16(a, b));
    }
    fp_f32_to_bf16_scalar(dst + i, src + i, n - i);
}

AVX2_TARGET static void avx2_bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(h, 16));
    }
    fp_bf16_to_f32_scalar(dst + i, src + i, n - i);
}

/* The fp8 constants as vectors, loaded once per call. */
typedef struct {
    __m256i drop, half_minus_one, rebias, min_normal, subnormal_base, overflow_at, overflow_result, nan_base,
        nan_payload, sign_shift, mantissa_mask, decode_rebias, special_start, special_base, special_payload,
        subnormal_value;
} avx2_fp8;

AVX2_TARGET static void avx2_fp8_load(avx2_fp8 *v, const fp8_consts *c, int saturate) {
    v->drop = _mm256_set1_epi32((int)c->drop);
    v->half_minus_one = _mm256_set1_epi32((int)c->half_minus_one);
    v->rebias = _mm256_set1_epi32((int)c->rebias);
    v->min_normal = _mm256_set1_epi32((int)c->min_normal_bits);
    v->subnormal_base = _mm256_set1_epi32((int)c->subnormal_base);
    v->overflow_at = _mm256_set1_epi32((int)(c->overflow_bits - 1u));
    v->overflow_result = _mm256_set1_epi32((int)c->overflow_result[saturate != 0]);
    v->nan_base = _mm256_set1_epi32((int)c->nan_base);
    v->nan_payload = _mm256_set1_epi32((int)c->nan_payload);
    v->sign_shift = _mm256_set1_epi32((int)c->sign_shift);
    v->mantissa_mask = _mm256_set1_epi32((int)c->mantissa_mask);
    v->decode_rebias = _mm256_set1_epi32((int)c->decode_rebias);
    v->special_start = _mm256_set1_epi32((int)c->special_start - 1);
    v->special_base = _mm256_set1_epi32((int)c->special_base);
    v->special_payload = _mm256_set1_epi32((int)c->special_payload);
    v->subnormal_value = _mm256_loadu_si256((const __m256i *)c->subnormal_value);
}

/* 8 fp32 bit patterns -> 8 fp8 patterns (one per lane), round to nearest even. The same integer steps
 * as fpi_encode, with every case computed and the right one selected per lane:
 *   normal:    (a + 2^(drop-1) - 1 + lsb) >> drop, exponent re-biased (a carry moves into the exponent)
 *   subnormal: the 24-bit significand shifted right by a per-lane amount, same rounding
 *   overflow:  a >= the first value that rounds past max -> inf / NaN / max
 *   NaN:       quiet NaN with the top payload bits (IEEE) or S.1111.111 (FN) */
AVX2_TARGET static inline __m256i avx2_fp8_encode(__m256i u, const avx2_fp8 *v) {
    const __m256i one = _mm256_set1_epi32(1);
    __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i sign = _mm256_and_si256(_mm256_srlv_epi32(u, v->sign_shift), _mm256_set1_epi32(0x80));

    __m256i lsb = _mm256_and_si256(_mm256_srlv_epi32(a, v->drop), one);
    __m256i normal = _mm256_sub_epi32(
        _mm256_srlv_epi32(_mm256_add_epi32(_mm256_add_epi32(a, v->half_minus_one), lsb), v->drop), v->rebias);

    /* below the smallest normal: drop (subnormal_base - exponent field) bits, at most 31 (all of them) */
    __m256i shift = _mm256_min_epu32(_mm256_sub_epi32(v->subnormal_base, _mm256_srli_epi32(a, 23)),
                                     _mm256_set1_epi32(31));
    __m256i significand =
        _mm256_or_si256(_mm256_and_si256(a, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00800000));
    __m256i sub_half_minus_one = _mm256_sub_epi32(_mm256_sllv_epi32(one, _mm256_sub_epi32(shift, one)), one);
    __m256i sub_lsb = _mm256_and_si256(_mm256_srlv_epi32(significand, shift), one);
    __m256i subnormal = _mm256_srlv_epi32(
        _mm256_add_epi32(_mm256_add_epi32(significand, sub_half_minus_one), sub_lsb), shift);

    __m256i result = _mm256_blendv_epi8(normal, subnormal, _mm256_cmpgt_epi32(v->min_normal, a));
    result = _mm256_blendv_epi8(result, v->overflow_result, _mm256_cmpgt_epi32(a, v->overflow_at));
    __m256i nan = _mm256_or_si256(v->nan_base, _mm256_and_si256(_mm256_srlv_epi32(a, v->drop), v->nan_payload));
    result = _mm256_blendv_epi8(result, nan, _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000)));
    return _mm256_or_si256(result, sign);
}

/* 8 lanes of bytes (values < 256) -> 8 contiguous bytes in the low 64 bits. */
AVX2_TARGET static inline __m128i avx2_pack8(__m256i x) {
    __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(x, x), _mm256_setzero_si256());
    return _mm_unpacklo_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}

typedef void (*fp8_encode_tail)(uint8_t *dst, const float *src, size_t n, int saturate);
typedef void (*fp8_decode_tail)(float *dst, const uint8_t *src, size_t n);

AVX2_TARGET static void avx2_f32_to_fp8(uint8_t *dst, const float *src, size_t n, const fp8_consts *c, int saturate,
                                        fp8_encode_tail tail) {
    avx2_fp8 v;
    avx2_fp8_load(&v, c, saturate);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i r0 = avx2_fp8_encode(_mm256_loadu_si256((const __m256i *)(src + i)), &v);
        __m256i r1 = avx2_fp8_encode(_mm256_loadu_si256((const __m256i *)(src + i + 8)), &v);
        __m256i r2 = avx2_fp8_encode(_mm256_loadu_si256((const __m256i *)(src + i + 16)), &v);
        __m256i r3 = avx2_fp8_encode(_mm256_loadu_si256((const __m256i *)(src + i + 24)), &v);
        /* packs work inside 128-bit lanes; the permute puts the four groups of 4+4 bytes back in order */
        __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(r0, r1), _mm256_packus_epi32(r2, r3));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(dst + i), p);
    }
    for (; i + 8 <= n; i += 8)
        _mm_storel_epi64((__m128i *)(dst + i), avx2_pack8(avx2_fp8_encode(_mm256_loadu_si256((const __m256i *)(src + i)), &v)));
    tail(dst + i, src + i, n - i, saturate);
}

/* 8 fp8 patterns (one per lane) -> fp32 bits: normals re-biased, subnormals from an 8-entry table,
 * inf/NaN built like fpi_decode_bits. */
AVX2_TARGET static inline __m256i avx2_fp8_decode(__m256i b, const avx2_fp8 *v) {
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24);
    __m256i magnitude = _mm256_and_si256(b, _mm256_set1_epi32(0x7f));
    __m256i mantissa = _mm256_and_si256(magnitude, v->mantissa_mask);
    __m256i normal = _mm256_add_epi32(_mm256_sllv_epi32(magnitude, v->drop), v->decode_rebias);
    __m256i subnormal = _mm256_permutevar8x32_epi32(v->subnormal_value, mantissa);
    __m256i is_subnormal = _mm256_cmpgt_epi32(_mm256_add_epi32(v->mantissa_mask, _mm256_set1_epi32(1)), magnitude);
    __m256i result = _mm256_blendv_epi8(normal, subnormal, is_subnormal);
    __m256i quiet = _mm256_andnot_si256(_mm256_cmpeq_epi32(mantissa, _mm256_setzero_si256()),
                                        _mm256_set1_epi32(0x00400000));
    __m256i special = _mm256_or_si256(
        v->special_base, _mm256_and_si256(v->special_payload, _mm256_or_si256(_mm256_sllv_epi32(mantissa, v->drop), quiet)));
    result = _mm256_blendv_epi8(result, special, _mm256_cmpgt_epi32(magnitude, v->special_start));
    return _mm256_or_si256(result, sign);
}

AVX2_TARGET static void avx2_fp8_to_f32(float *dst, const uint8_t *src, size_t n, const fp8_consts *c,
                                        fp8_decode_tail tail) {
    avx2_fp8 v;
    avx2_fp8_load(&v, c, 0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(src + i)));
        _mm256_storeu_si256((__m256i *)(dst + i), avx2_fp8_decode(b, &v));
    }
    tail(dst + i, src + i, n - i);
}

static fp8_consts e4m3_consts, e5m2_consts;
static pthread_once_t fp8_once = PTHREAD_ONCE_INIT;
static void fp8_consts_fill(void) {
    fp8_consts_init(&e4m3_consts, &FP_E4M3);
    fp8_consts_init(&e5m2_consts, &FP_E5M2);
}
static const fp8_consts *e4m3(void) {
    pthread_once(&fp8_once, fp8_consts_fill);
    return &e4m3_consts;
}
static const fp8_consts *e5m2(void) {
    pthread_once(&fp8_once, fp8_consts_fill);
    return &e5m2_consts;
}

static void avx2_f32_to_e4m3(uint8_t *dst, const float *src, size_t n, int saturate) {
    avx2_f32_to_fp8(dst, src, n, e4m3(), saturate, fp_f32_to_e4m3_scalar);
}
static void avx2_f32_to_e5m2(uint8_t *dst, const float *src, size_t n, int saturate) {
    avx2_f32_to_fp8(dst, src, n, e5m2(), saturate, fp_f32_to_e5m2_scalar);
}
static void avx2_e4m3_to_f32(float *dst, const uint8_t *src, size_t n) {
    avx2_fp8_to_f32(dst, src, n, e4m3(), fp_e4m3_to_f32_scalar);
}
static void avx2_e5m2_to_f32(float *dst, const uint8_t *src, size_t n) {
    avx2_fp8_to_f32(dst, src, n, e5m2(), fp_e5m2_to_f32_scalar);
}

/* 64-bit low multiply from 32x32->64 products (AVX2 has no vpmullq). */
AVX2_TARGET static inline __m256i avx2_mullo64(__m256i a, __m256i b) {
    __m256i low = _mm256_mul_epu32(a, b);
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                     _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
    return _mm256_add_epi64(low, _mm256_slli_epi64(cross, 32));
}

/* mp_hash32 of 4 counters z = seed + step * (i + 1), in the low 32 bits of each 64-bit lane */
AVX2_TARGET static inline __m256i avx2_hash4(__m256i z) {
    z = _mm256_xor_si256(z, _mm256_srli_epi64(z, 30));
    z = avx2_mullo64(z, _mm256_set1_epi64x((long long)HASH_MUL1));
    z = _mm256_xor_si256(z, _mm256_srli_epi64(z, 27));
    z = avx2_mullo64(z, _mm256_set1_epi64x((long long)HASH_MUL2));
    z = _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
    return _mm256_srli_epi64(z, 32);
}

/* Stochastic bf16: round up when (random bits >> 16) < the 16 dropped bits, i.e. with probability
 * dropped / 2^16; NaNs as in round-to-nearest. Element i gets mp_hash32(seed, i). */
AVX2_TARGET static inline __m256i avx2_bf16_stochastic(__m256i u, __m256i random) {
    __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    __m256i dropped = _mm256_and_si256(u, _mm256_set1_epi32(0xffff));
    __m256i up = _mm256_cmpgt_epi32(dropped, _mm256_srli_epi32(random, 16)); /* all ones = -1 where up */
    __m256i kept = _mm256_srli_epi32(u, 16);
    __m256i rounded = _mm256_sub_epi32(kept, up);
    __m256i nan = _mm256_or_si256(kept, _mm256_set1_epi32(0x0040));
    return _mm256_blendv_epi8(rounded, nan, is_nan);
}

AVX2_TARGET static void avx2_f32_to_bf16_stochastic(uint16_t *dst, const float *src, size_t n, uint64_t seed) {
    size_t i = 0;
    if (n >= 16) {
        /* counters for elements 0-3 and 4-7 of each group of 8 (wrapping 64-bit arithmetic, like the hash) */
        __m256i za = _mm256_setr_epi64x((long long)(seed + HASH_STEP * 1), (long long)(seed + HASH_STEP * 2),
                                        (long long)(seed + HASH_STEP * 3), (long long)(seed + HASH_STEP * 4));
        __m256i zb = _mm256_add_epi64(za, _mm256_set1_epi64x((long long)(HASH_STEP * 4)));
        const __m256i step = _mm256_set1_epi64x((long long)(HASH_STEP * 8));
        const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
        __m256i result[2];
        for (; i + 16 <= n; i += 16) {
            for (int half = 0; half < 2; half++) {
                /* [a0 b0 a1 b1 a2 b2 a3 b3] -> [a0 a1 a2 a3 b0 b1 b2 b3]: the bits of elements in order */
                __m256i mixed = _mm256_or_si256(avx2_hash4(za), _mm256_slli_epi64(avx2_hash4(zb), 32));
                __m256i random = _mm256_permutevar8x32_epi32(mixed, order);
                __m256i u = _mm256_loadu_si256((const __m256i *)(src + i + 8 * half));
                result[half] = avx2_bf16_stochastic(u, random);
                za = _mm256_add_epi64(za, step);
                zb = _mm256_add_epi64(zb, step);
            }
            _mm256_storeu_si256((__m256i *)(dst + i), avx2_pack16(result[0], result[1]));
        }
    }
    for (; i < n; i++)
        dst[i] = (uint16_t)fp_encode(&FP_BF16, src[i], FP_ROUND_STOCHASTIC, 0, mp_hash32(seed, i));
}

static const fp_convert_kernels avx2_kernels = {
    avx2_f32_to_f16,  avx2_f16_to_f32,  avx2_f32_to_bf16, avx2_bf16_to_f32,           avx2_f32_to_e4m3,
    avx2_e4m3_to_f32, avx2_f32_to_e5m2, avx2_e5m2_to_f32, avx2_f32_to_bf16_stochastic,
};

/* ================================================================== AVX-512 (16 floats per step) */

/* Tails use masked loads and stores: lanes past n are neither read nor written. */
static inline __mmask16 tail_mask(size_t remaining) {
    return remaining >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << remaining) - 1u);
}

AVX512_TARGET static void avx512_f32_to_f16(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i lo = _mm512_cvtps_ph(_mm512_loadu_ps(src + i), F16C_ROUNDING);
        __m256i hi = _mm512_cvtps_ph(_mm512_loadu_ps(src + i + 16), F16C_ROUNDING);
        _mm256_storeu_si256((__m256i *)(dst + i), lo);
        _mm256_storeu_si256((__m256i *)(dst + i + 16), hi);
    }
    for (; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), F16C_ROUNDING);
        _mm256_mask_storeu_epi16(dst + i, m, h);
    }
}

AVX512_TARGET static void avx512_f16_to_f32(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 lo = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i)));
        __m512 hi = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i + 16)));
        _mm512_storeu_ps(dst + i, lo);
        _mm512_storeu_ps(dst + i + 16, hi);
    }
    for (; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
    }
}

AVX512_TARGET static inline __m512i avx512_bf16_round(__m512i u) {
    __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __mmask16 is_nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
    __m512i kept = _mm512_srli_epi32(u, 16);
    __m512i lsb = _mm512_and_si512(kept, _mm512_set1_epi32(1));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
    return _mm512_mask_mov_epi32(rounded, is_nan, _mm512_or_si512(kept, _mm512_set1_epi32(0x0040)));
}

AVX512_TARGET static void avx512_f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i lo = avx512_bf16_round(_mm512_loadu_si512(src + i));
        __m512i hi = avx512_bf16_round(_mm512_loadu_si512(src + i + 16));
        /* two vectors of 16 values < 2^16 -> 32 uint16; packus works per 128-bit lane, the permute restores order */
        __m512i packed = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), _mm512_packus_epi32(lo, hi));
        _mm512_storeu_si512(dst + i, packed);
    }
    for (; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512i r = avx512_bf16_round(_mm512_maskz_loadu_epi32(m, src + i));
        _mm512_mask_cvtepi32_storeu_epi16(dst + i, m, r);
    }
}

AVX512_TARGET static void avx512_bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i + 16)));
        _mm512_storeu_si512(dst + i, _mm512_slli_epi32(lo, 16));
        _mm512_storeu_si512(dst + i + 16, _mm512_slli_epi32(hi, 16));
    }
    for (; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, src + i));
        _mm512_mask_storeu_epi32(dst + i, m, _mm512_slli_epi32(h, 16));
    }
}

typedef struct {
    __m512i drop, half_minus_one, rebias, min_normal, subnormal_base, overflow_bits, overflow_result, nan_base,
        nan_payload, sign_shift, mantissa_mask, decode_rebias, special_start, special_base, special_payload,
        subnormal_value;
} avx512_fp8;

AVX512_TARGET static void avx512_fp8_load(avx512_fp8 *v, const fp8_consts *c, int saturate) {
    v->drop = _mm512_set1_epi32((int)c->drop);
    v->half_minus_one = _mm512_set1_epi32((int)c->half_minus_one);
    v->rebias = _mm512_set1_epi32((int)c->rebias);
    v->min_normal = _mm512_set1_epi32((int)c->min_normal_bits);
    v->subnormal_base = _mm512_set1_epi32((int)c->subnormal_base);
    v->overflow_bits = _mm512_set1_epi32((int)c->overflow_bits);
    v->overflow_result = _mm512_set1_epi32((int)c->overflow_result[saturate != 0]);
    v->nan_base = _mm512_set1_epi32((int)c->nan_base);
    v->nan_payload = _mm512_set1_epi32((int)c->nan_payload);
    v->sign_shift = _mm512_set1_epi32((int)c->sign_shift);
    v->mantissa_mask = _mm512_set1_epi32((int)c->mantissa_mask);
    v->decode_rebias = _mm512_set1_epi32((int)c->decode_rebias);
    v->special_start = _mm512_set1_epi32((int)c->special_start);
    v->special_base = _mm512_set1_epi32((int)c->special_base);
    v->special_payload = _mm512_set1_epi32((int)c->special_payload);
    v->subnormal_value = _mm512_loadu_si512(c->subnormal_value);
}

/* The same steps as avx2_fp8_encode, with mask registers choosing the case per lane. */
AVX512_TARGET static inline __m512i avx512_fp8_encode(__m512i u, const avx512_fp8 *v) {
    const __m512i one = _mm512_set1_epi32(1);
    __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __m512i sign = _mm512_and_si512(_mm512_srlv_epi32(u, v->sign_shift), _mm512_set1_epi32(0x80));

    __m512i lsb = _mm512_and_si512(_mm512_srlv_epi32(a, v->drop), one);
    __m512i result = _mm512_sub_epi32(
        _mm512_srlv_epi32(_mm512_add_epi32(_mm512_add_epi32(a, v->half_minus_one), lsb), v->drop), v->rebias);

    __mmask16 is_subnormal = _mm512_cmplt_epu32_mask(a, v->min_normal);
    if (is_subnormal) {
        __m512i shift = _mm512_min_epu32(_mm512_sub_epi32(v->subnormal_base, _mm512_srli_epi32(a, 23)),
                                         _mm512_set1_epi32(31));
        __m512i significand =
            _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x00800000));
        __m512i sub_half_minus_one = _mm512_sub_epi32(_mm512_sllv_epi32(one, _mm512_sub_epi32(shift, one)), one);
        __m512i sub_lsb = _mm512_and_si512(_mm512_srlv_epi32(significand, shift), one);
        __m512i subnormal = _mm512_srlv_epi32(
            _mm512_add_epi32(_mm512_add_epi32(significand, sub_half_minus_one), sub_lsb), shift);
        result = _mm512_mask_mov_epi32(result, is_subnormal, subnormal);
    }
    result = _mm512_mask_mov_epi32(result, _mm512_cmpge_epu32_mask(a, v->overflow_bits), v->overflow_result);
    __m512i nan = _mm512_or_si512(v->nan_base, _mm512_and_si512(_mm512_srlv_epi32(a, v->drop), v->nan_payload));
    result = _mm512_mask_mov_epi32(result, _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000)), nan);
    return _mm512_or_si512(result, sign);
}

AVX512_TARGET static void avx512_f32_to_fp8(uint8_t *dst, const float *src, size_t n, const fp8_consts *c,
                                            int saturate) {
    avx512_fp8 v;
    avx512_fp8_load(&v, c, saturate);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i lo = avx512_fp8_encode(_mm512_loadu_si512(src + i), &v);
        __m512i hi = avx512_fp8_encode(_mm512_loadu_si512(src + i + 16), &v);
        _mm_storeu_si128((__m128i *)(dst + i), _mm512_cvtepi32_epi8(lo));
        _mm_storeu_si128((__m128i *)(dst + i + 16), _mm512_cvtepi32_epi8(hi));
    }
    for (; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512i r = avx512_fp8_encode(_mm512_maskz_loadu_epi32(m, src + i), &v);
        _mm512_mask_cvtepi32_storeu_epi8(dst + i, m, r);
    }
}

AVX512_TARGET static inline __m512i avx512_fp8_decode(__m512i b, const avx512_fp8 *v) {
    __m512i sign = _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 24);
    __m512i magnitude = _mm512_and_si512(b, _mm512_set1_epi32(0x7f));
    __m512i mantissa = _mm512_and_si512(magnitude, v->mantissa_mask);
    __m512i result = _mm512_add_epi32(_mm512_sllv_epi32(magnitude, v->drop), v->decode_rebias);
    __mmask16 is_subnormal = _mm512_cmple_epu32_mask(magnitude, v->mantissa_mask);
    result = _mm512_mask_mov_epi32(result, is_subnormal, _mm512_permutexvar_epi32(mantissa, v->subnormal_value));
    __mmask16 nonzero_mantissa = _mm512_test_epi32_mask(mantissa, mantissa);
    __m512i payload = _mm512_mask_or_epi32(_mm512_sllv_epi32(mantissa, v->drop), nonzero_mantissa,
                                           _mm512_sllv_epi32(mantissa, v->drop), _mm512_set1_epi32(0x00400000));
    __m512i special = _mm512_or_si512(v->special_base, _mm512_and_si512(v->special_payload, payload));
    result = _mm512_mask_mov_epi32(result, _mm512_cmpge_epu32_mask(magnitude, v->special_start), special);
    return _mm512_or_si512(result, sign);
}

AVX512_TARGET static void avx512_fp8_to_f32(float *dst, const uint8_t *src, size_t n, const fp8_consts *c) {
    avx512_fp8 v;
    avx512_fp8_load(&v, c, 0);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(src + i + 16)));
        _mm512_storeu_si512(dst + i, avx512_fp8_decode(lo, &v));
        _mm512_storeu_si512(dst + i + 16, avx512_fp8_decode(hi, &v));
    }
    for (; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512i b = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, src + i));
        _mm512_mask_storeu_epi32(dst + i, m, avx512_fp8_decode(b, &v));
    }
}

static void avx512_f32_to_e4m3(uint8_t *dst, const float *src, size_t n, int saturate) {
    avx512_f32_to_fp8(dst, src, n, e4m3(), saturate);
}
static void avx512_f32_to_e5m2(uint8_t *dst, const float *src, size_t n, int saturate) {
    avx512_f32_to_fp8(dst, src, n, e5m2(), saturate);
}
static void avx512_e4m3_to_f32(float *dst, const uint8_t *src, size_t n) { avx512_fp8_to_f32(dst, src, n, e4m3()); }
static void avx512_e5m2_to_f32(float *dst, const uint8_t *src, size_t n) { avx512_fp8_to_f32(dst, src, n, e5m2()); }

/* mp_hash32 of 8 counters, each result in the low 32 bits of its 64-bit lane */
AVX512_TARGET static inline __m512i avx512_hash8(__m512i z) {
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 30));
    z = _mm512_mullo_epi64(z, _mm512_set1_epi64((long long)HASH_MUL1));
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 27));
    z = _mm512_mullo_epi64(z, _mm512_set1_epi64((long long)HASH_MUL2));
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
    return _mm512_srli_epi64(z, 32);
}

AVX512_TARGET static void avx512_f32_to_bf16_stochastic(uint16_t *dst, const float *src, size_t n, uint64_t seed) {
    /* counters for elements i..i+7 and i+8..i+15 */
    __m512i lane = _mm512_setr_epi64(1, 2, 3, 4, 5, 6, 7, 8);
    __m512i za = _mm512_add_epi64(_mm512_set1_epi64((long long)seed),
                                  _mm512_mullo_epi64(lane, _mm512_set1_epi64((long long)HASH_STEP)));
    __m512i zb = _mm512_add_epi64(za, _mm512_set1_epi64((long long)(HASH_STEP * 8)));
    const __m512i step = _mm512_set1_epi64((long long)(HASH_STEP * 16));
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m256i ra = _mm512_cvtepi64_epi32(avx512_hash8(za));
        __m256i rb = _mm512_cvtepi64_epi32(avx512_hash8(zb));
        __m512i random = _mm512_inserti64x4(_mm512_castsi256_si512(ra), rb, 1);
        __m512i u = _mm512_maskz_loadu_epi32(m, src + i);
        __m512i kept = _mm512_srli_epi32(u, 16);
        __m512i dropped = _mm512_and_si512(u, _mm512_set1_epi32(0xffff));
        __mmask16 up = _mm512_cmpgt_epu32_mask(dropped, _mm512_srli_epi32(random, 16));
        __m512i rounded = _mm512_mask_add_epi32(kept, up, kept, _mm512_set1_epi32(1));
        __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
        __mmask16 is_nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
        rounded = _mm512_mask_mov_epi32(rounded, is_nan, _mm512_or_si512(kept, _mm512_set1_epi32(0x0040)));
        _mm512_mask_cvtepi32_storeu_epi16(dst + i, m, rounded);
        za = _mm512_add_epi64(za, step);
        zb = _mm512_add_epi64(zb, step);
    }
}

static const fp_convert_kernels avx512_kernels = {
    avx512_f32_to_f16,  avx512_f16_to_f32,  avx512_f32_to_bf16, avx512_bf16_to_f32,
    avx512_f32_to_e4m3, avx512_e4m3_to_f32, avx512_f32_to_e5m2, avx512_e5m2_to_f32,
    avx512_f32_to_bf16_stochastic,
};

const fp_convert_kernels *const fp_kernels_avx2 = &avx2_kernels;
const fp_convert_kernels *const fp_kernels_avx512 = &avx512_kernels;

#else /* not x86: only the scalar level exists */

const fp_convert_kernels *const fp_kernels_avx2 = 0;
const fp_convert_kernels *const fp_kernels_avx512 = 0;

#endif
