/* lab11_worker.c: the program lab 11's tests and experiment start on N ranks (build/labs/lab11_worker):
 * linear regression (lab11_model.h) trained data-parallel, synchronously or with a parameter server.
 *
 *   lab11_worker sync DIR STEPS B LR
 *     every rank starts from zero weights; each step rank r computes the mean gradient of its B rows of a
 *     global batch of world*B rows, ps_average_gradients averages it over the ranks, and every rank takes
 *     the same SGD step. Rank r writes DIR/rank<r>.txt:
 *       world=N steps=S b=B
 *       step=s loss=X            (loss on the evaluation set after step s; rank 0 only)
 *       weights=W0,W1,...        (the final parameters, %.9g: exact for floats)
 *
 *   lab11_worker async DIR PUSHES B LR SCHEDULE BOUND [SLOW_US]
 *     rank 0 is the parameter server (zero weights, SGD with LR); ranks 1..N-1 are workers running
 *     ps_worker_run until each has committed PUSHES gradients, gradient t of worker w on B rows of its own
 *     (lab11_async_rows(w, t, B)). BOUND is "-" (no bound: every offer committed) or K: a worker withdraws an
 *     offer more than K versions stale and pulls again. SCHEDULE is "-" (serve requests as they arrive) or a
 *     comma-separated list of worker ranks: the order the server serves their requests in (each worker
 *     alternates pull, offer). SLOW_US > 0 makes worker 1 a straggler that sleeps that long per gradient.
 *     Rank 0 writes DIR/rank0.txt (each line flushed as it happens, so a run the server stops leaves its log):
 *       update=u worker=w pulled=v staleness=s loss=X      (a committed offer, applied as update u)
 *       withdrawn worker=w pulled=v staleness=s            (a withdrawn offer)
 *       pushes=P version=V staleness_sum=S staleness_max=M withdrawn=D
 *       hist=h0,...,h15
 *       weights=W0,W1,...
 *     and worker w writes DIR/rank<w>.txt: pulls=P pushes=Q withdrawn=D */
#include "../lab11_model.h"

#include "comm/comm.h"
#include "dist/ps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_SCHEDULE = 1 << 16 };

static _Noreturn void usage(const char *why) {
    fprintf(stderr, "lab11_worker: %s\nusage: lab11_worker sync DIR STEPS B LR\n"
                    "       lab11_worker async DIR PUSHES B LR SCHEDULE|- BOUND|- [SLOW_US]\n", why);
    exit(2);
}

static long arg_long(const char *s, long lo) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo) usage("a number argument is out of range");
    return v;
}

static float arg_float(const char *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v > 0)) usage("LR must be a positive number");
    return (float)v;
}

static FILE *open_report(const char *dir, int rank) {
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.txt", dir, rank);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "lab11_worker: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
    return f;
}

static void write_weights(FILE *f, const float *p) {
    fprintf(f, "weights=");
    for (int i = 0; i < LAB11_P; i++) fprintf(f, "%s%.9g", i ? "," : "", p[i]);
    fprintf(f, "\n");
}

static int run_sync(comm_t *c, int argc, char **argv) {
    if (argc != 6) usage("sync takes 4 arguments");
    const int steps = (int)arg_long(argv[3], 0), b = (int)arg_long(argv[4], 1);
    const float lr = arg_float(argv[5]);
    const int rank = comm_rank(c), world = comm_size(c);
    FILE *out = open_report(argv[2], rank);
    fprintf(out, "world=%d steps=%d b=%d\n", world, steps, b);
    float p[LAB11_P] = {0}, grad[LAB11_P];
    for (int s = 0; s < steps; s++) {
        lab11_gradient(p, lab11_sync_rows(s, world * b, rank, b), b, grad);
        ps_average_gradients(c, grad, LAB11_P, COMM_ALGO_NATIVE);
        for (int i = 0; i < LAB11_P; i++) p[i] -= lr * grad[i];
        if (rank == 0) fprintf(out, "step=%d loss=%.9g\n", s, lab11_eval_loss(p));
    }
    write_weights(out, p);
    fclose(out);
    return 0;
}

static void log_offer(const ps_server *s, const ps_offer_event *e, void *ctx) {
    FILE *f = ctx;
    if (e->applied)
        fprintf(f, "update=%llu worker=%d pulled=%llu staleness=%llu loss=%.9g\n", (unsigned long long)s->version,
                e->worker, (unsigned long long)e->pulled, (unsigned long long)e->staleness, lab11_eval_loss(s->weights));
    else
        fprintf(f, "withdrawn worker=%d pulled=%llu staleness=%llu\n", e->worker, (unsigned long long)e->pulled,
                (unsigned long long)e->staleness);
    fflush(f);
}

/* A worker's gradient t: B rows of its own; worker 1 sleeps slow_us first when it is the straggler. */
typedef struct {
    int rank, b;
    long slow_us;
} worker_ctx;

static void worker_gradient(void *ctx, const float *weights, uint64_t t, float *grad) {
    const worker_ctx *w = ctx;
    lab11_gradient(weights, lab11_async_rows(w->rank, (int)t, w->b), w->b, grad);
    if (w->rank == 1 && w->slow_us > 0)
        nanosleep(&(struct timespec){w->slow_us / 1000000, (w->slow_us % 1000000) * 1000}, NULL);
}

static int run_async(comm_t *c, int argc, char **argv) {
    if (argc != 8 && argc != 9) usage("async takes 6 or 7 arguments");
    const int pushes = (int)arg_long(argv[3], 0), b = (int)arg_long(argv[4], 1);
    const float lr = arg_float(argv[5]);
    const uint64_t bound = strcmp(argv[7], "-") == 0 ? PS_UNBOUNDED : (uint64_t)arg_long(argv[7], 0);
    const long slow_us = argc == 9 ? arg_long(argv[8], 0) : 0;
    const int rank = comm_rank(c);
    if (comm_size(c) < 2) usage("async needs at least 2 ranks: a server and a worker");
    float p[LAB11_P] = {0}, grad[LAB11_P];
    if (rank == 0) {
        static int schedule[MAX_SCHEDULE];
        size_t len = 0;
        if (strcmp(argv[6], "-") != 0)
            for (char *s = argv[6], *end; *s; s = *end ? end + 1 : end) {
                if (len == MAX_SCHEDULE) usage("SCHEDULE is too long");
                errno = 0;
                long w = strtol(s, &end, 10);
                if (errno || end == s || (*end && *end != ',')) usage("SCHEDULE is worker ranks separated by commas");
                schedule[len++] = (int)w;
            }
        FILE *out = open_report(argv[2], 0);
        ps_server *server = ps_server_create(p, LAB11_P, lr);
        ps_serve(c, server, (uint64_t)pushes, len ? schedule : NULL, len, log_offer, out);
        fprintf(out, "pushes=%llu version=%llu staleness_sum=%llu staleness_max=%llu withdrawn=%llu\nhist=",
                (unsigned long long)server->pushes, (unsigned long long)server->version,
                (unsigned long long)server->staleness_sum, (unsigned long long)server->staleness_max,
                (unsigned long long)server->withdrawn);
        for (int k = 0; k < PS_STALENESS_BINS; k++)
            fprintf(out, "%s%llu", k ? "," : "", (unsigned long long)server->staleness_hist[k]);
        fprintf(out, "\n");
        write_weights(out, server->weights);
        fclose(out);
        ps_server_free(server);
    } else {
        worker_ctx ctx = {rank, b, slow_us};
        ps_worker_stats st;
        const ps_worker_task task = {(uint64_t)pushes, bound, worker_gradient, &ctx};
        ps_worker_run(c, p, grad, LAB11_P, &task, &st);
        FILE *out = open_report(argv[2], rank);
        fprintf(out, "pulls=%llu pushes=%llu withdrawn=%llu\n", (unsigned long long)st.pulls,
                (unsigned long long)st.pushes, (unsigned long long)st.withdrawn);
        fclose(out);
    }
    return 0;
}

int main(int argc, char **argv) {
    comm_t *c = comm_init(&argc, &argv);
    if (argc < 3) usage("no mode");
    int rc = strcmp(argv[1], "sync") == 0 ? run_sync(c, argc, argv)
           : strcmp(argv[1], "async") == 0 ? run_async(c, argc, argv)
                                           : (usage("unknown mode"), 2);
    comm_finalize(c);
    return rc;
}
