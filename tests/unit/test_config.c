/* test_config.c: Criterion tests of core/train/config: the ready configs, the batch rule, presets, every kind of bad
 * key or value (with its message), --set overrides and the resolved dump. */
#include "unit_files.h"
#include "data/tokenizer.h"
#include "train/config.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

/* A small complete config: everything else takes its default. */
static const char *base_json =
    "{\"train_micro_batch_size_per_gpu\": 4,"
    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}},"
    " \"model\": {\"arch\": \"gpt2\", \"layers\": 2, \"channels\": 32, \"heads\": 4, \"context\": 16},"
    " \"data\": {\"dataset\": \"addition\"},"
    " \"train\": {\"steps\": 10}}";

/* Parses json after applying the overrides (NULL-terminated). */
static bool parse_with(const char *json, const char *const *sets, int world, train_config *cfg, data_err *err) {
    cJSON *root = cJSON_Parse(json);
    cr_assert_not_null(root, "test JSON does not parse: %s", json);
    bool ok = true;
    for (int i = 0; ok && sets && sets[i]; i++) ok = config_set(root, sets[i], err);
    ok = ok && config_parse(root, world, cfg, err);
    cJSON_Delete(root);
    return ok;
}

static bool parse_base(const char *const *sets, train_config *cfg, data_err *err) {
    return parse_with(base_json, sets, 1, cfg, err);
}

/* Asserts that parsing fails and that the one-line message contains each of the wanted pieces. */
static void expect_error(const char *json, const char *const *sets, int world, const char *want1, const char *want2) {
    train_config cfg;
    data_err err;
    memset(&err, 0, sizeof err);
    bool ok = parse_with(json, sets, world, &cfg, &err);
    char line[2048];
    data_err_line(&err, line, sizeof line);
    cr_assert(!ok, "expected an error containing '%s' (override %s), but it parsed", want1,
              sets && sets[0] ? sets[0] : "none");
    cr_assert(strstr(line, want1), "message lacks '%s':\n  %s", want1, line);
    if (want2) cr_assert(strstr(line, want2), "message lacks '%s':\n  %s", want2, line);
}

static void expect_set_error(const char *set, const char *want1, const char *want2) {
    const char *sets[] = {set, NULL};
    expect_error(base_json, sets, 1, want1, want2);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "create %s", path);
    fputs(text, f);
    fclose(f);
}

/* dump -> parse -> dump gives the same text, so a dump is a complete description of the run. */
static void expect_dump_round_trip(const train_config *cfg) {
    char *first = config_dump(cfg);
    train_config again;
    data_err err;
    cJSON *root = cJSON_Parse(first);
    cr_assert_not_null(root);
    bool ok = config_parse(root, cfg->world, &again, &err);
    char line[2048];
    cr_assert(ok, "the dump does not parse back: %s\n%s", data_err_line(&err, line, sizeof line), first);
    cJSON_Delete(root);
    char *second = config_dump(&again);
    cr_assert_str_eq(second, first, "dump after a reparse differs");
    free(first);
    free(second);
}

/* ---------------------------------------------------------------- the ready configs */

Test(config, every_ready_config_parses_and_dumps_back) {
    DIR *d = opendir("configs");
    cr_assert_not_null(d, "run the tests from the repository root (configs/ not found)");
    int seen = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        char path[512];
        snprintf(path, sizeof path, "configs/%s", e->d_name);
        train_config cfg;
        data_err err;
        char line[2048];
        bool ok = config_load(path, NULL, 0, 1, &cfg, &err);
        cr_assert(ok, "%s: %s", path, data_err_line(&err, line, sizeof line));
        /* The run is named after the file. */
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(n - 5), e->d_name);
        cr_expect_str_eq(cfg.train.run_name, name, "%s", path);
        expect_dump_round_trip(&cfg);
        seen++;
    }
    closedir(d);
    cr_assert_geq(seen, 4, "the four ready configs are in configs/");
}

Test(config, tiny_poetry_is_the_documented_shape) {
    train_config cfg;
    cr_assert(config_load("configs/tiny-poetry.json", NULL, 0, 1, &cfg, NULL));
    const model_config *m = &cfg.model.model;
    cr_expect_eq(m->arch, MODEL_GPT2);
    cr_expect_eq(m->L, 4);
    cr_expect_eq(m->C, 128);
    cr_expect_eq(m->NH, 4);
    cr_expect_eq(m->KVH, 4);
    cr_expect_eq(m->F, 512, "GPT-2's MLP is 4C");
    cr_expect_eq(m->maxT, 64);
    cr_expect(m->tied);
    cr_expect(cfg.model.vocab_from_data, "no model.vocab: it comes from the dataset");
    cr_expect_eq(m->V, 0);
    cr_expect_eq(cfg.micro_batch, 16);
    cr_expect_eq(cfg.grad_accum, 1);
    cr_expect_eq(cfg.train_batch_size, 16);
    cr_expect_eq(cfg.optimizer.kind, OPTIM_ADAMW);
    cr_expect_eq(cfg.optimizer.h.lr, 1e-3);
    cr_expect_eq(cfg.scheduler.kind, LR_WARMUP_COSINE);
    cr_expect_eq(cfg.scheduler.total_steps, 300, "a scheduler without total_steps decays over train.steps");
    cr_expect_eq(cfg.train.steps, 300);
    cr_expect_eq(cfg.train.eval_interval, 50);
    cr_expect_str_eq(cfg.data.dataset, "poetry");
    cr_expect_eq(cfg.data.seq_len, 64);
    cr_expect_str_eq(cfg.train.run_dir, "runs/tiny-poetry");
    cr_expect_eq(cfg.gradient_clipping, 1.0);
}

Test(config, bench_config_is_gpt2_124m_at_b4_t64) {
    train_config cfg;
    cr_assert(config_load("configs/gpt2-124m-bench.json", NULL, 0, 1, &cfg, NULL));
    const model_config *m = &cfg.model.model;
    cr_expect_str_eq(cfg.model.preset, "gpt2-124m");
    cr_expect_eq(m->L, 12);
    cr_expect_eq(m->C, 768);
    cr_expect_eq(m->NH, 12);
    cr_expect_eq(m->F, 3072);
    cr_expect_eq(m->V, 50257);
    cr_expect_eq(m->maxT, 1024);
    cr_expect(!cfg.model.vocab_from_data, "a preset brings its vocabulary");
    cr_expect_eq(cfg.micro_batch, 4);
    cr_expect_eq(cfg.data.seq_len, 64);
}

Test(config, llama_config_keeps_grouped_heads) {
    train_config cfg;
    cr_assert(config_load("configs/tiny-llama-poetry.json", NULL, 0, 1, &cfg, NULL));
    cr_expect_eq(cfg.model.model.arch, MODEL_LLAMA);
    cr_expect_eq(cfg.model.model.KVH, 2);
    cr_expect_eq(cfg.model.model.F, 352);
    cr_expect(!cfg.model.model.tied);
    cr_expect_eq(cfg.model.model.rope_theta, 10000.0f);
}

/* ---------------------------------------------------------------- the batch rule */

typedef struct {
    int world;
    int total, micro, accum;       /* 0: key absent */
    int want_total, want_micro, want_accum; /* 0: an error is expected */
    const char *want_message;
} batch_case;

static const batch_case batch_cases[] = {
    {1, 0, 16, 0, 16, 16, 1, NULL},
    {4, 0, 16, 0, 64, 16, 1, NULL},
    {2, 64, 8, 0, 64, 8, 4, NULL},
    {4, 64, 0, 2, 64, 8, 2, NULL},
    {2, 0, 4, 8, 64, 4, 8, NULL},
    {4, 32, 0, 0, 32, 8, 1, NULL},
    {2, 64, 8, 4, 64, 8, 4, NULL},
    {2, 64, 8, 2, 0, 0, 0,
     "train_batch_size 64 but train_micro_batch_size_per_gpu 8 * gradient_accumulation_steps 2 * world 2 = 32"},
    {1, 10, 4, 0, 0, 0, 0, "train_batch_size 10 is not a multiple of train_micro_batch_size_per_gpu 4 * world 1"},
    {3, 64, 0, 2, 0, 0, 0, "not a multiple of gradient_accumulation_steps 2 * world 3"},
    {1, 0, 0, 4, 0, 0, 0, "train_batch_size or train_micro_batch_size_per_gpu"},
    {1, 0, 0, 0, 0, 0, 0, "train_batch_size or train_micro_batch_size_per_gpu"},
};

Test(config, batch_rule_infers_the_third_and_rejects_disagreement) {
    for (size_t i = 0; i < sizeof batch_cases / sizeof batch_cases[0]; i++) {
        const batch_case *c = &batch_cases[i];
        char json[1024];
        char keys[256] = "";
        size_t used = 0;
        if (c->total) used += (size_t)snprintf(keys + used, sizeof keys - used, "\"train_batch_size\": %d,", c->total);
        if (c->micro)
            used += (size_t)snprintf(keys + used, sizeof keys - used, "\"train_micro_batch_size_per_gpu\": %d,", c->micro);
        if (c->accum)
            used += (size_t)snprintf(keys + used, sizeof keys - used, "\"gradient_accumulation_steps\": %d,", c->accum);
        snprintf(json, sizeof json,
                 "{%s \"optimizer\": {\"type\": \"AdamW\"}, \"model\": {\"arch\": \"gpt2\", \"layers\": 1, "
                 "\"channels\": 8, \"heads\": 2, \"context\": 8}, \"data\": {\"dataset\": \"copy\"}, "
                 "\"train\": {\"steps\": 1}}",
                 keys);
        if (!c->want_total) {
            expect_error(json, NULL, c->world, c->want_message, NULL);
            continue;
        }
        train_config cfg;
        data_err err;
        char line[2048];
        cr_assert(parse_with(json, NULL, c->world, &cfg, &err), "case %zu: %s", i, data_err_line(&err, line, sizeof line));
        cr_expect_eq(cfg.train_batch_size, c->want_total, "case %zu: total", i);
        cr_expect_eq(cfg.micro_batch, c->want_micro, "case %zu: micro", i);
        cr_expect_eq(cfg.grad_accum, c->want_accum, "case %zu: accumulation", i);
        cr_expect_eq(cfg.world, c->world);
    }
}

Test(config, inconsistent_batch_names_the_rule) {
    const char *sets[] = {"train_batch_size=20", "gradient_accumulation_steps=1", NULL};
    expect_error(base_json, sets, 1, "train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * world",
                 "train_batch_size 20 but");
}

Test(config, inconsistent_batch_exits_2, .exit_code = 2) {
    const char *sets[] = {"train_batch_size=20", "gradient_accumulation_steps=1", NULL};
    train_config cfg;
    parse_with(base_json, sets, 1, &cfg, NULL);
}

/* ---------------------------------------------------------------- unknown keys and bad values */

Test(config, unknown_keys_name_the_path_and_the_closest_key) {
    static const char *const cases[][3] = {
        {"model.chanels=3", "model.chanels: unknown key; did you mean model.channels?", NULL},
        {"train.step=3", "train.step: unknown key; did you mean train.steps?", NULL},
        {"steps=3", "steps: unknown key; did you mean train.steps?", NULL},
        {"fp16.loss_scale_windows=10", "did you mean fp16.loss_scale_window?", NULL},
        {"zero_optimization.stage3_prefetch_bucket=1", "did you mean zero_optimization.stage3_prefetch_bucket_size?",
         NULL},
        {"zero_optimization.offload_optimizer.devce=\"cpu\"",
         "zero_optimization.offload_optimizer.devce: unknown key; did you mean zero_optimization.offload_optimizer.device?",
         NULL},
        {"Model.layers=2", "Model: unknown key; did you mean model?", NULL},
        {"train_micro_batch_size=4", "did you mean train_micro_batch_size_per_gpu?", NULL},
        {"data.seqlen=8", "did you mean data.seq_len?", NULL},
        {"train.xyzzy=1", "train.xyzzy: unknown key", "the keys here are: steps, eval_interval"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_set_error(cases[i][0], cases[i][1], cases[i][2]);
    /* Nothing is suggested when nothing is close. */
    train_config cfg;
    data_err err;
    const char *sets[] = {"train.xyzzy=1", NULL};
    cr_assert(!parse_base(sets, &cfg, &err));
    cr_expect_null(strstr(err.found, "did you mean"), "found: %s", err.found);
}

Test(config, unknown_key_exits_2, .exit_code = 2) {
    const char *sets[] = {"model.chanels=3", NULL};
    train_config cfg;
    parse_with(base_json, sets, 1, &cfg, NULL);
}

Test(config, wrong_types_name_the_path_and_the_type) {
    static const char *const cases[][3] = {
        {"model.layers=\"four\"", "model.layers: an integer", "model.layers: \"four\" (a string)"},
        {"model.layers=2.5", "model.layers: an integer", "2.5 (a number)"},
        {"fp16.enabled=1", "fp16.enabled: true or false", "1 (a number)"},
        {"train.max_memory=lots", "train.max_memory: a byte size", "\"lots\" (a string)"},
        {"model.arch=gpt3", "model.arch: one of \"gpt2\", \"llama\"", "\"gpt3\""},
        {"train.sample_prompt=5", "train.sample_prompt: a string", "5 (a number)"},
        {"model=[1,2]", "model: an object", "an array"},
        {"data.order=random", "data.order: one of \"sequential\", \"shuffle\"", NULL},
        {"zero_optimization.offload_optimizer.device=gpu", "one of \"none\", \"cpu\", \"nvme\"", NULL},
        {"optimizer=3", "optimizer: an object", NULL},
        {"train.seed=-1", "train.seed: an integer >= 0", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_set_error(cases[i][0], cases[i][1], cases[i][2]);
}

Test(config, values_out_of_range_are_rejected) {
    static const char *const cases[][3] = {
        {"fp16.loss_scale=-1", "fp16.loss_scale: a number >= 0", "-1"},
        {"fp16.initial_scale_power=200", "fp16.initial_scale_power: an integer in [0, 127]", "200"},
        {"fp16.min_loss_scale=0", "fp16.min_loss_scale: a number > 0", NULL},
        {"fp16.hysteresis=0", "fp16.hysteresis: an integer >= 1", NULL},
        {"zero_optimization.stage=4", "zero_optimization.stage: an integer in [0, 3]", "4"},
        {"zero_optimization.reduce_bucket_size=0", "reduce_bucket_size: an integer >= 1", NULL},
        {"gradient_clipping=-0.5", "gradient_clipping: a number >= 0", NULL},
        {"train.steps=0", "train.steps: an integer in [1, 1000000000000]", NULL},
        {"model.layers=0", "model.layers: an integer in [1, 4096]", NULL},
        {"train_micro_batch_size_per_gpu=3000000000", "train_micro_batch_size_per_gpu: an integer >= 1", NULL},
        {"model.norm_eps=0", "model.norm_eps: a number in (0, 1]", NULL},
        {"train.threads=-2", "train.threads", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_set_error(cases[i][0], cases[i][1], cases[i][2]);
}

Test(config, negative_loss_scale_exits_2, .exit_code = 2) {
    const char *sets[] = {"fp16.loss_scale=-1", NULL};
    train_config cfg;
    parse_with(base_json, sets, 1, &cfg, NULL);
}

Test(config, fp16_and_bf16_together_name_both_keys) {
    const char *sets[] = {"fp16.enabled=true", "bf16.enabled=true", NULL};
    expect_error(base_json, sets, 1, "fp16.enabled and bf16.enabled are both true", NULL);
}

Test(config, fp16_and_bf16_together_exit_2, .exit_code = 2) {
    const char *sets[] = {"fp16.enabled=true", "bf16.enabled=true", NULL};
    train_config cfg;
    parse_with(base_json, sets, 1, &cfg, NULL);
}

Test(config, rules_between_keys) {
    expect_set_error("fp16.min_loss_scale=1e9", "fp16.min_loss_scale 1e+09 above the initial scale 2^16", NULL);
    expect_set_error("zero_optimization.offload_optimizer.device=cpu", "offload_optimizer.device \"cpu\" with "
                     "zero_optimization.stage 0", NULL);
    expect_set_error("data.seq_len=32", "data.seq_len <= model.context", "seq_len 32, context 16");
    expect_set_error("model.channels=30", "model.channels a multiple of model.heads", "channels 30, heads 4");
    expect_set_error("model.kv_heads=2", "model.kv_heads equal to model.heads for arch \"gpt2\"", NULL);
    expect_set_error("model.rope_theta=500000", "model.rope_theta only for arch \"llama\"", NULL);
}

Test(config, padded_vocab_below_vocab_is_rejected) {
    const char *sets[] = {"model.vocab=100", "model.padded_vocab=64", NULL};
    expect_error(base_json, sets, 1, "model.padded_vocab >= model.vocab", "padded_vocab 64, vocab 100");
}

Test(config, llama_shapes_are_checked) {
    const char *json = "{\"train_micro_batch_size_per_gpu\": 4, \"optimizer\": {\"type\": \"AdamW\"},"
                       " \"model\": {\"arch\": \"llama\", \"layers\": 2, \"channels\": 48, \"heads\": 4, \"context\": 16},"
                       " \"data\": {\"dataset\": \"copy\"}, \"train\": {\"steps\": 10}}";
    train_config cfg;
    cr_assert(parse_with(json, NULL, 1, &cfg, NULL));
    cr_expect_eq(cfg.model.model.KVH, 4);
    cr_expect_eq(cfg.model.model.F, 256, "2/3 of 4*48 = 128, rounded up to a multiple of 256");
    cr_expect(!cfg.model.model.tied, "LLaMA's head is not tied by default");
    cr_expect_eq(cfg.model.model.rope_theta, 10000.0f);
    const char *odd[] = {"model.channels=36", "model.heads=4", NULL};
    expect_error(json, odd, 1, "an even head size", "channels 36 / heads 4 = 9");
    const char *bad_kv[] = {"model.kv_heads=3", NULL};
    expect_error(json, bad_kv, 1, "model.kv_heads dividing model.heads", "heads 4, kv_heads 3");
}

Test(config, missing_required_keys_are_named) {
    expect_error("{\"train_micro_batch_size_per_gpu\": 4, \"optimizer\": {\"type\": \"AdamW\"},"
                 " \"model\": {\"arch\": \"gpt2\", \"channels\": 8, \"heads\": 2, \"context\": 8},"
                 " \"data\": {\"dataset\": \"copy\"}, \"train\": {\"steps\": 1}}",
                 NULL, 1, "model.layers: missing", NULL);
    expect_error("{\"train_micro_batch_size_per_gpu\": 4, \"optimizer\": {\"type\": \"AdamW\"},"
                 " \"data\": {\"dataset\": \"copy\"}, \"train\": {\"steps\": 1}}",
                 NULL, 1, "model: missing", NULL);
    expect_error("{\"train_micro_batch_size_per_gpu\": 4,"
                 " \"model\": {\"arch\": \"gpt2\", \"layers\": 1, \"channels\": 8, \"heads\": 2, \"context\": 8},"
                 " \"data\": {\"dataset\": \"copy\"}, \"train\": {\"steps\": 1}}",
                 NULL, 1, "optimizer: missing", NULL);
    expect_error("{\"train_micro_batch_size_per_gpu\": 4, \"optimizer\": {\"type\": \"AdamW\"},"
                 " \"model\": {\"arch\": \"gpt2\", \"layers\": 1, \"channels\": 8, \"heads\": 2, \"context\": 8},"
                 " \"data\": {\"dataset\": \"copy\"}, \"train\": {}}",
                 NULL, 1, "train.steps: missing", NULL);
    expect_error("{\"train_micro_batch_size_per_gpu\": 4, \"optimizer\": {\"type\": \"AdamW\"},"
                 " \"model\": {\"arch\": \"gpt2\", \"layers\": 1, \"channels\": 8, \"heads\": 2, \"context\": 8},"
                 " \"train\": {\"steps\": 1}}",
                 NULL, 1, "data.dataset: missing", NULL);
}

Test(config, unknown_dataset_lists_the_datasets) {
    expect_set_error("data.dataset=poems", "data.dataset: \"poems\"", "poetry");
}

Test(config, run_name_must_be_a_plain_directory_name) {
    expect_set_error("train.run_name=../escape", "train.run_name: letters, digits", "\"../escape\"");
    expect_set_error("train.run_name=..", "train.run_name", NULL);
    train_config cfg;
    const char *sets[] = {"train.run_name=exp-1.b", NULL};
    cr_assert(parse_base(sets, &cfg, NULL));
    cr_expect_str_eq(cfg.train.run_dir, "runs/exp-1.b");
}

Test(config, repeated_key_is_an_error) {
    expect_error("{\"train_micro_batch_size_per_gpu\": 4, \"optimizer\": {\"type\": \"AdamW\"},"
                 " \"model\": {\"arch\": \"gpt2\", \"layers\": 1, \"layers\": 2, \"channels\": 8, \"heads\": 2,"
                 " \"context\": 8}, \"data\": {\"dataset\": \"copy\"}, \"train\": {\"steps\": 1}}",
                 NULL, 1, "model.layers: given twice", NULL);
}

Test(config, top_level_must_be_an_object) { expect_error("[1, 2]", NULL, 1, "a JSON object", "an array"); }

Test(config, bad_optimizer_value_exits_2, .exit_code = 2) {
    const char *sets[] = {"optimizer.params.lr=-1", NULL};
    train_config cfg;
    parse_base(sets, &cfg, NULL);
}

Test(config, bad_scheduler_name_exits_2, .exit_code = 2) {
    const char *sets[] = {"scheduler.type=OneCycle", NULL};
    train_config cfg;
    parse_base(sets, &cfg, NULL);
}

/* ---------------------------------------------------------------- files */

Test(config, invalid_json_file_names_line_and_column) {
    char *dir = unit_tmpdir("config");
    char path[600];
    snprintf(path, sizeof path, "%s/bad.json", dir);
    write_text(path, "{\n  \"train\": {\"steps\": 10,}\n}\n");
    train_config cfg;
    data_err err;
    cr_assert(!config_load(path, NULL, 0, 1, &cfg, &err));
    cr_expect(strstr(err.found, "invalid JSON at line 2, column"), "found: %s", err.found);
    cr_expect(strstr(err.expected, "no trailing commas"), "expected: %s", err.expected);
    write_text(path, "{\"train\": {}} trailing");
    cr_assert(!config_load(path, NULL, 0, 1, &cfg, &err));
    cr_expect(strstr(err.found, "invalid JSON at line 1"), "found: %s", err.found);
    unit_remove_tree(dir);
}

Test(config, missing_file_is_named) {
    train_config cfg;
    data_err err;
    cr_assert(!config_load("/tmp/mixpar-no-such-config.json", NULL, 0, 1, &cfg, &err));
    cr_expect(strstr(err.found, "cannot read '/tmp/mixpar-no-such-config.json'"), "found: %s", err.found);
}

Test(config, invalid_json_file_exits_2, .exit_code = 2) {
    char path[] = "/tmp/mixpar-test-config-bad-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "{,}", 3), 3);
    close(fd);
    unit_remove_when_exiting(path);
    train_config cfg;
    config_load(path, NULL, 0, 1, &cfg, NULL);
}

Test(config, vocab_comes_from_the_dataset) {
    char *dir = unit_tmpdir("config");
    char ds[700], vocab[800];
    snprintf(ds, sizeof ds, "%s/addition", dir);
    mkdir(ds, 0755);
    snprintf(vocab, sizeof vocab, "%s/vocab.json", ds);
    tokenizer t;
    const char *text = "12+34=46\n";
    cr_assert(tokenizer_build_char(&t, text, strlen(text), NULL));
    cr_assert(tokenizer_save(&t, vocab, NULL));
    int V = (int)t.vocab_size;
    tokenizer_free(&t);

    char set_dir[800];
    snprintf(set_dir, sizeof set_dir, "data.dir=%s", dir);
    const char *sets[] = {set_dir, NULL};
    train_config cfg;
    cr_assert(parse_base(sets, &cfg, NULL));
    cr_expect(cfg.model.vocab_from_data);
    cr_assert(config_load_vocab(&cfg, NULL));
    cr_expect_eq(cfg.model.model.V, V, "V from vocab.json");
    expect_dump_round_trip(&cfg);

    /* A model vocabulary smaller than the data's cannot embed every token. */
    const char *small[] = {set_dir, "model.vocab=5", NULL};
    cr_assert(parse_base(small, &cfg, NULL));
    data_err err;
    cr_assert(!config_load_vocab(&cfg, &err));
    cr_expect(strstr(err.found, "model.vocab 5"), "found: %s", err.found);
    /* A larger one is fine (the preset's 50257 over a small synthetic vocabulary). */
    const char *large[] = {set_dir, "model.vocab=50257", NULL};
    cr_assert(parse_base(large, &cfg, NULL));
    cr_assert(config_load_vocab(&cfg, NULL));
    cr_expect_eq(cfg.model.model.V, 50257);
    unit_remove_tree(dir);
}

Test(config, data_path_joins_dir_dataset_and_file) {
    train_config cfg;
    cr_assert(parse_base(NULL, &cfg, NULL));
    char path[256];
    cr_assert(config_data_path(&cfg, "train.tokens", path, sizeof path));
    cr_expect_str_eq(path, "data/addition/train.tokens");
    cr_expect(!config_data_path(&cfg, "train.tokens", path, 10), "too small a buffer is refused");
}

/* ---------------------------------------------------------------- presets */

Test(config, presets_fill_the_model_and_fields_override_them) {
    const char *json = "{\"train_micro_batch_size_per_gpu\": 4, \"optimizer\": {\"type\": \"AdamW\"},"
                       " \"model\": {\"preset\": \"gpt2-124m\"}, \"data\": {\"dataset\": \"copy\", \"seq_len\": 64},"
                       " \"train\": {\"steps\": 1}}";
    train_config cfg;
    cr_assert(parse_with(json, NULL, 1, &cfg, NULL));
    cr_expect_eq(cfg.model.model.F, 3072);
    cr_expect_eq(cfg.model.model.V, 50257);
    cr_expect(cfg.model.model.tied);

    /* A field the preset derives stays derived: ffn follows channels. */
    const char *narrow[] = {"model.channels=384", "model.heads=6", NULL};
    cr_assert(parse_with(json, narrow, 1, &cfg, NULL));
    cr_expect_eq(cfg.model.model.F, 1536);
    cr_expect_eq(cfg.model.model.KVH, 6);
    cr_expect_eq(cfg.model.model.L, 12);

    const char *llama[] = {"model.preset=llama-1b", NULL};
    cr_assert(parse_with(json, llama, 1, &cfg, NULL));
    cr_expect_eq(cfg.model.model.arch, MODEL_LLAMA);
    cr_expect_eq(cfg.model.model.KVH, 4, "llama-1b's grouped-query attention");
    cr_expect_eq(cfg.model.model.F, 5632);
    cr_expect_eq(cfg.model.model.maxT, 2048);
    cr_expect(!cfg.model.model.tied);
    const char *llama_narrow[] = {"model.preset=llama-1b", "model.channels=1024", NULL};
    cr_assert(parse_with(json, llama_narrow, 1, &cfg, NULL));
    cr_expect_eq(cfg.model.model.F, 2816, "LLaMA's rule for C = 1024: 2/3 * 4096 rounded up to 256");
    cr_expect_eq(cfg.model.model.KVH, 4);
    expect_dump_round_trip(&cfg);

    const char *unknown[] = {"model.preset=gpt2-125m", NULL};
    expect_error(json, unknown, 1, "model.preset: \"gpt2-125m\" is not one", "gpt2-124m");
    const char *clash[] = {"model.arch=llama", NULL};
    expect_error(json, clash, 1, "model.arch \"llama\" but preset gpt2-124m is gpt2", NULL);
}

/* ---------------------------------------------------------------- --set */

Test(config, set_overrides_values_of_every_json_type) {
    const char *sets[] = {"optimizer.params.lr=3e-4", "train.run_name=exp1", "train.steps=100",
                          "optimizer.params.betas=[0.8, 0.9]", "fp16.enabled=true", "train.sample_prompt=\"12\"",
                          "scheduler.type=warmup_linear", "scheduler.params.warmup_steps=10", NULL};
    train_config cfg;
    data_err err;
    char line[2048];
    cr_assert(parse_base(sets, &cfg, &err), "%s", data_err_line(&err, line, sizeof line));
    cr_expect_eq(cfg.optimizer.h.lr, 3e-4);
    cr_expect_str_eq(cfg.train.run_name, "exp1", "a value that is not JSON is a string");
    cr_expect_eq(cfg.train.steps, 100);
    cr_expect_eq(cfg.optimizer.h.beta1, 0.8);
    cr_expect_eq(cfg.optimizer.h.beta2, 0.9);
    cr_expect(cfg.fp16.enabled);
    cr_expect_str_eq(cfg.train.sample_prompt, "12", "a quoted value is a string even when it looks like a number");
    cr_expect_eq(cfg.scheduler.kind, LR_WARMUP_LINEAR, "objects on the path are created");
    cr_expect_eq(cfg.scheduler.total_steps, 100, "the schedule follows the overridden train.steps");
    cr_expect_eq(cfg.scheduler.peak, 3e-4);
}

Test(config, set_rejects_malformed_assignments) {
    cJSON *root = cJSON_Parse(base_json);
    data_err err;
    cr_expect(!config_set(root, "noequals", &err));
    cr_expect(strstr(err.found, "'noequals'"), "found: %s", err.found);
    cr_expect(!config_set(root, "=5", &err));
    cr_expect(!config_set(root, "a..b=1", &err));
    cr_expect(strstr(err.hint, "no empty parts"), "hint: %s", err.hint);
    cr_expect(!config_set(root, "train.steps.x=1", &err));
    cr_expect(strstr(err.found, "train.steps is 10 (a number)"), "found: %s", err.found);
    /* The last part may be anything; whether it is known is the parser's business. */
    cr_expect(config_set(root, "train.steps=20", &err));
    cr_expect_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "train"), "steps")->valuedouble, 20);
    cJSON_Delete(root);
    expect_set_error("data.new.key=1", "data.new: unknown key", NULL);
}

Test(config, set_applies_in_order_through_config_load) {
    const char *sets[] = {"train.steps=70", "train.steps=90", "train.run_name=mine"};
    train_config cfg;
    cr_assert(config_load("configs/tiny-poetry.json", sets, 3, 2, &cfg, NULL));
    cr_expect_eq(cfg.train.steps, 90, "the last override wins");
    cr_expect_str_eq(cfg.train.run_name, "mine");
    cr_expect_eq(cfg.train_batch_size, 32, "world 2 doubles the batch of micro-batch 16");
}

/* ---------------------------------------------------------------- the dump */

Test(config, dump_round_trips_every_section) {
    static const char *const variants[][8] = {
        {NULL},
        {"fp16.enabled=true", "fp16.loss_scale=128", "fp16.hysteresis=4", "fp16.consecutive_hysteresis=true",
         "fp16.auto_cast=true", NULL},
        {"zero_optimization.stage=3", "zero_optimization.offload_optimizer.device=nvme",
         "zero_optimization.reduce_bucket_size=5e7", "train.max_memory=24GB", "train.threads=2", NULL},
        {"optimizer={\"type\": \"SGD\", \"params\": {\"lr\": 0.1, \"momentum\": 0.9, \"nesterov\": true}}", NULL},
        {"optimizer={\"type\": \"Adam\", \"params\": {\"lr\": 0.01, \"adam_w_mode\": false, \"weight_decay\": 0.5}}",
         NULL},
        {"optimizer={\"type\": \"Lamb\", \"params\": {\"lr\": 0.01, \"max_coeff\": 5}}",
         "scheduler={\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_num_steps\": 3, \"warmup_max_lr\": 0.02}}",
         NULL},
        {"scheduler={\"type\": \"WarmupCosineLR\", \"params\": {\"warmup_num_steps\": 1, \"total_num_steps\": 9}}",
         "model.norm_eps=1e-6", "data.order=sequential", "train.seed=123456789012", NULL},
        {"bf16.enabled=true", "gradient_clipping=0", "train.sample_prompt=床前明月光", NULL},
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        train_config cfg;
        data_err err;
        char line[2048];
        cr_assert(parse_base(variants[i], &cfg, &err), "variant %zu: %s", i, data_err_line(&err, line, sizeof line));
        expect_dump_round_trip(&cfg);
    }
}

Test(config, dump_resolves_defaults_and_kinds) {
    const char *sets[] = {"zero_optimization.stage=3", "train.max_memory=24GB", "model.norm_eps=1e-6",
                          "optimizer={\"type\": \"Adam\", \"params\": {\"adam_w_mode\": false}}", NULL};
    train_config cfg;
    cr_assert(parse_base(sets, &cfg, NULL));
    cr_expect(cfg.zero.overlap_comm, "overlap_comm defaults to true at stage 3");
    cr_expect_eq(cfg.train.max_memory, 24000000000ull);
    cr_expect_eq(cfg.optimizer.kind, OPTIM_ADAM);
    cJSON *j = config_to_json(&cfg);
    char *text = cJSON_PrintUnformatted(j);
    cr_expect(strstr(text, "\"norm_eps\":1e-06"), "the float prints in its shortest form: %s", text);
    cr_expect(strstr(text, "\"adam_w_mode\":false"), "Adam (L2) survives a dump: %s", text);
    cr_expect(strstr(text, "\"overlap_comm\":true"), "%s", text);
    cr_expect_null(strstr(text, "preset"), "the model is written field by field");
    cr_expect_null(strstr(text, "\"vocab\""), "an unknown vocabulary is left out");
    free(text);
    cJSON_Delete(j);
    const char *defaults_only[] = {NULL};
    cr_assert(parse_base(defaults_only, &cfg, NULL));
    cr_expect(!cfg.zero.overlap_comm, "overlap_comm defaults to false below stage 3");
    cr_expect_eq(cfg.fp16.initial_scale_power, 16, "DeepSpeed's code default");
    cr_expect_eq(cfg.fp16.loss_scale_window, 1000);
    cr_expect_eq(cfg.fp16.hysteresis, 2);
    cr_expect_eq(cfg.fp16.min_loss_scale, 1.0);
    cr_expect_eq(cfg.zero.reduce_bucket_size, 500000000ull);
    cr_expect_eq(cfg.zero.stage3_param_persistence_threshold, 100000ull);
    cr_expect_eq(cfg.gradient_clipping, 0.0, "clipping is off unless set (DeepSpeed's code default)");
    cr_expect_eq(cfg.scheduler.kind, LR_CONSTANT);
    cr_expect_eq(cfg.scheduler.peak, 1e-3);
    cr_expect_eq(cfg.data.seq_len, 16, "seq_len defaults to the context");
    cr_expect_eq(cfg.data.order, LOADER_SHUFFLE);
    cr_expect_str_eq(cfg.data.dir, "data");
    cr_expect_str_eq(cfg.train.run_name, "run");
    cr_expect_str_eq(cfg.train.run_dir, "runs/run");
    cr_expect_eq(cfg.train.seed, 1);
    cr_expect_eq(cfg.train.eval_batches, 8);
}

Test(config, key_distance_counts_edits_and_swaps) {
    cr_expect_eq(config_key_distance("chanels", "channels"), 1);
    cr_expect_eq(config_key_distance("stpes", "steps"), 1, "a swap of neighbours is one edit");
    cr_expect_eq(config_key_distance("", "abc"), 3);
    cr_expect_eq(config_key_distance("heads", "heads"), 0);
    cr_expect_eq(config_key_distance("abc", "xyz"), 3);
}
