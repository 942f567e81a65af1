/* step.h: one optimizer step of a model: micro-batches with gradient accumulation, clipping, the update. */
#ifndef MIXPAR_TRAIN_STEP_H
#define MIXPAR_TRAIN_STEP_H

#include "dist/ddp.h"
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
} train_step;

typedef struct {
    float loss;          /* mean over the micro-batches */
    double grad_norm;    /* global L2 norm before clipping */
    bool clipped;
    double t_forward, t_backward, t_optimizer; /* seconds */
} train_step_result;

void train_step_init(train_step *s, model *m, const optim_config *opt, double grad_clip);
/* The same for ZeRO: the spans, the clip spans and the optimizer state cover this rank's shard (about
 * Psi/N parameters); the step clips with a norm summed across ranks and all-gathers the parameters after
 * the update. s->ddp must be set, with zero_reduce_bucket as its bucket reduction, before the first step. */
void train_step_init_zero(train_step *s, model *m, const optim_config *opt, double grad_clip, zero *z);
void train_step_free(train_step *s);

/* One step: zero the gradients; for each of `accum` micro-batches (inputs + k*B*T, targets likewise) run
 * forward and backward with the loss scaled by 1/accum, so the gradients are the mean over all of them
 * (with DDP: averaged over the ranks too, reduced during the last micro-batch's backward only);
 * clip to grad_clip; update with learning rate lr. A non-finite gradient norm skips the update (and says
 * so in the result), leaving the weights and the optimizer state untouched. */
train_step_result train_step_run(train_step *s, const int *inputs, const int *targets, int B, int T, int accum,
                                 double lr);

#endif
