/* ps.h: the two ways data-parallel SGD can combine its workers' gradients (lab 11): synchronous averaging
 * (every rank's gradient, summed and divided by the rank count, before one shared update) and an
 * asynchronous parameter server (rank 0 holds the weights; workers pull, compute, push; each push is applied
 * on arrival, against weights that may have moved since the worker pulled them: staleness). */
#ifndef MIXPAR_DIST_PS_H
#define MIXPAR_DIST_PS_H

#include "comm/comm.h"

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
} ps_server;

/* A server holding a copy of init (n fp32), at version 0. */
ps_server *ps_server_create(const float *init, size_t n, float lr);
void ps_server_free(ps_server *s);

/* Applies one pushed gradient (n fp32) computed on the weights of version pulled_version (<= s->version):
 * the SGD step, the version bump and the staleness bookkeeping. Returns the push's staleness. */
uint64_t ps_server_apply(ps_server *s, const float *grad, uint64_t pulled_version);

/* Called by ps_serve after each applied push: which worker rank, and its staleness. */
typedef void (*ps_apply_fn)(const ps_server *s, int worker, uint64_t staleness, void *ctx);

/* Rank 0's loop: serves pulls and pushes from ranks 1..size-1 until each has pushed pushes_per_worker
 * gradients. Requests are served as they arrive (polling the workers in turn), or, with schedule != NULL,
 * in exactly the order given: schedule[k] is the worker whose next request (a pull or a push, each worker
 * alternates them, pull first) is served k-th; it must hold 2 * pushes_per_worker entries for each worker.
 * The scripted order makes staleness reproducible for tests. on_apply may be NULL. */
void ps_serve(comm_t *c, ps_server *s, uint64_t pushes_per_worker, const int *schedule, size_t schedule_len,
              ps_apply_fn on_apply, void *ctx);

/* A worker (rank >= 1): copies the server's current weights into weights (n fp32); returns their version. */
uint64_t ps_pull(comm_t *c, float *weights, size_t n);
/* A worker: sends grad (n fp32), computed on the weights of version pulled_version, to the server. */
void ps_push(comm_t *c, const float *grad, size_t n, uint64_t pulled_version);

#endif
