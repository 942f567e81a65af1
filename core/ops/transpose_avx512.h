/* transpose_avx512.h: a 16 x 16 transpose of 32-bit words in AVX-512 registers, for the packing of gemm_bf16.c and gemm_f32.c. */
#ifndef MIXPAR_OPS_TRANSPOSE_AVX512_H
#define MIXPAR_OPS_TRANSPOSE_AVX512_H

#include <immintrin.h>

/* Compiled for AVX-512 whatever the build's flags: call it only from functions compiled for AVX-512 too, and
 * only where the CPU check said so. */
/* Transpose 16 rows of 16 words in place: r[j] word i := old r[i] word j. Four rounds of shuffles within
 * and across the 128-bit lanes (16 x 4 = 64 shuffles for 256 words). */
__attribute__((target("avx512f"), always_inline)) static inline void transpose_16x16(__m512i r[16]) {
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
