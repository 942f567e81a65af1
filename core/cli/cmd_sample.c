/* cmd_sample.c: `mixpar sample --checkpoint FILE [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--seed S]`. */
#include "base/error.h"
#include "base/parse.h"
#include "cli/commands.h"
#include "data/textbuf.h"
#include "data/tokenizer.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/sample.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: mixpar sample --checkpoint FILE [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K]\n"
            "                     [--seed S] [--vocab FILE]\n"
            "\n"
            "Generates text from a checkpoint written by 'mixpar train'.\n"
            "  --prompt TEXT       the beginning of the text (every character must be in the vocabulary)\n"
            "  --tokens N          tokens to generate [64]\n"
            "  --temperature T     > 0; lower is more conservative [0.8]\n"
            "  --top-k K           sample among the K most likely tokens; 0 = all [0]\n"
            "  --seed S            the same seed gives the same text [1]\n"
            "  --vocab FILE        the tokenizer's vocab.json [the dataset's, from the checkpoint's config]\n");
}

static double number_arg(const char *flag, const char *v, double lo, double hi) {
    double x;
    if (!parse_double(v, &x) || !(x >= lo && x <= hi))
        mp_usage_error("sample", "%s takes a number from %g to %g, not '%s'", flag, lo, hi, v);
    return x;
}

int cmd_sample(int argc, char **argv) {
    const char *path = NULL, *prompt = "", *vocab = NULL;
    int ntokens = 64, top_k = 0;
    float temperature = 0.8f;
    uint64_t seed = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) mp_usage_error("sample", "unknown argument '%s' (or it needs a value)", a);
        const char *v = argv[++i];
        if (strcmp(a, "--checkpoint") == 0) path = v;
        else if (strcmp(a, "--prompt") == 0) prompt = v;
        else if (strcmp(a, "--vocab") == 0) vocab = v;
        else if (strcmp(a, "--tokens") == 0) ntokens = (int)number_arg(a, v, 1, 100000);
        else if (strcmp(a, "--temperature") == 0) temperature = (float)number_arg(a, v, 1e-3, 100);
        else if (strcmp(a, "--top-k") == 0) top_k = (int)number_arg(a, v, 0, 1e9);
        else if (strcmp(a, "--seed") == 0) seed = (uint64_t)number_arg(a, v, 0, 9007199254740992.0);
        else mp_usage_error("sample", "unknown argument '%s'", a);
    }
    if (!path) mp_usage_error("sample", "--checkpoint FILE is required");

    ckpt_file *f = ckpt_open(path, NULL);
    const char *config_json = ckpt_meta_get(f, "config");
    if (!config_json)
        MP_FAIL_HINT("a checkpoint written by 'mixpar train' (its metadata holds the run's config)",
                     "for a bare weights file, train or convert it first", "%s has no 'config' metadata", path);
    cJSON *root = cJSON_Parse(config_json);
    if (!root) MP_FAIL("the checkpoint's config metadata as JSON", "unparseable config in %s", path);
    /* The global batch was resolved for the world that trained (several ranks, say); sampling needs the
     * model only, so it is left for config_parse to infer for one process. */
    cJSON_DeleteItemFromObjectCaseSensitive(root, "train_batch_size");
    train_config cfg;
    config_parse(root, 1, &cfg, NULL);
    cJSON_Delete(root);
    model_config mc = cfg.model.model;
    model *m = model_create(&mc);
    int ntensors;
    const model_tensor *tensors = model_tensors(m, &ntensors);
    ckpt_buffer params = {"", model_params(m), model_num_params(m)};
    ckpt_read(f, tensors, ntensors, &params, 1, CKPT_ALLOW_EXTRA, NULL);
    ckpt_close(f);

    char vocab_path[4096];
    if (vocab) snprintf(vocab_path, sizeof vocab_path, "%s", vocab);
    else config_data_path(&cfg, "vocab.json", vocab_path, sizeof vocab_path);
    tokenizer tok;
    tokenizer_load(&tok, vocab_path, NULL);
    size_t len = strlen(prompt);
    uint32_t *ids = malloc((len + 1) * sizeof(uint32_t));
    int64_t nprompt = tokenizer_encode(&tok, prompt, len, false, ids, NULL, NULL);
    int *tokens = malloc(((size_t)nprompt + (size_t)ntokens + 1) * sizeof(int));
    for (int64_t i = 0; i < nprompt; i++) tokens[i] = (int)ids[i];
    sample_options so = {.temperature = temperature, .top_k = top_k, .seed = seed};
    int n = sample_generate(m, tokens, (int)nprompt, ntokens, &so);
    textbuf text = {0};
    for (int i = 0; i < n; i++) tokenizer_decode_token(&tok, (uint32_t)tokens[i], &text);
    printf("%s\n", text.data ? text.data : "");
    textbuf_free(&text);
    free(tokens);
    free(ids);
    tokenizer_free(&tok);
    model_free(m);
    return 0;
}
