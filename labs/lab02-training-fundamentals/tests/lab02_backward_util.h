/* lab02_backward_util.h: what the lab 02 backward tests share: seeded tensors and the losses they differentiate. */
#ifndef MIXPAR_LAB02_BACKWARD_UTIL_H
#define MIXPAR_LAB02_BACKWARD_UTIL_H

#include "base/rng.h"
#include "ops/crossentropy.h"
#include "ops/gelu.h"
#include "ops/gradcheck.h"
#include "ops/matmul.h"
#include "mptest.h"

#include <stdlib.h>
#include <string.h>

/* n floats uniform in [lo, hi) from a fixed seed (freed with free()). */
static inline float *lab02_uniform(long n, float lo, float hi, uint64_t seed) {
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    MPT_REQUIRE(p, "out of memory");
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (long i = 0; i < n; i++) p[i] = lo + (hi - lo) * mp_rng_uniform(&rng);
    return p;
}

static inline float *lab02_zeros(long n) { return lab02_uniform(n, 0, 0, 0); }

static inline float *lab02_copy(const float *src, long n) {
    float *p = lab02_zeros(n);
    memcpy(p, src, (size_t)n * sizeof(float));
    return p;
}

/* ops_compare, and the result recorded for the grader (one near value for the array, mptest.h), so a check
 * that compares with the reference loops is worth something only where the backward computed it. */
static inline bool lab02_compare(const char *file, int line, const char *name, const float *expected, const float *got,
                                 long n, double tol) {
    mpt_observe_near_f32(file, line, got, expected, n, tol, tol);
    return ops_compare(name, expected, got, n, tol);
}
#define ops_compare(name, expected, got, n, tol) lab02_compare(__FILE__, __LINE__, (name), (expected), (got), (n), (tol))

/* sum_i w_i * out_i in double: the loss whose gradient at out is w, so backward with dout = w gives
 * the analytic gradient of this loss. */
static inline double lab02_weighted_sum(const float *w, const float *out, long n) {
    double s = 0.0;
    for (long i = 0; i < n; i++) s += (double)w[i] * out[i];
    return s;
}

/* ---- loss = sum w * matmul_forward(inp, weight, bias) */
typedef struct {
    float *inp, *weight, *bias, *out, *w;
    int N, C, OC;
} lab02_matmul_case;

static inline double lab02_matmul_loss(void *p) {
    lab02_matmul_case *m = p;
    matmul_forward(m->out, m->inp, m->weight, m->bias, m->N, m->C, m->OC);
    return lab02_weighted_sum(m->w, m->out, (long)m->N * m->OC);
}

static inline void lab02_matmul_setup(lab02_matmul_case *m, int N, int C, int OC, uint64_t seed) {
    *m = (lab02_matmul_case){.N = N, .C = C, .OC = OC};
    m->inp = lab02_uniform((long)N * C, -1, 1, seed);
    m->weight = lab02_uniform((long)OC * C, -1, 1, seed + 1);
    m->bias = lab02_uniform(OC, -1, 1, seed + 2);
    m->w = lab02_uniform((long)N * OC, -1, 1, seed + 3);
    m->out = lab02_zeros((long)N * OC);
}

static inline void lab02_matmul_free(lab02_matmul_case *m) {
    free(m->inp), free(m->weight), free(m->bias), free(m->w), free(m->out);
}

/* ---- loss = sum w * gelu(inp) */
typedef struct {
    float *inp, *out, *w;
    long n;
} lab02_gelu_case;

static inline double lab02_gelu_loss(void *p) {
    lab02_gelu_case *g = p;
    gelu_forward(g->out, g->inp, g->n);
    return lab02_weighted_sum(g->w, g->out, g->n);
}

/* ---- loss = sum_n dloss[n] * crossentropy(logits[n], targets[n]) */
typedef struct {
    float *logits, *losses, *lse, *dloss;
    const int *targets;
    int N, V, Vp;
} lab02_ce_case;

static inline double lab02_ce_loss(void *p) {
    lab02_ce_case *c = p;
    crossentropy_forward(c->losses, c->lse, c->logits, c->targets, c->N, c->V, c->Vp);
    return lab02_weighted_sum(c->dloss, c->losses, c->N);
}

/* Check a gradient against central differences and report the worst element in the test's words. */
static inline void lab02_expect_gradcheck(const char *file, int line, const char *what, ops_loss_fn loss, void *ctx,
                                          float *x, const float *grad, long n, double abs_tol, double rel_tol) {
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS;
    opt.abs_tol = abs_tol;
    opt.rel_tol = rel_tol;
    ops_gradcheck_result r = ops_gradcheck(what, loss, ctx, x, grad, n, &opt);
    mpt_observe_near_f32(file, line, grad, grad, n, rel_tol, abs_tol); /* the backward's answer, for the grader */
    if (r.failed)
        mpt_fail(file, line,
                 "%s: %ld of %ld elements disagree with finite differences; worst is element %ld: your backward "
                 "gives %.7g, the central difference gives %.7g (if ops_central_difference is not right yet, fix "
                 "that first: the gradient checks all rely on it)",
                 what, r.failed, r.checked, r.worst_index, r.worst_analytic, r.worst_numeric);
}
#define LAB02_EXPECT_GRADCHECK(what, loss, ctx, x, grad, n, abs_tol, rel_tol) \
    lab02_expect_gradcheck(__FILE__, __LINE__, (what), (loss), (ctx), (x), (grad), (n), (abs_tol), (rel_tol))

#endif
