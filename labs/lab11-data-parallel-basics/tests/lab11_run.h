/* lab11_run.h: what lab 11's tests share: start build/labs/lab11_worker on N ranks through mpirun, read the
 * ranks' reports, and check them against the tests' own arithmetic: a one-rank run with the whole batch, a
 * step-by-step replay of a scripted parameter-server schedule, and the loss of an asynchronous run. */
#ifndef LAB11_RUN_H
#define LAB11_RUN_H

#include "comm/launch.h"
#include "dist/ps.h"
#include "lab11_model.h"
#include "mptest.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LAB11_MAX_RANKS = 6, LAB11_MAX_UPDATES = 4096, LAB11_WAIT_S = 25, LAB11_COMM_TIMEOUT_S = 10 };

typedef struct {
    int world, steps, b;
    bool has_weights;
    float w[LAB11_P];
} lab11_sync_report;

typedef struct {
    int updates;
    int worker[LAB11_MAX_UPDATES];
    unsigned long long pulled[LAB11_MAX_UPDATES], staleness[LAB11_MAX_UPDATES];
    double loss[LAB11_MAX_UPDATES];
    unsigned long long pushes, version, staleness_sum, staleness_max, hist[PS_STALENESS_BINS];
    bool has_totals, has_weights;
    float w[LAB11_P];
} lab11_server_report;

static bool lab11_parse_weights(const char *line, float *w) {
    if (strncmp(line, "weights=", 8) != 0) return false;
    const char *p = line + 8;
    for (int i = 0; i < LAB11_P; i++) {
        char *end;
        w[i] = strtof(p, &end);
        if (end == p) return false;
        p = *end == ',' ? end + 1 : end;
    }
    return true;
}

static bool lab11_parse_sync(const char *path, lab11_sync_report *r) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    memset(r, 0, sizeof *r);
    char line[4096];
    bool head = fgets(line, sizeof line, f) && sscanf(line, "world=%d steps=%d b=%d", &r->world, &r->steps, &r->b) == 3;
    while (head && fgets(line, sizeof line, f))
        if (lab11_parse_weights(line, r->w)) r->has_weights = true;
    fclose(f);
    return head && r->has_weights;
}

static bool lab11_parse_server(const char *path, lab11_server_report *r) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    memset(r, 0, sizeof *r);
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        int k = r->updates;
        unsigned long long u;
        if (k < LAB11_MAX_UPDATES && sscanf(line, "update=%llu worker=%d pulled=%llu staleness=%llu loss=%lf", &u,
                                            &r->worker[k], &r->pulled[k], &r->staleness[k], &r->loss[k]) == 5)
            r->updates++;
        else if (sscanf(line, "pushes=%llu version=%llu staleness_sum=%llu staleness_max=%llu", &r->pushes, &r->version,
                        &r->staleness_sum, &r->staleness_max) == 4)
            r->has_totals = true;
        else if (strncmp(line, "hist=", 5) == 0) {
            const char *p = line + 5;
            for (int i = 0; i < PS_STALENESS_BINS; i++) {
                char *end;
                r->hist[i] = strtoull(p, &end, 10);
                p = *end == ',' ? end + 1 : end;
            }
        } else if (lab11_parse_weights(line, r->w))
            r->has_weights = true;
    }
    fclose(f);
    return r->has_totals && r->has_weights;
}

static const char *lab11_tail(const char *text, size_t max) {
    size_t n = strlen(text);
    return n > max ? text + n - max : text;
}

/* Runs the worker with args on `ranks` ranks, into a fresh folder; returns the folder (the caller reads the
 * reports and removes them) or stops the test with the likely cause. */
static void lab11_launch(int ranks, char **args, const char *what, char *dir, size_t dir_cap) {
    const char *worker = "./build/labs/lab11_worker";
    MPT_REQUIRE(access(worker, X_OK) == 0, "%s is missing: 'make labtests LAB=11' (or make grade LAB=11) builds it", worker);
    MPT_REQUIRE(comm_launch_mpirun() != NULL, "mpirun is not on PATH: 'make deps' installs OpenMPI");
    MPT_REQUIRE(ranks <= LAB11_MAX_RANKS, "at most %d ranks", LAB11_MAX_RANKS);
    snprintf(dir, dir_cap, "/tmp/mixpar-lab11-XXXXXX");
    MPT_REQUIRE(mkdtemp(dir) != NULL, "cannot make a temporary folder in /tmp");
    char *argv[16] = {(char *)worker, args[0], dir};
    int n = 3;
    for (int i = 1; args[i] && n < 15; i++) argv[n++] = args[i];
    argv[n] = NULL;
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", LAB11_COMM_TIMEOUT_S);
    setenv("MIXPAR_COMM_TIMEOUT", timeout, 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    unsetenv("MIXPAR_ALLREDUCE");
    comm_launch_opts o = {.ranks = ranks, .timeout_s = LAB11_WAIT_S, .quiet = true};
    char *output = NULL;
    int rc = comm_launch_run(&o, argv, &output);
    if (rc != 0) {
        const char *out = output ? output : "";
        const char *why = strstr(out, "lab 11 not done") ? "a LAB 11 region in core/dist/ps.c is still a LAB_TODO stub"
                        : strstr(out, "not done") ? "a region of another lab is still a stub (see the ranks' output)"
                        : strstr(out, "from version") ? "a push claims a version the server has not reached: is the "
                                                        "version bumped once per applied push?"
                        : rc == 124 || strstr(out, "timed out")
                            ? "the ranks did not finish: every rank must call the allreduce the same number of times "
                              "(sync), and the server must serve every pull and push (async)"
                        : rc == 139 ? "a rank crashed (segmentation fault): an index outside the gradient or the "
                                      "staleness histogram?"
                                    : "a rank failed (see its output)";
        char copy[2048];
        snprintf(copy, sizeof copy, "%s", lab11_tail(out, 1500));
        free(output);
        mpt_fail_stop(__FILE__, __LINE__, "%s: mpirun exited with %d: %s\n      ranks' output (end):\n%s", what, rc, why,
                      copy);
    }
    free(output);
}

static void lab11_cleanup(const char *dir, int ranks) {
    for (int r = 0; r < ranks; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, r);
        unlink(path);
    }
    rmdir(dir);
}

/* Synchronous SGD on `ranks` ranks with b rows each; every rank's report into rep[0..ranks-1]. */
static void lab11_run_sync(int ranks, int steps, int b, const char *lr, lab11_sync_report *rep) {
    char a_steps[16], a_b[16], what[160], dir[64];
    snprintf(a_steps, sizeof a_steps, "%d", steps);
    snprintf(a_b, sizeof a_b, "%d", b);
    snprintf(what, sizeof what, "synchronous SGD on %d rank(s), %d rows each, %d steps", ranks, b, steps);
    char *args[] = {"sync", a_steps, a_b, (char *)lr, NULL};
    lab11_launch(ranks, args, what, dir, sizeof dir);
    bool ok = true;
    for (int r = 0; r < ranks; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, r);
        ok = ok && lab11_parse_sync(path, &rep[r]);
    }
    lab11_cleanup(dir, ranks);
    MPT_REQUIRE(ok, "%s: a rank's report is missing or unreadable", what);
    for (int r = 0; r < ranks; r++) MPT_OBSERVE_NEAR_F32(rep[r].w, rep[r].w, LAB11_P, 1e-4, 1e-6); /* for the grader */
}

/* N ranks with batch b against 1 rank with batch N*b, same rows, same steps: the same weights within float
 * rounding (the sums are taken in a different order), and bit-identical replicas. */
static void lab11_check_sync_equivalence(int ranks, int b, int steps) {
    const char *lr = "0.2";
    lab11_sync_report many[LAB11_MAX_RANKS], one[1];
    lab11_run_sync(ranks, steps, b, lr, many);
    lab11_run_sync(1, steps, ranks * b, lr, one);
    for (int r = 1; r < ranks; r++)
        MPT_CHECK(memcmp(many[r].w, many[0].w, sizeof many[0].w) == 0, "%d ranks: rank %d's weights differ from rank "
                  "0's: every rank must hold the same averaged gradient (the allreduce's result, then the same "
                  "division)", ranks, r);
    double scale = 0, diff = 0, init_diff = 0;
    for (int i = 0; i < LAB11_P; i++) {
        scale = fmax(scale, fabs(one[0].w[i]));
        diff = fmax(diff, fabs((double)many[0].w[i] - one[0].w[i]));
        init_diff = fmax(init_diff, fabs(one[0].w[i]));
    }
    MPT_REQUIRE(init_diff > 0.01, "the one-rank run should have moved the weights away from zero");
    /* Tolerance: 1e-5 of the largest weight, plus 1e-6: float rounding of sums in another order is ~1e-7. */
    const double tol = 1e-5 * scale + 1e-6;
    if (diff > tol) {
        int worst = 0;
        for (int i = 1; i < LAB11_P; i++)
            if (fabs((double)many[0].w[i] - one[0].w[i]) > fabs((double)many[0].w[worst] - one[0].w[worst])) worst = i;
        mpt_fail(__FILE__, __LINE__, "%d ranks x batch %d vs 1 rank x batch %d, %d steps: weights differ by up to %g "
                 "(allowed %g); parameter %d: %.9g on %d ranks, %.9g on one\n      likely: the gradients were summed "
                 "but not divided by the number of ranks (the step is then %d times too large), or divided by "
                 "something else", ranks, b, ranks * b, steps, diff, tol, worst, many[0].w[worst], ranks,
                 one[0].w[worst], ranks);
    }
}

/* Asynchronous SGD: rank 0 the server, ranks 1.. workers; schedule NULL for arrival order. */
static void lab11_run_async(int ranks, int pushes, int b, const char *lr, const int *schedule, size_t len,
                            lab11_server_report *rep) {
    char a_pushes[16], a_b[16], what[200], dir[64];
    static char a_sched[8 * LAB11_MAX_UPDATES];
    snprintf(a_pushes, sizeof a_pushes, "%d", pushes);
    snprintf(a_b, sizeof a_b, "%d", b);
    strcpy(a_sched, schedule ? "" : "-");
    for (size_t k = 0; schedule && k < len; k++)
        snprintf(a_sched + strlen(a_sched), sizeof a_sched - strlen(a_sched), "%s%d", k ? "," : "", schedule[k]);
    snprintf(what, sizeof what, "parameter server with %d worker(s), %d pushes each, %s", ranks - 1, pushes,
             schedule ? "a scripted order" : "arrival order");
    char *args[] = {"async", a_pushes, a_b, (char *)lr, a_sched, NULL};
    lab11_launch(ranks, args, what, dir, sizeof dir);
    char path[512];
    snprintf(path, sizeof path, "%s/rank0.txt", dir);
    bool ok = lab11_parse_server(path, rep);
    lab11_cleanup(dir, ranks);
    MPT_REQUIRE(ok, "%s: the server's report is missing or unreadable", what);
    if (schedule) { /* a scripted order: what the server computed is the same every run, for the grader */
        for (int k = 0; k < rep->updates; k++)
            MPT_OBSERVE((uint64_t)(uint32_t)rep->worker[k] << 48 | rep->pulled[k] << 24 | rep->staleness[k]);
        for (int i = 0; i < PS_STALENESS_BINS; i++) MPT_OBSERVE(rep->hist[i]);
        MPT_OBSERVE_NEAR_F32(rep->w, rep->w, LAB11_P, 1e-4, 1e-6);
    }
}

/* The counters a server must report, from its own list of updates. */
static void lab11_check_counters(const lab11_server_report *rep, unsigned long long want_pushes, const char *what) {
    MPT_CHECK(rep->pushes == want_pushes, "%s: the server counted %llu pushes, expected %llu", what, rep->pushes,
              want_pushes);
    MPT_CHECK(rep->version == want_pushes, "%s: the server ends at version %llu, expected %llu (one version per "
              "applied push)", what, rep->version, want_pushes);
    unsigned long long sum = 0, max = 0, hist[PS_STALENESS_BINS] = {0};
    for (int k = 0; k < rep->updates; k++) {
        sum += rep->staleness[k];
        max = rep->staleness[k] > max ? rep->staleness[k] : max;
        hist[rep->staleness[k] < PS_STALENESS_BINS - 1 ? rep->staleness[k] : PS_STALENESS_BINS - 1]++;
    }
    MPT_CHECK(rep->staleness_sum == sum, "%s: staleness_sum is %llu, expected %llu (the sum of every push's "
              "staleness)", what, rep->staleness_sum, sum);
    MPT_CHECK(rep->staleness_max == max, "%s: staleness_max is %llu, expected %llu (the largest staleness seen)", what,
              rep->staleness_max, max);
    for (int i = 0; i < PS_STALENESS_BINS; i++)
        if (rep->hist[i] != hist[i]) {
            mpt_fail(__FILE__, __LINE__, "%s: staleness_hist[%d] is %llu, expected %llu (pushes with staleness %d%s)",
                     what, i, rep->hist[i], hist[i], i, i == PS_STALENESS_BINS - 1 ? " or more: the last bin takes "
                     "every staleness past the others" : "");
            return;
        }
}

/* Replays a scripted schedule here, step by step, and checks the server's staleness of every push, its
 * counters and its final weights. */
static void lab11_check_schedule(int ranks, int pushes, int b, const int *schedule, size_t len) {
    const char *lr = "0.1";
    static lab11_server_report rep;
    lab11_run_async(ranks, pushes, b, lr, schedule, len, &rep);
    char what[160];
    snprintf(what, sizeof what, "scripted schedule of %zu requests from %d workers", len, ranks - 1);

    float w[LAB11_P] = {0}, copy[LAB11_MAX_RANKS][LAB11_P], grad[LAB11_P];
    unsigned long long version = 0, pulled[LAB11_MAX_RANKS] = {0}, want[LAB11_MAX_UPDATES];
    int served[LAB11_MAX_RANKS] = {0}, who[LAB11_MAX_UPDATES], n = 0;
    for (size_t k = 0; k < len; k++) {
        const int r = schedule[k];
        if (served[r]++ % 2 == 0) { /* a pull: the worker copies the weights of this version */
            memcpy(copy[r], w, sizeof w);
            pulled[r] = version;
            continue;
        }
        lab11_gradient(copy[r], lab11_async_rows(r, served[r] / 2 - 1, b), b, grad);
        for (int i = 0; i < LAB11_P; i++) w[i] -= 0.1f * grad[i];
        who[n] = r;
        want[n++] = version - pulled[r];
        version++;
    }
    MPT_REQUIRE(rep.updates == n, "%s: the server logged %d updates, expected %d", what, rep.updates, n);
    for (int k = 0; k < n; k++) {
        MPT_REQUIRE(rep.worker[k] == who[k], "%s: update %d came from worker %d, expected %d", what, k + 1,
                    rep.worker[k], who[k]);
        if (rep.staleness[k] != want[k]) {
            mpt_fail(__FILE__, __LINE__, "%s: update %d (worker %d, which pulled at version %llu) has staleness %llu, "
                     "expected %llu\n      likely: staleness is the server's version when the push is applied "
                     "(before the bump) minus the version the worker pulled", what, k + 1, who[k],
                     (unsigned long long)(k - (long long)want[k]), rep.staleness[k], want[k]);
            return;
        }
    }
    lab11_check_counters(&rep, (unsigned long long)n, what);
    for (int i = 0; i < LAB11_P; i++)
        if (!(fabs((double)rep.w[i] - w[i]) <= 1e-6 * fabs(w[i]) + 1e-7)) {
            mpt_fail(__FILE__, __LINE__, "%s: final weight %d is %.9g, expected %.9g (SGD, lr 0.1, each push applied "
                     "once, as it arrives, to the server's current weights)\n      likely: the step was not "
                     "weights -= lr * grad, or a push was applied twice or not at all", what, i, rep.w[i], w[i]);
            return;
        }
}

/* An asynchronous run in arrival order: every push applied once, sane counters, and the loss falls to a
 * fraction of where it started. */
static void lab11_check_converges(int ranks, int pushes, int b, double fraction) {
    static lab11_server_report rep;
    /* the learning rate from this grade's seed, in [0.07, 0.13]: where the loss ends depends on it */
    char lr[16];
    const double rate = 0.07 + 0.06 * (double)mp_hash32(mpt_seed(), 0x11a5) * 0x1p-32;
    snprintf(lr, sizeof lr, "%.4f", rate);
    lab11_run_async(ranks, pushes, b, lr, NULL, 0, &rep);
    char what[160];
    snprintf(what, sizeof what, "parameter server with %d workers, %d pushes each, arrival order", ranks - 1, pushes);
    const int n = (ranks - 1) * pushes;
    MPT_REQUIRE(rep.updates == n, "%s: the server logged %d updates, expected %d", what, rep.updates, n);
    lab11_check_counters(&rep, (unsigned long long)n, what);
    for (int k = 0; k < n; k++)
        MPT_REQUIRE(rep.pulled[k] + rep.staleness[k] + 1 == (unsigned long long)(k + 1), "%s: update %d: pulled %llu "
                    "+ staleness %llu should be the version before the update (%d)", what, k + 1, rep.pulled[k],
                    rep.staleness[k], k);
    const float zero[LAB11_P] = {0};
    const double start = lab11_eval_loss(zero), end = rep.loss[n - 1];
    /* For the grader: the loss halfway and at the end, for this grade's learning rate, each within a factor of 2
     * of the reference's (log10 within 0.3). Arrival orders move them by 10-20%; the learning rate's range moves
     * the halfway loss 30 times, the end's 5 times, so only a server that applies the updates at this rate lands
     * there. */
    MPT_OBSERVE_NEAR(log10(rep.loss[n / 2 - 1] > 0 ? rep.loss[n / 2 - 1] : 1e-300), 0, 0.3);
    MPT_OBSERVE_NEAR(log10(end > 0 ? end : 1e-300), 0, 0.3);
    MPT_CHECK(end < fraction * start, "%s: the loss went from %.4g (zero weights) to %.4g, expected below %.4g "
              "(%g of the start)\n      likely: the update's sign or size is wrong", what, start, end,
              fraction * start, fraction);
}

#endif
