/* setup.h: one AMP setup (recipe + loss scaler) from a DeepSpeed-style config, a Keras policy name or PyTorch flags. */
#ifndef MIXPAR_AMP_SETUP_H
#define MIXPAR_AMP_SETUP_H

/* The same run can be asked for in three vocabularies; each maps onto one recipe (amp/policy.h):
 *
 *   recipe     DeepSpeed JSON                 Keras policy       PyTorch
 *   fp32       no fp16/bf16 section enabled   "float32"          no autocast, no GradScaler
 *   fp16       "fp16": {"enabled": true}      "mixed_float16"    autocast(dtype=torch.float16) + GradScaler
 *   bf16       "bf16": {"enabled": true}      "mixed_bfloat16"   autocast(dtype=torch.bfloat16), no GradScaler
 *   bf16-pure  -                              "bfloat16"         model.to(torch.bfloat16), no autocast
 *
 * The recipe agrees; the loss scaler keeps each framework's own defaults, because that is what each
 * framework runs: DeepSpeed's section gives the deepspeed scaler (hysteresis 2, window 1000, from 2^16;
 * a fixed "loss_scale" gives the static one), Keras's LossScaleOptimizer starts at 2^15, PyTorch's
 * GradScaler at 2^16 (amp/scaler.h). `mixpar amp policy --keras NAME | --torch DTYPE [--scaler on|off]
 * | --config FILE` prints what each spelling maps to.
 *
 * Combinations that are mistakes are rejected with a message naming the keys, not quietly "fixed":
 *   - fp16.enabled and bf16.enabled both true;
 *   - fp16 autocast without a GradScaler (small gradients flush to zero in fp16: lab 04);
 *   - a GradScaler with bf16 or without autocast (nothing can underflow; the scaler only costs time);
 *   - Keras "float16" (fp16 variables, no fp32 master copy, no loss scaling: updates smaller than half
 *     an fp16 ulp of the weight vanish; lab 09);
 *   - a static fp16.loss_scale that is negative or not finite. (0 is DeepSpeed's "dynamic".)
 */

#include <stdbool.h>

#include "amp/policy.h"
#include "amp/scaler.h"
#include "data/data_err.h"
#include "model/model_lowp.h"
#include "train/config.h"

typedef struct {
    amp_recipe recipe;
    amp_scaler_config scaler;
    char source[96];  /* how it was asked for: "DeepSpeed config: fp16.enabled, fp16.loss_scale 0" */
    bool stochastic_rounding; /* bf16-pure: updates rounded stochastically into the bf16 weights */
    int fp8_history, fp8_margin;
    bool fp8_unscaled;        /* precision.fp8_scaling false */
    bool fp8_mx;              /* precision.fp8_mx: MXFP8 blocks instead of per-tensor scales (lab 30) */
} amp_setup;

/* From a parsed config: DeepSpeed's "fp16" / "bf16" sections, or mixpar's "precision" section (a recipe
 * name, a Keras policy, or PyTorch's autocast dtype + GradScaler switch). Asking in two ways at once is an
 * error naming both keys, even when they agree. precision.loss_scaler / init_scale / growth_interval then
 * adjust the scaler (a scaler on a recipe that cannot underflow is an error, as in amp_recipe_from_torch). */
bool amp_recipe_from_config(const train_config *cfg, amp_setup *out, data_err *err);
/* From a Keras mixed-precision policy name: "float32", "mixed_float16", "mixed_bfloat16", "bfloat16"
 * (and "float16", which is rejected with the reason): the policy's two dtypes, then
 * amp_recipe_from_dtypes. */
bool amp_recipe_from_keras(const char *policy_name, amp_setup *out, data_err *err);
/* From PyTorch's two switches: the autocast dtype ("float32" or "none" for no autocast, "float16" /
 * "half", "bfloat16"; a "torch." prefix is accepted) and whether a GradScaler is enabled (lab 08):
 *
 *   autocast dtype      GradScaler off                     GradScaler on
 *   none / float32      fp32                               rejected: grad_scaler_without_autocast
 *   float16             rejected: fp16_without_grad_scaler fp16, pytorch scaler (2^16)
 *   bfloat16            bf16                               rejected: grad_scaler_with_bf16          */
bool amp_recipe_from_torch(const char *autocast_dtype, bool grad_scaler, amp_setup *out, data_err *err);

/* ---------------------------------------------------------------- Keras: a policy is two dtypes
 * keras.mixed_precision.Policy(name) (Keras 3: keras.DTypePolicy) has a compute_dtype, the dtype layers
 * compute in and return, and a variable_dtype, the dtype the weights are stored in and the optimizer
 * updates. The names Keras defines, and the recipe each pair maps to (amp_recipe_from_dtypes, lab 08):
 *
 *   name             compute_dtype  variable_dtype  recipe      loss scaling
 *   float32          float32        float32         fp32        -
 *   mixed_float16    float16        float32         fp16        LossScaleOptimizer (keras scaler, 2^15)
 *   mixed_bfloat16   bfloat16       float32         bf16        -
 *   bfloat16         bfloat16       bfloat16        bf16-pure   -
 *   float16          float16        float16         rejected: fp16_variables
 *   (16-bit variables with another compute dtype: rejected: foreign_variables; Keras names no such policy)
 *
 * fp32 variables with a 16-bit compute dtype are autocast: the fp32 variables are the weights the optimizer
 * updates, each layer casts them as it runs. Keras's Model.compile wraps the optimizer in a
 * LossScaleOptimizer (amp/loss_scale_optimizer.h) exactly when the policy is mixed_float16. */
typedef enum { AMP_DTYPE_FLOAT32, AMP_DTYPE_FLOAT16, AMP_DTYPE_BFLOAT16, AMP_NDTYPES } amp_dtype;
const char *amp_dtype_name(amp_dtype d); /* "float32", "float16", "bfloat16" (Keras's and PyTorch's names) */

typedef struct {
    const char *name;     /* "mixed_float16" */
    amp_dtype compute;    /* policy.compute_dtype */
    amp_dtype variable;   /* policy.variable_dtype */
} amp_keras_policy;

/* The policy of a name; NULL when Keras has no policy of that name. */
const amp_keras_policy *amp_keras_policy_find(const char *name);
/* The recipe and loss scaler of a (compute dtype, variable dtype) pair, or false with the mistake. */
bool amp_recipe_from_dtypes(amp_dtype compute, amp_dtype variable, amp_setup *out, data_err *err);

/* The combinations amp_recipe_from_torch and amp_recipe_from_dtypes reject, each with its message: the
 * data_err they fill has expected and hint from this table, and found naming the combination. */
typedef enum {
    AMP_MISTAKE_FP16_WITHOUT_SCALER,     /* PyTorch: autocast(float16) with no GradScaler */
    AMP_MISTAKE_SCALER_WITH_BF16,        /* PyTorch: a GradScaler with autocast(bfloat16) */
    AMP_MISTAKE_SCALER_WITHOUT_AUTOCAST, /* PyTorch: a GradScaler with no autocast (fp32) */
    AMP_MISTAKE_FP16_VARIABLES,          /* Keras: float16 variables and compute: no master copy, no scale */
    AMP_MISTAKE_FOREIGN_VARIABLES,       /* Keras: 16-bit variables with another compute dtype */
    AMP_NMISTAKES
} amp_setup_mistake;

typedef struct {
    const char *name;     /* "fp16_without_grad_scaler" */
    const char *expected; /* data_err.expected */
    const char *hint;     /* data_err.hint: why it is a mistake, what to do */
} amp_setup_mistake_info;

const amp_setup_mistake_info *amp_setup_mistake_get(amp_setup_mistake m);

/* The loss scaler of an "fp16" section: not enabled -> none; loss_scale 0 -> deepspeed with the
 * section's initial_scale_power, loss_scale_window, hysteresis, consecutive_hysteresis, min_loss_scale;
 * loss_scale > 0 -> static. Errors name the key ("fp16.loss_scale"). */
bool amp_scaler_config_from_fp16(const config_fp16 *fp16, amp_scaler_config *out, data_err *err);
bool amp_scaler_init_from_config(amp_scaler *s, const config_fp16 *fp16, data_err *err);

/* The model's compute mode for a recipe (model/model_lowp.h): fp16 and fp16-o2 compute in fp16, bf16 and
 * bf16-pure in bf16, tf32 and fp8 as named, fp32 in fp32. */
model_precision amp_model_precision(const amp_setup *setup);

#endif
