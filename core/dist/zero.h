/* zero.h: ZeRO stages 1 and 2: the optimizer state (and, after reduction, the gradients) sharded over ranks. */
#ifndef MIXPAR_DIST_ZERO_H
#define MIXPAR_DIST_ZERO_H

#include "comm/comm.h"
#include "dist/ddp.h"
#include "model/model.h"
#include "optim/clip.h"
#include "optim/optimizer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ZeRO (Rajbhandari et al. 2020) on top of DDP's buckets (dist/ddp.h), with N ranks:
 *
 *   stage 1  optimizer state sharded. After backward the whole gradient buffer is one bucket, reduce-
 *            scattered (averaged) once, so rank r holds the average of its shard only; it steps the
 *            optimizer on that shard with state for about Psi/N parameters; the updated shards are
 *            all-gathered so every replica is whole again. Bytes sent per rank and step: reduce-scatter
 *            (N-1)/N x 4 Psi + all-gather (N-1)/N x 4 Psi, the paper's 2 Psi (in elements).
 *   stage 2  also gradients: each bucket is reduce-scattered as soon as backward fills it (on DDP's
 *            communication thread, overlapping the rest of backward); after its reduction a rank keeps
 *            (reads) only its shard of that bucket. Same volume as stage 1.
 *
 * Stage 2's gradient memory: on a model made by model_create_sharded_grads the gradient buffer is reserved
 * address space, and zero_shard_gradients gives it memory a bucket at a time (below): a rank holds its
 * shard plus about two buckets in flight, not the whole Psi buffer. On a plain model (or stage 1) the
 * buffer is whole and the parts outside a rank's shard hold stale partial sums that nobody reads.
 *
 * The shards. Each bucket [lo, hi) of b elements is split into N blocks of k = floor(b/N) elements:
 * block r, [lo + r*k, lo + (r+1)*k), belongs to rank r; the b - N*k < N left-over elements at the end
 * of the bucket belong to ranks 0, 1, ... one each (they are averaged with a small allreduce). So a
 * rank owns at most ceil(b/N) elements of every bucket: the same padding to a multiple of N the planner
 * assumes (ceil(Psi/N) per rank, plan.h), applied bucket by bucket, with no padding stored. Block r is
 * where the in-place reduce-scatter and all-gather of comm.h want it, so neither needs a copy of the
 * bucket. The optimizer sees rank r's shard as spans: its blocks cut at tensor boundaries, so weight
 * decay stays per tensor.
 *
 * Clipping and the non-finite check: every rank sums the squares of its own shard's gradients, the sums
 * are all-gathered and added in rank order (the same bits on every rank), then the norm is finished.
 *
 * Checkpoints: zero_gather_state collects the shards of the optimizer state into full-size buffers on
 * rank 0, which writes the same complete checkpoint as an unsharded run; zero_load_state takes a rank's
 * shard out of full buffers. So a checkpoint can be resumed with any stage and any rank count.
 *
 *     zero *z = zero_create(m, world, stage, bucket_elems);
 *     optim_state st; optim_state_init(&st, kind, zero_shard_elems(z));      // about Psi/N
 *     ddp_options o = {...}; zero_set_ddp_options(z, &o); ddp_create(m, world, &o, hash);
 *     each step: backward (buckets reduce-scattered), ddp_finish, norm from zero_sum_over_ranks,
 *                optim_step over zero_shard_spans, zero_allgather_params.
 */

typedef struct zero zero;

/* Stops with exit 2 unless stage is 1 or 2 (stage 3, parameter sharding, is dist/fsdp.h's FULL_SHARD). */
void zero_check_stage(int stage);

/* The shard layout of this rank for a model split into DDP's buckets of bucket_elems elements (stage 1
 * uses one bucket whatever bucket_elems says). Collective only in that every rank must call it alike. */
zero *zero_create(model *m, comm_t *c, int stage, size_t bucket_elems);
void zero_free(zero *z);

int zero_stage(const zero *z);
/* The bucket size DDP must use so that its buckets are the layout's (0: one bucket). */
size_t zero_bucket_elems(const zero *z);
/* Parameters whose optimizer state this rank holds: at most ceil(b/N) per bucket of b. */
size_t zero_shard_elems(const zero *z);

/* This rank's shard as optimizer spans (over the model's parameters and gradients, one per piece of a
 * tensor) and as clip spans over the same gradients; *count of each; free both with free(). Their
 * lengths add up to zero_shard_elems. */
void zero_shard_spans(const zero *z, optim_span **spans, clip_span **clips, int *count);

/* Stage 2's gradient memory, on a model made by model_create_sharded_grads, after ddp_create (it wraps the
 * model's hooks, DDP's included): before a layer's backward the bucket it writes into is committed; once
 * a bucket is reduced, all of it but this rank's block and left-over element is decommitted (a new bucket
 * waits until at most one reduction, the previous bucket's, is in flight: DeepSpeed's double buffering); and
 * zero_release_gradients, after the step's update, decommits the shards too, so the next step starts with
 * every gradient reading zero and no gradient memory held. Peak gradient bytes per rank: the shard plus
 * about two buckets (the one filling, the one reducing; a tied head also writes the embeddings' bucket
 * first); with accumulation every bucket until the last micro-batch (no_sync keeps whole gradients). */
void zero_shard_gradients(zero *z, ddp *dp);
void zero_release_gradients(zero *z); /* nothing unless zero_shard_gradients was called */

/* DDP's reduce_bucket for this layout (ctx: the zero): averages grads[lo, hi) so that this rank's
 * blocks of the bucket hold the average over ranks (the rest of the bucket is left stale, or given back
 * under zero_shard_gradients). */
void zero_reduce_bucket(void *ctx, comm_t *c, float *grads, size_t lo, size_t hi, comm_algo algo);

/* The sum over ranks of one double per rank, added in rank order: identical bits on every rank. */
double zero_sum_over_ranks(zero *z, double local);
/* Every rank's updated shard of the parameters to every rank (in-place all-gathers, bucket by bucket). */
void zero_allgather_params(zero *z);
/* Bytes this rank sent in the last zero_allgather_params (comm_stats' count). */
uint64_t zero_allgather_bytes(const zero *z);

/* Rank r's shard as pieces of the flat buffer, [offsets[i], offsets[i] + lengths[i]), in the order its
 * optimizer state lays them out (what a sharded checkpoint records: train/ckpt_sharded.h). Returns the
 * count; pass NULL arrays to count first. */
int zero_shard_ranges(const zero *z, int rank, size_t *offsets, size_t *lengths);

/* Collective: the optimizer state's shards into full buffers (model_num_params floats each) on rank 0;
 * full_m / full_v may be NULL elsewhere and where the optimizer has no such state. */
void zero_gather_state(zero *z, const optim_state *st, float *full_m, float *full_v);
/* Local: this rank's shard of full buffers (a checkpoint's state) into st. */
void zero_load_state(const zero *z, optim_state *st, const float *full_m, const float *full_v);

#endif
