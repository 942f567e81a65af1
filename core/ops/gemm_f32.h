/* gemm_f32.h: mixpar's own fp32 matrix product on AVX-512 (FMA), for matmul.c's matmul_sgemm (not a public API). */
#ifndef MIXPAR_OPS_GEMM_F32_H
#define MIXPAR_OPS_GEMM_F32_H

#include <stdbool.h>

/* Whether gemm_f32 may be called: the CPU runs AVX-512 F (and the OS saves its registers), the ops/ kernels run
 * at the avx512 level (ops/isa.h: MIXPAR_OPS_ISA=avx2 or base turns this kernel off too), and gemm_f32_use has
 * not turned it off. Where it is false, matmul_sgemm calls OpenBLAS. */
bool gemm_f32_available(void);
/* For tests and benchmarks: false sends every fp32 product to OpenBLAS, true back to this kernel where the CPU
 * has AVX-512. Returns whether the kernel is in use now. Call it between products. */
bool gemm_f32_use(bool use);

/* k is summed in blocks of GEMM_F32_KC: each block's sum is a chain of fused multiply-adds in k order from 0,
 * and then added to the element (see gemm_f32 for the whole definition). */
enum { GEMM_F32_KC = 384 };

/* Row-major, in cblas_sgemm's letters (M, N, K are BLAS's, not the model's rows and channels):
 *
 *     C (M,N) = (accumulate ? C : 0) + op(A) @ op(B) + bias
 *
 * op(A) is (M,K): A stored (M,K) with leading dimension lda, or (K,M) when trans_a. op(B) is (K,N): B
 * stored (K,N), or (N,K) when trans_b. bias (N) is added to every row, or NULL. K may be 0 (then C = base +
 * bias); M or N 0 does nothing.
 *
 * Every element is computed in the same order, whatever the layout, the thread count or the vector width:
 * for each block of GEMM_F32_KC values of k, in order, s = fmaf(a_k, b_k, s) from s = 0 along the block; the
 * first block's s is added to the bias (or 0) and, when accumulating, to C; each later block's s is added to
 * C. So the four layouts of one product agree bit for bit, and the results do not depend on the threads
 * (tests/unit/test_ops_gemm_f32.c checks this definition element by element).
 *
 * The work is split over the OpenMP threads by columns of C (rows when C is taller than wide). Not
 * reentrant: the packing buffers are shared by all calls (the model runs one matmul at a time; matmul_sgemm
 * calls OpenBLAS instead inside a parallel region). Only call it when gemm_f32_available(). */
void gemm_f32(bool trans_a, bool trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
              const float *bias, bool accumulate, float *C, int ldc);

#endif
