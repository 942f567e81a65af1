/* test_lab07_scaler.c: lab 07 visible tests, part C: the loss scale through real steps (amp_finish in
 * core/train/step.c): every step updates the scaler once, with the step's own found_inf, so the scale backs off
 * and grows by PyTorch's rules; a scale far too high comes down through skipped steps and training goes on. */
#include "lab07_util.h"

#include <stdio.h>

/* PyTorch's GradScaler rule, written out here (the tests' own copy): the scale after a step, and the tracker. */
static float pytorch_next(float scale, int *tracker, bool found_inf, int growth_interval) {
    if (found_inf) {
        *tracker = 0;
        return scale * 0.5f;
    }
    if (++*tracker == growth_interval) {
        *tracker = 0;
        return scale * 2.0f;
    }
    return scale;
}

/* From S = 256 with growth_interval 2, overflows forced at chosen steps (ts.inject_inf_at, set before each):
 *   pattern  C C C O C C O O C C
 *   scale    256 256 512 512 256 256 512 256 128 128    (the scale each step runs at)
 * Each step must skip exactly when it overflowed, and leave the scale PyTorch's rule gives. */
MPT_TEST(scale_backs_off_and_grows_along_the_steps) {
    static const char pattern[] = "CCCOCCOOCC";
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_PYTORCH, 256, 2);
    lab07_trainer t;
    lab07_open(&t, AMP_RECIPE_FP16, &sc, OPTIM_ADAMW, 1.0, 1);
    float scale = 256;
    int tracker = 0;
    for (int step = 0; pattern[step]; step++) {
        bool overflow = pattern[step] == 'O';
        t.ts.inject_inf_at = overflow ? step : -1;
        train_step_result r = lab07_step(&t, step, 1e-3);
        float want_next = pytorch_next(scale, &tracker, overflow, 2);
        if (r.skipped != overflow || r.update.scale != scale || r.update.next_scale != want_next) {
            mpt_fail(__FILE__, __LINE__, "step %d of \"%s\" (%s)\n"
                     "      expected: run at scale %g, skipped=%s, next scale %g\n"
                     "      got:      run at scale %g, skipped=%s, next scale %g\n"
                     "      likely mistake: call amp_scaler_update exactly once per step, after the step or skip, with "
                     "the step's found_inf; an update before the unscale, or two, moves the scale at the wrong time",
                     step + 1, pattern, overflow ? "overflow" : "clean", (double)scale, overflow ? "yes" : "no",
                     (double)want_next, (double)r.update.scale, r.skipped ? "yes" : "no", (double)r.update.next_scale);
            break;
        }
        scale = want_next;
    }
    MPT_CHECK_EQ_I64((long)sizeof pattern - 1, t.ts.scaler.iter, "scaler updates after the steps (one per step)");
    MPT_CHECK_EQ_I64(3, t.ts.scaler.skipped, "skipped steps the scaler counted");
    MPT_CHECK_EQ_I64(7, t.ts.state.step, "optimizer steps taken (the clean ones)");
    lab07_close(&t);
}

/* init_scale 2^24: this model's scaled gradients overflow fp16 above about 2^21 (the loss gradient S/(B*T) alone
 * is 2^18 at S = 2^24). Whether a step overflows is decided here by replaying its backward at its scale. The
 * scale must halve on each overflowing step, the skipped steps change nothing, and once it fits the steps are
 * taken. */
MPT_TEST(too_high_a_scale_comes_down_and_training_goes_on) {
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_PYTORCH, 16777216.0, 1000);
    lab07_trainer t;
    lab07_open(&t, AMP_RECIPE_FP16, &sc, OPTIM_ADAMW, 1.0, 1);
    float *scratch = malloc(model_num_params(t.m) * sizeof *scratch);
    MPT_REQUIRE(scratch, "out of memory");
    float scale = 16777216.0f;
    int skipped = 0, taken = 0;
    for (int step = 0; step < 8; step++) {
        bool overflow = !isfinite(lab07_replay_unscaled(&t, step, scale, scratch));
        lab07_snapshot before = lab07_take(&t);
        train_step_result r = lab07_step(&t, step, 1e-3);
        char what[96];
        snprintf(what, sizeof what, "step %d at scale %g (overflowing)", step + 1, (double)scale);
        if (r.skipped != overflow || r.update.scale != scale) {
            mpt_fail(__FILE__, __LINE__, "step %d\n      expected: run at scale %g, skipped=%s (a replay of its "
                     "backward at that scale %s)\n      got:      run at scale %g, skipped=%s", step + 1, (double)scale,
                     overflow ? "yes" : "no", overflow ? "overflows" : "is finite", (double)r.update.scale,
                     r.skipped ? "yes" : "no");
            lab07_drop(&before);
            break;
        }
        if (overflow) {
            skipped++;
            if (!LAB07_CHECK_UNTOUCHED(&t, &before, what)) {
                lab07_drop(&before);
                break;
            }
            scale *= 0.5f;
        } else {
            taken++;
            MPT_CHECK(isfinite(r.grad_norm) && r.grad_norm < 100, "step %d is clean: grad_norm should be the true "
                      "norm (about 1.4), got %g", step + 1, r.grad_norm);
        }
        lab07_drop(&before);
    }
    MPT_CHECK(skipped >= 2 && taken >= 3, "expected the first steps to overflow and later ones to be taken: %d skipped, "
              "%d taken", skipped, taken);
    MPT_CHECK_EQ_I64(taken, t.ts.state.step, "optimizer steps taken");
    free(scratch);
    lab07_close(&t);
}
