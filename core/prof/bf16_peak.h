/* bf16_peak.h: the peak of the bf16 products, measured as the sgemm peak is, for the roof of a 16-bit run (lab 23). */
#ifndef MIXPAR_PROF_BF16_PEAK_H
#define MIXPAR_PROF_BF16_PEAK_H

/* The best of a few n x n x n bf16 products on the model's own path (matmul_lowp_forward: out = inp @ W^T, bf16
 * operands, fp32 sums), after one warm-up call, on the OpenMP threads, in FLOP/s: the counterpart of
 * prof_measure_gemm_flops (prof/roofline.h) for a run whose products run on a bf16 kernel. n = 1536 makes each call
 * several GFLOP. Its buffers come from the core's allocator (MEM_OTHER) and are freed before it returns. On a CPU
 * without a bf16 kernel it measures the portable path (decode+sgemm), which is no bf16 peak: callers ask
 * matmul_lowp_path first. */
double prof_measure_bf16_gemm_flops(int n);

#endif
