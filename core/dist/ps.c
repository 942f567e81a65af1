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

/* A worker's request is two int64s {kind, version} on PS_TAG_REQUEST; a pull is answered by the version
 * (one int64) and the weights (n fp32); a push is followed by the gradient (n fp32). Each worker's requests
 * alternate pull, push, pull, push, ... so the server knows which to expect. */
enum { PS_TAG_REQUEST = 1100, PS_TAG_VERSION, PS_TAG_WEIGHTS, PS_TAG_GRAD };
enum { PS_PULL = 1, PS_PUSH = 2 };

uint64_t ps_pull(comm_t *c, float *weights, size_t n) {
    int64_t request[2] = {PS_PULL, 0}, version = 0;
    comm_send(c, request, 2, COMM_INT64, 0, PS_TAG_REQUEST);
    comm_recv(c, &version, 1, COMM_INT64, 0, PS_TAG_VERSION);
    comm_recv(c, weights, n, COMM_FP32, 0, PS_TAG_WEIGHTS);
    return (uint64_t)version;
}

void ps_push(comm_t *c, const float *grad, size_t n, uint64_t pulled_version) {
    int64_t request[2] = {PS_PUSH, (int64_t)pulled_version};
    comm_send(c, request, 2, COMM_INT64, 0, PS_TAG_REQUEST);
    comm_send(c, grad, n, COMM_FP32, 0, PS_TAG_GRAD);
}

/* Serves one request from `worker` whose header has arrived; served counts that worker's requests so far. */
static void serve_request(comm_t *c, ps_server *s, int worker, const int64_t request[2], uint64_t served,
                          float *grad, ps_apply_fn on_apply, void *ctx) {
    const int64_t expected = served % 2 == 0 ? PS_PULL : PS_PUSH;
    if (request[0] != expected)
        MP_FAIL(expected == PS_PULL ? "a pull" : "a push", "worker %d's request %llu is of kind %lld (a worker "
                "alternates pull, push, pull, ...)", worker, (unsigned long long)served, (long long)request[0]);
    if (request[0] == PS_PULL) {
        int64_t version = (int64_t)s->version;
        comm_send(c, &version, 1, COMM_INT64, worker, PS_TAG_VERSION);
        comm_send(c, s->weights, s->n, COMM_FP32, worker, PS_TAG_WEIGHTS);
        return;
    }
    comm_recv(c, grad, s->n, COMM_FP32, worker, PS_TAG_GRAD);
    if (request[1] < 0 || (uint64_t)request[1] > s->version)
        MP_FAIL("a version the server has handed out", "worker %d pushed a gradient of version %lld, the server is "
                "at %llu", worker, (long long)request[1], (unsigned long long)s->version);
    uint64_t staleness = ps_server_apply(s, grad, (uint64_t)request[1]);
    if (on_apply) on_apply(s, worker, staleness, ctx);
}

void ps_serve(comm_t *c, ps_server *s, uint64_t pushes_per_worker, const int *schedule, size_t schedule_len,
              ps_apply_fn on_apply, void *ctx) {
    const int size = comm_size(c), workers = size - 1;
    MP_ASSERT(comm_rank(c) == 0, "ps_serve runs on rank 0");
    if (workers <= 0 || pushes_per_worker == 0) return;
    const uint64_t per_worker = 2 * pushes_per_worker; /* requests: a pull and a push per gradient */
    uint64_t *served = calloc((size_t)size, sizeof *served);
    int64_t(*request)[2] = calloc((size_t)size, sizeof *request);
    comm_request **pending = calloc((size_t)size, sizeof *pending);
    float *grad = mem_alloc(s->n * sizeof(float) + 1, MEM_GRAD, "ps pushed gradient");
    MP_ASSERT(served && request && pending, "out of memory");

    if (schedule) {
        uint64_t *count = calloc((size_t)size, sizeof *count);
        MP_ASSERT(count, "out of memory");
        for (size_t k = 0; k < schedule_len; k++) {
            if (schedule[k] < 1 || schedule[k] >= size)
                MP_FAIL("a worker rank (1 .. ranks - 1)", "schedule entry %zu is %d with %d ranks", k, schedule[k], size);
            count[schedule[k]]++;
        }
        for (int w = 1; w < size; w++)
            if (count[w] != per_worker)
                MP_FAIL_HINT("each worker named 2 x pushes_per_worker times", "each worker's pull and its push are "
                             "one entry each", "worker %d is named %llu times, expected %llu", w,
                             (unsigned long long)count[w], (unsigned long long)per_worker);
        free(count);
        for (size_t k = 0; k < schedule_len; k++) {
            const int w = schedule[k];
            comm_recv(c, request[w], 2, COMM_INT64, w, PS_TAG_REQUEST);
            serve_request(c, s, w, request[w], served[w]++, grad, on_apply, ctx);
        }
    } else {
        /* One receive posted per worker; served in arrival order, polling from the worker after the last
         * one served so no worker is starved. */
        for (int w = 1; w < size; w++) pending[w] = comm_irecv(c, request[w], 2, COMM_INT64, w, PS_TAG_REQUEST);
        uint64_t left = (uint64_t)workers * per_worker;
        int next = 1;
        while (left > 0) {
            bool any = false;
            for (int k = 0; k < workers && !any; k++) {
                const int w = 1 + (next - 1 + k) % workers;
                if (served[w] == per_worker || !comm_test(&pending[w])) continue;
                serve_request(c, s, w, request[w], served[w]++, grad, on_apply, ctx);
                if (served[w] < per_worker) pending[w] = comm_irecv(c, request[w], 2, COMM_INT64, w, PS_TAG_REQUEST);
                next = w % workers + 1;
                left--;
                any = true;
            }
            if (!any) sched_yield(); /* ranks may outnumber cores: let the workers run */
        }
    }
    mem_free(grad);
    free(pending);
    free(request);
    free(served);
}
