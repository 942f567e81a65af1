/* lab13_worker.c: the program lab 13's tests start on N ranks (build/labs/lab13_worker), and the experiment's
 * timing runs. Modes:
 *
 *   lab13_worker check DIR BUCKET_ELEMS OVERLAP SEEDS STEPS MICRO_B [model]
 *     (under mpirun) each rank builds the test model, seeded 100 (SEEDS=same) or 100+rank (SEEDS=differ),
 *     wraps it in DDP (buckets of BUCKET_ELEMS, OVERLAP 0|1 for the communication thread), and trains
 *     STEPS steps of plain SGD on its MICRO_B rows of a global batch of world*MICRO_B rows. Every step it
 *     also computes, with no communication, the gradient one model gets from the whole global batch, and
 *     compares. The loss is the quadratic one below, its backward written here and reporting each layer to
 *     DDP in model_backward's order (head first), so the tests need no other lab's code; with "model" it is
 *     the model's own cross-entropy (model_forward, model_backward: lab 02's regions). It writes DIR/rank<R>.txt:
 *       params=N world=W
 *       init=HASH rank0_init=HASH after_create=HASH     (own weights, rank 0's seed's weights, after ddp_create)
 *       step=S buckets=K spans=LO:HI,LO:HI,... grad=HASH maxdiff=X gscale=Y params=HASH
 *     maxdiff: max |DDP gradient - whole-batch gradient|; gscale: max |whole-batch gradient|.
 *
 *   lab13_worker overlap DIR BUCKET_ELEMS OVERLAP STEPS MICRO_B
 *     (under mpirun) the quadratic loss as in check, equal seeds, with DDP's buckets reduced by this program's
 *     own reduction (ddp_options.reduce_bucket: an fp32 allreduce, then / world) that records what happened,
 *     in order, under a lock: each reduction's start 's' and end 'e', backward's end 'B', ddp_finish's return
 *     'F'. With OVERLAP 1 it also makes the overlap and the wait observable without timing:
 *       - after backward hands over the first bucket it waits until that bucket's reduction has started
 *         (a bucket handed to a thread that never takes it fails here, after GATE_MS);
 *       - the first reduction does not go on before backward has ended (so the later buckets queue up behind
 *         it, and the order the thread takes them in shows);
 *       - the last reduction, before it returns, gives ddp_finish FINISH_GATE_MS to return: a finish that
 *         does not wait for it returns in that time, and the reduction sees it ('finish_early').
 *     A reduction on the main thread (DDP not overlapping) skips the waits and is counted (on_main).
 *     Rank R writes DIR/rank<R>.txt: one line per step:
 *       step=S launched=LO:HI,... reduced=LO:HI,... order=sBse..F on_main=N ended_at_finish=E finish_early=0|1 grad=HASH
 *
 *   lab13_worker ddp-bench STEPS MICRO_B BUCKET_ELEMS   (under mpirun: DDP on the bench model)
 *   lab13_worker dp-bench K STEPS MICRO_B               (one process: DataParallel with K replicas)
 *     print one line of mean per-step times (ms) and bytes moved per step, for the lab's table. */
#include "../lab13_model.h"

#include "base/clock.h"
#include "comm/comm.h"
#include "dist/dataparallel.h"
#include "dist/ddp.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SEED = 100 };
static const float LR = 0.05f;

static _Noreturn void usage(const char *why) {
    fprintf(stderr, "lab13_worker: %s\nusage: lab13_worker check DIR BUCKET_ELEMS OVERLAP same|differ STEPS MICRO_B [model]\n"
                    "       lab13_worker overlap DIR BUCKET_ELEMS OVERLAP STEPS MICRO_B\n"
                    "       lab13_worker ddp-bench STEPS MICRO_B BUCKET_ELEMS\n"
                    "       lab13_worker dp-bench K STEPS MICRO_B\n", why);
    exit(2);
}

static long arg_long(const char *s, long lo) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo) usage("a number argument is out of range");
    return v;
}

/* The quadratic loss: row j of the batch pulls every parameter towards its own target a(step, j, i):
 *     loss = mean over rows j of  0.5 * sum_i (p_i - a(step, j, i))^2,   dloss/dp_i = p_i - mean_j a(step, j, i)
 * so the gradient of a batch depends on the weights and on which rows it holds, like a real loss, and the
 * mean over N ranks of their b-row gradients is the gradient of the N*b-row batch. */
static float target(int step, int row, size_t i) {
    return (float)(mp_hash32((uint64_t)step * 7919u + (uint64_t)row, i) % 2001u) / 1000.0f - 1.0f; /* [-1, 1] */
}

/* Backward of the quadratic loss over rows [row0, row0 + rows), ADDED into m's gradients layer by layer from
 * the head (L) down to the embeddings (-1); with d, each layer is handed to DDP as model_backward would. */
static void quadratic_backward(model *m, ddp *d, int step, int row0, int rows) {
    const float *p = model_params(m);
    float *g = model_grads(m);
    for (int layer = model_get_config(m)->L; layer >= -1; layer--) {
        if (d) ddp_before_backward(d, layer);
        size_t off, n;
        model_layer_span(m, layer, &off, &n);
        for (size_t i = off; i < off + n; i++) {
            float mean = 0;
            for (int j = row0; j < row0 + rows; j++) mean += target(step, j, i);
            g[i] += p[i] - mean / (float)rows;
        }
        if (d) ddp_grads_ready(d, layer);
    }
}

static void sgd(model *m) {
    float *p = model_params(m), *g = model_grads(m);
    for (size_t i = 0, n = model_num_params(m); i < n; i++) p[i] -= LR * g[i];
}

static int check(comm_t *c, int argc, char **argv) {
    if (argc != 8 && !(argc == 9 && strcmp(argv[8], "model") == 0)) usage("check takes 6 arguments (and 'model')");
    const bool real_model = argc == 9;
    const char *dir = argv[2];
    size_t bucket_elems = (size_t)arg_long(argv[3], 0);
    bool overlap = arg_long(argv[4], 0) != 0;
    bool differ = strcmp(argv[5], "differ") == 0;
    if (!differ && strcmp(argv[5], "same") != 0) usage("SEEDS is same or differ");
    int steps = (int)arg_long(argv[6], 0), b = (int)arg_long(argv[7], 1);
    const int rank = comm_rank(c), world = comm_size(c), T = LAB13_T, rows = world * b;

    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.txt", dir, rank);
    FILE *out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "lab13_worker: cannot write %s: %s\n", path, strerror(errno));
        return 2;
    }
    model_config cfg = lab13_test_config();
    model *m = model_create(&cfg), *whole = model_create(&cfg);
    const size_t P = model_num_params(m);
    model_init(m, differ ? SEED + (uint64_t)rank : SEED);
    model_init(whole, SEED); /* rank 0's seed: the weights the broadcast must hand to everyone */
    fprintf(out, "params=%zu world=%d\n", P, world);
    fprintf(out, "init=%016llx rank0_init=%016llx ", (unsigned long long)lab13_hash(model_params(m), P),
            (unsigned long long)lab13_hash(model_params(whole), P));
    fflush(out);

    ddp_options opt = {.bucket_elems = bucket_elems, .algo = COMM_ALGO_NATIVE, .overlap = overlap};
    ddp *d = ddp_create(m, c, &opt, 0x13);
    fprintf(out, "after_create=%016llx\n", (unsigned long long)lab13_hash(model_params(m), P));
    fflush(out);

    int *inputs = malloc((size_t)rows * T * sizeof(int)), *targets = malloc((size_t)rows * T * sizeof(int));
    if (!inputs || !targets) usage("out of memory");
    for (int s = 0; s < steps; s++) {
        lab13_batch(s, rows, T, cfg.V, inputs, targets);
        /* The whole-batch reference, from this rank's own weights (no hooks on this model). */
        memcpy(model_params(whole), model_params(m), P * sizeof(float));
        model_zero_grad(whole);
        model_zero_grad(m);
        if (real_model) {
            model_forward(whole, inputs, targets, rows, T);
            model_backward(whole, 1.0f);
            /* DDP: this rank's share only; the hooks average the gradients over the ranks during backward. */
            model_forward(m, inputs + (size_t)rank * b * T, targets + (size_t)rank * b * T, b, T);
            model_backward(m, 1.0f);
        } else {
            quadratic_backward(whole, NULL, s, 0, rows);
            quadratic_backward(m, d, s, rank * b, b);
        }
        ddp_finish(d);
        ddp_stats st;
        ddp_get_stats(d, &st);
        const float *g = model_grads(m), *want = model_grads(whole);
        double maxdiff = 0, gscale = 0;
        for (size_t i = 0; i < P; i++) {
            maxdiff = fmax(maxdiff, fabs((double)g[i] - want[i]));
            gscale = fmax(gscale, fabs((double)want[i]));
        }
        fprintf(out, "step=%d buckets=%d spans=", s, st.buckets);
        for (int k = 0; k < st.buckets && k < 64; k++) fprintf(out, "%s%zu:%zu", k ? "," : "", st.bucket_lo[k], st.bucket_hi[k]);
        if (st.buckets == 0) fprintf(out, "none");
        fprintf(out, " grad=%016llx maxdiff=%.9g gscale=%.9g", (unsigned long long)lab13_hash(g, P), maxdiff, gscale);
        sgd(m);
        fprintf(out, " params=%016llx\n", (unsigned long long)lab13_hash(model_params(m), P));
        fflush(out);
    }
    free(inputs);
    free(targets);
    ddp_free(d);
    model_free(m);
    model_free(whole);
    fclose(out);
    return 0;
}

/* ------------------------------------------------------------------ overlap: what happened, in order */

enum { GATE_MS = 5000, FINISH_GATE_MS = 500, MAX_EVENTS = 256, MAX_SPANS = 64 };

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t main_thread;
    bool gates;                     /* overlap on: make the overlap and the wait observable */
    int started, ended, total;      /* reductions started and ended this step; buckets launched (set at backward's end) */
    bool backward_ended, finish_returned, finish_early;
    int on_main;                    /* reductions that ran on the main thread */
    size_t lo[MAX_SPANS], hi[MAX_SPANS]; /* the spans reduced, in the order their reductions started */
    char order[MAX_EVENTS];
    int events;
} overlap_log;

static void log_event(overlap_log *g, char e) {
    if (g->events < MAX_EVENTS - 1) g->order[g->events++] = e;
    g->order[g->events] = '\0';
}

/* The absolute time ms milliseconds from now, for pthread_cond_timedwait. */
static struct timespec deadline_in(long ms) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
    return t;
}

/* Waits on g->cv (g->mu held) until *flag or ms milliseconds pass; returns *flag. */
static bool wait_flag(overlap_log *g, const bool *flag, long ms) {
    const struct timespec until = deadline_in(ms);
    while (!*flag)
        if (pthread_cond_timedwait(&g->cv, &g->mu, &until) != 0) break;
    return *flag;
}

static _Noreturn void overlap_fail(const char *msg) {
    fprintf(stderr, "lab13_worker: %s\n", msg);
    fflush(stderr);
    _exit(3);
}

/* ddp_options.reduce_bucket: the average over the ranks of grads[lo, hi), with the log and the gates. */
static void logged_reduce(void *ctx, comm_t *c, float *grads, size_t lo, size_t hi, comm_algo algo) {
    overlap_log *g = ctx;
    pthread_mutex_lock(&g->mu);
    const int k = g->started++;
    const bool on_main = pthread_equal(pthread_self(), g->main_thread), gated = g->gates && !on_main;
    if (k < MAX_SPANS) g->lo[k] = lo, g->hi[k] = hi;
    g->on_main += on_main;
    log_event(g, 's');
    pthread_cond_broadcast(&g->cv);
    if (k == 0 && gated && !wait_flag(g, &g->backward_ended, GATE_MS))
        overlap_fail("the first bucket's reduction waited 5 s for backward to go on and end: backward was blocked "
                     "while a bucket was reduced (is the queue's lock held during the reduction? does launch wait "
                     "for the thread?)");
    pthread_mutex_unlock(&g->mu);

    comm_allreduce(c, grads + lo, grads + lo, hi - lo, COMM_FP32, COMM_SUM, algo);
    const float ranks = (float)comm_size(c);
    for (size_t i = lo; i < hi; i++) grads[i] /= ranks;

    pthread_mutex_lock(&g->mu);
    if (gated && g->backward_ended && g->ended + 1 == g->total && wait_flag(g, &g->finish_returned, FINISH_GATE_MS))
        g->finish_early = true; /* ddp_finish returned while this, the last bucket, was still being reduced */
    g->ended++;
    log_event(g, 'e');
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* quadratic_backward with DDP, the gates on the main thread's side, and the log's 'B'. */
static void logged_backward(model *m, ddp *d, overlap_log *g, int step, int row0, int rows) {
    const float *p = model_params(m);
    float *grad = model_grads(m);
    for (int layer = model_get_config(m)->L; layer >= -1; layer--) {
        ddp_before_backward(d, layer);
        size_t off, n;
        model_layer_span(m, layer, &off, &n);
        for (size_t i = off; i < off + n; i++) {
            float mean = 0;
            for (int j = row0; j < row0 + rows; j++) mean += target(step, j, i);
            grad[i] += p[i] - mean / (float)rows;
        }
        const int before = ddp_buckets_launched(d);
        ddp_grads_ready(d, layer);
        if (g->gates && layer > -1 && before == 0 && ddp_buckets_launched(d) > 0) {
            pthread_mutex_lock(&g->mu);
            bool started = g->started > 0;
            if (!started) {
                const struct timespec until = deadline_in(GATE_MS);
                while (g->started == 0)
                    if (pthread_cond_timedwait(&g->cv, &g->mu, &until) != 0) break;
                started = g->started > 0;
            }
            pthread_mutex_unlock(&g->mu);
            if (!started)
                overlap_fail("the first bucket was handed over but its reduction had not started 5 s later: does "
                             "launch wake the communication thread (signal the work condition), and does the "
                             "thread take every queued bucket?");
        }
    }
    pthread_mutex_lock(&g->mu);
    g->backward_ended = true;
    g->total = ddp_buckets_launched(d);
    log_event(g, 'B');
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void write_spans(FILE *out, const char *name, int count, const size_t *lo, const size_t *hi) {
    fprintf(out, " %s=", name);
    for (int k = 0; k < count && k < MAX_SPANS; k++) fprintf(out, "%s%zu:%zu", k ? "," : "", lo[k], hi[k]);
    if (count == 0) fprintf(out, "none");
}

static int overlap(comm_t *c, int argc, char **argv) {
    if (argc != 7) usage("overlap takes 5 arguments");
    const size_t bucket_elems = (size_t)arg_long(argv[3], 0);
    const bool overlap_on = arg_long(argv[4], 0) != 0;
    const int steps = (int)arg_long(argv[5], 0), b = (int)arg_long(argv[6], 1);
    const int rank = comm_rank(c);
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.txt", argv[2], rank);
    FILE *out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "lab13_worker: cannot write %s: %s\n", path, strerror(errno));
        return 2;
    }
    static overlap_log g;
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    g.main_thread = pthread_self();
    model_config cfg = lab13_test_config();
    model *m = model_create(&cfg);
    model_init(m, SEED);
    ddp_options opt = {.bucket_elems = bucket_elems, .algo = COMM_ALGO_NATIVE, .overlap = overlap_on,
                       .reduce_bucket = logged_reduce, .reduce_ctx = &g};
    ddp *d = ddp_create(m, c, &opt, 0x13);
    for (int s = 0; s < steps; s++) {
        pthread_mutex_lock(&g.mu);
        g.started = g.ended = g.total = g.on_main = g.events = 0;
        g.backward_ended = g.finish_returned = g.finish_early = false;
        g.order[0] = '\0';
        g.gates = overlap_on && s == 0; /* the gates cost FINISH_GATE_MS: the first step shows what they show */
        pthread_mutex_unlock(&g.mu);
        model_zero_grad(m);
        logged_backward(m, d, &g, s, rank * b, b);
        ddp_finish(d);
        pthread_mutex_lock(&g.mu);
        g.finish_returned = true;
        const int ended_at_finish = g.ended;
        log_event(&g, 'F');
        pthread_cond_broadcast(&g.cv);
        pthread_mutex_unlock(&g.mu);
        /* The reductions are over (or the run is failing): read the log. */
        pthread_mutex_lock(&g.mu);
        ddp_stats st;
        ddp_get_stats(d, &st);
        fprintf(out, "step=%d", s);
        write_spans(out, "launched", st.buckets, st.bucket_lo, st.bucket_hi);
        write_spans(out, "reduced", g.started, g.lo, g.hi);
        fprintf(out, " order=%s on_main=%d ended_at_finish=%d finish_early=%d grad=%016llx\n", g.order, g.on_main,
                ended_at_finish, g.finish_early ? 1 : 0,
                (unsigned long long)lab13_hash(model_grads(m), model_num_params(m)));
        fflush(out);
        pthread_mutex_unlock(&g.mu);
        sgd(m);
    }
    ddp_free(d);
    model_free(m);
    fclose(out);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
    return 0;
}

/* DDP on the bench model: mean forward, backward, wait-for-the-last-bucket and update times per step. */
static int ddp_bench(comm_t *c, int argc, char **argv) {
    if (argc != 5) usage("ddp-bench takes 3 arguments");
    int steps = (int)arg_long(argv[2], 1), b = (int)arg_long(argv[3], 1);
    size_t bucket_elems = (size_t)arg_long(argv[4], 0);
    const int rank = comm_rank(c), world = comm_size(c);
    model_config cfg = lab13_bench_config();
    const int T = cfg.maxT, rows = world * b;
    model *m = model_create(&cfg);
    model_init(m, SEED);
    ddp_options opt = {.bucket_elems = bucket_elems, .algo = COMM_ALGO_NATIVE, .overlap = true};
    ddp *d = ddp_create(m, c, &opt, 0x13);
    int *inputs = malloc((size_t)rows * T * sizeof(int)), *targets = malloc((size_t)rows * T * sizeof(int));
    if (!inputs || !targets) usage("out of memory");
    double fwd = 0, bwd = 0, wait = 0, upd = 0, total = 0, comm = 0;
    uint64_t bytes = 0;
    int buckets = 0;
    for (int s = -1; s < steps; s++) { /* step -1 warms up (activations allocated) and is not counted */
        lab13_batch(s + 1, rows, T, cfg.V, inputs, targets);
        comm_barrier(c);
        double t0 = mp_now();
        model_zero_grad(m);
        model_forward(m, inputs + (size_t)rank * b * T, targets + (size_t)rank * b * T, b, T);
        double t1 = mp_now();
        model_backward(m, 1.0f);
        double t2 = mp_now();
        ddp_finish(d);
        double t3 = mp_now();
        sgd(m);
        double t4 = mp_now();
        ddp_stats st;
        ddp_get_stats(d, &st);
        if (s < 0) continue;
        fwd += t1 - t0, bwd += t2 - t1, wait += t3 - t2, upd += t4 - t3, total += t4 - t0;
        comm += st.comm_end - st.first_comm_start;
        bytes += st.bytes_sent;
        buckets = st.buckets;
    }
    if (rank == 0)
        printf("ddp ranks=%d params=%zu batch=%dx%d buckets=%d step_ms=%.2f forward_ms=%.2f backward_ms=%.2f "
               "wait_ms=%.2f update_ms=%.2f comm_ms=%.2f bytes_per_step=%llu\n", world, model_num_params(m), rows, T,
               buckets, 1e3 * total / steps, 1e3 * fwd / steps, 1e3 * bwd / steps, 1e3 * wait / steps,
               1e3 * upd / steps, 1e3 * comm / steps, (unsigned long long)(bytes / (uint64_t)steps));
    free(inputs);
    free(targets);
    ddp_free(d);
    model_free(m);
    return 0;
}

/* DataParallel on the bench model in this one process. */
static int dp_bench(int argc, char **argv) {
    if (argc != 5) usage("dp-bench takes 3 arguments");
    int K = (int)arg_long(argv[2], 1), steps = (int)arg_long(argv[3], 1), b = (int)arg_long(argv[4], 1);
    model_config cfg = lab13_bench_config();
    const int T = cfg.maxT, rows = K * b;
    dataparallel *dp = dataparallel_create(&cfg, K, SEED);
    int *inputs = malloc((size_t)rows * T * sizeof(int)), *targets = malloc((size_t)rows * T * sizeof(int));
    if (!inputs || !targets) usage("out of memory");
    double upd = 0, total = 0;
    for (int s = -1; s < steps; s++) {
        lab13_batch(s + 1, rows, T, cfg.V, inputs, targets);
        if (s == 0) dataparallel_reset_stats(dp); /* the warm-up step is not counted */
        double t0 = mp_now();
        dataparallel_forward_backward(dp, inputs, targets, rows, T);
        double t1 = mp_now();
        sgd(dataparallel_master(dp));
        double t2 = mp_now();
        dataparallel_broadcast(dp);
        double t3 = mp_now();
        if (s >= 0) upd += t2 - t1, total += t3 - t0;
    }
    dataparallel_stats st;
    dataparallel_get_stats(dp, &st);
    printf("dataparallel replicas=%d params=%zu batch=%dx%d step_ms=%.2f scatter_ms=%.3f compute_ms=%.2f "
           "gather_ms=%.2f update_ms=%.2f broadcast_ms=%.2f scatter_bytes=%llu gather_bytes=%llu broadcast_bytes=%llu\n",
           K, model_num_params(dataparallel_master(dp)), rows, T, 1e3 * total / steps, 1e3 * st.scatter_s / steps,
           1e3 * st.compute_s / steps, 1e3 * st.gather_s / steps, 1e3 * upd / steps, 1e3 * st.broadcast_s / steps,
           (unsigned long long)(st.scatter_bytes / (uint64_t)steps), (unsigned long long)(st.gather_bytes / (uint64_t)steps),
           (unsigned long long)(st.broadcast_bytes / (uint64_t)steps));
    free(inputs);
    free(targets);
    dataparallel_free(dp);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "dp-bench") == 0) return dp_bench(argc, argv);
    comm_t *c = comm_init(&argc, &argv);
    if (argc < 2) usage("no mode");
    int rc = strcmp(argv[1], "check") == 0 ? check(c, argc, argv)
           : strcmp(argv[1], "overlap") == 0 ? overlap(c, argc, argv)
           : strcmp(argv[1], "ddp-bench") == 0 ? ddp_bench(c, argc, argv)
                                               : (usage("unknown mode"), 2);
    comm_finalize(c);
    return rc;
}
