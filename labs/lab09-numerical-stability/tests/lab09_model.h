/* lab09_model.h: helpers for the lab 09 tests of parts A and B: a tiny GPT-2, a train_step in a mixed-precision
 * recipe, the write-back under test, and rounding references from the generic format engine (fp/format.h). */
#ifndef LAB09_MODEL_H
#define LAB09_MODEL_H

#include "base/rng.h"
#include "fp/format.h"
#include "fp/half.h"
#include "mptest.h"
#include "train/step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* core/train/step.c's write_working_weights (your part A region), reached through lab09_step_access.c. */
void lab09_write_working_weights(train_step *s);

/* A GPT-2 small enough to build in a millisecond: 2 layers, 16 channels, a 64-token vocabulary (about 12,000
 * parameters in 28 tensors). No forward or backward pass is run: the tests only need its parameter registry. */
static inline model *lab09_tiny_gpt2(bool tied) {
    model_config c = {.arch = MODEL_GPT2, .V = 64, .maxT = 8, .L = 2, .C = 16, .NH = 2};
    model_config_complete(&c);
    c.tied = tied;
    model *m = model_create(&c);
    model_init(m, 9);
    return m;
}

/* A train_step over m in `recipe` (fp16-o2: an fp32 master copy; bf16-pure: none), plain SGD, no clipping. */
static inline void lab09_amp_step(train_step *ts, model *m, amp_recipe recipe, bool stochastic, uint64_t seed) {
    optim_config opt = optim_config_default(OPTIM_SGD);
    train_step_init(ts, m, &opt, 0);
    amp_scaler_config none = amp_scaler_defaults(AMP_SCALER_NONE);
    train_step_set_amp(ts, recipe, &none, stochastic, seed);
}

/* x rounded to nearest even in fmt, as a float: the reference the write-back is compared with. */
static inline float lab09_round(const fp_format *fmt, float x) {
    return fp_decode(fmt, fp_encode(fmt, x, FP_ROUND_NEAREST_EVEN, 0, 0));
}

/* The two neighbours of x in fmt (equal when x is representable): down <= x <= up. */
static inline void lab09_neighbours(const fp_format *fmt, float x, float *down, float *up) {
    float toward_zero = fp_decode(fmt, fp_encode(fmt, x, FP_ROUND_TOWARD_ZERO, 0, 0));
    if (toward_zero == x) {
        *down = *up = x;
        return;
    }
    float away = toward_zero + copysignf((float)fp_ulp(fmt, toward_zero), x);
    if (x > 0) {
        *down = toward_zero;
        *up = away;
    } else {
        *down = away;
        *up = toward_zero;
    }
}

/* ---- stochastic rounding, judged by statistics (correct codes draw different bits, so no single result is
 * stable between them; what the grader compares is a share, within a tolerance from the number of draws) */

/* A share in [0.2, 0.45] or [0.55, 0.8] from this grade's seed (and salt): where a value is put between two bf16
 * neighbours. Away from 1/2, where rounding to nearest (ties to even) would look random. */
static inline double lab09_seeded_fraction(uint64_t salt) {
    double u = (double)mp_hash32(mpt_seed() ^ salt, 0x5eed) * 0x1p-32;
    return u < 0.5 ? 0.2 + 0.5 * u : 0.55 + 0.5 * (u - 0.5);
}

/* Counted draws: how many happened, how many were expected, and the count's variance. */
typedef struct {
    double count, expect, variance;
    size_t trials;
} lab09_draws;

/* Over the elements whose value before the write-back lies strictly between two bf16 neighbours: counts those
 * rounded to the upper one; expected: the sum of each one's distance from the lower neighbour in ulps. Returns the
 * first element that is neither neighbour, or n. */
static inline size_t lab09_count_up(const float *before, const float *after, size_t n, lab09_draws *d) {
    memset(d, 0, sizeof *d);
    for (size_t j = 0; j < n; j++) {
        float down, up;
        lab09_neighbours(&FP_BF16, before[j], &down, &up);
        if (down == up) continue;
        if (after[j] != down && after[j] != up) return j;
        double p = ((double)before[j] - down) / ((double)up - down);
        d->count += after[j] == up;
        d->expect += p;
        d->variance += p * (1 - p);
        d->trials++;
    }
    return n;
}

/* Two independent stochastic roundings a and b of the same values `before`: counts where they disagree; expected:
 * the sum of 2 p (1 - p) over the elements strictly between two neighbours. */
static inline void lab09_count_disagree(const float *before, const float *a, const float *b, size_t n, lab09_draws *d) {
    memset(d, 0, sizeof *d);
    for (size_t j = 0; j < n; j++) {
        float down, up;
        lab09_neighbours(&FP_BF16, before[j], &down, &up);
        if (down == up) continue;
        double p = ((double)before[j] - down) / ((double)up - down), q = 2 * p * (1 - p);
        d->count += a[j] != b[j];
        d->expect += q;
        d->variance += q * (1 - q);
        d->trials++;
    }
}

/* Whether the count is within `sds` standard deviations of its expectation. */
static inline bool lab09_draws_fit(const lab09_draws *d, double sds) {
    return d->trials > 0 && fabs(d->count - d->expect) <= sds * sqrt(d->variance) + 0.5;
}

/* For the grader: the share counted, compared with the reference's (whose own draws are as random) within 6
 * standard deviations of the difference of two independent shares. Only a working rounding lands there: one to
 * nearest, or one with fixed or shared bits, is many deviations away for this grade's seeded inputs. */
#define lab09_observe_draws(d) \
    MPT_OBSERVE_NEAR((d)->trials ? (d)->count / (double)(d)->trials : -1.0, 0, \
                     6 * sqrt(2 * (d)->variance) / (double)((d)->trials ? (d)->trials : 1) + 1e-9)

#endif
