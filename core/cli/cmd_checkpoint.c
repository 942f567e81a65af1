/* cmd_checkpoint.c: `mixpar checkpoint info|export-llmc|import-llmc`: inspect checkpoints and move GPT-2
 * weights between mixpar (safetensors) and llm.c's train_gpt2.c format. */
#include "base/error.h"
#include "cli/commands.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/config.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: mixpar checkpoint info FILE\n"
            "       mixpar checkpoint export-llmc CHECKPOINT OUT.bin    GPT-2 weights to llm.c (version 3, fp32)\n"
            "       mixpar checkpoint import-llmc IN.bin OUT.safetensors llm.c GPT-2 weights to a mixpar file\n"
            "\n"
            "info lists a safetensors file's tensors and metadata (any safetensors file, not only mixpar's).\n"
            "export-llmc needs a GPT-2 checkpoint written by 'mixpar train'; import-llmc writes weights only\n"
            "(no optimizer state), which 'mixpar sample --vocab' or a config's training can start from.\n");
}

static int info(const char *path) {
    ckpt_file *f = ckpt_open(path, NULL);
    printf("%s: %llu bytes, header %llu bytes, %d tensors\n", path, (unsigned long long)ckpt_file_bytes(f),
           (unsigned long long)ckpt_data_start(f), ckpt_entry_count(f));
    for (int i = 0; i < ckpt_meta_count(f); i++) {
        ckpt_meta m = ckpt_meta_at(f, i);
        /* Values can be pretty-printed JSON: show the start on one line, whitespace runs collapsed. */
        char shown[64];
        size_t k = 0;
        for (const char *p = m.value; *p && k < 60; p++) {
            bool space = *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r';
            if (space && (k == 0 || shown[k - 1] == ' ')) continue;
            shown[k++] = space ? ' ' : *p;
        }
        shown[k] = '\0';
        printf("  meta %-14s %s%s\n", m.key, shown, strlen(m.value) > k ? " ..." : "");
    }
    for (int i = 0; i < ckpt_entry_count(f); i++) {
        const ckpt_entry *e = ckpt_entry_at(f, i);
        char shape[96] = "";
        for (int d = 0; d < e->ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%llu", d ? ", " : "",
                     (unsigned long long)e->shape[d]);
        printf("  %-24s %-4s (%s)\n", e->name, e->dtype, shape);
    }
    ckpt_close(f);
    return 0;
}

/* The model a mixpar checkpoint was trained with, from the config in its metadata. */
static int json_int(const cJSON *o, const char *key, const char *path) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) MP_FAIL("a whole number in the checkpoint's model metadata", "%s: key %s", path, key);
    return v->valueint;
}

/* The model a checkpoint holds: from the run's config ('mixpar train') or the shape 'import-llmc' wrote. */
static model *model_of_checkpoint(ckpt_file *f, const char *path) {
    const char *config_json = ckpt_meta_get(f, "config"), *shape = ckpt_meta_get(f, "model");
    if (!config_json && shape) {
        cJSON *o = cJSON_Parse(shape);
        if (!o) MP_FAIL("the checkpoint's model metadata as JSON", "unparseable model metadata in %s", path);
        model_config c = {.arch = MODEL_GPT2, .V = json_int(o, "V", path), .Vp = json_int(o, "Vp", path),
                          .maxT = json_int(o, "maxT", path), .L = json_int(o, "L", path), .C = json_int(o, "C", path),
                          .NH = json_int(o, "NH", path), .tied = true};
        cJSON_Delete(o);
        return model_create(&c);
    }
    if (!config_json)
        MP_FAIL("a checkpoint written by 'mixpar train' or 'mixpar checkpoint import-llmc'",
                "%s has neither 'config' nor 'model' metadata", path);
    cJSON *root = cJSON_Parse(config_json);
    if (!root) MP_FAIL("the checkpoint's config metadata as JSON", "unparseable config in %s", path);
    train_config cfg;
    config_parse(root, 1, &cfg, NULL);
    cJSON_Delete(root);
    if (cfg.model.model.arch != MODEL_GPT2 || !cfg.model.model.tied)
        MP_FAIL("a GPT-2 model with a tied head (what llm.c's format holds)", "a %s model%s in %s",
                model_arch_name(cfg.model.model.arch), cfg.model.model.tied ? "" : " with an untied head", path);
    return model_create(&cfg.model.model);
}

static int export_llmc(const char *in, const char *out) {
    ckpt_file *f = ckpt_open(in, NULL);
    model *m = model_of_checkpoint(f, in);
    int n;
    const model_tensor *t = model_tensors(m, &n);
    ckpt_buffer params = {"", model_params(m), model_num_params(m)};
    ckpt_read(f, t, n, &params, 1, CKPT_ALLOW_EXTRA, NULL);
    ckpt_close(f);
    const model_config *c = model_get_config(m);
    ckpt_llmc_dims dims = {.maxT = c->maxT, .V = c->V, .L = c->L, .NH = c->NH, .C = c->C, .Vp = c->Vp};
    ckpt_llmc_export(out, t, n, model_params(m), model_num_params(m), &dims, NULL);
    printf("wrote %s: llm.c GPT-2 checkpoint (version 3, fp32), %zu parameters\n", out, model_num_params_unpadded(m));
    model_free(m);
    return 0;
}

static int import_llmc(const char *in, const char *out) {
    ckpt_llmc_dims dims;
    ckpt_llmc_read_dims(in, &dims, NULL);
    model_config c = {.arch = MODEL_GPT2, .V = dims.V, .Vp = dims.Vp, .maxT = dims.maxT, .L = dims.L, .C = dims.C,
                      .NH = dims.NH, .tied = true};
    model *m = model_create(&c);
    int n;
    const model_tensor *t = model_tensors(m, &n);
    ckpt_llmc_import(in, t, n, model_params(m), model_num_params(m), &dims, NULL);
    ckpt_buffer params = {"", model_params(m), model_num_params(m)};
    char shape[160];
    snprintf(shape, sizeof shape, "{\"arch\":\"gpt2\",\"V\":%d,\"Vp\":%d,\"maxT\":%d,\"L\":%d,\"C\":%d,\"NH\":%d}", dims.V,
             dims.Vp, dims.maxT, dims.L, dims.C, dims.NH);
    ckpt_meta meta[] = {{"source", "llm.c GPT-2 checkpoint (version 3)"}, {"model", shape}};
    ckpt_save(out, t, n, &params, 1, meta, 2, NULL);
    printf("wrote %s: %zu parameters from %s (L=%d, C=%d, NH=%d, V=%d)\n", out, model_num_params_unpadded(m), in,
           dims.L, dims.C, dims.NH, dims.V);
    model_free(m);
    return 0;
}

int cmd_checkpoint(int argc, char **argv) {
    if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc == 2 && strcmp(argv[0], "info") == 0) return info(argv[1]);
    if (argc == 3 && strcmp(argv[0], "export-llmc") == 0) return export_llmc(argv[1], argv[2]);
    if (argc == 3 && strcmp(argv[0], "import-llmc") == 0) return import_llmc(argv[1], argv[2]);
    mp_usage_error("checkpoint", "expected info FILE, export-llmc CHECKPOINT OUT, or import-llmc IN OUT");
}
