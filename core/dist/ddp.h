/* ddp.h: distributed data parallel: replicas in step, gradients averaged in buckets that overlap backward. */
#ifndef MIXPAR_DIST_DDP_H
#define MIXPAR_DIST_DDP_H

#include "base/events.h"
#include "comm/comm.h"
#include "dist/hooks.h"
#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>

/* Every rank holds the whole model and trains on its own share of each global batch. After backward the
 * gradients are averaged over the ranks, so every replica applies the same update and the replicas stay
 * bit-identical.
 *
 * Buckets. The model calls grads_ready(layer) as each layer's gradients become final, from the head (L)
 * down to the embeddings (-1). The parameter buffer is layer-major, so the layers finished so far are
 * always one contiguous span at the end of the gradient buffer: a bucket is a span [lo, hi) grown
 * downwards until it holds bucket_elems elements, then its allreduce starts, in place, while backward
 * goes on with the layers below (PyTorch DDP's bucket_cap_mb, DeepSpeed's reduce_bucket_size). The last
 * bucket is flushed when the embeddings are done.
 *
 * Overlap. With overlap on, a communication thread runs the allreduces while the main thread computes
 * (this needs MPI_THREAD_SERIALIZED, which comm_init asks for; without it DDP falls back to reducing each
 * bucket on the main thread). ddp_finish waits for the last one before the optimizer reads gradients.
 *
 * Hooks. Each bucket is averaged through a communication hook (dist/hooks.h, options.hook; the config's
 * "communication" section): the plain fp32 allreduce, fp16/bf16 compression, top-k or PowerSGD with error
 * feedback. ddp_stats.bytes_sent says what the last synchronised backward sent (the step event's comm_bytes).
 * The lossy hooks' residuals and PowerSGD's Q live in the hook only: checkpoints do not save them, so a
 * resumed run restarts error feedback (and Q's warm start) from zero.
 *
 *     ddp *d = ddp_create(m, world, &opts);   // broadcasts rank 0's weights, checks the configs match
 *     for each step:
 *         for each micro-batch k:
 *             ddp_set_sync(d, k == accum - 1);  // no_sync: reduce only on the last micro-batch
 *             model_forward(...); model_backward(...);
 *         ddp_finish(d);                        // gradients are now the average over ranks
 *         optimizer step
 */
typedef struct {
    size_t bucket_elems;   /* elements per bucket; 0 = one bucket for the whole model */
    comm_algo algo;        /* allreduce algorithm (COMM_ALGO_DEFAULT: the communicator's) */
    bool overlap;          /* reduce on a communication thread while backward runs */
    const char *events_dir;/* when set, comm events of this rank go to <dir>/events.rank<R>.jsonl (appended) */
    ddp_hook_options hook; /* how each bucket is averaged (dist/hooks.h); zeroed: the plain fp32 allreduce */
    /* When set, called instead of the hook to reduce the bucket grads[lo, hi): ZeRO (dist/zero.h)
     * reduce-scatters each bucket so that every rank keeps only its shard's averaged gradients. */
    void (*reduce_bucket)(void *ctx, comm_t *c, float *grads, size_t lo, size_t hi, comm_algo algo);
    void *reduce_ctx;
    /* Horovod's tensor fusion (dist/fusion.h) instead of buckets: tensors packed into fusion buffers of at most
     * fusion_elems elements, one allreduce per buffer through the hook (allreduce, fp16 or bf16 only). */
    bool fusion;
    size_t fusion_elems;
} ddp_options;

typedef struct ddp ddp;

/* Installs the model hooks, broadcasts rank 0's parameters, and stops with a message naming the ranks if
 * the replicas' configs or parameter counts differ (a hash compared across ranks), exit 2. */
ddp *ddp_create(model *m, comm_t *c, const ddp_options *opt, uint64_t config_hash);
void ddp_free(ddp *d);
/* Collective: stops with exit 2 naming the ranks whose hash differs from rank 0's (what ddp_create checks;
 * dist/fsdp.h uses it too). */
void ddp_check_replicas_agree(comm_t *c, uint64_t hash);
/* Whether the coming backward reduces (true) or only accumulates locally (false: gradient accumulation's
 * no_sync micro-steps). Default true. */
void ddp_set_sync(ddp *d, bool sync);
/* Waits until every bucket of the last backward has been reduced (ddp_wait_pending(d, 0)). */
void ddp_finish(ddp *d);
/* Waits until at most at_most launched buckets are still queued or being reduced (ZeRO-2 waits for the
 * previous bucket before it gives memory to the next: dist/zero.h). */
void ddp_wait_pending(ddp *d, int at_most);
/* Buckets launched so far in the current backward (main thread only: the count launch keeps). */
int ddp_buckets_launched(const ddp *d);
/* The two model hooks DDP installs, for a backward pass that is not model_backward (a hand-written loss, as
 * lab 13's tests use): call ddp_before_backward(d, layer) before computing a layer's gradients and
 * ddp_grads_ready(d, layer) once they are final, for layer = L, L-1, ..., -1, the order model_backward uses. */
void ddp_before_backward(ddp *d, int layer);
void ddp_grads_ready(ddp *d, int layer);

typedef struct {
    int buckets;              /* buckets (or fusion buffers) in the last synchronised backward */
    size_t bucket_lo[64];     /* their spans, in launch order (the first is the head's; the first 64) */
    size_t bucket_hi[64];
    double backward_end;      /* mp_elapsed() when backward finished (grads_ready(-1)) */
    double first_comm_start;  /* mp_elapsed() when the first bucket's allreduce started */
    double comm_end;          /* when the last allreduce finished */
    bool overlapping;         /* the communication thread is in use */
    uint64_t bytes_sent;      /* bytes this rank sent reducing the last synchronised backward's buckets
                               * (comm_stats' count, all operations the hook used) */
} ddp_stats;
void ddp_get_stats(const ddp *d, ddp_stats *out);

#endif
