/* mp_step.h: one training step on a dp x tp x pp mesh: the pipeline's micro-batches, the gradient reductions, the global norm and clip, the optimizer on this rank's shard. */
#ifndef MIXPAR_TRAIN_MP_STEP_H
#define MIXPAR_TRAIN_MP_STEP_H

#include "amp/policy.h"
#include "amp/scaler.h"
#include "base/events.h"
#include "dist/mesh.h"
#include "dist/pp.h"
#include "model/model.h"
#include "optim/optimizer.h"

/* 3D parallelism (Megatron-LM's composition, Narayanan et al. 2021): world = dp x tp x pp ranks
 * (dist/mesh.h). Each rank builds only its shard of the model (model_create_shard: its stage's blocks,
 * its tp share of them; under the interleaved schedule v shards, one per model chunk) with the whole model's initial values, so a run starts where one rank starts.
 * One step:
 *   1. the pipeline (dist/pp.h) runs the dp rank's m micro-batches forward and backward; gradients of
 *      the mean loss over them accumulate in the shard's buffer; tp reductions happen inside the model;
 *   2. tied embeddings on pp > 1: the two copies' gradients are summed over the embed group;
 *   3. data parallel: the gradient buffer is averaged over the dp group (one fp32 allreduce after the
 *      backward; every dp replica of a shard then holds the same gradients);
 *   4. the global gradient norm: each rank's sum of squares over the tensors it owns for the norm
 *      (tp-sharded tensors on every tp rank, tp-replicated ones on tp rank 0 only, the tied copy not at
 *      all), summed over the mp group (tp x pp: one whole model). Every rank of the mesh gets the same
 *      norm, so a non-finite gradient anywhere (found_inf) skips the step on every rank, and the clip
 *      scale is the same everywhere;
 *   5. the optimizer updates the shard's tensors (elementwise optimizers: sgd, momentum, adam, adamw;
 *      LAMB's per-tensor trust ratio would need norms over sharded tensors and is refused with tp > 1).
 *      With ZeRO-1 (zero_stage 1, dp > 1) each dp rank keeps the optimizer state of 1/dp of each chunk's
 *      flat buffer only, updates those elements, and the dp group all-gathers the updated weights: the
 *      same arithmetic, so the same weights, with the state dp times smaller.
 * The loss (mean over the micro-batches, from the last stage) is averaged over dp and is the same on
 * every rank: what the step event reports. Checkpoints: train/mp_checkpoint.h (any mesh loads any mesh's).
 *
 * Mixed precision (mp_step_set_amp): the autocast recipes of amp/policy.h, fp32 weights (the optimizer's
 * master copy) with bf16 or fp16 compute in every shard (model_lowp.h on a shard), and the recipe's loss
 * scaler (amp/scaler.h). The step then runs as the data-parallel trainer's AMP step (train/step.c):
 *   1. the pipeline's backward starts from the loss times S (pp_run's loss_scale);
 *   2. tied-embedding and dp reductions as above, of the scaled gradients;
 *   3. each rank unscales its own gradients once (amp_scaler_unscale: x 1/S and its own found_inf), then
 *      found_inf is agreed over the whole mesh (MAX over the world: an overflow on one tp rank or one
 *      stage skips the step on every rank);
 *   4. not skipped: the global norm of the unscaled gradients (each parameter once, as in step 4 above),
 *      the clip and the optimizer; skipped: weights, moments and the optimizer's step count untouched;
 *   5. amp_scaler_update with the agreed found_inf on every rank: the same scale everywhere next step. */
typedef struct {
    int dp, tp, pp;        /* the mesh's shape; dp x tp x pp = world size */
    int micro_batches;     /* m: micro-batches per step per dp rank (gradient accumulation) */
    pp_schedule schedule;
    int chunks;            /* v: model chunks per stage (interleaved; 0 or 1 otherwise) */
    int zero_stage;        /* 0, or 1: ZeRO-1 over the dp group (optimizer states sharded) */
    const char *stage_blocks; /* explicit blocks per virtual stage ("2,1,1"), or NULL: balanced by parameters */
    bool sequence_parallel;   /* Megatron's sequence parallel on the tp group (dist/sp.h); nothing when tp = 1 */
} mp_layout;

typedef struct {
    float loss;            /* mean over the micro-batches and the dp ranks */
    double grad_norm;      /* global, before clipping (of the unscaled gradients; NaN on an AMP skip) */
    bool clipped, skipped;
    bool found_inf_local;  /* AMP: this rank's own finding, before the mesh agreed */
    amp_update update;     /* the scale this step used and the next one's (1 and 1 without AMP) */
} mp_step_result;

typedef struct mp_step mp_step;

/* Collective over world. Checks the layout against the world and the model (exit 2 with a message:
 * dp x tp x pp not the world size, tp not dividing heads / kv heads / ffn / padded vocabulary, fewer
 * layers than stages, LAMB with tp > 1), builds the mesh, the stage's shard and its pipeline, and
 * initialises the weights with `seed`. ev may be NULL (else pipeline span events go there). */
mp_step *mp_step_create(comm_t *world, const model_config *cfg, const mp_layout *lay, const optim_config *opt,
                        double grad_clip, uint64_t seed, ev_writer *ev);
void mp_step_free(mp_step *s);
/* inputs, targets: this dp rank's m x (B,T) rows (read on the first and the last stage). Under sequence
 * parallel T must be divisible by tp (exit 2), and after the pipeline the norms' partial gradients are
 * summed over the tp group (sp_sum_partial_grads) before the tied-embedding and dp reductions. */
mp_step_result mp_step_run(mp_step *s, const int *inputs, const int *targets, int B, int T, double lr, long step);
/* Mixed precision: recipe fp32 (nothing changes), or an autocast recipe computing in bf16 or fp16 (bf16,
 * fp16) with the scaler `scaler`. Exits 2 naming the recipe for the others (bf16-pure and fp16-o2 store the
 * weights low; tf32 and fp8 run on the whole model only). Call after mp_step_create, before the first step. */
void mp_step_set_amp(mp_step *s, amp_recipe recipe, const amp_scaler_config *scaler);
amp_scaler *mp_step_scaler(mp_step *s); /* NULL without AMP; checkpoints save and restore its state */
/* A planted overflow (lab 17's MIXPAR_INJECT_INF for the mesh): at step attempt `attempt` (0 for the first
 * mp_step_run, skipped ones counted) this rank's first gradient becomes inf after the reductions, before
 * the unscale, so only this rank finds it. -1: none. AMP only. */
void mp_step_inject_inf(mp_step *s, long attempt);
mesh_t *mp_step_mesh(mp_step *s);
int mp_step_chunks(const mp_step *s);        /* v */
model *mp_step_model(mp_step *s, int chunk); /* this rank's chunk (0 .. v-1) */
size_t mp_step_params(const mp_step *s);     /* floats this rank holds, all chunks */
pp *mp_step_pipeline(mp_step *s);
/* The virtual stage boundaries used: first[0 .. pp v] (first[j pp + s] is chunk j of stage s's first block). */
const int *mp_step_stages(const mp_step *s);

/* For checkpoints (train/mp_checkpoint.h): the optimizer state and the spans it covers, laid end to end in
 * it (every tensor of every chunk, or under ZeRO-1 the pieces of them inside this dp rank's shard). */
optim_state *mp_step_optim_state(mp_step *s);
const optim_span *mp_step_state_spans(const mp_step *s, int *count);
bool mp_step_zero1(const mp_step *s);

#endif
