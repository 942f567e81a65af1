/* matmul_lowp.h: the linear layer with 16-bit (bf16 or fp16) inputs and fp32 accumulation, as tensor cores compute it. */
#ifndef MIXPAR_OPS_MATMUL_LOWP_H
#define MIXPAR_OPS_MATMUL_LOWP_H

/* Under mixed precision a matrix product reads its operands in a 16-bit format and accumulates the
 * products in fp32 (a product of two bf16 or two fp16 numbers is exact in fp32, so only the sum rounds).
 * The same shapes and conventions as matmul.h: inp (N,C), weight (OC,C) row-major, out (N,OC) fp32.
 *
 *     matmul_lowp_forward(out, inp16, w16, bias, N, C, OC, LOWP_BF16);     out = inp @ weight^T + bias
 *     matmul_lowp_backward(dinp, dw, dbias, dout16, inp16, w16, N, C, OC, LOWP_BF16);
 *
 * forward OVERWRITES out; backward OVERWRITES dinp (the input gradient is a fresh tensor, which the
 * model rounds to the low format next) and ACCUMULATES dweight and dbias in fp32 (the fp32 gradient
 * buffer of fp32 weights: Megatron's fused weight-gradient accumulation does the same, so the weight
 * gradient is never rounded to 16 bits). Any output may be NULL when not wanted.
 *
 * How the product is computed on a CPU (matmul_lowp_path says which one runs):
 *   - "decode+sgemm": both operands are widened to fp32 (exact) in blocks and multiplied by the fp32
 *     sgemm. Correct for both formats everywhere; it pays the conversion on top of an fp32 product.
 *   - "amx-bf16": bf16 on CPUs with AMX (TDPBF16PS on 16x32 bf16 tiles into 16x16 fp32 tiles), when the
 *     kernel grants the tile registers (arch_prctl ARCH_REQ_XCOMP_PERM): measured 3-5.6x the OpenBLAS
 *     sgemm on GPT-2's shapes on a CPU with AMX (bench/gemm_lowp).
 *   - "avx512-bf16": bf16 on CPUs with AVX512_BF16 but no AMX (VDPBF16PS: 32 bf16 products summed
 *     pairwise into 16 fp32 lanes). Where it issues at the rate of an fp32 FMA (the course's AMD EPYC
 *     build machines) it does twice the work: about 2x the core's fp32 kernel on GPT-2's shapes
 *     (bench/gemm_lowp); a CPU that issues it at half that rate gains nothing. AMX is preferred where
 *     both exist.
 * The 16-bit engines flush subnormal inputs to zero and round to nearest even, as GPUs' bf16 paths do.
 * Results of the paths differ only in the order of fp32 additions (and in those flushed subnormals). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { LOWP_BF16, LOWP_FP16 } lowp_format;

void matmul_lowp_forward(float *out, const uint16_t *inp, const uint16_t *weight, const float *bias, int N, int C,
                         int OC, lowp_format fmt);
void matmul_lowp_backward(float *dinp, float *dweight, float *dbias, const uint16_t *dout, const uint16_t *inp,
                          const uint16_t *weight, int N, int C, int OC, lowp_format fmt);
/* The same, but dweight is overwritten (=) instead of added to: for a gradient buffer committed without zeroing
 * (base/mem.h mem_commit_to_overwrite) whose first and only product this is. The same bits as adding to zeros. */
void matmul_lowp_backward_writing_dweight(float *dinp, float *dweight, float *dbias, const uint16_t *dout,
                                          const uint16_t *inp, const uint16_t *weight, int N, int C, int OC,
                                          lowp_format fmt);

/* The definition: decode everything to fp32, then the plain-loop matmul_*_ref (double accumulation). */
void matmul_lowp_forward_ref(float *out, const uint16_t *inp, const uint16_t *weight, const float *bias, int N,
                             int C, int OC, lowp_format fmt);
void matmul_lowp_backward_ref(float *dinp, float *dweight, float *dbias, const uint16_t *dout,
                              const uint16_t *inp, const uint16_t *weight, int N, int C, int OC, lowp_format fmt);

/* "decode+sgemm", "amx-bf16" or "avx512-bf16": the path matmul_lowp_* takes for this format on this CPU. */
const char *matmul_lowp_path(lowp_format fmt);

/* For tests and benchmarks: true makes every format take the portable decode+sgemm path (so both paths
 * can be compared on one machine); false restores the automatic choice. Call it between matmuls. */
void matmul_lowp_force_portable(bool portable);

/* Widen n 16-bit values to fp32 / round n fp32 values to 16 bits (nearest even), in the format. */
void lowp_decode(float *dst, const uint16_t *src, size_t n, lowp_format fmt);
void lowp_encode(uint16_t *dst, const float *src, size_t n, lowp_format fmt);

#endif
