/* test_model_golden.c: the whole model's loss and gradients against PyTorch's, from golden files that
 * tests/reference/make_golden.py wrote once (float64 reference, committed; this test only reads them). */
#include "model/model.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned char *bytes;
    size_t size;
    cJSON *header;
    size_t data_start;
} golden_file;

/* A minimal safetensors reader: enough for files this project wrote itself. */
static golden_file golden_open(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "tests/reference/%s", name);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "golden file %s (run the tests from the repository root)", path);
    golden_file g = {0};
    fseek(f, 0, SEEK_END);
    g.size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    g.bytes = malloc(g.size + 1);
    cr_assert_eq(fread(g.bytes, 1, g.size, f), g.size);
    fclose(f);
    uint64_t n;
    memcpy(&n, g.bytes, 8);
    cr_assert_leq(8 + n, g.size);
    char *json = strndup((char *)g.bytes + 8, n);
    g.header = cJSON_Parse(json);
    free(json);
    cr_assert_not_null(g.header);
    g.data_start = 8 + n;
    return g;
}

static const void *golden_tensor(const golden_file *g, const char *name, size_t *count) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(g->header, name);
    cr_assert_not_null(t, "golden tensor %s", name);
    const cJSON *off = cJSON_GetObjectItem(t, "data_offsets");
    size_t begin = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble, end = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble;
    *count = (end - begin) / 4;
    return g->bytes + g->data_start + begin;
}

static int meta_int(const golden_file *g, const char *key) {
    return atoi(cJSON_GetObjectItem(cJSON_GetObjectItem(g->header, "__metadata__"), key)->valuestring);
}

static void compare_with_torch(const char *file) {
    golden_file g = golden_open(file);
    const cJSON *meta = cJSON_GetObjectItem(g.header, "__metadata__");
    model_config c = {
        .arch = strcmp(cJSON_GetObjectItem(meta, "arch")->valuestring, "llama") == 0 ? MODEL_LLAMA : MODEL_GPT2,
        .V = meta_int(&g, "V"), .Vp = meta_int(&g, "Vp"), .maxT = meta_int(&g, "maxT"), .L = meta_int(&g, "L"),
        .C = meta_int(&g, "C"), .NH = meta_int(&g, "NH"), .KVH = meta_int(&g, "KVH"), .F = meta_int(&g, "F"),
        .tied = strcmp(cJSON_GetObjectItem(meta, "tied")->valuestring, "True") == 0};
    model *m = model_create(&c);
    int n;
    const model_tensor *t = model_tensors(m, &n);
    for (int i = 0; i < n; i++) {
        size_t count;
        const float *w = golden_tensor(&g, t[i].name, &count);
        cr_assert_eq(count, t[i].size, "%s: %zu floats in the golden file, %zu in the model", t[i].name, count, t[i].size);
        memcpy(model_params(m) + t[i].offset, w, count * sizeof(float));
    }
    size_t ntok;
    const int *inputs = golden_tensor(&g, "inputs", &ntok);
    const int *targets = golden_tensor(&g, "targets", &ntok);
    int T = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(g.header, "inputs"), "shape"), 1)->valueint;
    int B = (int)ntok / T;
    model_zero_grad(m);
    float loss = model_forward(m, inputs, targets, B, T);
    double want = atof(cJSON_GetObjectItem(meta, "loss")->valuestring);
    cr_expect(fabs(loss - want) < 1e-5 * fabs(want) + 1e-6, "loss %.7f, PyTorch (float64) %.7f", loss, want);
    model_backward(m, 1.0f);
    for (int i = 0; i < n; i++) {
        char key[64];
        snprintf(key, sizeof key, "grad.%s", t[i].name);
        size_t count;
        const float *want_g = golden_tensor(&g, key, &count);
        const float *got = model_grads(m) + t[i].offset;
        double worst = 0, scale = 0;
        size_t at = 0;
        for (size_t j = 0; j < count; j++) {
            scale = fmax(scale, fabs(want_g[j]));
            if (fabs(got[j] - want_g[j]) > worst) {
                worst = fabs(got[j] - want_g[j]);
                at = j;
            }
        }
        /* fp32 against float64: errors of a few ulps of the tensor's largest gradient. */
        cr_expect(worst <= 1e-4 * scale + 1e-6, "%s: worst |grad - torch| = %.3g at %zu (got %.7g, torch %.7g; max |grad| %.3g)",
                  t[i].name, worst, at, got[at], want_g[at], scale);
    }
    model_free(m);
    cJSON_Delete(g.header);
    free(g.bytes);
}

Test(model_golden, gpt2_loss_and_gradients_match_pytorch) { compare_with_torch("gpt2_tiny.golden"); }
Test(model_golden, llama_gqa_loss_and_gradients_match_pytorch) { compare_with_torch("llama_tiny.golden"); }
