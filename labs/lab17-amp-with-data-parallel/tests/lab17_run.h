/* lab17_run.h: what lab 17's tests share: start build/labs/lab17_worker on N ranks through mpirun, read every
 * rank's report, and check that the ranks made the same skip decisions, kept the same loss scale and stayed
 * bit-identical, with the overflow found only where it was put. */
#ifndef LAB17_RUN_H
#define LAB17_RUN_H

#include "comm/launch.h"
#include "worker/lab17_values.h"
#include "mptest.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LAB17_MAX_RANKS = 4, LAB17_MAX_STEPS = 12, LAB17_WAIT_S = 40, LAB17_COMM_TIMEOUT_S = 15 };

typedef struct {
    bool skipped, found_inf_local;
    double scale, next_scale, loss;
    unsigned long long params;
} lab17_step;

typedef struct {
    int world, steps;
    size_t params;
    lab17_step step[LAB17_MAX_STEPS];
} lab17_rank;

typedef struct {
    int ranks, steps;
    int inject_step[LAB17_MAX_RANKS]; /* the step (from 1) each rank finds its inf at; 0: none */
    lab17_rank rank[LAB17_MAX_RANKS];
    char what[240];
} lab17_result;

static inline bool lab17_parse_rank(const char *path, lab17_rank *r) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    memset(r, 0, sizeof *r);
    bool ok = fscanf(f, " world=%d params=%zu", &r->world, &r->params) == 2;
    while (ok && r->steps < LAB17_MAX_STEPS) {
        lab17_step *s = &r->step[r->steps];
        int index, skipped, found;
        if (fscanf(f, " step=%d skipped=%d found_inf_local=%d scale=%lf next_scale=%lf loss=%lf params=%llx", &index,
                   &skipped, &found, &s->scale, &s->next_scale, &s->loss, &s->params) != 7)
            break;
        s->skipped = skipped != 0;
        s->found_inf_local = found != 0;
        r->steps++;
    }
    fclose(f);
    return ok;
}

static inline const char *lab17_tail(const char *text, size_t max) {
    size_t n = strlen(text);
    return n > max ? text + n - max : text;
}

/* Runs the worker on `ranks` ranks for `steps` steps; inject: "none" or "RANK:STEP,..."; extra: NULL or the
 * worker's options ("local", "hook=fp16", "accum=2"), space-separated. A failed run stops the test with the
 * likely cause. */
static inline void lab17_run(lab17_result *res, int ranks, int steps, const char *inject, const char *extra) {
    const char *worker = "./build/labs/lab17_worker";
    MPT_REQUIRE(access(worker, X_OK) == 0, "%s is missing: 'make labtests LAB=17' (or make grade LAB=17) builds it",
                worker);
    MPT_REQUIRE(comm_launch_mpirun() != NULL, "mpirun is not on PATH: 'make deps' installs OpenMPI");
    MPT_REQUIRE(ranks <= LAB17_MAX_RANKS && steps <= LAB17_MAX_STEPS, "at most %d ranks and %d steps",
                LAB17_MAX_RANKS, LAB17_MAX_STEPS);
    memset(res, 0, sizeof *res);
    res->ranks = ranks;
    res->steps = steps;
    for (const char *p = strcmp(inject, "none") == 0 ? "" : inject; *p;) {
        int r, s, used;
        MPT_REQUIRE(sscanf(p, "%d:%d%n", &r, &s, &used) == 2 && r >= 0 && r < ranks, "test data: inject '%s'", inject);
        res->inject_step[r] = s;
        p += used;
        if (*p == ',') p++;
    }
    char where[120] = "";
    for (int r = 0; r < ranks; r++)
        if (res->inject_step[r]) {
            size_t used = strlen(where);
            snprintf(where + used, sizeof where - used, "%son rank %d at step %d", used ? ", " : "", r,
                     res->inject_step[r]);
        }
    snprintf(res->what, sizeof res->what, "fp16 AMP + DDP on %d ranks, %d steps, inf %s%s%s", ranks, steps,
             where[0] ? where : "nowhere", extra ? ", " : "", extra ? extra : "");
    char dir[] = "/tmp/mixpar-lab17-XXXXXX";
    MPT_REQUIRE(mkdtemp(dir) != NULL, "cannot make a temporary folder in /tmp");
    char a_steps[12], opts[128] = "";
    snprintf(a_steps, sizeof a_steps, "%d", steps);
    char *argv[12] = {(char *)worker, "run", dir, a_steps, (char *)inject};
    int argc = 5;
    if (extra) {
        snprintf(opts, sizeof opts, "%s", extra);
        for (char *tok = strtok(opts, " "); tok && argc < 11; tok = strtok(NULL, " ")) argv[argc++] = tok;
    }
    argv[argc] = NULL;
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", LAB17_COMM_TIMEOUT_S);
    setenv("MIXPAR_COMM_TIMEOUT", timeout, 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    unsetenv("MIXPAR_ALLREDUCE");
    comm_launch_opts o = {.ranks = ranks, .timeout_s = LAB17_WAIT_S, .quiet = true};
    char *output = NULL;
    int rc = comm_launch_run(&o, argv, &output);
    bool read_all = true;
    for (int r = 0; r < ranks; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, r);
        if (rc == 0 && !lab17_parse_rank(path, &res->rank[r])) read_all = false;
        unlink(path);
    }
    rmdir(dir);
    if (rc != 0) {
        const char *text = output ? output : "";
        const char *why = strstr(text, "lab 17 not done") ? "the LAB 17 region in core/train/step.c is still a LAB_TODO stub"
                        : strstr(text, "lab 07 not done") ? "lab 07's region (the AMP step in core/train/step.c) is still "
                                                            "a stub: lab 17 runs inside it"
                        : strstr(text, "not done") ? "a region of another lab is still a stub (see the ranks' output)"
                        : strstr(text, "called twice") ? "amp_scaler_unscale ran twice in one step (lab 07's region)"
                        : rc == 124 || strstr(text, "timed out")
                            ? "the ranks did not finish: some rank waited in a collective the others never entered. "
                              "agree_found_inf runs on every rank at every step, so every rank must make the same "
                              "collective call there, whatever its own found_inf is (no 'if (found_inf) allreduce')"
                        : rc == 139 ? "a rank crashed (segmentation fault)"
                                    : "a rank failed (see its output)";
        mpt_fail_stop(__FILE__, __LINE__, "%s: mpirun exited with %d: %s\n      ranks' output (end):\n%s", res->what, rc,
                      why, lab17_tail(text, 1500));
    }
    free(output);
    MPT_REQUIRE(read_all, "%s: a rank's report is missing or unreadable", res->what);
    for (int r = 0; r < ranks; r++)
        MPT_REQUIRE(res->rank[r].steps == steps, "%s: rank %d reported %d steps, expected %d", res->what, r,
                    res->rank[r].steps, steps);
    /* what the grader compares with the reference: every rank's decisions, scales and losses */
    for (int r = 0; r < ranks; r++)
        for (int s = 0; s < res->rank[r].steps; s++) {
            const lab17_step *k = &res->rank[r].step[s];
            MPT_OBSERVE((uint64_t)k->skipped << 1 | k->found_inf_local);
            MPT_OBSERVE_NEAR(k->scale, 0, 0);
            MPT_OBSERVE_NEAR(k->next_scale, 0, 0);
            MPT_OBSERVE_NEAR(k->loss, 1e-4, 1e-9);
        }
}

/* The ranks whose own gradients overflowed at step s (from 1), as text: "1" or "1 and 3". */
static inline void lab17_local_ranks(const lab17_result *res, int s, char *out, size_t len) {
    out[0] = 0;
    for (int r = 0; r < res->ranks; r++)
        if (res->inject_step[r] == s) {
            size_t used = strlen(out);
            snprintf(out + used, len - used, "%s%d", used ? " and " : "", r);
        }
}

/* Every rank skipped exactly the steps at which some rank overflowed, found the inf only where it was put, and
 * ended every step with the same next scale. Returns false at the first wrong step. */
static inline bool lab17_check_agreement(const lab17_result *res) {
    for (int s = 1; s <= res->steps; s++) {
        char where[64];
        lab17_local_ranks(res, s, where, sizeof where);
        const bool overflow = where[0] != 0;
        for (int r = 0; r < res->ranks; r++) {
            const lab17_step *st = &res->rank[r].step[s - 1];
            bool mine = res->inject_step[r] == s;
            if (st->found_inf_local != mine) {
                mpt_fail(__FILE__, __LINE__, "%s, step %d, rank %d: found_inf_local=%d, expected %d (the inf was put "
                         "into rank %s's gradients only)", res->what, s, r, st->found_inf_local, mine,
                         overflow ? where : "no");
                return false;
            }
            if (st->skipped != overflow) {
                mpt_fail(__FILE__, __LINE__, "%s, step %d: rank %d %s the step\n"
                         "      expected: every rank skips step %d, because rank %s found an inf%s\n"
                         "      likely mistake: %s", res->what, s, r, st->skipped ? "skipped" : "took",
                         s, overflow ? where : "-", overflow ? "" : " (no rank did: nobody may skip)",
                         overflow ? "agree_found_inf must return true on every rank when any rank's found_inf is "
                                    "true: a MAX (or a SUM compared with 0) over all ranks, not this rank's own flag, "
                                    "an average or a minimum"
                                  : "a step where no rank found an inf must be taken everywhere: the agreed flag is "
                                    "true only if some rank's flag is");
                return false;
            }
            if (st->next_scale != res->rank[0].step[s - 1].next_scale) {
                mpt_fail(__FILE__, __LINE__, "%s, step %d: rank %d's next loss scale is %g, rank 0's %g: the scalers "
                         "must see the same found_inf on every rank", res->what, s, r, st->next_scale,
                         res->rank[0].step[s - 1].next_scale);
                return false;
            }
        }
    }
    return true;
}

/* Replicas bit-identical after every step. */
static inline bool lab17_check_replicas(const lab17_result *res) {
    for (int s = 1; s <= res->steps; s++)
        for (int r = 1; r < res->ranks; r++)
            if (res->rank[r].step[s - 1].params != res->rank[0].step[s - 1].params) {
                mpt_fail(__FILE__, __LINE__, "%s: after step %d the weights of ranks 0 and %d differ (hashes %016llx, "
                         "%016llx): one of them stepped while the other skipped, and the replicas now drift apart for "
                         "good", res->what, s, r, res->rank[0].step[s - 1].params, res->rank[r].step[s - 1].params);
                return false;
            }
    MPT_REQUIRE(res->rank[0].step[res->steps - 1].params != res->rank[0].step[0].params || res->steps == 1,
                "%s: the weights should change during training", res->what);
    return true;
}

/* The first step (from 1) after which some rank's weights differ from rank 0's, or 0 if none. */
static inline int lab17_first_divergence(const lab17_result *res) {
    for (int s = 1; s <= res->steps; s++)
        for (int r = 1; r < res->ranks; r++)
            if (res->rank[r].step[s - 1].params != res->rank[0].step[s - 1].params) return s;
    return 0;
}

/* The worker's reduce mode on `ranks` ranks: each averages its lab17_worker_values(n, dt, seed, rank) with the
 * 16-bit hook; out (ranks, n): every rank's results. A failed run stops the test with the likely cause. */
static inline void lab17_reduce_run(int ranks, size_t n, comm_dtype dt, uint64_t seed, uint16_t *out) {
    const char *worker = "./build/labs/lab17_worker";
    MPT_REQUIRE(access(worker, X_OK) == 0, "%s is missing: 'make labtests LAB=17' (or make grade LAB=17) builds it",
                worker);
    MPT_REQUIRE(comm_launch_mpirun() != NULL, "mpirun is not on PATH: 'make deps' installs OpenMPI");
    char dir[] = "/tmp/mixpar-lab17-XXXXXX";
    MPT_REQUIRE(mkdtemp(dir) != NULL, "cannot make a temporary folder in /tmp");
    char a_n[24], a_seed[24];
    snprintf(a_n, sizeof a_n, "%zu", n);
    snprintf(a_seed, sizeof a_seed, "%llu", (unsigned long long)seed);
    char *argv[] = {(char *)worker, "reduce", dir, dt == COMM_FP16 ? "fp16" : "bf16", a_n, a_seed, NULL};
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", LAB17_COMM_TIMEOUT_S);
    setenv("MIXPAR_COMM_TIMEOUT", timeout, 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    comm_launch_opts o = {.ranks = ranks, .timeout_s = LAB17_WAIT_S, .quiet = true};
    char *output = NULL;
    int rc = comm_launch_run(&o, argv, &output);
    bool read_all = rc == 0;
    for (int r = 0; r < ranks; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, r);
        FILE *f = fopen(path, "r");
        int world = 0;
        size_t count = 0, got = 0;
        if (f && fscanf(f, " world=%d n=%zu", &world, &count) == 2 && count == n)
            for (unsigned v; got < n && fscanf(f, " %x", &v) == 1; got++) out[(size_t)r * n + got] = (uint16_t)v;
        if (f) fclose(f);
        if (got != n) read_all = false;
        unlink(path);
    }
    rmdir(dir);
    if (rc != 0) {
        const char *text = output ? output : "";
        mpt_fail_stop(__FILE__, __LINE__, "the %s hook on %d ranks: mpirun exited with %d: %s\n      ranks' output "
                      "(end):\n%s", dt == COMM_FP16 ? "fp16" : "bf16", ranks, rc,
                      strstr(text, "lab 17 not done") ? "the LAB 17 region in core/dist/amp_reduce.c is still a stub"
                      : strstr(text, "not done") ? "a region of another lab is still a stub (see the ranks' output)"
                      : rc == 124 ? "the ranks did not finish" : "a rank failed (see its output)", lab17_tail(text, 1500));
    }
    free(output);
    MPT_REQUIRE(read_all, "the %s hook on %d ranks: a rank's report is missing or short", dt == COMM_FP16 ? "fp16" : "bf16",
                ranks);
}

#endif
