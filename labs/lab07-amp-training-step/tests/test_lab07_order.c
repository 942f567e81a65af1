/* test_lab07_order.c: lab 07 visible tests, part A: the order of the AMP step (amp_finish in core/train/step.c):
 * the gradient norm and the clipping see the unscaled gradients, and accumulated gradients are unscaled once. */
#include "lab07_util.h"

#include <stdio.h>

/* fp16 AMP at S = 2^12 against the same model trained in fp32, step by step: the reported grad_norm is the norm of
 * the true gradients (fp32's, up to fp16 rounding in backward: measured 2e-4 apart), not S times it. */
MPT_TEST(clip_sees_the_unscaled_gradients) {
    const double S = 4096;
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_PYTORCH, S, 0);
    lab07_trainer fp32, amp;
    lab07_open(&fp32, AMP_RECIPE_FP32, NULL, OPTIM_ADAMW, 0, 1);
    lab07_open(&amp, AMP_RECIPE_FP16, &sc, OPTIM_ADAMW, 0, 1);
    for (int step = 0; step < 3; step++) {
        train_step_result want = lab07_step(&fp32, step, 1e-3), got = lab07_step(&amp, step, 1e-3);
        MPT_REQUIRE(!got.skipped, "step %d at scale %g should be clean (this model overflows only above 2^21)", step, S);
        if (fabs(got.grad_norm - want.grad_norm) > 2e-3 * want.grad_norm) {
            mpt_fail(__FILE__, __LINE__, "step %d: grad_norm of the fp16 AMP step at scale %g\n"
                     "      expected: %.6g (the fp32 run's norm, within 0.2%%)\n      got:      %.6g (%.4g times it)\n"
                     "      likely mistake: %s", step, S, want.grad_norm, got.grad_norm, got.grad_norm / want.grad_norm,
                     fabs(got.grad_norm / want.grad_norm - S) < 0.01 * S
                         ? "the norm was taken before amp_scaler_unscale: clip (clip_step_norm) after unscaling, so "
                           "max_norm means the same whatever S is"
                         : "the gradients the norm saw were not the unscaled ones (unscaled twice, or not at all?)");
            break;
        }
    }
    lab07_close(&fp32);
    lab07_close(&amp);
}

/* Clipping to max_norm 0.5 (the true norm is about 1.4): after the step the gradient buffer holds the unscaled
 * gradients scaled down to norm 0.5, pointing the way the true gradients point. */
MPT_TEST(clipping_limits_the_true_gradients) {
    const double S = 1024, max_norm = 0.5;
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_PYTORCH, S, 0);
    lab07_trainer amp;
    lab07_open(&amp, AMP_RECIPE_FP16, &sc, OPTIM_ADAMW, max_norm, 1);
    const size_t n = model_num_params(amp.m);
    float *truth = malloc(n * sizeof *truth);
    MPT_REQUIRE(truth, "out of memory");
    double true_norm = lab07_replay_unscaled(&amp, 0, (float)S, truth);
    MPT_REQUIRE(true_norm > 2 * max_norm, "test data: the true norm %g should be well above max_norm", true_norm);
    train_step_result r = lab07_step(&amp, 0, 1e-3);
    MPT_REQUIRE(!r.skipped, "the step at scale %g should be clean", S);
    double after = lab07_grad_norm(&amp);
    MPT_CHECK(fabs(after - max_norm) <= 1e-4 * max_norm,
              "after the step the gradients' norm should be max_norm = %g (clipped from the true norm %.6g); got %.6g\n"
              "      likely mistake: %s", max_norm, true_norm, after,
              after < max_norm / 100 ? "clipped while still scaled: the clip scaled S*g down to norm 0.5, and the "
                                       "unscale then divided by S again"
              : after > 0.99 * true_norm ? "no clipping: call clip_step_norm (it clips to s->grad_clip) on found_inf "
                                           "== false, after the unscale"
                                         : "the clip saw gradients that were not the unscaled ones");
    MPT_CHECK(fabs(r.grad_norm - true_norm) <= 1e-6 * true_norm, "result.grad_norm should be the norm before clipping "
              "of the unscaled gradients, %.9g; got %.9g", true_norm, r.grad_norm);
    MPT_CHECK(r.clipped, "the result should say clipped (norm %.4g > max_norm %g)", r.grad_norm, max_norm);
    double coef = max_norm / (true_norm + 1e-6), gmax;
    for (size_t i = 0; i < n; i++) truth[i] = (float)(truth[i] * coef);
    double diff = lab07_max_diff(model_grads(amp.m), truth, n, &gmax);
    MPT_CHECK(diff <= 1e-4 * gmax, "the clipped gradients should be the unscaled ones times %.6g: they differ by up "
              "to %g (largest %g)", coef, diff, gmax);
    free(truth);
    lab07_close(&amp);
}

/* Two micro-batches: backward adds S/2 times each micro-batch's gradient into the buffer, so the buffer holds
 * S times their mean; the step divides by S once. The result is the mean gradient, the fp32 run's accumulated
 * gradient (within fp16 rounding), and exactly the replay's (accumulate scaled, then multiply by 1/S). */
MPT_TEST(accumulation_unscales_the_sum_once) {
    const double S = 8192;
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_PYTORCH, S, 0);
    lab07_trainer fp32, amp;
    lab07_open(&fp32, AMP_RECIPE_FP32, NULL, OPTIM_ADAMW, 0, 2);
    lab07_open(&amp, AMP_RECIPE_FP16, &sc, OPTIM_ADAMW, 0, 2);
    const size_t n = model_num_params(amp.m);
    float *replay = malloc(n * sizeof *replay);
    MPT_REQUIRE(replay, "out of memory");
    lab07_replay_unscaled(&amp, 0, (float)S, replay);
    lab07_step(&fp32, 0, 1e-3);
    train_step_result r = lab07_step(&amp, 0, 1e-3);
    MPT_REQUIRE(!r.skipped, "the step at scale %g should be clean", S);
    double gmax, d32 = lab07_max_diff(model_grads(amp.m), model_grads(fp32.m), n, &gmax);
    double ratio = lab07_grad_norm(&amp) / lab07_grad_norm(&fp32);
    MPT_CHECK(d32 <= 0.02 * gmax,
              "with 2 accumulated micro-batches the unscaled gradients should equal the fp32 run's accumulated "
              "gradients (within fp16 rounding, 2%% of the largest): they differ by up to %g (largest %g); norm ratio "
              "AMP/fp32 = %.6g\n      likely mistake: %s", d32, gmax, ratio,
              fabs(ratio - 0.5) < 0.01 ? "divided by the accumulation count again: backward already scaled each "
                                         "micro-batch's loss by S/accum"
              : fabs(ratio - 2) < 0.02 ? "multiplied by the accumulation count: the buffer already holds the mean"
              : ratio > 100 ? "not unscaled: amp_scaler_unscale divides the accumulated sum by S, once per step"
                            : "unscale once, after all micro-batches, and before the clip");
    double dr = lab07_max_diff(model_grads(amp.m), replay, n, &gmax);
    MPT_CHECK(dr <= 1e-6 * gmax, "the gradients after the step should be the accumulated scaled gradients times 1/S "
              "(what one amp_scaler_unscale does): they differ from that by up to %g (largest %g)", dr, gmax);
    free(replay);
    lab07_close(&fp32);
    lab07_close(&amp);
}
