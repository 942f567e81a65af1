/* lab04_util.h: helpers for the lab 04 tests: what one value does in a histogram, a tiny GPT and its fp16 flush counts. */
#ifndef LAB04_UTIL_H
#define LAB04_UTIL_H

#include "amp/scale_choice.h"
#include "amp/scaler.h"
#include "base/rng.h"
#include "fp/format.h"
#include "fp/half.h"
#include "fp/hist.h"
#include "model/model.h"
#include "model/model_lowp.h"
#include "mptest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What rounding to a target does to one value, as the histogram counts it. */
typedef enum { LAB04_NORMAL, LAB04_SUBNORMAL, LAB04_UNDERFLOW, LAB04_OVERFLOW } lab04_fate;
static const char *const LAB04_FATE_NAMES[] = {"normal (kept)", "subnormal (kept, fewer bits)", "underflow (-> 0)",
                                               "overflow (-> inf)"};

/* The histogram's verdict on the single value v for target t. */
static inline lab04_fate lab04_fate_of(float v, fp_hist_target t) {
    fp_hist h;
    fp_hist_clear(&h);
    fp_hist_add(&h, &v, 1, 1.0f);
    const fp_hist_losses *l = &h.target[t];
    if (l->underflow) return LAB04_UNDERFLOW;
    if (l->subnormal) return LAB04_SUBNORMAL;
    if (l->overflow) return LAB04_OVERFLOW;
    return LAB04_NORMAL;
}

/* One row of a table of crafted values: the value, its fate in the target, and why. */
typedef struct {
    float value;
    const char *shown; /* how the handout writes it: "2^-25" */
    lab04_fate fate;
    const char *why;   /* printed when the histogram disagrees: the likely mistake */
} lab04_case;

/* What the grader compares with the reference regions' answers: a histogram's counts, a scale choice. */
static inline void lab04_observe_hist(const char *file, int line, const fp_hist *h) {
    mpt_observe(file, line, h->count ^ h->zeros << 20 ^ h->infs << 40 ^ h->nans << 50);
    for (int b = 0; b < FP_HIST_NBINS; b++) mpt_observe(file, line, h->bins[b]);
    for (int t = 0; t < FP_HIST_NTARGETS; t++) {
        mpt_observe(file, line, h->target[t].subnormal);
        mpt_observe(file, line, h->target[t].underflow);
        mpt_observe(file, line, h->target[t].overflow);
    }
}
#define LAB04_OBSERVE_HIST(h) lab04_observe_hist(__FILE__, __LINE__, (h))

static inline void lab04_observe_choice(const char *file, int line, const amp_scale_choice *c) {
    mpt_observe(file, line, (uint64_t)(uint32_t)c->log2_scale << 32 | (uint32_t)c->top_after);
    mpt_observe(file, line, (uint64_t)(uint32_t)c->top_binade << 2 | (uint64_t)c->empty << 1 | c->clamped);
    mpt_observe(file, line, c->nonzero << 32 ^ c->flushed);
}
#define LAB04_OBSERVE_CHOICE(c) lab04_observe_choice(__FILE__, __LINE__, (c))

/* Checks each crafted value's fate; besides, the fates of values a little off each one, drawn from this grade's
 * seed, are recorded for the grader. */
static inline void lab04_check_cases(const char *file, int line, fp_hist_target t, const lab04_case *cases, int n) {
    for (int i = 0; i < n; i++) {
        float off = cases[i].value * (1.0f + (float)((int)(mp_hash32(mpt_seed(), (uint64_t)(t * 64 + i)) % 2001) - 1000) * 0x1p-14f);
        mpt_observe(file, line, (uint64_t)lab04_fate_of(off, t));
        lab04_fate got = lab04_fate_of(cases[i].value, t);
        mpt_observe(file, line, (uint64_t)got);
        if (got != cases[i].fate)
            mpt_fail(file, line,
                     "%s = %.9g (fp32 bits 0x%08x) in %s\n"
                     "      expected: %s\n"
                     "      got:      %s\n"
                     "      likely mistake: %s",
                     cases[i].shown, (double)cases[i].value, fp_float_bits(cases[i].value), fp_hist_target_name(t),
                     LAB04_FATE_NAMES[cases[i].fate], LAB04_FATE_NAMES[got], cases[i].why);
    }
}
#define CHECK_CASES(t, cases) lab04_check_cases(__FILE__, __LINE__, (t), (cases), (int)(sizeof(cases) / sizeof(cases)[0]))

/* ---------------------------------------------------------------- a tiny GPT
 * A 2-block GPT-2 (V 64, C 32, 2 heads) on a fixed batch of 4 x 16 tokens whose targets follow the inputs
 * (t = 3 * x + 1 mod 64), so a few steps of SGD lower the loss. Its fp32 gradients span binades -43 .. -3;
 * in fp16 without a scale about 0.5% of the gradients entering its matmuls flush to zero. */
enum { LAB04_V = 64, LAB04_C = 32, LAB04_L = 2, LAB04_B = 4, LAB04_T = 16 };

typedef struct {
    model *m;
    int inputs[LAB04_B * LAB04_T], targets[LAB04_B * LAB04_T];
} lab04_gpt;

static inline void lab04_gpt_init(lab04_gpt *g) {
    model_config cfg = {.arch = MODEL_GPT2, .V = LAB04_V, .maxT = LAB04_T, .L = LAB04_L, .C = LAB04_C, .NH = 2};
    model_config_complete(&cfg);
    g->m = model_create(&cfg);
    model_init(g->m, 1);
    for (int i = 0; i < LAB04_B * LAB04_T; i++) {
        g->inputs[i] = (int)(mp_hash32(7, (uint64_t)i) % LAB04_V);
        g->targets[i] = (g->inputs[i] * 3 + 1) % LAB04_V;
    }
}

/* Forward and backward with the loss multiplied by `scale`; returns the loss. The gradients are left scaled. */
static inline float lab04_gpt_backward(lab04_gpt *g, float scale) {
    model_zero_grad(g->m);
    float loss = model_forward(g->m, g->inputs, g->targets, LAB04_B, LAB04_T);
    model_backward(g->m, scale);
    return loss;
}

/* The histogram of the model's gradients as they are (scale 1). */
static inline fp_hist lab04_grad_hist(lab04_gpt *g) {
    fp_hist h;
    fp_hist_clear(&h);
    fp_hist_add(&h, model_grads(g->m), model_num_params(g->m), 1.0f);
    return h;
}

/* The model's fp16 rounding counters for the gradients, over all layers, since the last reset. */
typedef struct {
    unsigned long long nonzero, flushed, overflowed;
} lab04_flushes;

static inline lab04_flushes lab04_grad_flushes(lab04_gpt *g) {
    int n;
    const model_layer_rounding *r = model_rounding(g->m, &n);
    lab04_flushes f = {0, 0, 0};
    for (int i = 0; i < n; i++) {
        f.nonzero += r[i].grads.nonzero;
        f.flushed += r[i].grads.flushed;
        f.overflowed += r[i].grads.overflowed;
    }
    return f;
}

static inline void lab04_use_fp16(lab04_gpt *g) {
    model_set_precision(g->m, &(model_precision){.compute = MODEL_COMPUTE_FP16});
    model_rounding_enable(g->m, true);
}

/* g /= S in place, as a scaler's unscale does; returns whether every gradient was finite. (The tests do this
 * themselves: lab 05 writes the real one.) */
static inline bool lab04_unscale(lab04_gpt *g, float scale) {
    float *grad = model_grads(g->m);
    size_t n = model_num_params(g->m);
    bool finite = true;
    for (size_t i = 0; i < n; i++) {
        finite &= isfinite(grad[i]) != 0;
        grad[i] /= scale;
    }
    return finite;
}

/* One plain SGD step on the unscaled gradients. */
static inline void lab04_sgd(lab04_gpt *g, float lr) {
    float *p = model_params(g->m);
    const float *grad = model_grads(g->m);
    size_t n = model_num_params(g->m);
    for (size_t i = 0; i < n; i++) p[i] -= lr * grad[i];
}

static inline amp_scaler lab04_static_scaler(double scale) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_STATIC);
    c.init_scale = scale;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    return s;
}

/* A histogram with `count` values in binade b (and nothing else). */
static inline void lab04_hist_put(fp_hist *h, int binade, uint64_t count) {
    h->bins[binade - FP_HIST_MIN_BINADE] += count;
    h->count += count;
}

#endif
