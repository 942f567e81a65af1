/* prefetch.h: a prefetching batch loader: worker threads prepare (inputs, targets) batches ahead of the step. */
#ifndef MIXPAR_DATA_PREFETCH_H
#define MIXPAR_DATA_PREFETCH_H

#include "data/data_err.h"
#include "data/sampler.h"
#include "data/tokens.h"

#include <stdbool.h>
#include <stdint.h>

/* The data are the windows of loader.h: window k = tokens [begin + k*T, begin + k*T + T + 1), k < W =
 * (end - begin - 1) / T. A dist_sampler over the W windows gives this rank its num_samples windows of each
 * epoch; consecutive groups of B of them are the epoch's batches (a last partial group is dropped), so
 *     batches_per_epoch = num_samples / B,   batch s of the run = batch s % batches_per_epoch of epoch
 *     s / batches_per_epoch.
 *
 * With workers = 0 the batch is prepared in prefetch_next, on the caller's thread (as loader.h does).
 * With 1 or 2 workers, threads prepare the next batches into a bounded queue of `depth` slots while the
 * caller computes; prefetch_next hands over batches strictly in sequence order (a slot is tagged with its
 * sequence number, so two workers finishing out of order change nothing). The batches, and their order,
 * are the same whatever the worker count: the tests check it.
 *
 * Preparation is reading the tokens plus an optional hook (tokenising, augmenting, ...): the hook runs on
 * the worker, outside any lock, and must only touch the batch it is given and its own context. */
typedef struct prefetch_batch {
    uint64_t seq;          /* the batch's number in the run: 0, 1, 2, ... */
    uint64_t epoch, batch; /* seq = epoch * batches_per_epoch + batch */
    uint64_t *windows;     /* (B) the windows, as the sampler gave them */
    int32_t *inputs;       /* (B, T) token ids */
    int32_t *targets;      /* (B, T) the next token of each input */
} prefetch_batch;

/* Extra preparation of one batch, run by whichever thread prepares it (B rows of T tokens). */
typedef void (*prefetch_prepare_fn)(void *ctx, prefetch_batch *batch, int B, int T);

typedef struct {
    int B, T;                  /* batch size (per rank), sequence length */
    int world, rank;           /* data parallelism: the sampler's share */
    bool shuffle, drop_last;   /* the sampler's rules (sampler.h) */
    uint64_t seed;
    int workers;               /* 0, 1 or 2 threads */
    int depth;                 /* queue slots (batches prepared ahead), 1..64; 0 means 4 */
    uint64_t first_seq;        /* the first batch handed out: 0, or where a resumed run left off */
    prefetch_prepare_fn prepare; /* may be NULL */
    void *prepare_ctx;
} prefetch_config;

typedef struct prefetch_loader prefetch_loader;

/* Opens a loader on tokens [begin, end) of file and starts its workers. Fails (bad B, T, workers or depth,
 * a range too short for one batch on this rank) with *err filled, or exits 2 when err is NULL.
 * The file must stay open until prefetch_free. */
prefetch_loader *prefetch_open(const tokfile *file, uint64_t begin, uint64_t end, const prefetch_config *cfg,
                               data_err *err);
/* The next batch in sequence, waiting for a worker if it is not ready. It stays valid (and its slot
 * taken) until the next call or prefetch_free. */
const prefetch_batch *prefetch_next(prefetch_loader *pl);
/* The sequence number of the batch the next prefetch_next returns (first_seq + batches taken): with
 * batches_per_epoch, all a checkpoint needs to resume here. Call it from the thread that calls prefetch_next. */
uint64_t prefetch_next_seq(const prefetch_loader *pl);
/* Stops the workers (even mid-epoch, with batches queued or in preparation), joins them, frees everything. */
void prefetch_free(prefetch_loader *pl); /* NULL is fine */

uint64_t prefetch_batches_per_epoch(const prefetch_loader *pl);
uint64_t prefetch_n_windows(const prefetch_loader *pl);
/* Seconds prefetch_next spent waiting for a batch (0 workers: preparing it): the time the step starved. */
double prefetch_wait_seconds(const prefetch_loader *pl);

#endif
