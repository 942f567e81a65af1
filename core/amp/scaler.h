/* scaler.h: loss scalers (static, PyTorch GradScaler, Keras, DeepSpeed with hysteresis) behind one interface. */
#ifndef MIXPAR_AMP_SCALER_H
#define MIXPAR_AMP_SCALER_H

/* Why a loss scale (损失缩放): in fp16 the gradients of a large model are often smaller than fp16's
 * smallest subnormal (2^-24) and flush to zero. Multiplying the loss by S multiplies every gradient of
 * the backward pass by S (the chain rule is linear), which lifts them into fp16's range; before the
 * optimizer step they are divided by S again ("unscaled"), in fp32, where nothing is lost. Too large an
 * S overflows some gradient to inf; that step is skipped and S is lowered. A dynamic scaler keeps S as
 * high as it can without overflowing.
 *
 * One training step with a scaler (the call order matters):
 *
 *     amp_scaler s;
 *     amp_scaler_init(&s, &cfg);                        // or amp_scaler_init_from_config (amp/setup.h)
 *     ...each step:
 *     model_forward(m, inputs, targets, B, T);
 *     model_backward(m, amp_scaler_scale(&s));          // gradients are now S times too large
 *     bool found_inf = amp_scaler_unscale(&s, grads, n); // divide by S in place, look for inf/NaN (once!)
 *     // data parallel: found_inf = allreduce_max(found_inf), so every rank skips together (lab 17)
 *     if (!found_inf) { clip(grads); optim_step(...); } // clipping sees the true gradients
 *     amp_update u = amp_scaler_update(&s, found_inf);  // the new scale for the next step
 *     if (amp_scaler_status_is_fatal(u.status)) amp_scaler_stop(&s, &u, step); // message + exit 2
 *
 * A skipped step leaves the weights, the optimizer's moments and the optimizer's step counter untouched,
 * exactly as torch.amp.GradScaler.step() does (it does not call optimizer.step(), so Adam's t does not
 * advance). What happens to the learning-rate schedule differs between the frameworks and is the
 * caller's choice: in a plain PyTorch loop scheduler.step() runs every iteration, skipped or not (PyTorch
 * even warns "Detected call of lr_scheduler.step() before optimizer.step()" when the first step is
 * skipped); DeepSpeed's engine does not step its scheduler on an overflow step (engine.py,
 * _take_model_step: `if overflow: self.skipped_steps += 1 else: ... self.lr_scheduler.step()`).
 *
 * The kinds (a table in scaler.c; `mixpar amp scaler-trace --kind K` replays any of them):
 *
 *   none       scale 1. Nothing to scale (fp32, tf32, bf16 and fp8 recipes), but the inf/NaN check and the
 *              skip still run, so a NaN never reaches the weights (the bf16 failure of Megatron-LLM#33:
 *              without a scaler nobody looked).
 *   static     a fixed scale (DeepSpeed "loss_scale": S > 0). Skips a step whose gradients are not
 *              finite and says so (status AMP_SCALER_SKIPPED_FIXED): a fixed scale cannot back off.
 *   pytorch    torch.amp.GradScaler, code defaults: init_scale 2^16, growth_factor 2, backoff_factor 0.5,
 *              growth_interval 2000. On inf/NaN: S *= backoff, tracker = 0, skip. Otherwise tracker += 1;
 *              when it reaches growth_interval, S *= growth (only if the result is finite in fp32) and
 *              tracker = 0. The scale is an fp32 value, as PyTorch's _scale tensor is. PyTorch has no
 *              floor; after about 150 consecutive overflows S reaches 0. Here that is reported as
 *              AMP_SCALER_SCALE_VANISHED once S falls below fp32's smallest normal (2^-126): a scale that
 *              small cannot be what the gradients need.
 *   keras      Keras LossScaleOptimizer (keras.optimizers / keras.mixed_precision): the same rule as
 *              PyTorch's with initial_scale 2^15 and dynamic_growth_steps 2000.
 *   deepspeed  DeepSpeed's DynamicLossScaler (deepspeed/runtime/fp16/loss_scaler.py), code defaults:
 *              initial_scale_power 16 (S = 2^16), loss_scale_window 1000, hysteresis 2,
 *              consecutive_hysteresis false, min_loss_scale 1. DeepSpeed's config-json.md documents
 *              initial_scale_power 32 and min_loss_scale 1000; the code (precision_config.py) uses 16 and
 *              1 and the code is what runs, so these are the defaults here too. The rule, with iter
 *              counting updates from 0 and last_overflow starting at -1:
 *                overflow: if the hysteresis is used up (hysteresis == 1 or what is left == 1):
 *                              if S == min_loss_scale: "Current loss scale already at minimum"
 *                                  (DeepSpeed raises; here AMP_SCALER_AT_MINIMUM, the run must stop)
 *                              else S = max(S/2, min_loss_scale)
 *                          else: hysteresis left -= 1 (S unchanged);
 *                          last_overflow = iter; the step is skipped in every case.
 *                clean:    consecutive_hysteresis: refill the hysteresis now;
 *                          if (iter - last_overflow) % window == 0: S *= 2, and refill the hysteresis
 *                          (when not consecutive).
 *                iter += 1.
 *              One deliberate difference: DeepSpeed holds S in a Python float (a double) and could grow
 *              it past fp32's largest value (2^128 from 2^127), which overflows the fp32 loss on the next
 *              step and costs a skipped step; here the scale is fp32 and growth past FLT_MAX is refused,
 *              as PyTorch refuses it.
 *
 * Unscale once per step: a second amp_scaler_unscale before amp_scaler_update would divide by S twice;
 * PyTorch raises "unscale_() has already been called on this optimizer since the last update()". Here it
 * stops the program with that message (exit 3: a bug in the caller, not bad input).
 */

#include <stdbool.h>
#include <stddef.h>

#include "data/data_err.h"
#include "optim/clip.h"

typedef enum {
    AMP_SCALER_NONE,
    AMP_SCALER_STATIC,
    AMP_SCALER_PYTORCH,
    AMP_SCALER_KERAS,
    AMP_SCALER_DEEPSPEED,
    AMP_SCALER_NKINDS
} amp_scaler_kind;

/* What a scaler is set up with. Fields a kind does not use are ignored (and left at their defaults). */
typedef struct {
    amp_scaler_kind kind;
    double init_scale;          /* the first step's scale; static: the scale. > 0, finite in fp32 */
    double growth_factor;       /* pytorch, keras: S *= this after a clean interval [2]; deepspeed: 2 */
    double backoff_factor;      /* pytorch, keras: S *= this on overflow [0.5]; deepspeed: 1/2 */
    int growth_interval;        /* clean steps before growth: pytorch growth_interval [2000], keras
                                 * dynamic_growth_steps [2000], deepspeed loss_scale_window [1000] */
    int hysteresis;             /* deepspeed: overflows absorbed before S halves; 1 = none absorbed [2] */
    bool consecutive_hysteresis;/* deepspeed: refill the hysteresis on every clean step [false] */
    double min_scale;           /* deepspeed: min_loss_scale, the floor [1]; unused by the others */
} amp_scaler_config;

/* The scaler's state. Read the fields; change them only through the functions below. */
typedef struct {
    amp_scaler_config cfg;
    float scale;                /* S: what the loss is multiplied by this step */
    int growth_tracker;         /* pytorch, keras: clean steps since the last growth or overflow */
    int hysteresis_left;        /* deepspeed: cur_hysteresis */
    long iter;                  /* updates so far (deepspeed: cur_iter) */
    long last_overflow_iter;    /* deepspeed: iter of the last overflow; -1 before any */
    bool unscaled;              /* amp_scaler_unscale ran since the last update */
    long skipped;               /* steps skipped so far */
    long consecutive_skipped;   /* skipped steps in a row, up to and including the last update */
} amp_scaler;

typedef enum {
    AMP_SCALER_OK,              /* the step was taken, or skipped with the scale lowered as planned */
    AMP_SCALER_SKIPPED_FIXED,   /* skipped with a fixed scale (none, static): nothing was lowered */
    AMP_SCALER_AT_MINIMUM,      /* deepspeed: overflow with S already at min_loss_scale (fatal) */
    AMP_SCALER_SCALE_VANISHED,  /* pytorch, keras: S fell below 2^-126 after repeated overflows (fatal) */
    AMP_SCALER_NSTATUS
} amp_scaler_status;

/* What one update decided. */
typedef struct {
    bool skipped;               /* the optimizer must not step (weights, moments, step count untouched) */
    float scale;                /* the scale this step used */
    float next_scale;           /* the scale of the next step */
    amp_scaler_status status;
} amp_update;

/* One row of the table of kinds. */
typedef struct {
    const char *name;           /* "pytorch": what --kind and the checkpoint use */
    const char *origin;         /* "torch.amp.GradScaler" */
    amp_scaler_config defaults;
} amp_scaler_kind_info;

const amp_scaler_kind_info *amp_scaler_kind_get(amp_scaler_kind kind);
int amp_scaler_kind_from_name(const char *name); /* -1 when unknown */
extern const char AMP_SCALER_KIND_NAMES[];       /* "none, static, pytorch, keras, deepspeed" */

/* The defaults of a kind (the table above). */
amp_scaler_config amp_scaler_defaults(amp_scaler_kind kind);
/* Checks the fields the kind uses; an error names the field (and so the command-line option of the
 * same name: init_scale is --init-scale). A static scale of 0 or less is rejected here. */
bool amp_scaler_config_check(const amp_scaler_config *cfg, data_err *err);
/* Starts a scaler (stops with exit 2 on a config amp_scaler_config_check rejects). */
void amp_scaler_init(amp_scaler *s, const amp_scaler_config *cfg);

/* The scaler of a run's config ("fp16" section, DeepSpeed's keys): amp/setup.h,
 * amp_scaler_init_from_config. */

/* S, the factor the loss is multiplied by before backward. */
float amp_scaler_scale(const amp_scaler *s);
/* 1/S as PyTorch computes it: (float)(1.0 / (double)S). */
float amp_scaler_inv_scale(const amp_scaler *s);

/* Unscales the gradients in place (g *= 1/S) and looks for inf and NaN in the same pass; returns
 * found_inf (true when any value, before unscaling, was +inf, -inf or NaN). Once per step. */
bool amp_scaler_unscale(amp_scaler *s, const clip_span *grads, int nspans);

/* Ends the step: decides skip or not, and the next scale, by the kind's rule. found_inf is passed in
 * (rather than remembered from the unscale) so that data-parallel ranks can agree on it first. */
amp_update amp_scaler_update(amp_scaler *s, bool found_inf);

bool amp_scaler_status_is_fatal(amp_scaler_status status);
const char *amp_scaler_status_name(amp_scaler_status status); /* "ok", "skipped_fixed", ... */
/* A readable account of an update: "overflow at scale 65536: step skipped, scale -> 32768", or for a fatal
 * status the diagnosis and what to do. Returns buf. */
const char *amp_scaler_explain(const amp_scaler *s, const amp_update *u, char *buf, size_t len);
/* The trainer's stop for a fatal status: prints the explanation in the project's error format (what
 * was expected, what was found, the advice: use bf16, lower the learning rate, check the data) and exits 2. */
_Noreturn void amp_scaler_stop(const amp_scaler *s, const amp_update *u, long step);

/* ---------------------------------------------------------------- checkpoints
 * The state as string key/values, for a checkpoint's metadata (safetensors metadata is string to
 * string). Numbers are written so that they read back bit for bit. Keys:
 *   loss_scaler.kind, loss_scaler.scale, loss_scaler.growth_tracker, loss_scaler.hysteresis,
 *   loss_scaler.iter, loss_scaler.last_overflow_iter, loss_scaler.skipped */
enum { AMP_SCALER_NSTATE = 7 };
typedef struct {
    char key[40];
    char value[48];
} amp_kv;

/* Fills kv[0..AMP_SCALER_NSTATE) and returns AMP_SCALER_NSTATE. Call between steps (not between an
 * unscale and its update). */
int amp_scaler_save_state(const amp_scaler *s, amp_kv kv[AMP_SCALER_NSTATE]);
/* Restores the state saved by amp_scaler_save_state into a scaler set up with the same kind (the
 * config's numbers come from the run's config, not from the checkpoint). Keys it does not know are
 * ignored (a checkpoint holds other metadata too); a missing key, a value that is not a number in range,
 * or another kind is an error naming the key. */
bool amp_scaler_load_state(amp_scaler *s, const amp_kv *kv, int n, data_err *err);

#endif
