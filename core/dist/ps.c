/* ps.c: synchronous gradient averaging and the asynchronous parameter server (lab 11's regions). */
#include "dist/ps.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/mem.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- synchronous */

void ps_average_gradients(comm_t *c, float *grad, size_t n, comm_algo algo) {
    MP_ASSERT(c != NULL && (grad != NULL || n == 0), "ps_average_gradients needs a communicator and a buffer");
    MP_ASSERT(comm_algo_supported(COMM_OP_ALLREDUCE, algo), "allreduce has no %s algorithm", comm_algo_name(algo));
    /* LAB 11 BEGIN gradient averaging: sum over the ranks, then divide by the rank count */
    comm_allreduce(c, grad, grad, n, COMM_FP32, COMM_SUM, algo);
    const float ranks = (float)comm_size(c);
    for (size_t i = 0; i < n; i++) grad[i] /= ranks;
    /* LAB 11 END */
}

/* ---------------------------------------------------------------- the server's state */

ps_server *ps_server_create(const float *init, size_t n, float lr) {
    ps_server *s = mem_alloc(sizeof *s, MEM_OTHER, "ps server");
    memset(s, 0, sizeof *s);
    s->weights = mem_alloc(n * sizeof(float) + 1, MEM_PARAM, "ps weights");
    if (n) memcpy(s->weights, init, n * sizeof(float));
    s->n = n;
    s->lr = lr;
    return s;
}

void ps_server_free(ps_server *s) {
    if (!s) return;
    mem_free(s->weights);
    mem_free(s);
}

uint64_t ps_server_apply(ps_server *s, const float *grad, uint64_t pulled_version) {
    MP_ASSERT(pulled_version <= s->version, "a push from version %llu, but the server is only at %llu",
              (unsigned long long)pulled_version, (unsigned long long)s->version);
    MP_ASSERT(grad != NULL || s->n == 0, "a push without a gradient");
    uint64_t staleness = 0;
    /* LAB 11 BEGIN apply a push: staleness = version now - version pulled; the SGD step; version and counters */
    staleness = s->version - pulled_version;
    for (size_t i = 0; i < s->n; i++) s->weights[i] -= s->lr * grad[i];
    s->version++;
    s->pushes++;
    s->staleness_sum += staleness;
    if (staleness > s->staleness_max) s->staleness_max = staleness;
    s->staleness_hist[staleness < PS_STALENESS_BINS - 1 ? staleness : PS_STALENESS_BINS - 1]++;
    /* LAB 11 END */
    return staleness;
}

/* ---------------------------------------------------------------- the protocol */

/* A worker's request is two int64s {kind, version} on PS_TAG_REQUEST. A pull {PS_PULL, 0} is answered by the
 * version (one int64) and the weights (n fp32). An offer {PS_OFFER, pulled version} is answered by the server's
 * version now (one int64); the worker answers that with its decision (one int64 on PS_TAG_DECISION), and after
 * PS_COMMIT the gradient (n fp32). The server waits for the decision before it serves anyone else, so the
 * version the worker judged is still the version the gradient is applied at. Each worker's requests
 * alternate pull, offer, pull, offer, ... so the server knows which to expect. */
enum { PS_TAG_REQUEST = 1100, PS_TAG_VERSION, PS_TAG_WEIGHTS, PS_TAG_GRAD, PS_TAG_DECISION };
enum { PS_PULL = 1, PS_OFFER = 2 };
enum { PS_WITHDRAW = 0, PS_COMMIT = 1 };

uint64_t ps_pull(comm_t *c, float *weights, size_t n) {
    int64_t request[2] = {PS_PULL, 0}, version = 0;
    comm_send(c, request, 2, COMM_INT64, 0, PS_TAG_REQUEST);
    comm_recv(c, &version, 1, COMM_INT64, 0, PS_TAG_VERSION);
    comm_recv(c, weights, n, COMM_FP32, 0, PS_TAG_WEIGHTS);
    return (uint64_t)version;
}

uint64_t ps_offer(comm_t *c, uint64_t pulled_version) {
    int64_t request[2] = {PS_OFFER, (int64_t)pulled_version}, now = 0;
    comm_send(c, request, 2, COMM_INT64, 0, PS_TAG_REQUEST);
    comm_recv(c, &now, 1, COMM_INT64, 0, PS_TAG_VERSION);
    return (uint64_t)now;
}

void ps_commit(comm_t *c, const float *grad, size_t n) {
    int64_t decision = PS_COMMIT;
    comm_send(c, &decision, 1, COMM_INT64, 0, PS_TAG_DECISION);
    comm_send(c, grad, n, COMM_FP32, 0, PS_TAG_GRAD);
}

void ps_withdraw(comm_t *c) {
    int64_t decision = PS_WITHDRAW;
    comm_send(c, &decision, 1, COMM_INT64, 0, PS_TAG_DECISION);
}

/* What the server knows of each worker. */
typedef struct {
    uint64_t served;      /* requests served so far: even = a pull comes next, odd = an offer */
    uint64_t pulled;      /* the version its last pull returned */
    uint64_t committed;   /* gradients applied */
    int64_t request[2];   /* the request header being received */
    comm_request *pending;
} ps_worker_state;

/* Serves one request from `worker` whose header has arrived. */
static void serve_request(comm_t *c, ps_server *s, int worker, ps_worker_state *w, float *grad, ps_offer_fn on_offer,
                          void *ctx) {
    const int64_t expected = w->served % 2 == 0 ? PS_PULL : PS_OFFER, kind = w->request[0];
    if (kind != expected)
        MP_FAIL_HINT(expected == PS_PULL ? "a pull" : "an offer", expected == PS_PULL
                     ? "a worker pulls before every offer, also after a withdrawn one: does its loop pull only once?"
                     : "a worker offers the gradient of every pull before it pulls again",
                     "worker %d's request %llu is of kind %lld (%s)", worker, (unsigned long long)w->served,
                     (long long)kind, kind == PS_PULL ? "a pull" : kind == PS_OFFER ? "an offer" : "unknown");
    w->served++;
    if (kind == PS_PULL) {
        int64_t version = (int64_t)s->version;
        w->pulled = s->version;
        comm_send(c, &version, 1, COMM_INT64, worker, PS_TAG_VERSION);
        comm_send(c, s->weights, s->n, COMM_FP32, worker, PS_TAG_WEIGHTS);
        return;
    }
    if (w->request[1] < 0 || (uint64_t)w->request[1] != w->pulled)
        MP_FAIL_HINT("the version of the worker's latest pull", "offer the version that the latest ps_pull returned "
                     "(a stale copy of the first pull's version makes every gradient look older than it is)",
                     "worker %d offers a gradient of version %lld, but its last pull returned version %llu", worker,
                     (long long)w->request[1], (unsigned long long)w->pulled);
    int64_t now = (int64_t)s->version, decision = -1;
    comm_send(c, &now, 1, COMM_INT64, worker, PS_TAG_VERSION);
    comm_recv(c, &decision, 1, COMM_INT64, worker, PS_TAG_DECISION);
    ps_offer_event e = {worker, w->pulled, s->version - w->pulled, decision == PS_COMMIT};
    if (decision == PS_COMMIT) {
        comm_recv(c, grad, s->n, COMM_FP32, worker, PS_TAG_GRAD);
        e.staleness = ps_server_apply(s, grad, w->pulled);
        w->committed++;
    } else if (decision == PS_WITHDRAW) {
        if (e.staleness == 0)
            MP_FAIL_HINT("a commit: an offer of the current weights is never too stale", "commit when version now - "
                         "version pulled <= the bound (<=, not <: a bound K allows staleness K)",
                         "worker %d withdrew an offer of version %llu with the server at %llu (staleness 0)", worker,
                         (unsigned long long)w->pulled, (unsigned long long)s->version);
        s->withdrawn++;
    } else {
        MP_FAIL("a decision (commit or withdraw)", "worker %d answered its offer with %lld", worker, (long long)decision);
    }
    if (on_offer) on_offer(s, &e, ctx);
}

void ps_serve(comm_t *c, ps_server *s, uint64_t pushes_per_worker, const int *schedule, size_t schedule_len,
              ps_offer_fn on_offer, void *ctx) {
    const int size = comm_size(c), workers = size - 1;
    MP_ASSERT(comm_rank(c) == 0, "ps_serve runs on rank 0");
    if (workers <= 0 || pushes_per_worker == 0) return;
    ps_worker_state *state = calloc((size_t)size, sizeof *state);
    float *grad = mem_alloc(s->n * sizeof(float) + 1, MEM_GRAD, "ps pushed gradient");
    MP_ASSERT(state, "out of memory");

    if (schedule) {
        for (size_t k = 0; k < schedule_len; k++)
            if (schedule[k] < 1 || schedule[k] >= size)
                MP_FAIL("a worker rank (1 .. ranks - 1)", "schedule entry %zu is %d with %d ranks", k, schedule[k], size);
        for (size_t k = 0; k < schedule_len; k++) {
            const int w = schedule[k];
            if (state[w].committed == pushes_per_worker)
                MP_FAIL_HINT("a worker with gradients still to commit", "a worker commits an offer within the bound "
                             "and withdraws (then pulls again) only one that is more than the bound stale",
                             "schedule entry %zu names worker %d, which has already committed all its %llu gradients",
                             k, w, (unsigned long long)pushes_per_worker);
            comm_recv(c, state[w].request, 2, COMM_INT64, w, PS_TAG_REQUEST);
            serve_request(c, s, w, &state[w], grad, on_offer, ctx);
        }
        for (int w = 1; w < size; w++)
            if (state[w].committed != pushes_per_worker)
                MP_FAIL_HINT("every worker's gradients committed when the schedule ends", "the schedule names a worker "
                             "twice per gradient (pull, offer) and twice more per withdrawal; a worker withdraws only an "
                             "offer more than the bound stale (staleness > K)",
                             "worker %d committed %llu of its %llu gradients", w,
                             (unsigned long long)state[w].committed, (unsigned long long)pushes_per_worker);
    } else {
        /* One receive posted per worker; served in arrival order, polling from the worker after the last
         * one served so no worker is starved. */
        for (int w = 1; w < size; w++)
            state[w].pending = comm_irecv(c, state[w].request, 2, COMM_INT64, w, PS_TAG_REQUEST);
        int busy = workers, next = 1;
        while (busy > 0) {
            bool any = false;
            for (int k = 0; k < workers && !any; k++) {
                const int w = 1 + (next - 1 + k) % workers;
                if (!state[w].pending || !comm_test(&state[w].pending)) continue;
                serve_request(c, s, w, &state[w], grad, on_offer, ctx);
                if (state[w].committed < pushes_per_worker)
                    state[w].pending = comm_irecv(c, state[w].request, 2, COMM_INT64, w, PS_TAG_REQUEST);
                else
                    busy--;
                next = w % workers + 1;
                any = true;
            }
            if (!any) sched_yield(); /* ranks may outnumber cores: let the workers run */
        }
    }
    mem_free(grad);
    free(state);
}

/* ---------------------------------------------------------------- the worker's loop */

void ps_worker_run(comm_t *c, float *weights, float *grad, size_t n, const ps_worker_task *task,
                   ps_worker_stats *stats) {
    MP_ASSERT(c != NULL && comm_rank(c) > 0, "ps_worker_run runs on a worker rank (1 .. ranks - 1)");
    MP_ASSERT(task != NULL && task->gradient != NULL && stats != NULL && ((weights != NULL && grad != NULL) || n == 0),
              "ps_worker_run needs a task with a gradient function, stats and the two buffers");
    memset(stats, 0, sizeof *stats);
    /* LAB 11 BEGIN the worker loop: pull, compute, offer; commit within the staleness bound, else withdraw and pull again */
    while (stats->pushes < task->pushes) {
        const uint64_t pulled = ps_pull(c, weights, n);
        stats->pulls++;
        task->gradient(task->ctx, weights, stats->pushes, grad);
        const uint64_t now = ps_offer(c, pulled);
        if (now - pulled > task->bound) {
            ps_withdraw(c);
            stats->withdrawn++;
            continue;
        }
        ps_commit(c, grad, n);
        stats->pushes++;
    }
    /* LAB 11 END */
}
