/* gemm_kernels.h: which OpenBLAS kernel set the fp32 matmuls run, in one line for reports beside the sgemm peak. */
#ifndef MIXPAR_PROF_GEMM_KERNELS_H
#define MIXPAR_PROF_GEMM_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

/* Whether OPENBLAS_CORETYPE pins a 256-bit kernel set (Haswell, Zen, ...) on a CPU that runs OpenBLAS's AVX-512
 * kernels: the fp32 roof is then about half of what the cores can do. */
bool prof_gemm_kernels_pinned_narrow(void);

/* "OpenBLAS kernels: SET (how it was chosen)", and when prof_gemm_kernels_pinned_narrow, what that costs and how
 * to lift it. Written to buf (always terminated); returns buf. */
char *prof_describe_gemm_kernels(char *buf, size_t len);

#endif
