/* setup.c: DeepSpeed sections, Keras policy names and PyTorch flags mapped onto one recipe and scaler. */
#include "amp/setup.h"

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
    return true;
}

/* ------------------------------------------------------------------ Keras */

static const struct {
    const char *name;
    int recipe; /* -1: rejected */
    amp_scaler_kind scaler;
    const char *why_rejected;
} KERAS_POLICIES[] = {
    {"float32", AMP_RECIPE_FP32, AMP_SCALER_NONE, NULL},
    {"mixed_float16", AMP_RECIPE_FP16, AMP_SCALER_KERAS, NULL},
    {"mixed_bfloat16", AMP_RECIPE_BF16, AMP_SCALER_NONE, NULL},
    {"bfloat16", AMP_RECIPE_BF16_PURE, AMP_SCALER_NONE, NULL},
    {"float16", -1, AMP_SCALER_NONE,
     "fp16 variables with no fp32 master copy and no loss scaling: gradients below 2^-24 flush to zero and "
     "updates smaller than half an fp16 ulp of their weight vanish; use 'mixed_float16'"},
};

bool amp_recipe_from_keras(const char *policy_name, amp_setup *out, data_err *err) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < sizeof KERAS_POLICIES / sizeof *KERAS_POLICIES; i++) {
        if (strcmp(policy_name, KERAS_POLICIES[i].name) != 0) continue;
        if (KERAS_POLICIES[i].recipe < 0)
            return DATA_ERR(err, "a Keras policy mixpar trains with: float32, mixed_float16, mixed_bfloat16, bfloat16",
                            KERAS_POLICIES[i].why_rejected, "policy '%s'", policy_name);
        out->recipe = (amp_recipe)KERAS_POLICIES[i].recipe;
        out->scaler = amp_scaler_defaults(KERAS_POLICIES[i].scaler);
        snprintf(out->source, sizeof out->source, "Keras policy '%s'", policy_name);
        return true;
    }
    return DATA_ERR(err, "a Keras policy name: float32, mixed_float16, mixed_bfloat16, bfloat16", NULL, "policy '%s'",
                    policy_name);
}

/* ------------------------------------------------------------------ PyTorch */

/* Spellings of the autocast dtype; 0 = no autocast (fp32). */
static const struct {
    const char *name;
    int bits; /* 32, 16 (fp16), 17 (bf16): just a tag */
} TORCH_DTYPES[] = {
    {"float32", 32}, {"float", 32}, {"none", 32}, {"off", 32},
    {"float16", 16}, {"half", 16},  {"bfloat16", 17},
};

bool amp_recipe_from_torch(const char *autocast_dtype, bool grad_scaler, amp_setup *out, data_err *err) {
    memset(out, 0, sizeof *out);
    const char *name = strncmp(autocast_dtype, "torch.", 6) == 0 ? autocast_dtype + 6 : autocast_dtype;
    int tag = 0;
    for (size_t i = 0; i < sizeof TORCH_DTYPES / sizeof *TORCH_DTYPES; i++)
        if (strcmp(name, TORCH_DTYPES[i].name) == 0) tag = TORCH_DTYPES[i].bits;
    if (!tag)
        return DATA_ERR(err, "an autocast dtype: float16 (half), bfloat16, or float32 / none for no autocast", NULL,
                        "dtype '%s'", autocast_dtype);
    const char *scaler_text = grad_scaler ? "GradScaler(enabled=True)" : "no GradScaler";
    if (tag == 16 && !grad_scaler)
        return DATA_ERR(err, "autocast(dtype=torch.float16) together with a GradScaler",
                        "small fp16 gradients flush to zero without a loss scale (lab 04): add torch.amp.GradScaler()",
                        "autocast dtype %s with %s", autocast_dtype, scaler_text);
    if (tag != 16 && grad_scaler)
        return DATA_ERR(err, "a GradScaler only with autocast(dtype=torch.float16)",
                        tag == 17 ? "bf16 has fp32's exponent range, so nothing underflows that a scale would save; "
                                    "drop the GradScaler"
                                  : "fp32 gradients do not underflow; drop the GradScaler",
                        "autocast dtype %s with %s", autocast_dtype, scaler_text);
    out->recipe = tag == 16 ? AMP_RECIPE_FP16 : tag == 17 ? AMP_RECIPE_BF16 : AMP_RECIPE_FP32;
    out->scaler = amp_scaler_defaults(tag == 16 ? AMP_SCALER_PYTORCH : AMP_SCALER_NONE);
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
                             .fp8_margin = setup->fp8_margin, .fp8_unscaled = setup->fp8_unscaled};
}
