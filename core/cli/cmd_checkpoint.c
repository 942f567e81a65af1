/* cmd_checkpoint.c: `mixpar checkpoint info|inspect|consolidate|export-llmc|import-llmc`: inspect checkpoints, merge a
 * sharded one (ZeRO, FSDP or a dp x tp x pp mesh) into one file, and move GPT-2 weights to and from llm.c's format. */
#include "base/error.h"
#include "base/mem.h"
#include "cli/commands.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/ckpt_sharded.h"
#include "train/config.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: mixpar checkpoint info FILE|DIR                  (inspect is the same)\n"
            "       mixpar checkpoint consolidate DIR [-o] OUT.safetensors  a sharded checkpoint as one file\n"
            "       mixpar checkpoint export-llmc CHECKPOINT OUT.bin    GPT-2 weights to llm.c (version 3, fp32)\n"
            "       mixpar checkpoint import-llmc IN.bin OUT.safetensors llm.c GPT-2 weights to a mixpar file\n"
            "\n"
            "info lists a safetensors file's tensors and metadata (any safetensors file, not only mixpar's); for\n"
            "a sharded checkpoint (the checkpoint.sharded/ of a ZeRO run or of a dp x tp x pp mesh) the world,\n"
            "the mesh, each shard's ranges, the step, and whether every shard's sha256 matches the index.\n"
            "consolidate writes the single file an unsharded run would have written (DeepSpeed's zero_to_fp32),\n"
            "whatever mesh wrote the shards; tensors keep mixpar's names (checkpoint.h: \"wte\", \"h.0.qkvw\", ...;\n"
            "Adam's moments \"optim.m.wte\", ...): 'mixpar train --resume' and 'mixpar sample --checkpoint' read it.\n"
            "export-llmc needs a GPT-2 checkpoint written by 'mixpar train'; import-llmc writes weights only\n"
            "(no optimizer state), which 'mixpar sample --vocab' or a config's training can start from.\n");
}

/* A metadata value on one line: the start, whitespace runs collapsed (values can be pretty-printed JSON). */
static void print_meta(const char *key, const char *value) {
    char shown[64];
    size_t k = 0;
    for (const char *p = value; *p && k < 60; p++) {
        bool space = *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r';
        if (space && (k == 0 || shown[k - 1] == ' ')) continue;
        shown[k++] = space ? ' ' : *p;
    }
    shown[k] = '\0';
    printf("  meta %-14s %s%s\n", key, shown, strlen(value) > k ? " ..." : "");
}

static int info_sharded(const char *path) {
    ckpt_sharded *s = ckpt_sharded_open(path, NULL);
    const char *step = ckpt_sharded_meta_get(s, "step");
    printf("%s: sharded checkpoint (" CKPT_SHARDED_FORMAT "), %d shards, buffers of %zu floats, step %s\n",
           ckpt_sharded_dir(s), ckpt_sharded_world(s), ckpt_sharded_total(s), step ? step : "?");
    printf("  buffers:");
    for (int b = 0; b < ckpt_sharded_buffer_count(s); b++) printf(" %s", ckpt_sharded_buffer_name(s, b));
    printf("\n");
    for (int i = 0; i < ckpt_sharded_meta_count(s); i++) print_meta(ckpt_sharded_meta_at(s, i).key, ckpt_sharded_meta_at(s, i).value);
    unsigned long long bytes = 0;
    for (int r = 0; r < ckpt_sharded_world(s); r++) {
        const ckpt_shard_info *sh = ckpt_sharded_shard(s, r);
        ckpt_sharded_verify(s, r, NULL); /* a damaged shard stops here, named */
        bytes += sh->bytes;
        printf("  rank %-4d %s  %llu bytes, %zu floats, sha256 ok, ranges", r, sh->file, (unsigned long long)sh->bytes,
               ckpt_ranges_floats(sh->ranges, sh->nranges));
        int shown = sh->nranges < 6 ? sh->nranges : 6;
        for (int i = 0; i < shown; i++) printf(" [%zu, %zu)", sh->ranges[i].offset, sh->ranges[i].offset + sh->ranges[i].n);
        if (shown < sh->nranges) printf(" ... (%d ranges)", sh->nranges);
        printf("\n");
    }
    printf("  %llu bytes in all; 'mixpar checkpoint consolidate' makes one file of it\n", bytes);
    ckpt_sharded_close(s);
    return 0;
}

static int info(const char *path) {
    if (ckpt_sharded_is_dir(path)) return info_sharded(path);
    ckpt_file *f = ckpt_open(path, NULL);
    printf("%s: %llu bytes, header %llu bytes, %d tensors\n", path, (unsigned long long)ckpt_file_bytes(f),
           (unsigned long long)ckpt_data_start(f), ckpt_entry_count(f));
    for (int i = 0; i < ckpt_meta_count(f); i++) print_meta(ckpt_meta_at(f, i).key, ckpt_meta_at(f, i).value);
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

/* A dp x tp x pp run's config made one process's: the tensor shapes do not depend on the mesh, and a
 * consolidated file is what a 1-rank run would have written. */
static void drop_mesh(cJSON *root) {
    cJSON_DeleteItemFromObjectCaseSensitive(root, "tensor_model_parallel_size");
    cJSON_DeleteItemFromObjectCaseSensitive(root, "pipeline_model_parallel_size");
    cJSON_DeleteItemFromObjectCaseSensitive(root, "num_layers_per_virtual_pipeline_stage");
}

/* The model a run's config (JSON text) describes; NULL config: exit 2 naming the checkpoint. */
static model *model_of_config(const char *config_json, const char *path) {
    if (!config_json)
        MP_FAIL("a checkpoint written by 'mixpar train' (with its config in the metadata)", "%s has no 'config' metadata",
                path);
    cJSON *root = cJSON_Parse(config_json);
    if (!root) MP_FAIL("the checkpoint's config metadata as JSON", "unparseable config in %s", path);
    /* The batch was resolved for the world that trained; only the model matters here, so the global
     * batch (micro-batch x accumulation x world) is left for config_parse to infer for one process. */
    cJSON_DeleteItemFromObjectCaseSensitive(root, "train_batch_size");
    drop_mesh(root);
    train_config cfg;
    config_parse(root, 1, &cfg, NULL);
    cJSON_Delete(root);
    return model_create(&cfg.model.model);
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
    model *m = model_of_config(config_json, path);
    const model_config *c = model_get_config(m);
    if (c->arch != MODEL_GPT2 || !c->tied)
        MP_FAIL("a GPT-2 model with a tied head (what llm.c's format holds)", "a %s model%s in %s",
                model_arch_name(c->arch), c->tied ? "" : " with an untied head", path);
    return m;
}

/* A sharded checkpoint's buffers, whole, under the names a single file gives them ("params" -> the
 * registry's names, "optim.m" -> "optim.m.wte", ...), with its metadata. */
static int consolidate(const char *dir, const char *out) {
    ckpt_sharded *s = ckpt_sharded_open(dir, NULL);
    model *m = model_of_config(ckpt_sharded_meta_get(s, "config"), dir);
    int ntensors, nb = ckpt_sharded_buffer_count(s);
    const model_tensor *t = model_tensors(m, &ntensors);
    size_t total = model_num_params(m);
    ckpt_buffer bufs[16];
    char prefixes[16][64];
    for (int b = 0; b < nb; b++) {
        const char *name = ckpt_sharded_buffer_name(s, b);
        bool params = strcmp(name, "params") == 0;
        snprintf(prefixes[b], sizeof prefixes[b], "%s%s", params ? "" : name, params ? "" : ".");
        float *data = params ? model_params(m) : mem_alloc(total * sizeof(float), MEM_OTHER, "consolidate.buffer");
        bufs[b] = (ckpt_buffer){prefixes[b], data, total};
        ckpt_range whole = {0, total};
        ckpt_shard_buffer one = {name, data};
        ckpt_sharded_read(s, total, &whole, 1, &one, 1, NULL);
    }
    int nmeta = ckpt_sharded_meta_count(s);
    ckpt_meta meta[64];
    if (nmeta > 64) MP_FAIL("at most 64 metadata entries", "%d in %s", nmeta, dir);
    char *one_process = NULL;
    for (int i = 0; i < nmeta; i++) {
        meta[i] = ckpt_sharded_meta_at(s, i);
        cJSON *root = strcmp(meta[i].key, "config") == 0 ? cJSON_Parse(meta[i].value) : NULL;
        if (!root) continue; /* (model_of_config refused a bad one above) */
        drop_mesh(root);
        meta[i].value = one_process = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
    }
    ckpt_save(out, t, ntensors, bufs, nb, meta, nmeta, NULL);
    free(one_process);
    const char *step = ckpt_sharded_meta_get(s, "step");
    printf("wrote %s: %d buffers of %zu parameters from %d shards of %s (step %s)\n", out, nb, total,
           ckpt_sharded_world(s), ckpt_sharded_dir(s), step ? step : "?");
    for (int b = 0; b < nb; b++)
        if (bufs[b].data != model_params(m)) mem_free(bufs[b].data);
    ckpt_sharded_close(s);
    model_free(m);
    return 0;
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
    if (argc == 2 && (strcmp(argv[0], "info") == 0 || strcmp(argv[0], "inspect") == 0)) return info(argv[1]);
    if (argc == 3 && strcmp(argv[0], "consolidate") == 0) return consolidate(argv[1], argv[2]);
    if (argc == 4 && strcmp(argv[0], "consolidate") == 0 && strcmp(argv[2], "-o") == 0)
        return consolidate(argv[1], argv[3]);
    if (argc == 3 && strcmp(argv[0], "export-llmc") == 0) return export_llmc(argv[1], argv[2]);
    if (argc == 3 && strcmp(argv[0], "import-llmc") == 0) return import_llmc(argv[1], argv[2]);
    mp_usage_error("checkpoint", "expected info FILE|DIR, inspect FILE|DIR, consolidate DIR [-o] OUT, export-llmc "
                                 "CHECKPOINT OUT, or import-llmc IN OUT");
}
