/* lab19_run.h: what the tests of labs 19 and 20 share: train the synthetic-addition model on N ranks with a
 * lab's worker (build/labs/labNN_worker: the core's trainer, built from this tree's regions), read every
 * rank's events back (steps, memory by tag, the planner's bytes, comm events), and compare runs. */
#ifndef LAB19_RUN_H
#define LAB19_RUN_H

#include "base/mem.h"
#include "comm/launch.h"
#include "mptest.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LAB19_MAX_RANKS = 4, LAB19_MAX_STEPS = 12, LAB19_MAX_COMM = 1024, LAB19_WAIT_S = 50, LAB19_COMM_TIMEOUT_S = 20 };

typedef enum { LAB19_ALLGATHER, LAB19_REDUCE_SCATTER, LAB19_ALLREDUCE, LAB19_OTHER_OP } lab19_op;

typedef struct {
    lab19_op op;
    double bytes_sent, t0, t1;
    int step;   /* the step it belongs to (from 1): comm events come before their step's event */
    int bucket; /* DDP/ZeRO's bucket index; -1 when the event has none */
} lab19_comm;

typedef struct {
    int steps;
    double loss[LAB19_MAX_STEPS], grad_norm[LAB19_MAX_STEPS], comm_bytes[LAB19_MAX_STEPS];
    double gather_bytes[LAB19_MAX_STEPS], reduce_bytes[LAB19_MAX_STEPS];
    char hash[LAB19_MAX_STEPS][24];
    double params;                               /* Psi: the model's parameters */
    double plan[MEM_NTAGS], peak[MEM_NTAGS];     /* the planner's bytes per tag; the run's peak per tag */
    int zero_stage, shard_size;
    char fsdp[24];                               /* the FSDP strategy, "" without FSDP */
    int ncomm;
    lab19_comm comm[LAB19_MAX_COMM];
} lab19_rank;

typedef struct {
    int ranks;
    char what[240];
    lab19_rank rank[LAB19_MAX_RANKS];
} lab19_result;

static inline double lab19_num(const cJSON *o, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static inline void lab19_tags(const cJSON *o, double *out) {
    for (int t = 0; t < MEM_NTAGS; t++) out[t] = o ? lab19_num(o, mem_tag_name((mem_tag)t)) : NAN;
}

static inline lab19_op lab19_op_of(const char *name) {
    if (strcmp(name, "allgather") == 0) return LAB19_ALLGATHER;
    if (strcmp(name, "reduce_scatter") == 0) return LAB19_REDUCE_SCATTER;
    if (strcmp(name, "allreduce") == 0) return LAB19_ALLREDUCE;
    return LAB19_OTHER_OP;
}

/* One rank's events file into r; false when it cannot be read or has no run header. */
static inline bool lab19_parse_rank(const char *path, lab19_rank *r) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    memset(r, 0, sizeof *r);
    r->params = NAN;
    static char line[1 << 16];
    bool header = false;
    while (fgets(line, sizeof line, f)) {
        cJSON *e = cJSON_Parse(line);
        if (!e) continue;
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "kind"));
        if (!kind) {
        } else if (strcmp(kind, "run") == 0) {
            header = true;
            r->params = lab19_num(e, "params");
            lab19_tags(cJSON_GetObjectItemCaseSensitive(e, "plan"), r->plan);
            const cJSON *dp = cJSON_GetObjectItemCaseSensitive(e, "data_parallel");
            r->zero_stage = dp ? (int)lab19_num(dp, "zero_stage") : 0;
            r->shard_size = dp && !isnan(lab19_num(dp, "shard_size")) ? (int)lab19_num(dp, "shard_size") : 0;
            const char *s = dp ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dp, "fsdp")) : NULL;
            snprintf(r->fsdp, sizeof r->fsdp, "%s", s ? s : "");
        } else if (strcmp(kind, "step") == 0 && r->steps < LAB19_MAX_STEPS) {
            int k = r->steps++;
            r->loss[k] = lab19_num(e, "loss");
            r->grad_norm[k] = lab19_num(e, "grad_norm");
            r->comm_bytes[k] = lab19_num(e, "comm_bytes");
            r->gather_bytes[k] = lab19_num(e, "gather_bytes");
            r->reduce_bytes[k] = lab19_num(e, "reduce_bytes");
            const char *h = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "param_hash"));
            snprintf(r->hash[k], sizeof r->hash[k], "%s", h ? h : "");
        } else if (strcmp(kind, "mem") == 0) {
            lab19_tags(cJSON_GetObjectItemCaseSensitive(e, "peak"), r->peak); /* the last one: the run's peaks */
        } else if (strcmp(kind, "comm") == 0 && r->ncomm < LAB19_MAX_COMM) {
            const char *op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "op"));
            double bucket = lab19_num(e, "bucket");
            r->comm[r->ncomm++] = (lab19_comm){lab19_op_of(op ? op : ""), lab19_num(e, "bytes_sent"), lab19_num(e, "t0"),
                                               lab19_num(e, "t1"), r->steps + 1, isnan(bucket) ? -1 : (int)bucket};
        }
        cJSON_Delete(e);
    }
    fclose(f);
    return header;
}

static inline const char *lab19_tail(const char *text, size_t max) {
    size_t n = strlen(text);
    return n > max ? text + n - max : text;
}

/* Starts LAB's worker on `ranks` ranks: a run of configs/synthetic-addition.json for `steps` steps of
 * micro-batch 8, plus the overrides in sets (NULL-terminated). Returns the exit status; *output (malloc'd)
 * holds the ranks' output, dir the run folder (the caller removes it with lab19_cleanup). */
static inline int lab19_launch(int lab, int ranks, int steps, const char *const *sets, char *dir, char **output) {
    char worker[64];
    snprintf(worker, sizeof worker, "./build/labs/lab%02d_worker", lab);
    MPT_REQUIRE(access(worker, X_OK) == 0, "%s is missing: 'make labtests LAB=%02d' (or make grade LAB=%02d) builds it",
                worker, lab, lab);
    MPT_REQUIRE(comm_launch_mpirun() != NULL, "mpirun is not on PATH: 'make deps' installs OpenMPI");
    MPT_REQUIRE(ranks <= LAB19_MAX_RANKS && steps <= LAB19_MAX_STEPS, "at most %d ranks and %d steps", LAB19_MAX_RANKS,
                LAB19_MAX_STEPS);
    strcpy(dir, "/tmp/mixpar-lab19-XXXXXX");
    MPT_REQUIRE(mkdtemp(dir) != NULL, "cannot make a temporary folder in /tmp");
    static char fixed[9][96];
    snprintf(fixed[0], sizeof fixed[0], "train.steps=%d", steps);
    snprintf(fixed[1], sizeof fixed[1], "scheduler.params.total_steps=%d", steps);
    snprintf(fixed[2], sizeof fixed[2], "scheduler.params.warmup_steps=1");
    snprintf(fixed[3], sizeof fixed[3], "train.eval_interval=0");
    snprintf(fixed[4], sizeof fixed[4], "train.sample_interval=0");
    snprintf(fixed[5], sizeof fixed[5], "train.hist_interval=0");
    snprintf(fixed[6], sizeof fixed[6], "train.checkpoint_interval=0");
    snprintf(fixed[7], sizeof fixed[7], "train_micro_batch_size_per_gpu=8");
    /* the dataset is made in the run folder: under the grader the tree is read-only */
    snprintf(fixed[8], sizeof fixed[8], "data.dir=%s/data", dir);
    char *argv[64];
    int argc = 0;
    argv[argc++] = worker;
    argv[argc++] = "configs/synthetic-addition.json";
    argv[argc++] = dir;
    for (int i = 0; i < 9; i++) argv[argc++] = fixed[i];
    for (int i = 0; sets && sets[i] && argc < 63; i++) argv[argc++] = (char *)sets[i];
    argv[argc] = NULL;
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", LAB19_COMM_TIMEOUT_S);
    setenv("MIXPAR_COMM_TIMEOUT", timeout, 1);
    setenv("MIXPAR_PARAM_HASH", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMP_WAIT_POLICY", "passive", 1);
    unsetenv("MIXPAR_ALLREDUCE");
    comm_launch_opts o = {.ranks = ranks, .timeout_s = LAB19_WAIT_S, .quiet = true};
    *output = NULL;
    return comm_launch_run(&o, argv, output);
}

static inline void lab19_cleanup(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (strncmp(dir, "/tmp/mixpar-lab19-", 18) == 0 && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

/* Trains (lab19_launch) and reads every rank's events into res; a failed run stops the test with the likely
 * cause. `what` names the run in messages. */
static inline void lab19_train(lab19_result *res, int lab, const char *what, int ranks, int steps, const char *const *sets) {
    memset(res, 0, sizeof *res);
    res->ranks = ranks;
    snprintf(res->what, sizeof res->what, "%s on %d ranks", what, ranks);
    char dir[64], *output = NULL;
    int rc = lab19_launch(lab, ranks, steps, sets, dir, &output);
    bool read_all = true;
    for (int r = 0; r < ranks && rc == 0; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/events.rank%d.jsonl", dir, r);
        if (!lab19_parse_rank(path, &res->rank[r])) read_all = false;
    }
    lab19_cleanup(dir);
    if (rc != 0) {
        char mine[32];
        snprintf(mine, sizeof mine, "lab %02d not done", lab);
        const char *why = strstr(output, mine) ? "a region of this lab is still a LAB_TODO stub (the output names it)"
                        : strstr(output, "not done") ? "a region of an earlier lab is still a stub (see the ranks' output)"
                        : rc == 124 ? "the ranks did not finish: a rank waits for a collective the others never "
                                      "started (every rank must make the same collectives, in the same order, with "
                                      "the same counts)"
                        : strstr(output, "timed out") ? "a rank waited for a collective the others never started: every "
                                                        "rank must make the same collectives with the same counts"
                        : rc == 139 ? "a rank crashed (segmentation fault): an index outside a shard or a bucket?"
                        : rc == 2 ? "the run was refused (bad input: see the message)"
                                  : "a rank failed (see its output)";
        mpt_fail_stop(__FILE__, __LINE__, "%s: mpirun exited with %d: %s\n      ranks' output (end):\n%s", res->what, rc,
                      why, lab19_tail(output ? output : "", 1500));
    }
    free(output);
    MPT_REQUIRE(read_all, "%s: a rank's events are missing or have no run header", res->what);
    for (int r = 0; r < ranks; r++)
        MPT_REQUIRE(res->rank[r].steps == steps, "%s: rank %d logged %d steps, expected %d", res->what, r,
                    res->rank[r].steps, steps);
    /* what the grader compares with the reference: each rank's losses, norms and bytes moved per step, and its
     * memory (the plan exactly; the measured peaks within what a correct code's own buffers may add) */
    for (int r = 0; r < ranks; r++) {
        const lab19_rank *k = &res->rank[r];
        for (int s = 0; s < k->steps; s++) {
            mpt_observe_near(__FILE__, __LINE__, k->loss[s], 1e-4, 1e-9);
            mpt_observe_near(__FILE__, __LINE__, k->grad_norm[s], 1e-4, 1e-9);
            mpt_observe_near(__FILE__, __LINE__, k->comm_bytes[s], 0, 0);
            mpt_observe_near(__FILE__, __LINE__, k->gather_bytes[s], 0, 0);
            mpt_observe_near(__FILE__, __LINE__, k->reduce_bytes[s], 0, 0);
        }
        for (int t = 0; t < MEM_NTAGS; t++) {
            mpt_observe_near(__FILE__, __LINE__, k->plan[t], 0, 0);
            mpt_observe_near(__FILE__, __LINE__, k->peak[t], 0.05, 4096);
        }
    }
}

/* Same losses and gradient norms at every step, within tol (relative): sharding moves bytes, not the maths. */
static inline void lab19_check_same_training(const lab19_result *ref, const lab19_result *got, double tol) {
    const lab19_rank *a = &ref->rank[0], *b = &got->rank[0];
    MPT_REQUIRE(a->steps == b->steps, "%s and %s logged %d and %d steps", ref->what, got->what, a->steps, b->steps);
    for (int s = 0; s < a->steps; s++) {
        double dl = fabs(a->loss[s] - b->loss[s]), dn = fabs(a->grad_norm[s] - b->grad_norm[s]);
        if (!(dl <= tol * fabs(a->loss[s]) && dn <= tol * fabs(a->grad_norm[s]))) {
            mpt_fail(__FILE__, __LINE__, "step %d: %s has loss %.8g, gradient norm %.8g; %s has loss %.8g, gradient norm "
                     "%.8g (relative tolerance %g)\n      likely: %s", s + 1, ref->what, a->loss[s], a->grad_norm[s],
                     got->what, b->loss[s], b->grad_norm[s], tol,
                     s == 0 && dl <= tol * fabs(a->loss[s])
                         ? "the first loss agrees but the norm does not: the norm must add every rank's sum of squares "
                           "once (of its own shard), then take the square root"
                         : "the averaged gradients or the updated weights differ: a block averaged into the wrong "
                           "place, a shard not gathered back, or a sum where an average belongs");
            return;
        }
    }
}

/* Every rank's weights are the same bytes after every step (MIXPAR_PARAM_HASH). */
static inline void lab19_check_replicas(const lab19_result *res) {
    for (int s = 0; s < res->rank[0].steps; s++) {
        MPT_REQUIRE(res->rank[0].hash[s][0], "%s: the step events carry no param_hash", res->what);
        for (int r = 1; r < res->ranks; r++)
            if (strcmp(res->rank[r].hash[s], res->rank[0].hash[s]) != 0) {
                mpt_fail(__FILE__, __LINE__, "%s: after step %d the weights of ranks 0 and %d differ (hashes %s, %s)\n"
                         "      likely: the all-gather did not bring every rank's updated block (and the left-over "
                         "elements) back to every rank", res->what, s + 1, r, res->rank[0].hash[s], res->rank[r].hash[s]);
                return;
            }
    }
}

/* The run's peak bytes of one tag on every rank against the planner's, within tol (relative). */
static inline void lab19_check_tag_vs_plan(const lab19_result *res, mem_tag tag, double tol, const char *hint) {
    for (int r = 0; r < res->ranks; r++) {
        double got = res->rank[r].peak[tag], want = res->rank[r].plan[tag];
        MPT_CHECK(want > 0 && fabs(got - want) <= tol * want, "%s, rank %d: peak %s bytes %.0f, the planner's %.0f "
                  "(Psi = %.0f; tolerance %.0f%%)%s%s", res->what, r, mem_tag_name(tag), got, want, res->rank[r].params,
                  tol * 100, hint ? "\n      likely: " : "", hint ? hint : "");
    }
}

/* The mean of a per-step series over the steps after the first (the first may gather the root again). */
static inline double lab19_mean(const double *x, int steps) {
    double s = 0;
    int n = 0;
    for (int k = steps > 1 ? 1 : 0; k < steps; k++) s += x[k], n++;
    return n ? s / n : NAN;
}

/* How many comm events of one op rank r logged in step `step` (from 1). */
static inline int lab19_count_ops(const lab19_rank *r, lab19_op op, int step) {
    int n = 0;
    for (int i = 0; i < r->ncomm; i++) n += r->comm[i].op == op && r->comm[i].step == step;
    return n;
}

#endif
