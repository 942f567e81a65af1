/* ps.h: the two ways data-parallel SGD can combine its workers' gradients (lab 11): synchronous averaging
 * (every rank's gradient, summed and divided by the rank count, before one shared update) and an
 * asynchronous parameter server (rank 0 holds the weights; workers pull, compute, offer; each committed
 * gradient is applied on arrival, against weights that may have moved since the worker pulled them:
 * staleness), with an optional staleness bound (a worker withdraws a gradient more than K versions stale). */
#ifndef MIXPAR_DIST_PS_H
#define MIXPAR_DIST_PS_H

#include "comm/comm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- synchronous: gradient averaging */

/* grad (n fp32, in place) = the mean over the ranks of c of every rank's grad: a sum over ranks, then one
 * division by the rank count. With each rank's grad the mean over its own b rows, the result is the mean
 * gradient of the world * b rows, so N ranks with batch b take the step one rank takes with batch N*b.
 * Collective: every rank calls it with the same n. */
void ps_average_gradients(comm_t *c, float *grad, size_t n, comm_algo algo);

/* ---------------------------------------------------------------- asynchronous: the parameter server */

enum { PS_STALENESS_BINS = 16 }; /* histogram bins 0..14 exact; the last bin counts staleness >= 15 */

/* The server's state (rank 0). version counts the updates applied; a worker that pulled at version v and
 * pushes when the server is at version u computed its gradient on weights u - v updates old. */
typedef struct {
    float *weights;    /* (n) the current weights */
    size_t n;
    float lr;          /* plain SGD: weights -= lr * grad */
    uint64_t version;  /* updates applied so far */
    uint64_t pushes;   /* gradients received (= version: every push is applied) */
    uint64_t staleness_sum, staleness_max;
    uint64_t staleness_hist[PS_STALENESS_BINS];
    uint64_t withdrawn; /* offers the workers withdrew as too stale (counted by ps_serve) */
} ps_server;

/* A server holding a copy of init (n fp32), at version 0. */
ps_server *ps_server_create(const float *init, size_t n, float lr);
void ps_server_free(ps_server *s);

/* Applies one pushed gradient (n fp32) computed on the weights of version pulled_version (<= s->version):
 * the SGD step, the version bump and the staleness bookkeeping. Returns the push's staleness. */
uint64_t ps_server_apply(ps_server *s, const float *grad, uint64_t pulled_version);

/* What ps_serve reports after each offer it settles: which worker rank, the version it pulled, the offer's
 * staleness (for a commit: what ps_server_apply returned; for a withdrawal: version now - pulled), and
 * whether the gradient was committed (applied) or withdrawn. */
typedef struct {
    int worker;
    uint64_t pulled, staleness;
    bool applied;
} ps_offer_event;
typedef void (*ps_offer_fn)(const ps_server *s, const ps_offer_event *e, void *ctx);

/* Rank 0's loop: serves pulls and offers from ranks 1..size-1 until each has committed pushes_per_worker
 * gradients. Requests are served as they arrive (polling the workers in turn), or, with schedule != NULL,
 * in exactly the order given: schedule[k] is the worker whose next request (a pull or an offer: each worker
 * alternates them, pull first) is served k-th; a worker's pull and offer are one entry each, so a worker that
 * withdraws w offers is named 2 x (pushes_per_worker + w) times. The scripted order makes staleness
 * reproducible for tests. on_offer may be NULL.
 * The server checks the protocol and stops (exit 2) with a message when a worker breaks it: an offer without
 * a pull before it, an offer whose version is not the one its last pull returned, a withdrawal of an offer
 * that is not stale at all (no bound K >= 0 refuses staleness 0), a schedule that names a worker after its
 * last commit or ends before every worker has committed its gradients. */
void ps_serve(comm_t *c, ps_server *s, uint64_t pushes_per_worker, const int *schedule, size_t schedule_len,
              ps_offer_fn on_offer, void *ctx);

/* ---------------------------------------------------------------- the worker's side */

/* A worker (rank >= 1): copies the server's current weights into weights (n fp32); returns their version. */
uint64_t ps_pull(comm_t *c, float *weights, size_t n);
/* A worker: offers a gradient computed on the weights of version pulled_version (the version its latest
 * ps_pull returned); returns the server's version now. The server then waits for this worker's answer:
 * exactly one ps_commit or ps_withdraw, before any other request. */
uint64_t ps_offer(comm_t *c, uint64_t pulled_version);
/* The answer to an offer: send grad (n fp32); the server applies it (ps_server_apply). */
void ps_commit(comm_t *c, const float *grad, size_t n);
/* The answer to an offer: the gradient is too stale; the server drops the offer (the worker pulls again). */
void ps_withdraw(comm_t *c);

/* No staleness bound: every offer is committed (the plain asynchronous parameter server). */
#define PS_UNBOUNDED UINT64_MAX

/* grad (n fp32) = the worker's t-th gradient (t = 0 .. pushes-1: which rows of its shard), at weights (n). */
typedef void (*ps_gradient_fn)(void *ctx, const float *weights, uint64_t t, float *grad);

/* What a worker is asked to do: commit `pushes` gradients, none more than `bound` versions stale, each
 * computed by gradient(ctx, ...). */
typedef struct {
    uint64_t pushes;
    uint64_t bound;     /* K, or PS_UNBOUNDED */
    ps_gradient_fn gradient;
    void *ctx;
} ps_worker_task;

typedef struct {
    uint64_t pulls;     /* weights pulled */
    uint64_t pushes;    /* gradients committed */
    uint64_t withdrawn; /* offers withdrawn as more than `bound` versions stale */
} ps_worker_stats;

/* A worker's loop, until it has committed task->pushes gradients: pull the weights and their version, compute
 * gradient number t (t counts committed gradients) on them, offer it; commit it when it is at most task->bound
 * versions stale (server's version now - version pulled <= bound), else withdraw it and pull again
 * (stale-synchronous parallel's bound; PS_UNBOUNDED commits every offer; bound 0 commits only gradients of
 * the current weights, which makes the run plain sequential SGD). weights and grad are the worker's buffers
 * (n fp32 each). stats (not NULL) is zeroed, then counts what the loop did. */
void ps_worker_run(comm_t *c, float *weights, float *grad, size_t n, const ps_worker_task *task,
                   ps_worker_stats *stats);

#endif
