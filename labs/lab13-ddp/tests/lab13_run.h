/* lab13_run.h: what lab 13's tests share: start build/labs/lab13_worker on N ranks through mpirun, read
 * every rank's report, and check it: the broadcast, the buckets (computed here from the layer sizes, the
 * tests' own arithmetic), the averaged gradients, and bit-identical replicas. */
#ifndef LAB13_RUN_H
#define LAB13_RUN_H

#include "comm/launch.h"
#include "lab13_model.h"
#include "mptest.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LAB13_MAX_RANKS = 8, LAB13_MAX_STEPS = 8, LAB13_MAX_BUCKETS = 64, LAB13_WAIT_S = 25, LAB13_COMM_TIMEOUT_S = 10 };

typedef struct {
    int buckets;
    size_t lo[LAB13_MAX_BUCKETS], hi[LAB13_MAX_BUCKETS];
    unsigned long long grad, params;
    double maxdiff, gscale;
} lab13_step;

typedef struct {
    size_t params;
    int world, steps;
    unsigned long long init, rank0_init, after_create;
    lab13_step step[LAB13_MAX_STEPS];
} lab13_rank;

typedef struct {
    int ranks;
    size_t bucket_elems;
    bool overlap, differ;
    int steps, micro_b;
    lab13_rank rank[LAB13_MAX_RANKS];
    char what[160];
} lab13_result;

static bool lab13_parse_rank(const char *path, lab13_rank *r) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    memset(r, 0, sizeof *r);
    bool ok = fscanf(f, " params=%zu world=%d init=%llx rank0_init=%llx after_create=%llx", &r->params, &r->world,
                     &r->init, &r->rank0_init, &r->after_create) == 5;
    while (ok && r->steps < LAB13_MAX_STEPS) {
        lab13_step *s = &r->step[r->steps];
        int index;
        char spans[2048];
        if (fscanf(f, " step=%d buckets=%d spans=%2047s grad=%llx maxdiff=%lf gscale=%lf params=%llx", &index,
                   &s->buckets, spans, &s->grad, &s->maxdiff, &s->gscale, &s->params) != 7)
            break;
        int k = 0;
        for (char *p = spans; k < LAB13_MAX_BUCKETS && strcmp(spans, "none") != 0 && *p;) {
            if (sscanf(p, "%zu:%zu", &s->lo[k], &s->hi[k]) != 2) break;
            k++;
            p = strchr(p, ',');
            if (!p) break;
            p++;
        }
        r->steps++;
    }
    fclose(f);
    return ok;
}

static const char *lab13_tail(const char *text, size_t max) {
    size_t n = strlen(text);
    return n > max ? text + n - max : text;
}

/* Runs argv (the worker and its arguments, DIR a fresh folder made here) on `ranks` ranks; a failed run stops
 * the test with the likely cause. The caller reads DIR/rank<R>.txt and removes them with lab13_cleanup. */
static void lab13_mpirun(int ranks, char **argv, int dir_arg, char *dir, const char *what) {
    const char *worker = "./build/labs/lab13_worker";
    MPT_REQUIRE(access(worker, X_OK) == 0, "%s is missing: 'make labtests LAB=13' (or make grade LAB=13) builds it", worker);
    MPT_REQUIRE(comm_launch_mpirun() != NULL, "mpirun is not on PATH: 'make deps' installs OpenMPI");
    MPT_REQUIRE(ranks <= LAB13_MAX_RANKS, "at most %d ranks", LAB13_MAX_RANKS);
    strcpy(dir, "/tmp/mixpar-lab13-XXXXXX");
    MPT_REQUIRE(mkdtemp(dir) != NULL, "cannot make a temporary folder in /tmp");
    argv[0] = (char *)worker;
    argv[dir_arg] = dir;
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", LAB13_COMM_TIMEOUT_S);
    setenv("MIXPAR_COMM_TIMEOUT", timeout, 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    unsetenv("MIXPAR_ALLREDUCE");
    comm_launch_opts o = {.ranks = ranks, .timeout_s = LAB13_WAIT_S, .quiet = true};
    char *output = NULL;
    int rc = comm_launch_run(&o, argv, &output);
    if (rc == 0) {
        free(output);
        return;
    }
    for (int r = 0; r < ranks; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, r);
        unlink(path);
    }
    rmdir(dir);
    const char *out = output ? output : "";
    const char *why = strstr(out, "lab 13 not done") ? "a LAB 13 region in core/dist/ddp.c is still a LAB_TODO stub"
                    : strstr(out, "not done") ? "a region of another lab is still a stub (see the ranks' output)"
                    : strstr(out, "do not end where the bucket starts")
                        ? "the open bucket's span and the layer that just finished are not adjacent: a layer's "
                          "span must end exactly where the bucket starts (open_lo), and after a launch the next "
                          "bucket starts empty just below the last (open_hi = open_lo)"
                    : strstr(out, "more than") ? "too many buckets: is every layer launched on its own?"
                    : strstr(out, "its reduction had not started") ? "a queued bucket was never taken: launch must "
                        "signal the work condition after queueing, and the thread must take every job from head to tail"
                    : strstr(out, "waited 5 s for backward") ? "backward could not go on while a bucket was reduced: "
                        "the thread must release the lock before it reduces (and take it again after)"
                    : rc == 124 ? "the ranks did not finish: one rank launched a bucket the others did not (they "
                                  "must all make the same buckets in the same order), a rank never launched the last "
                                  "bucket, or a wait never ended (the thread must broadcast idle after every bucket)"
                    : strstr(out, "timed out") ? "a rank waited for a collective the others never started: every "
                                                 "rank must launch the same buckets in the same order"
                    : rc == 139 ? "a rank crashed (segmentation fault): a span outside the gradient buffer?"
                                : "a rank failed (see its output)";
    char copy[2048];
    snprintf(copy, sizeof copy, "%s", lab13_tail(out, 1500));
    free(output);
    mpt_fail_stop(__FILE__, __LINE__, "%s: mpirun exited with %d: %s\n      ranks' output (end):\n%s", what, rc, why,
                  copy);
}

static void lab13_cleanup(const char *dir, int ranks) {
    for (int r = 0; r < ranks; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, r);
        unlink(path);
    }
    rmdir(dir);
}

/* Runs the worker's check mode on `ranks` ranks and reads what they wrote; a failed run stops the test with
 * the likely cause. */
static void lab13_run(lab13_result *res, int ranks, size_t bucket_elems, bool overlap, bool differ, int steps, int micro_b) {
    MPT_REQUIRE(steps <= LAB13_MAX_STEPS, "at most %d steps", LAB13_MAX_STEPS);
    memset(res, 0, sizeof *res);
    *res = (lab13_result){ranks, bucket_elems, overlap, differ, steps, micro_b, {{0}}, ""};
    snprintf(res->what, sizeof res->what, "DDP on %d ranks, buckets of %zu elements%s, overlap %s, %s seeds", ranks,
             bucket_elems, bucket_elems ? "" : " (0: one bucket)", overlap ? "on" : "off", differ ? "different" : "equal");
    char dir[64], a_bucket[24], a_overlap[4], a_steps[12], a_b[12];
    snprintf(a_bucket, sizeof a_bucket, "%zu", bucket_elems);
    snprintf(a_overlap, sizeof a_overlap, "%d", overlap ? 1 : 0);
    snprintf(a_steps, sizeof a_steps, "%d", steps);
    snprintf(a_b, sizeof a_b, "%d", micro_b);
    char *argv[] = {NULL, "check", NULL, a_bucket, a_overlap, differ ? "differ" : "same", a_steps, a_b, NULL};
    lab13_mpirun(ranks, argv, 2, dir, res->what);
    bool read_all = true;
    for (int r = 0; r < ranks; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, r);
        if (!lab13_parse_rank(path, &res->rank[r])) read_all = false;
    }
    lab13_cleanup(dir, ranks);
    MPT_REQUIRE(read_all, "%s: a rank's report is missing or unreadable", res->what);
    for (int r = 0; r < ranks; r++)
        MPT_REQUIRE(res->rank[r].steps == steps, "%s: rank %d reported %d steps, expected %d", res->what, r,
                    res->rank[r].steps, steps);
    /* what the grader compares with the reference: the weights after the broadcast, the buckets DDP made and
     * launched, the gradients' scale (the sums themselves may round differently between correct codes) */
    for (int r = 0; r < ranks; r++) {
        const lab13_rank *k = &res->rank[r];
        MPT_OBSERVE(k->after_create);
        for (int t = 0; t < k->steps; t++) {
            MPT_OBSERVE((uint64_t)(uint32_t)k->step[t].buckets);
            for (int b = 0; b < k->step[t].buckets && b < LAB13_MAX_BUCKETS; b++)
                MPT_OBSERVE((uint64_t)k->step[t].lo[b] << 32 | k->step[t].hi[b]);
            MPT_OBSERVE_NEAR(k->step[t].gscale, 1e-6, 1e-12);
        }
    }
}

/* The buckets DDP must make, from the layer sizes: layers finish from the head (L) down to the embeddings
 * (-1); a bucket grows downwards until it holds bucket_elems (0: never), and the last one is cut at the
 * embeddings. Returns the count; lo/hi in launch order. */
static int lab13_expected_buckets(size_t bucket_elems, size_t *lo, size_t *hi) {
    model_config cfg = lab13_test_config();
    model *m = model_create(&cfg);
    int n = 0;
    size_t top = model_num_params(m), filled = 0;
    for (int layer = cfg.L; layer >= -1; layer--) {
        size_t off, size;
        model_layer_span(m, layer, &off, &size);
        filled += size;
        if (layer == -1 || (bucket_elems && filled >= bucket_elems)) {
            lo[n] = off, hi[n] = top, n++;
            top = off, filled = 0;
        }
    }
    model_free(m);
    return n;
}

static void lab13_check_broadcast(const lab13_result *res) {
    for (int r = 0; r < res->ranks; r++) {
        const lab13_rank *k = &res->rank[r];
        if (res->differ && r > 0)
            MPT_REQUIRE(k->init != k->rank0_init, "the worker's rank %d should start from weights of its own", r);
        MPT_CHECK(k->after_create == k->rank0_init, "%s: after ddp_create rank %d's weights (hash %016llx) are not "
                  "rank 0's initial weights (hash %016llx)\n      likely: ddp_create must broadcast the whole parameter "
                  "buffer (model_num_params floats, fp32) from rank 0, so replicas seeded differently start equal",
                  res->what, r, k->after_create, k->rank0_init);
    }
}

static void lab13_check_buckets(const lab13_result *res, int want_count) {
    size_t lo[LAB13_MAX_BUCKETS], hi[LAB13_MAX_BUCKETS];
    int n = lab13_expected_buckets(res->bucket_elems, lo, hi);
    MPT_REQUIRE(n == want_count, "the test expects %d buckets of %zu elements but the model makes %d", want_count,
                res->bucket_elems, n);
    for (int r = 0; r < res->ranks; r++)
        for (int s = 0; s < res->steps; s++) {
            const lab13_step *st = &res->rank[r].step[s];
            const size_t P = res->rank[r].params;
            if (st->buckets != n) {
                mpt_fail(__FILE__, __LINE__, "%s, step %d, rank %d: %d bucket(s), expected %d\n      likely: a bucket "
                         "is launched as soon as it holds at least %zu elements, and the last one at the embeddings "
                         "(layer -1), whatever its size", res->what, s, r, st->buckets, n, res->bucket_elems);
                return;
            }
            MPT_CHECK(st->hi[0] == P, "%s, step %d, rank %d: the first bucket ends at %zu, expected %zu (the end of the "
                      "gradient buffer: the head's gradients are ready first)", res->what, s, r, st->hi[0], P);
            MPT_CHECK(st->lo[n - 1] == 0, "%s, step %d, rank %d: the last bucket starts at %zu, expected 0 (the "
                      "embeddings are the start of the buffer)", res->what, s, r, st->lo[n - 1]);
            for (int k = 0; k < n; k++) {
                if (k > 0 && st->hi[k] != st->lo[k - 1]) {
                    mpt_fail(__FILE__, __LINE__, "%s, step %d, rank %d: bucket %d ends at %zu but bucket %d started at "
                             "%zu: buckets must tile the buffer downwards with no gap or overlap", res->what, s, r, k,
                             st->hi[k], k - 1, st->lo[k - 1]);
                    return;
                }
                if (st->lo[k] != lo[k] || st->hi[k] != hi[k]) {
                    mpt_fail(__FILE__, __LINE__, "%s, step %d, rank %d: bucket %d is [%zu, %zu), expected [%zu, %zu)\n"
                             "      likely: grow the open span by whole layers and launch when it holds >= %zu "
                             "elements (not before, not one layer later)", res->what, s, r, k, st->lo[k], st->hi[k],
                             lo[k], hi[k], res->bucket_elems);
                    return;
                }
            }
        }
}

/* Averaged gradients equal the gradient of one model on the concatenated batch (within float rounding). */
static void lab13_check_gradients(const lab13_result *res) {
    for (int r = 0; r < res->ranks; r++)
        for (int s = 0; s < res->steps; s++) {
            const lab13_step *st = &res->rank[r].step[s];
            MPT_REQUIRE(st->gscale > 0, "the whole-batch gradient should not be zero");
            if (st->maxdiff > 1e-4 * st->gscale) {
                mpt_fail(__FILE__, __LINE__, "%s, step %d, rank %d: gradients differ from one model's on the whole "
                         "batch by up to %g (largest gradient %g)\n      likely: a bucket was not reduced (or reduced "
                         "twice), or the average was taken over the wrong span", res->what, s, r, st->maxdiff,
                         st->gscale);
                return;
            }
            if (r > 0 && st->grad != res->rank[0].step[s].grad) {
                mpt_fail(__FILE__, __LINE__, "%s, step %d: ranks 0 and %d hold different averaged gradients (every "
                         "rank must end with the same bytes)", res->what, s, r);
                return;
            }
        }
}

static void lab13_check_replicas(const lab13_result *res) {
    for (int s = 0; s < res->steps; s++)
        for (int r = 1; r < res->ranks; r++)
            if (res->rank[r].step[s].params != res->rank[0].step[s].params) {
                mpt_fail(__FILE__, __LINE__, "%s: after step %d the weights of ranks 0 and %d differ (hashes %016llx, "
                         "%016llx): replicas must stay bit-identical\n      likely: they did not start equal (the "
                         "broadcast) or did not apply the same averaged gradients (a bucket missed)", res->what, s, r,
                         res->rank[0].step[s].params, res->rank[r].step[s].params);
                return;
            }
    MPT_REQUIRE(res->steps == 0 || res->rank[0].step[res->steps - 1].params != res->rank[0].after_create,
                "the weights should change during training");
}

/* ------------------------------------------------------------------ the overlap runs (worker mode overlap) */

typedef struct {
    int launched, reduced;
    size_t launched_lo[LAB13_MAX_BUCKETS], launched_hi[LAB13_MAX_BUCKETS];
    size_t reduced_lo[LAB13_MAX_BUCKETS], reduced_hi[LAB13_MAX_BUCKETS];
    char order[256];
    int on_main, ended_at_finish, finish_early;
    unsigned long long grad;
} lab13_overlap_step;

typedef struct {
    int ranks, steps;
    size_t bucket_elems;
    bool overlap;
    lab13_overlap_step step[LAB13_MAX_RANKS][LAB13_MAX_STEPS];
    char what[160];
} lab13_overlap_result;

/* "LO:HI,LO:HI,..." or "none" into lo/hi; returns the count. */
static int lab13_parse_spans(const char *text, size_t *lo, size_t *hi) {
    int k = 0;
    for (const char *p = text; k < LAB13_MAX_BUCKETS && strcmp(text, "none") != 0 && *p;) {
        if (sscanf(p, "%zu:%zu", &lo[k], &hi[k]) != 2) break;
        k++;
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    return k;
}

static int lab13_parse_overlap(const char *path, lab13_overlap_step *steps) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0, index;
    char launched[2048], reduced[2048];
    while (n < LAB13_MAX_STEPS) {
        lab13_overlap_step *s = &steps[n];
        if (fscanf(f, " step=%d launched=%2047s reduced=%2047s order=%255s on_main=%d ended_at_finish=%d "
                      "finish_early=%d grad=%llx", &index, launched, reduced, s->order, &s->on_main,
                   &s->ended_at_finish, &s->finish_early, &s->grad) != 8)
            break;
        s->launched = lab13_parse_spans(launched, s->launched_lo, s->launched_hi);
        s->reduced = lab13_parse_spans(reduced, s->reduced_lo, s->reduced_hi);
        n++;
    }
    fclose(f);
    return n;
}

/* The worker's overlap mode on `ranks` ranks (equal seeds, the quadratic loss, the logging reduction). */
static void lab13_run_overlap(lab13_overlap_result *res, int ranks, size_t bucket_elems, bool overlap, int steps) {
    MPT_REQUIRE(steps <= LAB13_MAX_STEPS, "at most %d steps", LAB13_MAX_STEPS);
    memset(res, 0, sizeof *res);
    res->ranks = ranks, res->steps = steps, res->bucket_elems = bucket_elems, res->overlap = overlap;
    snprintf(res->what, sizeof res->what, "DDP on %d ranks, buckets of %zu elements, overlap %s", ranks, bucket_elems,
             overlap ? "on" : "off");
    char dir[64], a_bucket[24], a_steps[12];
    snprintf(a_bucket, sizeof a_bucket, "%zu", bucket_elems);
    snprintf(a_steps, sizeof a_steps, "%d", steps);
    char *argv[] = {NULL, "overlap", NULL, a_bucket, overlap ? "1" : "0", a_steps, "2", NULL};
    lab13_mpirun(ranks, argv, 2, dir, res->what);
    int got[LAB13_MAX_RANKS];
    for (int r = 0; r < ranks; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, r);
        got[r] = lab13_parse_overlap(path, res->step[r]);
    }
    lab13_cleanup(dir, ranks);
    for (int r = 0; r < ranks; r++)
        MPT_REQUIRE(got[r] == steps, "%s: rank %d reported %d steps, expected %d", res->what, r, got[r], steps);
}

/* Every bucket reduced on the communication thread, once, in the order launched (first in, first out). */
static inline void lab13_check_reduce_order(const lab13_overlap_result *res) {
    for (int r = 0; r < res->ranks; r++)
        for (int s = 0; s < res->steps; s++) {
            const lab13_overlap_step *st = &res->step[r][s];
            MPT_OBSERVE((uint64_t)(uint32_t)st->reduced);
            MPT_CHECK(st->on_main == 0, "%s, step %d, rank %d: %d bucket(s) were reduced on the thread that runs "
                      "backward, expected 0\n      likely: launch must queue the bucket for the communication thread "
                      "(and return at once), not reduce it itself", res->what, s, r, st->on_main);
            MPT_REQUIRE(st->launched > 1, "the test expects several buckets");
            if (st->reduced != st->launched) {
                mpt_fail(__FILE__, __LINE__, "%s, step %d, rank %d: %d reductions for %d launched buckets\n      likely: "
                         "every queued bucket is reduced exactly once (take each job from the queue's head once)",
                         res->what, s, r, st->reduced, st->launched);
                return;
            }
            for (int k = 0; k < st->launched; k++) {
                MPT_OBSERVE((uint64_t)st->reduced_lo[k] << 32 | st->reduced_hi[k]);
                if (st->reduced_lo[k] != st->launched_lo[k] || st->reduced_hi[k] != st->launched_hi[k]) {
                    mpt_fail(__FILE__, __LINE__, "%s, step %d, rank %d: reduction %d was of [%zu, %zu), but bucket %d "
                             "launched was [%zu, %zu)\n      likely: the thread must take the buckets in the order "
                             "they were launched: from the head of the queue (first in, first out), not the tail",
                             res->what, s, r, k, st->reduced_lo[k], st->reduced_hi[k], k, st->launched_lo[k],
                             st->launched_hi[k]);
                    return;
                }
            }
        }
}

/* The first bucket's reduction started while backward was still running: its 's' comes before 'B'. */
static inline void lab13_check_overlap_happens(const lab13_overlap_result *res) {
    for (int r = 0; r < res->ranks; r++) {
        const lab13_overlap_step *st = &res->step[r][0];
        const char *first_start = strchr(st->order, 's'), *backward_end = strchr(st->order, 'B');
        MPT_REQUIRE(backward_end != NULL, "%s, rank %d: the log has no end of backward ('B'): %s", res->what, r,
                    st->order);
        const bool overlapped = first_start != NULL && first_start < backward_end;
        MPT_OBSERVE(overlapped);
        MPT_CHECK(overlapped && st->on_main == 0, "%s, rank %d: events %s (s: a reduction starts, e: ends, B: backward "
                  "ends, F: ddp_finish returns): expected the first bucket's reduction to start on the communication "
                  "thread before backward ends\n      likely: launch must queue the bucket and wake the thread "
                  "(pthread_cond_signal on the work condition) so that it starts at once", res->what, r, st->order);
    }
}

/* ddp_finish returned only after every bucket's reduction had ended: all the 'e' before 'F', and the last
 * reduction never saw ddp_finish return while it was still running. */
static void lab13_check_finish_waits(const lab13_overlap_result *res) {
    for (int r = 0; r < res->ranks; r++)
        for (int s = 0; s < res->steps; s++) {
            const lab13_overlap_step *st = &res->step[r][s];
            const int total = st->launched;
            MPT_OBSERVE((uint64_t)(uint32_t)st->ended_at_finish);
            MPT_CHECK(st->ended_at_finish == total && st->finish_early == 0, "%s, step %d, rank %d: ddp_finish returned "
                      "when %d of %d reductions had ended%s (events %s: s start, e end, B backward ends, F finish "
                      "returns)\n      likely: wait while a bucket is queued OR the thread is still reducing one (busy): "
                      "an empty queue alone does not mean the last bucket is done", res->what, s, r,
                      st->ended_at_finish, total, st->finish_early ? ", while the last was still being reduced" : "",
                      st->order);
        }
}

/* Overlap on and off reduce the same buckets with the same reduction: the same gradients, bit for bit. */
static inline void lab13_check_overlap_bit_identical(int ranks, size_t bucket_elems, int steps) {
    static lab13_overlap_result on, off;
    lab13_run_overlap(&on, ranks, bucket_elems, true, steps);
    lab13_run_overlap(&off, ranks, bucket_elems, false, steps);
    for (int r = 0; r < ranks; r++)
        for (int s = 0; s < steps; s++) {
            MPT_OBSERVE(on.step[r][s].grad == off.step[r][s].grad);
            if (on.step[r][s].grad != off.step[r][s].grad) {
                mpt_fail(__FILE__, __LINE__, "%s, step %d, rank %d: the averaged gradients (hash %016llx) differ from "
                         "those of the same run reducing each bucket in backward (hash %016llx)\n      likely: a "
                         "bucket reduced twice or not at all, or gradients read before the last reduction ended "
                         "(events %s)", on.what, s, r, on.step[r][s].grad, off.step[r][s].grad, on.step[r][s].order);
                return;
            }
        }
    lab13_check_finish_waits(&on);
}

#endif
