/* test_lab07_hidden.c: lab 07 hidden tests: the AMP step (amp_finish in core/train/step.c) at scales that are not
 * powers of two, an SGD update made from the clipped true gradients, a skip that is as if the step never happened,
 * fp16-o2's master copy, the static scaler, many steps with accumulation, and accumulation of three with clipping. */
#include "../../../labs/lab07-amp-training-step/tests/lab07_util.h"

#include <stdio.h>

/* ================================================================ A. the order */

/* The reported norm is the norm of g * (1/S) for any S, also one that is not a power of two (where the unscale
 * rounds): the replay does exactly what the step should, so the two agree to the last digits. */
MPT_TEST(grad_norm_is_the_replayed_unscaled_norm_at_any_scale) {
    static const double scales[] = {1, 3000, 65536, 1e6};
    for (int k = 0; k < 4; k++) {
        amp_scaler_config sc = lab07_scaler(AMP_SCALER_STATIC, scales[k], 0);
        lab07_trainer t;
        lab07_open(&t, AMP_RECIPE_FP16, &sc, OPTIM_ADAMW, 0.8, 1);
        float *g = malloc(model_num_params(t.m) * sizeof *g);
        MPT_REQUIRE(g, "out of memory");
        for (int step = 0; step < 2; step++) {
            double want = lab07_replay_unscaled(&t, step, (float)scales[k], g);
            train_step_result r = lab07_step(&t, step, 1e-3);
            MPT_REQUIRE(!r.skipped, "scale %g, step %d should be clean", scales[k], step);
            MPT_CHECK(fabs(r.grad_norm - want) <= 1e-7 * want, "scale %g, step %d: grad_norm %.9g, expected %.9g (the norm "
                      "of the accumulated gradients times 1/S, before clipping)", scales[k], step, r.grad_norm, want);
        }
        free(g);
        lab07_close(&t);
    }
}

/* Plain SGD moves each weight by lr * g: the update itself shows which gradients the optimizer saw. With clipping
 * to 0.25 they must be the unscaled gradients times 0.25 / (norm + 1e-6) (torch.nn.utils.clip_grad_norm_). */
MPT_TEST(sgd_update_is_made_of_the_clipped_true_gradients) {
    const double S = 32768, max_norm = 0.25, lr = 0.1;
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_PYTORCH, S, 0);
    lab07_trainer t;
    lab07_open(&t, AMP_RECIPE_FP16, &sc, OPTIM_SGD, max_norm, 1);
    const size_t n = model_num_params(t.m);
    float *g = malloc(n * sizeof *g), *want = malloc(n * sizeof *want);
    MPT_REQUIRE(g && want, "out of memory");
    double norm = lab07_replay_unscaled(&t, 0, (float)S, g);
    float coef = (float)(max_norm / (norm + 1e-6));
    for (size_t i = 0; i < n; i++) want[i] = model_params(t.m)[i] - (float)lr * (g[i] * coef);
    train_step_result r = lab07_step(&t, 0, lr);
    MPT_REQUIRE(!r.skipped, "the step should be clean");
    double gmax, d = lab07_max_diff(model_params(t.m), want, n, &gmax);
    double step_size = lr * max_norm;
    MPT_CHECK(d <= 1e-3 * step_size, "after one SGD step (lr %g) the weights differ from w - lr * clip(g/S) by up to %g "
              "(the whole update is about %g in norm)\n      likely mistake: %s", lr, d, step_size,
              "the optimizer must see the unscaled gradients, clipped to max_norm: unscale, clip, then optim_step");
    free(g);
    free(want);
    lab07_close(&t);
}

/* Accumulation of three micro-batches with clipping: the norm is of the unscaled mean, and the buffer ends as that
 * mean clipped to 0.3. */
MPT_TEST(accumulation_of_three_with_clipping) {
    const double S = 2048, max_norm = 0.3;
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_PYTORCH, S, 0);
    lab07_trainer t;
    lab07_open(&t, AMP_RECIPE_FP16, &sc, OPTIM_ADAMW, max_norm, 3);
    const size_t n = model_num_params(t.m);
    float *g = malloc(n * sizeof *g);
    MPT_REQUIRE(g, "out of memory");
    double norm = lab07_replay_unscaled(&t, 0, (float)S, g);
    train_step_result r = lab07_step(&t, 0, 1e-3);
    MPT_REQUIRE(!r.skipped, "the step should be clean");
    MPT_CHECK(fabs(r.grad_norm - norm) <= 1e-6 * norm, "grad_norm %.9g, expected the unscaled mean's %.9g",
              r.grad_norm, norm);
    float coef = (float)(max_norm / (norm + 1e-6));
    for (size_t i = 0; i < n; i++) g[i] *= coef;
    double gmax, d = lab07_max_diff(model_grads(t.m), g, n, &gmax);
    MPT_CHECK(d <= 1e-5 * gmax, "the buffer should hold the unscaled mean clipped to %g: differs by up to %g (largest "
              "%g)", max_norm, d, gmax);
    free(g);
    lab07_close(&t);
}

/* ================================================================ B. step or skip */

/* A static scale never moves, so a skipped step must be exactly as if that batch had never been drawn: run A
 * trains on batches 0 1 2 3 with an inf at its third step, run B on 0 1 3. Same weights, moments and step count,
 * bit for bit. */
static void fp16_o2_steps_the_master_copy(void) {
    /* fp16-o2: the optimizer steps the fp32 master copy (`update`), and the fp16 weights are rewritten from it after
     * the region. A clean step changes both; a skipped one neither. */
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_PYTORCH, 4096, 0);
    lab07_trainer t;
    lab07_open(&t, AMP_RECIPE_FP16_O2, &sc, OPTIM_ADAMW, 1.0, 1);
    t.ts.inject_inf_at = 1;
    lab07_snapshot before = lab07_take(&t);
    MPT_REQUIRE(before.master, "fp16-o2 keeps an fp32 master copy (ts.master)");
    train_step_result r = lab07_step(&t, 0, 1e-3);
    MPT_CHECK(!r.skipped, "the first fp16-o2 step is clean and must not be skipped");
    MPT_CHECK(lab07_first_difference(before.master, t.ts.master, before.n) >= 0 &&
                  lab07_first_difference(before.params, model_params(t.m), before.n) >= 0,
              "fp16-o2: a clean step should change the fp32 master copy and, from it, the fp16 weights; the %s did not "
              "change\n      likely mistake: step `update` (train_step_update_spans: the master copy under fp16-o2), "
              "not s->spans, which are overwritten from the master right after the region",
              lab07_first_difference(before.master, t.ts.master, before.n) < 0 ? "master copy" : "weights");
    lab07_drop(&before);
    before = lab07_take(&t);
    r = lab07_step(&t, 1, 1e-3);
    MPT_CHECK(r.skipped, "fp16-o2 step 2 has an inf in its gradients: it must be skipped");
    LAB07_CHECK_UNTOUCHED(&t, &before, "the skipped fp16-o2 step 2");
    lab07_drop(&before);
    lab07_close(&t);
}

MPT_TEST(skipped_step_is_as_if_it_never_happened) {
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_STATIC, 1024, 0);
    lab07_trainer a, b;
    lab07_open(&a, AMP_RECIPE_FP16, &sc, OPTIM_ADAMW, 1.0, 1);
    lab07_open(&b, AMP_RECIPE_FP16, &sc, OPTIM_ADAMW, 1.0, 1);
    a.ts.inject_inf_at = 2;
    for (int step = 0; step < 4; step++) lab07_step(&a, step, 1e-3);
    static const int batches[] = {0, 1, 3};
    for (int i = 0; i < 3; i++) lab07_step(&b, batches[i], 1e-3);
    lab07_snapshot sb = lab07_take(&b);
    LAB07_CHECK_UNTOUCHED(&a, &sb, "training on batches 0 1 [2 skipped] 3 against training on 0 1 3");
    MPT_CHECK_EQ_I64(3, a.ts.updates, "updates taken by the run with the skipped step");
    lab07_drop(&sb);
    lab07_close(&a);
    lab07_close(&b);    /* fp16-o2 (its master write-back is lab 09's, so this runs in the hidden tests, which have every lab's code) */
    fp16_o2_steps_the_master_copy();
}

/* ================================================================ C. the scaler in the loop */

/* A static scale cannot back off: the overflow step is skipped, the status says so, and the scale stays. */
MPT_TEST(static_scaler_skips_without_backing_off) {
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_STATIC, 1024, 0);
    lab07_trainer t;
    lab07_open(&t, AMP_RECIPE_FP16, &sc, OPTIM_ADAMW, 1.0, 1);
    t.ts.inject_inf_at = 1;
    for (int step = 0; step < 4; step++) {
        train_step_result r = lab07_step(&t, step, 1e-3);
        bool overflow = step == 1;
        MPT_CHECK(r.skipped == overflow && r.update.scale == 1024.0f && r.update.next_scale == 1024.0f &&
                  r.update.status == (overflow ? AMP_SCALER_SKIPPED_FIXED : AMP_SCALER_OK),
                  "step %d (%s) under a static scale of 1024: expected skipped=%s, scale 1024 -> 1024, status %s; got "
                  "skipped=%s, scale %g -> %g, status %s", step + 1, overflow ? "overflow" : "clean",
                  overflow ? "yes" : "no", overflow ? "skipped_fixed" : "ok", r.skipped ? "yes" : "no",
                  (double)r.update.scale, (double)r.update.next_scale, amp_scaler_status_name(r.update.status));
    }
    lab07_close(&t);
}

/* Twelve steps, each of two micro-batches, with overflows at steps 3, 4 and 9 and growth every 3 clean steps:
 * every step's gradients afterwards are the replay's (accumulated, unscaled once at that step's scale), the
 * scaler is never left between an unscale and its update, and it counted every step once. */
MPT_TEST(unscale_once_in_every_step_of_a_run) {
    static const char pattern[] = "CCOOCCCCOCCC";
    amp_scaler_config sc = lab07_scaler(AMP_SCALER_PYTORCH, 512, 3);
    lab07_trainer t;
    lab07_open(&t, AMP_RECIPE_FP16, &sc, OPTIM_ADAMW, 0, 2);
    const size_t n = model_num_params(t.m);
    float *g = malloc(n * sizeof *g);
    MPT_REQUIRE(g, "out of memory");
    for (int step = 0; pattern[step]; step++) {
        bool overflow = pattern[step] == 'O';
        float S = amp_scaler_scale(&t.ts.scaler);
        lab07_replay_unscaled(&t, step, S, g);
        t.ts.inject_inf_at = overflow ? step : -1;
        train_step_result r = lab07_step(&t, step, 1e-3);
        MPT_REQUIRE(r.skipped == overflow, "step %d (%s): skipped=%s", step + 1, overflow ? "overflow" : "clean",
                    r.skipped ? "yes" : "no");
        MPT_REQUIRE(!t.ts.scaler.unscaled, "after step %d the scaler is still marked unscaled: every unscale must be "
                    "followed by amp_scaler_update in the same step", step + 1);
        if (!overflow) {
            double gmax, d = lab07_max_diff(model_grads(t.m), g, n, &gmax);
            MPT_REQUIRE(d <= 1e-6 * gmax, "step %d at scale %g: the gradients after the step differ from the "
                        "accumulated gradients times 1/S by up to %g (largest %g)", step + 1, (double)S, d, gmax);
        }
    }
    MPT_CHECK_EQ_I64((long)sizeof pattern - 1, t.ts.scaler.iter, "scaler updates (one per step)");
    MPT_CHECK_EQ_I64(9, t.ts.state.step, "optimizer steps (the clean ones)");
    free(g);
    lab07_close(&t);
}
