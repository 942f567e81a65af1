/* test_translate.c: Criterion tests of core/train/translate (DeepSpeed, Megatron-LM, FSDP and Horovod settings as a
 * mixpar config, loaded by the real loader) and of core/dist/fusion's plan for a model (ready order, complete
 * buffers per layer). */
#include "dist/fusion.h"
#include "train/translate.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *base_json =
    "{\"train_micro_batch_size_per_gpu\": 4, \"gradient_accumulation_steps\": 1,"
    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}},"
    " \"model\": {\"arch\": \"gpt2\", \"layers\": 2, \"channels\": 32, \"heads\": 4, \"context\": 16},"
    " \"data\": {\"dataset\": \"addition\"}, \"train\": {\"steps\": 10}}";

/* Translates text and loads it over the base for `world` ranks. */
static void translate(tr_framework f, const char *text, int world, tr_result *r) {
    data_err err = {0};
    cr_assert(tr_translate_text(f, text, "test", r, &err), "translation failed: %s (expected %s)", err.found, err.expected);
    cJSON *base = cJSON_Parse(base_json);
    tr_finish(r, base, world);
    cJSON_Delete(base);
}

static const cJSON *at(const tr_result *r, const char *path) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *o = r->config;
    for (char *s = strtok(buf, "."); s && o; s = strtok(NULL, ".")) o = cJSON_GetObjectItemCaseSensitive(o, s);
    return o;
}

static double num(const tr_result *r, const char *path) {
    const cJSON *o = at(r, path);
    return cJSON_IsNumber(o) ? o->valuedouble : cJSON_IsBool(o) ? cJSON_IsTrue(o) : NAN;
}

static const tr_note *note(const tr_result *r, const char *from) {
    for (int i = 0; i < r->nnotes; i++)
        if (strcmp(r->notes[i].from, from) == 0) return &r->notes[i];
    return NULL;
}

Test(translate, deepspeed_zero3_offload_bf16) {
    tr_result r;
    translate(TR_DEEPSPEED,
              "{\"train_batch_size\": 16, \"bf16\": {\"enabled\": true},"
              " \"zero_optimization\": {\"stage\": 3, \"stage3_max_live_parameters\": 1e9, \"reduce_bucket_size\": 1e7,"
              "  \"offload_optimizer\": {\"device\": \"cpu\"}, \"offload_param\": {\"device\": \"cpu\", \"nvme_path\": \"/x\"}},"
              " \"wall_clock_breakdown\": false}",
              2, &r);
    cr_assert(r.runnable, "does not load: %s", r.load_error);
    cr_expect_eq(num(&r, "zero_optimization.stage"), 3);
    cr_expect_eq(num(&r, "zero_optimization.reduce_bucket_size"), 1e7);
    cr_expect_str_eq(cJSON_GetStringValue(at(&r, "zero_optimization.offload_optimizer.device")), "cpu");
    cr_expect_eq(num(&r, "bf16.enabled"), 1);
    /* 16 = micro 4 (the base's) x accumulation 2 x world 2: the base's accumulation gave way */
    cr_expect_eq(num(&r, "gradient_accumulation_steps"), 2);
    const tr_note *n = note(&r, "zero_optimization.offload_param.nvme_path");
    cr_assert_not_null(n, "offload_param.nvme_path must be reported");
    cr_expect(strstr(n->reason, "not implemented") != NULL, "reason: %s", n->reason);
    cr_expect_not_null(note(&r, "zero_optimization.offload_param.device"));
    cr_expect_not_null(note(&r, "zero_optimization.stage3_max_live_parameters"));
    cr_expect_not_null(note(&r, "wall_clock_breakdown"));
    cr_expect_eq(r.nnotes, 4);
    tr_result_free(&r);
}

Test(translate, deepspeed_unknown_key_is_reported_not_an_error) {
    tr_result r;
    translate(TR_DEEPSPEED, "{\"train_micro_batch_size_per_gpu\": 2, \"elasticity\": {\"enabled\": true}}", 1, &r);
    cr_assert(r.runnable, "%s", r.load_error);
    cr_expect_not_null(note(&r, "elasticity.enabled"));
    tr_result_free(&r);
}

Test(translate, megatron_model_parallel_keys_map_and_context_parallel_is_not_yet_runnable) {
    tr_result r;
    translate(TR_MEGATRON,
              "--tensor-model-parallel-size 2 --sequence-parallel --context-parallel-size 2 --num-layers 3 "
              "--micro-batch-size 2",
              2, &r);
    cr_assert(r.runnable, "%s", r.load_error);
    /* tensor and sequence parallel are in the core (2 ranks: one tp group of 2): Megatron's own key names */
    cr_expect_eq(num(&r, "tensor_model_parallel_size"), 2);
    cr_expect(cJSON_IsTrue(at(&r, "sequence_parallel")), "--sequence-parallel -> sequence_parallel: true");
    cr_expect_null(note(&r, "--sequence-parallel"), "sequence parallel loads: no note");
    /* context parallel is not: the loader does not know the key, so it is listed and left out */
    const tr_note *n = note(&r, "--context-parallel-size");
    cr_assert_not_null(n);
    cr_expect_eq(n->kind, TR_NOTE_NOT_YET_RUNNABLE);
    cr_expect_null(at(&r, "context_parallel_size"), "left out of the config that loads");
    cr_expect_eq(num(&r, "model.layers"), 3);
    tr_result_free(&r);
}

Test(translate, megatron_conversions) {
    tr_result r;
    translate(TR_MEGATRON,
              "--adam-beta2 0.95 --initial-loss-scale 4096 --fp16 --train-iters 100 --lr-warmup-fraction 0.05 \\\n"
              "  --lr-decay-style cosine   # a comment\n --swiglu --micro-batch-size 4",
              1, &r);
    cr_assert(r.runnable, "%s", r.load_error);
    const cJSON *betas = at(&r, "optimizer.params.betas");
    cr_assert(cJSON_GetArraySize(betas) == 2);
    cr_expect_float_eq(cJSON_GetArrayItem(betas, 0)->valuedouble, 0.9, 1e-12);
    cr_expect_float_eq(cJSON_GetArrayItem(betas, 1)->valuedouble, 0.95, 1e-12);
    cr_expect_eq(num(&r, "fp16.initial_scale_power"), 12);
    cr_expect_eq(num(&r, "scheduler.params.warmup_steps"), 5);
    cr_expect_str_eq(cJSON_GetStringValue(at(&r, "scheduler.type")), "warmup_cosine");
    cr_expect_str_eq(cJSON_GetStringValue(at(&r, "model.arch")), "llama");
    tr_result_free(&r);
    data_err err = {0};
    cr_expect_not(tr_translate_text(TR_MEGATRON, "--initial-loss-scale 1000", "t", &r, &err), "1000 is no power of 2");
    cr_expect(strstr(err.found, "1000") != NULL, "%s", err.found);
}

Test(translate, fsdp_bf16_goes_through_the_pytorch_mapping) {
    tr_result r;
    translate(TR_FSDP,
              "sharding_strategy: ShardingStrategy.HYBRID_SHARD\ndevice_mesh: (1, 2)\n"
              "mixed_precision.param_dtype: torch.bfloat16   # compute dtype\nforward_prefetch = True\n",
              2, &r);
    cr_assert(r.runnable, "%s", r.load_error);
    cr_expect_str_eq(cJSON_GetStringValue(at(&r, "fsdp.sharding_strategy")), "HYBRID_SHARD");
    cr_expect_eq(num(&r, "fsdp.hybrid_shard_size"), 2);
    cr_expect_eq(num(&r, "fsdp.forward_prefetch"), 1);
    cr_expect_str_eq(cJSON_GetStringValue(at(&r, "precision.torch_autocast")), "bfloat16");
    tr_result_free(&r);
    data_err err = {0};
    cr_expect_not(tr_translate_text(TR_FSDP, "mixed_precision.param_dtype: torch.int8\n", "t", &r, &err),
                  "int8 is no autocast dtype: lab 08's mapping refuses it");
    cr_expect_not(tr_translate_text(TR_FSDP, "\n\nforward_prefetch\n", "f.txt", &r, &err));
    cr_expect(strstr(err.found, "f.txt:3") != NULL, "the line: %s", err.found);
}

Test(translate, horovod_env_and_json) {
    tr_result r;
    translate(TR_HOROVOD, "export HOROVOD_FUSION_THRESHOLD=1048576\ncompression=hvd.Compression.fp16\nop=Sum\n", 2, &r);
    cr_assert(r.runnable, "%s", r.load_error);
    cr_expect_eq(num(&r, "communication.fusion"), 1);
    cr_expect_eq(num(&r, "communication.fusion_threshold"), 1048576);
    cr_expect_str_eq(cJSON_GetStringValue(at(&r, "communication.hook")), "fp16");
    cr_expect_not_null(note(&r, "op"), "Sum is not an average");
    tr_result_free(&r);
    translate(TR_HOROVOD, "{\"HOROVOD_FUSION_THRESHOLD\": 0, \"backward_passes_per_step\": 2}", 2, &r);
    cr_assert(r.runnable, "%s", r.load_error);
    cr_expect_eq(num(&r, "communication.fusion_threshold"), 0);
    cr_expect_eq(num(&r, "gradient_accumulation_steps"), 2);
    cr_expect_eq(num(&r, "train_micro_batch_size_per_gpu"), 4, "the base's micro-batch stays");
    tr_result_free(&r);
}

Test(translate, bad_json_names_line_and_offset) {
    tr_result r;
    data_err err = {0};
    cr_expect_not(tr_translate_text(TR_DEEPSPEED, "{\n  \"a\": 1,\n}", "ds.json", &r, &err));
    cr_expect(strstr(err.found, "line 3") != NULL && strstr(err.found, "byte offset") != NULL, "%s", err.found);
}

Test(translate, every_table_names_each_setting_once) {
    for (int f = 0; f < TR_NFRAMEWORKS; f++) {
        const tr_table *t = tr_table_get((tr_framework)f);
        cr_expect_eq(tr_framework_from_name(t->name), f);
        for (int i = 0; i < t->nrules; i++) {
            cr_expect(t->rules[i].to && t->rules[i].to[0], "%s: %s has no mixpar key or concept", t->name, t->rules[i].from);
            cr_expect(t->rules[i].kind != TR_UNSUPPORTED || t->rules[i].note, "%s: %s has no reason", t->name,
                      t->rules[i].from);
            for (int j = 0; j < i; j++) cr_expect_str_neq(t->rules[i].from, t->rules[j].from, "%s twice", t->rules[i].from);
        }
    }
}

/* A model of 3 layers (-1, 0, 1) with 5 tensors: the plan, then which buffers each layer's readiness completes. */
Test(fusion, plan_in_ready_order_and_complete_buffers) {
    model_tensor t[5] = {
        {.name = "emb", .offset = 0, .size = 6, .layer = -1},  {.name = "a", .offset = 6, .size = 2, .layer = 0},
        {.name = "b", .offset = 8, .size = 3, .layer = 0},     {.name = "c", .offset = 11, .size = 1, .layer = 1},
        {.name = "d", .offset = 12, .size = 4, .layer = 1},
    };
    fusion *f = fusion_create(t, 5, 6);
    /* ready order: d(4) c(1) | b(3) a(2) | emb(6) -> {d, c} {b, a} {emb} */
    cr_assert_eq(fusion_buffers(f), 3);
    int n;
    const fusion_entry *e = fusion_buffer_entries(f, 0, &n);
    cr_assert_eq(n, 2);
    cr_expect(e[0].offset == 12 && e[1].offset == 11, "the head's layer, its last tensor first");
    size_t lo, hi;
    fusion_buffer_span(f, 1, &lo, &hi);
    cr_expect(lo == 6 && hi == 11, "buffer 1 spans [%zu, %zu)", lo, hi);
    fusion_start(f);
    cr_expect_eq(fusion_next_complete(f, 1), 0);
    cr_expect_eq(fusion_next_complete(f, 1), -1);
    cr_expect_eq(fusion_next_complete(f, 0), 1);
    cr_expect_eq(fusion_next_complete(f, 0), -1);
    cr_expect_eq(fusion_next_complete(f, -1), 2);
    cr_expect_eq(fusion_next_complete(f, -1), -1);
    fusion_start(f); /* the next backward */
    cr_expect_eq(fusion_next_complete(f, 1), 0);
    fusion_free(f);
}
