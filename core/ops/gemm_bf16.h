/* gemm_bf16.h: a bf16 x bf16 -> fp32 matrix product with AVX512_BF16 (VDPBF16PS), for matmul_lowp.c (not a public API). */
#ifndef MIXPAR_OPS_GEMM_BF16_H
#define MIXPAR_OPS_GEMM_BF16_H

#include <stdbool.h>
#include <stdint.h>

/* Whether this CPU (and the operating system, which must save the 512-bit registers) can run gemm_bf16:
 * AVX512 F, BW, VL and BF16. Asked once, then cached. */
bool gemm_bf16_available(void);

/* Row-major, in cblas_sgemm's letters (M, N, K here are BLAS's, not the model's rows and channels):
 *
 *     C (M,N) = (accumulate ? C : 0) + op(A) @ op(B) + bias
 *
 * op(A) is (M,K): A stored (M,K) with leading dimension lda, or (K,M) when trans_a. op(B) is (K,N): B
 * stored (K,N), or (N,K) when trans_b. A and B hold bf16 bit patterns; the products are summed in fp32
 * by VDPBF16PS, which treats subnormal bf16 inputs as zero and flushes subnormal results to zero.
 * bias (N) is added to every row, or NULL. K may be 0 (then C = base + bias); M or N 0 does nothing.
 *
 * The work is split over the OpenMP threads by columns of C (rows when C is taller than wide). Each
 * element's sum runs over K in the same order whatever the thread count, so results do not depend on it.
 * Not reentrant: the packing buffers are shared by all calls (the model runs one matmul at a time).
 * Only call it when gemm_bf16_available(). */
void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
               int ldb, const float *bias, bool accumulate, float *C, int ldc);

#endif
