/* gemm_kernels.h: what runs the fp32 matmuls (the core's kernel or an OpenBLAS kernel set), in one line for reports beside the sgemm peak. */
#ifndef MIXPAR_PROF_GEMM_KERNELS_H
#define MIXPAR_PROF_GEMM_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the fp32 products run OpenBLAS (the core's AVX-512 kernel is not in use) and OPENBLAS_CORETYPE pins a
 * 256-bit kernel set (Haswell, Zen, ...) on a CPU that runs OpenBLAS's AVX-512 kernels: the fp32 roof is then
 * about half of what the cores can do. */
bool prof_gemm_kernels_pinned_narrow(void);

/* "fp32 products: mixpar's AVX-512 kernel, ..." where that kernel runs them; else "OpenBLAS kernels: SET (how it
 * was chosen)", and when prof_gemm_kernels_pinned_narrow, what that costs and how to lift it. Written to buf
 * (always terminated); returns buf. */
char *prof_describe_gemm_kernels(char *buf, size_t len);

#endif
