/* mx_table.c: lab 30's error table: the real weights, matmul inputs and weight gradients of a trained tiny GPT,
 * rounded to every MX format (your lab 30 regions), to fp8 with one scale per tensor (lab 25's regions) and to bf16;
 * the signal-to-noise ratio of each, summed over the tensors of each kind.
 *
 * The model is loaded from a checkpoint written by `mixpar train`; one batch of real tokens runs forward (a probe
 * copies the activations that enter the matmuls: ln1, atty, ln2, fch_act, lnf) and backward (loss scale 1: the
 * gradients of the 2-D weights). Each tensor is rounded on its own, as a cast would:
 *   bf16            nearest even, no scale
 *   fp8-e4m3/e5m2   one power-of-two scale per tensor from its own amax (amp_fp8_scale_for_amax, margin 0): the
 *                   scale delayed scaling settles on while amaxes are steady; the error a delay adds comes on top
 *   mx formats      blocks of 32 (nvfp4: 16) consecutive values along a row: weights (OC, C) and activations (N, C)
 *                   are blocked along C, the reduction dimension of the forward matmul
 * The fourth column is a what-if: the same activations with one channel (7) of every row multiplied by 100, the
 * kind of outlier feature large language models grow (Dettmers et al. 2022, "LLM.int8()"); this tiny model has none.
 * Its SNR is over the other channels: what the outlier costs the ordinary values that share a scale with it.
 * SNR = 10 log10(sum x^2 / sum (q(x) - x)^2) over all tensors of the kind; "min" is the worst single tensor.
 *
 * usage: mx_table CHECKPOINT TOKENS TSV    (TOKENS: a token file, e.g. data/poetry/val.tokens) */
#include "amp/fp8.h"
#include "base/error.h"
#include "data/tokens.h"
#include "fp/format.h"
#include "fp/mx.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KIND_WEIGHTS, KIND_ACTS, KIND_GRADS, KIND_OUTLIER, NKINDS, MAX_TENSORS = 512, B = 8, T = 64, OUTLIER_CHANNEL = 7 };
static const char *const KIND_NAMES[NKINDS] = {"weights", "activations", "gradients",
                                               "the activations with channel 7 of every row x 100"};
static const float OUTLIER_GAIN = 100.0f;

typedef struct {
    char name[80];
    int kind;
    float *x;
    size_t n;
} captured;

static captured tensors[MAX_TENSORS];
static int ntensors;

static void keep(const char *name, int kind, const float *x, size_t n) {
    MP_ASSERT(ntensors < MAX_TENSORS, "too many tensors");
    captured *c = &tensors[ntensors++];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->kind = kind;
    c->n = n;
    c->x = malloc(n * sizeof(float));
    MP_ASSERT(c->x, "out of memory");
    memcpy(c->x, x, n * sizeof(float));
}

/* The activations that enter a matmul. */
static void probe(void *ctx, int layer, const char *name, float *x, size_t n) {
    static const char *const wanted[] = {"ln1", "atty", "ln2", "fch_act", "lnf"};
    for (size_t i = 0; i < sizeof wanted / sizeof *wanted; i++)
        if (strcmp(name, wanted[i]) == 0) {
            char full[64];
            model_act_full_name(ctx, layer, name, full, sizeof full);
            keep(full, KIND_ACTS, x, n);
        }
}

/* The rounding schemes of the table, in its order. */
typedef enum { SCHEME_BF16, SCHEME_FP8_TENSOR, SCHEME_MX } scheme_kind;
typedef struct {
    const char *name;
    scheme_kind kind;
    const fp_format *fp8;  /* SCHEME_FP8_TENSOR */
    const char *mx;        /* SCHEME_MX */
    double bits;           /* per value, scales included */
} scheme;

static const scheme SCHEMES[] = {
    {"bf16", SCHEME_BF16, NULL, NULL, 16},
    {"fp8-e4m3/tensor", SCHEME_FP8_TENSOR, &FP_E4M3, NULL, 8},
    {"fp8-e5m2/tensor", SCHEME_FP8_TENSOR, &FP_E5M2, NULL, 8},
    {"mxfp8-e4m3", SCHEME_MX, NULL, "mxfp8-e4m3", 8.25},
    {"mxfp8-e5m2", SCHEME_MX, NULL, "mxfp8-e5m2", 8.25},
    {"mxint8", SCHEME_MX, NULL, "mxint8", 8.25},
    {"mxfp6-e3m2", SCHEME_MX, NULL, "mxfp6-e3m2", 6.25},
    {"mxfp6-e2m3", SCHEME_MX, NULL, "mxfp6-e2m3", 6.25},
    {"mxfp4-e2m1", SCHEME_MX, NULL, "mxfp4-e2m1", 4.25},
    {"nvfp4", SCHEME_MX, NULL, "nvfp4", 4.5},
};
enum { NSCHEMES = sizeof SCHEMES / sizeof *SCHEMES };

static void round_with(const scheme *s, const float *x, float *out, size_t n, uint8_t *codes) {
    switch (s->kind) {
    case SCHEME_BF16:
        for (size_t i = 0; i < n; i++) out[i] = fp_decode(&FP_BF16, fp_encode(&FP_BF16, x[i], FP_ROUND_NEAREST_EVEN, 0, 0));
        break;
    case SCHEME_FP8_TENSOR: {
        amp_fp8_meta m;
        amp_fp8_init(&m, s->fp8, 1, 0, AMP_AMAX_MAX);
        m.scale = amp_fp8_scale_for_amax(amp_fp8_amax(x, n), fp_max(s->fp8), 0, 1.0f);
        m.scale_inv = 1.0f / m.scale;
        amp_fp8_quantize(&m, x, codes, n);
        amp_fp8_dequantize(s->fp8, codes, out, n, m.scale_inv);
        amp_fp8_free(&m);
        break;
    }
    case SCHEME_MX: mx_round_trip(mx_format_by_name(s->mx), x, out, n, 0); break;
    }
}

static model *load_model(const char *path) {
    ckpt_file *f = ckpt_open(path, NULL);
    const char *config_json = ckpt_meta_get(f, "config");
    if (!config_json) MP_FAIL("a checkpoint written by 'mixpar train'", "%s has no 'config' metadata", path);
    cJSON *root = cJSON_Parse(config_json);
    if (!root) MP_FAIL("the checkpoint's config metadata as JSON", "unparseable config in %s", path);
    cJSON_DeleteItemFromObjectCaseSensitive(root, "train_batch_size");
    train_config cfg;
    config_parse(root, 1, &cfg, NULL);
    cJSON_Delete(root);
    model *m = model_create(&cfg.model.model);
    int nt;
    const model_tensor *t = model_tensors(m, &nt);
    ckpt_buffer params = {"", model_params(m), model_num_params(m)};
    ckpt_read(f, t, nt, &params, 1, CKPT_ALLOW_EXTRA, NULL);
    ckpt_close(f);
    return m;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s CHECKPOINT TOKENS TSV\n", argv[0]);
        return 2;
    }
    model *m = load_model(argv[1]);
    tokfile *tf = tokfile_open(argv[2], NULL);
    int32_t tok[B * T + 1];
    tokfile_read(tf, 0, B * T + 1, tok);
    tokfile_close(tf);
    int inputs[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) inputs[i] = tok[i], targets[i] = tok[i + 1];

    model_set_act_probe(m, probe, m);
    float loss = model_forward(m, inputs, targets, B, T);
    model_set_act_probe(m, NULL, NULL);
    model_zero_grad(m);
    model_backward(m, 1.0f);
    int nt;
    const model_tensor *t = model_tensors(m, &nt);
    for (int i = 0; i < nt; i++) {
        if (t[i].ndim != 2) continue;
        keep(t[i].name, KIND_WEIGHTS, model_params(m) + t[i].offset, t[i].size);
        char g[64];
        snprintf(g, sizeof g, "d%s", t[i].name);
        keep(g, KIND_GRADS, model_grads(m) + t[i].offset, t[i].size);
    }
    for (int i = 0, n0 = ntensors; i < n0; i++) {
        if (tensors[i].kind != KIND_ACTS) continue;
        char name[80];
        snprintf(name, sizeof name, "%.60s+outlier", tensors[i].name);
        keep(name, KIND_OUTLIER, tensors[i].x, tensors[i].n);
        captured *c = &tensors[ntensors - 1];
        size_t row = c->n / (B * T);
        for (size_t j = OUTLIER_CHANNEL; j < c->n; j += row) c->x[j] *= OUTLIER_GAIN;
    }
    size_t counts[NKINDS] = {0}, biggest = 0;
    for (int i = 0; i < ntensors; i++) {
        counts[tensors[i].kind] += tensors[i].n;
        if (tensors[i].n > biggest) biggest = tensors[i].n;
    }
    printf("checkpoint %s, one batch of %d x %d tokens (loss %.4f): %zu weights, %zu activations entering matmuls, "
           "%zu weight gradients\n\n", argv[1], B, T, (double)loss, counts[0], counts[1], counts[2]);

    FILE *tsv = fopen(argv[3], "w");
    if (!tsv) MP_FAIL("a writable TSV path", "%s", argv[3]);
    fprintf(tsv, "# scheme\tbits\tweights_snr\tacts_snr\tgrads_snr\toutlier_acts_snr\tweights_min\tacts_min\tgrads_min"
                 "\toutlier_acts_min\n");
    float *out = malloc(biggest * sizeof(float));
    uint8_t *codes = malloc(biggest);
    MP_ASSERT(out && codes, "out of memory");
    printf("%-16s %5s  %-15s %-15s %-15s %-15s %s\n", "format", "bits", "weights", "activations", "gradients",
           "acts+outlier", "grads flushed");
    printf("%-16s %5s  %-15s %-15s %-15s %-15s %s\n", "", "", "SNR (min) dB", "SNR (min) dB", "SNR (min) dB",
           "SNR (min) dB", "to zero");
    for (int s = 0; s < NSCHEMES; s++) {
        double signal[NKINDS] = {0}, noise[NKINDS] = {0}, worst[NKINDS], flushed = 0, nonzero = 0;
        for (int k = 0; k < NKINDS; k++) worst[k] = INFINITY;
        for (int i = 0; i < ntensors; i++) {
            captured *c = &tensors[i];
            round_with(&SCHEMES[s], c->x, out, c->n, codes);
            double sig = 0, noi = 0;
            size_t row = c->n / (B * T);
            for (size_t j = 0; j < c->n; j++) {
                if (c->kind == KIND_OUTLIER && j % row == OUTLIER_CHANNEL) continue; /* the other channels' error */
                double d = (double)out[j] - c->x[j];
                sig += (double)c->x[j] * c->x[j];
                noi += d * d;
                if (c->kind == KIND_GRADS && c->x[j] != 0) nonzero++, flushed += out[j] == 0;
            }
            signal[c->kind] += sig;
            noise[c->kind] += noi;
            double snr = noi > 0 ? 10 * log10(sig / noi) : INFINITY;
            if (sig > 0 && snr < worst[c->kind]) worst[c->kind] = snr;
        }
        char cell[NKINDS][32];
        double snr[NKINDS];
        for (int k = 0; k < NKINDS; k++) {
            snr[k] = noise[k] > 0 ? 10 * log10(signal[k] / noise[k]) : INFINITY;
            snprintf(cell[k], sizeof cell[k], "%5.1f (%5.1f)", snr[k], worst[k]);
        }
        printf("%-16s %5.2f  %-15s %-15s %-15s %-15s %.3f%%\n", SCHEMES[s].name, SCHEMES[s].bits, cell[0], cell[1],
               cell[2], cell[3], nonzero > 0 ? 100 * flushed / nonzero : 0);
        fprintf(tsv, "%s\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\n", SCHEMES[s].name, SCHEMES[s].bits, snr[0],
                snr[1], snr[2], snr[3], worst[0], worst[1], worst[2], worst[3]);
    }
    fclose(tsv);
    printf("\n(SNR in dB over all tensors of the kind, the worst single tensor in brackets; each 6 dB is one bit of\n"
           " precision; the relative error ||q(x) - x|| / ||x|| is 10^(-SNR/20): 55 dB is 0.18%%, 31 dB 2.8%%, 19 dB 11%%.\n"
           " acts+outlier: %s, SNR of the other channels.)\n", KIND_NAMES[3]);
    for (int i = 0; i < ntensors; i++) free(tensors[i].x);
    free(out);
    free(codes);
    model_free(m);
    return 0;
}
