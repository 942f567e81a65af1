/* lab24_util.h: helpers for the lab 24 tests: crafted series for the detectors, and a zoo config bug run with its
 * fix applied (a forked child runs the real trainer on the addition task; the parent reads the run's events). */
#ifndef LAB24_UTIL_H
#define LAB24_UTIL_H

#include "diag/diag.h"
#include "diag/zoo_fixes.h"
#include "mptest.h"
#include "train/config.h"
#include "train/trainer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------ detectors */

#define DIVERGENCE_AT(loss, n, want_kind, want_index, why) \
    lab24_divergence_at(__FILE__, __LINE__, (loss), (n), (want_kind), (want_index), (why))
static inline void lab24_divergence_at(const char *file, int line, const double *loss, long n,
                                       diag_divergence_kind want_kind, long want_index, const char *why) {
    diag_divergence_rule rule = DIAG_DIVERGENCE_DEFAULT;
    diag_divergence got;
    bool found = diag_find_divergence(loss, n, &rule, &got);
    mpt_observe(file, line, (uint64_t)got.index);
    mpt_observe(file, line, (uint64_t)got.kind);
    if (found == (want_index >= 0) && got.index == want_index && got.kind == want_kind) return;
    static const char *const kinds[] = {"healthy", "non-finite", "spike"};
    mpt_fail(file, line,
             "diag_find_divergence on %s (window %d, factor %g, min_history %d)\n      expected: %s at index %ld\n"
             "      got:      %s at index %ld (returned %s)\n      likely mistake: %s",
             why, rule.window, rule.factor, rule.min_history, kinds[want_kind], want_index, kinds[got.kind], got.index,
             found ? "true" : "false",
             want_kind == DIAG_NONFINITE ? "isfinite() catches NaN and both infinities; test it before anything else"
             : want_kind == DIAG_HEALTHY ? "compare with factor x the minimum of the window BEFORE the point, only once "
                                           "min_history finite points were seen, and skip non-finite ones in the minimum"
                                         : "the minimum covers the `window` points before i (i-window .. i-1), not the "
                                           "whole history, and the test is loss > factor x minimum");
}

/* y = a + b x + noise over steps 1..n: the least-squares slope and its standard error, as a reference. */
static inline void lab24_ls_slope(const double *x, const double *y, long n, double *slope, double *se) {
    double mx = 0, my = 0, sxx = 0, sxy = 0, ssr = 0;
    for (long i = 0; i < n; i++) mx += x[i], my += y[i];
    mx /= n, my /= n;
    for (long i = 0; i < n; i++) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
    *slope = sxy / sxx;
    for (long i = 0; i < n; i++) {
        double r = y[i] - my - *slope * (x[i] - mx);
        ssr += r * r;
    }
    *se = sqrt(ssr / (n - 2) / sxx);
}

/* ------------------------------------------------------------------ a zoo bug, run with the fix */

typedef struct {
    int exit_code;                  /* the child's: 0 when the run finished, 86 for a stub, 2 stopped by the trainer */
    long steps;                     /* step events */
    long skipped, skipped_last10;   /* skipped steps, and among the last 10 */
    double first_loss, last_loss, max_late_loss; /* max_late_loss: the largest loss from step 6 on */
    bool all_finite;
    double lowest_before_spike;     /* for the spike check: max over i >= 6 of loss[i] / min(loss[0..i)) */
    long train_batch_size;          /* the resolved config's global batch */
} lab24_run;

/* Runs configs/synthetic-addition.json for `steps` steps with the bug's broken overrides, then (when with_fix) the
 * fix's from zoo_fix_overrides, in a child process; the dataset is built in a fresh directory under /tmp. */
static inline lab24_run lab24_run_bug(const char *bug, bool with_fix, int steps) {
    lab24_run out = {.exit_code = -1, .all_finite = true, .max_late_loss = -INFINITY};
    char dir[] = "/tmp/lab24-fix-XXXXXX";
    if (!mkdtemp(dir)) mpt_fail_stop(__FILE__, __LINE__, "cannot make a directory under /tmp");
    char steps_set[64], data_set[128], run_set[128];
    snprintf(steps_set, sizeof steps_set, "train.steps=%d", steps);
    snprintf(data_set, sizeof data_set, "data.dir=%s/data", dir);
    snprintf(run_set, sizeof run_set, "train.run_dir=%s/run", dir);
    const zoo_bug *b = zoo_config_bug(bug);
    if (!b) mpt_fail_stop(__FILE__, __LINE__, "no zoo bug '%s'", bug);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        const char *sets[32] = {steps_set, data_set, run_set, "train.eval_interval=0", "train.sample_interval=0",
                                "train.checkpoint_interval=0", "train.hist_interval=0", "train.threads=1",
                                "scheduler.params.warmup_steps=2"}; /* runs shorter than the config's warmup of 50 */
        int n = 9;
        for (int i = 0; i < ZOO_MAX_OVERRIDES && b->broken[i]; i++) sets[n++] = b->broken[i];
        if (with_fix) {
            const char *fix[ZOO_MAX_OVERRIDES + 1];
            zoo_fix_overrides(bug, fix);
            for (int i = 0; fix[i]; i++) sets[n++] = fix[i];
        }
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(3);
        train_config cfg;
        config_load("configs/synthetic-addition.json", sets, n, 1, &cfg, NULL);
        char batch_path[256];
        snprintf(batch_path, sizeof batch_path, "%s/batch", dir);
        FILE *bs = fopen(batch_path, "w");
        if (bs) {
            fprintf(bs, "%d\n", cfg.train_batch_size);
            fclose(bs);
        }
        trainer_options opt = {.quiet = true};
        trainer_run(&cfg, &opt);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    char path[256];
    snprintf(path, sizeof path, "%s/batch", dir);
    FILE *bs = fopen(path, "r");
    if (bs) {
        if (fscanf(bs, "%ld", &out.train_batch_size) != 1) out.train_batch_size = 0;
        fclose(bs);
    }
    snprintf(path, sizeof path, "%s/run/events.rank0.jsonl", dir);
    FILE *f = fopen(path, "r");
    double *loss = calloc((size_t)steps + 1, sizeof *loss);
    bool *skip = calloc((size_t)steps + 1, sizeof *skip);
    char *line = NULL;
    size_t cap = 0;
    while (f && getline(&line, &cap, f) > 0) {
        cJSON *ev = cJSON_Parse(line);
        const cJSON *kind = cJSON_GetObjectItem(ev, "kind");
        if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "step") && out.steps < steps) {
            const cJSON *l = cJSON_GetObjectItem(ev, "loss");
            loss[out.steps] = cJSON_IsNumber(l) ? l->valuedouble : NAN;
            skip[out.steps] = cJSON_IsTrue(cJSON_GetObjectItem(ev, "skipped"));
            out.steps++;
        }
        cJSON_Delete(ev);
    }
    free(line);
    if (f) fclose(f);
    double lowest = INFINITY;
    for (long i = 0; i < out.steps; i++) {
        out.all_finite &= isfinite(loss[i]);
        out.skipped += skip[i];
        if (i >= out.steps - 10) out.skipped_last10 += skip[i];
        if (i >= 5 && isfinite(lowest) && loss[i] / lowest > out.lowest_before_spike) out.lowest_before_spike = loss[i] / lowest;
        if (i >= 5 && loss[i] > out.max_late_loss) out.max_late_loss = loss[i];
        if (isfinite(loss[i]) && loss[i] < lowest) lowest = loss[i];
    }
    out.first_loss = out.steps ? loss[0] : NAN;
    out.last_loss = out.steps ? loss[out.steps - 1] : NAN;
    free(loss);
    free(skip);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) { /* a leftover temporary directory is harmless */
    }
    return out;
}

/* The fix's run must have finished: a stub (86) or a run the trainer stopped (2) say why not. */
#define FIX_RAN(r, bug, want_steps) \
    MPT_REQUIRE((r).exit_code == 0 && (r).steps == (want_steps), \
                "%s with your fix (zoo_fix_overrides in core/diag/zoo_fixes.c): expected %d steps and exit 0\n" \
                "      got:      %ld steps, exit %d%s", \
                (bug), (want_steps), (r).steps, (r).exit_code, \
                (r).exit_code == 86 ? " (the lab 24 region is still a stub)" \
                : (r).exit_code == 2 ? " (the trainer stopped the run: the fix does not remove the cause; run " \
                                       "labs/lab24-common-problems/zoo/zoo.sh with --fixed to see its message)" : "")

#endif
