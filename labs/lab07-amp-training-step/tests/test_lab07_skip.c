/* test_lab07_skip.c: lab 07 visible tests, part B: a step whose gradients are not finite is skipped (amp_finish in
 * core/train/step.c): the weights, Adam's moments and the optimizer's step count stay exactly as they were, under
 * fp16 with a dynamic scaler and under bf16 with no scaler at all. */
#include "lab07_util.h"

/* Two clean steps (so Adam's m and v are not zero), then an inf put into the gradients at the third step
 * (ts.inject_inf_at: the overflow lands in the scaled gradients before your region runs), then a clean one. */
MPT_TEST(skipped_step_leaves_weights_and_adam_untouched) {
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_PYTORCH, 4096, 0);
    lab07_trainer t;
    lab07_open(&t, AMP_RECIPE_FP16, &sc, OPTIM_ADAMW, 1.0, 1);
    t.ts.inject_inf_at = 2;
    for (int step = 0; step < 2; step++) MPT_REQUIRE(!lab07_step(&t, step, 1e-3).skipped, "step %d should be clean", step);
    MPT_REQUIRE(t.ts.state.step == 2, "after two clean steps the optimizer's step count should be 2, got %ld",
                t.ts.state.step);
    lab07_snapshot before = lab07_take(&t);
    train_step_result r = lab07_step(&t, 2, 1e-3);
    MPT_CHECK(r.skipped, "step 3 has an inf in its gradients: it must be skipped (result.skipped), got skipped=no\n"
              "      likely mistake: step only when found_inf (from amp_scaler_unscale, agreed) is false, and take the "
              "skip decision from amp_scaler_update's result");
    MPT_CHECK(r.found_inf_local, "result.found_inf_local should be true: it is what amp_scaler_unscale returned");
    MPT_CHECK(isnan(r.grad_norm), "result.grad_norm of the skipped step\n      expected: NAN (a skipped step has no norm)\n"
              "      got:      %g\n      likely mistake: set r->grad_norm = NAN first and take the norm (and clip) only "
              "when found_inf is false", r.grad_norm);
    LAB07_CHECK_UNTOUCHED(&t, &before, "the skipped step 3");
    MPT_CHECK(r.update.next_scale == 2048.0f, "after the overflow at 4096 the next scale should be 2048, got %g",
              (double)r.update.next_scale);
    lab07_drop(&before);
    /* Training goes on: the next clean step updates again, and t counts it as Adam's third step. */
    before = lab07_take(&t);
    r = lab07_step(&t, 3, 1e-3);
    MPT_CHECK(!r.skipped, "step 4 is clean and must not be skipped");
    MPT_CHECK(lab07_first_difference(before.params, model_params(t.m), before.n) >= 0,
              "the clean step 4 after the skip should change the weights");
    MPT_CHECK_EQ_I64(3, t.ts.state.step, "optimizer steps taken after 3 clean and 1 skipped step");
    lab07_drop(&before);
    lab07_close(&t);
}

/* bf16 needs no loss scale (scaler "none", S = 1), but a NaN must still never reach the weights: the inf/NaN
 * check and the skip run for every recipe (the bf16 failure of Megatron-LLM#33 was nobody looking). A NaN in one
 * layer-norm gain makes the loss and every gradient below it NaN. */
MPT_TEST(bf16_without_a_scaler_still_skips_nan) {
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_NONE, 0, 0);
    lab07_trainer t;
    lab07_open(&t, AMP_RECIPE_BF16, &sc, OPTIM_ADAMW, 1.0, 1);
    MPT_REQUIRE(!lab07_step(&t, 0, 1e-3).skipped, "the first bf16 step is clean and must not be skipped");
    const model_tensor *gain = model_tensor_find(t.m, "h.1.ln1w");
    MPT_REQUIRE(gain, "the test model has a tensor h.1.ln1w");
    model_params(t.m)[gain->offset + 3] = NAN;
    lab07_snapshot before = lab07_take(&t);
    train_step_result r = lab07_step(&t, 1, 1e-3);
    MPT_CHECK(r.skipped, "bf16 with no loss scaler: the gradients are NaN, so the step must be skipped; got "
              "skipped=no\n      likely mistake: the inf/NaN check and the skip are for every recipe, not only when "
              "there is a loss scale to lower (the 'none' scaler's update still skips on found_inf)");
    LAB07_CHECK_UNTOUCHED(&t, &before, "the bf16 step with NaN gradients");
    MPT_CHECK(r.update.status == AMP_SCALER_SKIPPED_FIXED && r.update.next_scale == 1.0f,
              "the 'none' scaler reports the skip as skipped_fixed and keeps the scale 1; got status %s, next scale %g",
              amp_scaler_status_name(r.update.status), (double)r.update.next_scale);
    lab07_drop(&before);
    lab07_close(&t);
}
