/* test_amp_detect.c: Criterion tests of inf/NaN detection (amp/detect.c) on a real tiny GPT-2: the backward order,
 * injected faults named by tensor, an fp16 gradient overflow, a NaN weight, and the diagnosis and its event. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amp/detect.h"
#include "base/rng.h"
#include "fp/convert.h"
#include "model/model_lowp.h"

enum { B = 2, T = 8, V = 64 };

static model *tiny_gpt2(bool tied) {
    model_config c = {.arch = MODEL_GPT2, .V = V, .maxT = T, .L = 2, .C = 16, .NH = 2};
    model_config_complete(&c);
    c.tied = tied;
    model *m = model_create(&c);
    model_init(m, 7);
    return m;
}

/* Forward and backward on a fixed random batch; returns the loss. */
static float step(model *m, float loss_scale) {
    int in[B * T], tg[B * T];
    mp_rng r;
    mp_rng_seed(&r, 11);
    for (int i = 0; i < B * T; i++) {
        in[i] = (int)(mp_rng_u32(&r) % V);
        tg[i] = (int)(mp_rng_u32(&r) % V);
    }
    model_zero_grad(m);
    float loss = model_forward(m, in, tg, B, T);
    model_backward(m, loss_scale);
    return loss;
}

static float *grad_of(model *m, const char *name) {
    const model_tensor *t = model_tensor_find(m, name);
    cr_assert_not_null(t, "%s", name);
    return model_grads(m) + t->offset;
}

/* Written out from model_backward: the head (tied: wte), the final norm, each block from the MLP back to ln1,
 * the embeddings. Within a weight/bias pair the bias comes first (reverse registry order). */
Test(amp_detect, backward_order_of_a_tied_gpt2) {
    static const char *const expect[] = {
        "wte", "lnfb", "lnfw",
        "h.1.fcprojb", "h.1.fcprojw", "h.1.fcb", "h.1.fcw", "h.1.ln2b", "h.1.ln2w",
        "h.1.attprojb", "h.1.attprojw", "h.1.qkvb", "h.1.qkvw", "h.1.ln1b", "h.1.ln1w",
        "h.0.fcprojb", "h.0.fcprojw", "h.0.fcb", "h.0.fcw", "h.0.ln2b", "h.0.ln2w",
        "h.0.attprojb", "h.0.attprojw", "h.0.qkvb", "h.0.qkvw", "h.0.ln1b", "h.0.ln1w",
        "wpe"};
    model *m = tiny_gpt2(true);
    int n;
    const model_tensor *t = model_tensors(m, &n);
    cr_assert_eq(n, (int)(sizeof expect / sizeof *expect));
    int order[64];
    cr_assert_eq(amp_backward_order(m, order), n);
    for (int k = 0; k < n; k++) cr_expect_str_eq(t[order[k]].name, expect[k], "position %d", k);
    model_free(m);
}

Test(amp_detect, untied_head_comes_first_and_wte_last) {
    model *m = tiny_gpt2(false);
    int n, order[64];
    const model_tensor *t = model_tensors(m, &n);
    amp_backward_order(m, order);
    cr_expect_str_eq(t[order[0]].name, "head");
    cr_expect_str_eq(t[order[n - 1]].name, "wte");
    model_free(m);
}

Test(amp_detect, clean_gradients_report_nothing) {
    model *m = tiny_gpt2(true);
    step(m, 1.0f);
    amp_nonfinite nf;
    cr_expect_not(amp_find_nonfinite(m, AMP_SCAN_GRADS, &nf));
    cr_expect_eq(nf.nbad, 0);
    cr_expect_eq(nf.count, model_num_params(m) - 0 * 1, "every value scanned");
    model_free(m);
}

/* Two faults: block 1's fc weight and block 0's qkv. Backward reaches block 1 first. */
Test(amp_detect, names_the_first_bad_tensor_in_backward_order) {
    model *m = tiny_gpt2(true);
    step(m, 1.0f);
    float *fcw = grad_of(m, "h.1.fcw"), *qkvw = grad_of(m, "h.0.qkvw");
    fcw[5] = NAN;
    fcw[9] = INFINITY;
    fcw[10] = -INFINITY;
    qkvw[0] = INFINITY;
    amp_nonfinite nf;
    cr_assert(amp_find_nonfinite(m, AMP_SCAN_GRADS, &nf));
    cr_expect_str_eq(nf.first.name, "h.1.fcw");
    cr_expect_eq(nf.first.layer, 1);
    cr_expect_eq(nf.first.nan, 1);
    cr_expect_eq(nf.first.posinf, 1);
    cr_expect_eq(nf.first.neginf, 1);
    cr_expect_eq(nf.first.first_offset, 5);
    cr_expect(isnan(nf.first.first_value));
    cr_expect_str_eq(nf.second.name, "h.0.qkvw");
    cr_expect_eq(nf.nbad, 2);
    cr_expect_eq(nf.posinf, 2);
    cr_expect_not(nf.first_is_tied);
    /* The final norm's bias is earlier in backward than anything in the blocks. */
    grad_of(m, "lnfb")[3] = NAN;
    cr_assert(amp_find_nonfinite(m, AMP_SCAN_GRADS, &nf));
    cr_expect_str_eq(nf.first.name, "lnfb");
    cr_expect_eq(nf.first.layer, 2, "the head's layer is L");
    model_free(m);
}

Test(amp_detect, tied_embedding_is_flagged) {
    model *m = tiny_gpt2(true);
    step(m, 1.0f);
    grad_of(m, "wte")[100] = NAN;
    grad_of(m, "h.0.fcw")[0] = NAN;
    amp_nonfinite nf;
    cr_assert(amp_find_nonfinite(m, AMP_SCAN_GRADS, &nf));
    cr_expect_str_eq(nf.first.name, "wte");
    cr_expect(nf.first_is_tied);
    cr_expect_str_eq(nf.second.name, "h.0.fcw", "the next bad tensor is named too");
    model_free(m);
}

/* fp16 gradient storage under a loss scale S: a tensor overflows when max|g| * S >= 65520. The expected first
 * tensor is found independently from the fp32 gradients' maxima, walking the hand-written order above. */
Test(amp_detect, fp16_overflow_under_a_loss_scale) {
    model *m = tiny_gpt2(true);
    step(m, 1.0f);
    int n, order[64];
    const model_tensor *t = model_tensors(m, &n);
    amp_backward_order(m, order);
    /* Choose S so that the tensor with the largest gradient overflows and the smallest maxima do not. */
    float maxabs[64], top = 0;
    for (int i = 0; i < n; i++) {
        maxabs[i] = 0;
        for (size_t j = 0; j < t[i].size; j++) maxabs[i] = fmaxf(maxabs[i], fabsf(model_grads(m)[t[i].offset + j]));
        top = fmaxf(top, maxabs[i]);
    }
    float S = ldexpf(1.0f, (int)floor(log2(65520.0 / top)) + 1); /* the largest tensor's max * S >= 65520 */
    int expect = -1;
    for (int k = 0; k < n && expect < 0; k++)
        if ((double)maxabs[order[k]] * S >= 65520.0) expect = order[k];
    cr_assert_geq(expect, 0);
    /* Rerun backward with the scale and store the gradients in fp16, as fp16-o2 would. */
    step(m, S);
    size_t np = model_num_params(m);
    uint16_t *h = malloc(np * sizeof *h);
    fp_f32_to_f16(h, model_grads(m), np);
    fp_f16_to_f32(model_grads(m), h, np);
    free(h);
    amp_nonfinite nf;
    cr_assert(amp_find_nonfinite(m, AMP_SCAN_GRADS, &nf), "scale %g overflows fp16", (double)S);
    cr_expect_str_eq(nf.first.name, t[expect].name, "scale %g", (double)S);
    cr_expect_eq(nf.first.nan, 0, "overflow gives inf, not NaN");
    cr_expect_gt(nf.first.posinf + nf.first.neginf, 0);
    model_free(m);
}

/* A NaN weight: the loss is NaN, every gradient inherits it; the weight scan names the culprit. */
Test(amp_detect, nan_weight_is_found_in_forward_order) {
    model *m = tiny_gpt2(true);
    const model_tensor *w = model_tensor_find(m, "h.1.fcprojw");
    model_params(m)[w->offset + 7] = NAN;
    float loss = step(m, 1.0f);
    cr_expect(isnan(loss));
    amp_nonfinite grads, params;
    cr_expect(amp_find_nonfinite(m, AMP_SCAN_GRADS, &grads));
    cr_assert(amp_find_nonfinite(m, AMP_SCAN_PARAMS, &params));
    cr_expect_str_eq(params.first.name, "h.1.fcprojw");
    cr_expect_eq(params.first.first_offset, 7);
    cr_expect_eq(params.nbad, 1);
    amp_diag_context ctx = {.step = 40, .loss = loss, .lr = 1e-3, .grad_clip = 1.0, .recipe = AMP_RECIPE_FP32};
    amp_diagnosis d;
    amp_diagnose(&grads, &params, &ctx, &d);
    cr_expect_str_eq(d.what, "nonfinite_param");
    cr_expect_str_eq(d.tensor, "h.1.fcprojw");
    cr_expect_eq(d.layer, 1);
    model_free(m);
}

/* The forward pass again, with a probe on every activation: an inf weight in block 1's MLP makes its first
 * matmul's output (h.1.fch) the first bad activation; everything earlier in forward order is finite. */
static void fixed_batch(int *in, int *tg) {
    mp_rng r;
    mp_rng_seed(&r, 11);
    for (int i = 0; i < B * T; i++) {
        in[i] = (int)(mp_rng_u32(&r) % V);
        tg[i] = (int)(mp_rng_u32(&r) % V);
    }
}

static void expect_first_bad_activation(model *m, const char *want, int layer) {
    int in[B * T], tg[B * T];
    fixed_batch(in, tg);
    amp_bad_tensor act;
    cr_assert(amp_find_nonfinite_activation(m, in, tg, B, T, &act), "no bad activation found; expected %s", want);
    cr_expect_str_eq(act.name, want, "the first bad activation in forward order: expected %s, got %s", want, act.name);
    cr_expect_eq(act.layer, layer);
    cr_expect_gt(act.nan + act.posinf + act.neginf, 0);
}

Test(amp_detect, first_bad_activation_in_forward_order_fp32) {
    model *m = tiny_gpt2(true);
    int in[B * T], tg[B * T];
    fixed_batch(in, tg);
    amp_bad_tensor act;
    cr_expect_not(amp_find_nonfinite_activation(m, in, tg, B, T, &act), "a clean model has no bad activation");
    const model_tensor *w = model_tensor_find(m, "h.1.fcw");
    model_params(m)[w->offset + 3] = INFINITY;
    expect_first_bad_activation(m, "h.1.fch", 1);
    model_params(m)[w->offset + 3] = 0;
    model_params(m)[model_tensor_find(m, "wpe")->offset] = NAN; /* position 0's embedding */
    expect_first_bad_activation(m, "encoded", -1);
    model_free(m);
}

/* The same under bf16 compute (model_lowp.c): it reports its activations where it stores them. */
Test(amp_detect, first_bad_activation_in_forward_order_bf16) {
    model *m = tiny_gpt2(true);
    model_precision p = {.compute = MODEL_COMPUTE_BF16};
    model_set_precision(m, &p);
    model_params(m)[model_tensor_find(m, "h.0.attprojw")->offset + 5] = INFINITY;
    expect_first_bad_activation(m, "h.0.res2", 0); /* the projection's output is added into the stream there */
    model_free(m);
}

/* A weight that was already bad when the run started (step start_step + 1): the checkpoint is named, not the
 * learning rate, and the initial weights are not called "an unlikely cause". */
Test(amp_detect, diagnosis_of_a_bad_weight_from_a_resumed_checkpoint) {
    model *m = tiny_gpt2(true);
    model_params(m)[model_tensor_find(m, "h.0.fcprojw")->offset + 100] = NAN;
    float loss = step(m, 1.0f);
    amp_nonfinite params;
    cr_assert(amp_find_nonfinite(m, AMP_SCAN_PARAMS, &params));
    amp_diag_context ctx = {.step = 3, .loss = loss, .lr = 1e-3, .grad_clip = 1.0, .recipe = AMP_RECIPE_FP32,
                            .start_step = 2};
    amp_diagnosis d;
    amp_diagnose(NULL, &params, &ctx, &d);
    cr_expect_str_eq(d.tensor, "h.0.fcprojw");
    cr_expect(strstr(d.message, "the checkpoint it resumed from (step 2) holds them") != NULL, "%s", d.message);
    cr_expect(strstr(d.message, "unlikely cause") == NULL, "%s", d.message);
    model_free(m);
}

Test(amp_detect, diagnosis_follows_the_flow) {
    model *m = tiny_gpt2(true);
    float loss = step(m, 1.0f);
    grad_of(m, "h.1.attprojw")[0] = INFINITY;
    amp_nonfinite nf;
    amp_find_nonfinite(m, AMP_SCAN_GRADS, &nf);
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    amp_scaler s;
    amp_scaler_init(&s, &c);
    amp_update u = amp_scaler_update(&s, true);
    amp_diag_context ctx = {.step = 1, .loss = loss, .lr = 3e-3, .grad_clip = 0, .recipe = AMP_RECIPE_FP16,
                            .scaler = &s, .update = &u};
    amp_diagnosis d;
    amp_diagnose(&nf, NULL, &ctx, &d);
    cr_expect_str_eq(d.what, "nonfinite_grad");
    cr_expect_str_eq(d.tensor, "h.1.attprojw");
    const char *order[] = {"1. gradients", "h.1.attprojw", "2. learning rate / loss scale", "pytorch loss scale of 65536",
                           "3. clipping: off", "4. initialisation: this is the first step", "5. data"};
    const char *at = d.message;
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        const char *next = strstr(at, order[i]);
        cr_expect_not_null(next, "'%s' after the previous part of:\n%s", order[i], d.message);
        if (next) at = next;
    }
    /* bf16, late in training, clipping on: different advice. */
    amp_diag_context late = {.step = 500, .loss = loss, .lr = 3e-3, .grad_clip = 1.0, .recipe = AMP_RECIPE_BF16};
    amp_diagnose(&nf, NULL, &late, &d);
    cr_expect(strstr(d.message, "no loss scale") && strstr(d.message, "learning rate too high"), "%s", d.message);
    cr_expect(strstr(d.message, "3. clipping: on at a global norm of 1") != NULL, "%s", d.message);
    cr_expect(strstr(d.message, "499 steps ran before") != NULL, "%s", d.message);
    model_free(m);
}

Test(amp_detect, diagnosis_of_a_scale_at_its_minimum) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_DEEPSPEED);
    c.init_scale = 1;
    c.hysteresis = 1;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    amp_update u = amp_scaler_update(&s, true);
    amp_diag_context ctx = {.step = 12, .loss = 2.5f, .lr = 1e-3, .recipe = AMP_RECIPE_FP16, .scaler = &s, .update = &u};
    amp_diagnosis d;
    amp_diagnose(NULL, NULL, &ctx, &d);
    cr_expect_str_eq(d.what, "scale_at_minimum");
    cr_expect(strstr(d.message, "Current loss scale already at minimum") != NULL, "%s", d.message);
    cr_expect(strstr(d.message, "use bf16") != NULL, "%s", d.message);
}

Test(amp_detect, diagnosis_event) {
    char dir[] = "/tmp/mixpar-amp-detect-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    ev_writer *w = ev_open(dir, 0);
    amp_diagnosis d = {.step = 9, .what = "nonfinite_grad", .layer = 1, .tensor = "h.1.fcw",
                       .message = "step 9: \"quoted\"\nsecond line"};
    amp_diagnosis_emit(w, &d);
    char path[512];
    snprintf(path, sizeof path, "%s", ev_path(w));
    ev_close(w);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[4096];
    cr_assert_not_null(fgets(line, sizeof line, f));
    fclose(f);
    cr_expect(strstr(line, "\"kind\":\"diagnosis\"") && strstr(line, "\"step\":9") &&
                  strstr(line, "\"what\":\"nonfinite_grad\"") && strstr(line, "\"layer\":1") &&
                  strstr(line, "\"tensor\":\"h.1.fcw\"") && strstr(line, "\\\"quoted\\\"\\nsecond line"),
              "%s", line);
    unlink(path);
    rmdir(dir);
}
