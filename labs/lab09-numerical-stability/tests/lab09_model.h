/* lab09_model.h: helpers for the lab 09 tests of parts A and B: a tiny GPT-2, a train_step in a mixed-precision
 * recipe, the write-back under test, and rounding references from the generic format engine (fp/format.h). */
#ifndef LAB09_MODEL_H
#define LAB09_MODEL_H

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

#endif
