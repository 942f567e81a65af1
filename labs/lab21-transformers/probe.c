/* probe.c: lab 21's measurements beside the training runs, each through your lab 21 regions:
 *
 *   lab21_probe schedule STEPS_TSV W T START PEAK END
 *       your lr_warmup_cosine (part B) at every step of a run, against the lr the trainer logged there (STEPS_TSV:
 *       step, loss, lr per line, from the run's step events; step s was taken with the lr of t = s - 1), and its
 *       values at the steps that define it, past T included.
 *   lab21_probe eval CHECKPOINT
 *       the validation loss and perplexity of a trained model over the whole validation split, as
 *       eval_add_losses / eval_perplexity (your part D) compute them: every position counted once, the last,
 *       partial sequence padded with targets of -1; beside it the mean of per-batch means, which weighs the
 *       padded batch's tokens more.
 *   lab21_probe rms CHECKPOINT TSV
 *       the RMSNorm statistic rms = sqrt(mean(x^2)) of every row entering every RMSNorm of a LLaMA-style model,
 *       on real activations (a forward pass of the checkpoint over a validation batch, through your RoPE), computed
 *       as in double (the reference), with an fp32 sum, from bf16-rounded inputs with an fp32 sum (what autocast
 *       does: activations stored in bf16, statistics in fp32), and with every product and partial sum in bf16.
 *   lab21_probe rope HS THETA MAXPOS TSV
 *       the rotary angle t * freq_i (freq_i from your rope_frequency) computed in fp32, bf16 and fp16 for every
 *       position t = 1..MAXPOS and every pair i of a head of HS channels, against double: the largest error over
 *       the pairs at each position (as a rotation: wrapped to [0, pi]), and the first position where it passes
 *       0.1 radian.
 *
 * Tables on stdout; the TSVs feed the figures of experiment.sh. Bad arguments or files: exit 2. */
#include "base/error.h"
#include "data/tokens.h"
#include "fp/half.h"
#include "model/model.h"
#include "ops/crossentropy.h"
#include "ops/rope.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/eval.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ a trained model and its validation tokens */

typedef struct {
    train_config cfg;
    model *m;
    tokfile *val;
} trained;

/* The model of a checkpoint written by `mixpar train` (its config is in the metadata), and its validation split. */
static void open_trained(const char *path, trained *t) {
    ckpt_file *f = ckpt_open(path, NULL);
    const char *config_json = ckpt_meta_get(f, "config");
    if (!config_json) MP_FAIL("a checkpoint written by 'mixpar train'", "%s has no 'config' metadata", path);
    cJSON *root = cJSON_Parse(config_json);
    if (!root) MP_FAIL("the checkpoint's config metadata as JSON", "unparseable config in %s", path);
    cJSON_DeleteItemFromObjectCaseSensitive(root, "train_batch_size"); /* resolved for the training world */
    config_parse(root, 1, &t->cfg, NULL);
    cJSON_Delete(root);
    t->m = model_create(&t->cfg.model.model);
    int n;
    const model_tensor *tensors = model_tensors(t->m, &n);
    ckpt_buffer params = {"", model_params(t->m), model_num_params(t->m)};
    ckpt_read(f, tensors, n, &params, 1, CKPT_ALLOW_EXTRA, NULL);
    ckpt_close(f);
    char val_path[4096];
    config_data_path(&t->cfg, "val.tokens", val_path, sizeof val_path);
    t->val = tokfile_open(val_path, NULL);
}

static void close_trained(trained *t) {
    model_free(t->m);
    tokfile_close(t->val);
}

/* Sequence s of the validation split as the trainer's loader cuts it: inputs tokens[sT .. sT+T), targets one
 * further; past the end of the split the inputs are token 0 and the targets -1 (ignored). */
static void validation_sequence(const tokfile *val, long s, int T, int *inputs, int *targets) {
    uint64_t n = val->token_count;
    for (int j = 0; j < T; j++) {
        uint64_t at = (uint64_t)s * (uint64_t)T + (uint64_t)j;
        inputs[j] = at < n ? (int)tokfile_get(val, at) : 0;
        targets[j] = at + 1 < n ? (int)tokfile_get(val, at + 1) : -1;
    }
}

/* ------------------------------------------------------------------ schedule */

static int probe_schedule(const char *tsv_path, long W, long T, double start, double peak, double end) {
    FILE *tsv = fopen(tsv_path, "r");
    if (!tsv) MP_FAIL("a readable TSV of step, loss, lr", "cannot read %s", tsv_path);
    long step, steps = 0, worst_step = 0;
    double loss, logged, worst = 0;
    while (fscanf(tsv, "%ld %lf %lf", &step, &loss, &logged) == 3) {
        double mine = lr_warmup_cosine(step - 1, W, T, start, peak, end);
        double diff = fabs(mine - logged) / (fabs(logged) > 1e-12 ? fabs(logged) : 1e-12);
        if (fabs(mine - logged) < 1e-15) diff = 0;
        if (diff > worst || steps == 0) worst = diff, worst_step = step;
        steps++;
    }
    fclose(tsv);
    if (steps == 0) MP_FAIL("step lines \"step loss lr\"", "none in %s", tsv_path);
    const struct { long t; const char *what; } rows[] = {
        {0, "warmup starts"}, {W / 2, "halfway up"}, {W - 1, "last warmup step"}, {W, "peak"},
        {W + (T - W) / 2, "cosine halfway"}, {T - 1, "last step of the run"}, {T, "end"}, {T + 50, "beyond T"}};
    printf("%6s  %-22s %12s\n", "t", "", "lr");
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        printf("%6ld  %-22s %12.6g\n", rows[i].t, rows[i].what, lr_warmup_cosine(rows[i].t, W, T, start, peak, end));
    printf("against the trainer's lr at all %ld steps: largest relative difference %.1e (step %ld): %s\n", steps, worst,
           worst_step, worst < 1e-6 ? "the same schedule" : "NOT the trainer's schedule (make grade LAB=21 shows where)");
    return 0;
}

/* ------------------------------------------------------------------ eval */

static int probe_eval(const char *path) {
    trained t;
    open_trained(path, &t);
    const model_config *c = model_get_config(t.m);
    const int B = 8, T = c->maxT, N = B * T;
    long sequences = (long)((t.val->token_count - 1 + (uint64_t)T - 1) / (uint64_t)T); /* the last one partial */
    int *inputs = malloc(sizeof(int) * (size_t)N), *targets = malloc(sizeof(int) * (size_t)N);
    float *losses = malloc(sizeof(float) * (size_t)N), *lse = malloc(sizeof(float) * (size_t)N);
    MP_ASSERT(inputs && targets && losses && lse, "out of memory");
    eval_totals all = {0};
    double batch_means = 0;
    int batches = 0;
    for (long s0 = 0; s0 < sequences; s0 += B) {
        for (int b = 0; b < B; b++) {
            if (s0 + b < sequences) validation_sequence(t.val, s0 + b, T, inputs + b * T, targets + b * T);
            else for (int j = 0; j < T; j++) inputs[b * T + j] = 0, targets[b * T + j] = -1; /* a padded row */
        }
        model_forward(t.m, inputs, NULL, B, T); /* leaves the logits (N, Vp) */
        crossentropy_forward(losses, lse, model_logits(t.m, 0, 0), targets, N, c->V, c->Vp);
        eval_totals batch = {0};
        eval_add_losses(&batch, losses, targets, N);
        eval_add_losses(&all, losses, targets, N);
        batch_means += eval_mean_loss(&batch);
        batches++;
    }
    printf("%-6s %8ld tokens  loss %.4f  perplexity %8.2f  (mean of %d batch means: %.4f, perplexity %.2f)\n",
           model_arch_name(c->arch), all.tokens, eval_mean_loss(&all), eval_perplexity(&all), batches,
           batch_means / batches, exp(batch_means / batches));
    free(inputs);
    free(targets);
    free(losses);
    free(lse);
    close_trained(&t);
    return 0;
}

/* ------------------------------------------------------------------ rms */

enum { RMS_WAYS = 3, MAX_NORMS = 64 };
static const char *const RMS_WAY_NAMES[RMS_WAYS] = {"fp32 sum", "bf16 in, fp32 sum", "all bf16"};

static float bf16_round(float x) { return bf16_to_float(bf16_from_float(x)); }

/* rms of one row of C values, three ways (see the top of the file); ref in double. */
static void rms_of_row(const float *x, int C, double *ref, float got[RMS_WAYS]) {
    double sq = 0;
    float sum32 = 0, sum_in16 = 0, sum16 = 0;
    for (int c = 0; c < C; c++) {
        float h = bf16_round(x[c]);
        sq += (double)x[c] * x[c];
        sum32 += x[c] * x[c];
        sum_in16 += h * h;
        sum16 = bf16_round(sum16 + bf16_round(h * h));
    }
    *ref = sqrt(sq / C);
    got[0] = sqrtf(sum32 / (float)C);
    got[1] = sqrtf(sum_in16 / (float)C);
    got[2] = bf16_round(sqrtf(bf16_round(sum16 / (float)C)));
}

typedef struct {
    int C, count;
    char names[MAX_NORMS][24];
    double mean_err[MAX_NORMS][RMS_WAYS], max_err[MAX_NORMS][RMS_WAYS], mean_rms[MAX_NORMS];
    long rows[MAX_NORMS];
} rms_probe;

/* Forward's report of each activation: the ones that enter an RMSNorm are measured, in forward order: "encoded" (ln1
 * of block 0), then per block "res2" (its ln2) and "res3" (ln1 of the next block, or the final norm). */
static void on_activation(void *ctx, int layer, const char *name, float *x, size_t n) {
    (void)layer;
    rms_probe *p = ctx;
    bool enters_a_norm = strcmp(name, "encoded") == 0 || strcmp(name, "res2") == 0 || strcmp(name, "res3") == 0;
    if (!enters_a_norm || p->count == MAX_NORMS) return;
    int k = p->count++;
    long rows = (long)(n / (size_t)p->C);
    p->rows[k] = rows;
    for (long r = 0; r < rows; r++) {
        double ref;
        float got[RMS_WAYS];
        rms_of_row(x + (size_t)r * p->C, p->C, &ref, got);
        p->mean_rms[k] += ref / rows;
        for (int w = 0; w < RMS_WAYS; w++) {
            double e = fabs(got[w] - ref) / ref;
            p->mean_err[k][w] += e / rows;
            if (e > p->max_err[k][w]) p->max_err[k][w] = e;
        }
    }
}

static int probe_rms(const char *path, const char *tsv_path) {
    trained t;
    open_trained(path, &t);
    const model_config *c = model_get_config(t.m);
    if (c->arch != MODEL_LLAMA) MP_FAIL("a LLaMA-style checkpoint (RMSNorm)", "%s is %s", path, model_arch_name(c->arch));
    const int B = 8, T = c->maxT;
    int *inputs = malloc(sizeof(int) * (size_t)(B * T)), *targets = malloc(sizeof(int) * (size_t)(B * T));
    MP_ASSERT(inputs && targets, "out of memory");
    for (int b = 0; b < B; b++) validation_sequence(t.val, b, T, inputs + b * T, targets + b * T);
    rms_probe *p = calloc(1, sizeof *p);
    MP_ASSERT(p, "out of memory");
    p->C = c->C;
    model_set_act_probe(t.m, on_activation, p);
    model_forward(t.m, inputs, NULL, B, T);
    model_set_act_probe(t.m, NULL, NULL);
    /* Forward order: encoded (ln1 of block 0), then per block res2 (its ln2) and res3 (the next ln1, or lnf). */
    for (int k = 0; k < p->count; k++) {
        int block = k / 2;
        if (k % 2 == 0) snprintf(p->names[k], sizeof p->names[k], "h.%d.ln1", block);
        else snprintf(p->names[k], sizeof p->names[k], "h.%d.ln2", block);
        if (k == p->count - 1) snprintf(p->names[k], sizeof p->names[k], "lnf");
    }
    FILE *tsv = fopen(tsv_path, "w");
    if (!tsv) MP_FAIL("a writable TSV path", "cannot write %s", tsv_path);
    fprintf(tsv, "# norm\tmean_rms\tmean_err_fp32\tmean_err_bf16_in\tmean_err_bf16\tmax_err_fp32\tmax_err_bf16_in\tmax_err_bf16\n");
    printf("rows of %d activations entering each RMSNorm (%ld rows each: %d validation sequences of %d), rms against double:\n",
           c->C, p->rows[0], B, T);
    printf("%-9s %9s   %-21s %-21s %-21s\n", "norm", "mean rms", "fp32 sum", "bf16 in, fp32 sum", "all bf16");
    printf("%-9s %9s   %-21s %-21s %-21s\n", "", "", "mean / max rel err", "mean / max rel err", "mean / max rel err");
    double worst[RMS_WAYS] = {0};
    for (int k = 0; k < p->count; k++) {
        printf("%-9s %9.3f", p->names[k], p->mean_rms[k]);
        fprintf(tsv, "%s\t%.6g", p->names[k], p->mean_rms[k]);
        for (int w = 0; w < RMS_WAYS; w++) {
            printf("   %8.1e / %8.1e ", p->mean_err[k][w], p->max_err[k][w]);
            if (p->max_err[k][w] > worst[w]) worst[w] = p->max_err[k][w];
        }
        for (int w = 0; w < RMS_WAYS; w++) fprintf(tsv, "\t%.6g", p->mean_err[k][w]);
        for (int w = 0; w < RMS_WAYS; w++) fprintf(tsv, "\t%.6g", p->max_err[k][w]);
        printf("\n");
        fprintf(tsv, "\n");
    }
    printf("largest relative error of the rms over all rows:");
    for (int w = 0; w < RMS_WAYS; w++) printf("  %s %.1e%s", RMS_WAY_NAMES[w], worst[w], w < RMS_WAYS - 1 ? "," : "\n");
    fclose(tsv);
    free(p);
    free(inputs);
    free(targets);
    close_trained(&t);
    return 0;
}

/* ------------------------------------------------------------------ rope */

enum { ANGLE_FORMATS = 3 };
static const char *const ANGLE_FORMAT_NAMES[ANGLE_FORMATS] = {"fp32", "bf16", "fp16"};

static float round_to(int format, float x) {
    switch (format) {
    case 1: return bf16_round(x);
    case 2: return fp16_to_float(fp16_from_float(x));
    default: return x;
    }
}

/* |a - b| as a rotation: the distance on the circle, in [0, pi]. */
static double angle_distance(double a, double b) {
    double d = fmod(fabs(a - b), 2 * M_PI);
    return d > M_PI ? 2 * M_PI - d : d;
}

static int probe_rope(int HS, double theta, long maxpos, const char *tsv_path) {
    if (HS < 2 || HS % 2 || HS > 4096 || !(theta > 1) || maxpos < 1 || maxpos > (1L << 24))
        MP_FAIL("HS even in [2, 4096], THETA > 1, MAXPOS in [1, 2^24]", "HS %d, THETA %g, MAXPOS %ld", HS, theta, maxpos);
    const int half = HS / 2;
    double *freq = malloc(sizeof(double) * (size_t)half);
    MP_ASSERT(freq, "out of memory");
    for (int i = 0; i < half; i++) freq[i] = rope_frequency(i, HS, theta);
    FILE *tsv = fopen(tsv_path, "w");
    if (!tsv) MP_FAIL("a writable TSV path", "cannot write %s", tsv_path);
    fprintf(tsv, "# position\tmax angle error over the pairs (rad): fp32\tbf16\tfp16\n");
    long first_over[ANGLE_FORMATS] = {0, 0, 0};
    double worst_so_far[ANGLE_FORMATS] = {0};
    static const long marks[] = {1, 16, 64, 128, 256, 257, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072};
    printf("rotary angles t * freq_i, head size %d, theta %g: the largest error over the %d pairs up to position t\n",
           HS, theta, half);
    printf("%9s %12s %12s %12s\n", "t", "fp32 (rad)", "bf16 (rad)", "fp16 (rad)");
    size_t next_mark = 0;
    for (long t = 1; t <= maxpos; t++) {
        double err[ANGLE_FORMATS] = {0};
        for (int i = 0; i < half; i++) {
            double exact = (double)t * freq[i];
            for (int f = 0; f < ANGLE_FORMATS; f++) {
                float a = round_to(f, round_to(f, (float)t) * round_to(f, (float)freq[i]));
                double e = angle_distance(a, exact);
                if (e > err[f]) err[f] = e;
            }
        }
        fprintf(tsv, "%ld\t%.6g\t%.6g\t%.6g\n", t, err[0], err[1], err[2]);
        for (int f = 0; f < ANGLE_FORMATS; f++) {
            if (err[f] > worst_so_far[f]) worst_so_far[f] = err[f];
            if (!first_over[f] && err[f] > 0.1) first_over[f] = t;
        }
        while (next_mark < sizeof marks / sizeof *marks && marks[next_mark] < t) next_mark++;
        if (next_mark < sizeof marks / sizeof *marks && marks[next_mark] == t)
            printf("%9ld %12.2e %12.2e %12.2e\n", t, worst_so_far[0], worst_so_far[1], worst_so_far[2]);
    }
    printf("first position where the angle is off by more than 0.1 rad:");
    for (int f = 0; f < ANGLE_FORMATS; f++) {
        if (first_over[f]) printf("  %s %ld", ANGLE_FORMAT_NAMES[f], first_over[f]);
        else printf("  %s none up to %ld", ANGLE_FORMAT_NAMES[f], maxpos);
        printf(f < ANGLE_FORMATS - 1 ? "," : "\n");
    }
    fclose(tsv);
    free(freq);
    return 0;
}

int main(int argc, char **argv) {
    const char *usage = "usage: lab21_probe schedule STEPS_TSV W T START PEAK END | eval CHECKPOINT | rms CHECKPOINT TSV |"
                        " rope HS THETA MAXPOS TSV";
    if (argc == 8 && strcmp(argv[1], "schedule") == 0) {
        double v[5];
        for (int i = 0; i < 5; i++) {
            char *end;
            v[i] = strtod(argv[3 + i], &end);
            if (*end || end == argv[3 + i]) MP_FAIL("W, T, START, PEAK and END as numbers", "'%s'", argv[3 + i]);
        }
        return probe_schedule(argv[2], (long)v[0], (long)v[1], v[2], v[3], v[4]);
    }
    if (argc == 3 && strcmp(argv[1], "eval") == 0) return probe_eval(argv[2]);
    if (argc == 4 && strcmp(argv[1], "rms") == 0) return probe_rms(argv[2], argv[3]);
    if (argc == 6 && strcmp(argv[1], "rope") == 0) {
        char *end1, *end2, *end3;
        long hs = strtol(argv[2], &end1, 10), maxpos = strtol(argv[4], &end3, 10);
        double theta = strtod(argv[3], &end2);
        if (*end1 || *end2 || *end3 || end1 == argv[2] || end2 == argv[3] || end3 == argv[4])
            MP_FAIL("HS, THETA and MAXPOS as numbers", "'%s' '%s' '%s'", argv[2], argv[3], argv[4]);
        return probe_rope((int)hs, theta, maxpos, argv[5]);
    }
    fprintf(stderr, "%s\n", usage);
    return 2;
}
