/* test_loss_scale_optimizer.c: Criterion tests of Keras's LossScaleOptimizer (amp/loss_scale_optimizer.h) with the
 * whole core: the Keras call order on the tiny GPT in fp16 with the dynamic keras scale and AdamW gives, step for
 * step, the losses, the skips and bit for bit the weights of train_step's AMP step. (The lab 08 tests use only SGD
 * and a static scale, so that the lab is graded without labs 02 and 05.) */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp/loss_scale_optimizer.h"
#include "model/model.h"
#include "model/model_lowp.h"
#include "train/step.h"

enum { B = 4, T = 16, V = 64 };

static model *tiny_fp16_gpt(void) {
    model_config cfg = {.arch = MODEL_GPT2, .V = V, .maxT = T, .L = 2, .C = 32, .NH = 2, .tied = true};
    model_config_complete(&cfg);
    model *m = model_create(&cfg);
    model_init(m, 8);
    model_precision p = {.compute = MODEL_COMPUTE_FP16};
    model_set_precision(m, &p);
    return m;
}

static void batch(int k, int *inputs, int *targets) {
    for (int i = 0; i < B * T; i++) {
        inputs[i] = (int)((7u * (unsigned)i + 13u * (unsigned)k * (unsigned)k + 3u) % V);
        targets[i] = (int)((5u * (unsigned)i + 11u * (unsigned)k + 1u) % V);
    }
}

/* 16 steps from 2^24 (too large: the first steps overflow) with dynamic_growth_steps 4, so the scale also probes
 * upward again and overflows later. */
Test(loss_scale_optimizer, keras_order_equals_train_step_on_the_tiny_gpt) {
    amp_scaler_config scaler = amp_scaler_defaults(AMP_SCALER_KERAS);
    scaler.init_scale = 16777216.0;
    scaler.growth_interval = 4;
    optim_config adamw = optim_config_default(OPTIM_ADAMW);
    optim_config_set(&adamw, "weight_decay", 0.1);
    const double lr = 3e-3;

    model *ref = tiny_fp16_gpt();
    train_step ts;
    train_step_init(&ts, ref, &adamw, 0.0);
    train_step_set_amp(&ts, AMP_RECIPE_FP16, &scaler, false, 1);

    model *m = tiny_fp16_gpt();
    int n;
    const model_tensor *t = model_tensors(m, &n);
    optim_span *pairs = calloc((size_t)n, sizeof *pairs);
    clip_span *grads = calloc((size_t)n, sizeof *grads);
    cr_assert(pairs && grads);
    for (int i = 0; i < n; i++) {
        pairs[i] = (optim_span){model_params(m) + t[i].offset, model_grads(m) + t[i].offset, t[i].size, t[i].decay};
        grads[i] = (clip_span){model_grads(m) + t[i].offset, t[i].size};
    }
    amp_loss_scale_optimizer opt;
    amp_lso_init(&opt, &adamw, model_num_params(m), &scaler);

    int inputs[B * T], targets[B * T], skipped = 0;
    for (int k = 0; k < 16; k++) {
        batch(k, inputs, targets);
        train_step_result r = train_step_run(&ts, inputs, targets, B, T, 1, lr);
        model_zero_grad(m);
        float loss = model_forward(m, inputs, targets, B, T);
        model_backward(m, amp_lso_get_scaled_loss(&opt, 1.0f));
        amp_lso_get_unscaled_gradients(&opt, grads, n);
        amp_update u = amp_lso_apply_gradients(&opt, pairs, n, lr);
        cr_expect(memcmp(&r.loss, &loss, sizeof loss) == 0, "step %d: loss %.9g vs %.9g", k + 1, (double)r.loss,
                  (double)loss);
        cr_expect(r.skipped == u.skipped && r.update.scale == u.scale && r.update.next_scale == u.next_scale,
                  "step %d: train_step skipped=%d at %g -> %g, wrapper skipped=%d at %g -> %g", k + 1, r.skipped,
                  (double)r.update.scale, (double)r.update.next_scale, u.skipped, (double)u.scale,
                  (double)u.next_scale);
        skipped += u.skipped;
    }
    cr_expect(skipped >= 2 && skipped <= 12, "%d of 16 skipped: the test needs both kinds of step", skipped);
    cr_expect(memcmp(model_params(ref), model_params(m), model_num_params(m) * sizeof(float)) == 0,
              "the weights differ after 16 steps");
    cr_expect_eq(ts.state.step, opt.state.step);
    amp_lso_free(&opt);
    free(pairs);
    free(grads);
    model_free(m);
    train_step_free(&ts);
    model_free(ref);
}

/* Keras's defaults: 2^15, doubling after 2000 clean steps, halving on an overflow. */
Test(loss_scale_optimizer, keras_defaults_and_dynamic_rule) {
    float p[2] = {1, 2}, g[2] = {0.5f, 0.25f};
    optim_span pairs[1] = {{p, g, 2, false}};
    optim_config sgd = optim_config_default(OPTIM_SGD);
    amp_loss_scale_optimizer opt;
    amp_lso_init(&opt, &sgd, 2, NULL);
    cr_expect_eq(amp_lso_loss_scale(&opt), 32768.0f);
    cr_expect_eq(amp_lso_get_scaled_loss(&opt, 0.5f), 16384.0f);
    for (int k = 0; k < 1999; k++) cr_assert(!amp_lso_apply_gradients(&opt, pairs, 1, 0).skipped);
    cr_expect_eq(amp_lso_loss_scale(&opt), 32768.0f);
    amp_update u = amp_lso_apply_gradients(&opt, pairs, 1, 0);
    cr_expect(!u.skipped && u.next_scale == 65536.0f, "growth at the 2000th clean step");
    g[1] = NAN;
    u = amp_lso_apply_gradients(&opt, pairs, 1, 0);
    cr_expect(u.skipped && u.next_scale == 32768.0f);
    cr_expect_eq(opt.state.step, 2000);
    /* get_unscaled_gradients multiplies by 1/S. */
    float h[3] = {32768.0f, -3.0f, 1.0f};
    clip_span span = {h, 3};
    amp_lso_get_unscaled_gradients(&opt, &span, 1);
    cr_expect(h[0] == 1.0f && h[1] == -3.0f / 32768.0f && h[2] == 1.0f / 32768.0f);
    amp_lso_free(&opt);
}
