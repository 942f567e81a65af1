/* test_amp_step.c: Criterion tests of the AMP step put together from the pieces (model, scaler, clip, optimizer) on a
 * real tiny GPT-2: a power-of-two loss scale unscales to the unscaled gradients exactly, and a skipped step leaves
 * the weights, Adam's moments and the optimizer's step count untouched, as torch.amp.GradScaler.step does. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp/scaler.h"
#include "base/rng.h"
#include "train/step.h"

enum { B = 2, T = 8, V = 64 };

static model *tiny_gpt2(void) {
    model_config c = {.arch = MODEL_GPT2, .V = V, .maxT = T, .L = 2, .C = 16, .NH = 2};
    model_config_complete(&c);
    c.tied = true;
    model *m = model_create(&c);
    model_init(m, 3);
    return m;
}

static void forward_backward(model *m, float loss_scale, uint64_t seed) {
    int in[B * T], tg[B * T];
    mp_rng r;
    mp_rng_seed(&r, seed);
    for (int i = 0; i < B * T; i++) {
        in[i] = (int)(mp_rng_u32(&r) % V);
        tg[i] = (int)(mp_rng_u32(&r) % V);
    }
    model_zero_grad(m);
    model_forward(m, in, tg, B, T);
    model_backward(m, loss_scale);
}

/* Backward is linear in the loss, and multiplying by 2^16 is exact in fp32 (nothing here is near fp32's
 * limits), so the scaled gradients are exactly 2^16 times the plain ones and the unscale gives them back. */
Test(amp_step, power_of_two_scale_unscales_to_the_same_gradients) {
    model *m = tiny_gpt2();
    size_t n = model_num_params(m);
    float *plain = malloc(n * sizeof *plain);
    forward_backward(m, 1.0f, 21);
    memcpy(plain, model_grads(m), n * sizeof *plain);

    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    amp_scaler s;
    amp_scaler_init(&s, &c);
    forward_backward(m, amp_scaler_scale(&s), 21);
    clip_span all = {model_grads(m), n};
    cr_assert_not(amp_scaler_unscale(&s, &all, 1));
    size_t differ = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        if (model_grads(m)[i] != plain[i]) {
            differ++;
            double rel = fabs((double)model_grads(m)[i] - plain[i]) / fmax(fabs((double)plain[i]), 1e-30);
            worst = fmax(worst, rel);
        }
    cr_expect_eq(differ, 0, "%zu of %zu gradients differ after scale and unscale (worst relative %g)", differ, n, worst);
    amp_scaler_update(&s, false);
    free(plain);
    model_free(m);
}

/* The step as the trainer will run it: unscale; if found_inf, skip the optimizer entirely. */
static bool amp_step(train_step *ts, amp_scaler *s, double lr, bool inject_inf) {
    model *m = ts->m;
    forward_backward(m, amp_scaler_scale(s), 33 + (uint64_t)ts->state.step);
    if (inject_inf) model_grads(m)[model_num_params(m) / 2] = INFINITY;
    clip_span all = {model_grads(m), model_num_params(m)};
    bool found_inf = amp_scaler_unscale(s, &all, 1);
    if (!found_inf) {
        clip_grad_norm(ts->clips, ts->nspans, 1.0);
        optim_step(&ts->opt, &ts->state, ts->spans, ts->nspans, lr);
    }
    amp_update u = amp_scaler_update(s, found_inf);
    cr_assert_eq(u.skipped, found_inf);
    return found_inf;
}

Test(amp_step, skipped_step_leaves_weights_moments_and_step_count) {
    model *m = tiny_gpt2();
    size_t n = model_num_params(m);
    optim_config opt = optim_config_default(OPTIM_ADAMW);
    train_step ts;
    train_step_init(&ts, m, &opt, 1.0);
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    amp_scaler s;
    amp_scaler_init(&s, &c);
    for (int i = 0; i < 3; i++) cr_assert_not(amp_step(&ts, &s, 1e-3, false));
    cr_assert_eq(ts.state.step, 3);

    float *p = malloc(n * sizeof *p), *mm = malloc(n * sizeof *mm), *vv = malloc(n * sizeof *vv);
    memcpy(p, model_params(m), n * sizeof *p);
    memcpy(mm, ts.state.m, n * sizeof *mm);
    memcpy(vv, ts.state.v, n * sizeof *vv);
    cr_assert(amp_step(&ts, &s, 1e-3, true), "an inf in the gradients skips the step");
    cr_expect_eq(memcmp(p, model_params(m), n * sizeof *p), 0, "weights untouched");
    cr_expect_eq(memcmp(mm, ts.state.m, n * sizeof *mm), 0, "Adam's first moment untouched");
    cr_expect_eq(memcmp(vv, ts.state.v, n * sizeof *vv), 0, "Adam's second moment untouched");
    cr_expect_eq(ts.state.step, 3, "the optimizer's step count t does not advance on a skipped step");
    cr_expect_eq(s.scale, 32768.0f, "the scale backed off");
    cr_expect_eq(s.skipped, 1);
    cr_assert_not(amp_step(&ts, &s, 1e-3, false));
    cr_expect_eq(ts.state.step, 4, "the next clean step is t = 4");
    free(p);
    free(mm);
    free(vv);
    train_step_free(&ts);
    model_free(m);
}
