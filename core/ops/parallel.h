/* parallel.h: how the ops/ kernels split work over OpenMP threads (shared by the kernels; not a public API). */
#ifndef MIXPAR_OPS_PARALLEL_H
#define MIXPAR_OPS_PARALLEL_H

#include <omp.h>
#include <stdbool.h>

/* Floats per cache line: the unit in which column ranges are split, so two threads never write the
 * same cache line (no false sharing) and each range starts on a vector boundary. */
enum { OPS_SIMD_FLOATS = 16 };

/* Whether `work` (elements touched, roughly) is worth a parallel region: `#pragma omp parallel for
 * if (ops_worth_threads(N * C))`. Starting a region costs microseconds, and on a busy virtual machine
 * (a vCPU the host has parked) sometimes milliseconds; 32K elements take longer than that on one core.
 * Small problems (the course's tiny models, tests) stay on one thread. */
static inline bool ops_worth_threads(long work) { return work >= (1L << 15); }

/* Inside a parallel region: this thread's share [*lo, *hi) of [0, n), in contiguous pieces whose
 * boundaries are multiples of `unit` (the last piece takes the remainder). The split depends only on
 * n and the thread count, and each thread's piece is processed in the same order as a serial loop
 * would, so per-element results do not depend on the number of threads. */
static inline void ops_thread_range(int n, int unit, int *lo, int *hi) {
    int threads = omp_get_num_threads(), me = omp_get_thread_num();
    int units = (n + unit - 1) / unit;
    int per = units / threads, extra = units % threads;
    int first = me * per + (me < extra ? me : extra);
    int count = per + (me < extra ? 1 : 0);
    int a = first * unit, b = (first + count) * unit;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

#endif
