/* ops_testutil.h: helpers shared by the ops/ unit tests: seeded random tensors and a weighted-sum loss. */
#ifndef MIXPAR_TESTS_OPS_TESTUTIL_H
#define MIXPAR_TESTS_OPS_TESTUTIL_H

#include "base/rng.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A zeroed float buffer that the test frees with free(). */
static inline float *tu_zeros(long n) {
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    cr_assert(p, "out of memory");
    return p;
}

/* n floats uniform in [lo, hi), from a fixed seed so every run sees the same tensor. */
static inline float *tu_uniform(long n, float lo, float hi, uint64_t seed) {
    float *p = tu_zeros(n);
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (long i = 0; i < n; i++) p[i] = lo + (hi - lo) * mp_rng_uniform(&rng);
    return p;
}

static inline float *tu_copy(const float *src, long n) {
    float *p = tu_zeros(n);
    memcpy(p, src, (size_t)n * sizeof(float));
    return p;
}

/* sum_i w_i * out_i in double: the scalar "loss" whose gradient at out is exactly w, so the backward
 * pass run with dout = w gives its analytic gradient. */
static inline double tu_weighted_sum(const float *w, const float *out, long n) {
    double s = 0.0;
    for (long i = 0; i < n; i++) s += (double)w[i] * out[i];
    return s;
}

static inline int tu_bits_equal(const float *a, const float *b, long n) {
    return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

/* Memory whose last byte sits just before an inaccessible page: reading one element past the end
 * crashes the test instead of passing by luck (packing code works in 64-byte pieces and must stop at
 * the edge of every operand). Freed with guarded_free(p, bytes). */
static inline void *guarded_alloc(size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), span = (bytes + page - 1) / page * page;
    char *base = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(base != MAP_FAILED, "mmap");
    cr_assert(mprotect(base + span, page, PROT_NONE) == 0, "mprotect");
    return base + span - bytes;
}

static inline void guarded_free(void *p, size_t bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), span = (bytes + page - 1) / page * page;
    munmap((char *)p + bytes - span, span + page);
}

#endif
