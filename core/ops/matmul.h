/* matmul.h: the linear layer out = inp @ weight^T + bias, forward and backward, on the fp32 GEMM and as plain loops. */
#ifndef MIXPAR_OPS_MATMUL_H
#define MIXPAR_OPS_MATMUL_H

#include <stdbool.h>

/* Shapes: N rows (B*T positions), C input channels, OC output channels. Weights are (out, in) row-major,
 * as in llm.c and PyTorch's nn.Linear, so row o of `weight` is the filter of output channel o.
 *
 *     matmul_forward(out, inp, weight, bias, N, C, OC);             out = inp @ weight^T + bias
 *     matmul_backward(dinp, dweight, dbias, dout, inp, weight, ...); grads += ...
 *
 * The forward pass overwrites `out`. The backward pass ACCUMULATES into dinp, dweight and dbias (the
 * caller zeroes them once per step), so tied weights and gradient accumulation need nothing special.
 * Any of dinp, dweight, dbias may be NULL when that gradient is not wanted; bias may be NULL.
 *
 * The *_ref versions are the definition in plain loops (accumulating in double); they are slow and
 * exist so tests can check the BLAS path against something readable.
 *
 * The products: the core's own AVX-512 kernel where the CPU has AVX-512 (ops/gemm_f32.h: each element
 * one defined chain of fused multiply-adds, the same bits on every such machine), OpenBLAS elsewhere.
 *
 * Threads: every kernel in ops/, the matmuls included, runs on the OpenMP threads (OMP_NUM_THREADS;
 * by default one per core). OpenBLAS is set to one thread on first use and each OpenMP thread runs
 * its own block of the product: two thread pools on the same cores starve each other (matmul.c). */

/* out (N,OC) = inp (N,C) @ weight^T + bias; weight (OC,C), bias (OC) or NULL. */
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);
/* dinp (N,C) += dout @ weight; dweight (OC,C) += dout^T @ inp; dbias (OC) += sum over rows of dout (N,OC). */
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int C, int OC);

void matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);
void matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                         const float *weight, int N, int C, int OC);

/* Row-major C (M,N) = alpha * op(A) @ op(B) + beta * C, op(A) (M,K), op(B) (K,N): cblas_sgemm's arguments
 * (transposes as booleans, leading dimensions lda, ldb, ldc), with C split into column blocks (row blocks
 * when C is taller than wide) that the OpenMP threads multiply independently. alpha = 1 with beta = 0 or 1
 * runs gemm_f32 where it is available; anything else, or a call inside a parallel region, runs OpenBLAS. */
void matmul_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc);

#endif
