/* step.h: one optimizer step of a model: micro-batches with gradient accumulation, clipping, the update. */
#ifndef MIXPAR_TRAIN_STEP_H
#define MIXPAR_TRAIN_STEP_H

#include "amp/policy.h"
#include "amp/scaler.h"
#include "comm/comm.h"
#include "dist/ddp.h"
#include "dist/fsdp.h"
#include "dist/zero.h"
#include "model/model.h"
#include "optim/clip.h"
#include "optim/optimizer.h"

/* The pieces the trainer, the benchmarks and the lab experiments share: the optimizer state laid over the
 * model's parameter registry (one span per tensor, weight decay on tensors of 2 or more dimensions). */
typedef struct {
    model *m;
    optim_config opt;
    optim_state state;
    optim_span *spans;   /* one per registry tensor */
    clip_span *clips;
    int nspans;
    double grad_clip;    /* max global norm; 0 = no clipping */
    ddp *ddp;            /* data parallel across ranks, or NULL for one rank */
    zero *zero;          /* ZeRO stage 1 or 2: spans, clips and state cover this rank's shard only; or NULL */
    fsdp *fsdp;          /* ZeRO-3 / FSDP: spans, clips and state cover this rank's parameter shards; or NULL */
    /* mixed precision (train_step_set_amp); amp == NULL: plain fp32, no scaler, no extra pass */
    const amp_recipe_info *amp;
    amp_recipe recipe;
    amp_scaler scaler;
    float *master;       /* fp16-o2: the fp32 master weights of the spans (MEM_MASTER), the optimizer's */
    optim_span *master_spans;
    bool stochastic_rounding; /* bf16-pure: round the updated weights stochastically (else to nearest) */
    uint64_t rounding_seed; /* the stochastic rounding's random bits */
    long inject_inf_at;  /* for lab 17's demonstration: put an inf in this rank's gradients at this update
                          * (0-based; -1 = never): a rank-local overflow */
    long updates;        /* optimizer steps taken (the stochastic rounding's step number) */
    comm_t *found_inf_comm; /* data parallel: the ranks that must agree on found_inf (lab 17); or NULL */
    /* One rank, several micro-batches: each micro-batch's gradients computed alone (from zero) and added to
     * the running sum in order, ((g0 + g1) + g2) + ..., the order the deterministic allreduce adds the ranks'
     * (comm/algo_chain.c). So 1 rank x N micro-batches and N ranks x 1 micro-batch, both deterministic, end
     * with the same weights bit for bit when N is a power of two (the 1/N scaling is then exact). Costs one
     * more gradient buffer (MEM_GRAD). Ignored with data parallel or sharding (their buffers are reduced in
     * place during backward). [false] */
    bool ordered_accumulation;
    bool accum_no_divide;      /* MIXPAR_DEBUG_ACCUM_NO_DIVIDE=1: a bug on purpose (lab 24's zoo): the micro-batches'
                                * gradients are summed, not averaged, so the step is `accum` times too large (on the
                                * path without DDP; under DDP the accumulation is lab 16's region) */
    float *accum_grads;  /* its running sum, allocated at the first step that needs it */
    /* ZeRO-Offload (train_step_init_offload): the optimizer state (s->state) and these live in host memory
     * (MEM_HOST), and the update runs there; host_spans == NULL: no offload. */
    float *host_master;     /* fp32 master weights of the spans, end to end (the spans' n floats) */
    float *host_grads;      /* the spans' final gradients, copied down every step (as many floats) */
    optim_span *host_spans; /* one per span, over host_master and host_grads: what the host update steps */
} train_step;

/* What ZeRO-Offload moved in one step and what it cost (all zero without offload and on a skipped step). */
typedef struct {
    size_t d2h_bytes;    /* gradients copied device -> host */
    size_t h2d_bytes;    /* updated fp32 weights copied host -> device */
    double copy_s;       /* seconds of both copies */
    double update_s;     /* seconds of the optimizer update on the host */
} train_step_offload_stats;

typedef struct {
    float loss;          /* mean over the micro-batches */
    double grad_norm;    /* global L2 norm before clipping (of the unscaled gradients) */
    bool clipped;
    bool skipped;        /* no update: gradients not finite (under a scaler: found_inf, agreed by all ranks) */
    bool found_inf_local;/* this rank's own finding, before the ranks agreed */
    amp_update update;   /* the loss scaler's decision (scale 1, never skipped, when amp is NULL) */
    double t_forward, t_backward, t_optimizer; /* seconds (t_optimizer includes the offload's copies) */
    double backward_end; /* when the last micro-batch's backward returned (mp_elapsed): anchors the step's spans */
    train_step_offload_stats offload;
} train_step_result;

void train_step_init(train_step *s, model *m, const optim_config *opt, double grad_clip);
/* The same for ZeRO: the spans, the clip spans and the optimizer state cover this rank's shard (about
 * Psi/N parameters); the step clips with a norm summed across ranks and all-gathers the parameters after
 * the update. s->ddp must be set, with zero_reduce_bucket as its bucket reduction, before the first step. */
void train_step_init_zero(train_step *s, model *m, const optim_config *opt, double grad_clip, zero *z);
/* The same for ZeRO-3 and FSDP (dist/fsdp.h): the spans are over the rank's parameter and gradient shards,
 * the norm is summed over the shard group, and nothing is gathered after the update (the next forward
 * gathers the layers it runs). No s->ddp. offload: the shard's optimizer state, master and gradient buffer
 * on the host, as train_step_init_offload does (ZeRO-3 with offload_optimizer). */
void train_step_init_fsdp(train_step *s, model *m, const optim_config *opt, double grad_clip, fsdp *f, bool offload);
/* ZeRO-Offload (Ren et al. 2021): the same spans as train_step_init (z == NULL: the whole model) or
 * train_step_init_zero (z: this rank's shard), with the optimizer state, an fp32 master copy of the spans'
 * weights and a buffer for their gradients allocated in host memory (MEM_HOST) instead of the device: the
 * device keeps only the working weights and their gradients. Every step, once the gradients are final
 * (reduced, unscaled, checked, clipped, all on the device as without offload), they are copied down to the
 * host, the optimizer updates the host master, and the master is copied back up into the spans' weights:
 * 4 bytes per span element each way. The arithmetic is the same, in the same order, so a run is bit for
 * bit the run without offload. Weights kept in 16 bits (fp16-o2, bf16-pure) are not supported: call
 * train_step_set_amp afterwards with an autocast recipe or fp32 only (it asserts). */
void train_step_init_offload(train_step *s, model *m, const optim_config *opt, double grad_clip, zero *z);
void train_step_free(train_step *s);

/* Mixed precision for the step (call after init, before the first step; the model's compute mode is
 * set separately with model_set_precision, amp_model_precision says which). The recipe decides:
 *   - the loss is multiplied by the scaler's S before backward; the gradients are unscaled once, after
 *     the data-parallel reduction (so they are reduced while scaled, when they are safe in fp16);
 *   - fp16-o2 keeps an fp32 master copy for the optimizer (MEM_MASTER) and the model's weights hold its
 *     fp16 rounding; its gradients are rounded to fp16 after backward, as fp16 gradients would be;
 *   - bf16-pure keeps no master: the optimizer updates the weights, which are rounded back to bf16
 *     stochastically (or to nearest when stochastic_rounding is false: lab 09's stall); gradients are
 *     rounded to bf16;
 *   - every recipe checks for inf/NaN (found_inf), skips the update on one, and lets the scaler react.
 * seed: the stochastic rounding's. */
void train_step_set_amp(train_step *s, amp_recipe recipe, const amp_scaler_config *scaler, bool stochastic_rounding,
                        uint64_t seed);
/* The weights the optimizer updates (the master copy under fp16-o2, otherwise the model's), for
 * checkpoints: n floats of the spans, in span order. */
const optim_span *train_step_update_spans(const train_step *s);
/* After the weights the optimizer updates were changed from outside (a checkpoint was loaded): make the
 * model's working weights their low-precision rounding again (fp16-o2: from the master copy); under
 * offload, make the host's master copy the spans' weights again. */
void train_step_sync_working_weights(train_step *s);

/* One step: zero the gradients; for each of `accum` micro-batches (inputs + k*B*T, targets likewise) run
 * forward and backward with the loss scaled by 1/accum, so the gradients are the mean over all of them
 * (with DDP: averaged over the ranks too, reduced during the last micro-batch's backward only: lab 16);
 * clip to grad_clip; update with learning rate lr. A non-finite gradient norm skips the update (and says
 * so in the result), leaving the weights and the optimizer state untouched. Under mixed precision the
 * order is the AMP step (lab 07): scaled backward, unscale, agree on found_inf, clip, step or skip, update
 * the scale; a fatal scaler status is in r.update.status for the caller to stop on. */
train_step_result train_step_run(train_step *s, const int *inputs, const int *targets, int B, int T, int accum,
                                 double lr);

#endif
