/* gemm_bf16.h: a bf16 x bf16 -> fp32 matrix product on AMX or AVX512_BF16, for matmul_lowp.c (not a public API). */
#ifndef MIXPAR_OPS_GEMM_BF16_H
#define MIXPAR_OPS_GEMM_BF16_H

#include <stdbool.h>
#include <stdint.h>

/* The engines, in order of speed (gemm_bf16.c explains both):
 *   GEMM_BF16_AVX512  VDPBF16PS vector dot products: AVX512 F, BW, VL and BF16
 *   GEMM_BF16_AMX     TDPBF16PS tile matrix products: the above plus AMX-TILE and AMX-BF16, and the
 *                     operating system's permission to use the tile registers (Linux >= 5.16) */
typedef enum { GEMM_BF16_NONE, GEMM_BF16_AVX512, GEMM_BF16_AMX } gemm_bf16_engine;

gemm_bf16_engine gemm_bf16_best(void);       /* the fastest this CPU and OS allow; asked once, then cached */
gemm_bf16_engine gemm_bf16_engine_now(void); /* the one gemm_bf16 uses: the best, unless lowered below */
/* For tests and benchmarks: use `engine` from now on (clamped to gemm_bf16_best()); returns the engine
 * now in use. GEMM_BF16_NONE makes gemm_bf16_available() false. Call it between products. */
gemm_bf16_engine gemm_bf16_use(gemm_bf16_engine engine);
const char *gemm_bf16_engine_name(gemm_bf16_engine engine); /* "amx-bf16", "avx512-bf16", "none" */
/* Whether gemm_bf16 may be called: an engine is in use. */
bool gemm_bf16_available(void);

/* Row-major, in cblas_sgemm's letters (M, N, K here are BLAS's, not the model's rows and channels):
 *
 *     C (M,N) = (accumulate ? C : 0) + op(A) @ op(B) + bias
 *
 * op(A) is (M,K): A stored (M,K) with leading dimension lda, or (K,M) when trans_a. op(B) is (K,N): B
 * stored (K,N), or (N,K) when trans_b. A and B hold bf16 bit patterns; the products are summed in fp32
 * by TDPBF16PS or VDPBF16PS, which treat subnormal bf16 inputs as zero and flush subnormal results.
 * bias (N) is added to every row, or NULL. K may be 0 (then C = base + bias); M or N 0 does nothing.
 *
 * The work is split over the OpenMP threads by columns of C (rows when C is taller than wide). Each
 * element's sum runs over K in the same order whatever the thread count, so results do not depend on it.
 * Not reentrant: the packing buffers are shared by all calls (the model runs one matmul at a time).
 * Only call it when gemm_bf16_available(). The two engines add in different orders: their results
 * differ by fp32 rounding. */
void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
               int ldb, const float *bias, bool accumulate, float *C, int ldc);

#endif
