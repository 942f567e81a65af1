/* cmd_report.c: `mixpar report RUN_DIR`: a markdown report of a run from its events (what a capstone hands in, lab 29):
 * summary, losses, throughput and MFU, memory per rank against the plan, time per step by span, loss-scale skips,
 * figures drawn by `mixpar plot`; with --capstone, the course's results check recomputed from the final weights. */
#include "../../viz/source.h"
#include "base/error.h"
#include "base/mem.h"
#include "cli/commands.h"
#include "data/loader.h"
#include "data/tokens.h"
#include "model/model.h"
#include "plan/perf.h"
#include "plan/report_math.h"
#include "train/checkpoint.h"
#include "train/config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The capstone's rules (labs/lab29-capstone/README.md): a 10-20M-parameter model, at most this many training tokens,
 * and the validation loss the reference configuration reaches within them, with margin. Options override them. */
static const struct {
    double min_params, max_params, max_tokens, target_loss;
} capstone_rules = {10e6, 20e6, 262144, 5.70};

enum { MAX_SPANS = 24, WARMUP_STEPS = 1 };
static const double PLAN_TOLERANCE = 0.05; /* the capstone's "within 5% of mixpar plan" */

static void usage(FILE *out) {
    fprintf(out,
            "usage: mixpar report RUN_DIR [-o FILE.md] [--peak GFLOPS] [--no-figures]\n"
            "       mixpar report RUN_DIR --capstone [--target-loss X] [--max-tokens N] [--params MIN:MAX]\n"
            "Reads RUN_DIR/events.rank*.jsonl (core/base/EVENTS.md) and writes a markdown report of the run (default\n"
            "RUN_DIR/report/report.md): model shape, parameters, precision recipe, ZeRO stage or FSDP strategy, world\n"
            "size, steps and tokens; final training and validation loss; tokens/s (total tokens over total time,\n"
            "leaving out the first step), model FLOP/s and MFU; peak memory per rank by tag against the run's plan\n"
            "with the ratio (tags more than 5%% off are flagged); time per step by span; loss-scale skips. Figures\n"
            "(loss, loss_scale, throughput, memory, memory_time, timeline, ...) are drawn by `mixpar plot` into\n"
            "the report's folder and linked.\n"
            "  --peak GFLOPS  peak FLOP/s of one rank, for MFU, when the run recorded none (a profiled run records\n"
            "                 the sgemm peak it measured in profile.rank0.tsv); without either MFU is 'unknown'\n"
            "  --no-figures   the markdown only\n"
            "  --capstone     also grade the run as lab 29's capstone: loads its final checkpoint, counts the\n"
            "                 parameters (default range %.0fM-%.0fM), the tokens its config trained on (at most %.0f),\n"
            "                 and recomputes the validation loss from the weights on the whole held-out split\n"
            "                 (fp32 forward), to be at most %.2f. Exit 1 when a rule fails.\n"
            "Exit 0: report written (and the capstone passes); 1: a capstone rule failed; 2: bad input (no such\n"
            "directory, no events, a malformed or truncated event file, a run without a header).\n",
            capstone_rules.min_params / 1e6, capstone_rules.max_params / 1e6, capstone_rules.max_tokens,
            capstone_rules.target_loss);
}

/* ------------------------------------------------------------------ what the events hold */

typedef struct {
    long step;
    double loss, scale, tokens_per_s, comm_bytes;
    bool skipped;
} step_rec;

typedef struct {
    char name[32];
    double seconds;
} span_total;

typedef struct {
    bool has_run, has_plan;
    int world, zero_stage;
    long long params;
    char name[128], recipe[32], compute[32], scaler[32], fsdp[32], matmul[64];
    double init_scale;
    uint64_t plan[MEM_NTAGS];
    cJSON *config; /* rank 0's run header config (resolved) */
    step_rec *steps;
    long nsteps, cap;
    long evals;
    long last_eval_step;
    double last_val;
    bool has_mem[VZ_MAX_RANKS];
    uint64_t peak[VZ_MAX_RANKS][MEM_NTAGS], peak_total[VZ_MAX_RANKS];
    span_total spans[MAX_SPANS];
    int nspans;
    long span_steps_first, span_steps_last;
    char checkpoint[4200];
    long checkpoint_step;
    long diagnoses;
} run_events;

/* A byte count from an event: a hand-edited file may hold anything, and a cast of a negative, huge or NaN double
 * to an integer is undefined. */
static uint64_t bytes_of(double x) { return x > 0 && x < 9.2e18 ? (uint64_t)x : 0; }

static void on_event(void *ctx, int rank, const cJSON *ev) {
    run_events *r = ctx;
    const char *kind = vz_json_str(ev, "kind", "");
    if (!strcmp(kind, "mem")) {
        const cJSON *peak = cJSON_GetObjectItemCaseSensitive(ev, "peak");
        if (!peak) return;
        r->has_mem[rank] = true; /* peaks only grow within a run: the last event holds the run's */
        for (int t = 0; t < MEM_NTAGS; t++) r->peak[rank][t] = bytes_of(vz_json_num(peak, mem_tag_name((mem_tag)t), 0));
        r->peak_total[rank] = bytes_of(vz_json_num(ev, "peak_total", 0));
        return;
    }
    if (rank != 0) return; /* the rest is rank 0's view: its steps, spans, evaluations and checkpoints */
    if (!strcmp(kind, "run")) {
        r->has_run = true;
        r->world = (int)vz_json_int(ev, "world", 1);
        r->params = vz_json_int(ev, "params", 0);
        snprintf(r->name, sizeof r->name, "%s", vz_json_str(ev, "name", ""));
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(ev, "precision");
        snprintf(r->recipe, sizeof r->recipe, "%s", p ? vz_json_str(p, "recipe", "fp32") : "fp32");
        snprintf(r->compute, sizeof r->compute, "%s", p ? vz_json_str(p, "compute", "") : "");
        snprintf(r->scaler, sizeof r->scaler, "%s", p ? vz_json_str(p, "scaler", "none") : "none");
        snprintf(r->matmul, sizeof r->matmul, "%s", p ? vz_json_str(p, "matmul", "") : "");
        r->init_scale = p ? vz_json_num(p, "init_scale", 1) : 1;
        const cJSON *dp = cJSON_GetObjectItemCaseSensitive(ev, "data_parallel");
        r->zero_stage = dp ? (int)vz_json_int(dp, "zero_stage", 0) : 0;
        snprintf(r->fsdp, sizeof r->fsdp, "%s", dp ? vz_json_str(dp, "fsdp", "") : "");
        const cJSON *plan = cJSON_GetObjectItemCaseSensitive(ev, "plan");
        r->has_plan = plan != NULL;
        for (int t = 0; t < MEM_NTAGS; t++) r->plan[t] = plan ? bytes_of(vz_json_num(plan, mem_tag_name((mem_tag)t), 0)) : 0;
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(ev, "config");
        if (c) {
            cJSON_Delete(r->config);
            r->config = cJSON_Duplicate(c, true);
        }
    } else if (!strcmp(kind, "step")) {
        long step = (long)vz_json_int(ev, "step", -1);
        while (r->nsteps && step <= r->steps[r->nsteps - 1].step) r->nsteps--; /* a resumed run redoes steps */
        if (r->nsteps == r->cap) {
            r->cap = r->cap ? 2 * r->cap : 256;
            r->steps = realloc(r->steps, (size_t)r->cap * sizeof *r->steps);
            if (!r->steps) MP_FAIL("memory for the step events", "realloc of %ld steps failed", r->cap);
        }
        r->steps[r->nsteps++] = (step_rec){.step = step, .loss = vz_json_num(ev, "loss", NAN),
                                           .scale = vz_json_num(ev, "scale", 1),
                                           .tokens_per_s = vz_json_num(ev, "tokens_per_s", NAN),
                                           .comm_bytes = vz_json_num(ev, "comm_bytes", NAN),
                                           .skipped = vz_json_bool(ev, "skipped", false)};
    } else if (!strcmp(kind, "eval")) {
        r->evals++;
        r->last_eval_step = (long)vz_json_int(ev, "step", -1);
        r->last_val = vz_json_num(ev, "val_loss", NAN);
    } else if (!strcmp(kind, "span")) {
        long step = (long)vz_json_int(ev, "step", -1);
        if (step <= WARMUP_STEPS) return; /* as for tokens/s: the first step warms up */
        if (!r->span_steps_first || step < r->span_steps_first) r->span_steps_first = step;
        if (step > r->span_steps_last) r->span_steps_last = step;
        const char *name = vz_json_str(ev, "name", "?");
        double dt = vz_json_num(ev, "t1", 0) - vz_json_num(ev, "t0", 0);
        if (cJSON_GetObjectItemCaseSensitive(ev, "layer")) return; /* per-layer spans sit inside the phases */
        int i = 0;
        while (i < r->nspans && strcmp(r->spans[i].name, name)) i++;
        if (i == MAX_SPANS) return;
        if (i == r->nspans) snprintf(r->spans[r->nspans++].name, sizeof r->spans[0].name, "%s", name);
        r->spans[i].seconds += dt;
    } else if (!strcmp(kind, "checkpoint")) {
        snprintf(r->checkpoint, sizeof r->checkpoint, "%s", vz_json_str(ev, "path", ""));
        r->checkpoint_step = (long)vz_json_int(ev, "step", -1);
    } else if (!strcmp(kind, "diagnosis")) {
        r->diagnoses++;
    }
}

/* Reads every rank's file; malformed or truncated lines and a missing run header are bad input (exit 2). */
static void read_run(const char *dir, run_events *r) {
    static vz_source src;
    char why[512];
    if (vz_source_open(&src, dir, why, sizeof why) != 0) MP_FAIL("a run directory with events.rank*.jsonl", "%s", why);
    vz_source_poll(&src, on_event, r);
    vz_source_finish(&src);
    for (int k = 0; k < src.nranks; k++) {
        const vz_file *f = src.files[k];
        if (f && f->malformed)
            MP_FAIL("events as JSON lines (core/base/EVENTS.md)", "%s:%lld: a malformed line (%lld in the file)", f->path,
                    f->first_malformed, f->malformed);
        if (f && f->truncated)
            MP_FAIL_HINT("event files that end with a complete line", "a run that crashed mid-write leaves one; report "
                         "on a finished run (or cut the partial line off)", "%s: the last line (%lld) is truncated",
                         f->path, f->line_number);
    }
    if (!src.events) MP_FAIL("events in the run directory", "%s: no event in its files", dir);
    if (!r->has_run || !r->config)
        MP_FAIL("a run header (kind \"run\", with its config) in rank 0's events", "%s: none found", dir);
    if (r->world < 1 || r->world > VZ_MAX_RANKS)
        MP_FAIL("a run header whose world is 1 to 256 ranks", "%s: world %d", dir, r->world);
    vz_source_close(&src);
}

/* ------------------------------------------------------------------ the run's shape and figures */

typedef struct {
    train_config cfg;
    model_config mc;
    perf_flops flops;
    uint64_t tokens;
    double tokens_per_s, flops_per_s, mfu, peak; /* the run's; peak of all ranks, NAN when unknown */
    const char *peak_source;
} run_figures;

static void resolve_config(const run_events *r, train_config *cfg) {
    data_err err;
    if (!config_parse(r->config, r->world, cfg, &err))
        MP_FAIL_HINT(err.expected, "the run header's config must parse as it did for the run (core/train/config.h)",
                     "%s", err.found);
}

/* The peak a profiled run measured (profile.rank0.tsv, "# peak_flops X", one rank's sgemm), else NAN. */
static double recorded_peak(const char *dir) {
    char path[4200], line[256];
    snprintf(path, sizeof path, "%s/profile.rank0.tsv", dir);
    FILE *f = fopen(path, "r");
    double peak = NAN;
    while (f && fgets(line, sizeof line, f) && line[0] == '#')
        if (sscanf(line, "# peak_flops %lf", &peak) == 1) break;
    if (f) fclose(f);
    return peak > 0 ? peak : NAN;
}

static void compute_figures(const char *dir, const run_events *r, double peak_gflops, run_figures *out) {
    resolve_config(r, &out->cfg);
    out->mc = out->cfg.model.model;
    model_config_complete(&out->mc);
    const model_config *mc = &out->mc;
    plan_model pm = {.arch = mc->arch == MODEL_LLAMA ? PLAN_ARCH_LLAMA : PLAN_ARCH_GPT2, .layers = (uint64_t)mc->L,
                     .hidden = (uint64_t)mc->C, .heads = (uint64_t)mc->NH, .kv_heads = (uint64_t)mc->KVH,
                     .ffn = (uint64_t)mc->F, .vocab = (uint64_t)mc->V, .context = (uint64_t)mc->maxT,
                     .tied_head = mc->tied};
    long steps = r->nsteps ? r->steps[r->nsteps - 1].step : 0;
    report_batch b = {.steps = steps, .micro_batch = out->cfg.micro_batch, .seq_len = out->cfg.data.seq_len,
                      .grad_accum = out->cfg.grad_accum, .dp_world = out->cfg.world};
    out->tokens = report_run_tokens(&b); /* lab 29 */
    double *rates = malloc((size_t)(r->nsteps ? r->nsteps : 1) * sizeof *rates);
    long n = 0;
    for (long i = 0; i < r->nsteps; i++)
        if (r->steps[i].tokens_per_s > 0 && isfinite(r->steps[i].tokens_per_s)) rates[n++] = r->steps[i].tokens_per_s;
    double per_rank = report_run_tokens_per_s(rates, n, n > WARMUP_STEPS ? WARMUP_STEPS : 0); /* lab 29 */
    free(rates);
    perf_train_flops_per_token(&pm, (uint64_t)out->cfg.data.seq_len, &out->flops); /* lab 10 */
    out->peak = recorded_peak(dir) * r->world;
    out->peak_source = "the sgemm peak the profiled run measured (profile.rank0.tsv) x ranks";
    if (!(out->peak > 0) && peak_gflops > 0) {
        out->peak = peak_gflops * 1e9 * r->world;
        out->peak_source = "--peak x ranks";
    }
    out->tokens_per_s = per_rank * r->world; /* every rank reads its own tokens at the same time */
    out->flops_per_s = out->mfu = NAN;
    if (out->tokens_per_s > 0) {
        /* lab 10's throughput over 1000 s at the run's rate, against the peak (a stand-in 1 FLOP/s when unknown,
         * its MFU dropped) */
        perf_throughput tp = perf_throughput_of((uint64_t)llround(out->tokens_per_s * 1000), 1000.0,
                                                (double)out->flops.total, out->peak > 0 ? out->peak : 1.0);
        out->flops_per_s = tp.flops_per_s;
        out->mfu = out->peak > 0 ? tp.mfu : NAN;
    }
}

/* `mixpar plot RUN_DIR --out FIGS --throughput FLOPS:PEAK`, this program's own plot command, its output kept
 * in FIGS/plot.log. Returns its exit code. */
static int draw_figures(const char *dir, const char *figs, const run_figures *f) {
    char self[PATH_MAX], arg[128], log[4300];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 127;
    self[n] = '\0';
    snprintf(arg, sizeof arg, "%.17g:%.17g", (double)f->flops.total, f->peak > 0 ? f->peak : 0.0);
    snprintf(log, sizeof log, "%s/plot.log", figs);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 127;
    if (pid == 0) {
        if (!freopen(log, "w", stdout)) _exit(127);
        dup2(STDOUT_FILENO, STDERR_FILENO);
        execl(self, self, "plot", dir, "--out", figs, "--throughput", arg, (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return 127;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* ------------------------------------------------------------------ the capstone check */

typedef struct {
    double min_params, max_params, max_tokens, target_loss;
    bool ran, passed;
    long long params;
    uint64_t tokens;
    double val_loss;
    long val_tokens, step;
    char checkpoint[4200], problem[512];
} capstone_check;

/* The final checkpoint: the path rank 0's last checkpoint event names, or that file's name in RUN_DIR (a run
 * handed in from elsewhere). */
static bool find_checkpoint(const char *dir, const run_events *r, char *out, size_t n) {
    struct stat st;
    if (!r->checkpoint[0]) return false;
    snprintf(out, n, "%s", r->checkpoint);
    if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) return true;
    const char *base = strrchr(r->checkpoint, '/');
    snprintf(out, n, "%s/%s", dir, base ? base + 1 : r->checkpoint);
    return stat(out, &st) == 0 && S_ISREG(st.st_mode);
}

/* The mean loss per token of the model over every window of T tokens of the validation split, fp32 forward. */
static double validation_loss(model *m, const train_config *cfg, long *tokens) {
    char path[4096];
    config_data_path(cfg, "val.tokens", path, sizeof path);
    tokfile *val = tokfile_open(path, NULL);
    loader l;
    int T = cfg->data.seq_len;
    loader_init(&l, val, 0, val->token_count, 1, T, LOADER_SEQUENTIAL, 0, NULL);
    double sum = 0;
    for (uint64_t i = 0; i < l.batches_per_epoch; i++) { /* one window a batch: each adds T tokens' mean */
        loader_next(&l);
        sum += model_forward(m, l.inputs, l.targets, 1, T);
    }
    *tokens = (long)(l.batches_per_epoch * (uint64_t)T);
    double mean = sum / (double)l.batches_per_epoch;
    loader_free(&l);
    tokfile_close(val);
    return mean;
}

static void check_capstone(const char *dir, const run_events *r, const run_figures *f, capstone_check *c) {
    c->ran = true;
    if (!find_checkpoint(dir, r, c->checkpoint, sizeof c->checkpoint)) {
        snprintf(c->problem, sizeof c->problem, "no final checkpoint: the run wrote none (set train.checkpoint_interval) "
                 "or its file is missing (looked for %s)", r->checkpoint[0] ? r->checkpoint : "a checkpoint event");
        return;
    }
    ckpt_file *file = ckpt_open(c->checkpoint, NULL);
    const char *json = ckpt_meta_get(file, "config");
    uint64_t step = 0;
    if (!json || !ckpt_meta_u64(file, "step", &step, NULL))
        MP_FAIL("a checkpoint written by 'mixpar train' (config and step in its metadata)", "%s has none", c->checkpoint);
    c->step = (long)step;
    cJSON *root = cJSON_Parse(json);
    if (!root) MP_FAIL("the checkpoint's config metadata as JSON", "unparseable config in %s", c->checkpoint);
    /* The weights must be the run's: the same model section as the run header's config, at the run's last step. */
    const cJSON *run_model = cJSON_GetObjectItemCaseSensitive(r->config, "model");
    bool same_model = cJSON_Compare(cJSON_GetObjectItemCaseSensitive(root, "model"), run_model, true);
    /* The tokens from the checkpoint's own config: train_batch_size = B x accumulation x dp world sequences. */
    double batch = vz_json_num(root, "train_batch_size", 0);
    cJSON_DeleteItemFromObjectCaseSensitive(root, "train_batch_size");
    train_config cfg;
    config_parse(root, 1, &cfg, NULL);
    cJSON_Delete(root);
    double per_rank = (double)cfg.micro_batch * cfg.grad_accum, dp = batch / per_rank;
    if (!(dp >= 1) || dp != floor(dp) || dp > 65536)
        MP_FAIL("train_batch_size = micro-batch x accumulation x ranks in the checkpoint's config", "%s: %g against %g a rank",
                c->checkpoint, batch, per_rank);
    report_batch b = {.steps = (long)step, .micro_batch = cfg.micro_batch, .seq_len = cfg.data.seq_len,
                      .grad_accum = cfg.grad_accum, .dp_world = (int)dp};
    c->tokens = report_run_tokens(&b); /* lab 29 */
    model_config mc = cfg.model.model;
    model *m = model_create(&mc);
    int ntensors;
    const model_tensor *tensors = model_tensors(m, &ntensors);
    ckpt_buffer params = {"", model_params(m), model_num_params(m)};
    ckpt_read(file, tensors, ntensors, &params, 1, CKPT_ALLOW_EXTRA, NULL);
    ckpt_close(file);
    c->params = (long long)model_num_params_unpadded(m);
    long last = r->nsteps ? r->steps[r->nsteps - 1].step : 0;
    if (!same_model)
        snprintf(c->problem, sizeof c->problem, "the checkpoint's model differs from the run header's: not this run's weights");
    else if ((long)step != last || (long)step != f->cfg.train.steps)
        snprintf(c->problem, sizeof c->problem, "the checkpoint is of step %ld, the run's last step is %ld and its config "
                 "asks for %ld: hand in the finished run", (long)step, last, f->cfg.train.steps);
    else if (c->params != r->params)
        snprintf(c->problem, sizeof c->problem, "the checkpoint holds %lld parameters, the run header says %lld", c->params,
                 r->params);
    else if ((double)c->params < c->min_params || (double)c->params > c->max_params)
        snprintf(c->problem, sizeof c->problem, "%lld parameters: the capstone's model has %.0f to %.0f", c->params,
                 c->min_params, c->max_params);
    else if ((double)c->tokens > c->max_tokens)
        snprintf(c->problem, sizeof c->problem, "%" PRIu64 " training tokens: over the budget of %.0f", c->tokens,
                 c->max_tokens);
    c->val_loss = validation_loss(m, &cfg, &c->val_tokens);
    model_free(m);
    if (!c->problem[0] && !(c->val_loss <= c->target_loss))
        snprintf(c->problem, sizeof c->problem, "validation loss %.4f recomputed from the weights: above the target %.4f",
                 c->val_loss, c->target_loss);
    c->passed = !c->problem[0];
}

/* ------------------------------------------------------------------ the markdown */

static const char *gib(double bytes, char *buf, size_t n) {
    if (bytes >= 1e9) snprintf(buf, n, "%.2f GB", bytes / 1e9);
    else snprintf(buf, n, "%.1f MB", bytes / 1e6);
    return buf;
}

static void write_summary(FILE *md, const char *dir, const run_events *r, const run_figures *f) {
    const model_config *mc = &f->mc;
    const train_config *cfg = &f->cfg;
    long steps = r->nsteps ? r->steps[r->nsteps - 1].step : 0;
    fprintf(md, "# Run report: %s\n\nRun directory `%s`, written by `mixpar report` from its event files.\n\n", r->name, dir);
    fprintf(md, "## Summary\n\n| | |\n|---|---|\n");
    fprintf(md, "| model | %s, %d layers, width %d, %d heads / %d KV heads%s, FFN %d (%s), vocabulary %d, context %d%s |\n",
            mc->arch == MODEL_LLAMA ? "LLaMA-style" : "GPT-2", mc->L, mc->C, mc->NH, mc->KVH,
            mc->KVH < mc->NH ? " (GQA)" : "", mc->F, mc->arch == MODEL_LLAMA ? "SwiGLU" : "GELU", mc->V, mc->maxT,
            mc->tied ? ", tied head" : "");
    fprintf(md, "| parameters | %lld |\n", r->params);
    fprintf(md, "| precision | recipe %s, compute %s, matmuls %s, loss scaler %s |\n", r->recipe,
            r->compute[0] ? r->compute : "?", r->matmul[0] ? r->matmul : "?", r->scaler);
    if (r->world == 1) fprintf(md, "| parallelism | one rank |\n");
    else if (r->fsdp[0]) fprintf(md, "| parallelism | %d ranks, FSDP %s (ZeRO stage %d) |\n", r->world, r->fsdp, r->zero_stage);
    else fprintf(md, "| parallelism | %d ranks, %s |\n", r->world, r->zero_stage ? "ZeRO" : "DDP (ZeRO stage 0)");
    if (r->zero_stage && r->world > 1) fprintf(md, "| ZeRO stage | %d |\n", r->zero_stage);
    fprintf(md, "| offload | %s |\n", cfg->zero.offload_optimizer == OFFLOAD_CPU ? "optimizer to the host (ZeRO-Offload)" : "none");
    if (cfg->ckpt.policy == MODEL_RECOMPUTE_EVERY_K)
        fprintf(md, "| activation checkpointing | every_k, k = %d |\n", cfg->ckpt.every_k);
    else fprintf(md, "| activation checkpointing | %s |\n", model_recompute_name((model_recompute)cfg->ckpt.policy));
    fprintf(md, "| batch | %d rows x %d tokens x %d accumulated x %d data-parallel ranks = %" PRIu64 " tokens a step |\n",
            cfg->micro_batch, cfg->data.seq_len, cfg->grad_accum, cfg->world,
            (uint64_t)cfg->micro_batch * (uint64_t)cfg->data.seq_len * (uint64_t)cfg->grad_accum * (uint64_t)cfg->world);
    fprintf(md, "| steps | %ld (the config asks for %ld) |\n", steps, cfg->train.steps);
    fprintf(md, "| tokens | %" PRIu64 " |\n\n", f->tokens);
}

static void write_loss(FILE *md, const run_events *r) {
    fprintf(md, "## Loss\n\n");
    if (!r->nsteps) {
        fprintf(md, "No step events: the run took no step.\n\n");
        return;
    }
    const step_rec *last = &r->steps[r->nsteps - 1];
    double best = INFINITY;
    long skipped = 0, first_skip = -1;
    for (long i = 0; i < r->nsteps; i++) {
        if (r->steps[i].loss < best) best = r->steps[i].loss;
        if (r->steps[i].skipped && !skipped++) first_skip = r->steps[i].step;
    }
    fprintf(md, "| | |\n|---|---|\n| final training loss (step %ld) | %.4f |\n| lowest training loss | %.4f |\n", last->step,
            last->loss, best);
    if (r->evals) fprintf(md, "| final validation loss (step %ld) | %.4f |\n", r->last_eval_step, r->last_val);
    else fprintf(md, "| validation loss | not evaluated (train.eval_interval 0) |\n");
    fprintf(md, "| loss scale | %s: started at %g, ended at %g |\n", r->scaler, r->init_scale, last->scale);
    if (skipped) fprintf(md, "| skipped steps | %ld (the first at step %ld) |\n", skipped, first_skip);
    else fprintf(md, "| skipped steps | 0 |\n");
    if (r->diagnoses) fprintf(md, "| diagnoses | %ld (run `mixpar doctor` on the run) |\n", r->diagnoses);
    fprintf(md, "\n");
}

static void write_speed(FILE *md, const run_events *r, const run_figures *f) {
    fprintf(md, "## Throughput and MFU\n\n| | |\n|---|---|\n");
    fprintf(md, "| tokens/s | %.1f (%d rank%s; total tokens over total time of steps %d..%ld) |\n", f->tokens_per_s,
            r->world, r->world == 1 ? "" : "s", r->nsteps > WARMUP_STEPS ? WARMUP_STEPS + 1 : 1,
            r->nsteps ? r->steps[r->nsteps - 1].step : 0);
    fprintf(md, "| model FLOPs a token | %.4g = 6N %.4g (N = %" PRIu64 " matmul weights) + attention 12 L T h %.4g |\n",
            (double)f->flops.total, (double)f->flops.dense, f->flops.matmul_params, (double)f->flops.attention);
    fprintf(md, "| achieved model FLOP/s | %.3g GFLOP/s |\n", f->flops_per_s / 1e9);
    if (f->peak > 0) fprintf(md, "| MFU | %.2f%% of %.4g GFLOP/s (%s) |\n", 100 * f->mfu, f->peak / 1e9, f->peak_source);
    else fprintf(md, "| MFU | unknown: the run recorded no peak (profile it, train.profile=true) and no --peak was given |\n");
    double comm = 0;
    long ncomm = 0;
    for (long i = 0; i < r->nsteps; i++)
        if (isfinite(r->steps[i].comm_bytes)) comm += r->steps[i].comm_bytes, ncomm++;
    if (ncomm) fprintf(md, "| communication | %.4g bytes a step sent by rank 0 (%.3f x the %lld parameters in 4 bytes) |\n",
                       comm / (double)ncomm, comm / (double)ncomm / (4.0 * (double)r->params), r->params);
    fprintf(md, "\n");
    if (r->nspans) {
        long n = r->span_steps_last - r->span_steps_first + 1;
        double total = 0;
        for (int i = 0; i < r->nspans; i++) total += r->spans[i].seconds;
        fprintf(md, "Time per step by span (rank 0, steps %ld..%ld):\n\n| span | ms a step | share |\n|---|---:|---:|\n",
                r->span_steps_first, r->span_steps_last);
        for (int i = 0; i < r->nspans; i++)
            fprintf(md, "| %s | %.1f | %.1f%% |\n", r->spans[i].name, 1e3 * r->spans[i].seconds / (double)n,
                    100 * r->spans[i].seconds / total);
        fprintf(md, "\n");
    }
}

/* Returns the tags off the plan, over every rank. */
static int write_memory(FILE *md, const run_events *r) {
    fprintf(md, "## Memory per rank against the plan\n\n");
    if (!r->has_plan) {
        fprintf(md, "The run header has no plan (a model-parallel run): nothing to check.\n\n");
        return 0;
    }
    int off_total = 0;
    char a[32], b[32];
    for (int k = 0; k < r->world && k < VZ_MAX_RANKS; k++) {
        if (!r->has_mem[k]) {
            fprintf(md, "Rank %d: no mem events.\n\n", k);
            continue;
        }
        report_tag_check checks[MEM_NTAGS], total;
        int off = report_check_plan(r->plan, r->peak[k], MEM_NTAGS, PLAN_TOLERANCE, checks); /* lab 29 */
        uint64_t plan_device = 0;
        for (int t = 0; t < MEM_NTAGS; t++)
            if (t != MEM_HOST) plan_device += r->plan[t];
        report_check_plan(&plan_device, &r->peak_total[k], 1, PLAN_TOLERANCE, &total);
        fprintf(md, "Rank %d: peak %s of device memory against the plan's %s (%.3f)%s.\n\n"
                "| tag | plan | measured peak | measured / plan | |\n|---|---:|---:|---:|---|\n",
                k, gib((double)r->peak_total[k], a, sizeof a), gib((double)plan_device, b, sizeof b), total.ratio,
                total.off ? ", more than 5% off" : ", within 5%");
        for (int t = 0; t < MEM_NTAGS; t++) {
            if (!checks[t].plan && !checks[t].measured) continue;
            if (!checks[t].planned)
                fprintf(md, "| %s | not planned | %" PRIu64 " | | counted in the total only |\n", mem_tag_name((mem_tag)t),
                        checks[t].measured);
            else
                fprintf(md, "| %s | %" PRIu64 " | %" PRIu64 " | %.3f | %s |\n", mem_tag_name((mem_tag)t), checks[t].plan,
                        checks[t].measured, checks[t].ratio, checks[t].off ? "**off by more than 5%**" : "ok");
        }
        fprintf(md, "\n");
        off_total += off + total.off;
    }
    return off_total;
}

static void write_capstone(FILE *md, const capstone_check *c) {
    fprintf(md, "## Capstone check (lab 29)\n\n| rule | value | limit |\n|---|---|---|\n");
    fprintf(md, "| final checkpoint | `%s`, step %ld | the run's last step |\n", c->checkpoint, c->step);
    fprintf(md, "| parameters | %lld | %.0f to %.0f |\n", c->params, c->min_params, c->max_params);
    fprintf(md, "| training tokens | %" PRIu64 " | at most %.0f |\n", c->tokens, c->max_tokens);
    fprintf(md, "| validation loss, recomputed (fp32, %ld tokens) | %.4f | at most %.4f |\n\n", c->val_tokens, c->val_loss,
            c->target_loss);
    fprintf(md, "**%s**%s%s\n\n", c->passed ? "PASS" : "FAIL", c->passed ? "" : ": ", c->problem);
}

static const char *const figure_names[] = {"loss", "loss_scale", "throughput", "memory", "memory_time", "timeline",
                                           "comm_bandwidth", "underflow"};

static void write_figures(FILE *md, const char *figs, const char *md_dir, int rc) {
    fprintf(md, "## Figures\n\n");
    if (rc != 0) {
        fprintf(md, "`mixpar plot` failed (exit %d); its output is in `%s/plot.log`.\n\n", rc, figs);
        return;
    }
    for (size_t i = 0; i < sizeof figure_names / sizeof *figure_names; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s.png", figs, figure_names[i]);
        if (access(path, R_OK) != 0) continue;
        size_t n = strlen(md_dir);
        const char *rel = strncmp(path, md_dir, n) == 0 && path[n] == '/' ? path + n + 1 : path;
        fprintf(md, "![%s](%s)\n\n", figure_names[i], rel);
    }
}

/* ------------------------------------------------------------------ command */

static double number(const char *opt, const char *v) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x) || x < 0) mp_usage_error("report", "%s needs a number >= 0, not '%s'", opt, v);
    return x;
}

static void make_dir(const char *path) {
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        MP_FAIL("a folder for the report", "cannot create %s: %s", path, strerror(errno));
}

int cmd_report(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    double peak_gflops = 0;
    bool figures = true;
    capstone_check cap = {.min_params = capstone_rules.min_params, .max_params = capstone_rules.max_params,
                          .max_tokens = capstone_rules.max_tokens, .target_loss = capstone_rules.target_loss};
    bool capstone = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--no-figures")) figures = false;
        else if (!strcmp(a, "--capstone")) capstone = true;
        else if (!strcmp(a, "-o") || !strcmp(a, "--peak") || !strcmp(a, "--target-loss") || !strcmp(a, "--max-tokens") ||
                 !strcmp(a, "--params")) {
            if (i + 1 >= argc) mp_usage_error("report", "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "-o")) out = v;
            else if (!strcmp(a, "--peak")) peak_gflops = number(a, v);
            else if (!strcmp(a, "--target-loss")) cap.target_loss = number(a, v);
            else if (!strcmp(a, "--max-tokens")) cap.max_tokens = number(a, v);
            else if (sscanf(v, "%lf:%lf", &cap.min_params, &cap.max_params) != 2 || !(cap.min_params <= cap.max_params))
                mp_usage_error("report", "--params needs MIN:MAX (e.g. 10e6:20e6), not '%s'", v);
        } else if (a[0] == '-') {
            mp_usage_error("report", "unknown option '%s'", a);
        } else if (dir) {
            mp_usage_error("report", "one RUN_DIR, not '%s' and '%s'", dir, a);
        } else {
            dir = a;
        }
    }
    if (!dir) mp_usage_error("report", "a RUN_DIR is needed (runs/<run>, with events.rank*.jsonl)");

    static run_events r;
    read_run(dir, &r);
    run_figures f;
    compute_figures(dir, &r, peak_gflops, &f);
    if (capstone) check_capstone(dir, &r, &f, &cap);

    char figs[4200], md_path[4300], md_dir[4300];
    snprintf(figs, sizeof figs, "%s/report", dir);
    if (out) snprintf(md_path, sizeof md_path, "%s", out);
    else snprintf(md_path, sizeof md_path, "%s/report.md", figs);
    snprintf(md_dir, sizeof md_dir, "%s", md_path);
    char *slash = strrchr(md_dir, '/');
    if (slash) *slash = '\0';
    else snprintf(md_dir, sizeof md_dir, ".");
    make_dir(figs);
    int plot_rc = figures ? draw_figures(dir, figs, &f) : 0;

    FILE *md = fopen(md_path, "w");
    if (!md) MP_FAIL("a writable report file", "cannot write %s: %s", md_path, strerror(errno));
    write_summary(md, dir, &r, &f);
    write_loss(md, &r);
    write_speed(md, &r, &f);
    int off = write_memory(md, &r);
    if (capstone) write_capstone(md, &cap);
    if (figures) write_figures(md, figs, md_dir, plot_rc);
    if (fclose(md) != 0) MP_FAIL("a writable report file", "writing %s failed", md_path);

    printf("report: %s\n", md_path);
    printf("run %s: %lld parameters, %d rank(s), %ld steps, %" PRIu64 " tokens; final loss %.4f", r.name, r.params, r.world,
           r.nsteps ? r.steps[r.nsteps - 1].step : 0, f.tokens, r.nsteps ? r.steps[r.nsteps - 1].loss : NAN);
    if (r.evals) printf(", validation %.4f", r.last_val);
    printf("\ntokens/s %.1f, MFU %s", f.tokens_per_s, f.peak > 0 ? "" : "unknown");
    if (f.peak > 0) printf("%.2f%%", 100 * f.mfu);
    printf("\nmemory against the plan: %d check(s) more than 5%% off (planned tags and the device total) over %d "
           "rank(s)\n", off, r.world);
    if (figures) printf("figures: %s (mixpar plot %s)\n", plot_rc == 0 ? figs : "failed, see plot.log", plot_rc == 0 ? "ok" : "failed");
    if (capstone) printf("capstone: %s%s%s\n", cap.passed ? "PASS" : "FAIL", cap.passed ? "" : ": ", cap.problem);
    cJSON_Delete(r.config);
    free(r.steps);
    return capstone && !cap.passed ? 1 : 0;
}
