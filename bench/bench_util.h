/* bench_util.h: helpers the benchmarks share: seeded buffers, the machine's measured sgemm peak and the kernels that reached it. */
#ifndef MIXPAR_BENCH_UTIL_H
#define MIXPAR_BENCH_UTIL_H

#include "base/clock.h"
#include "base/mem.h"
#include "base/rng.h"
#include "ops/matmul.h"
#include "prof/gemm_kernels.h"
#include "prof/roofline.h"

#include <stdbool.h>
#include <stdio.h>

static inline void bench_fill(float *p, long n, float scale, uint64_t seed) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (long i = 0; i < n; i++) p[i] = scale * (2.0f * mp_rng_uniform(&rng) - 1.0f);
}

/* n floats uniform in [-scale, scale] (scale 0: zeros), counted under MEM_OTHER. */
static inline float *bench_buffer(long n, const char *what, float scale, uint64_t seed) {
    float *p = mem_alloc((size_t)n * sizeof(float), MEM_OTHER, what);
    bench_fill(p, n, scale, seed);
    return p;
}

/* A large square sgemm, split over the threads as the model's matmuls are: the machine's practical fp32
 * peak in GFLOP/s. Measure it in the same run as what it is compared with: this machine is shared. */
static inline double bench_sgemm_peak_gflops(void) { return prof_measure_gemm_flops(1536) / 1e9; }

/* The line that goes beside the sgemm peak: which OpenBLAS kernels reached it. An environment that pins a 256-bit
 * set on an AVX-512 CPU halves the peak, and with it every "% of peak" and every ratio to the fp32 step. */
static inline void bench_print_gemm_kernels(void) {
    char line[400];
    printf("%s\n", prof_describe_gemm_kernels(line, sizeof line));
}

#endif
