/* test_lab02_optim.c: lab 02 visible tests, part B: the update loops of SGD with momentum, Adam and AdamW
 * (core/optim/optimizer.c) against values worked out by hand in the comments. */
#include "mptest.h"
#include "optim/optimizer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Compares got[i] with want[i] for i < n: |got - want| <= abs_tol + rel_tol*|want|. Reports the first few
 * wrong elements with the input that produced them and the likely mistake, then stops comparing. */
#define CHECK_ARRAY(want, got, n, rel_tol, abs_tol, what, mistake) \
    check_array(__FILE__, __LINE__, (want), (got), (n), (rel_tol), (abs_tol), (what), (mistake))
static int check_array(const char *file, int line, const double *want, const float *got, int n, double rel_tol,
                       double abs_tol, const char *what, const char *mistake) {
    int wrong = 0;
    mpt_observe_near_f64(file, line, got, want, n, rel_tol, abs_tol); /* what the grader compares */
    for (int i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - want[i]);
        if (diff <= abs_tol + rel_tol * fabs(want[i])) continue;
        if (++wrong <= 3)
            mpt_fail(file, line, "%s, element %d\n      expected: %.9g\n      got:      %.9g (off by %.3g)\n"
                     "      likely mistake: %s", what, i, want[i], (double)got[i], diff, mistake);
    }
    if (wrong > 3) mpt_fail(file, line, "%s: %d of %d elements wrong in all", what, wrong, n);
    return wrong;
}

static optim_hparams adam_hparams(double lr, double weight_decay) {
    return (optim_hparams){.lr = lr, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = weight_decay};
}

static optim_hparams momentum_hparams(double lr, double momentum, double dampening, bool nesterov, double wd) {
    return (optim_hparams){.lr = lr, .momentum = momentum, .dampening = dampening, .nesterov = nesterov,
                           .weight_decay = wd};
}

/* 19 gradients of very different sizes and both signs, and a zero: Adam's step should not care about size. */
enum { N = 19 };
static const float grads[N] = {1e-3f, -0.5f, 2.0f, -40.0f, 1e4f, 3e-5f, 0.0f, -7.25f, 0.125f, 1.0f,
                               -1.0f, 600.0f, -2e-4f, 0.75f, -0.01f, 9.0f, -123.0f, 4e-3f, -1e3f};
static void start_params(float *p) {
    for (int i = 0; i < N; i++) p[i] = 1.0f + 0.125f * (float)(i % 5) - 0.5f * (float)(i % 3);
}

/* ================================================================ Adam */

/* Adam's first step, from m = v = 0 with beta1 = 0.9, beta2 = 0.999:
 *     m1 = 0.1 g                 m_hat = m1 / (1 - 0.9)   = g
 *     v1 = 0.001 g^2             v_hat = v1 / (1 - 0.999) = g^2
 *     p1 = p0 - lr * g / (|g| + eps)  =  p0 - lr * sign(g)   (up to eps; and no move at all where g = 0)
 * Every parameter moves by exactly lr, whatever the size of its gradient. */
MPT_TEST(adam_first_step_moves_by_lr_times_sign) {
    float p[N], m[N] = {0}, v[N] = {0};
    double want_p[N], want_m[N], want_v[N];
    start_params(p);
    const double lr = 0.01;
    for (int i = 0; i < N; i++) {
        double g = grads[i];
        want_p[i] = p[i] - lr * g / (fabs(g) + 1e-8);
        want_m[i] = 0.1 * g;
        want_v[i] = 0.001 * g * g;
    }
    optim_hparams h = adam_hparams(lr, 0);
    optim_adam_update(p, grads, m, v, N, &h, 1);
    CHECK_ARRAY(want_m, m, N, 1e-4, 0, "first moment m after step 1 (0.1 * g)",
                "m = beta1*m + (1 - beta1)*g: check which of beta1 and (1 - beta1) multiplies g");
    CHECK_ARRAY(want_v, v, N, 1e-4, 0, "second moment v after step 1 (0.001 * g^2)",
                "v = beta2*v + (1 - beta2)*g*g: the square of the gradient, not |g| or g");
    CHECK_ARRAY(want_p, p, N, 0, 2e-7, "parameter after Adam's first step (p0 - lr*sign(g))",
                "a move of lr*0.1/sqrt(0.001) = 3.16*lr means no bias correction; use step_size (lr/(1-beta1^t)) "
                "and inv_sqrt_bc2 (1/sqrt(1-beta2^t)), and add eps after the square root");
}

/* Two steps with the gradient flipped: g, then -g. With beta1 = 0.9, beta2 = 0.999:
 *     m2 = 0.9 * 0.1 g + 0.1 * (-g) = -0.01 g        m_hat = m2 / (1 - 0.81)    = -g / 19
 *     v2 = 0.999 * 0.001 g^2 + 0.001 g^2             v_hat = v2 / (1 - 0.998001) = g^2
 *     (0.001999 / 0.001999 = 1)
 *     step 2 moves by -lr * (-g/19) / |g| = +lr * sign(g) / 19
 *     p2 = p0 - lr * sign(g) + lr * sign(g) / 19
 * (With eps kept: sqrt(v_hat) + eps = |g| + eps at both steps, so each sign(g) is g / (|g| + eps).) */
MPT_TEST(adam_two_steps_with_a_flipped_gradient) {
    float p[N], m[N] = {0}, v[N] = {0}, neg[N];
    double want[N];
    start_params(p);
    const double lr = 0.05;
    for (int i = 0; i < N; i++) {
        double s = grads[i] / (fabs(grads[i]) + 1e-8); /* sign(g), up to eps */
        want[i] = p[i] - lr * s + lr * s / 19.0;
        neg[i] = -grads[i];
    }
    optim_hparams h = adam_hparams(lr, 0);
    optim_adam_update(p, grads, m, v, N, &h, 1);
    optim_adam_update(p, neg, m, v, N, &h, 2);
    CHECK_ARRAY(want, p, N, 0, 1e-6, "parameter after steps with g and then -g (p0 - lr*s + lr*s/19)",
                "the moments must carry over between steps (update m[i] and v[i] in place), and step 2 must use "
                "the step-2 bias corrections passed in step_size and inv_sqrt_bc2");
}

/* Adam's weight decay is L2: wd * p is added to the gradient, and then normalised like any gradient.
 * With g = 0 and wd = 0.1 the effective gradient is 0.1 * p0, so the first step moves by lr * sign(p0):
 *     p1 = p0 - lr * sign(p0)    (not p0 * (1 - lr*wd): that would be AdamW) */
MPT_TEST(adam_l2_decay_goes_through_the_normalisation) {
    float p[4] = {2.0f, -3.0f, 0.5f, -0.25f}, g[4] = {0}, m[4] = {0}, v[4] = {0};
    double want[4];
    const double lr = 0.01;
    for (int i = 0; i < 4; i++) want[i] = p[i] - lr * (p[i] > 0 ? 1 : -1);
    optim_hparams h = adam_hparams(lr, 0.1);
    optim_adam_update(p, g, m, v, 4, &h, 1);
    CHECK_ARRAY(want, p, 4, 0, 1e-6, "Adam with zero gradient and weight_decay 0.1 (p0 - lr*sign(p0))",
                "in Adam the decay is part of the gradient: g = grad[i] + wd*param[i] before the moments");
}

/* ================================================================ AdamW */

/* AdamW decays the parameter directly, p -= lr*wd*p, and then takes Adam's step with the raw gradient:
 *     p1 = p0 * (1 - lr*wd) - lr * g / (|g| + eps)
 * With lr = 0.01 and wd = 0.1 the decay factor is 0.999; where g = 0 only the decay acts. */
MPT_TEST(adamw_first_step_decays_then_steps) {
    float p[N], m[N] = {0}, v[N] = {0};
    double want[N], want_m[N];
    start_params(p);
    const double lr = 0.01, wd = 0.1;
    for (int i = 0; i < N; i++) {
        double g = grads[i];
        want[i] = p[i] * (1 - lr * wd) - lr * g / (fabs(g) + 1e-8);
        want_m[i] = 0.1 * g;
    }
    optim_hparams h = adam_hparams(lr, wd);
    optim_adamw_update(p, grads, m, v, N, &h, 1);
    CHECK_ARRAY(want_m, m, N, 1e-4, 0, "AdamW's first moment after step 1 (0.1 * g)",
                "AdamW's moments use the raw gradient: the decay must not be added to g");
    CHECK_ARRAY(want, p, N, 0, 2e-7, "parameter after AdamW's first step (p0*(1 - lr*wd) - lr*sign(g))",
                "decoupled decay is p - lr*wd*p (times lr, and not divided by sqrt(v)), then Adam's bias-corrected "
                "step");
}

/* With zero gradients m and v stay 0, so AdamW only shrinks the parameters, by the lr of each step:
 *     p3 = p0 * (1 - lr1*wd) * (1 - lr2*wd) * (1 - lr3*wd)     lr = 0.1, 0.05, 0.02; wd = 0.5 */
MPT_TEST(adamw_decay_uses_each_steps_lr) {
    float p[6] = {1.0f, -2.0f, 8.0f, 0.0f, 3.5f, -0.75f}, g[6] = {0}, m[6] = {0}, v[6] = {0};
    const double lrs[3] = {0.1, 0.05, 0.02}, wd = 0.5;
    double want[6];
    for (int i = 0; i < 6; i++) want[i] = p[i] * (1 - lrs[0] * wd) * (1 - lrs[1] * wd) * (1 - lrs[2] * wd);
    for (int t = 1; t <= 3; t++) {
        optim_hparams h = adam_hparams(lrs[t - 1], wd);
        optim_adamw_update(p, g, m, v, 6, &h, t);
    }
    CHECK_ARRAY(want, p, 6, 1e-6, 0, "AdamW with zero gradients over 3 steps (p0 * prod(1 - lr_t*wd))",
                "the decoupled decay multiplies by (1 - lr*wd) with this step's lr; with g = 0 Adam's part must "
                "add nothing (m = 0, and eps keeps 0/0 away)");
    for (int i = 0; i < 6; i++)
        MPT_CHECK(m[i] == 0 && v[i] == 0, "element %d: m and v must stay 0 when every gradient is 0 (got %g, %g)", i,
                  (double)m[i], (double)v[i]);
}

/* With weight_decay 0, AdamW and Adam are the same algorithm: the same bits over a few steps. */
MPT_TEST(adamw_without_decay_equals_adam) {
    float pa[N], pw[N], ma[N] = {0}, va[N] = {0}, mw[N] = {0}, vw[N] = {0}, g[N];
    start_params(pa);
    start_params(pw);
    optim_hparams h = adam_hparams(0.003, 0);
    for (int t = 1; t <= 4; t++) {
        for (int i = 0; i < N; i++) g[i] = grads[(i + t) % N] * (t % 2 ? 1.0f : -0.5f);
        optim_adam_update(pa, g, ma, va, N, &h, t);
        optim_adamw_update(pw, g, mw, vw, N, &h, t);
    }
    MPT_OBSERVE_NEAR_F32(pw, pa, N, 1e-6, 1e-6);
    for (int i = 0; i < N; i++)
        MPT_CHECK(fabsf(pa[i] - pw[i]) <= 1e-7f * (1 + fabsf(pa[i])),
                  "element %d: Adam %.9g, AdamW %.9g with weight_decay 0 (they should agree)", i, (double)pa[i],
                  (double)pw[i]);
}

/* ================================================================ SGD with momentum */

/* Constant gradient g, momentum 0.9, no dampening, lr 0.1:
 *     b1 = g                     (the buffer starts as a copy of g)
 *     b2 = 0.9 g + g   = 1.9 g
 *     b3 = 0.9*1.9 g + g = 2.71 g
 *     p3 = p0 - lr * (1 + 1.9 + 2.71) g = p0 - 0.561 g */
MPT_TEST(momentum_buffer_over_three_steps) {
    float p[N], buf[N] = {0};
    double want_p[N], want_b[3][N];
    start_params(p);
    for (int i = 0; i < N; i++) {
        want_p[i] = p[i] - 0.1 * 5.61 * grads[i];
        want_b[0][i] = grads[i], want_b[1][i] = 1.9 * grads[i], want_b[2][i] = 2.71 * grads[i];
    }
    optim_hparams h = momentum_hparams(0.1, 0.9, 0, false, 0);
    for (int t = 1; t <= 3; t++) {
        optim_momentum_update(p, grads, buf, N, &h, t);
        char what[96];
        snprintf(what, sizeof what, "momentum buffer after step %d (%s)", t, t == 1 ? "g" : t == 2 ? "1.9 g" : "2.71 g");
        CHECK_ARRAY(want_b[t - 1], buf, N, 1e-6, 1e-9, what, "b = momentum*b + (1 - dampening)*g, kept in buf[i]");
    }
    CHECK_ARRAY(want_p, p, N, 1e-6, 1e-6, "parameter after 3 momentum steps (p0 - 0.561 g)",
                "without Nesterov the step is p -= lr*b, with the new b");
}

/* Dampening 0.5 scales the gradient's share from step 2 on (the first step copies g):
 *     b1 = g,  b2 = 0.9 g + 0.5 g = 1.4 g,  b3 = 0.9*1.4 g + 0.5 g = 1.76 g
 *     p3 = p0 - lr * (1 + 1.4 + 1.76) g = p0 - lr * 4.16 g        (lr = 0.1) */
MPT_TEST(momentum_dampening_scales_the_new_gradient) {
    float p[N], buf[N] = {0};
    double want_p[N], want_b[N];
    start_params(p);
    for (int i = 0; i < N; i++) want_p[i] = p[i] - 0.1 * 4.16 * grads[i], want_b[i] = 1.76 * grads[i];
    optim_hparams h = momentum_hparams(0.1, 0.9, 0.5, false, 0);
    for (int t = 1; t <= 3; t++) optim_momentum_update(p, grads, buf, N, &h, t);
    CHECK_ARRAY(want_b, buf, N, 1e-6, 1e-9, "momentum buffer after 3 steps with dampening 0.5 (1.76 g)",
                "the gradient enters the buffer times (1 - dampening); the local `dampening` is already 0 at t = 1");
    CHECK_ARRAY(want_p, p, N, 1e-6, 1e-6, "parameter after 3 dampened steps (p0 - 0.416 g)", "p -= lr*b");
}

/* Nesterov steps along g + momentum*b (a look-ahead) instead of b. Constant g, momentum 0.9:
 *     b1 = g        d1 = g + 0.9 g       = 1.9 g
 *     b2 = 1.9 g    d2 = g + 0.9*1.9 g   = 2.71 g
 *     b3 = 2.71 g   d3 = g + 0.9*2.71 g  = 3.439 g
 *     p3 = p0 - lr * (1.9 + 2.71 + 3.439) g = p0 - lr * 8.049 g      (lr = 0.01) */
MPT_TEST(momentum_nesterov_looks_ahead) {
    float p[N], buf[N] = {0};
    double want_p[N], want_b[N];
    start_params(p);
    for (int i = 0; i < N; i++) want_p[i] = p[i] - 0.01 * 8.049 * grads[i], want_b[i] = 2.71 * grads[i];
    optim_hparams h = momentum_hparams(0.01, 0.9, 0, true, 0);
    for (int t = 1; t <= 3; t++) optim_momentum_update(p, grads, buf, N, &h, t);
    CHECK_ARRAY(want_b, buf, N, 1e-6, 1e-9, "Nesterov's buffer after 3 steps (the same b as plain momentum: 2.71 g)",
                "Nesterov changes only the step, not how the buffer is kept");
    CHECK_ARRAY(want_p, p, N, 1e-6, 1e-6, "parameter after 3 Nesterov steps (p0 - lr*8.049 g)",
                "with Nesterov the step is p -= lr*(g + momentum*b), with the new b");
}

/* Weight decay in SGD is L2: it joins the gradient before the buffer. g = 0, wd = 0.1, momentum 0.9, lr 0.1,
 * p0 = 1:
 *     step 1: g = 0.1*1 = 0.1;        b = 0.1;                   p = 1 - 0.01 = 0.99
 *     step 2: g = 0.1*0.99 = 0.099;   b = 0.9*0.1 + 0.099 = 0.189;  p = 0.99 - 0.0189 = 0.9711 */
MPT_TEST(momentum_weight_decay_enters_the_gradient) {
    float p[3] = {1.0f, -1.0f, 0.0f}, g[3] = {0}, buf[3] = {0};
    double want[3] = {0.9711, -0.9711, 0.0}, want_b[3] = {0.189, -0.189, 0.0};
    optim_hparams h = momentum_hparams(0.1, 0.9, 0, false, 0.1);
    optim_momentum_update(p, g, buf, 3, &h, 1);
    optim_momentum_update(p, g, buf, 3, &h, 2);
    CHECK_ARRAY(want_b, buf, 3, 1e-6, 1e-9, "buffer after 2 steps of pure weight decay (0.189)",
                "g = grad[i] + wd*param[i], with the parameter as it is before this step");
    CHECK_ARRAY(want, p, 3, 1e-6, 1e-9, "parameter after 2 steps of pure weight decay (0.9711)",
                "g = grad[i] + wd*param[i]; then b, then p -= lr*b");
}

/* ================================================================ long spans */

/* A span of 100,003 parameters (more than one thread's worth, not a multiple of any SIMD width), between
 * guard values that must not change. Each optimizer's first step has a closed form:
 *     momentum: p1 = p0 - lr*g         Adam: p1 = p0 - lr*g/(|g| + eps)       AdamW: Adam's, after p0*(1 - lr*wd) */
MPT_TEST(optimizers_update_every_element_of_a_long_span) {
    enum { LONG = 100003, GUARD = 8 };
    static float p[LONG + 2 * GUARD], g[LONG + 2 * GUARD], m[LONG + 2 * GUARD], v[LONG + 2 * GUARD];
    const double lr = 0.01, wd = 0.1;
    for (int kind = 0; kind < 3; kind++) {
        for (int i = 0; i < LONG + 2 * GUARD; i++) {
            p[i] = 0.5f + (float)(i % 17) * 0.0625f;
            g[i] = (float)((i * 7919) % 201 - 100) * 0.01f;
            m[i] = v[i] = 0;
        }
        for (int i = 0; i < GUARD; i++) m[i] = v[i] = m[LONG + GUARD + i] = v[LONG + GUARD + i] = 42.0f;
        float *ps = p + GUARD, *gs = g + GUARD, *ms = m + GUARD, *vs = v + GUARD;
        optim_hparams h = kind == 0 ? momentum_hparams(lr, 0.9, 0, false, 0) : adam_hparams(lr, kind == 2 ? wd : 0);
        const char *name = kind == 0 ? "momentum" : kind == 1 ? "Adam" : "AdamW";
        if (kind == 0) optim_momentum_update(ps, gs, ms, LONG, &h, 1);
        if (kind == 1) optim_adam_update(ps, gs, ms, vs, LONG, &h, 1);
        if (kind == 2) optim_adamw_update(ps, gs, ms, vs, LONG, &h, 1);
        int wrong = 0;
        MPT_OBSERVE_NEAR_F32(ps, ps, LONG, 1e-6, 1e-6);
        for (int i = 0; i < LONG && wrong < 3; i++) {
            double p0 = 0.5 + (double)((i + GUARD) % 17) * 0.0625, gi = gs[i];
            double want = kind == 0 ? p0 - lr * gi : p0 * (kind == 2 ? 1 - lr * wd : 1) - lr * gi / (fabs(gi) + 1e-8);
            if (fabs(ps[i] - want) > 2e-7) {
                wrong++;
                mpt_fail(__FILE__, __LINE__, "%s, element %d of %d: expected %.9g, got %.9g\n"
                         "      likely mistake: the loop must run over every i from 0 to n - 1", name, i, LONG, want,
                         (double)ps[i]);
            }
        }
        for (int i = 0; i < GUARD; i++) {
            MPT_CHECK(p[i] == 0.5f + (float)(i % 17) * 0.0625f && m[i] == 42.0f,
                      "%s wrote before the span (guard element %d)", name, i);
            int j = LONG + GUARD + i;
            MPT_CHECK(p[j] == 0.5f + (float)(j % 17) * 0.0625f && m[j] == 42.0f && v[j] == 42.0f,
                      "%s wrote past the end of the span (element n + %d): the loop must stop at n", name, i);
        }
    }
}
