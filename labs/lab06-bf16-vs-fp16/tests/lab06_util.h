/* lab06_util.h: helpers for the lab 06 tests: filled arrays, a checked sum, the fate of single values. */
#ifndef LAB06_UTIL_H
#define LAB06_UTIL_H

#include "base/rng.h"
#include "fp/accumulate.h"
#include "fp/format.h"
#include "fp/half.h"
#include "mptest.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* n copies of v (caller frees). */
static inline float *lab06_fill(float v, size_t n) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    MPT_REQUIRE(x, "out of memory for %zu floats", n);
    for (size_t i = 0; i < n; i++) x[i] = v;
    return x;
}

/* n values uniform in [lo, hi) from a seed (caller frees). */
static inline float *lab06_uniform(uint64_t seed, float lo, float hi, size_t n) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    MPT_REQUIRE(x, "out of memory for %zu floats", n);
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * mp_rng_uniform(&rng);
    return x;
}

/* A sum that must come out exactly `want` (every value here is exact in the format, so bits must match). */
#define CHECK_SUM(want, got, what, mistake) \
    do { \
        float w_ = (want), g_ = (got); \
        MPT_OBSERVE(fp_float_bits(g_)); /* what the grader compares with the reference */ \
        if (fp_float_bits(w_) != fp_float_bits(g_)) \
            mpt_fail(__FILE__, __LINE__, "%s\n      expected: %.9g\n      got:      %.9g\n      likely mistake: %s", (what), \
                     (double)w_, (double)g_, (mistake)); \
    } while (0)

/* The counts of fp_range_count for the single value v. */
static inline fp_range_counts lab06_count_one(const fp_format *f, float v) {
    fp_range_counts c = {0};
    fp_range_count(f, &v, 1, 1.0f, &c);
    return c;
}

typedef enum { LAB06_ZERO, LAB06_NORMAL, LAB06_SUBNORMAL, LAB06_FLUSHED, LAB06_OVERFLOW, LAB06_NONFINITE } lab06_fate;
static const char *const LAB06_FATE_NAMES[] = {"zero (kept)", "normal (kept)", "subnormal (kept, fewer bits)",
                                               "flushed (nonzero -> 0)", "overflow (finite -> past max)",
                                               "nonfinite input (not counted as kept or lost)"};

/* A range count, every field, for the grader. */
static inline void lab06_observe_counts(const char *file, int line, const fp_range_counts *c) {
    const uint64_t fields[] = {c->count, c->zero, c->nonfinite, c->normal, c->subnormal, c->flushed, c->overflow};
    for (int i = 0; i < 7; i++) mpt_observe(file, line, fields[i]);
}
#define LAB06_OBSERVE_COUNTS(c) lab06_observe_counts(__FILE__, __LINE__, (c))

/* A range probe, every field, for the grader. */
static inline void lab06_observe_range(const char *file, int line, const fp_range *r) {
    const int64_t ints[] = {r->top_binade, r->min_normal_binade, r->min_subnormal_binade, r->normal_binades,
                            r->subnormal_binades};
    for (int i = 0; i < 5; i++) mpt_observe(file, line, (uint64_t)ints[i]);
    mpt_observe_near(file, line, r->max, 0, 0);
    mpt_observe_near(file, line, r->min_normal, 0, 0);
    mpt_observe_near(file, line, r->min_subnormal, 0, 0);
}
#define LAB06_OBSERVE_RANGE(r) lab06_observe_range(__FILE__, __LINE__, (r))

static inline lab06_fate lab06_fate_of(const fp_range_counts *c) {
    if (c->nonfinite) return LAB06_NONFINITE;
    if (c->zero) return LAB06_ZERO;
    if (c->flushed) return LAB06_FLUSHED;
    if (c->overflow) return LAB06_OVERFLOW;
    if (c->subnormal) return LAB06_SUBNORMAL;
    return LAB06_NORMAL;
}

typedef struct {
    float value;
    const char *shown;
    lab06_fate fate;
    const char *why;
} lab06_case;

static inline void lab06_check_cases(const char *file, int line, const fp_format *f, const lab06_case *cases, int n) {
    for (int i = 0; i < n; i++) {
        fp_range_counts c = lab06_count_one(f, cases[i].value);
        lab06_observe_counts(file, line, &c);
        uint64_t classified = c.zero + c.normal + c.subnormal + c.flushed + c.overflow + c.nonfinite;
        if (c.count != 1 || classified != 1) {
            mpt_fail(file, line, "%s in %s: one value should be counted once (count %llu) in exactly one class, got %llu "
                     "classes", cases[i].shown, f->name, (unsigned long long)c.count, (unsigned long long)classified);
            continue;
        }
        lab06_fate got = lab06_fate_of(&c);
        if (got != cases[i].fate)
            mpt_fail(file, line, "%s = %.9g in %s\n      expected: %s\n      got:      %s\n      likely mistake: %s",
                     cases[i].shown, (double)cases[i].value, f->name, LAB06_FATE_NAMES[cases[i].fate],
                     LAB06_FATE_NAMES[got], cases[i].why);
    }
}
#define CHECK_CASES(f, cases) lab06_check_cases(__FILE__, __LINE__, (f), (cases), (int)(sizeof(cases) / sizeof(cases)[0]))

#endif
