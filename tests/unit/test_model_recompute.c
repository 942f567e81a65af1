/* test_model_recompute.c: Criterion tests of activation checkpointing (model.h): gradients and loss bit-identical to
 * no recompute under every policy, both architectures, fp32 and the low-precision modes; MEM_ACT peaks that fall
 * as the layout says and as the planner predicts; the hook order a ZeRO-3 gather relies on; the config section. */
#include "base/mem.h"
#include "base/rng.h"
#include "model/model.h"
#include "model/model_lowp.h"
#include "plan/plan.h"
#include "train/config.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

/* Small, but with every feature a recompute must reproduce: 5 blocks (every_k with k = 2 and 3 leaves a
 * remainder), several heads, GQA and RoPE for llama, padded vocabulary rows. */
static model_config small(model_arch arch) {
    model_config c = {.arch = arch, .V = 70, .Vp = 80, .maxT = 16, .L = 5, .C = 32, .NH = 4};
    if (arch == MODEL_LLAMA) c.KVH = 2;
    model_config_complete(&c);
    return c;
}

enum { B = 2, T = 16 };

static void batch(int *inputs, int *targets, int V, uint64_t seed) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (int i = 0; i < B * T; i++) {
        inputs[i] = (int)(mp_rng_u32(&rng) % (unsigned)V);
        targets[i] = (int)(mp_rng_u32(&rng) % (unsigned)V);
    }
    targets[3] = -1;
}

typedef struct {
    model_recompute policy;
    int k;
    const char *name;
} policy_case;

static const policy_case policies[] = {
    {MODEL_RECOMPUTE_NONE, 1, "none"},       {MODEL_RECOMPUTE_EVERY, 1, "every"},
    {MODEL_RECOMPUTE_EVERY_K, 2, "every_k=2"}, {MODEL_RECOMPUTE_EVERY_K, 3, "every_k=3"},
    {MODEL_RECOMPUTE_EVERY_K, 1, "every_k=1"}, {MODEL_RECOMPUTE_SELECTIVE, 1, "selective"},
};
enum { NPOLICIES = sizeof policies / sizeof policies[0] };

typedef struct {
    float loss[2];
    float *grads;
    size_t n;
    size_t act_peak; /* MEM_ACT peak of the run */
} run_result;

/* Two training steps' worth of forward/backward (the second on another batch, after an SGD update, so a
 * layout reused from the first step and fp8's scale history are exercised), on a fresh model. */
static run_result run(model_arch arch, model_compute compute, model_recompute policy, int k) {
    model_config c = small(arch);
    model *m = model_create(&c);
    model_init(m, 42);
    if (compute != MODEL_COMPUTE_FP32) {
        model_precision p = {.compute = compute};
        model_set_precision(m, &p);
    }
    model_set_recompute(m, policy, k);
    mem_reset_peaks();
    size_t act_before = mem_current(MEM_ACT);
    int inputs[B * T], targets[B * T];
    run_result r = {.n = model_num_params(m)};
    for (int step = 0; step < 2; step++) {
        batch(inputs, targets, c.V, 7 + (uint64_t)step);
        model_zero_grad(m);
        r.loss[step] = model_forward(m, inputs, targets, B, T);
        model_backward(m, compute == MODEL_COMPUTE_FP16 ? 1024.0f : 1.0f);
        if (step == 0) {
            float *p = model_params(m);
            const float *g = model_grads(m);
            for (size_t i = 0; i < r.n; i++) p[i] -= 0.1f * g[i];
        }
    }
    r.act_peak = mem_peak(MEM_ACT) - act_before;
    r.grads = malloc(r.n * sizeof(float));
    memcpy(r.grads, model_grads(m), r.n * sizeof(float));
    model_free(m);
    return r;
}

static void check_identical(model_arch arch, model_compute compute) {
    run_result base = run(arch, compute, MODEL_RECOMPUTE_NONE, 1);
    for (int i = 1; i < NPOLICIES; i++) {
        run_result r = run(arch, compute, policies[i].policy, policies[i].k);
        for (int s = 0; s < 2; s++)
            cr_expect(memcmp(&r.loss[s], &base.loss[s], sizeof(float)) == 0,
                      "%s %s %s step %d: loss %.9g, without recompute %.9g", model_arch_name(arch),
                      model_compute_name(compute), policies[i].name, s, r.loss[s], base.loss[s]);
        size_t first = r.n;
        for (size_t j = 0; j < r.n && first == r.n; j++)
            if (memcmp(&r.grads[j], &base.grads[j], sizeof(float)) != 0) first = j;
        cr_expect(first == r.n, "%s %s %s: gradients differ from no recompute, first at %zu: %.9g vs %.9g",
                  model_arch_name(arch), model_compute_name(compute), policies[i].name, first,
                  first < r.n ? r.grads[first] : 0.0, first < r.n ? base.grads[first] : 0.0);
        cr_expect(r.act_peak < base.act_peak, "%s %s %s: MEM_ACT peak %zu, not below no recompute's %zu",
                  model_arch_name(arch), model_compute_name(compute), policies[i].name, r.act_peak, base.act_peak);
        free(r.grads);
    }
    free(base.grads);
}

/* ---------------------------------------------------------------- gradients and loss, bit for bit */

Test(recompute, gpt2_fp32_gradients_identical) { check_identical(MODEL_GPT2, MODEL_COMPUTE_FP32); }
Test(recompute, llama_fp32_gradients_identical) { check_identical(MODEL_LLAMA, MODEL_COMPUTE_FP32); }
Test(recompute, gpt2_bf16_gradients_identical) { check_identical(MODEL_GPT2, MODEL_COMPUTE_BF16); }
Test(recompute, llama_bf16_gradients_identical) { check_identical(MODEL_LLAMA, MODEL_COMPUTE_BF16); }
Test(recompute, gpt2_fp16_gradients_identical) { check_identical(MODEL_GPT2, MODEL_COMPUTE_FP16); }
Test(recompute, llama_fp16_gradients_identical) { check_identical(MODEL_LLAMA, MODEL_COMPUTE_FP16); }
Test(recompute, tf32_and_fp8_gradients_identical) {
    /* fp8: the recompute must not record its inputs' amax a second time, or step 2's scales would differ */
    check_identical(MODEL_GPT2, MODEL_COMPUTE_TF32);
    check_identical(MODEL_LLAMA, MODEL_COMPUTE_FP8);
}

/* ---------------------------------------------------------------- the policy table */

Test(recompute, which_blocks_keep_what) {
    for (int l = 0; l < 12; l++) {
        cr_expect_eq(model_block_keeps(MODEL_RECOMPUTE_NONE, 1, l), MODEL_KEEP_ALL);
        cr_expect_eq(model_block_keeps(MODEL_RECOMPUTE_EVERY, 1, l), MODEL_KEEP_INPUT);
        cr_expect_eq(model_block_keeps(MODEL_RECOMPUTE_SELECTIVE, 1, l), MODEL_KEEP_NO_SCORES);
        cr_expect_eq(model_block_keeps(MODEL_RECOMPUTE_EVERY_K, 1, l), MODEL_KEEP_INPUT, "k = 1 is every");
        cr_expect_eq(model_block_keeps(MODEL_RECOMPUTE_EVERY_K, 3, l), l % 3 == 0 ? MODEL_KEEP_INPUT : MODEL_KEEP_ALL,
                     "every_k = 3, block %d", l);
    }
    for (int r = 0; r < MODEL_NRECOMPUTES; r++)
        cr_expect_eq(model_recompute_from_name(model_recompute_name((model_recompute)r)), r);
    cr_expect_eq(model_recompute_from_name("full"), -1);
}

Test(recompute, bad_every_k_is_bad_input, .exit_code = 2) {
    model_config c = small(MODEL_GPT2);
    model *m = model_create(&c);
    model_set_recompute(m, MODEL_RECOMPUTE_EVERY_K, 0);
}

Test(recompute, bad_policy_is_bad_input, .exit_code = 2) {
    model_config c = small(MODEL_GPT2);
    model *m = model_create(&c);
    model_set_recompute(m, (model_recompute)9, 1);
}

/* ---------------------------------------------------------------- memory */

Test(recompute, fp32_peak_is_the_layout_and_falls_as_predicted) {
    model_config c = small(MODEL_GPT2);
    size_t N = (size_t)B * T, C = (size_t)c.C, att = (size_t)B * c.NH * T * T;
    /* Per position, what a block keeps with no recompute: ln1, qkv (3C), atty, res2, ln2, fch (4C), fch_act (4C),
     * res3 = 16C; two LayerNorms' mean and rstd (4); plus att. Every size here is a multiple of 16 floats. */
    size_t block = N * (16 * C + 4) + att, boundary = N * C;
    size_t none = model_activation_bytes_policy(&c, B, T, MODEL_RECOMPUTE_NONE, 1, NULL);
    for (int i = 0; i < NPOLICIES; i++) {
        model_activation_split s;
        size_t bytes = model_activation_bytes_policy(&c, B, T, policies[i].policy, policies[i].k, &s);
        size_t checkpointed = 0;
        for (int l = 0; l < c.L; l++) checkpointed += model_block_keeps(policies[i].policy, policies[i].k, l) == MODEL_KEEP_INPUT;
        size_t blocks, recompute;
        if (policies[i].policy == MODEL_RECOMPUTE_SELECTIVE) {
            blocks = c.L * (block - att);
            recompute = att; /* one att, refilled block by block */
        } else {
            blocks = (c.L - checkpointed) * block + checkpointed * boundary;
            recompute = checkpointed ? block - boundary : 0; /* one block's set; its output is its own */
        }
        cr_expect_eq(s.blocks, blocks * 4, "%s: blocks keep %zu bytes, expected %zu", policies[i].name, s.blocks, blocks * 4);
        cr_expect_eq(s.recompute, recompute * 4, "%s: recompute buffers %zu bytes, expected %zu", policies[i].name,
                     s.recompute, recompute * 4);
        cr_expect_eq(s.outside, none - (size_t)c.L * block * 4, "%s: nothing outside the blocks changes", policies[i].name);
        cr_expect_eq(s.total, bytes);
        cr_expect_eq(bytes, s.blocks + s.recompute + s.outside);

        run_result r = run(MODEL_GPT2, MODEL_COMPUTE_FP32, policies[i].policy, policies[i].k);
        cr_expect_eq(r.act_peak, bytes, "%s: measured MEM_ACT peak %zu, the layout says %zu", policies[i].name,
                     r.act_peak, bytes);
        free(r.grads);
    }
}

Test(recompute, low_precision_peak_falls_too) {
    size_t peaks[NPOLICIES];
    for (int i = 0; i < NPOLICIES; i++) {
        run_result r = run(MODEL_GPT2, MODEL_COMPUTE_BF16, policies[i].policy, policies[i].k);
        peaks[i] = r.act_peak;
        free(r.grads);
    }
    /* none > every_k=3 > every_k=2 > every; selective below none */
    cr_expect(peaks[0] > peaks[3] && peaks[3] > peaks[2] && peaks[2] > peaks[1], "bf16 peaks none %zu, every_k=3 %zu, "
              "every_k=2 %zu, every %zu", peaks[0], peaks[3], peaks[2], peaks[1]);
    cr_expect_eq(peaks[4], peaks[1], "every_k = 1 is every");
    cr_expect(peaks[5] < peaks[0]);
}

/* The planner's activation bytes for the model's run (fp32, no dropout). plan has none, selective and full;
 * every_k is composed from its per-block figures: checkpointed blocks keep their input, the others
 * everything, and one block's full set is rebuilt at a time. */
static uint64_t plan_bytes(const model_config *c, int b, int s, model_recompute policy, int k) {
    plan_model pm = {.arch = c->arch == MODEL_GPT2 ? PLAN_ARCH_GPT2 : PLAN_ARCH_LLAMA, .layers = (uint64_t)c->L,
                     .hidden = (uint64_t)c->C, .heads = (uint64_t)c->NH, .kv_heads = (uint64_t)c->KVH,
                     .ffn = (uint64_t)c->F, .vocab = (uint64_t)c->V, .context = (uint64_t)c->maxT,
                     .tied_head = c->tied};
    snprintf(pm.name, sizeof pm.name, "test");
    plan_run run = plan_run_defaults(&pm);
    run.recipe = PLAN_RECIPE_FP32;
    run.batch = (uint64_t)b;
    run.seq = (uint64_t)s;
    run.dropout = false;
    static const plan_recompute as_plan[] = {[MODEL_RECOMPUTE_NONE] = PLAN_RECOMPUTE_NONE,
                                             [MODEL_RECOMPUTE_EVERY] = PLAN_RECOMPUTE_FULL,
                                             [MODEL_RECOMPUTE_EVERY_K] = PLAN_RECOMPUTE_FULL,
                                             [MODEL_RECOMPUTE_SELECTIVE] = PLAN_RECOMPUTE_SELECTIVE};
    run.recompute = as_plan[policy];
    plan_activations act;
    plan_activation_bytes(&pm, &run, &act);
    if (policy != MODEL_RECOMPUTE_EVERY_K) return act.total;
    uint64_t checkpointed = 0;
    for (int l = 0; l < c->L; l++) checkpointed += model_block_keeps(policy, k, l) == MODEL_KEEP_INPUT;
    return checkpointed * act.block_kept + (c->L - checkpointed) * act.block_full + act.working_set + act.outside;
}

/* The fp32 model's activation bytes from the planner's, exactly: the planner counts Korthikanti et al.'s
 * tensors; the model holds a few more, each named here (floats, N = b*s positions):
 *   - norm statistics: the planner counts none; the model keeps mean and rstd per LayerNorm position (gpt2),
 *     rstd per RMSNorm position (llama), for both norms of every block that keeps its own, of the shared
 *     recompute set, and for the final norm;
 *   - selective: the planner drops att and counts no working set; the model rebuilds one block's att at a
 *     time, into one shared (b, a, s, s) buffer;
 *   - full recompute: the planner's working set is one whole block (16 sbh + a s^2 b), whose input is the
 *     checkpointed input it has already counted; the model rebuilds the block beside that input, one sbh less;
 *   - the logits: the planner has V columns, the model the padded Vp, plus the loss, log-sum-exp and
 *     loss gradient (3 N);
 *   - backward's gradient scratch, one block's: the residual stream's, a norm output's, the attention
 *     output's, q/k/v's, the MLP's two inner tensors', and a projection's output (4C + QKV + FC + F).
 * Exact when every tensor is a multiple of 16 floats (the layout's alignment): N a multiple of 16. */
static size_t model_from_plan(const model_config *c, int b, int s, model_recompute policy, int k, uint64_t *planned) {
    size_t N = (size_t)b * s, C = (size_t)c->C, QKV = (size_t)(c->NH + 2 * c->KVH) * (C / c->NH),
           FC = c->arch == MODEL_LLAMA ? 2 * (size_t)c->F : (size_t)c->F, att = (size_t)b * c->NH * s * s;
    size_t stats_per_norm = (c->arch == MODEL_GPT2 ? 2 : 1) * N, checkpointed = 0;
    for (int l = 0; l < c->L; l++) checkpointed += model_block_keeps(policy, k, l) == MODEL_KEEP_INPUT;
    size_t stat_sets = (c->L - checkpointed) + (checkpointed ? 1 : 0);
    size_t extra = stat_sets * 2 * stats_per_norm + stats_per_norm                 /* norm statistics */
                   + (policy == MODEL_RECOMPUTE_SELECTIVE ? att : 0)               /* selective's att */
                   + N * (size_t)(c->Vp - c->V) + 3 * N                            /* padding, loss */
                   + N * (4 * C + QKV + FC + c->F);                                /* gradient scratch */
    size_t overcount = checkpointed ? N * C : 0;                                   /* full working set */
    *planned = plan_bytes(c, b, s, policy, k);
    return (size_t)*planned + (extra - overcount) * 4;
}

/* The measured fp32 peak is the planner's figure plus the extras model_from_plan names, to the byte. */
static void check_against_plan(model_arch arch) {
    model_config c = small(arch);
    for (int i = 0; i < NPOLICIES; i++) {
        uint64_t planned;
        size_t expected = model_from_plan(&c, B, T, policies[i].policy, policies[i].k, &planned);
        run_result r = run(arch, MODEL_COMPUTE_FP32, policies[i].policy, policies[i].k);
        cr_expect_eq(r.act_peak, expected, "%s %s: measured %zu bytes; plan %llu + the model's extras = %zu",
                     model_arch_name(arch), policies[i].name, r.act_peak, (unsigned long long)planned, expected);
        free(r.grads);
    }
}

Test(recompute, fp32_peak_against_the_planner_gpt2) { check_against_plan(MODEL_GPT2); }
Test(recompute, fp32_peak_against_the_planner_llama) { check_against_plan(MODEL_LLAMA); }

/* The same accounting at GPT-2 124M's size (the layout only; it is what the peak is, checked above), at
 * the benchmark's B=4, T=64 and at the full context. bench/recompute prints the ratios. */
Test(recompute, gpt2_124m_layout_against_the_planner) {
    model_config c = {.arch = MODEL_GPT2, .V = 50257, .maxT = 1024, .L = 12, .C = 768, .NH = 12, .tied = true};
    model_config_complete(&c);
    const int Ts[] = {64, 1024};
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < NPOLICIES; i++) {
            uint64_t planned;
            size_t expected = model_from_plan(&c, 4, Ts[j], policies[i].policy, policies[i].k, &planned);
            size_t bytes = model_activation_bytes_policy(&c, 4, Ts[j], policies[i].policy, policies[i].k, NULL);
            cr_expect_eq(bytes, expected, "T=%d %s: layout %zu bytes; plan %llu + the model's extras = %zu", Ts[j],
                         policies[i].name, bytes, (unsigned long long)planned, expected);
        }
}

/* ---------------------------------------------------------------- hooks: the order ZeRO-3 relies on */

typedef struct {
    model *m;
    const float *saved; /* the true parameters */
    int calls[64][2];   /* (kind, layer) */
    int ncalls;
} hook_log;

static void log_call(hook_log *h, int kind, int layer) {
    if (h->ncalls < 64) {
        h->calls[h->ncalls][0] = kind;
        h->calls[h->ncalls][1] = layer;
    }
    h->ncalls++;
}

static void restore_span(hook_log *h, int layer) {
    size_t off, n;
    model_layer_span(h->m, layer, &off, &n);
    memcpy(model_params(h->m) + off, h->saved + off, n * sizeof(float));
}

/* What a ZeRO-3 gather in before_backward(layer) brings back: the layer's weights, and for the head (L)
 * the embedding too, which a tied head is. */
static void restore(hook_log *h, int layer) {
    restore_span(h, layer);
    if (layer == model_get_config(h->m)->L) restore_span(h, -1);
}

static void on_before_forward(void *ctx, int layer) { log_call(ctx, 0, layer); }
static void on_before_backward(void *ctx, int layer) {
    log_call(ctx, 1, layer);
    restore(ctx, layer);
}
static void on_grads_ready(void *ctx, int layer) { log_call(ctx, 2, layer); }

/* ZeRO-3 frees a layer's gathered weights after use and gathers them again in before_backward(l): here
 * every weight is NaN between forward and backward, and each hook restores its layer. A recompute that
 * ran before its block's hook would read NaN weights, and the gradients would show it. */
static void check_hook_order(model_compute compute) {
    model_config c = small(MODEL_GPT2);
    int inputs[B * T], targets[B * T];
    batch(inputs, targets, c.V, 3);
    float *reference = NULL;
    hook_log logs[NPOLICIES];
    for (int i = 0; i < NPOLICIES; i++) {
        model *m = model_create(&c);
        model_init(m, 5);
        if (compute != MODEL_COMPUTE_FP32) {
            model_precision p = {.compute = compute};
            model_set_precision(m, &p);
        }
        model_set_recompute(m, policies[i].policy, policies[i].k);
        size_t n = model_num_params(m);
        float *saved = malloc(n * sizeof(float));
        memcpy(saved, model_params(m), n * sizeof(float));
        hook_log *h = &logs[i];
        *h = (hook_log){.m = m, .saved = saved};
        model_hooks hooks = {on_before_forward, on_before_backward, on_grads_ready, h};
        model_set_hooks(m, &hooks);
        model_zero_grad(m);
        model_forward(m, inputs, targets, B, T);
        for (size_t j = 0; j < n; j++) model_params(m)[j] = NAN;
        model_backward(m, 1.0f);
        if (!reference) {
            reference = malloc(n * sizeof(float));
            memcpy(reference, model_grads(m), n * sizeof(float));
        } else {
            cr_expect(memcmp(reference, model_grads(m), n * sizeof(float)) == 0,
                      "%s %s: gradients differ from no recompute when the weights come back only in "
                      "before_backward(l): the recompute must run after that hook", model_compute_name(compute),
                      policies[i].name);
            cr_expect_eq(h->ncalls, logs[0].ncalls, "%s: %d hook calls, %d without recompute", policies[i].name,
                         h->ncalls, logs[0].ncalls);
            cr_expect(memcmp(h->calls, logs[0].calls, sizeof h->calls) == 0, "%s: the hooks ran in another order",
                      policies[i].name);
        }
        free(saved);
        model_free(m);
    }
    free(reference);
}

Test(recompute, fp32_recompute_runs_after_before_backward) { check_hook_order(MODEL_COMPUTE_FP32); }
Test(recompute, bf16_recompute_runs_after_before_backward) { check_hook_order(MODEL_COMPUTE_BF16); }

/* ---------------------------------------------------------------- switching */

Test(recompute, switching_policy_frees_the_old_layout) {
    model_config c = small(MODEL_LLAMA);
    model *m = model_create(&c);
    model_init(m, 1);
    int inputs[B * T], targets[B * T];
    batch(inputs, targets, c.V, 11);
    size_t before = mem_current(MEM_ACT);
    model_forward(m, inputs, targets, B, T);
    cr_expect_eq(mem_current(MEM_ACT) - before, model_activation_bytes(&c, B, T));
    model_set_recompute(m, MODEL_RECOMPUTE_EVERY, 1);
    cr_expect_eq(mem_current(MEM_ACT), before, "a new policy frees the old activations");
    int k = 0;
    cr_expect_eq(model_get_recompute(m, &k), MODEL_RECOMPUTE_EVERY);
    model_forward(m, inputs, targets, B, T);
    cr_expect_eq(mem_current(MEM_ACT) - before, model_activation_bytes_policy(&c, B, T, MODEL_RECOMPUTE_EVERY, 1, NULL));
    model_free(m);
    cr_expect_eq(mem_current(MEM_ACT), before);
}

/* ---------------------------------------------------------------- the config section */

static bool parse(const char *ckpt_json, train_config *cfg, data_err *err) {
    char json[1024];
    snprintf(json, sizeof json,
             "{\"train_micro_batch_size_per_gpu\": 4, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}},"
             " \"model\": {\"arch\": \"gpt2\", \"layers\": 2, \"channels\": 32, \"heads\": 4, \"context\": 16},"
             " \"data\": {\"dataset\": \"addition\"}, \"train\": {\"steps\": 10}%s%s}",
             ckpt_json ? ", \"activation_checkpointing\": " : "", ckpt_json ? ckpt_json : "");
    cJSON *root = cJSON_Parse(json);
    cr_assert_not_null(root, "%s", json);
    bool ok = config_parse(root, 1, cfg, err);
    cJSON_Delete(root);
    return ok;
}

Test(recompute, config_section_defaults_parses_and_dumps) {
    train_config cfg;
    data_err err;
    cr_assert(parse(NULL, &cfg, &err), "%s", err.found);
    cr_expect_eq(cfg.ckpt.policy, MODEL_RECOMPUTE_NONE);
    cr_expect_eq(cfg.ckpt.every_k, 2);
    cr_assert(parse("{\"policy\": \"every_k\", \"every_k\": 3}", &cfg, &err), "%s", err.found);
    cr_expect_eq(cfg.ckpt.policy, MODEL_RECOMPUTE_EVERY_K);
    cr_expect_eq(cfg.ckpt.every_k, 3);
    char *text = config_dump(&cfg);
    cr_expect(strstr(text, "\"activation_checkpointing\"") && strstr(text, "\"every_k\""), "%s", text);
    cJSON *root = cJSON_Parse(text);
    train_config again;
    cr_expect(config_parse(root, 1, &again, &err), "the dump parses back: %s", err.found);
    cr_expect_eq(again.ckpt.policy, MODEL_RECOMPUTE_EVERY_K);
    cr_expect_eq(again.ckpt.every_k, 3);
    cJSON_Delete(root);
    free(text);
    for (int r = 0; r < MODEL_NRECOMPUTES; r++) {
        char sect[128];
        snprintf(sect, sizeof sect, "{\"policy\": \"%s\"}", model_recompute_name((model_recompute)r));
        cr_expect(parse(sect, &cfg, &err) && cfg.ckpt.policy == r, "%s", sect);
    }
}

Test(recompute, config_section_rejects_what_it_does_not_do) {
    train_config cfg;
    data_err err;
    cr_expect(!parse("{\"policy\": \"full\"}", &cfg, &err));
    cr_expect(strstr(err.expected, "\"selective\"") && strstr(err.found, "activation_checkpointing.policy"),
              "expected: %s; found: %s", err.expected, err.found);
    cr_expect(!parse("{\"policy\": \"every_k\", \"every_k\": 0}", &cfg, &err));
    cr_expect(strstr(err.found, "activation_checkpointing.every_k"), "%s", err.found);
    /* DeepSpeed's own keys tune its checkpoint() wrapper, which mixpar does not have (config.h) */
    cr_expect(!parse("{\"partition_activations\": false}", &cfg, &err));
    cr_expect(strstr(err.found, "activation_checkpointing.partition_activations: unknown key") &&
              strstr(err.hint, "policy, every_k"), "found: %s; hint: %s", err.found, err.hint);
}

/* ---------------------------------------------------------------- the low-precision counters */

/* The underflow counters (model_lowp.h) count what forward stores and backward rounds once per step: a
 * recompute rounds the same tensors again and must not count them twice. Selective stores no att, so its
 * activation counts are none's minus the L att tensors; its gradient counts are none's. */
static void rounding_of(model_compute compute, model_recompute policy, int k, model_layer_rounding *out, int *n) {
    model_config c = small(MODEL_LLAMA);
    model *m = model_create(&c);
    model_init(m, 3);
    model_precision p = {.compute = compute};
    model_set_precision(m, &p);
    model_set_recompute(m, policy, k);
    model_rounding_enable(m, true);
    int inputs[B * T], targets[B * T];
    batch(inputs, targets, c.V, 21);
    model_zero_grad(m);
    model_forward(m, inputs, targets, B, T);
    model_backward(m, 1.0f);
    const model_layer_rounding *r = model_rounding(m, n);
    memcpy(out, r, (size_t)*n * sizeof *r);
    model_free(m);
}

Test(recompute, rounding_counters_count_each_tensor_once) {
    const model_compute modes[] = {MODEL_COMPUTE_BF16, MODEL_COMPUTE_FP16};
    model_config c = small(MODEL_LLAMA);
    uint64_t natt = (uint64_t)B * c.NH * T * T;
    for (int j = 0; j < 2; j++) {
        model_layer_rounding none[16], got[16];
        int n = 0, n2 = 0;
        rounding_of(modes[j], MODEL_RECOMPUTE_NONE, 1, none, &n);
        cr_assert_eq(n, c.L + 2);
        for (int i = 1; i < NPOLICIES; i++) {
            rounding_of(modes[j], policies[i].policy, policies[i].k, got, &n2);
            bool selective = policies[i].policy == MODEL_RECOMPUTE_SELECTIVE;
            for (int l = 0; l < n; l++) {
                model_layer_rounding want = none[l];
                bool block = l >= 1 && l <= c.L;
                if (selective && block) want.acts.values -= natt; /* att is not stored */
                cr_expect(memcmp(&got[l].grads, &want.grads, sizeof want.grads) == 0,
                          "%s %s layer %d: gradient counts %llu values, %llu without recompute",
                          model_compute_name(modes[j]), policies[i].name, l - 1,
                          (unsigned long long)got[l].grads.values, (unsigned long long)want.grads.values);
                cr_expect_eq(got[l].acts.values, want.acts.values, "%s %s layer %d: %llu activation values counted, "
                             "expected %llu", model_compute_name(modes[j]), policies[i].name, l - 1,
                             (unsigned long long)got[l].acts.values, (unsigned long long)want.acts.values);
                if (!selective)
                    cr_expect(memcmp(&got[l].acts, &want.acts, sizeof want.acts) == 0, "%s %s layer %d: activation "
                              "counts differ", model_compute_name(modes[j]), policies[i].name, l - 1);
            }
        }
    }
}
