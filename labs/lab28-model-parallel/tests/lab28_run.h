/* lab28_run.h: what lab 28's tests share: start build/labs/lab28_worker on N ranks (one tp group), read back what
 * every rank computed against the unsharded values, and check each array element by element with the likely
 * mistake when one is off; the 1F1B order of an independent model of the schedule. */
#ifndef LAB28_RUN_H
#define LAB28_RUN_H

#include "comm/launch.h"
#include "dist/pp.h"
#include "mptest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LAB28_MAX_ELEMS = 16384, LAB28_WAIT_S = 40, LAB28_COMM_TIMEOUT_S = 20 };

/* An array the worker writes and what it means when it is wrong. */
typedef struct {
    const char *array, *likely;
} lab28_expect;

typedef struct {
    float got[LAB28_MAX_ELEMS];
    double want[LAB28_MAX_ELEMS];
    int rank[LAB28_MAX_ELEMS], index[LAB28_MAX_ELEMS], n;
} lab28_values;

static inline const char *lab28_tail(const char *text, size_t max) {
    size_t n = strlen(text);
    return n > max ? text + n - max : text;
}

/* Runs `lab28_worker DIR SEED args...` on `ranks` ranks and checks every array in expect (NULL-terminated) within
 * |got - want| <= abs_tol + rel_tol |want| on every rank; `what` names the run in messages. */
static inline void lab28_check_worker(const char *what, int ranks, const char *const *args, const lab28_expect *expect,
                                      double rel_tol, double abs_tol) {
    const char *worker = "./build/labs/lab28_worker";
    MPT_REQUIRE(access(worker, X_OK) == 0, "%s is missing: 'make labtests LAB=28' (or make grade LAB=28) builds it", worker);
    MPT_REQUIRE(comm_launch_mpirun() != NULL, "mpirun is not on PATH: 'make deps' installs OpenMPI");
    char dir[64] = "/tmp/mixpar-lab28-XXXXXX", seed[32];
    MPT_REQUIRE(mkdtemp(dir) != NULL, "cannot make a temporary folder in /tmp");
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)(mpt_seed() % 1000000007ull));
    char *argv[16];
    int argc = 0;
    argv[argc++] = (char *)worker;
    argv[argc++] = dir;
    argv[argc++] = seed;
    for (int i = 0; args[i] && argc < 15; i++) argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", LAB28_COMM_TIMEOUT_S);
    setenv("MIXPAR_COMM_TIMEOUT", timeout, 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMP_WAIT_POLICY", "passive", 1);
    unsetenv("MIXPAR_ALLREDUCE");
    comm_launch_opts o = {.ranks = ranks, .timeout_s = LAB28_WAIT_S, .quiet = true};
    char *output = NULL;
    int rc = comm_launch_run(&o, argv, &output);
    static lab28_values v;
    for (const lab28_expect *e = expect; rc == 0 && e->array; e++) {
        v.n = 0;
        for (int r = 0; r < ranks; r++) {
            char path[128], name[32];
            snprintf(path, sizeof path, "%s/out.rank%d", dir, r);
            FILE *f = fopen(path, "r");
            if (!f) continue;
            int i;
            float got;
            double want;
            while (fscanf(f, "%31s %d %g %lg", name, &i, &got, &want) == 4)
                if (strcmp(name, e->array) == 0 && v.n < LAB28_MAX_ELEMS)
                    v.got[v.n] = got, v.want[v.n] = want, v.rank[v.n] = r, v.index[v.n] = i, v.n++;
            fclose(f);
        }
        MPT_CHECK(v.n > 0, "%s: no rank wrote %s", what, e->array);
        for (int k = 0; k < v.n; k++) {
            double err = fabs((double)v.got[k] - v.want[k]);
            if (!(err <= abs_tol + rel_tol * fabs(v.want[k]))) {
                MPT_CHECK(0, "%s: rank %d's %s[%d] = %.8g, the unsharded computation gives %.8g (tolerance %.1e + %.1e "
                          "relative)\n      likely: %s", what, v.rank[k], e->array, v.index[k], v.got[k], v.want[k], abs_tol,
                          rel_tol, e->likely);
                break;
            }
        }
        MPT_OBSERVE_NEAR_F64(v.got, v.want, v.n, rel_tol, abs_tol);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    if (rc != 0) {
        const char *why = strstr(output ? output : "", "lab 28 not done") ? "a region of lab 28 is still a LAB_TODO stub"
                        : strstr(output ? output : "", "not done") ? "a region of an earlier lab is still a stub"
                        : rc == 124 || strstr(output ? output : "", "timed out")
                            ? "a rank waited for a collective the others never started: every tp rank must make the same "
                              "allreduces, in the same order, with the same counts"
                        : rc == 139 ? "a rank crashed (segmentation fault): an index outside this rank's columns?"
                                    : "a rank failed (see its output)";
        mpt_fail_stop(__FILE__, __LINE__, "%s: mpirun exited with %d: %s\n      ranks' output (end):\n%s", what, rc, why,
                      lab28_tail(output ? output : "", 1500));
    }
    free(output);
}

/* An independent model of 1F1B (PipeDream-Flush) for stage s of p with m micro-batches: a stage may hold at most
 * min(p - s, m) micro-batches whose forward is done and backward not (the later stages' share of the pipe), so it
 * runs the next forward while it holds fewer, else the oldest backward. Writes the 2m actions in order. */
static inline void lab28_model_1f1b(int p, int s, int m, pp_action *out) {
    int limit = p - s < m ? p - s : m, f = 0, b = 0;
    for (int n = 0; n < 2 * m; n++)
        out[n] = f < m && f - b < limit ? (pp_action){'F', f++, 0} : (pp_action){'B', b++, 0};
}

/* Checks pp_schedule_actions(PP_1F1B, p, s, m) against the model on every stage; false after the first
 * difference (reported). */
static inline int lab28_check_1f1b_order(int p, int m) {
    pp_action want[256], got[256];
    MPT_REQUIRE(2 * m <= 256, "at most 128 micro-batches");
    for (int s = 0; s < p; s++) {
        lab28_model_1f1b(p, s, m, want);
        for (int n = 0; n < 2 * m; n++) got[n] = (pp_action){'?', -1, -1};
        pp_schedule_actions(PP_1F1B, p, s, m, 1, got);
        for (int n = 0; n < 2 * m; n++) {
            MPT_OBSERVE(((unsigned)got[n].kind << 16) ^ (unsigned)(got[n].micro + 1));
            if (got[n].kind != want[n].kind || got[n].micro != want[n].micro || got[n].chunk != 0) {
                int warm = p - s - 1 < m ? p - s - 1 : m;
                MPT_CHECK(0, "1F1B, p = %d stages, m = %d micro-batches, stage %d: action %d is %c%d (chunk %d), expected "
                          "%c%d\n      likely: stage s warms up with min(p-s-1, m) = %d forwards, then alternates F and B "
                          "(forwards F0, F1, ... and backwards B0, B1, ... each in micro-batch order), then drains the "
                          "backwards left", p, m, s, n, got[n].kind, got[n].micro, got[n].chunk, want[n].kind,
                          want[n].micro, warm);
                return 0;
            }
        }
    }
    return 1;
}

#endif
