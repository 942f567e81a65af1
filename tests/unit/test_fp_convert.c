/* test_fp_convert.c: Criterion tests of array conversion (fp/convert.c): every SIMD level gives the scalar reference's
 * bits on adversarial arrays (boundaries, ties, NaN payloads, subnormals, overflow), for awkward lengths and offsets. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "fp/convert.h"
#include "fp/format.h"
#include "fp/half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

/* ------------------------------------------------------------------ adversarial inputs */

static size_t push(float *out, size_t n, float x) {
    out[n] = x;
    return n + 1;
}
static size_t push_bits(float *out, size_t n, uint32_t u) { return push(out, n, fp_float_from_bits(u)); }

/* Every value of a format, one fp32 ulp either side, the midpoints to the next value and one ulp either side,
 * both signs. */
static size_t push_format_boundaries(float *out, size_t n, const fp_format *f) {
    uint32_t count = 1u << (f->ebits + f->mbits);
    for (uint32_t b = 0; b <= fp_max_bits(f) && b < count; b++) {
        float v = fp_decode(f, b);
        double next = b < fp_max_bits(f) ? fp_decode(f, b + 1) : (double)v + fp_ulp(f, v);
        float mid = (float)(((double)v + next) / 2);
        float probes[6] = {v, nextafterf(v, 0), nextafterf(v, INFINITY), mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
        for (int p = 0; p < 6; p++) {
            n = push(out, n, probes[p]);
            n = push(out, n, -probes[p]);
        }
    }
    return n;
}

/* NaNs with payloads, infinities, zeros, fp32 subnormals, bf16 ties, extremes. */
static size_t push_specials(float *out, size_t n) {
    static const uint32_t bits[] = {
        0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7f800001, 0xff800001, 0x7fa00000, 0x7fbfffff,
        0x7fc00000, 0xffc00000, 0x7fc00001, 0xffc12345, 0x7f802000, 0x7f801fff, 0x7fffe000, 0x7fffffff,
        0xffffffff, 0x7f80ffff, 0x7f810000, 0x00000001, 0x80000001, 0x007fffff, 0x807fffff, 0x00010000,
        0x00018000, 0x00008000, 0x00008001, 0x00400000, 0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001,
        0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff, 0x00800000, 0x80800000, 0x3f800000, 0x3dcccccd,
    };
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) n = push_bits(out, n, bits[i]);
    return n;
}

typedef struct {
    float *x;
    size_t n;
} input;

/* The adversarial values, then random fp32 patterns (every class) up to `total`. */
static input make_input(size_t total, uint64_t seed) {
    input in;
    size_t cap = total + 2000000;
    in.x = malloc(cap * sizeof(float));
    cr_assert_not_null(in.x);
    size_t n = 0;
    n = push_specials(in.x, n);
    n = push_format_boundaries(in.x, n, &FP_FP16);
    n = push_format_boundaries(in.x, n, &FP_E4M3);
    n = push_format_boundaries(in.x, n, &FP_E5M2);
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    /* bf16 neighbourhoods: random patterns with the low 16 bits set to the interesting cases */
    static const uint32_t low[] = {0x0000, 0x7fff, 0x8000, 0x8001, 0xffff, 0x0001};
    for (int i = 0; i < 6000; i++) n = push_bits(in.x, n, (mp_rng_u32(&rng) & 0xffff0000u) | low[i % 6]);
    while (n < total) n = push_bits(in.x, n, mp_rng_u32(&rng));
    in.n = n;
    return in;
}

/* ------------------------------------------------------------------ comparison helpers */

enum { GUARD = 64 };
static const unsigned char CANARY = 0xa5;

static void check_same(const void *want, const void *got, size_t n, size_t size, const char *what, fp_simd level,
                       const float *src) {
    const unsigned char *a = want, *b = got;
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i * size, b + i * size, size) != 0) {
            uint32_t wa = 0, gb = 0;
            memcpy(&wa, a + i * size, size);
            memcpy(&gb, b + i * size, size);
            cr_assert_fail("%s at level %s, n = %zu, element %zu (input fp32 0x%08x): scalar 0x%x, simd 0x%x", what,
                           fp_simd_name(level), n, i, src ? fp_float_bits(src[i]) : 0u, wa, gb);
        }
    for (size_t i = 0; i < GUARD; i++)
        cr_assert_eq(b[n * size + i], CANARY, "%s at level %s, n = %zu: wrote past the end", what,
                     fp_simd_name(level), n);
}

/* Runs every encoder of a level on src[0..n) and compares with the scalar reference. */
static void check_encoders(const float *src, size_t n, fp_simd level) {
    size_t cap = n + GUARD;
    uint16_t *want16 = malloc(cap * 2), *got16 = malloc(cap * 2);
    uint8_t *want8 = malloc(cap), *got8 = malloc(cap);
    cr_assert(want16 && got16 && want8 && got8);
    cr_assert_eq(fp_set_simd_level(level), level);

#define ENCODE16(name, ...)                                                                                      \
    do {                                                                                                          \
        memset(got16, CANARY, cap * 2);                                                                           \
        name##_scalar(want16, src, n, ##__VA_ARGS__);                                                             \
        name(got16, src, n, ##__VA_ARGS__);                                                                       \
        check_same(want16, got16, n, 2, #name, level, src);                                                       \
    } while (0)
#define ENCODE8(name, saturate)                                                                                  \
    do {                                                                                                          \
        memset(got8, CANARY, cap);                                                                                \
        name##_scalar(want8, src, n, saturate);                                                                   \
        name(got8, src, n, saturate);                                                                             \
        check_same(want8, got8, n, 1, saturate ? #name " (saturating)" : #name, level, src);                     \
    } while (0)

    ENCODE16(fp_f32_to_f16);
    ENCODE16(fp_f32_to_bf16);
    ENCODE16(fp_f32_to_bf16_stochastic, (uint64_t)12345);
    ENCODE8(fp_f32_to_e4m3, 0);
    ENCODE8(fp_f32_to_e4m3, 1);
    ENCODE8(fp_f32_to_e5m2, 0);
    ENCODE8(fp_f32_to_e5m2, 1);
#undef ENCODE16
#undef ENCODE8
    free(want16);
    free(got16);
    free(want8);
    free(got8);
}

static const size_t lengths[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 1000, 1000003};

Test(fp_convert, simd_encoders_match_scalar_for_every_level_and_length) {
    input in = make_input(1000003 + 1, 99);
    for (int level = FP_SIMD_SCALAR; level <= (int)fp_simd_max_level(); level++) {
        for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
            size_t n = lengths[k];
            check_encoders(in.x, n, (fp_simd)level);
            check_encoders(in.x + 1, n, (fp_simd)level); /* unaligned source */
        }
        check_encoders(in.x, in.n, (fp_simd)level); /* everything adversarial plus random */
    }
    free(in.x);
}

/* Decoders: every fp16/bf16 pattern and every fp8 pattern, at awkward lengths and offsets. */
Test(fp_convert, simd_decoders_match_scalar_on_every_pattern) {
    enum { N = 65536 + 40 };
    uint16_t *h = malloc(N * 2);
    uint8_t *b = malloc(N);
    float *want = malloc((N + GUARD) * 4), *got = malloc((N + GUARD) * 4);
    for (size_t i = 0; i < N; i++) {
        h[i] = (uint16_t)(i * 40503u); /* a permutation of all 65536 patterns, then a few more */
        b[i] = (uint8_t)(i * 167u);
    }
    for (int level = FP_SIMD_SCALAR; level <= (int)fp_simd_max_level(); level++) {
        fp_set_simd_level((fp_simd)level);
        static const size_t offsets[] = {0, 1, 3};
        for (size_t o = 0; o < 3; o++)
            for (size_t k = 0; k < sizeof lengths / sizeof lengths[0] + 1; k++) {
                size_t n = k < sizeof lengths / sizeof lengths[0] ? lengths[k] : N - 3;
                if (n > N - 3) continue;
                size_t off = offsets[o];
#define DECODE(name, src)                                                                                        \
    do {                                                                                                          \
        memset(got, CANARY, (n + GUARD) * 4);                                                                     \
        name##_scalar(want, src + off, n);                                                                        \
        name(got, src + off, n);                                                                                  \
        check_same(want, got, n, 4, #name, (fp_simd)level, NULL);                                                \
    } while (0)
                DECODE(fp_f16_to_f32, h);
                DECODE(fp_bf16_to_f32, h);
                DECODE(fp_e4m3_to_f32, b);
                DECODE(fp_e5m2_to_f32, b);
#undef DECODE
            }
    }
    free(h);
    free(b);
    free(want);
    free(got);
}

/* The scalar array paths are the element functions: half.c for fp16/bf16, the engine for everything. */
Test(fp_convert, scalar_arrays_equal_element_functions) {
    input in = make_input(300000, 7);
    size_t n = in.n;
    uint16_t *a16 = malloc(n * 2);
    uint8_t *a8 = malloc(n);
    float *back = malloc(n * 4);
    fp_f32_to_f16_scalar(a16, in.x, n);
    for (size_t i = 0; i < n; i++) cr_assert_eq(a16[i], fp16_from_float(in.x[i]), "fp16 element %zu", i);
    fp_f16_to_f32_scalar(back, a16, n);
    for (size_t i = 0; i < n; i++) cr_assert_eq(fp_float_bits(back[i]), fp_float_bits(fp16_to_float(a16[i])));
    fp_f32_to_bf16_scalar(a16, in.x, n);
    for (size_t i = 0; i < n; i++) cr_assert_eq(a16[i], bf16_from_float(in.x[i]), "bf16 element %zu", i);
    fp_f32_to_bf16_stochastic_scalar(a16, in.x, n, 77);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(a16[i], fp_encode(&FP_BF16, in.x[i], FP_ROUND_STOCHASTIC, 0, mp_hash32(77, i)));
    for (int saturate = 0; saturate < 2; saturate++) {
        fp_f32_to_e4m3_scalar(a8, in.x, n, saturate);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(a8[i], fp_encode(&FP_E4M3, in.x[i], FP_ROUND_NEAREST_EVEN, saturate, 0), "e4m3 %zu", i);
        fp_e4m3_to_f32_scalar(back, a8, n);
        for (size_t i = 0; i < n; i++) cr_assert_eq(fp_float_bits(back[i]), fp_float_bits(fp_decode(&FP_E4M3, a8[i])));
        fp_f32_to_e5m2_scalar(a8, in.x, n, saturate);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(a8[i], fp_encode(&FP_E5M2, in.x[i], FP_ROUND_NEAREST_EVEN, saturate, 0), "e5m2 %zu", i);
    }
    free(a16);
    free(a8);
    free(back);
    free(in.x);
}

/* Stochastic rounding depends on (seed, index, value) only: the same at every level, different per seed. */
Test(fp_convert, stochastic_bf16_is_deterministic_per_seed) {
    enum { N = 100003 };
    float *x = malloc(N * 4);
    uint16_t *first = malloc(N * 2), *again = malloc(N * 2), *other = malloc(N * 2);
    mp_rng rng;
    mp_rng_seed(&rng, 1);
    for (size_t i = 0; i < N; i++) x[i] = mp_rng_normal(&rng);
    fp_set_simd_level(FP_SIMD_SCALAR);
    fp_f32_to_bf16_stochastic(first, x, N, 42);
    for (int level = FP_SIMD_SCALAR; level <= (int)fp_simd_max_level(); level++) {
        fp_set_simd_level((fp_simd)level);
        fp_f32_to_bf16_stochastic(again, x, N, 42);
        cr_assert(memcmp(first, again, N * 2) == 0, "seed 42 gives the same bf16 at level %s",
                  fp_simd_name((fp_simd)level));
        /* converting a suffix starts the index at 0 again: element i of the suffix uses hash(seed, i) */
        fp_f32_to_bf16_stochastic(again, x + 5, 100, 42);
        for (size_t i = 0; i < 100; i++)
            cr_assert_eq(again[i], fp_encode(&FP_BF16, x[5 + i], FP_ROUND_STOCHASTIC, 0, mp_hash32(42, i)));
    }
    fp_f32_to_bf16_stochastic(other, x, N, 43);
    size_t differ = 0, up = 0, down = 0;
    for (size_t i = 0; i < N; i++) {
        differ += first[i] != other[i];
        uint16_t rz = (uint16_t)fp_encode(&FP_BF16, x[i], FP_ROUND_TOWARD_ZERO, 0, 0);
        cr_assert(first[i] == rz || first[i] == rz + 1, "element %zu: SR must give a neighbour", i);
        up += first[i] != rz;
        down += first[i] == rz;
    }
    /* each element differs between two seeds with probability 2p(1-p), about 1/3 on average */
    cr_expect(differ > N / 5, "seeds 42 and 43 differ in only %zu of %d elements", differ, N);
    cr_expect(up > N / 3 && down > N / 3, "SR should round up about half the time: up %zu, down %zu", up, down);
}

#if defined(__x86_64__) || defined(__i386__)
/* Training code sometimes sets flush-to-zero and denormals-are-zero for speed. The conversions must not
 * change: every path uses integer steps or instructions that ignore those flags. */
Test(fp_convert, simd_matches_scalar_with_ftz_and_daz_set) {
    input in = make_input(20000, 3);
    unsigned int saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040); /* FTZ (bit 15) and DAZ (bit 6) */
    for (int level = FP_SIMD_SCALAR; level <= (int)fp_simd_max_level(); level++) check_encoders(in.x, in.n, (fp_simd)level);
    uint16_t all[65536];
    float want[65536 + GUARD], got[65536 + GUARD];
    for (uint32_t i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    fp_f16_to_f32_scalar(want, all, 65536);
    for (int level = FP_SIMD_SCALAR; level <= (int)fp_simd_max_level(); level++) {
        fp_set_simd_level((fp_simd)level);
        memset(got, CANARY, sizeof got);
        fp_f16_to_f32(got, all, 65536);
        check_same(want, got, 65536, 4, "fp_f16_to_f32 with FTZ/DAZ", (fp_simd)level, NULL);
    }
    _mm_setcsr(saved);
    free(in.x);
}
#endif

Test(fp_convert, simd_level_control) {
    fp_simd best = fp_simd_max_level();
    cr_assert_eq(fp_set_simd_level(FP_SIMD_SCALAR), FP_SIMD_SCALAR);
    cr_assert_eq(fp_simd_level(), FP_SIMD_SCALAR);
    cr_assert_eq(fp_set_simd_level(FP_SIMD_AVX512), best, "asking for more than the CPU has gives its best");
    cr_assert_eq(fp_simd_level(), best);
    cr_expect_str_eq(fp_simd_name(FP_SIMD_AVX2), "avx2");
    cr_expect_eq(fp_simd_from_name("avx512"), FP_SIMD_AVX512);
    cr_expect_eq(fp_simd_from_name("sse"), -1);
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
        cr_expect(best >= FP_SIMD_AVX2, "this CPU has AVX2+F16C but the best level is %s", fp_simd_name(best));
#endif
}

/* A few conversions checked against known answers, through the dispatching entry points. */
Test(fp_convert, known_values_through_dispatch) {
    const float x[5] = {1.0f, 0.1f, 65520.0f, 448.0f, 464.5f};
    uint16_t h[5], b[5];
    uint8_t e4[5], e5[5];
    fp_set_simd_level(fp_simd_max_level());
    fp_f32_to_f16(h, x, 5);
    fp_f32_to_bf16(b, x, 5);
    fp_f32_to_e4m3(e4, x, 5, 0);
    fp_f32_to_e5m2(e5, x, 5, 1);
    const uint16_t want_h[5] = {0x3c00, 0x2e66, 0x7c00, 0x5f00, 0x5f42};
    const uint16_t want_b[5] = {0x3f80, 0x3dcd, 0x4780, 0x43e0, 0x43e8};
    const uint8_t want_e4[5] = {0x38, 0x1d, 0x7f, 0x7e, 0x7f};
    const uint8_t want_e5[5] = {0x3c, 0x2e, 0x7b, 0x5f, 0x5f};
    for (int i = 0; i < 5; i++) {
        cr_expect_eq(h[i], want_h[i], "fp16(%g) = 0x%04x", (double)x[i], h[i]);
        cr_expect_eq(b[i], want_b[i], "bf16(%g) = 0x%04x", (double)x[i], b[i]);
        cr_expect_eq(e4[i], want_e4[i], "e4m3(%g) = 0x%02x", (double)x[i], e4[i]);
        cr_expect_eq(e5[i], want_e5[i], "e5m2 saturating(%g) = 0x%02x", (double)x[i], e5[i]);
    }
}
