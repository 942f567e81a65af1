/* cmd_doctor.c: `mixpar doctor`: reads a run's events and names each problem, its evidence and its fix (lab 24);
 * before a launch, the memory a config needs against a limit; and the bug zoo's config overrides. */
#include "../../viz/source.h"
#include "base/error.h"
#include "base/mem.h"
#include "cli/commands.h"
#include "diag/diag.h"
#include "diag/zoo_fixes.h"
#include "train/config.h"
#include "train/trainer.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: mixpar doctor RUN_DIR\n"
            "       mixpar doctor --config FILE [--set KEY=VALUE]... --max-memory BYTES\n"
            "       mixpar doctor --zoo BUG [--fixed]\n"
            "Reads RUN_DIR/events.rank*.jsonl and prints, for each problem found, PROBLEM (what), EVIDENCE (step, rank,\n"
            "values) and FIX (the config key or code change): divergence (a loss not finite, or above 1.5x its\n"
            "minimum over the 50 steps before), the trainer's own diagnoses, a loss scale stuck with every step\n"
            "skipped, memory that grows step after step (a leak), replicas whose parameter hashes differ\n"
            "(MIXPAR_PARAM_HASH=1), ranks that read the same data (its batch_hash), ranks that stopped early, and\n"
            "precision settings that lose updates.\n"
            "Exit 0: healthy; 1: problems found; 2: bad input (no such directory, malformed events at file:line).\n"
            "With --config: the planner's bytes per rank for that run against --max-memory, before launching it.\n"
            "With --zoo: the overrides that reproduce a config bug of labs/lab24-common-problems/zoo/ (on top of\n"
            "configs/synthetic-addition.json), one per line; with --fixed, followed by the fix's (lab 24 region).\n");
}

/* ------------------------------------------------------------------ what the events hold */

typedef struct {
    long step;
    double loss, scale;
    bool skipped, has_loss;
    uint64_t hash;  /* the parameters' hash after the step; DIAG_NO_HASH when not recorded */
    uint64_t batch; /* the step's input tokens' hash; DIAG_NO_HASH when not recorded */
} step_rec;

enum { MAX_DIAG = 8 };

typedef struct {
    step_rec *steps;
    long nsteps, cap;
    double *mem_step, *mem_bytes[MEM_NTAGS];
    long nmem, mem_cap;
    bool has_run;
} rank_rec;

typedef struct {
    rank_rec ranks[VZ_MAX_RANKS];
    int world;          /* from the run header; 0 when none */
    long planned_steps; /* the config's train.steps; 0 when unknown */
    char recipe[32], scaler[32];
    bool stochastic_rounding;
    struct {
        char what[48], message[400];
        int rank;
        long step, count;
    } diag[MAX_DIAG]; /* the trainer's diagnosis events, one entry per kind: the first, and how many */
    int ndiag;
    int findings;
} doctor;

static void *grow(void *p, long *cap, long need, size_t elem) {
    if (need <= *cap) return p;
    long c = *cap ? *cap * 2 : 256;
    while (c < need) c *= 2;
    void *q = realloc(p, (size_t)c * elem);
    if (!q) MP_FAIL("memory for the events", "realloc of %ld elements failed", c);
    *cap = c;
    return q;
}

static void on_event(void *ctx, int rank, const cJSON *ev) {
    doctor *d = ctx;
    rank_rec *r = &d->ranks[rank];
    const char *kind = vz_json_str(ev, "kind", "");
    if (!strcmp(kind, "run")) {
        r->has_run = true;
        d->world = (int)vz_json_int(ev, "world", d->world);
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(ev, "precision");
        if (p) {
            snprintf(d->recipe, sizeof d->recipe, "%s", vz_json_str(p, "recipe", ""));
            snprintf(d->scaler, sizeof d->scaler, "%s", vz_json_str(p, "scaler", ""));
        }
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(ev, "config");
        const cJSON *cp = c ? cJSON_GetObjectItemCaseSensitive(c, "precision") : NULL;
        d->stochastic_rounding = cp ? vz_json_bool(cp, "stochastic_rounding", true) : true;
        const cJSON *ct = c ? cJSON_GetObjectItemCaseSensitive(c, "train") : NULL;
        if (ct) d->planned_steps = (long)vz_json_int(ct, "steps", 0);
    } else if (!strcmp(kind, "step")) {
        long step = (long)vz_json_int(ev, "step", -1);
        if (r->nsteps && step <= r->steps[r->nsteps - 1].step) r->nsteps = 0; /* a resumed run starts again */
        r->steps = grow(r->steps, &r->cap, r->nsteps + 1, sizeof *r->steps);
        const char *hex = vz_json_str(ev, "param_hash", NULL), *batch = vz_json_str(ev, "batch_hash", NULL);
        r->steps[r->nsteps++] = (step_rec){.step = step, .loss = vz_json_num(ev, "loss", NAN),
                                           .scale = vz_json_num(ev, "scale", 1), .skipped = vz_json_bool(ev, "skipped", false),
                                           .has_loss = cJSON_GetObjectItemCaseSensitive(ev, "loss") != NULL,
                                           .hash = hex ? strtoull(hex, NULL, 16) : DIAG_NO_HASH,
                                           .batch = batch ? strtoull(batch, NULL, 16) : DIAG_NO_HASH};
    } else if (!strcmp(kind, "mem")) {
        const cJSON *cur = cJSON_GetObjectItemCaseSensitive(ev, "current");
        if (!cur) return;
        if (r->nmem == r->mem_cap) { /* the step array and every tag's grow together */
            long cap = r->mem_cap;
            r->mem_step = grow(r->mem_step, &cap, r->nmem + 1, sizeof(double));
            for (int t = 0; t < MEM_NTAGS; t++) {
                long tag_cap = r->mem_cap;
                r->mem_bytes[t] = grow(r->mem_bytes[t], &tag_cap, r->nmem + 1, sizeof(double));
            }
            r->mem_cap = cap;
        }
        r->mem_step[r->nmem] = (double)vz_json_int(ev, "step", r->nmem);
        for (int t = 0; t < MEM_NTAGS; t++) r->mem_bytes[t][r->nmem] = vz_json_num(cur, mem_tag_name((mem_tag)t), 0);
        r->nmem++;
    } else if (!strcmp(kind, "diagnosis")) {
        const char *what = vz_json_str(ev, "what", "none");
        if (!strcmp(what, "none")) return;
        int i = 0;
        while (i < d->ndiag && strcmp(d->diag[i].what, what)) i++;
        if (i == d->ndiag) {
            if (d->ndiag == MAX_DIAG) return;
            d->ndiag++;
            snprintf(d->diag[i].what, sizeof d->diag[i].what, "%s", what);
            d->diag[i].rank = rank;
            d->diag[i].step = (long)vz_json_int(ev, "step", -1);
            const char *msg = vz_json_str(ev, "message", "");
            snprintf(d->diag[i].message, sizeof d->diag[i].message, "%.*s", (int)strcspn(msg, "\n"), msg);
        }
        d->diag[i].count++;
    }
}

/* ------------------------------------------------------------------ the checks */

static void report(doctor *d, const char *problem, const char *evidence, const char *fix) {
    d->findings++;
    printf("PROBLEM  %s\nEVIDENCE %s\nFIX      %s\n\n", problem, evidence, fix);
}

/* The trainer's own diagnoses (core/amp): each kind once, with its first occurrence. */
static void check_trainer_diagnoses(doctor *d) {
    for (int i = 0; i < d->ndiag; i++) {
        char problem[96], ev[512];
        snprintf(problem, sizeof problem, "the trainer diagnosed %s", d->diag[i].what);
        snprintf(ev, sizeof ev, "rank %d, first at step %ld (%ld such events): %s", d->diag[i].rank, d->diag[i].step,
                 d->diag[i].count, d->diag[i].message);
        report(d, problem, ev,
               !strncmp(d->diag[i].what, "scale_", 6)
                   ? "the gradients overflow at every scale: lower optimizer.params.lr, set gradient_clipping, or use "
                     "bf16 (precision.recipe=bf16)"
                   : "start from the first tensor it names (the trainer's log lists the likely causes in order); a "
                     "static fp16.loss_scale too high, an lr too high (optimizer.params.lr), no warmup or no clipping");
    }
}

static void check_divergence(doctor *d) {
    rank_rec *r = &d->ranks[0];
    if (!r->nsteps) return;
    double *loss = malloc((size_t)r->nsteps * sizeof *loss);
    long *at = malloc((size_t)r->nsteps * sizeof *at), n = 0; /* the steps that recorded a loss */
    for (long i = 0; i < r->nsteps; i++)
        if (r->steps[i].has_loss) {
            at[n] = i;
            loss[n++] = r->steps[i].loss;
        }
    diag_divergence_rule rule = DIAG_DIVERGENCE_DEFAULT;
    diag_divergence dv;
    char ev[256];
    if (diag_find_divergence(loss, n, &rule, &dv)) {
        const step_rec *s = &r->steps[at[dv.index]];
        if (dv.kind == DIAG_NONFINITE)
            snprintf(ev, sizeof ev, "rank 0 step %ld: loss %g (loss scale %g%s)", s->step, dv.value, s->scale,
                     s->skipped ? ", step skipped" : "");
        else
            snprintf(ev, sizeof ev, "rank 0 step %ld: loss %.4f > %.1f x %.4f, the lowest of the %d steps before", s->step,
                     dv.value, rule.factor, dv.reference, rule.window);
        report(d, dv.kind == DIAG_NONFINITE ? "the loss is not finite (divergence)" : "the loss spiked (divergence)", ev,
               "lower optimizer.params.lr; warm it up (scheduler.params.warmup_steps); clip (gradient_clipping=1); "
               "after scaling the batch or world size, scale the lr with a warmup; with gradient accumulation, "
               "check each micro-batch's loss is divided by gradient_accumulation_steps");
    }
    free(loss);
    free(at);
}

static void check_skipped_tail(doctor *d) {
    rank_rec *r = &d->ranks[0];
    long tail = 0;
    while (tail < r->nsteps && r->steps[r->nsteps - 1 - tail].skipped) tail++;
    if (tail < 8) return;
    const step_rec *last = &r->steps[r->nsteps - 1];
    char ev[256];
    snprintf(ev, sizeof ev, "rank 0: the last %ld steps were all skipped (steps %ld..%ld), loss scale %g at the last",
             tail, last->step - tail + 1, last->step, last->scale);
    report(d, "the loss scale is stuck: every step overflows and is skipped", ev,
           "a static fp16.loss_scale too high: fp16.loss_scale=0 (dynamic); at the scaler's minimum: the gradients "
           "overflow by themselves, lower optimizer.params.lr or use precision.recipe=bf16");
}

static void check_leak(doctor *d) {
    for (int rank = 0; rank < VZ_MAX_RANKS; rank++) {
        rank_rec *r = &d->ranks[rank];
        if (r->nmem < 2) continue;
        for (int t = 0; t < MEM_NTAGS; t++) {
            diag_leak_rule rule = DIAG_LEAK_DEFAULT;
            diag_leak lk;
            if (!diag_find_leak(r->mem_step, r->mem_bytes[t], r->nmem, &rule, &lk)) continue;
            char ev[320];
            snprintf(ev, sizeof ev,
                     "rank %d tag %s: +%.0f bytes a step (+- %.0f) over steps %.0f..%.0f, %.0f -> %.0f bytes", rank,
                     mem_tag_name((mem_tag)t), lk.slope, lk.slope_se, r->mem_step[lk.first], r->mem_step[r->nmem - 1],
                     r->mem_bytes[t][lk.first], r->mem_bytes[t][r->nmem - 1]);
            report(d, "memory grows every step (a leak): it will run out of memory", ev,
                   "free what each step allocates; do not keep per-step tensors (a list of losses keeps their buffers: "
                   "keep the number); mixpar viz's memory panel shows the tag growing");
            return;
        }
    }
}

static void check_desync(doctor *d, int nranks) {
    if (nranks < 2) return;
    long nsteps = 0;
    for (int r = 0; r < nranks; r++)
        if (d->ranks[r].nsteps > nsteps) nsteps = d->ranks[r].nsteps;
    uint64_t *hash = calloc((size_t)nranks * (size_t)nsteps, sizeof *hash);
    bool any = false;
    for (int r = 0; r < nranks; r++)
        for (long s = 0; s < d->ranks[r].nsteps; s++) {
            hash[(long)r * nsteps + s] = d->ranks[r].steps[s].hash;
            any |= d->ranks[r].steps[s].hash != DIAG_NO_HASH;
        }
    diag_desync ds;
    if (any && diag_find_desync(hash, nranks, nsteps, &ds)) {
        char ev[256];
        snprintf(ev, sizeof ev, "step %ld: rank %d's parameter hash %016" PRIx64 ", rank 0's %016" PRIx64 " (skipped: rank 0 %s, rank %d %s)",
                 d->ranks[0].steps[ds.step_index].step, ds.rank, ds.got, ds.expected,
                 d->ranks[0].steps[ds.step_index].skipped ? "yes" : "no", ds.rank,
                 ds.step_index < d->ranks[ds.rank].nsteps && d->ranks[ds.rank].steps[ds.step_index].skipped ? "yes" : "no");
        report(d, "replicas drifted apart: ranks hold different weights", ev,
               "every rank must take the same decision: reduce found_inf (max over ranks) before skipping a step, "
               "and reduce every gradient; same seed and config on every rank");
    }
    free(hash);
}

/* Data parallel ranks must read different data: when every step whose input hash all ranks recorded (at least 3) had
 * the same hash on every rank, the sampler hands every rank the same shard. */
static void check_same_data(doctor *d, int nranks) {
    if (nranks < 2) return;
    long compared = 0, same = 0, first = -1;
    for (long s = 0; s < d->ranks[0].nsteps; s++) {
        uint64_t want = d->ranks[0].steps[s].batch;
        bool all = want != DIAG_NO_HASH, equal = true;
        for (int r = 1; r < nranks && all; r++) {
            all = s < d->ranks[r].nsteps && d->ranks[r].steps[s].batch != DIAG_NO_HASH;
            equal &= all && d->ranks[r].steps[s].batch == want;
        }
        if (!all) continue;
        compared++;
        if (equal && ++same == 1) first = d->ranks[0].steps[s].step;
    }
    if (compared < 3 || same < compared) return;
    char ev[256];
    snprintf(ev, sizeof ev, "the input tokens' hash (batch_hash) is the same on all %d ranks at every one of %ld steps, "
             "from step %ld", nranks, compared, first);
    report(d, "every rank reads the same data: the extra ranks add no samples", ev,
           "give each rank its own share: data.sampler (global slices the global batch by rank, distributed is "
           "PyTorch's DistributedSampler, which needs the rank) and no rank-independent shard choice in the loader");
}

/* A rank whose events stop before the others' is dead. Ranks in data parallel wait for each other at every step, so
 * when one dies the others stop within a step too and mpirun ends the job: then every rank stops before the
 * config's train.steps, with no diagnosis from the trainer (which explains the runs it stops itself). */
static void check_stopped_early(doctor *d, int nranks) {
    int world = d->world > nranks ? d->world : nranks;
    if (world > VZ_MAX_RANKS) world = VZ_MAX_RANKS; /* the reader keeps no more */
    long most = 0, least = -1;
    int least_rank = 0;
    for (int r = 0; r < world; r++) {
        long last = d->ranks[r].nsteps ? d->ranks[r].steps[d->ranks[r].nsteps - 1].step : 0;
        if (last > most) most = last;
        if (least < 0 || last < least) {
            least = last;
            least_rank = r;
        }
    }
    char ev[256];
    if (world > 1 && least < most) {
        snprintf(ev, sizeof ev, "rank %d's last step is %ld, other ranks reached step %ld (world %d)", least_rank, least,
                 most, world);
        report(d, "a rank stopped early (a dead rank): the others waited for it in a collective", ev,
               "look at that rank's own log (out of memory, a signal, a full disk); resume every rank from the last "
               "checkpoint (train.checkpoint_interval, mixpar train --resume auto)");
    } else if (d->planned_steps > 0 && most < d->planned_steps && d->ndiag == 0) {
        snprintf(ev, sizeof ev, "every rank (world %d) stopped at step %ld of train.steps %ld, with no diagnosis from the "
                 "trainer", world, most, d->planned_steps);
        report(d, "the run ended early: a process was killed (with several ranks: one died, mpirun ended the others)",
               ev, "find the cause in mpirun's or the system's log (a signal 9 is often the OOM killer); then resume "
                   "from the last checkpoint: train.checkpoint_interval > 0 and mixpar train --resume auto");
    }
}

static void check_precision(doctor *d) {
    rank_rec *r = &d->ranks[0];
    char ev[256];
    double first = r->nsteps ? r->steps[0].loss : NAN, last = r->nsteps ? r->steps[r->nsteps - 1].loss : NAN;
    if (!strcmp(d->recipe, "bf16-pure") && !d->stochastic_rounding) {
        snprintf(ev, sizeof ev, "run header: recipe bf16-pure, stochastic_rounding false; loss %.4f -> %.4f in %ld steps",
                 first, last, r->nsteps);
        report(d, "bf16 weights without a master copy: updates under half a bf16 ulp are rounded away", ev,
               "precision.recipe=bf16 (fp32 master weights), or precision.stochastic_rounding=true");
    }
    if (!strcmp(d->recipe, "fp16") && !strcmp(d->scaler, "none")) {
        snprintf(ev, sizeof ev, "run header: recipe fp16, loss scaler none; loss %.4f -> %.4f in %ld steps", first, last,
                 r->nsteps);
        report(d, "fp16 without loss scaling: small gradients flush to zero", ev,
               "precision.loss_scaler=pytorch (dynamic loss scaling); `mixpar amp underflow` counts the flushes");
    }
}

static int diagnose(const char *dir) {
    static vz_source src;
    static doctor d;
    char why[512];
    if (vz_source_open(&src, dir, why, sizeof why) != 0) MP_FAIL("a run directory with events.rank*.jsonl", "%s", why);
    vz_source_poll(&src, on_event, &d);
    vz_source_finish(&src);
    for (int r = 0; r < src.nranks; r++)
        if (src.files[r] && src.files[r]->malformed)
            MP_FAIL("events as JSON lines (core/base/EVENTS.md)", "%s:%lld: a malformed line (%lld in the file)",
                    src.files[r]->path, src.files[r]->first_malformed, src.files[r]->malformed);
    if (!src.events) MP_FAIL("events in the run directory", "%s: no event in its files", dir);
    int nranks = src.nranks;
    check_trainer_diagnoses(&d);
    check_divergence(&d);
    check_skipped_tail(&d);
    check_leak(&d);
    check_desync(&d, nranks);
    check_same_data(&d, nranks);
    check_stopped_early(&d, nranks);
    check_precision(&d);
    long steps = d.ranks[0].nsteps ? d.ranks[0].steps[d.ranks[0].nsteps - 1].step : 0;
    if (!d.findings && !steps) printf("healthy: %s, %d rank(s), no step events (%lld events): no problem found\n", dir, nranks, src.events);
    else if (!d.findings) printf("healthy: %s, %d rank(s), %ld steps: no problem found\n", dir, nranks, steps);
    else printf("%d problem(s) found in %s (%d rank(s), %ld steps)\n", d.findings, dir, nranks, steps);
    vz_source_close(&src);
    return d.findings ? 1 : 0;
}

static int plan_check(const char *config, const char **sets, int nsets, const char *limit_text) {
    if (!limit_text) mp_usage_error("doctor", "--config needs --max-memory BYTES (e.g. 24GB)");
    char assign[96];
    snprintf(assign, sizeof assign, "train.max_memory=\"%s\"", limit_text);
    sets[nsets++] = assign;
    train_config cfg;
    config_load(config, sets, nsets, 1, &cfg, NULL);
    data_err err;
    if (cfg.model.model.V == 0 && !config_load_vocab(&cfg, &err))
        MP_FAIL_HINT(err.expected, err.hint, "%s", err.found);
    model_config mc = cfg.model.model;
    model_config_complete(&mc);
    plan_result plan;
    trainer_plan(&cfg, &mc, &plan);
    diag_oom oom;
    diag_check_oom(&plan, cfg.train.max_memory, &oom);
    printf("plan: %.1f MiB a rank (", (double)oom.need / 1048576);
    for (int t = 0, first = 1; t < MEM_NTAGS; t++)
        if (t != MEM_HOST && plan.bytes[t]) {
            printf("%s%s %.1f", first ? "" : ", ", mem_tag_name((mem_tag)t), (double)plan.bytes[t] / 1048576);
            first = 0;
        }
    printf(" MiB) against --max-memory %.1f MiB\n", (double)oom.limit / 1048576);
    if (oom.fits) {
        printf("fits: %.0f%% of the limit\n", oom.limit ? 100.0 * (double)oom.need / (double)oom.limit : 0);
        return 0;
    }
    printf("\nPROBLEM  out of memory before the first step: the run needs %.1f MiB, the limit is %.1f MiB\n",
           (double)oom.need / 1048576, (double)oom.limit / 1048576);
    printf("EVIDENCE the largest tag is %s: %.1f MiB, %.0f%% of the need\n", mem_tag_name((mem_tag)oom.biggest),
           (double)plan.bytes[oom.biggest] / 1048576, 100 * oom.share);
    printf("FIX      %s\n", oom.fix);
    return 1;
}

static int zoo(const char *bug, bool fixed) {
    const zoo_bug *b = zoo_config_bug(bug);
    if (!b) {
        int n;
        const zoo_bug *all = zoo_config_bugs(&n);
        fprintf(stderr, "mixpar doctor: unknown zoo bug '%s'; the config bugs are:", bug);
        for (int i = 0; i < n; i++) fprintf(stderr, " %s", all[i].bug);
        fputc('\n', stderr);
        return 2;
    }
    for (int i = 0; i < ZOO_MAX_OVERRIDES && b->broken[i]; i++) printf("%s\n", b->broken[i]);
    if (fixed) {
        const char *fix[ZOO_MAX_OVERRIDES + 1];
        zoo_fix_overrides(bug, fix);
        for (int i = 0; fix[i]; i++) printf("%s\n", fix[i]);
    }
    return 0;
}

int cmd_doctor(int argc, char **argv) {
    const char *dir = NULL, *config = NULL, *limit = NULL, *bug = NULL, *sets[66];
    int nsets = 0;
    bool fixed = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--fixed")) {
            fixed = true;
        } else if (!strcmp(a, "--config") || !strcmp(a, "--set") || !strcmp(a, "--max-memory") || !strcmp(a, "--zoo")) {
            if (i + 1 >= argc) mp_usage_error("doctor", "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--config")) config = v;
            else if (!strcmp(a, "--max-memory")) limit = v;
            else if (!strcmp(a, "--zoo")) bug = v;
            else if (nsets >= 64) mp_usage_error("doctor", "at most 64 --set overrides");
            else sets[nsets++] = v;
        } else if (a[0] == '-') {
            mp_usage_error("doctor", "unknown option '%s'", a);
        } else if (dir) {
            mp_usage_error("doctor", "one RUN_DIR, not '%s' and '%s'", dir, a);
        } else {
            dir = a;
        }
    }
    if (bug) return zoo(bug, fixed);
    if (config) return plan_check(config, sets, nsets, limit);
    if (!dir) mp_usage_error("doctor", "a RUN_DIR is needed (runs/<run>, with events.rank*.jsonl)");
    return diagnose(dir);
}
