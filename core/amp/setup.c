/* setup.c: DeepSpeed sections, Keras policy names and PyTorch flags mapped onto one recipe and scaler. */
#include "amp/setup.h"

#include "base/error.h"
#include "base/lab.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

bool amp_scaler_config_from_fp16(const config_fp16 *fp16, amp_scaler_config *out, data_err *err) {
    if (!fp16->enabled) {
        *out = amp_scaler_defaults(AMP_SCALER_NONE);
        return true;
    }
    if (!(fp16->loss_scale >= 0) || !isfinite((float)fp16->loss_scale))
        return DATA_ERR(err, "fp16.loss_scale: 0 (dynamic scaling) or a fixed scale > 0, finite in fp32",
                        "a negative scale flips every gradient; use 0 for dynamic scaling", "fp16.loss_scale %g",
                        fp16->loss_scale);
    if (fp16->loss_scale > 0) {
        *out = amp_scaler_defaults(AMP_SCALER_STATIC);
        out->init_scale = fp16->loss_scale;
        return amp_scaler_config_check(out, err);
    }
    if (fp16->initial_scale_power < 0 || fp16->initial_scale_power > 127)
        return DATA_ERR(err, "fp16.initial_scale_power in 0 .. 127 (the scale 2^p must be finite in fp32)", NULL,
                        "fp16.initial_scale_power %d", fp16->initial_scale_power);
    if (fp16->loss_scale_window < 1)
        return DATA_ERR(err, "fp16.loss_scale_window >= 1", NULL, "fp16.loss_scale_window %d", fp16->loss_scale_window);
    if (fp16->hysteresis < 1)
        return DATA_ERR(err, "fp16.hysteresis >= 1", NULL, "fp16.hysteresis %d", fp16->hysteresis);
    double initial = ldexp(1.0, fp16->initial_scale_power);
    if (!(fp16->min_loss_scale > 0) || fp16->min_loss_scale > initial)
        return DATA_ERR(err, "0 < fp16.min_loss_scale <= 2^fp16.initial_scale_power", NULL,
                        "fp16.min_loss_scale %g with fp16.initial_scale_power %d (2^%d = %g)", fp16->min_loss_scale,
                        fp16->initial_scale_power, fp16->initial_scale_power, initial);
    *out = amp_scaler_defaults(AMP_SCALER_DEEPSPEED);
    out->init_scale = initial;
    out->growth_interval = fp16->loss_scale_window;
    out->hysteresis = fp16->hysteresis;
    out->consecutive_hysteresis = fp16->consecutive_hysteresis;
    out->min_scale = fp16->min_loss_scale;
    return amp_scaler_config_check(out, err);
}

bool amp_scaler_init_from_config(amp_scaler *s, const config_fp16 *fp16, data_err *err) {
    amp_scaler_config c;
    if (!amp_scaler_config_from_fp16(fp16, &c, err)) return false;
    amp_scaler_init(s, &c);
    return true;
}

static bool recipe_from_deepspeed(const train_config *cfg, amp_setup *out, data_err *err) {
    if (cfg->fp16.enabled) {
        out->recipe = AMP_RECIPE_FP16;
        if (!amp_scaler_config_from_fp16(&cfg->fp16, &out->scaler, err)) return false;
        snprintf(out->source, sizeof out->source, "DeepSpeed config: fp16.enabled, fp16.loss_scale %g (%s)",
                 cfg->fp16.loss_scale, cfg->fp16.loss_scale == 0 ? "dynamic" : "static");
    } else if (cfg->bf16.enabled) {
        out->recipe = AMP_RECIPE_BF16;
        out->scaler = amp_scaler_defaults(AMP_SCALER_NONE);
        snprintf(out->source, sizeof out->source, "DeepSpeed config: bf16.enabled");
    } else {
        out->recipe = AMP_RECIPE_FP32;
        out->scaler = amp_scaler_defaults(AMP_SCALER_NONE);
        snprintf(out->source, sizeof out->source, "no precision asked for: fp32");
    }
    return true;
}

/* precision.loss_scaler / init_scale / growth_interval on top of the recipe's scaler. */
static bool adjust_scaler(const config_precision *p, amp_setup *out, data_err *err) {
    if (p->loss_scaler[0]) {
        int kind = amp_scaler_kind_from_name(p->loss_scaler);
        if (kind < 0)
            return DATA_ERR(err, "precision.loss_scaler: a scaler kind", AMP_SCALER_KIND_NAMES,
                            "precision.loss_scaler \"%s\"", p->loss_scaler);
        if (kind != AMP_SCALER_NONE && !amp_recipe_get(out->recipe)->low)
            return DATA_ERR(err, "precision.loss_scaler none with an fp32 recipe", "fp32 gradients do not underflow",
                            "precision.loss_scaler \"%s\" with recipe %s", p->loss_scaler,
                            amp_recipe_get(out->recipe)->name);
        out->scaler = amp_scaler_defaults((amp_scaler_kind)kind);
    }
    if (p->init_scale > 0) out->scaler.init_scale = p->init_scale;
    if (p->growth_interval > 0) out->scaler.growth_interval = p->growth_interval;
    if (out->scaler.kind == AMP_SCALER_STATIC && strcmp(p->loss_scaler, "static") == 0 && !(p->init_scale > 0))
        return DATA_ERR(err, "precision.init_scale > 0 with precision.loss_scaler \"static\"",
                        "a static scaler multiplies the loss by init_scale: give it", "precision.init_scale %g",
                        p->init_scale);
    return amp_scaler_config_check(&out->scaler, err);
}

bool amp_recipe_from_config(const train_config *cfg, amp_setup *out, data_err *err) {
    memset(out, 0, sizeof *out);
    const config_precision *p = &cfg->precision;
    /* Every way of asking for a recipe that the file uses, by the key that asks. */
    const struct {
        const char *key;
        bool used;
    } ways[] = { /* the switches first, so two of them read "both true" */
        {"fp16.enabled", cfg->fp16.enabled},          {"bf16.enabled", cfg->bf16.enabled},
        {"precision.recipe", p->recipe[0] != 0},      {"precision.keras_policy", p->keras_policy[0] != 0},
        {"precision.torch_autocast", p->torch_autocast[0] != 0},
    };
    int first = -1;
    for (int i = 0; i < (int)(sizeof ways / sizeof *ways); i++) {
        if (!ways[i].used) continue;
        if (first >= 0)
            return DATA_ERR(err, "one way of choosing the precision", "keep one of the two keys", "%s and %s are both %s",
                            ways[first].key, ways[i].key, i < 2 ? "true" : "given");
        first = i;
    }
    if (p->torch_grad_scaler && !p->torch_autocast[0])
        return DATA_ERR(err, "precision.torch_grad_scaler together with precision.torch_autocast", NULL,
                        "precision.torch_grad_scaler true without an autocast dtype");
    bool ok;
    if (p->recipe[0]) {
        int r = amp_recipe_from_name(p->recipe);
        if (r < 0)
            return DATA_ERR(err, "precision.recipe: a recipe", AMP_RECIPE_NAMES, "precision.recipe \"%s\"", p->recipe);
        out->recipe = (amp_recipe)r;
        out->scaler = amp_scaler_defaults(amp_recipe_get(out->recipe)->scaler);
        snprintf(out->source, sizeof out->source, "precision.recipe \"%s\"", p->recipe);
        ok = true;
    } else if (p->keras_policy[0]) {
        ok = amp_recipe_from_keras(p->keras_policy, out, err);
    } else if (p->torch_autocast[0]) {
        ok = amp_recipe_from_torch(p->torch_autocast, p->torch_grad_scaler, out, err);
    } else {
        ok = recipe_from_deepspeed(cfg, out, err);
    }
    if (!ok || !adjust_scaler(p, out, err)) return false;
    /* stochastic_rounding matters to bf16-pure only; the other recipes keep fp32 (master) weights. */
    out->stochastic_rounding = out->recipe == AMP_RECIPE_BF16_PURE && p->stochastic_rounding;
    out->fp8_history = p->fp8_history > 0 ? p->fp8_history : 16;
    out->fp8_margin = p->fp8_margin;
    out->fp8_unscaled = !p->fp8_scaling;
    out->fp8_mx = p->fp8_mx;
    if (p->fp8_mx && out->recipe != AMP_RECIPE_FP8)
        return DATA_ERR(err, "precision.fp8_mx with precision.recipe fp8", "MXFP8 blocks replace fp8's per-tensor scales",
                        "precision.fp8_mx true with recipe %s", amp_recipe_get(out->recipe)->name);
    return true;
}

/* ------------------------------------------------------------------ mistakes */

static const amp_setup_mistake_info MISTAKES[AMP_NMISTAKES] = {
    [AMP_MISTAKE_FP16_WITHOUT_SCALER] = {"fp16_without_grad_scaler",
                                         "autocast(dtype=torch.float16) together with a GradScaler",
                                         "small fp16 gradients flush to zero without a loss scale (lab 04): add "
                                         "torch.amp.GradScaler()"},
    [AMP_MISTAKE_SCALER_WITH_BF16] = {"grad_scaler_with_bf16", "a GradScaler only with autocast(dtype=torch.float16)",
                                      "bf16 has fp32's exponent range, so nothing underflows that a scale would save; "
                                      "drop the GradScaler"},
    [AMP_MISTAKE_SCALER_WITHOUT_AUTOCAST] = {"grad_scaler_without_autocast",
                                             "a GradScaler only with autocast(dtype=torch.float16)",
                                             "fp32 gradients do not underflow; drop the GradScaler"},
    [AMP_MISTAKE_FP16_VARIABLES] = {"fp16_variables",
                                    "a Keras policy mixpar trains with: float32, mixed_float16, mixed_bfloat16, "
                                    "bfloat16",
                                    "fp16 variables with no fp32 master copy and no loss scaling: gradients below "
                                    "2^-24 flush to zero and updates smaller than half an fp16 ulp of their weight "
                                    "vanish; use 'mixed_float16'"},
    [AMP_MISTAKE_FOREIGN_VARIABLES] = {"foreign_variables",
                                       "variables in float32 (a mixed_ policy) or in the compute dtype itself",
                                       "16-bit variables computed in another dtype are cast on every use and have no "
                                       "fp32 copy to take the updates; Keras names no such policy: use "
                                       "'mixed_bfloat16' or 'bfloat16'"},
};

const amp_setup_mistake_info *amp_setup_mistake_get(amp_setup_mistake m) {
    MP_ASSERT(m >= 0 && m < AMP_NMISTAKES, "mistake %d", (int)m);
    return &MISTAKES[m];
}

/* Records mistake m, with what was found (or prints it and exits 2 when err is NULL). Returns false. */
static bool reject(data_err *err, amp_setup_mistake m, const char *found) {
    return DATA_ERR(err, MISTAKES[m].expected, MISTAKES[m].hint, "%s", found);
}

/* Autocast: fp32 weights, ops cast to the compute dtype. The recipe each compute dtype gives. */
static const amp_recipe AUTOCAST_RECIPE[AMP_NDTYPES] = {
    [AMP_DTYPE_FLOAT32] = AMP_RECIPE_FP32, [AMP_DTYPE_FLOAT16] = AMP_RECIPE_FP16,
    [AMP_DTYPE_BFLOAT16] = AMP_RECIPE_BF16};

static const char *const DTYPE_NAMES[AMP_NDTYPES] = {"float32", "float16", "bfloat16"};

const char *amp_dtype_name(amp_dtype d) { return d >= 0 && d < AMP_NDTYPES ? DTYPE_NAMES[d] : "?"; }

/* ------------------------------------------------------------------ Keras */

/* keras.mixed_precision.Policy(name) (Keras 3: keras.DTypePolicy): the names, and the two dtypes each means. */
static const amp_keras_policy KERAS_POLICIES[] = {
    {"float32", AMP_DTYPE_FLOAT32, AMP_DTYPE_FLOAT32},
    {"mixed_float16", AMP_DTYPE_FLOAT16, AMP_DTYPE_FLOAT32},
    {"mixed_bfloat16", AMP_DTYPE_BFLOAT16, AMP_DTYPE_FLOAT32},
    {"bfloat16", AMP_DTYPE_BFLOAT16, AMP_DTYPE_BFLOAT16},
    {"float16", AMP_DTYPE_FLOAT16, AMP_DTYPE_FLOAT16},
};

const amp_keras_policy *amp_keras_policy_find(const char *name) {
    for (size_t i = 0; i < sizeof KERAS_POLICIES / sizeof *KERAS_POLICIES; i++)
        if (strcmp(name, KERAS_POLICIES[i].name) == 0) return &KERAS_POLICIES[i];
    return NULL;
}

bool amp_recipe_from_dtypes(amp_dtype compute, amp_dtype variable, amp_setup *out, data_err *err) {
    memset(out, 0, sizeof *out);
    MP_ASSERT(compute >= 0 && compute < AMP_NDTYPES && variable >= 0 && variable < AMP_NDTYPES,
              "dtypes %d, %d", (int)compute, (int)variable);
    char found[96];
    snprintf(found, sizeof found, "compute %s, variables %s", DTYPE_NAMES[compute], DTYPE_NAMES[variable]);
    /* LAB 08 BEGIN Keras policy: (compute dtype, variable dtype) -> recipe and loss scaler */
    if (variable == AMP_DTYPE_FLOAT32) {
        /* fp32 variables, 16-bit compute: each layer casts its fp32 weights to the compute dtype as it
         * runs, which is autocast; the optimizer updates the fp32 variables themselves. */
        out->recipe = AUTOCAST_RECIPE[compute];
        /* fp16 compute needs a loss scale: Keras's Model.compile wraps the optimizer in a
         * LossScaleOptimizer under mixed_float16 (from 2^15). bf16 and fp32 have fp32's range. */
        out->scaler = amp_scaler_defaults(compute == AMP_DTYPE_FLOAT16 ? AMP_SCALER_KERAS : AMP_SCALER_NONE);
        return true;
    }
    /* 16-bit variables: the weights themselves are 16-bit and there is no fp32 copy. */
    if (variable != compute) return reject(err, AMP_MISTAKE_FOREIGN_VARIABLES, found);
    if (variable == AMP_DTYPE_FLOAT16) return reject(err, AMP_MISTAKE_FP16_VARIABLES, found);
    /* bf16 variables computed in bf16: pure bf16. bf16's range needs no scale; small updates must be
     * rounded stochastically into the weights (lab 09). */
    out->recipe = AMP_RECIPE_BF16_PURE;
    out->scaler = amp_scaler_defaults(AMP_SCALER_NONE);
    return true;
    /* LAB 08 END */
}

bool amp_recipe_from_keras(const char *policy_name, amp_setup *out, data_err *err) {
    memset(out, 0, sizeof *out);
    const amp_keras_policy *policy = amp_keras_policy_find(policy_name);
    if (!policy)
        return DATA_ERR(err, "a Keras policy name: float32, mixed_float16, mixed_bfloat16, bfloat16", NULL,
                        "policy '%s'", policy_name);
    data_err why;
    if (!amp_recipe_from_dtypes(policy->compute, policy->variable, out, &why))
        return DATA_ERR(err, why.expected, why.hint, "policy '%s' (%s)", policy_name, why.found);
    snprintf(out->source, sizeof out->source, "Keras policy '%s'", policy_name);
    return true;
}

/* ------------------------------------------------------------------ PyTorch */

/* Spellings of the autocast dtype; float32 = no autocast. */
static const struct {
    const char *name;
    amp_dtype dtype;
} TORCH_DTYPES[] = {
    {"float32", AMP_DTYPE_FLOAT32}, {"float", AMP_DTYPE_FLOAT32}, {"none", AMP_DTYPE_FLOAT32},
    {"off", AMP_DTYPE_FLOAT32},     {"float16", AMP_DTYPE_FLOAT16}, {"half", AMP_DTYPE_FLOAT16},
    {"bfloat16", AMP_DTYPE_BFLOAT16},
};

bool amp_recipe_from_torch(const char *autocast_dtype, bool grad_scaler, amp_setup *out, data_err *err) {
    memset(out, 0, sizeof *out);
    const char *name = strncmp(autocast_dtype, "torch.", 6) == 0 ? autocast_dtype + 6 : autocast_dtype;
    int dtype = -1;
    for (size_t i = 0; i < sizeof TORCH_DTYPES / sizeof *TORCH_DTYPES; i++)
        if (strcmp(name, TORCH_DTYPES[i].name) == 0) dtype = (int)TORCH_DTYPES[i].dtype;
    if (dtype < 0)
        return DATA_ERR(err, "an autocast dtype: float16 (half), bfloat16, or float32 / none for no autocast", NULL,
                        "dtype '%s'", autocast_dtype);
    const char *scaler_text = grad_scaler ? "GradScaler(enabled=True)" : "no GradScaler";
    char found[128];
    snprintf(found, sizeof found, "autocast dtype %s with %s", autocast_dtype, scaler_text);
    /* LAB 08 BEGIN PyTorch: autocast dtype + GradScaler -> recipe and scaler, or the mistake the pair is */
    /* fp16 without a loss scale loses the small gradients; a scale without fp16 has nothing to save and
     * only costs a pass over the gradients. Neither is quietly "fixed": the user meant something else. */
    if (dtype == AMP_DTYPE_FLOAT16 && !grad_scaler) return reject(err, AMP_MISTAKE_FP16_WITHOUT_SCALER, found);
    if (dtype != AMP_DTYPE_FLOAT16 && grad_scaler)
        return reject(err, dtype == AMP_DTYPE_BFLOAT16 ? AMP_MISTAKE_SCALER_WITH_BF16
                                                       : AMP_MISTAKE_SCALER_WITHOUT_AUTOCAST,
                      found);
    out->recipe = AUTOCAST_RECIPE[dtype];
    out->scaler = amp_scaler_defaults(grad_scaler ? AMP_SCALER_PYTORCH : AMP_SCALER_NONE);
    /* LAB 08 END */
    snprintf(out->source, sizeof out->source, "PyTorch: autocast dtype %s, %s", autocast_dtype, scaler_text);
    return true;
}

/* ------------------------------------------------------------------ the model's compute mode */

model_precision amp_model_precision(const amp_setup *setup) {
    static const model_compute compute[AMP_NRECIPES] = {
        [AMP_RECIPE_FP32] = MODEL_COMPUTE_FP32, [AMP_RECIPE_TF32] = MODEL_COMPUTE_TF32,
        [AMP_RECIPE_FP16] = MODEL_COMPUTE_FP16, [AMP_RECIPE_FP16_O2] = MODEL_COMPUTE_FP16,
        [AMP_RECIPE_BF16] = MODEL_COMPUTE_BF16, [AMP_RECIPE_BF16_PURE] = MODEL_COMPUTE_BF16,
        [AMP_RECIPE_FP8] = MODEL_COMPUTE_FP8};
    return (model_precision){.compute = compute[setup->recipe], .fp8_history = setup->fp8_history,
                             .fp8_margin = setup->fp8_margin, .fp8_unscaled = setup->fp8_unscaled,
                             .fp8_mx = setup->fp8_mx};
}
