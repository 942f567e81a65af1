/* loss_scale_optimizer.h: Keras's LossScaleOptimizer: an optimizer wrapper that owns the loss scale (lab 08). */
#ifndef MIXPAR_AMP_LOSS_SCALE_OPTIMIZER_H
#define MIXPAR_AMP_LOSS_SCALE_OPTIMIZER_H

/* The three frameworks put the same loss scaling in three places:
 *
 *   PyTorch    a GradScaler object beside the optimizer; the caller runs each part:
 *                  scaler.scale(loss).backward(); scaler.unscale_(opt); clip; scaler.step(opt); scaler.update()
 *   Keras      the optimizer is wrapped (keras.mixed_precision.LossScaleOptimizer) and the scale lives
 *              inside it; Model.fit does this by itself under the 'mixed_float16' policy. In a custom
 *              training loop (TF 2 Keras's API, the names used here):
 *                  scaled_loss = opt.get_scaled_loss(loss)
 *                  scaled_grads = tape.gradient(scaled_loss, model.trainable_variables)
 *                  grads = opt.get_unscaled_gradients(scaled_grads)
 *                  opt.apply_gradients(zip(grads, model.trainable_variables))
 *              apply_gradients is where the decisions are: it checks that every gradient is finite, lets
 *              the inner optimizer step only if so, and updates the scale in the same call.
 *   DeepSpeed  the engine hides all of it: engine.backward(loss); engine.step().
 *
 * With the same scaler rule (kind keras: from 2^15, x2 after dynamic_growth_steps = 2000 clean steps,
 * x0.5 and skip on inf/NaN) the Keras shape gives the same weights, bit for bit, as train_step's AMP step
 * (train/step.h) without clipping: the lab 08 tests check it on the tiny GPT in fp16.
 *
 * In mixpar (the gradients of `loss * S` are S times the gradients of the loss, and model_backward takes
 * that factor directly):
 *
 *     amp_loss_scale_optimizer opt;
 *     amp_lso_init(&opt, &adamw, model_num_params(m), NULL);        // Keras defaults
 *     ...each step:
 *     model_zero_grad(m);
 *     float loss = model_forward(m, inputs, targets, B, T);
 *     model_backward(m, amp_lso_get_scaled_loss(&opt, 1.0f));      // d(S * loss): gradients S times too large
 *     amp_lso_get_unscaled_gradients(&opt, grads, n);                // g *= 1/S
 *     amp_update u = amp_lso_apply_gradients(&opt, grads_and_vars, n, lr); // step or skip; S updated
 *
 * Clipping: a Keras optimizer clips inside apply (its clipnorm / global_clipnorm), so always after the
 * unscale; this wrapper has no clipping, so compare it with train_step at grad_clip 0. */

#include <stdbool.h>
#include <stddef.h>

#include "amp/scaler.h"
#include "optim/clip.h"
#include "optim/optimizer.h"

typedef struct {
    optim_config inner;   /* the wrapped optimizer (keras.optimizers.AdamW(...)) */
    optim_state state;    /* its state (MEM_OPTIM), over the nparams values of the spans laid end to end */
    amp_scaler scaler;    /* the loss scale: kind keras (dynamic) or static (TF 2 Keras's dynamic=False) */
} amp_loss_scale_optimizer;

/* Wraps `inner` for nparams parameters. scale NULL: Keras's defaults (amp_scaler_defaults(AMP_SCALER_KERAS):
 * initial_scale 2^15, dynamic_growth_steps 2000). A scale config of another kind than keras or static, or
 * one amp_scaler_config_check rejects, stops with a message (exit 2). */
void amp_lso_init(amp_loss_scale_optimizer *o, const optim_config *inner, size_t nparams,
                  const amp_scaler_config *scale);
void amp_lso_free(amp_loss_scale_optimizer *o);

/* The current loss scale S (LossScaleOptimizer.loss_scale). */
float amp_lso_loss_scale(const amp_loss_scale_optimizer *o);
/* loss * S, in fp32: what get_scaled_loss returns and backward differentiates. */
float amp_lso_get_scaled_loss(const amp_loss_scale_optimizer *o, float loss);
/* g *= 1/S in place, over every span. No check here: apply_gradients looks at what it is given. */
void amp_lso_get_unscaled_gradients(const amp_loss_scale_optimizer *o, const clip_span *grads, int nspans);
/* If every gradient of every pair is finite, one step of the inner optimizer over the (gradient, weight)
 * pairs with learning rate lr; otherwise nothing is touched (weights, state, step count). Either way the
 * scale is updated, and the update is returned (skipped, scale, next_scale, status: a fatal status is the
 * caller's to stop on, amp_scaler_stop). The spans' n must add up to nparams. */
amp_update amp_lso_apply_gradients(amp_loss_scale_optimizer *o, const optim_span *grads_and_vars, int nspans,
                                   double lr);

#endif
