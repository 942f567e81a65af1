/* fsdp.h: fully sharded data parallel (ZeRO-3 and PyTorch FSDP's strategies) over flat-parameter units. */
#ifndef MIXPAR_DIST_FSDP_H
#define MIXPAR_DIST_FSDP_H

#include "comm/comm.h"
#include "model/model.h"
#include "optim/clip.h"
#include "optim/optimizer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ZeRO stage 3 (Rajbhandari et al. 2020) and FSDP (Zhao et al. 2023) are one mechanism: no rank keeps
 * the whole model; each keeps 1/N of every parameter, gradient and optimizer state, and a layer's
 * parameters are all-gathered just before it runs and dropped after.
 *
 * Units. The model's parameters are grouped into flat-parameter units, FSDP's wrapping of one transformer
 * block per unit: units 1..L are the blocks. With a tied head (GPT-2) unit 0 is the root: the embeddings
 * (layer -1) and the final norm and head (layer L) together, since the head is the embedding matrix; it
 * stays gathered from the start of forward until its gradients are reduced after the embeddings'
 * backward (FSDP does not reshard its root either). Untied (LLaMA), the embeddings are unit 0 and the
 * final norm and head unit L + 1, each held only while used: the head from its forward to its backward,
 * the embeddings for their forward only (the backward of a lookup reads no weights). A unit of n
 * elements is cut into G shards of k = ceil(n / G) (the last ones padded with zeros, the planner's
 * ceil(Psi/N)); rank r of a shard group owns elements [r k, (r+1) k) of the unit's concatenated spans,
 * with its parameters (fp32, MEM_PARAM), gradients (MEM_GRAD) and optimizer state.
 *
 * The model is created reserved (model.h model_create_reserved): its flat parameter and gradient buffers
 * are address space, and a unit's span holds memory (MEM_COMM: all-gather output) only while gathered:
 *
 *   forward   before layer l: all-gather unit l into its span (waiting if a prefetch already started it),
 *             start the prefetch of the next unit(s), and under FULL_SHARD drop the previous block;
 *   backward  before layer l: gather unit l again (FULL_SHARD) and commit its gradient span; prefetch the
 *             unit backward needs next; when its gradients are final: reduce-scatter them (average), add
 *             this rank's shard into its gradient shard, decommit the gradient span and drop the weights.
 *   step      the optimizer updates the shards only (fsdp_shard_spans); nothing is gathered after it: the
 *             next forward gathers the new weights.
 *
 * Strategies (PyTorch's ShardingStrategy; DeepSpeed's stage 3 is FULL_SHARD):
 *   FULL_SHARD     shard over all ranks; blocks dropped after forward and gathered again for backward.
 *                  Communication per step: 2 all-gathers + 1 reduce-scatter of Psi = the paper's 3 Psi
 *                  (a little less: the root, or the head and the embeddings, are gathered once).
 *   SHARD_GRAD_OP  shard over all ranks; blocks kept from forward to their backward (ZeRO-2-like memory
 *                  during the step, one all-gather fewer: 2 Psi).
 *   NO_SHARD       shards of 1 rank (everyone holds everything); gradients all-reduced: DDP.
 *   HYBRID_SHARD   shard inside groups of shard_size ranks, replicate across the world / shard_size groups:
 *                  gradients reduce-scattered in the group, then each shard all-reduced across the groups
 *                  (sub-communicators from comm_split). Gathers stay inside a group, e.g. inside a node.
 *
 * Prefetch and overlap. With overlap on (and a communicator safe for a second thread), gathers and
 * reduce-scatters run on a communication thread in the order they were asked for (the same on every rank,
 * so the collectives pair up); forward_prefetch asks for the next block's gather when a block starts,
 * backward_prefetch the next block backward needs, and at most max_inflight units are gathered ahead of
 * the one running (FSDP's limit_all_gathers). Without overlap everything runs on the caller's thread and
 * prefetch does nothing.
 *
 * Initialisation: every rank draws the same weights layer by layer (model_init_layerwise) and keeps its
 * shard, so the full model is never in memory and no broadcast is needed.
 *
 *     model *m = model_create_reserved(&cfg);
 *     fsdp *f = fsdp_create(m, world, &opt, config_hash, seed);
 *     optim_state_init(&st, kind, fsdp_shard_elems(f)); spans from fsdp_shard_spans
 *     each step: fsdp_zero_grad; forward + backward per micro-batch; fsdp_finish;
 *                norm from fsdp_sum_over_shards; optim_step over the spans; fsdp_after_update. */

typedef enum { FSDP_FULL_SHARD, FSDP_SHARD_GRAD_OP, FSDP_NO_SHARD, FSDP_HYBRID_SHARD, FSDP_NSTRATEGIES } fsdp_strategy;
extern const char *const fsdp_strategy_names[]; /* "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", NULL */
int fsdp_strategy_from_name(const char *name);  /* -1 when unknown */

typedef struct {
    fsdp_strategy strategy;
    int shard_size;          /* HYBRID_SHARD: ranks per shard group, dividing the world size (exit 2 if not) */
    bool forward_prefetch;   /* gather the next block while one runs forward */
    bool backward_prefetch;  /* gather the block backward needs next while one runs backward */
    int max_inflight;        /* units gathered ahead of the running one at most (>= 1) */
    bool overlap;            /* communication on its own thread */
} fsdp_options;

typedef struct fsdp fsdp;

/* Collective. m must be reserved. Checks that the ranks agree on the config (exit 2 naming them), the
 * strategy's group sizes (exit 2), initialises the weights from seed and keeps this rank's shards. */
fsdp *fsdp_create(model *m, comm_t *world, const fsdp_options *opt, uint64_t config_hash, uint64_t seed);
void fsdp_free(fsdp *f);
/* From now on the comm events of this rank's gathers and reductions go to <dir>/events.rank<R>.jsonl. */
void fsdp_set_events(fsdp *f, const char *dir);

int fsdp_shard_size(const fsdp *f);          /* G: ranks one unit is split over */
int fsdp_units(const fsdp *f);               /* L + 1 (tied) or L + 2 (untied) */
size_t fsdp_shard_elems(const fsdp *f);      /* this rank's parameters (padding included): sum of k per unit */

/* This rank's shard as optimizer spans over its parameter and gradient shards, cut at tensor boundaries
 * (weight decay per tensor), and clip spans over the same gradients; free both with free(). */
void fsdp_shard_spans(const fsdp *f, optim_span **spans, clip_span **clips, int *count);
/* This rank's shard as ranges of the flat buffer (offset, n), in the order of its spans' data: what a
 * sharded checkpoint records. Returns the count; out may be NULL to count. */
int fsdp_shard_ranges(const fsdp *f, size_t *offsets, size_t *lengths);
/* Whether this rank's shard goes into a sharded checkpoint: true on the ranks of the first shard group. The
 * other groups (HYBRID_SHARD, NO_SHARD) hold copies of the same shards, which a checkpoint records once. */
bool fsdp_saves_shard(const fsdp *f);

void fsdp_zero_grad(fsdp *f);                /* the gradient shards := 0 (the start of a step) */
void fsdp_finish(fsdp *f);                   /* waits until the last backward's reductions are done */
/* The sum over the ranks of one shard group of one double per rank, in rank order (the same bits
 * everywhere): the squared norms of the gradient shards add up to the global one. */
double fsdp_sum_over_shards(fsdp *f, double local);
void fsdp_after_update(fsdp *f);             /* drops gathered units whose weights the update made stale */

/* Collective: the full flat buffer of a sharded one (parameters or a same-shaped optimizer state laid out
 * like the spans), all-gathered unit by unit into full (model_num_params floats) on every rank. */
void fsdp_gather_full(fsdp *f, const float *shard, float *full);
/* Local: this rank's shard of a full flat buffer (a checkpoint's) into shard (fsdp_shard_elems floats). */
void fsdp_take_shard(const fsdp *f, const float *full, float *shard);
float *fsdp_param_shard(fsdp *f);

typedef struct {
    uint64_t gather_bytes;   /* bytes this rank sent in all-gathers since the last fsdp_zero_grad */
    uint64_t reduce_bytes;   /* ... in reduce-scatters and all-reduces of gradients */
    int gathers, reduces;    /* collectives in that time */
    size_t max_unit_floats;  /* the largest unit */
    double backward_end;     /* mp_elapsed() when the last backward's embeddings were done */
    double first_reduce_start;
    bool overlapping;        /* the communication thread is in use */
} fsdp_stats;
void fsdp_get_stats(const fsdp *f, fsdp_stats *out);

#endif
