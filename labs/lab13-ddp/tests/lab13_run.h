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

/* Runs the worker on `ranks` ranks and reads what they wrote; a failed run stops the test with the likely cause. */
static void lab13_run(lab13_result *res, int ranks, size_t bucket_elems, bool overlap, bool differ, int steps, int micro_b) {
    const char *worker = "./build/labs/lab13_worker";
    MPT_REQUIRE(access(worker, X_OK) == 0, "%s is missing: 'make labtests LAB=13' (or make grade LAB=13) builds it", worker);
    MPT_REQUIRE(comm_launch_mpirun() != NULL, "mpirun is not on PATH: 'make deps' installs OpenMPI");
    MPT_REQUIRE(ranks <= LAB13_MAX_RANKS && steps <= LAB13_MAX_STEPS, "at most %d ranks and %d steps", LAB13_MAX_RANKS,
                LAB13_MAX_STEPS);
    memset(res, 0, sizeof *res);
    *res = (lab13_result){ranks, bucket_elems, overlap, differ, steps, micro_b, {{0}}, ""};
    snprintf(res->what, sizeof res->what, "DDP on %d ranks, buckets of %zu elements%s, overlap %s, %s seeds", ranks,
             bucket_elems, bucket_elems ? "" : " (0: one bucket)", overlap ? "on" : "off", differ ? "different" : "equal");
    char dir[] = "/tmp/mixpar-lab13-XXXXXX";
    MPT_REQUIRE(mkdtemp(dir) != NULL, "cannot make a temporary folder in /tmp");
    char a_bucket[24], a_overlap[4], a_steps[12], a_b[12];
    snprintf(a_bucket, sizeof a_bucket, "%zu", bucket_elems);
    snprintf(a_overlap, sizeof a_overlap, "%d", overlap ? 1 : 0);
    snprintf(a_steps, sizeof a_steps, "%d", steps);
    snprintf(a_b, sizeof a_b, "%d", micro_b);
    char *argv[] = {(char *)worker, "check", dir, a_bucket, a_overlap, differ ? "differ" : "same", a_steps, a_b, NULL};
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", LAB13_COMM_TIMEOUT_S);
    setenv("MIXPAR_COMM_TIMEOUT", timeout, 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    unsetenv("MIXPAR_ALLREDUCE");
    comm_launch_opts o = {.ranks = ranks, .timeout_s = LAB13_WAIT_S, .quiet = true};
    char *output = NULL;
    int rc = comm_launch_run(&o, argv, &output);
    bool read_all = true;
    for (int r = 0; r < ranks; r++) {
        char path[512];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, r);
        if (rc == 0 && !lab13_parse_rank(path, &res->rank[r])) read_all = false;
        unlink(path);
    }
    rmdir(dir);
    if (rc != 0) {
        const char *why = strstr(output, "lab 13 not done") ? "a LAB 13 region in core/dist/ddp.c is still a LAB_TODO stub"
                        : strstr(output, "not done") ? "a region of another lab is still a stub (see the ranks' output)"
                        : strstr(output, "do not end where the bucket starts")
                            ? "the open bucket's span and the layer that just finished are not adjacent: a layer's "
                              "span must end exactly where the bucket starts (open_lo), and after a launch the next "
                              "bucket starts empty just below the last (open_hi = open_lo)"
                        : strstr(output, "more than") ? "too many buckets: is every layer launched on its own?"
                        : rc == 124 ? "the ranks did not finish: one rank launched a bucket the others did not (they "
                                      "must all make the same buckets in the same order), or a rank never launched "
                                      "the last bucket"
                        : strstr(output, "timed out") ? "a rank waited for a collective the others never started: every "
                                                        "rank must launch the same buckets in the same order"
                        : rc == 139 ? "a rank crashed (segmentation fault): a span outside the gradient buffer?"
                                    : "a rank failed (see its output)";
        mpt_fail_stop(__FILE__, __LINE__, "%s: mpirun exited with %d: %s\n      ranks' output (end):\n%s", res->what, rc,
                      why, lab13_tail(output ? output : "", 1500));
    }
    free(output);
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

#endif
