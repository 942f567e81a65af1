/* optimizer.h: SGD, SGD with momentum, Adam, AdamW and LAMB acting on flat fp32 spans of parameters.
 *
 * An optimizer sees only flat arrays: the parameters, their gradients and its own state, all of the same
 * length n. It knows nothing of the model's shapes, so a ZeRO shard (a slice of the flat parameters owned by
 * one rank) is simply a shorter span, and updating the shards one by one gives exactly the same bits as
 * updating the whole array at once (every update below is element-wise; LAMB's one per-tensor quantity, the
 * trust ratio, is split out so that sharded callers can reduce its partial sums across ranks).
 *
 * Semantics follow PyTorch (torch.optim.SGD, Adam, AdamW) so that curves can be compared with it:
 *   step t counts from 1 (the first update has t = 1); the caller passes it.
 *   SGD        g' = g + wd*p                              p -= lr*g'
 *   momentum   g' = g + wd*p;  b = g' at t = 1, else b = mu*b + (1-dampening)*g'
 *              d = g' + mu*b (Nesterov) or d = b;         p -= lr*d
 *   Adam       g' = g + wd*p (L2 decay: it passes through the normalisation below)
 *              m = b1*m + (1-b1)*g';  v = b2*v + (1-b2)*g'^2
 *              p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
 *   AdamW      p -= lr*wd*p (decoupled decay, applied first), then Adam's update with g' = g
 *   LAMB       You et al. 2019, "Large Batch Optimization for Deep Learning", Algorithm 2, in the variant of
 *              NVIDIA apex FusedLAMB(adam_w_mode=True, bias_correction=True, grad_averaging=True, use_nvlamb=True,
 *              max_grad_norm=0):
 *              m = b1*m + c*g  with c = 1-b1 (grad_averaging, the default) or c = 1 (grad_averaging = false)
 *              v = b2*v + (1-b2)*g^2
 *              u = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd*p       (Adam direction + decoupled decay)
 *              r = ||p|| / ||u|| over the span (one tensor), r = 1 when either norm is 0,
 *                  then clamped to [min_trust, max_trust] (DeepSpeed's min_coeff/max_coeff; default: no clamp)
 *              p -= lr * r * u
 *              The trust ratio applies to every span, decayed or not (apex applies it only where weight_decay
 *              != 0 unless use_nvlamb is set). There is no gradient clipping inside: clip first with clip.h.
 *
 * Weight decay is per span: optim_span.decay says whether the span's tensor is decayed. The rule used by GPT-2
 * training code (llm.c, nanoGPT): decay tensors with 2 or more dimensions (weight matrices and embeddings), do
 * not decay biases and normalisation gains (1-D). optim_decays_ndim() states it.
 *
 * Optimizer state, allocated under MEM_OPTIM with exactly the bytes the planner assumes:
 *   sgd 0 B/param, momentum 4 B/param (the buffer b), adam/adamw/lamb 8 B/param (m and v).
 *
 * Usage, one whole model:
 *     optim_config cfg = optim_config_default(optim_kind_from_name("adamw"));
 *     optim_config_set(&cfg, "weight_decay", 0.1);
 *     optim_state st;
 *     optim_state_init(&st, cfg.kind, total_params);
 *     ...each step, after backward and clipping:
 *     optim_step(&cfg, &st, spans, nspans, lr_schedule_at(&sched, st.step));
 */
#ifndef MIXPAR_OPTIM_OPTIMIZER_H
#define MIXPAR_OPTIM_OPTIMIZER_H

#include "base/mem.h"

#include <stdbool.h>
#include <stddef.h>

struct cJSON;

typedef enum { OPTIM_SGD, OPTIM_MOMENTUM, OPTIM_ADAM, OPTIM_ADAMW, OPTIM_LAMB, OPTIM_NKINDS } optim_kind;

/* Hyperparameters of one update. Doubles, as the user wrote them; the kernels round them to float once. */
typedef struct {
    double lr;             /* learning rate of this step (the schedule's value) */
    double beta1, beta2;   /* Adam family: decay rates of the first and second moments */
    double eps;            /* Adam family: added to sqrt(v_hat) so that a zero second moment cannot divide by 0 */
    double weight_decay;   /* L2 (sgd, momentum, adam) or decoupled (adamw, lamb) decay; 0 for undecayed spans */
    double momentum;       /* SGD with momentum: mu */
    double dampening;      /* SGD with momentum: the gradient enters the buffer scaled by (1 - dampening) */
    bool nesterov;         /* SGD with momentum: step along g + mu*b instead of b */
    bool grad_averaging;   /* LAMB: m = b1*m + (1-b1)*g (true) or m = b1*m + g (false) */
    double min_trust;      /* LAMB: lower clamp of the trust ratio (0: none) */
    double max_trust;      /* LAMB: upper clamp of the trust ratio (INFINITY: none) */
} optim_hparams;

/* One row of the optimizer table. */
typedef struct {
    const char *name;      /* config name: "sgd", "momentum", "adam", "adamw", "lamb" */
    const char *title;     /* for logs and help: "AdamW (Adam with decoupled weight decay)" */
    int state_floats;      /* fp32 state values per parameter: 0, 1 or 2 */
    optim_hparams defaults;
} optim_info;

const optim_info *optim_info_of(optim_kind kind);
/* Bytes of optimizer state for n parameters: state_floats * 4 * n. The planner uses the same numbers. */
size_t optim_state_bytes(optim_kind kind, size_t n);
/* The GPT-2 weight-decay rule: true for tensors of 2 or more dimensions. */
bool optim_decays_ndim(int ndim);

/* ---------------------------------------------------------------- kernels on one span
 * Each updates n parameters in place. param, grad and state must not overlap. `step` is t >= 1. The
 * state arrays start at zero (mem_alloc zero-fills) and belong to exactly these n parameters. */
void optim_sgd_update(float *param, const float *grad, size_t n, const optim_hparams *h);
void optim_momentum_update(float *param, const float *grad, float *buf, size_t n, const optim_hparams *h, long step);
void optim_adam_update(float *param, const float *grad, float *m, float *v, size_t n, const optim_hparams *h,
                       long step);
void optim_adamw_update(float *param, const float *grad, float *m, float *v, size_t n, const optim_hparams *h,
                        long step);
/* LAMB on a span that is one whole tensor: optim_lamb_moments, then the trust ratio, then optim_lamb_apply. */
void optim_lamb_update(float *param, const float *grad, float *m, float *v, size_t n, const optim_hparams *h,
                       long step);
/* LAMB in two phases, for a tensor split over ranks (or any spans that share one trust ratio):
 *     for each piece: optim_lamb_moments(...piece..., &ps, &us); add ps and us over pieces (allreduce)
 *     r = optim_lamb_trust_ratio(h, ps_total, us_total);
 *     for each piece: optim_lamb_apply(...piece..., r);
 * moments updates m and v and writes the piece's sums of squares of p and of the update direction u
 * (in double); apply recomputes u from p, m and v and steps p -= lr*r*u. */
void optim_lamb_moments(const float *param, const float *grad, float *m, float *v, size_t n, const optim_hparams *h,
                        long step, double *param_sumsq, double *update_sumsq);
double optim_lamb_trust_ratio(const optim_hparams *h, double param_sumsq, double update_sumsq);
void optim_lamb_apply(float *param, const float *m, const float *v, size_t n, const optim_hparams *h, long step,
                      double trust_ratio);

/* The kernel of `kind` on one span (m and v as the kind needs them; NULL where it needs none). */
void optim_update(optim_kind kind, float *param, const float *grad, float *m, float *v, size_t n,
                  const optim_hparams *h, long step);

/* ---------------------------------------------------------------- configuration */
typedef struct {
    optim_kind kind;
    optim_hparams h;       /* h.lr is the base learning rate; schedules may scale it */
} optim_config;

/* "sgd", "momentum", "adam", "adamw", "lamb" (case ignored; DeepSpeed spellings "Adam", "AdamW", "Lamb",
 * "SGD" are the same names). Unknown names stop with exit 2 and the list of names. */
optim_kind optim_kind_from_name(const char *name);
optim_config optim_config_default(optim_kind kind);
/* Sets one hyperparameter by its DeepSpeed/PyTorch name: lr, beta1, beta2, eps, weight_decay, momentum,
 * dampening, nesterov (0/1), grad_averaging (0/1), max_coeff, min_coeff. A key the kind does not take, or a
 * value out of range, stops with exit 2. Setting momentum moves between sgd (momentum 0) and momentum (> 0),
 * as torch.optim.SGD does. */
void optim_config_set(optim_config *cfg, const char *key, double value);
/* Checks the combination (Nesterov needs momentum > 0 and dampening 0; min_coeff <= max_coeff); exit 2. */
void optim_config_check(const optim_config *cfg);
/* The DeepSpeed "optimizer" block: {"type": "AdamW", "params": {"lr": 6e-4, "betas": [0.9, 0.95], "eps": 1e-8,
 * "weight_decay": 0.1}}. Follows DeepSpeed where it differs from PyTorch:
 *   type "Adam" takes "adam_w_mode" (default TRUE in DeepSpeed since v0.3.11): unless it is false, "Adam"
 *   means AdamW. "torch_adam" is accepted and ignored. "bias_correction" must be true.
 *   type "Lamb" clamps the trust ratio to [min_coeff, max_coeff], DeepSpeed defaults 0.01 and 10.
 *   type "SGD" with momentum > 0 is SGD with momentum.
 * Errors (unknown type or key, wrong JSON type, bad value) stop with exit 2. */
optim_config optim_config_from_json(const struct cJSON *optimizer);
/* One line for logs: "adamw lr=0.0006 betas=(0.9, 0.95) eps=1e-08 weight_decay=0.1". */
void optim_config_format(const optim_config *cfg, char *out, size_t outlen);

/* ---------------------------------------------------------------- state and the step over many spans */
typedef struct {
    optim_kind kind;
    size_t n;              /* parameters covered */
    float *m;              /* (n) momentum buffer (momentum) or first moment (Adam family); NULL for sgd */
    float *v;              /* (n) second moment (Adam family); NULL otherwise */
    long step;             /* steps taken; optim_step uses t = step + 1 and then stores it */
} optim_state;

/* Allocates zeroed state for n parameters under MEM_OPTIM ("optim.m", "optim.v"). */
void optim_state_init(optim_state *st, optim_kind kind, size_t n);
/* The same under another memory tag: ZeRO-Offload keeps the state in host memory
 * (MEM_HOST), where it is counted apart from the device's bytes. */
void optim_state_init_tagged(optim_state *st, optim_kind kind, size_t n, mem_tag tag);
void optim_state_free(optim_state *st);

/* One parameter span: a tensor, or a shard of one. */
typedef struct {
    float *param;          /* (n) */
    const float *grad;     /* (n) */
    size_t n;
    bool decay;            /* weight decay applies (tensors with >= 2 dims; see optim_decays_ndim) */
} optim_span;

/* One optimizer step over spans laid end to end in the state: span k's state starts after the n of spans
 * 0..k-1, and the n of all spans must add up to st->n. lr is this step's learning rate. LAMB treats each span
 * as one tensor (its own trust ratio). Increments st->step. */
void optim_step(const optim_config *cfg, optim_state *st, const optim_span *spans, int nspans, double lr);

#endif
