/* lab18_offload.h: what lab 18's part D tests share: two copies of one small model trained side by side through
 * train_step_run, one with the optimizer on the device, one with ZeRO-Offload (train_step_init_offload), and the
 * bit-for-bit comparison of everything a step changes: weights, the host's master copy, the optimizer state. */
#ifndef LAB18_OFFLOAD_H
#define LAB18_OFFLOAD_H

#include "mptest.h"

#include "base/mem.h"
#include "base/rng.h"
#include "model/model.h"
#include "train/step.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LAB18_OFF_B = 2, LAB18_OFF_T = 16, LAB18_OFF_SEED = 18 };

typedef struct {
    model *device_m, *offload_m;
    train_step device, offload; /* the same run: the optimizer on the device, and offloaded */
    int accum;
    int *inputs, *targets;      /* (accum, B, T) */
} lab18_pair;

/* Two models with the same weights (freeze: a tensor pattern to freeze in both, or NULL), one stepped on the
 * device and one with offload, with optimizer `kind` (its defaults, and `set` applied to both) and clipping
 * `clip`. */
static inline void lab18_pair_open(lab18_pair *p, model_arch arch, optim_kind kind, double clip, int accum,
                                   const char *freeze) {
    omp_set_num_threads(1); /* small models: threads only add noise to a loaded machine */
    memset(p, 0, sizeof *p);
    model_config c = {.arch = arch, .V = 50, .maxT = 16, .L = 2, .C = 32, .NH = 4};
    if (arch == MODEL_LLAMA) c.KVH = 2;
    model_config_complete(&c);
    p->device_m = model_create(&c);
    p->offload_m = model_create(&c);
    model_init(p->device_m, LAB18_OFF_SEED);
    model_init(p->offload_m, LAB18_OFF_SEED);
    if (freeze) {
        MPT_REQUIRE(model_freeze(p->device_m, freeze) > 0 && model_freeze(p->offload_m, freeze) > 0,
                    "pattern %s froze nothing", freeze);
    }
    optim_config o = optim_config_default(kind);
    if (kind == OPTIM_MOMENTUM) optim_config_set(&o, "nesterov", 1);
    train_step_init(&p->device, p->device_m, &o, clip);
    train_step_init_offload(&p->offload, p->offload_m, &o, clip, NULL);
    p->accum = accum;
    size_t n = (size_t)accum * LAB18_OFF_B * LAB18_OFF_T;
    p->inputs = malloc(n * sizeof(int));
    p->targets = malloc(n * sizeof(int));
    MPT_REQUIRE(p->inputs && p->targets, "out of memory");
}

static inline void lab18_pair_close(lab18_pair *p) {
    train_step_free(&p->device);
    train_step_free(&p->offload);
    model_free(p->device_m);
    model_free(p->offload_m);
    free(p->inputs);
    free(p->targets);
}

/* The first index where a and b differ bytewise, or -1. */
static inline long lab18_first_difference(const float *a, const float *b, size_t n) {
    if (!a || !b) return a == b ? -1 : 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof(float)) != 0) return (long)i;
    return -1;
}

/* One step of both on the same batches; checks that the results and everything the step changed are the same
 * bits, and returns the offloaded step's result. */
static inline train_step_result lab18_pair_step(lab18_pair *p, int step, double lr) {
    const int V = model_get_config(p->device_m)->V, per = LAB18_OFF_B * LAB18_OFF_T;
    for (int i = 0; i < p->accum * per; i++) {
        p->inputs[i] = (int)(mp_hash32((uint64_t)step * 7919u, (uint64_t)i) % (uint32_t)V);
        p->targets[i] = (int)(mp_hash32((uint64_t)step * 7919u + 1, (uint64_t)i) % (uint32_t)V);
    }
    train_step_result a = train_step_run(&p->device, p->inputs, p->targets, LAB18_OFF_B, LAB18_OFF_T, p->accum, lr);
    train_step_result b = train_step_run(&p->offload, p->inputs, p->targets, LAB18_OFF_B, LAB18_OFF_T, p->accum, lr);
    char what[96];
    snprintf(what, sizeof what, "step %d: the loss (of weights the previous update wrote)", step);
    MPT_CHECK_FLOAT_BITS(a.loss, b.loss, what);
    MPT_CHECK(a.skipped == b.skipped, "step %d: skipped %d on the device, %d offloaded", step, a.skipped, b.skipped);
    size_t n = model_num_params(p->device_m);
    long at = lab18_first_difference(model_params(p->device_m), model_params(p->offload_m), n);
    MPT_CHECK(at < 0, "step %d: the device's weights differ from the run without offload at element %ld of %zu "
              "(%.9g, expected %.9g): are the updated weights copied back up into every span?", step, at, n,
              at < 0 ? 0.0 : (double)model_params(p->offload_m)[at], at < 0 ? 0.0 : (double)model_params(p->device_m)[at]);
    at = lab18_first_difference(model_params(p->offload_m), p->offload.host_master, n);
    MPT_CHECK(at < 0, "step %d: the host's master copy differs from the device's weights at element %ld: the "
              "optimizer must update the host master (s->host_spans), and the device get a copy of it", step, at);
    MPT_CHECK(p->device.state.step == p->offload.state.step, "step %d: the optimizer's step count is %ld offloaded, "
              "%ld on the device", step, p->offload.state.step, p->device.state.step);
    at = lab18_first_difference(p->device.state.m, p->offload.state.m, p->device.state.n);
    MPT_CHECK(at < 0, "step %d: the optimizer's first state (m / momentum) differs at element %ld: it lives on the "
              "host (s->state) and must see the same gradients", step, at);
    at = lab18_first_difference(p->device.state.v, p->offload.state.v, p->device.state.n);
    MPT_CHECK(at < 0, "step %d: the optimizer's second moment v differs at element %ld", step, at);
    return b;
}

#endif
