/* loss_scale_optimizer.c: Keras's LossScaleOptimizer over mixpar's flat spans (loss_scale_optimizer.h). */
#include "amp/loss_scale_optimizer.h"

#include "base/error.h"
#include "base/lab.h"

#include <math.h>
#include <string.h>

void amp_lso_init(amp_loss_scale_optimizer *o, const optim_config *inner, size_t nparams,
                  const amp_scaler_config *scale) {
    memset(o, 0, sizeof *o);
    amp_scaler_config cfg = scale ? *scale : amp_scaler_defaults(AMP_SCALER_KERAS);
    if (cfg.kind != AMP_SCALER_KERAS && cfg.kind != AMP_SCALER_STATIC)
        MP_FAIL_HINT("a LossScaleOptimizer scale of kind keras (dynamic) or static (dynamic=False)",
                     "the other kinds are PyTorch's and DeepSpeed's; use amp_scaler with train_step for them",
                     "kind %s", amp_scaler_kind_get(cfg.kind)->name);
    data_err err;
    if (!amp_scaler_config_check(&cfg, &err)) data_err_exit(&err);
    o->inner = *inner;
    optim_state_init(&o->state, inner->kind, nparams);
    amp_scaler_init(&o->scaler, &cfg);
}

void amp_lso_free(amp_loss_scale_optimizer *o) { optim_state_free(&o->state); }

float amp_lso_loss_scale(const amp_loss_scale_optimizer *o) { return amp_scaler_scale(&o->scaler); }

float amp_lso_get_scaled_loss(const amp_loss_scale_optimizer *o, float loss) {
    return loss * amp_scaler_scale(&o->scaler);
}

void amp_lso_get_unscaled_gradients(const amp_loss_scale_optimizer *o, const clip_span *grads, int nspans) {
    /* Keras multiplies by the reciprocal, 1 / S, like PyTorch; for the power-of-two scales of a dynamic
     * scaler the product is exact either way. */
    float inv = amp_scaler_inv_scale(&o->scaler);
    for (int i = 0; i < nspans; i++) clip_scale(grads[i].data, grads[i].n, inv);
}

amp_update amp_lso_apply_gradients(amp_loss_scale_optimizer *o, const optim_span *grads_and_vars, int nspans,
                                   double lr) {
    /* LAB 08 BEGIN LossScaleOptimizer.apply_gradients: step only on finite gradients, then update the scale */
    /* All-finite over every gradient (Keras: _is_all_finite(grads)); one NaN or inf anywhere skips. */
    bool finite = true;
    for (int i = 0; i < nspans && finite; i++)
        for (size_t k = 0; k < grads_and_vars[i].n; k++)
            if (!isfinite(grads_and_vars[i].grad[k])) {
                finite = false;
                break;
            }
    /* The inner optimizer sees only finite, unscaled gradients; a skipped step leaves the weights, its
     * moments and its step count exactly as they were. */
    if (finite) optim_step(&o->inner, &o->state, grads_and_vars, nspans, lr);
    /* The scale learns from this step in the same call: Keras has no separate update(). */
    return amp_scaler_update(&o->scaler, !finite);
    /* LAB 08 END */
}
