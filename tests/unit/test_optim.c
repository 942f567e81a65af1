/* test_optim.c: Criterion tests of core/optim: every optimizer against a double-precision re-implementation
 * written here, the ZeRO property (a shard updated alone equals that slice of a whole update), state sizes,
 * configuration by name and DeepSpeed JSON, schedules at their boundary steps, norms and clipping. */
#include "base/mem.h"
#include "base/rng.h"
#include "ops/isa.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ helpers */

static float *random_floats(size_t n, uint64_t seed, float scale) {
    float *x = malloc(n * sizeof *x);
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) x[i] = scale * mp_rng_normal(&rng);
    return x;
}

/* Gradients of step t: normal, with every 7th element exactly zero (an unused embedding row, a dead unit). */
static void fill_grads(float *g, size_t n, uint64_t seed, long t, float scale) {
    mp_rng rng;
    mp_rng_seed(&rng, seed * 1000 + (uint64_t)t);
    for (size_t i = 0; i < n; i++) g[i] = i % 7 == 3 ? 0.0f : scale * mp_rng_normal(&rng);
}

/* The optimizers written the plain way, in double, straight from the formulas in optimizer.h. */
static void ref_update(optim_kind kind, double *p, const float *grad, double *m, double *v, size_t n,
                       const optim_hparams *h_user, long t) {
    /* The kernels round each hyperparameter to float once (optimizer.h); so does the reference, so that
     * the only difference left is the rounding of the arithmetic. Bias corrections use the exact betas. */
    optim_hparams hf = *h_user, *h = &hf;
    double *fields[] = {&hf.lr, &hf.beta1, &hf.beta2, &hf.eps, &hf.weight_decay, &hf.momentum, &hf.dampening};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) *fields[i] = (float)*fields[i];
    double lr = h->lr, wd = h->weight_decay, b1 = h->beta1, b2 = h->beta2;
    double omb1 = (float)(1 - h_user->beta1), omb2 = (float)(1 - h_user->beta2); /* 1 - beta, rounded once */
    double bc1 = 1 - pow(h_user->beta1, (double)t), bc2 = 1 - pow(h_user->beta2, (double)t);
    double psum = 0, usum = 0;
    for (size_t i = 0; i < n; i++) {
        double g = grad[i];
        switch (kind) {
        case OPTIM_SGD: p[i] -= lr * (g + wd * p[i]); break;
        case OPTIM_MOMENTUM: {
            g += wd * p[i];
            m[i] = t == 1 ? g : h->momentum * m[i] + (1 - h->dampening) * g;
            p[i] -= lr * (h->nesterov ? g + h->momentum * m[i] : m[i]);
            break;
        }
        case OPTIM_ADAM:
        case OPTIM_ADAMW:
            if (kind == OPTIM_ADAM) g += wd * p[i];
            else p[i] -= lr * wd * p[i];
            m[i] = b1 * m[i] + omb1 * g;
            v[i] = b2 * v[i] + omb2 * g * g;
            p[i] -= lr * (m[i] / bc1) / (sqrt(v[i] / bc2) + h->eps);
            break;
        case OPTIM_LAMB: {
            m[i] = b1 * m[i] + (h->grad_averaging ? omb1 : 1) * g;
            v[i] = b2 * v[i] + omb2 * g * g;
            double u = (m[i] / bc1) / (sqrt(v[i] / bc2) + h->eps) + wd * p[i];
            psum += p[i] * p[i];
            usum += u * u;
            break;
        }
        default: cr_assert_fail("kind %d", kind);
        }
    }
    if (kind != OPTIM_LAMB) return;
    double r = psum > 0 && usum > 0 ? sqrt(psum) / sqrt(usum) : 1;
    r = fmin(fmax(r, h->min_trust), h->max_trust);
    for (size_t i = 0; i < n; i++)
        p[i] -= lr * r * ((m[i] / bc1) / (sqrt(v[i] / bc2) + h->eps) + wd * p[i]);
}

/* Largest |got - want| / (|want| + scale) over the array, and where. */
static double worst_error(const float *got, const double *want, size_t n, double scale, size_t *where) {
    double worst = 0;
    *where = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (fabs(want[i]) + scale);
        if (!(e <= worst)) {
            worst = e;
            *where = i;
        }
    }
    return worst;
}

typedef struct {
    const char *what;
    optim_kind kind;
    optim_hparams h;
} optim_case;

static optim_hparams hp(optim_kind kind) { return optim_info_of(kind)->defaults; }

/* Runs `steps` updates of the float kernel and of the double reference from the same start and compares
 * parameters and state. Tolerance: float rounding (~6e-8 relative per operation) over a few steps. */
static void check_against_reference(const optim_case *c, size_t n, int steps, uint64_t seed) {
    float *p = random_floats(n, seed, 1.0f), *g = malloc(n * sizeof *g);
    float *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v);
    double *pd = malloc(n * sizeof *pd), *md = calloc(n, sizeof *md), *vd = calloc(n, sizeof *vd);
    for (size_t i = 0; i < n; i++) pd[i] = p[i];
    for (long t = 1; t <= steps; t++) {
        fill_grads(g, n, seed, t, 0.5f);
        optim_update(c->kind, p, g, m, v, n, &c->h, t);
        ref_update(c->kind, pd, g, md, vd, n, &c->h, t);
    }
    size_t at;
    double err = worst_error(p, pd, n, c->h.lr, &at);
    cr_expect_leq(err, 3e-6, "%s, n=%zu: parameter %zu is %.9g, the double reference says %.9g (error %.3g)", c->what,
                  n, at, p[at], pd[at], err);
    int floats = optim_info_of(c->kind)->state_floats;
    if (floats >= 1) {
        /* m is a signed running sum of gradients (here ~0.5): where it cancels to near 0, its error is still
         * that of its terms, so it is measured against 0.1 rather than against its own size. */
        err = worst_error(m, md, n, 0.1, &at);
        cr_expect_leq(err, 3e-6, "%s: state m[%zu] %.9g vs %.9g", c->what, at, m[at], md[at]);
    }
    if (floats >= 2) {
        err = worst_error(v, vd, n, 1e-6, &at);
        cr_expect_leq(err, 3e-6, "%s: state v[%zu] %.9g vs %.9g", c->what, at, v[at], vd[at]);
    }
    free(p), free(g), free(m), free(v), free(pd), free(md), free(vd);
}

static optim_case make_case(const char *what, optim_kind kind, double lr, double wd) {
    optim_case c = {what, kind, hp(kind)};
    c.h.lr = lr;
    c.h.weight_decay = wd;
    return c;
}

/* ================================================================ each optimizer vs the reference */

Test(optim, sgd_matches_reference) {
    optim_case cases[] = {make_case("sgd", OPTIM_SGD, 0.1, 0), make_case("sgd wd", OPTIM_SGD, 0.05, 0.01)};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_against_reference(&cases[i], 1003, 6, 11 + i);
}

Test(optim, momentum_matches_reference) {
    optim_case plain = make_case("momentum 0.9", OPTIM_MOMENTUM, 0.05, 0);
    optim_case damp = make_case("momentum 0.8 dampening 0.3 wd", OPTIM_MOMENTUM, 0.02, 0.01);
    damp.h.momentum = 0.8, damp.h.dampening = 0.3;
    optim_case nest = make_case("nesterov 0.9 wd", OPTIM_MOMENTUM, 0.03, 0.05);
    nest.h.nesterov = true;
    optim_case cases[] = {plain, damp, nest};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        check_against_reference(&cases[i], 1003, 7, 21 + i);
        check_against_reference(&cases[i], 40001, 3, 31 + i); /* above the threaded-loop threshold */
    }
}

Test(optim, adam_matches_reference) {
    optim_case a = make_case("adam", OPTIM_ADAM, 1e-2, 0);
    optim_case b = make_case("adam L2 0.1 betas (0.8, 0.95) eps 1e-6", OPTIM_ADAM, 3e-3, 0.1);
    b.h.beta1 = 0.8, b.h.beta2 = 0.95, b.h.eps = 1e-6;
    optim_case cases[] = {a, b};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        check_against_reference(&cases[i], 1003, 8, 41 + i);
        check_against_reference(&cases[i], 40001, 3, 51 + i);
    }
}

Test(optim, adamw_matches_reference) {
    optim_case a = make_case("adamw no decay", OPTIM_ADAMW, 1e-2, 0);
    optim_case b = make_case("adamw decay 0.1 betas (0.9, 0.95)", OPTIM_ADAMW, 6e-4, 0.1);
    b.h.beta2 = 0.95;
    optim_case c = make_case("adamw big lr*wd", OPTIM_ADAMW, 0.5, 0.5);
    optim_case cases[] = {a, b, c};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        check_against_reference(&cases[i], 1003, 8, 61 + i);
        check_against_reference(&cases[i], 40001, 3, 71 + i);
    }
}

Test(optim, lamb_matches_reference) {
    optim_case a = make_case("lamb", OPTIM_LAMB, 1e-2, 0.01);
    optim_case b = make_case("lamb no decay, no grad averaging", OPTIM_LAMB, 1e-3, 0);
    b.h.grad_averaging = false;
    optim_case c = make_case("lamb clamped [0.01, 10]", OPTIM_LAMB, 1e-2, 0.1);
    c.h.min_trust = 0.01, c.h.max_trust = 10;
    optim_case cases[] = {a, b, c};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        check_against_reference(&cases[i], 1003, 6, 81 + i);
        check_against_reference(&cases[i], 40001, 2, 91 + i);
    }
}

Test(optim, lamb_trust_ratio_rules) {
    optim_hparams h = hp(OPTIM_LAMB);
    cr_expect_float_eq(optim_lamb_trust_ratio(&h, 16, 4), 2.0, 1e-15, "||p|| 4 / ||u|| 2");
    cr_expect_eq(optim_lamb_trust_ratio(&h, 0, 4), 1.0, "zero parameters: ratio 1");
    cr_expect_eq(optim_lamb_trust_ratio(&h, 9, 0), 1.0, "zero update: ratio 1");
    h.min_trust = 0.01, h.max_trust = 10;
    cr_expect_eq(optim_lamb_trust_ratio(&h, 1e6, 1), 10.0, "clamped above");
    cr_expect_eq(optim_lamb_trust_ratio(&h, 1e-8, 1), 0.01, "clamped below");
}

/* ================================================================ edge cases */

Test(optim, zero_gradients_leave_parameters_alone_without_decay) {
    size_t n = 1001;
    for (int k = 0; k < OPTIM_NKINDS; k++) {
        float *p = random_floats(n, 5, 1.0f), *p0 = malloc(n * sizeof *p0);
        float *g = calloc(n, sizeof *g), *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v);
        memcpy(p0, p, n * sizeof *p);
        optim_hparams h = hp((optim_kind)k);
        h.weight_decay = 0;
        for (long t = 1; t <= 3; t++) optim_update((optim_kind)k, p, g, m, v, n, &h, t);
        cr_expect_eq(memcmp(p, p0, n * sizeof *p), 0, "%s moved parameters with zero gradients",
                     optim_info_of(k)->name);
        for (size_t i = 0; i < n; i++) cr_assert(m[i] == 0 && v[i] == 0, "%s: state nonzero", optim_info_of(k)->name);
        free(p), free(p0), free(g), free(m), free(v);
    }
}

Test(optim, decoupled_decay_with_zero_gradient_is_pure_shrink) {
    /* AdamW with g = 0: m = v = 0, so each step is exactly p *= (1 - lr*wd). Adam's L2 decay instead feeds
     * wd*p through the normalisation and moves each parameter by about lr on the first step. */
    size_t n = 37;
    float p[37], q[37], g[37] = {0}, m[37] = {0}, v[37] = {0}, m2[37] = {0}, v2[37] = {0};
    for (size_t i = 0; i < n; i++) p[i] = q[i] = 0.25f * (float)i - 4.0f;
    optim_hparams h = hp(OPTIM_ADAMW);
    h.lr = 0.01, h.weight_decay = 0.1;
    optim_adamw_update(p, g, m, v, n, &h, 1);
    optim_adam_update(q, g, m2, v2, n, &h, 1);
    for (size_t i = 0; i < n; i++) {
        double p0 = 0.25 * (double)i - 4.0;
        cr_expect_float_eq(p[i], p0 * (1 - 0.001), 1e-6, "adamw shrink at %zu", i);
        double adam_move = p0 == 0 ? 0 : -0.01 * (p0 > 0 ? 1 : -1);
        cr_expect_float_eq(q[i], p0 + adam_move, 1e-6, "adam L2 step at %zu", i);
    }
}

Test(optim, momentum_first_step_copies_the_gradient) {
    float p[5] = {1, 2, 3, 4, 5}, g[5] = {0.5f, -1, 2, 0, 8}, buf[5] = {0};
    optim_hparams h = hp(OPTIM_MOMENTUM);
    h.lr = 0.1, h.dampening = 0.5;
    optim_momentum_update(p, g, buf, 5, &h, 1);
    for (int i = 0; i < 5; i++) cr_expect_eq(buf[i], g[i], "buf[%d] is g at t = 1 (no dampening)", i);
    optim_momentum_update(p, g, buf, 5, &h, 2);
    for (int i = 0; i < 5; i++) cr_expect_float_eq(buf[i], 1.4f * g[i], 1e-6, "buf[%d] = 0.9 g + 0.5 g at t = 2", i);
}

/* ================================================================ the ZeRO property */

/* Update [0, n) at once, and [0, cut) and [cut, n) separately with their slices of the state: same bits. */
static void check_shards_equal_whole(optim_kind kind, size_t n, size_t cut) {
    float *pw = random_floats(n, 100 + kind, 1.0f), *ps = malloc(n * sizeof *ps), *g = malloc(n * sizeof *g);
    float *mw = calloc(n, 4), *vw = calloc(n, 4), *ms = calloc(n, 4), *vs = calloc(n, 4);
    memcpy(ps, pw, n * sizeof *pw);
    optim_hparams h = hp(kind);
    h.weight_decay = 0.05, h.lr = 1e-2;
    for (long t = 1; t <= 3; t++) {
        fill_grads(g, n, 7, t, 1.0f);
        optim_update(kind, pw, g, mw, vw, n, &h, t);
        optim_update(kind, ps, g, ms, vs, cut, &h, t);
        optim_update(kind, ps + cut, g + cut, ms + cut, vs + cut, n - cut, &h, t);
    }
    cr_expect_eq(memcmp(pw, ps, n * 4), 0, "%s: shards [0,%zu) and [%zu,%zu) differ from the whole update",
                 optim_info_of(kind)->name, cut, cut, n);
    cr_expect_eq(memcmp(mw, ms, n * 4), 0, "%s: state m differs", optim_info_of(kind)->name);
    cr_expect_eq(memcmp(vw, vs, n * 4), 0, "%s: state v differs", optim_info_of(kind)->name);
    free(pw), free(ps), free(g), free(mw), free(vw), free(ms), free(vs);
}

Test(optim, shard_update_equals_slice_of_whole_update) {
    for (int k = OPTIM_SGD; k <= OPTIM_ADAMW; k++) {
        check_shards_equal_whole((optim_kind)k, 1000, 337);   /* cut at no SIMD boundary */
        check_shards_equal_whole((optim_kind)k, 70001, 20001); /* one shard threaded, one not */
    }
}

Test(optim, lamb_shards_with_reduced_norms_equal_whole) {
    size_t n = 5003, cut = 1999;
    float *pw = random_floats(n, 3, 0.1f), *ps = malloc(n * 4), *g = malloc(n * 4);
    float *mw = calloc(n, 4), *vw = calloc(n, 4), *ms = calloc(n, 4), *vs = calloc(n, 4);
    memcpy(ps, pw, n * 4);
    optim_hparams h = hp(OPTIM_LAMB);
    for (long t = 1; t <= 3; t++) {
        fill_grads(g, n, 9, t, 1.0f);
        double pw_sq, uw_sq, p1, u1, p2, u2;
        optim_lamb_moments(pw, g, mw, vw, n, &h, t, &pw_sq, &uw_sq);
        optim_lamb_moments(ps, g, ms, vs, cut, &h, t, &p1, &u1);
        optim_lamb_moments(ps + cut, g + cut, ms + cut, vs + cut, n - cut, &h, t, &p2, &u2);
        cr_expect_float_eq(p1 + p2, pw_sq, 1e-12 * pw_sq, "param sums of squares add up over shards");
        cr_expect_float_eq(u1 + u2, uw_sq, 1e-12 * uw_sq, "update sums of squares add up over shards");
        /* The reduced ratio may differ from the whole one in the last bits (another order of additions);
         * apply the whole one to both so that the comparison below is exact. */
        double r = optim_lamb_trust_ratio(&h, pw_sq, uw_sq);
        cr_expect_float_eq(optim_lamb_trust_ratio(&h, p1 + p2, u1 + u2), r, 1e-12 * r);
        optim_lamb_apply(pw, mw, vw, n, &h, t, r);
        optim_lamb_apply(ps, ms, vs, cut, &h, t, r);
        optim_lamb_apply(ps + cut, ms + cut, vs + cut, n - cut, &h, t, r);
    }
    cr_expect_eq(memcmp(pw, ps, n * 4), 0, "LAMB shards differ from the whole tensor");
    free(pw), free(ps), free(g), free(mw), free(vw), free(ms), free(vs);
}

/* ================================================================ state, spans, step */

Test(optim, state_bytes_are_what_the_planner_assumes) {
    const size_t n = 12345;
    const size_t per_param[OPTIM_NKINDS] = {[OPTIM_SGD] = 0, [OPTIM_MOMENTUM] = 4, [OPTIM_ADAM] = 8,
                                            [OPTIM_ADAMW] = 8, [OPTIM_LAMB] = 8};
    for (int k = 0; k < OPTIM_NKINDS; k++) {
        cr_expect_eq(optim_state_bytes((optim_kind)k, n), per_param[k] * n, "%s", optim_info_of(k)->name);
        size_t before = mem_current(MEM_OPTIM);
        optim_state st;
        optim_state_init(&st, (optim_kind)k, n);
        cr_expect_eq(mem_current(MEM_OPTIM) - before, per_param[k] * n, "%s allocates exactly %zu B/param under optim",
                     optim_info_of(k)->name, per_param[k]);
        optim_state_free(&st);
        cr_expect_eq(mem_current(MEM_OPTIM), before);
    }
}

Test(optim, step_applies_decay_per_span_and_lays_state_end_to_end) {
    /* Two spans: a "matrix" (decayed) and a "bias" (not), through optim_step, against optim_update on each
     * span with its slice of state and its own weight decay. */
    enum { NA = 300, NB = 45 };
    float *a = random_floats(NA, 1, 1.0f), *b = random_floats(NB, 2, 1.0f), *ga = malloc(NA * 4), *gb = malloc(NB * 4);
    float *a2 = malloc(NA * 4), *b2 = malloc(NB * 4), *m = calloc(NA + NB, 4), *v = calloc(NA + NB, 4);
    memcpy(a2, a, NA * 4), memcpy(b2, b, NB * 4);
    optim_config cfg = optim_config_default(OPTIM_ADAMW);
    cfg.h.weight_decay = 0.1;
    optim_state st;
    optim_state_init(&st, cfg.kind, NA + NB);
    for (long t = 1; t <= 3; t++) {
        fill_grads(ga, NA, 3, t, 1.0f), fill_grads(gb, NB, 4, t, 1.0f);
        optim_span spans[] = {{a, ga, NA, true}, {b, gb, NB, false}};
        optim_step(&cfg, &st, spans, 2, 0.01 * (double)t);
        optim_hparams h = cfg.h;
        h.lr = 0.01 * (double)t;
        optim_adamw_update(a2, ga, m, v, NA, &h, t);
        h.weight_decay = 0;
        optim_adamw_update(b2, gb, m + NA, v + NA, NB, &h, t);
        cr_expect_eq(st.step, t);
    }
    cr_expect_eq(memcmp(a, a2, NA * 4), 0, "decayed span");
    cr_expect_eq(memcmp(b, b2, NB * 4), 0, "undecayed span");
    cr_expect_eq(memcmp(st.m, m, (NA + NB) * 4), 0, "state m laid out span after span");
    optim_state_free(&st);
    free(a), free(b), free(ga), free(gb), free(a2), free(b2), free(m), free(v);
}

Test(optim, decay_rule_is_two_or_more_dims) {
    cr_expect(!optim_decays_ndim(1), "biases and norm gains are not decayed");
    cr_expect(optim_decays_ndim(2), "matrices and embeddings are");
    cr_expect(optim_decays_ndim(3));
}

/* ================================================================ configuration */

Test(optim_config, names_and_defaults) {
    cr_expect_eq(optim_kind_from_name("AdamW"), OPTIM_ADAMW);
    cr_expect_eq(optim_kind_from_name("sgd"), OPTIM_SGD);
    cr_expect_eq(optim_kind_from_name("LAMB"), OPTIM_LAMB);
    optim_config c = optim_config_default(OPTIM_ADAMW);
    cr_expect_eq(c.h.beta1, 0.9);
    cr_expect_eq(c.h.beta2, 0.999);
    cr_expect_eq(c.h.eps, 1e-8);
    cr_expect_eq(c.h.weight_decay, 0.01, "torch.optim.AdamW's default decay");
    optim_config_set(&c, "lr", 6e-4);
    optim_config_set(&c, "beta2", 0.95);
    char line[160];
    optim_config_format(&c, line, sizeof line);
    cr_expect_str_eq(line, "adamw lr=0.0006 betas=(0.9, 0.95) eps=1e-08 weight_decay=0.01");
}

Test(optim_config, momentum_key_moves_between_sgd_and_momentum) {
    optim_config c = optim_config_default(OPTIM_SGD);
    optim_config_set(&c, "momentum", 0.9);
    cr_expect_eq(c.kind, OPTIM_MOMENTUM, "torch.optim.SGD with momentum keeps a buffer");
    optim_config_set(&c, "momentum", 0);
    cr_expect_eq(c.kind, OPTIM_SGD);
}

Test(optim_config, unknown_name_exits_2, .exit_code = 2) { optim_kind_from_name("adagrad"); }
Test(optim_config, key_of_another_optimizer_exits_2, .exit_code = 2) {
    optim_config c = optim_config_default(OPTIM_ADAM);
    optim_config_set(&c, "momentum", 0.9);
}
Test(optim_config, beta_of_one_exits_2, .exit_code = 2) {
    optim_config c = optim_config_default(OPTIM_ADAM);
    optim_config_set(&c, "beta1", 1.0);
}
Test(optim_config, negative_lr_exits_2, .exit_code = 2) {
    optim_config c = optim_config_default(OPTIM_SGD);
    optim_config_set(&c, "lr", -0.1);
}
Test(optim_config, nesterov_with_dampening_exits_2, .exit_code = 2) {
    optim_config c = optim_config_default(OPTIM_MOMENTUM);
    optim_config_set(&c, "nesterov", 1);
    optim_config_set(&c, "dampening", 0.1);
    optim_config_check(&c);
}

static optim_config config_from_text(const char *text) {
    cJSON *j = cJSON_Parse(text);
    cr_assert_not_null(j, "test JSON parses: %s", text);
    optim_config c = optim_config_from_json(j);
    cJSON_Delete(j);
    return c;
}

Test(optim_config, deepspeed_json_follows_deepspeed) {
    optim_config c = config_from_text("{\"type\": \"AdamW\", \"params\": {\"lr\": 6e-4, \"betas\": [0.9, 0.95], "
                                      "\"eps\": 1e-8, \"weight_decay\": 0.1}}");
    cr_expect_eq(c.kind, OPTIM_ADAMW);
    cr_expect_eq(c.h.lr, 6e-4);
    cr_expect_eq(c.h.beta2, 0.95);
    cr_expect_eq(c.h.weight_decay, 0.1);
    c = config_from_text("{\"type\": \"Adam\", \"params\": {\"lr\": 1e-3}}");
    cr_expect_eq(c.kind, OPTIM_ADAMW, "DeepSpeed's Adam is AdamW unless adam_w_mode is false");
    cr_expect_eq(c.h.weight_decay, 0.0, "DeepSpeed's FusedAdam defaults to no decay");
    c = config_from_text("{\"type\": \"Adam\", \"params\": {\"adam_w_mode\": false, \"weight_decay\": 0.01}}");
    cr_expect_eq(c.kind, OPTIM_ADAM);
    c = config_from_text("{\"type\": \"SGD\", \"params\": {\"lr\": 0.1, \"momentum\": 0.9, \"nesterov\": true}}");
    cr_expect_eq(c.kind, OPTIM_MOMENTUM);
    cr_expect(c.h.nesterov);
    c = config_from_text("{\"type\": \"Lamb\", \"params\": {\"lr\": 1e-3}}");
    cr_expect_eq(c.kind, OPTIM_LAMB);
    cr_expect_eq(c.h.min_trust, 0.01);
    cr_expect_eq(c.h.max_trust, 10.0);
}

Test(optim_config, deepspeed_json_unknown_param_exits_2, .exit_code = 2) {
    config_from_text("{\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3, \"betaz\": [0.9, 0.95]}}");
}
Test(optim_config, deepspeed_json_bad_betas_exits_2, .exit_code = 2) {
    config_from_text("{\"type\": \"AdamW\", \"params\": {\"betas\": [0.9]}}");
}

Test(optim_config, deepspeed_json_boolean_for_a_number_exits_2, .exit_code = 2) {
    config_from_text("{\"type\": \"AdamW\", \"params\": {\"lr\": true}}");
}

/* ================================================================ schedules */

static void expect_lr(const lr_schedule *s, long t, double want) {
    cr_expect_float_eq(lr_schedule_at(s, t), want, 1e-12 + 1e-12 * fabs(want), "%s at t=%ld: got %.15g, want %.15g",
                       lr_kind_name(s->kind), t, lr_schedule_at(s, t), want);
}

Test(schedule, constant_everywhere) {
    lr_schedule s = lr_schedule_constant(3e-4);
    expect_lr(&s, -1, 3e-4), expect_lr(&s, 0, 3e-4), expect_lr(&s, 1000000000L, 3e-4);
}

Test(schedule, warmup_cosine_boundaries) {
    lr_schedule s = lr_schedule_warmup_cosine(1.0, 10, 110, 0.1);
    lr_schedule_check(&s);
    expect_lr(&s, 0, 0.0);         /* warmup starts at start = 0 */
    expect_lr(&s, 9, 0.9);         /* warmup - 1 */
    expect_lr(&s, 10, 1.0);        /* warmup: the peak */
    expect_lr(&s, 60, 0.55);       /* halfway through the decay: end + (peak - end) / 2 */
    expect_lr(&s, 110, 0.1);       /* total: the end */
    expect_lr(&s, 5000, 0.1);      /* beyond total: stays at the end */
    expect_lr(&s, -3, 0.0);
}

Test(schedule, warmup_linear_and_constant_boundaries) {
    lr_schedule s = lr_schedule_from_name("warmup_linear", 2.0);
    lr_schedule_set(&s, "warmup_steps", 4, 2.0);
    lr_schedule_set(&s, "total_steps", 104, 2.0);
    lr_schedule_set(&s, "warmup_start_lr", 0.4, 2.0);
    lr_schedule_set(&s, "min_lr", 0.2, 2.0);
    lr_schedule_check(&s);
    expect_lr(&s, 0, 0.4), expect_lr(&s, 3, 0.4 + 1.6 * 0.75), expect_lr(&s, 4, 2.0);
    expect_lr(&s, 54, 1.1), expect_lr(&s, 104, 0.2), expect_lr(&s, 105, 0.2), expect_lr(&s, 99999, 0.2);
    lr_schedule c = lr_schedule_from_name("warmup_constant", 1.0);
    lr_schedule_set(&c, "warmup_steps", 8, 1.0);
    expect_lr(&c, 0, 0.0), expect_lr(&c, 7, 0.875), expect_lr(&c, 8, 1.0), expect_lr(&c, 100000, 1.0);
}

Test(schedule, deepspeed_warmup_lr_log_ramp) {
    /* WarmupLR: peak 0.001 whatever the optimizer's lr, W = 1000, log ramp: lr(t) = 0.001 * ln(t+1)/ln(1000). */
    lr_schedule s = lr_schedule_from_name("WarmupLR", 0.5);
    expect_lr(&s, 0, 0.0);
    expect_lr(&s, 99, 0.001 * 2.0 / 3.0);   /* ln(100)/ln(1000) = 2/3 */
    expect_lr(&s, 999, 0.001);              /* the log ramp reaches the peak at W - 1 */
    expect_lr(&s, 1000, 0.001), expect_lr(&s, 123456, 0.001);
    lr_schedule_set(&s, "warmup_num_steps", 1, 0.5);
    cr_expect_eq(s.warmup_steps, 2, "DeepSpeed raises warmup_num_steps to at least 2");
}

Test(schedule, deepspeed_warmup_decay_lr) {
    cJSON *j = cJSON_Parse("{\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_min_lr\": 1e-5, \"warmup_max_lr\": "
                           "1e-3, \"warmup_num_steps\": 100, \"total_num_steps\": 1100, \"warmup_type\": \"linear\"}}");
    lr_schedule s = lr_schedule_from_json(j, 0.5);
    cJSON_Delete(j);
    expect_lr(&s, 0, 1e-5), expect_lr(&s, 50, 1e-5 + (1e-3 - 1e-5) * 0.5), expect_lr(&s, 100, 1e-3);
    expect_lr(&s, 600, 1e-5 + (1e-3 - 1e-5) * 0.5);
    expect_lr(&s, 1100, 1e-5), expect_lr(&s, 2000, 1e-5); /* decays back to warmup_min_lr and stays */
}

/* DeepSpeed's WarmupCosineLR ratio after the warmup, as its code computes it (schedule.h explains). */
static double deepspeed_cosine_ratio(long t, long W, long T, double cos_min_ratio) {
    double real_last = (double)(t - W + 1), real_total = (double)(T - W);
    return fmax(0.0, cos_min_ratio + (1 - cos_min_ratio) * (1 + cos(M_PI * real_last / real_total)) / 2);
}

Test(schedule, deepspeed_warmup_cosine_lr_and_its_documented_offset) {
    cJSON *j = cJSON_Parse("{\"type\": \"WarmupCosineLR\", \"params\": {\"total_num_steps\": 1000, "
                           "\"warmup_num_steps\": 100, \"warmup_min_ratio\": 0.1, \"cos_min_ratio\": 0.01}}");
    lr_schedule s = lr_schedule_from_json(j, 2e-3);
    cJSON_Delete(j);
    cr_expect_eq(s.ramp, LR_RAMP_LOG, "DeepSpeed's default warmup_type is log");
    expect_lr(&s, 0, 2e-4);       /* warmup_min_ratio * lr */
    expect_lr(&s, 100, 2e-3);     /* the peak is the optimizer's lr */
    expect_lr(&s, 1000, 2e-5);    /* cos_min_ratio * lr */
    expect_lr(&s, 4000, 2e-5);
    /* Ours at t equals DeepSpeed's at t - 1 through the decay; after T DeepSpeed's cosine rises again. */
    for (long t = 101; t <= 1000; t += 37)
        expect_lr(&s, t, 2e-3 * deepspeed_cosine_ratio(t - 1, 100, 1000, 0.01));
    cr_expect_gt(deepspeed_cosine_ratio(1500, 100, 1000, 0.01) * 2e-3, lr_schedule_at(&s, 1500));
}

Test(schedule, unknown_name_exits_2, .exit_code = 2) { lr_schedule_from_name("OneCycle", 1e-3); }
Test(schedule, decay_without_total_exits_2, .exit_code = 2) {
    lr_schedule s = lr_schedule_from_name("warmup_cosine", 1e-3);
    lr_schedule_set(&s, "warmup_steps", 10, 1e-3);
    lr_schedule_check(&s);
}
Test(schedule, fractional_steps_exit_2, .exit_code = 2) {
    lr_schedule s = lr_schedule_from_name("warmup_constant", 1e-3);
    lr_schedule_set(&s, "warmup_steps", 2.5, 1e-3);
}

/* ================================================================ norms and clipping */

Test(clip, norms_of_known_vectors) {
    float a[2] = {3, 4}, b[1] = {-12};
    cr_expect_eq(clip_sum_squares(a, 2), 25.0);
    clip_span spans[] = {{a, 2}, {b, 1}, {NULL, 0}};
    cr_expect_eq(clip_global_norm(spans, 3), 13.0, "sqrt(9 + 16 + 144)");
    /* 1, 2, ..., n: the sum of squares n(n+1)(2n+1)/6 is an integer below 2^53, so the double sum is exact. */
    size_t n = 200001;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(i + 1);
    double want = (double)n * (double)(n + 1) * (double)(2 * n + 1) / 6.0;
    cr_expect_eq(clip_sum_squares(x, n), want, "sum of i^2 for i = 1..%zu", n);
    free(x);
}

Test(clip, sum_of_squares_does_not_depend_on_thread_count) {
    size_t n = 300007;
    float *x = random_floats(n, 77, 3.0f);
    omp_set_num_threads(1);
    double one = clip_sum_squares(x, n);
    omp_set_num_threads(2);
    double two = clip_sum_squares(x, n);
    omp_set_num_threads(3);
    double three = clip_sum_squares(x, n);
    cr_expect(one == two && two == three, "1, 2, 3 threads: %.17g %.17g %.17g", one, two, three);
    free(x);
}

/* The order of additions, spelled out again: n cut into 64 equal chunks (the last ones shorter or empty), in
 * each chunk element i added to running sum i % 8, the eight sums added as a fixed tree, then the rest of the
 * chunk one by one, and the chunk sums added in order. clip_sum_squares sums several chunks side by side
 * (ops/isa.h's widest level holds a chunk's eight sums in one register): the bits must be this order's, on
 * every level, for sizes that fill the chunks exactly and for ragged ones. */
static double sum_squares_in_the_documented_order(const float *x, size_t n) {
    size_t chunk = (n + 63) / 64;
    double total = 0;
    for (int c = 0; c < 64; c++) {
        size_t lo = (size_t)c * chunk, hi = lo + chunk;
        if (lo > n) lo = n;
        if (hi > n) hi = n;
        double s[8] = {0}, tail = 0;
        size_t i = lo;
        for (; i + 8 <= hi; i += 8)
            for (int j = 0; j < 8; j++) s[j] += (double)x[i + j] * (double)x[i + j];
        for (; i < hi; i++) tail += (double)x[i] * (double)x[i];
        total += ((((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))) + tail);
    }
    return total;
}

Test(clip, sum_of_squares_is_the_documented_order_on_every_level) {
    const size_t sizes[] = {0, 1, 7, 9, 63, 64, 65, 520, 4099, 65536, 65543, 300007, (1u << 20) + 61};
    const size_t most = (1u << 20) + 61;
    float *x = calloc(most, sizeof *x);
    uint64_t state = 12345;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        const size_t n = sizes[k], chunk = (n + 63) / 64;
        /* One chunk at a time holds values, the others zeros: adding zeros is exact, so the result is that
         * chunk's sum to the last bit (a full vector of random values would hide a chunk's last bit in the
         * rounding of the total). Mantissas are random and exponents span 2^-8 .. 2^8, so the lane sums round
         * and a different order of additions shows in some of the 64 chunks. */
        for (int c = 0; c < 64; c++) {
            size_t lo = (size_t)c * chunk, hi = lo + chunk;
            if (lo > n) lo = n;
            if (hi > n) hi = n;
            for (size_t i = lo; i < hi; i++) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                const int e = (int)((state >> 33) % 17) - 8;
                x[i] = ldexpf(1.0f + (float)((state >> 40) & 0xFFFFFF) / 16777216.0f, e) * ((state >> 39) & 1 ? -1.0f : 1.0f);
            }
            const double want = sum_squares_in_the_documented_order(x, n);
            for (int level = OPS_ISA_BASE; level < OPS_ISA_COUNT; level++) {
                if (!ops_isa_force((ops_isa)level)) continue;
                const double got = clip_sum_squares(x, n);
                cr_expect(got == want, "%s, n = %zu, values in chunk %d: %.17g, the documented order gives %.17g",
                          ops_isa_name((ops_isa)level), n, c, got, want);
            }
            for (size_t i = lo; i < hi; i++) x[i] = 0.0f;
        }
    }
    free(x);
}

Test(clip, huge_finite_values_do_not_overflow) {
    size_t n = 1000;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = 3e38f;
    double norm = clip_norm_finish(clip_sum_squares(x, n));
    cr_expect(clip_norm_is_finite(norm), "1000 values of 3e38 have a finite norm in double: %g", norm);
    cr_expect_float_eq(norm, 3e38 * sqrt(1000.0), 1e-6 * norm);
    free(x);
}

Test(clip, inf_and_nan_are_detected_and_left_alone) {
    float x[40], y[40];
    for (int i = 0; i < 40; i++) x[i] = y[i] = 0.5f;
    x[17] = INFINITY;
    y[3] = NAN;
    clip_span sx = {x, 40}, sy = {y, 40};
    double nx = clip_grad_norm(&sx, 1, 1.0), ny = clip_grad_norm(&sy, 1, 1.0);
    cr_expect(isinf(nx) && !clip_norm_is_finite(nx));
    cr_expect(isnan(ny) && !clip_norm_is_finite(ny));
    cr_expect_eq(x[0], 0.5f, "gradients are not scaled on a non-finite norm (the step is skipped)");
    cr_expect_eq(y[39], 0.5f);
    cr_expect_eq(clip_scale_for(INFINITY, 1.0), 1.0f);
}

Test(clip, clipping_scales_to_max_norm_and_not_below_it) {
    float a[2] = {3, 4};
    clip_span s = {a, 2};
    cr_expect_eq(clip_grad_norm(&s, 1, 5.0), 5.0);
    cr_expect(a[0] == 3 && a[1] == 4, "norm equal to max_norm: unchanged");
    cr_expect_eq(clip_grad_norm(&s, 1, 10.0), 5.0);
    cr_expect(a[0] == 3 && a[1] == 4, "norm under max_norm: unchanged");
    cr_expect_eq(clip_grad_norm(&s, 1, 0.0), 5.0);
    cr_expect(a[0] == 3 && a[1] == 4, "max_norm 0: measure only");
    double before = clip_grad_norm(&s, 1, 1.0);
    cr_expect_eq(before, 5.0, "returns the norm before clipping");
    float scale = (float)(1.0 / (5.0 + 1e-6));
    cr_expect_eq(a[0], 3.0f * scale);
    cr_expect_eq(a[1], 4.0f * scale);
    double after = clip_global_norm(&s, 1);
    cr_expect(after < 1.0 && after > 1.0 - 1e-6, "norm after clipping just under max_norm: %.9g", after);
}
