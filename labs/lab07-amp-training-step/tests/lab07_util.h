/* lab07_util.h: what lab 07's tests share: a tiny GPT-2 trained through train_step_run under a precision
 * recipe, deterministic batches, snapshots of everything a step may change, and an independent replay of
 * one step's backward (the tests' own arithmetic, not the region's). */
#ifndef LAB07_UTIL_H
#define LAB07_UTIL_H

#include "base/rng.h"
#include "model/model.h"
#include "model/model_lowp.h"
#include "mptest.h"
#include "train/step.h"

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The test model: a real GPT-2 (2 blocks, 32 channels, about 30k parameters) whose step takes a few ms. */
static inline model_config lab07_config(void) {
    model_config c = {.arch = MODEL_GPT2, .V = 64, .maxT = 16, .L = 2, .C = 32, .NH = 2};
    model_config_complete(&c);
    return c;
}
enum { LAB07_B = 4, LAB07_T = 16, LAB07_SEED = 7 };

/* Micro-batch k of step `step`: B rows of T tokens, inputs and next-token targets of one random stream. */
static inline void lab07_batch(int step, int k, int B, int T, int V, int *inputs, int *targets) {
    for (int r = 0; r < B; r++)
        for (int t = 0; t < T; t++) {
            uint64_t key = ((uint64_t)step * 131u + (uint64_t)k) * 1000003u + (uint64_t)r;
            inputs[r * T + t] = (int)(mp_hash32(key, (uint64_t)t) % (uint32_t)V);
            targets[r * T + t] = (int)(mp_hash32(key, (uint64_t)t + 1) % (uint32_t)V);
        }
}

/* The model's compute mode for a recipe: what amp_model_precision gives the trainer. */
static inline model_compute lab07_compute(amp_recipe r) {
    switch (r) {
    case AMP_RECIPE_FP16:
    case AMP_RECIPE_FP16_O2: return MODEL_COMPUTE_FP16;
    case AMP_RECIPE_BF16:
    case AMP_RECIPE_BF16_PURE: return MODEL_COMPUTE_BF16;
    default: return MODEL_COMPUTE_FP32;
    }
}

/* A scaler config: a kind's defaults with another first scale and growth interval (0: keep the default). */
static inline amp_scaler_config lab07_scaler(amp_scaler_kind kind, double init_scale, int growth_interval) {
    amp_scaler_config c = amp_scaler_defaults(kind);
    if (init_scale > 0) c.init_scale = init_scale;
    if (growth_interval > 0) c.growth_interval = growth_interval;
    return c;
}

typedef struct {
    model *m;
    train_step ts;
    amp_recipe recipe;
    int accum;
    int *inputs, *targets; /* (accum, B, T) */
} lab07_trainer;

/* A fresh model (seed LAB07_SEED, so every trainer starts from the same weights) trained by train_step_run
 * under `recipe` (AMP_RECIPE_FP32: the plain step, no scaler) with the optimizer `opt` and clipping `clip`. */
static inline void lab07_open(lab07_trainer *t, amp_recipe recipe, const amp_scaler_config *scaler, optim_kind opt,
                              double clip, int accum) {
    model_config c = lab07_config();
    omp_set_num_threads(1); /* a model this small gains nothing from threads, and a loaded machine loses a lot */
    memset(t, 0, sizeof *t);
    t->recipe = recipe;
    t->accum = accum;
    t->m = model_create(&c);
    model_init(t->m, LAB07_SEED);
    model_set_precision(t->m, &(model_precision){.compute = lab07_compute(recipe)});
    optim_config o = optim_config_default(opt);
    train_step_init(&t->ts, t->m, &o, clip);
    if (recipe != AMP_RECIPE_FP32) train_step_set_amp(&t->ts, recipe, scaler, false, 0);
    size_t n = (size_t)accum * LAB07_B * LAB07_T;
    t->inputs = malloc(n * sizeof(int));
    t->targets = malloc(n * sizeof(int));
    MPT_REQUIRE(t->inputs && t->targets, "out of memory");
}

static inline void lab07_close(lab07_trainer *t) {
    train_step_free(&t->ts);
    model_free(t->m);
    free(t->inputs);
    free(t->targets);
}

/* Fills the micro-batches of step `step` into t->inputs / t->targets. */
static inline void lab07_fill(lab07_trainer *t, int step) {
    const int V = model_get_config(t->m)->V, per = LAB07_B * LAB07_T;
    for (int k = 0; k < t->accum; k++)
        lab07_batch(step, k, LAB07_B, LAB07_T, V, t->inputs + k * per, t->targets + k * per);
}

/* One training step on the batches of `step` (the data index: a test may skip one to compare runs). */
/* One training step. What it did is recorded for the grader, which compares it with the reference regions'
 * step: the decision (skipped, clipped, the scaler's status and next scale), the norm, and the gradients and
 * weights after it (one weighted sum each, mptest.h), within what correct orders of rounding allow. */
static inline train_step_result lab07_step_at(const char *file, int line, lab07_trainer *t, int step, double lr) {
    lab07_fill(t, step);
    train_step_result r = train_step_run(&t->ts, t->inputs, t->targets, LAB07_B, LAB07_T, t->accum, lr);
    uint32_t next;
    memcpy(&next, &r.update.next_scale, sizeof next);
    mpt_observe(file, line, (uint64_t)next << 32 | (uint64_t)r.update.status << 3 | (uint64_t)r.update.skipped << 2 |
                                (uint64_t)r.skipped << 1 | r.clipped);
    mpt_observe_near(file, line, r.grad_norm, 1e-4, 1e-12);
    size_t n = model_num_params(t->m);
    mpt_observe_near_f32(file, line, model_grads(t->m), model_grads(t->m), (long)n, 1e-3, 1e-7);
    mpt_observe_near_f32(file, line, model_params(t->m), model_params(t->m), (long)n, 1e-4, 1e-7);
    return r;
}
#define lab07_step(t, step, lr) lab07_step_at(__FILE__, __LINE__, (t), (step), (lr))

/* Everything a step may change: the weights (and the fp32 master copy), Adam's moments, the counters. */
typedef struct {
    size_t n, nstate;
    float *params, *master, *m, *v;
    long opt_step, updates;
} lab07_snapshot;

static inline float *lab07_copy(const float *x, size_t n) {
    if (!x) return NULL;
    float *c = malloc(n * sizeof *c);
    MPT_REQUIRE(c, "out of memory");
    memcpy(c, x, n * sizeof *c);
    return c;
}

static inline lab07_snapshot lab07_take(lab07_trainer *t) {
    lab07_snapshot s = {.n = model_num_params(t->m), .nstate = t->ts.state.n};
    s.params = lab07_copy(model_params(t->m), s.n);
    s.master = lab07_copy(t->ts.master, s.n);
    s.m = lab07_copy(t->ts.state.m, s.nstate);
    s.v = lab07_copy(t->ts.state.v, s.nstate);
    s.opt_step = t->ts.state.step;
    s.updates = t->ts.updates;
    return s;
}

static inline void lab07_drop(lab07_snapshot *s) {
    free(s->params);
    free(s->master);
    free(s->m);
    free(s->v);
}

/* The first index where a and b differ bytewise, or -1. */
static inline long lab07_first_difference(const float *a, const float *b, size_t n) {
    if (!a || !b) return a == b ? -1 : 0;
    if (memcmp(a, b, n * sizeof *a) == 0) return -1;
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof *a) != 0) return (long)i;
    return 0;
}

/* Checks that nothing of `before` changed; `what` names the step. Returns true when all is untouched. */
static inline bool lab07_check_untouched(const char *file, int line, lab07_trainer *t, const lab07_snapshot *before,
                                         const char *what) {
    lab07_snapshot now = lab07_take(t);
    struct {
        const char *name;
        const float *a, *b;
        size_t n;
    } parts[] = {{"the weights", before->params, now.params, before->n},
                 {"the fp32 master weights", before->master, now.master, before->n},
                 {"Adam's first moment m", before->m, now.m, before->nstate},
                 {"Adam's second moment v", before->v, now.v, before->nstate}};
    bool ok = true;
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
        long i = lab07_first_difference(parts[p].a, parts[p].b, parts[p].n);
        if (i >= 0) {
            mpt_fail(file, line, "%s: %s changed (first at element %ld: %g -> %g)\n      likely mistake: on found_inf "
                     "the step must not call optim_step at all (not even with lr 0: that still decays m and v and "
                     "advances t); only the scaler is updated", what, parts[p].name, i, (double)parts[p].a[i],
                     (double)parts[p].b[i]);
            ok = false;
        }
    }
    if (now.opt_step != before->opt_step) {
        mpt_fail(file, line, "%s: the optimizer's step count t went from %ld to %ld\n      likely mistake: a skipped step "
                 "must not advance t (Adam's bias correction would then be one step ahead for the rest of the run)",
                 what, before->opt_step, now.opt_step);
        ok = false;
    }
    lab07_drop(&now);
    return ok;
}
#define LAB07_CHECK_UNTOUCHED(t, before, what) lab07_check_untouched(__FILE__, __LINE__, (t), (before), (what))

/* An independent replay of one step's backward on a copy of t's weights, by the tests' own arithmetic:
 * forward and backward of each micro-batch with the loss scaled by S/accum (what train_step_run does
 * before it reaches your region), then the gradients multiplied once by 1/S, as PyTorch's unscale does.
 * Writes the unscaled gradients into grads (model_num_params floats) and returns their global L2 norm. */
static inline double lab07_replay_unscaled(lab07_trainer *t, int step, float S, float *grads) {
    model_config c = lab07_config();
    model *r = model_create(&c);
    const size_t n = model_num_params(r);
    memcpy(model_params(r), model_params(t->m), n * sizeof(float));
    model_set_precision(r, &(model_precision){.compute = lab07_compute(t->recipe)});
    lab07_fill(t, step);
    model_zero_grad(r);
    const int per = LAB07_B * LAB07_T;
    for (int k = 0; k < t->accum; k++) {
        model_forward(r, t->inputs + k * per, t->targets + k * per, LAB07_B, LAB07_T);
        model_backward(r, S / (float)t->accum);
    }
    const float inv = (float)(1.0 / (double)S);
    double sumsq = 0;
    for (size_t i = 0; i < n; i++) {
        grads[i] = model_grads(r)[i] * inv;
        sumsq += (double)grads[i] * grads[i];
    }
    model_free(r);
    return sqrt(sumsq);
}

/* The global L2 norm of the gradient buffer as it is now. */
static inline double lab07_grad_norm(lab07_trainer *t) {
    double s = 0;
    const float *g = model_grads(t->m);
    for (size_t i = 0, n = model_num_params(t->m); i < n; i++) s += (double)g[i] * g[i];
    return sqrt(s);
}

/* max |a - b| over n, and max |b| (the scale to judge it by). */
static inline double lab07_max_diff(const float *a, const float *b, size_t n, double *bmax) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    if (bmax) *bmax = m;
    return d;
}

#endif
