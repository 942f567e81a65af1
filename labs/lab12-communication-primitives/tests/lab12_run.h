/* lab12_run.h: what lab 12's tests share: start build/labs/lab12_worker on N ranks through mpirun (the
 * launcher mixpar run uses), then check what every rank reports: no wrong element (the worker computes
 * the answer from the inputs itself), the same result everywhere, and the bytes each rank sent. */
#ifndef LAB12_RUN_H
#define LAB12_RUN_H

#include "comm/launch.h"
#include "mptest.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The worker program and the lab whose regions it runs: lab 26's tests define these before including this file
 * to run the same checks on their worker (the hierarchical allreduce). */
#ifndef LAB12_WORKER
#define LAB12_WORKER "./build/labs/lab12_worker"
#define LAB12_WORKER_LAB "12"
#endif

enum {
    LAB12_MAX_LINES = 256,
    LAB12_WAIT_S = 25,     /* mpirun is stopped after this: a deadlock or an endless loop */
    LAB12_COMM_TIMEOUT_S = 10, /* a rank waiting this long for a message gives up with a message */
};

typedef struct {
    const char *op;    /* allreduce, reduce_scatter, allgather, broadcast, reduce */
    const char *algo;  /* ring, tree, rhd */
    const char *dtype; /* fp32, bf16, int32 */
    const char *redop; /* sum, max, min, avg */
    int root;          /* broadcast and reduce; -1: every root in turn */
    unsigned seed;
    const char *hint;  /* the likely mistake when results are wrong */
} lab12_case;

/* Bytes rank `rank` of p must send for one call on `count` elements (per rank for reduce_scatter and
 * allgather), from root `root`; each test passes its own formula, written without mixpar's helpers. */
typedef uint64_t (*lab12_bytes_fn)(int rank, int p, size_t count, int root);

/* The tests' own chunk arithmetic: `count` cut into p parts, the first count % p one element longer. */
static inline size_t lab12_chunk_size(size_t count, int p, int i) {
    return count / (size_t)p + ((size_t)i < count % (size_t)p ? 1 : 0);
}
static inline size_t lab12_chunk_start(size_t count, int p, int i) {
    size_t start = 0;
    for (int k = 0; k < i; k++) start += lab12_chunk_size(count, p, k);
    return start;
}

typedef struct {
    int root;
    size_t count;
    long long wrong, first;
    double want, got;
    char hash[32];
    unsigned long long sent;
    char to[160], from[160]; /* the peers of the rank's messages in posting order, "4.2.1"; "-": none */
} lab12_line;

static int lab12_read_rank(const char *dir, int rank, lab12_line *lines) {
    char path[512];
    snprintf(path, sizeof path, "%s/rank%d.txt", dir, rank);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    lab12_line l;
    char text[4096]; /* a line, with its to= and from= lists (at most 256 peers each) */
    while (n < LAB12_MAX_LINES && fgets(text, sizeof text, f) &&
           sscanf(text, " root=%d count=%zu wrong=%lld first=%lld want=%lf got=%lf hash=%31s sent=%llu", &l.root,
                  &l.count, &l.wrong, &l.first, &l.want, &l.got, l.hash, &l.sent) == 8) {
        const char *to = strstr(text, " to="), *from = strstr(text, " from=");
        if (!to || sscanf(to, " to=%159s", l.to) != 1) strcpy(l.to, "?");
        if (!from || sscanf(from, " from=%159s", l.from) != 1) strcpy(l.from, "?");
        lines[n++] = l;
    }
    fclose(f);
    return n;
}

static void lab12_remove_dir(const char *dir, int ranks) {
    char path[512];
    for (int r = 0; r < ranks; r++) {
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, r);
        unlink(path);
    }
    rmdir(dir);
}

/* The last `max` bytes of the ranks' output, for a failure message. */
static const char *lab12_tail(const char *text, size_t max) {
    size_t n = strlen(text);
    return n > max ? text + n - max : text;
}

/* The binomial trees' order (the handout's): virtual rank v = (rank - root) mod p; v's children are v + 2^k for
 * every 2^k below v's lowest set bit (all below p for the root) and below p - v. Writes into `out` the real ranks
 * of v's children, farthest first ("4.2.1"; "-": a leaf), or, nearest first, the order a reduce folds them in. */
static void lab12_children(int rank, int p, int root, bool farthest_first, char *out, size_t size) {
    int v = ((rank - root) % p + p) % p, top = 1, kids[32], n = 0;
    while (top < p && !(v & top)) top <<= 1;
    for (int m = top >> 1; m > 0; m >>= 1)
        if (v + m < p) kids[n++] = (v + m + root) % p;
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(out + used, size - used, i ? ".%d" : "%d", kids[farthest_first ? i : n - 1 - i]);
    if (n == 0) snprintf(out, size, "-");
}

/* The binomial tree's parent of `rank` as text ("-" for the root): v with its lowest set bit cleared. */
static void lab12_parent(int rank, int p, int root, char *out, size_t size) {
    int v = ((rank - root) % p + p) % p;
    if (v == 0) snprintf(out, size, "-");
    else snprintf(out, size, "%d", ((v & (v - 1)) + root) % p);
}

/* Runs the case on `ranks` ranks for each count and checks every rank's report. same_result: every rank
 * must hold the same bytes (allreduce, allgather, broadcast). want_sent: NULL to skip the byte count. */
static void lab12_check(int ranks, const lab12_case *k, const size_t *counts, int ncounts, bool same_result,
                        lab12_bytes_fn want_sent) {
    const char *worker = LAB12_WORKER;
    MPT_REQUIRE(access(worker, X_OK) == 0, "%s is missing: 'make labtests LAB=%s' (or make grade LAB=%s) builds it", worker,
                LAB12_WORKER_LAB, LAB12_WORKER_LAB);
    MPT_REQUIRE(comm_launch_mpirun() != NULL, "mpirun is not on PATH: 'make deps' installs OpenMPI");
    char dir[] = "/tmp/mixpar-lab12-XXXXXX";
    MPT_REQUIRE(mkdtemp(dir) != NULL, "cannot make a temporary folder in /tmp");
    char root[16], seed[16], counts_text[LAB12_MAX_LINES][24];
    snprintf(root, sizeof root, "%d", k->root);
    snprintf(seed, sizeof seed, "%u", k->seed ^ (unsigned)(mpt_seed() & 0xfffff)); /* inputs drawn for this grade */
    char *argv[16 + LAB12_MAX_LINES] = {(char *)worker, dir, (char *)k->op, (char *)k->algo, (char *)k->dtype,
                                        (char *)k->redop, root, seed};
    int argc = 8;
    for (int i = 0; i < ncounts; i++) {
        snprintf(counts_text[i], sizeof counts_text[i], "%zu", counts[i]);
        argv[argc++] = counts_text[i];
    }
    argv[argc] = NULL;
    char what[160];
    snprintf(what, sizeof what, "%s (%s, %s %s) on %d ranks", k->op, k->algo, k->dtype, k->redop, ranks);

    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", LAB12_COMM_TIMEOUT_S);
    setenv("MIXPAR_COMM_TIMEOUT", timeout, 1);
    unsetenv("MIXPAR_ALLREDUCE");
    comm_launch_opts o = {.ranks = ranks, .timeout_s = LAB12_WAIT_S, .quiet = true};
    char *output = NULL;
    int rc = comm_launch_run(&o, argv, &output);
    if (rc != 0) {
        const char *why = strstr(output, "not done") ? "a LAB " LAB12_WORKER_LAB " region is still a LAB_TODO stub"
                        : rc == 124 ? "the ranks did not finish: a deadlock (two ranks both waiting to receive) or an "
                                      "endless loop"
                        : strstr(output, "timed out") ? "a rank waited for a message that never came: do the two "
                                                        "sides of every exchange agree on who sends to whom?"
                        : strstr(output, "disagree") ? "a receive and its send disagree on the number of elements: "
                                                       "check the chunk each side names"
                        : strstr(output, "does not exist") ? "a chunk index out of range (see the ranks' message)"
                        : rc == 139 ? "a rank crashed (segmentation fault): a chunk index out of range, or a NULL "
                                      "pointer?"
                        : rc > 128 ? "a rank was killed by a signal"
                                   : "a rank failed (see its output)";
        lab12_remove_dir(dir, ranks);
        mpt_fail_stop(__FILE__, __LINE__, "%s: mpirun exited with %d: %s\n      ranks' output (end):\n%s", what, rc,
                      why, lab12_tail(output, 1500));
    }
    free(output);

    static lab12_line lines[64][LAB12_MAX_LINES];
    MPT_REQUIRE(ranks <= 64, "at most 64 ranks");
    int per_rank = -1;
    for (int r = 0; r < ranks; r++) {
        int n = lab12_read_rank(dir, r, lines[r]);
        if (n < 0) {
            lab12_remove_dir(dir, ranks);
            mpt_fail_stop(__FILE__, __LINE__, "%s: rank %d wrote no report (did it crash?)", what, r);
        }
        if (per_rank < 0) per_rank = n;
        MPT_CHECK(n == per_rank && n >= ncounts, "%s: rank %d reported %d results, expected %d", what, r, n,
                  per_rank < ncounts ? ncounts : per_rank);
        if (n < per_rank) per_rank = n;
    }
    lab12_remove_dir(dir, ranks);
    for (int i = 0; i < per_rank; i++) {
        /* what the grader compares with the reference: each rank's result (a hash of its buffer; the inputs are
         * small integers, so every correct order of the sums gives the same bits) and the bytes it sent */
        for (int r = 0; r < ranks; r++) {
            MPT_OBSERVE(strtoull(lines[r][i].hash, NULL, 16));
            MPT_OBSERVE(lines[r][i].sent);
        }
        int shown = 0;
        for (int r = 0; r < ranks; r++) {
            const lab12_line *l = &lines[r][i];
            if (l->wrong && shown++ < 2) {
                char where[160] = "";
                if ((strcmp(k->algo, "ring") == 0 || strcmp(k->algo, "rhd") == 0) && l->first >= 0) {
                    /* The chunk the first wrong element is in (ring and rhd cut the buffer into p chunks). */
                    size_t total = strcmp(k->op, "reduce_scatter") == 0 || strcmp(k->op, "allgather") == 0
                                       ? l->count * (size_t)ranks : l->count;
                    size_t e = (size_t)l->first + (strcmp(k->op, "reduce_scatter") == 0 ? (size_t)r * l->count : 0);
                    int chunk = 0;
                    while (chunk + 1 < ranks && lab12_chunk_start(total, ranks, chunk + 1) <= e) chunk++;
                    snprintf(where, sizeof where, " (in chunk %d of %d: elements %zu..%zu)", chunk, ranks,
                             lab12_chunk_start(total, ranks, chunk),
                             lab12_chunk_start(total, ranks, chunk) + lab12_chunk_size(total, ranks, chunk) - 1);
                }
                char rooted[32] = "";
                if (strcmp(k->op, "broadcast") == 0 || strcmp(k->op, "reduce") == 0)
                    snprintf(rooted, sizeof rooted, ", root %d", l->root);
                mpt_fail(__FILE__, __LINE__, "%s, count %zu%s: rank %d has %lld wrong element%s; the first is "
                         "element %lld%s: expected %g, got %g\n      likely: %s", what, l->count, rooted, r, l->wrong,
                         l->wrong == 1 ? "" : "s", l->first, where, l->want, l->got, k->hint);
            }
        }
        if (same_result)
            for (int r = 1; r < ranks; r++)
                if (strcmp(lines[r][i].hash, lines[0][i].hash) != 0) {
                    mpt_fail(__FILE__, __LINE__, "%s, count %zu: ranks 0 and %d ended with different results (every "
                             "rank must hold the same bytes)", what, lines[0][i].count, r);
                    break;
                }
        /* The trees' order, which the results cannot show: a broadcast sends to its children farthest first
         * (after receiving from its parent); a reduce folds them in nearest first (then sends to its parent). */
        bool bcast = strcmp(k->op, "broadcast") == 0, tree = strcmp(k->algo, "tree") == 0;
        if (tree && (bcast || strcmp(k->op, "reduce") == 0))
            for (int r = 0; r < ranks; r++) {
                const lab12_line *l = &lines[r][i];
                char kids[160], parent[16];
                lab12_children(r, ranks, l->root, bcast, kids, sizeof kids);
                lab12_parent(r, ranks, l->root, parent, sizeof parent);
                const char *want_to = bcast ? kids : parent, *want_from = bcast ? parent : kids;
                if (strcmp(l->to, want_to) != 0 || strcmp(l->from, want_from) != 0) {
                    mpt_fail(__FILE__, __LINE__, "%s, count %zu, root %d: rank %d received from %s and sent to %s "
                             "(in that order), expected from %s and to %s\n      likely: %s", what, l->count, l->root,
                             r, l->from, l->to, want_from, want_to,
                             bcast ? "receive from the parent first, then send to the children farthest first "
                                     "(the largest distance first: the deepest subtrees start earliest)"
                                   : "fold in the children nearest first (distance 1, 2, 4, ...), then send to the "
                                     "parent");
                    break;
                }
            }
        if (want_sent)
            for (int r = 0; r < ranks; r++) {
                uint64_t want = want_sent(r, ranks, lines[r][i].count, lines[r][i].root);
                if (lines[r][i].sent != want) {
                    mpt_fail(__FILE__, __LINE__, "%s, count %zu, root %d: rank %d sent %llu bytes, but the algorithm "
                             "sends exactly %llu: each step sends one chunk (no more, no less), each rank once per "
                             "round", what, lines[r][i].count, lines[r][i].root, r, lines[r][i].sent,
                             (unsigned long long)want);
                    break;
                }
            }
    }
}

#endif
