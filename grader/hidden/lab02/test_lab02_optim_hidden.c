/* test_lab02_optim_hidden.c: lab 02 hidden tests, part B: Adam, AdamW and SGD with momentum over many steps
 * against a double-precision reference, eps placement, bias correction at later steps, decay order, shards
 * and span edges. */
#include "base/rng.h"
#include "mptest.h"
#include "optim/optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ helpers */

static optim_hparams hidden_adam_hparams(double lr, double beta1, double beta2, double eps, double wd) {
    return (optim_hparams){.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps, .weight_decay = wd};
}

static optim_hparams hidden_momentum_hparams(double lr, double momentum, double dampening, bool nesterov, double wd) {
    return (optim_hparams){.lr = lr, .momentum = momentum, .dampening = dampening, .nesterov = nesterov,
                           .weight_decay = wd};
}

typedef enum { REF_MOMENTUM, REF_ADAM, REF_ADAMW } ref_kind;

/* The three updates in double, from the formulas. Hyperparameters are rounded to float first, as the
 * kernels do, so that what is left between the two is the rounding of float arithmetic. */
static void reference_step(ref_kind kind, double *p, const float *grad, double *m, double *v, int n,
                           const optim_hparams *h, long t) {
    double lr = (float)h->lr, wd = (float)h->weight_decay, b1 = (float)h->beta1, b2 = (float)h->beta2;
    double eps = (float)h->eps, mu = (float)h->momentum, damp = t == 1 ? 0 : (float)h->dampening;
    double omb1 = (float)(1 - h->beta1), omb2 = (float)(1 - h->beta2); /* 1 - beta, rounded once, as the kernels */
    double bc1 = 1 - pow(h->beta1, (double)t), bc2 = 1 - pow(h->beta2, (double)t);
    for (int i = 0; i < n; i++) {
        double g = grad[i];
        if (kind == REF_MOMENTUM) {
            g += wd * p[i];
            m[i] = mu * m[i] + (1 - damp) * g;
            p[i] -= lr * (h->nesterov ? g + mu * m[i] : m[i]);
            continue;
        }
        if (kind == REF_ADAM) g += wd * p[i];
        else p[i] -= lr * wd * p[i];
        m[i] = b1 * m[i] + omb1 * g;
        v[i] = b2 * v[i] + omb2 * g * g;
        p[i] -= lr * (m[i] / bc1) / (sqrt(v[i] / bc2) + eps);
    }
}

static void run_kernel(ref_kind kind, float *p, const float *g, float *m, float *v, int n, const optim_hparams *h,
                       long t) {
    if (kind == REF_MOMENTUM) optim_momentum_update(p, g, m, (size_t)n, h, t);
    if (kind == REF_ADAM) optim_adam_update(p, g, m, v, (size_t)n, h, t);
    if (kind == REF_ADAMW) optim_adamw_update(p, g, m, v, (size_t)n, h, t);
}

/* `steps` steps of random gradients (every 5th one zero) on 257 parameters; the worst parameter error,
 * measured against |p| + steps*lr (the size of the parameter plus how far it can have moved), must stay
 * within float rounding. The bound 2e-5 also admits (1.0f - beta2) written in float, whose rounding makes
 * each Adam step up to 6.7e-6 longer than the exact one. */
static void compare_with_reference(ref_kind kind, const optim_hparams *h, int steps, uint64_t seed, const char *what) {
    enum { NP = 257 };
    float p[NP], g[NP], m[NP] = {0}, v[NP] = {0};
    double pd[NP], md[NP] = {0}, vd[NP] = {0};
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (int i = 0; i < NP; i++) pd[i] = p[i] = mp_rng_normal(&rng);
    for (long t = 1; t <= steps; t++) {
        for (int i = 0; i < NP; i++) g[i] = i % 5 == 2 ? 0.0f : 0.3f * mp_rng_normal(&rng) + 0.05f;
        run_kernel(kind, p, g, m, v, NP, h, t);
        reference_step(kind, pd, g, md, vd, NP, h, t);
    }
    int worst = 0;
    double worst_err = 0;
    MPT_OBSERVE_NEAR_F64(p, pd, NP, 2e-5, 2e-5 * h->lr * steps);
    for (int i = 0; i < NP; i++) {
        double err = fabs(p[i] - pd[i]) / (fabs(pd[i]) + h->lr * steps);
        if (!(err <= worst_err)) worst_err = err, worst = i;
    }
    MPT_CHECK(worst_err <= 2e-5,
              "%s after %d steps: parameter %d is %.9g, the double-precision reference says %.9g\n"
              "      likely mistake: a formula differs from the one in the comment above the region (check the "
              "order of decay and step, (1 - beta) factors, and where eps goes)",
              what, steps, worst, (double)p[worst], pd[worst]);
}

/* ================================================================ against the reference */

MPT_TEST(adam_matches_double_reference_over_twenty_steps) {
    optim_hparams a = hidden_adam_hparams(1e-2, 0.9, 0.999, 1e-8, 0);
    optim_hparams b = hidden_adam_hparams(3e-3, 0.8, 0.95, 1e-6, 0.05);
    optim_hparams c = hidden_adam_hparams(0.1, 0.5, 0.9, 1e-3, 0.2);
    compare_with_reference(REF_ADAM, &a, 20, 201, "Adam lr 0.01");
    compare_with_reference(REF_ADAM, &b, 20, 202, "Adam betas (0.8, 0.95) eps 1e-6 L2 0.05");
    compare_with_reference(REF_ADAM, &c, 20, 203, "Adam betas (0.5, 0.9) eps 1e-3 L2 0.2");
}

MPT_TEST(adamw_matches_double_reference_over_twenty_steps) {
    optim_hparams a = hidden_adam_hparams(6e-4, 0.9, 0.95, 1e-8, 0.1);
    optim_hparams b = hidden_adam_hparams(0.05, 0.8, 0.99, 1e-6, 0.5);
    optim_hparams c = hidden_adam_hparams(1e-2, 0.9, 0.999, 1e-8, 0);
    compare_with_reference(REF_ADAMW, &a, 20, 301, "AdamW lr 6e-4 betas (0.9, 0.95) wd 0.1");
    compare_with_reference(REF_ADAMW, &b, 20, 302, "AdamW lr 0.05 wd 0.5");
    compare_with_reference(REF_ADAMW, &c, 20, 303, "AdamW without decay");
}

MPT_TEST(momentum_matches_double_reference_all_options) {
    optim_hparams a = hidden_momentum_hparams(0.05, 0.9, 0, false, 0);
    optim_hparams b = hidden_momentum_hparams(0.02, 0.8, 0.3, false, 0.01);
    optim_hparams c = hidden_momentum_hparams(0.03, 0.95, 0, true, 0.05);
    compare_with_reference(REF_MOMENTUM, &a, 20, 401, "momentum 0.9");
    compare_with_reference(REF_MOMENTUM, &b, 20, 402, "momentum 0.8 dampening 0.3 wd 0.01");
    compare_with_reference(REF_MOMENTUM, &c, 20, 403, "Nesterov 0.95 wd 0.05");
}

/* ================================================================ closed forms */

/* A gradient far below eps: g = 1e-9, eps = 1e-8. After the first step's bias correction |m_hat| = sqrt(v_hat)
 * = 1e-9, so the move is lr * 1e-9 / (1e-9 + 1e-8) = lr / 11. With eps inside the square root it would be
 * lr * 1e-9 / sqrt(1e-18 + 1e-8), about lr * 1e-5. */
MPT_TEST(adam_eps_is_added_after_the_square_root) {
    float p[3] = {1.0f, 2.0f, -1.0f}, g[3] = {1e-9f, -1e-9f, 1e-9f}, m[3] = {0}, v[3] = {0};
    float pw[3] = {1.0f, 2.0f, -1.0f}, mw[3] = {0}, vw[3] = {0};
    optim_hparams h = hidden_adam_hparams(0.11, 0.9, 0.999, 1e-8, 0);
    optim_adam_update(p, g, m, v, 3, &h, 1);
    optim_adamw_update(pw, g, mw, vw, 3, &h, 1);
    const double start[3] = {1.0, 2.0, -1.0};
    for (int i = 0; i < 3; i++) {
        double want = start[i] - 0.11 * (g[i] > 0 ? 1 : -1) / 11.0;
        char what[160];
        snprintf(what, sizeof what, "Adam, element %d, gradient 1e-9 with eps 1e-8 (expected move lr/11); the "
                 "denominator is sqrt(v_hat) + eps", i);
        MPT_CHECK_NEAR(want, p[i], 1e-4, 1e-7, what);
        snprintf(what, sizeof what, "AdamW, element %d, gradient 1e-9 with eps 1e-8 (expected move lr/11)", i);
        MPT_CHECK_NEAR(want, pw[i], 1e-4, 1e-7, what);
    }
}

/* A constant gradient: m = (1 - 0.9^t) g and v = (1 - 0.999^t) g^2 exactly, so the bias-corrected m_hat = g
 * and v_hat = g^2 at every step, and every step moves by lr * sign(g): p10 = p0 - 10 * lr * sign(g). */
MPT_TEST(adam_constant_gradient_moves_lr_every_step) {
    enum { NC = 6 };
    float p[NC] = {1, -1, 0.5f, 3, -2, 0.25f}, g[NC] = {0.2f, -0.2f, 5.0f, -1e-3f, 40.0f, 1.0f};
    float m[NC] = {0}, v[NC] = {0}, pw[NC], mw[NC] = {0}, vw[NC] = {0};
    memcpy(pw, p, sizeof p);
    optim_hparams h = hidden_adam_hparams(0.01, 0.9, 0.999, 1e-8, 0);
    for (long t = 1; t <= 10; t++) {
        optim_adam_update(p, g, m, v, NC, &h, t);
        optim_adamw_update(pw, g, mw, vw, NC, &h, t);
    }
    const double start[NC] = {1, -1, 0.5, 3, -2, 0.25};
    for (int i = 0; i < NC; i++) {
        double want = start[i] - 10 * 0.01 * (g[i] > 0 ? 1 : -1);
        MPT_CHECK_NEAR(want, p[i], 0, 2e-6,
                       "Adam after 10 steps of a constant gradient (p0 - 10*lr*sign(g)); each step must use that "
                       "step's step_size and inv_sqrt_bc2");
        MPT_CHECK_NEAR(want, pw[i], 0, 2e-6, "AdamW (no decay) after 10 steps of a constant gradient");
    }
}

/* AdamW decays the parameter as it was before the step: p1 = p0*(1 - lr*wd) - lr*sign(g). Decaying after
 * Adam's step instead gives (p0 - lr*s)(1 - lr*wd), off by lr^2*wd*s = 0.125 with lr = wd = 0.5. */
MPT_TEST(adamw_decay_uses_the_parameter_before_the_step) {
    float p[4] = {1.0f, -2.0f, 0.5f, 4.0f}, g[4] = {1.0f, 1.0f, -3.0f, -0.5f}, m[4] = {0}, v[4] = {0};
    optim_hparams h = hidden_adam_hparams(0.5, 0.9, 0.999, 1e-8, 0.5);
    optim_adamw_update(p, g, m, v, 4, &h, 1);
    const double start[4] = {1.0, -2.0, 0.5, 4.0};
    for (int i = 0; i < 4; i++)
        MPT_CHECK_NEAR(start[i] * 0.75 - 0.5 * (g[i] > 0 ? 1 : -1), p[i], 0, 1e-4,
                       "AdamW with lr = wd = 0.5: p0*(1 - lr*wd) - lr*sign(g); the decay acts on the parameter as it "
                       "was before this step");
}

/* Nesterov with weight decay and g = 0, momentum 0.9, lr 0.1, wd 0.1, p0 = 1:
 *     step 1: g = 0.1;     b = 0.1;                     d = 0.1 + 0.09 = 0.19;         p = 0.981
 *     step 2: g = 0.0981;  b = 0.09 + 0.0981 = 0.1881; d = 0.0981 + 0.16929 = 0.26739; p = 0.954261 */
MPT_TEST(momentum_nesterov_with_weight_decay_closed_form) {
    float p[2] = {1.0f, -1.0f}, g[2] = {0}, buf[2] = {0};
    optim_hparams h = hidden_momentum_hparams(0.1, 0.9, 0, true, 0.1);
    optim_momentum_update(p, g, buf, 2, &h, 1);
    MPT_CHECK_NEAR(0.981, p[0], 1e-6, 0, "Nesterov + decay, step 1 (0.981)");
    optim_momentum_update(p, g, buf, 2, &h, 2);
    MPT_CHECK_NEAR(0.1881, buf[0], 1e-6, 0, "Nesterov + decay, buffer after step 2 (0.1881)");
    MPT_CHECK_NEAR(0.954261, p[0], 1e-6, 0, "Nesterov + decay, step 2 (0.954261)");
    MPT_CHECK_NEAR(-0.954261, p[1], 1e-6, 0, "Nesterov + decay, negative parameter, step 2 (-0.954261)");
}

/* ================================================================ spans */

MPT_TEST(adam_and_adamw_stay_put_on_zero_gradients_without_decay) {
    enum { NZ = 33 };
    float p[NZ], p0[NZ], g[NZ] = {0}, m[NZ] = {0}, v[NZ] = {0};
    for (int i = 0; i < NZ; i++) p[i] = p0[i] = (float)(i - 16) * 0.37f;
    optim_hparams h = hidden_adam_hparams(0.01, 0.9, 0.999, 1e-8, 0);
    for (long t = 1; t <= 3; t++) optim_adam_update(p, g, m, v, NZ, &h, t);
    for (long t = 4; t <= 6; t++) optim_adamw_update(p, g, m, v, NZ, &h, t);
    MPT_OBSERVE_NEAR_F32(p, p0, NZ, 0, 0);
    MPT_OBSERVE_NEAR_F32(m, m, NZ, 0, 0);
    MPT_OBSERVE_NEAR_F32(v, v, NZ, 0, 0);
    for (int i = 0; i < NZ; i++) {
        MPT_CHECK(p[i] == p0[i], "element %d moved from %g to %g with zero gradients and no decay (0/(0 + eps) is 0)",
                  i, (double)p0[i], (double)p[i]);
        MPT_CHECK(m[i] == 0 && v[i] == 0, "element %d: m, v = %g, %g with zero gradients", i, (double)m[i],
                  (double)v[i]);
    }
}

/* ZeRO gives each rank a slice of the flat parameters and of the optimizer state. Updating [0, 1000) at
 * once and [0, 371) and [371, 1000) separately must give the same bits: each element's update depends on
 * that element alone. */
MPT_TEST(optimizer_shard_updates_equal_whole_update) {
    enum { NS = 1000, CUT = 371 };
    static float pw[NS], ps[NS], g[NS], mw[NS], vw[NS], ms[NS], vs[NS];
    for (int kind = REF_MOMENTUM; kind <= REF_ADAMW; kind++) {
        for (int i = 0; i < NS; i++) {
            pw[i] = ps[i] = sinf((float)i);
            mw[i] = vw[i] = ms[i] = vs[i] = 0;
        }
        optim_hparams h = kind == REF_MOMENTUM ? hidden_momentum_hparams(0.05, 0.9, 0.1, false, 0.01)
                                               : hidden_adam_hparams(1e-2, 0.9, 0.99, 1e-8, 0.1);
        for (long t = 1; t <= 3; t++) {
            for (int i = 0; i < NS; i++) g[i] = cosf((float)(i * (int)t));
            run_kernel((ref_kind)kind, pw, g, mw, vw, NS, &h, t);
            run_kernel((ref_kind)kind, ps, g, ms, vs, CUT, &h, t);
            run_kernel((ref_kind)kind, ps + CUT, g + CUT, ms + CUT, vs + CUT, NS - CUT, &h, t);
        }
        const char *name = kind == REF_MOMENTUM ? "momentum" : kind == REF_ADAM ? "Adam" : "AdamW";
        MPT_OBSERVE_NEAR_F32(ps, pw, NS, 1e-6, 1e-6);
        MPT_CHECK(memcmp(pw, ps, sizeof pw) == 0 && memcmp(mw, ms, sizeof mw) == 0,
                  "%s: updating two shards separately gave other values than updating the whole span; each "
                  "element's update may use only element i of param, grad, m and v", name);
    }
}

/* Spans of 0, 1 and 3 elements inside a larger array: nothing outside [0, n) may change, and n = 0 is a
 * valid (empty) span. */
MPT_TEST(optimizers_handle_tiny_spans) {
    enum { TOTAL = 16, AT = 5 };
    const int sizes[3] = {0, 1, 3};
    for (int kind = REF_MOMENTUM; kind <= REF_ADAMW; kind++)
        for (int s = 0; s < 3; s++) {
            float p[TOTAL], g[TOTAL], m[TOTAL], v[TOTAL];
            for (int i = 0; i < TOTAL; i++) p[i] = 1.0f, g[i] = 0.5f, m[i] = v[i] = 7.0f;
            for (int i = AT; i < AT + sizes[s]; i++) m[i] = v[i] = 0;
            optim_hparams h = kind == REF_MOMENTUM ? hidden_momentum_hparams(0.1, 0.9, 0, false, 0)
                                                   : hidden_adam_hparams(0.1, 0.9, 0.999, 1e-8, 0);
            run_kernel((ref_kind)kind, p + AT, g + AT, m + AT, v + AT, sizes[s], &h, 1);
            const char *name = kind == REF_MOMENTUM ? "momentum" : kind == REF_ADAM ? "Adam" : "AdamW";
            MPT_OBSERVE_NEAR_F32(p, p, TOTAL, 1e-6, 1e-6);
            for (int i = 0; i < TOTAL; i++) {
                bool inside = i >= AT && i < AT + sizes[s];
                /* momentum: 1 - lr*g = 1 - 0.1*0.5; Adam's first step: 1 - lr*sign(g) = 1 - 0.1 */
                float want = kind == REF_MOMENTUM ? 0.95f : 0.9f;
                if (inside) {
                    MPT_CHECK(fabsf(p[i] - want) < 1e-6f, "%s, span of %d: element %d is %g, expected %g", name,
                              sizes[s], i - AT, (double)p[i], (double)want);
                } else {
                    MPT_CHECK(p[i] == 1.0f && m[i] == 7.0f && v[i] == 7.0f,
                              "%s, span of %d: wrote outside the span (index %d relative to its start)", name, sizes[s],
                              i - AT);
                }
            }
        }
}
