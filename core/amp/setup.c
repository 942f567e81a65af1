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

bool amp_recipe_from_config(const train_config *cfg, amp_setup *out, data_err *err) {
    memset(out, 0, sizeof *out);
    if (cfg->fp16.enabled && cfg->bf16.enabled)
        return DATA_ERR(err, "at most one of fp16.enabled and bf16.enabled", "choose one 16-bit format",
                        "fp16.enabled and bf16.enabled are both true");
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
        snprintf(out->source, sizeof out->source, "DeepSpeed config: neither fp16 nor bf16 enabled");
    }
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
