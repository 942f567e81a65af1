/* gemm_avx512.h: what gemm_bf16.c's AVX512-BF16 engine and gemm_f32.c share: the register tile's shape and its edges, a 16 x 16 transpose, the empty sum. */
#ifndef MIXPAR_OPS_GEMM_AVX512_H
#define MIXPAR_OPS_GEMM_AVX512_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>

/* The functions marked GEMM_AVX512 are compiled for AVX-512 whatever the build's flags: call them only from
 * functions compiled for AVX-512 too, and only where the CPU check said so. */
#define GEMM_AVX512 __attribute__((target("avx512f"), always_inline)) static inline

/* The register tile of both kernels: GEMM_MR rows of C x GEMM_NV vectors of 16 columns, GEMM_MR x GEMM_NV
 * accumulators (24 of the 32 zmm registers). */
enum { GEMM_MR = 8, GEMM_NV = 3, GEMM_NR = 16 * GEMM_NV };

/* GEMM_BY_ROWS(mr, TILE): TILE(rows) with rows the constant equal to mr (1 to GEMM_MR), so that each copy of an
 * always-inline tile unrolls its row loop and keeps its accumulators in registers (only the last row tile of a
 * ragged M is short). */
#define GEMM_BY_ROWS(mr, TILE)                                                                                        \
    switch (mr) {                                                                                                     \
    case 8: TILE(8); break;                                                                                           \
    case 7: TILE(7); break;                                                                                           \
    case 6: TILE(6); break;                                                                                           \
    case 5: TILE(5); break;                                                                                           \
    case 4: TILE(4); break;                                                                                           \
    case 3: TILE(3); break;                                                                                           \
    case 2: TILE(2); break;                                                                                           \
    default: TILE(1); break;                                                                                          \
    }

/* A tile's accumulators at zero, before its k loop. The first k block meets the tile's C for the first time: 24
 * cache lines of a C that is often megabytes, in no cache, read after the k loop (a weight gradient, dW += dout^T @
 * inp) or written (the lm head's 51 MB of logits). Asked for now, they arrive while the loop runs (the bf16 weight
 * gradients: 76-77% -> 81-83% of the peak, bench/README.md). Later k blocks find C where the previous one left it.
 * (The loops are unrolled by hand: GCC's -O2 would not, and the accumulators would live on the stack.) */
GEMM_AVX512 void gemm_tile_start(const int mr, __m512 acc[GEMM_MR][GEMM_NV], const float *c, size_t ldc, bool first) {
#pragma GCC unroll 8
    for (int r = 0; r < GEMM_MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < GEMM_NV; v++) acc[r][v] = _mm512_setzero_ps();
    if (first)
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
            for (int v = 0; v < GEMM_NV; v++) _mm_prefetch((const char *)(c + (size_t)r * ldc + 16 * v), _MM_HINT_T0);
}

/* The tile's sums into C (mr x nr at c, row stride ldc): the first k block adds them to the bias (or 0) and, when
 * accumulating, to C; later blocks add them to C. Columns past nr are not touched. */
GEMM_AVX512 void gemm_tile_store(const int mr, __m512 acc[GEMM_MR][GEMM_NV], float *c, size_t ldc, int nr, bool first,
                                 bool accumulate, const float *bias) {
    __mmask16 mask[GEMM_NV];
    __m512 add[GEMM_NV]; /* what the first block adds besides the product: the bias */
#pragma GCC unroll 3
    for (int v = 0; v < GEMM_NV; v++) {
        const int cols = nr - 16 * v;
        mask[v] = cols >= 16 ? 0xFFFF : cols > 0 ? (__mmask16)((1u << cols) - 1) : 0;
        add[v] = first && bias ? _mm512_maskz_loadu_ps(mask[v], bias + 16 * v) : _mm512_setzero_ps();
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
        for (int v = 0; v < GEMM_NV; v++) {
            if (!mask[v]) continue;
            float *cp = c + (size_t)r * ldc + 16 * v;
            __m512 x = _mm512_add_ps(acc[r][v], add[v]);
            if (!first || accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], cp));
            _mm512_mask_storeu_ps(cp, mask[v], x);
        }
}

/* C (M,N) = (accumulate ? C : 0) + bias for a product with K = 0: an empty sum leaves only the base and the bias. */
static inline void gemm_empty_sum(int M, int N, const float *bias, bool accumulate, float *C, int ldc) {
    if (accumulate && !bias) return;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float *c = C + (size_t)m * ldc + n;
            *c = (accumulate ? *c : 0.0f) + (bias ? bias[n] : 0.0f);
        }
}

/* Transpose 16 rows of 16 words in place: r[j] word i := old r[i] word j. Four rounds of shuffles within
 * and across the 128-bit lanes (16 x 4 = 64 shuffles for 256 words). */
GEMM_AVX512 void transpose_16x16(__m512i r[16]) {
    /* every loop unrolled (GCC -O2 would not), so the 16 rows stay in registers */
    __m512i t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) { /* per lane: (a0 b0 a1 b1), (a2 b2 a3 b3) */
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) { /* per lane: column j of rows 4i..4i+3, j = 0..3 */
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    /* r[4g + j] lane L now holds column 4L + j of row group g; gather the four groups' lane L together */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512i x = _mm512_shuffle_i32x4(r[j], r[4 + j], _MM_SHUFFLE(2, 0, 2, 0));
        __m512i y = _mm512_shuffle_i32x4(r[j], r[4 + j], _MM_SHUFFLE(3, 1, 3, 1));
        __m512i z = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], _MM_SHUFFLE(2, 0, 2, 0));
        __m512i w = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], _MM_SHUFFLE(3, 1, 3, 1));
        t[j] = _mm512_shuffle_i32x4(x, z, _MM_SHUFFLE(2, 0, 2, 0));      /* column j      (lane 0) */
        t[8 + j] = _mm512_shuffle_i32x4(x, z, _MM_SHUFFLE(3, 1, 3, 1));  /* column 8 + j  (lane 2) */
        t[4 + j] = _mm512_shuffle_i32x4(y, w, _MM_SHUFFLE(2, 0, 2, 0));  /* column 4 + j  (lane 1) */
        t[12 + j] = _mm512_shuffle_i32x4(y, w, _MM_SHUFFLE(3, 1, 3, 1)); /* column 12 + j (lane 3) */
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

#endif
