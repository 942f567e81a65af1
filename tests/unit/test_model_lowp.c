/* test_model_lowp.c: Criterion tests of the model's low-precision compute modes: accuracy against fp32, memory,
 * fp16 underflow and overflow where they really happen, sampling, switching back to fp32, and the AMP step's recipes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "amp/setup.h"
#include "base/mem.h"
#include "base/rng.h"
#include "fp/convert.h"
#include "model/model_lowp.h"
#include "train/step.h"

enum { B = 3, T = 16, V = 97 };

static model *tiny(model_arch arch) {
    model_config c = {.arch = arch, .V = V, .maxT = T, .L = 2, .C = 32, .NH = 4};
    model_config_complete(&c);
    c.tied = arch == MODEL_GPT2;
    model *m = model_create(&c);
    model_init(m, 5);
    return m;
}

static void batch(int *in, int *tg, uint64_t seed) {
    mp_rng r;
    mp_rng_seed(&r, seed);
    for (int i = 0; i < B * T; i++) {
        in[i] = (int)(mp_rng_u32(&r) % V);
        tg[i] = (int)(mp_rng_u32(&r) % V);
    }
}

static float forward_backward(model *m, float scale, uint64_t seed) {
    int in[B * T], tg[B * T];
    batch(in, tg, seed);
    model_zero_grad(m);
    float loss = model_forward(m, in, tg, B, T);
    model_backward(m, scale);
    return loss;
}

/* ||a/scale - b|| / ||b|| over n values */
static double rel_error(const float *a, float scale, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] / scale - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num / den);
}

/* Each mode computes the same function with its own rounding: the loss within the format's precision of the
 * fp32 loss, the gradients within a relative error the format explains (bf16 keeps 8 bits, fp16 11, tf32 11;
 * fp8's first step uses scale 1 before any amax is known, so its error is the largest). */
Test(model_lowp, every_mode_tracks_fp32) {
    static const struct {
        model_compute mode;
        double loss_tol, grad_tol;
    } modes[] = {{MODEL_COMPUTE_TF32, 1e-4, 2e-3},
                 {MODEL_COMPUTE_BF16, 1e-3, 2e-2},
                 {MODEL_COMPUTE_FP16, 1e-4, 3e-3},
                 {MODEL_COMPUTE_FP8, 1e-2, 0.3}};
    for (int arch = 0; arch < 2; arch++) {
        model *m = tiny((model_arch)arch);
        size_t n = model_num_params(m);
        float *ref = malloc(n * sizeof *ref);
        float loss32 = forward_backward(m, 1.0f, 7);
        memcpy(ref, model_grads(m), n * sizeof *ref);
        for (size_t k = 0; k < sizeof modes / sizeof *modes; k++) {
            model_set_precision(m, &(model_precision){.compute = modes[k].mode});
            cr_assert_eq(model_get_compute(m), modes[k].mode);
            float scale = modes[k].mode == MODEL_COMPUTE_FP16 ? 1024.0f : 1.0f;
            float loss = forward_backward(m, scale, 7);
            double err = rel_error(model_grads(m), scale, ref, n);
            cr_expect(fabsf(loss - loss32) <= modes[k].loss_tol * loss32, "%s %s: loss %.7f vs fp32 %.7f",
                      model_arch_name((model_arch)arch), model_compute_name(modes[k].mode), loss, loss32);
            cr_expect(err <= modes[k].grad_tol && err > 0, "%s %s: gradient relative error %.3g (allowed %.3g, > 0)",
                      model_arch_name((model_arch)arch), model_compute_name(modes[k].mode), err, modes[k].grad_tol);
        }
        model_set_precision(m, &(model_precision){.compute = MODEL_COMPUTE_FP32});
        float again = forward_backward(m, 1.0f, 7);
        cr_expect_eq(again, loss32, "back in fp32 the loss is the fp32 loss again");
        cr_expect_eq(memcmp(model_grads(m), ref, n * sizeof *ref), 0, "back in fp32 the gradients are fp32's again");
        free(ref);
        model_free(m);
    }
}

/* On the 16-bit kernel model_zero_grad clears only what backward adds into (norm gains, biases, embeddings) and
 * leaves the blocks' matrices to the first backward after it, whose weight-gradient products write them. The
 * gradients must be those of a buffer zeroed whole, bit for bit: with NaN left in the matrices, after one
 * backward, after a second that adds to the first (accumulation), and after a switch of mode in between. */
Test(model_lowp, zero_grad_leaves_the_matrices_to_the_first_backward) {
    for (int arch = 0; arch < 2; arch++) {
        model *lazy = tiny((model_arch)arch), *whole = tiny((model_arch)arch);
        const size_t n = model_num_params(lazy);
        const model_precision bf16 = {.compute = MODEL_COMPUTE_BF16};
        model_set_precision(lazy, &bf16);
        model_set_precision(whole, &bf16);
        int in[B * T], tg[B * T];
        for (int round = 0; round < 3; round++) {
            for (size_t i = 0; i < n; i++) model_grads(lazy)[i] = NAN; /* what a stale matrix may hold */
            model_zero_grad(lazy);
            memset(model_grads(whole), 0, n * sizeof(float)); /* the reference: every gradient starts at 0 */
            if (round == 2) { /* a mode switch between the zeroing and backward: nothing stale may survive it */
                model_set_precision(lazy, &(model_precision){.compute = MODEL_COMPUTE_TF32});
                model_set_precision(whole, &(model_precision){.compute = MODEL_COMPUTE_TF32});
            }
            for (int micro = 0; micro < 2; micro++) {
                batch(in, tg, 30 + (uint64_t)(round * 2 + micro));
                float a = model_forward(lazy, in, tg, B, T), b = model_forward(whole, in, tg, B, T);
                cr_assert_eq(a, b, "%s round %d: the same weights give the same loss", model_arch_name((model_arch)arch),
                             round);
                model_backward(lazy, 1.0f);
                model_backward(whole, 1.0f);
                cr_assert_eq(memcmp(model_grads(lazy), model_grads(whole), n * sizeof(float)), 0,
                             "%s round %d: gradients after micro-batch %d differ from a buffer zeroed whole",
                             model_arch_name((model_arch)arch), round, micro);
            }
            if (round == 2) {
                model_set_precision(lazy, &bf16);
                model_set_precision(whole, &bf16);
            }
        }
        model_free(lazy);
        model_free(whole);
    }
}

/* Multiplies the blocks' matrices (the weights the low-precision matmuls read through the cast) by 1.5. */
static void scale_block_matrices(model *m) {
    int n;
    const model_tensor *t = model_tensors(m, &n);
    for (int i = 0; i < n; i++)
        if (t[i].ndim == 2 && t[i].layer >= 0)
            for (size_t j = 0; j < t[i].size; j++) model_params(m)[t[i].offset + j] *= 1.5f;
}

/* model_hold_weights: while the weights are held, the first forward's cast serves the later ones (a step's
 * micro-batches); fp8 casts every time (its scales move at every forward); released, the next forward casts
 * again. Shown by breaking the promise: the blocks' matrices change while held. A held bf16, fp16 or tf32
 * forward does not see the change; a held fp8 forward does, and so does every forward once released, each
 * equal to a model that was never held. */
Test(model_lowp, held_weights_are_cast_once) {
    const model_compute modes[] = {MODEL_COMPUTE_BF16, MODEL_COMPUTE_FP16, MODEL_COMPUTE_TF32, MODEL_COMPUTE_FP8};
    int in[B * T], tg[B * T];
    batch(in, tg, 41);
    for (int k = 0; k < 4; k++) {
        const char *name = model_compute_name(modes[k]);
        model *held = tiny(MODEL_GPT2), *plain = tiny(MODEL_GPT2);
        model_set_precision(held, &(model_precision){.compute = modes[k]});
        model_set_precision(plain, &(model_precision){.compute = modes[k]});
        model_hold_weights(held, true);
        const float first = model_forward(held, in, tg, B, T);
        cr_assert_eq(first, model_forward(plain, in, tg, B, T), "%s: held, the first forward casts as usual", name);
        scale_block_matrices(held);
        scale_block_matrices(plain);
        const float again = model_forward(held, in, tg, B, T), changed = model_forward(plain, in, tg, B, T);
        cr_assert_neq(changed, first, "%s: the changed matrices change the loss (%g)", name, (double)changed);
        if (modes[k] == MODEL_COMPUTE_FP8)
            cr_assert_eq(again, changed, "fp8: a held forward still casts (its scales move)");
        else
            cr_assert_eq(again, first, "%s: a held forward reads the first forward's cast", name);
        model_hold_weights(held, false);
        cr_assert_eq(model_forward(held, in, tg, B, T), model_forward(plain, in, tg, B, T),
                     "%s: released, the next forward casts the weights as they are", name);
        model_free(held);
        model_free(plain);
    }
}

/* Activations kept for backward are stored in 2 bytes: MEM_ACT's peak in bf16 is well under fp32's. The
 * rest is fp32 scratch for one layer at a time, so the ratio falls with depth (GPT-2 124M: 0.53, bench/). */
Test(model_lowp, activations_take_about_half_the_memory) {
    model_config c = {.arch = MODEL_GPT2, .V = 512, .maxT = 64, .L = 8, .C = 128, .NH = 4, .tied = true};
    model_config_complete(&c);
    model *m = model_create(&c);
    model_init(m, 1);
    int in[4 * 64], tg[4 * 64];
    for (int i = 0; i < 4 * 64; i++) in[i] = tg[i] = i % 512;
    mem_reset_peaks();
    size_t base = mem_current(MEM_ACT);
    model_forward(m, in, tg, 4, 64);
    model_backward(m, 1);
    size_t fp32 = mem_peak(MEM_ACT) - base;
    model_set_precision(m, &(model_precision){.compute = MODEL_COMPUTE_BF16});
    mem_reset_peaks();
    base = mem_current(MEM_ACT);
    model_forward(m, in, tg, 4, 64);
    model_backward(m, 1);
    size_t bf16 = mem_peak(MEM_ACT) - base;
    cr_expect(bf16 < 0.62 * fp32 && bf16 > 0.45 * fp32, "bf16 activations %zu bytes vs fp32 %zu (ratio %.3f)", bf16, fp32,
              (double)bf16 / fp32);
    model_free(m);
}

/* The lesson of lab 04, measured where it happens: at loss scale 1 in fp16 a share of the gradients entering
 * the matmuls in backward flushes to zero; at 2^12 none does. */
Test(model_lowp, fp16_gradients_flush_without_a_scale) {
    model *m = tiny(MODEL_GPT2);
    model_set_precision(m, &(model_precision){.compute = MODEL_COMPUTE_FP16});
    model_rounding_enable(m, true);
    uint64_t flushed[2] = {0, 0}, nonzero[2] = {0, 0};
    const float scales[2] = {1.0f / 4096, 4096.0f}; /* a tiny model's gradients are large: push them down */
    for (int k = 0; k < 2; k++) {
        model_rounding_reset(m);
        forward_backward(m, scales[k], 3);
        int n;
        const model_layer_rounding *r = model_rounding(m, &n);
        cr_assert_eq(n, 2 + 2);
        for (int i = 0; i < n; i++) {
            flushed[k] += r[i].grads.flushed;
            nonzero[k] += r[i].grads.nonzero;
        }
    }
    cr_expect(flushed[0] > nonzero[0] / 100, "at a tiny scale fp16 flushes gradients: %llu of %llu",
              (unsigned long long)flushed[0], (unsigned long long)nonzero[0]);
    cr_expect(flushed[1] * 1000 < nonzero[1], "at 4096 almost none flush: %llu of %llu", (unsigned long long)flushed[1],
              (unsigned long long)nonzero[1]);
    model_free(m);
}

/* Too large a scale overflows fp16 in backward: the gradients hold inf, which the scaler's check finds. */
Test(model_lowp, fp16_overflow_reaches_the_gradients) {
    model *m = tiny(MODEL_GPT2);
    model_set_precision(m, &(model_precision){.compute = MODEL_COMPUTE_FP16});
    forward_backward(m, 1e9f, 3);
    size_t bad = 0, n = model_num_params(m);
    for (size_t i = 0; i < n; i++) bad += !isfinite(model_grads(m)[i]);
    cr_expect(bad > 0, "a scale of 1e9 must overflow fp16 somewhere in backward");
    model_free(m);
}

/* Sampling reads the logits of the last position; in a low mode they are decoded from 2 bytes. */
Test(model_lowp, logits_for_sampling) {
    model *m = tiny(MODEL_LLAMA);
    int in[B * T], tg[B * T];
    batch(in, tg, 9);
    model_forward(m, in, NULL, 1, T);
    float ref[V];
    memcpy(ref, model_logits(m, 0, T - 1), sizeof ref);
    model_set_precision(m, &(model_precision){.compute = MODEL_COMPUTE_BF16});
    model_forward(m, in, NULL, 1, T);
    const float *lo = model_logits(m, 0, T - 1);
    for (int v = 0; v < V; v++) {
        uint16_t bits;
        fp_f32_to_bf16(&bits, &lo[v], 1);
        float back;
        fp_bf16_to_f32(&back, &bits, 1);
        cr_assert_eq(back, lo[v], "logit %d is a bf16 value", v);
        cr_expect(fabsf(lo[v] - ref[v]) < 0.05f, "logit %d: %g vs fp32 %g", v, lo[v], ref[v]);
    }
    model_free(m);
}

/* ------------------------------------------------------------------ the AMP step's recipes */

static train_step make_step(model *m, amp_recipe recipe, bool stochastic) {
    optim_config oc = optim_config_default(optim_kind_from_name("adamw"));
    train_step ts;
    train_step_init(&ts, m, &oc, 1.0);
    amp_setup setup = {.recipe = recipe, .scaler = amp_scaler_defaults(amp_recipe_get(recipe)->scaler)};
    model_precision mp = amp_model_precision(&setup);
    model_set_precision(m, &mp);
    train_step_set_amp(&ts, recipe, &setup.scaler, stochastic, 11);
    return ts;
}

static bool all_in_format(const float *x, size_t n, bool fp16) {
    for (size_t i = 0; i < n; i++) {
        uint16_t b;
        float back;
        if (fp16) {
            fp_f32_to_f16(&b, &x[i], 1);
            fp_f16_to_f32(&back, &b, 1);
        } else {
            fp_f32_to_bf16(&b, &x[i], 1);
            fp_bf16_to_f32(&back, &b, 1);
        }
        if (back != x[i]) return false;
    }
    return true;
}

/* A step holds the weights over its micro-batches (one cast for all of them) and lets go before the update: the
 * forward after each step casts the new weights, as a model that never trained and was given them does. */
Test(model_lowp, a_step_casts_the_updated_weights) {
    model *m = tiny(MODEL_GPT2), *fresh = tiny(MODEL_GPT2);
    train_step ts = make_step(m, AMP_RECIPE_BF16, false);
    model_set_precision(fresh, &(model_precision){.compute = MODEL_COMPUTE_BF16});
    int in[B * T * 2], tg[B * T * 2];
    for (int step = 0; step < 3; step++) {
        batch(in, tg, 50 + (uint64_t)step);
        batch(in + B * T, tg + B * T, 60 + (uint64_t)step);
        train_step_result r = train_step_run(&ts, in, tg, B, T, 2, 1e-2);
        cr_assert_not(r.skipped, "step %d", step);
        memcpy(model_params(fresh), model_params(m), model_num_params(m) * sizeof(float));
        cr_assert_eq(model_forward(m, in, tg, B, T), model_forward(fresh, in, tg, B, T),
                     "after step %d the trained model's forward reads its new weights", step);
    }
    train_step_free(&ts);
    model_free(m);
    model_free(fresh);
}

/* fp16-o2: the model's weights are always the fp16 rounding of the fp32 master copy the optimizer updates. */
Test(model_lowp, fp16_o2_keeps_fp32_master_weights) {
    model *m = tiny(MODEL_GPT2);
    size_t n = model_num_params(m);
    train_step ts = make_step(m, AMP_RECIPE_FP16_O2, false);
    cr_assert_not_null(ts.master);
    cr_expect(all_in_format(model_params(m), n, true), "working weights are fp16 values from the start");
    int in[B * T], tg[B * T];
    for (int step = 0; step < 3; step++) {
        batch(in, tg, 40 + (uint64_t)step);
        train_step_result r = train_step_run(&ts, in, tg, B, T, 1, 1e-3);
        cr_expect_not(r.skipped, "step %d skipped at scale %g", step, r.update.scale);
    }
    cr_expect(all_in_format(model_params(m), n, true), "working weights stay fp16 values");
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t b;
        float back;
        fp_f32_to_f16(&b, &ts.master[i], 1);
        fp_f16_to_f32(&back, &b, 1);
        cr_assert_eq(back, model_params(m)[i], "weight %zu is the fp16 rounding of its master", i);
        differ += ts.master[i] != model_params(m)[i];
    }
    cr_expect(differ > n / 2, "the master copy holds more than fp16 can: %zu of %zu differ", differ, n);
    cr_expect_eq(mem_current(MEM_MASTER), n * sizeof(float), "MEM_MASTER holds the fp32 copy");
    train_step_free(&ts);
    model_free(m);
}

/* bf16-pure: no master copy; the updated weights are rounded back to bf16, stochastically or to nearest. With
 * a learning rate far below half a bf16 ulp, round-to-nearest freezes the weights and stochastic rounding does
 * not (lab 09's stall). */
Test(model_lowp, bf16_pure_rounding_decides_whether_tiny_updates_survive) {
    size_t changed[2];
    for (int sr = 0; sr < 2; sr++) {
        model *m = tiny(MODEL_GPT2);
        size_t n = model_num_params(m);
        train_step ts = make_step(m, AMP_RECIPE_BF16_PURE, sr == 1);
        cr_assert_null(ts.master);
        float *before = malloc(n * sizeof *before);
        memcpy(before, model_params(m), n * sizeof *before);
        int in[B * T], tg[B * T];
        batch(in, tg, 5);
        train_step_run(&ts, in, tg, B, T, 1, 1e-6);
        cr_expect(all_in_format(model_params(m), n, false), "bf16-pure weights are bf16 values");
        /* Weights of magnitude >= 2^-7 have a bf16 ulp of at least 2^-14 ~ 6e-5: an Adam step of ~1e-6
         * is under half of it. (Weights near zero have tiny ulps and move either way.) */
        changed[sr] = 0;
        for (size_t i = 0; i < n; i++)
            if (fabsf(before[i]) >= 0x1p-7f) changed[sr] += model_params(m)[i] != before[i];
        free(before);
        train_step_free(&ts);
        model_free(m);
    }
    cr_expect(changed[1] > 10 * (changed[0] + 1),
              "lr 1e-6: round-to-nearest changed %zu weights, stochastic rounding %zu", changed[0], changed[1]);
}

/* The AMP step skips a step whose gradients overflow, on the scaler's word, and backs the scale off. */
Test(model_lowp, fp16_step_skips_and_backs_off) {
    model *m = tiny(MODEL_GPT2);
    size_t n = model_num_params(m);
    train_step ts = make_step(m, AMP_RECIPE_FP16, false);
    ts.inject_inf_at = 1;
    float *before = malloc(n * sizeof *before);
    int in[B * T], tg[B * T];
    for (int step = 0; step < 3; step++) {
        batch(in, tg, 60 + (uint64_t)step);
        memcpy(before, model_params(m), n * sizeof *before);
        long optim_steps = ts.state.step;
        train_step_result r = train_step_run(&ts, in, tg, B, T, 1, 1e-3);
        cr_expect_eq(r.skipped, step == 1, "step %d skipped %d", step, r.skipped);
        if (r.skipped) {
            cr_expect_eq(memcmp(before, model_params(m), n * sizeof *before), 0, "a skipped step changes no weight");
            cr_expect_eq(ts.state.step, optim_steps, "a skipped step does not advance the optimizer");
            cr_expect_eq(r.update.next_scale, r.update.scale / 2, "the scale backs off");
        }
    }
    free(before);
    train_step_free(&ts);
    model_free(m);
}

/* A frozen tensor (requires_grad=False) gets a zero gradient before its layer's grads_ready hook and is never
 * updated, weight decay included, in fp32 and in a mixed-precision recipe alike; the others train. */
Test(model_lowp, frozen_tensors_stay_put) {
    for (int recipe = 0; recipe < 2; recipe++) {
        model *m = tiny(MODEL_GPT2);
        cr_assert_eq(model_freeze(m, "wpe"), 1);
        cr_assert_eq(model_freeze(m, "h.1.*"), 12, "a GPT-2 block has 12 tensors");
        cr_assert_eq(model_freeze(m, "nothing"), 0);
        cr_assert_eq(model_count_frozen(m), 13);
        size_t n = model_num_params(m);
        train_step ts;
        if (recipe) ts = make_step(m, AMP_RECIPE_BF16, false);
        else {
            optim_config oc = optim_config_default(optim_kind_from_name("adamw"));
            train_step_init(&ts, m, &oc, 1.0);
        }
        float *before = malloc(n * sizeof *before);
        memcpy(before, model_params(m), n * sizeof *before);
        int in[B * T], tg[B * T];
        for (int step = 0; step < 3; step++) {
            batch(in, tg, 80 + (uint64_t)step);
            train_step_run(&ts, in, tg, B, T, 1, 1e-2);
        }
        int count;
        const model_tensor *t = model_tensors(m, &count);
        for (int i = 0; i < count; i++) {
            bool same = memcmp(before + t[i].offset, model_params(m) + t[i].offset, t[i].size * sizeof(float)) == 0;
            if (t[i].frozen) {
                cr_expect(same, "%s: frozen %s changed", recipe ? "bf16" : "fp32", t[i].name);
                for (size_t j = 0; j < t[i].size; j++)
                    cr_assert_eq(model_grads(m)[t[i].offset + j], 0.0f, "frozen %s has a gradient", t[i].name);
            } else {
                cr_expect_not(same, "%s: %s did not train", recipe ? "bf16" : "fp32", t[i].name);
            }
        }
        free(before);
        train_step_free(&ts);
        model_free(m);
    }
}
