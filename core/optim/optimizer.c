/* optimizer.c: the optimizer table, the update kernels on flat fp32 spans, configuration by name or
 * DeepSpeed JSON, and the step over a model's spans. Formulas and conventions: optimizer.h. */
#include "optim/optimizer.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/mem.h"
#include "ops/isa.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Spans shorter than this are updated by one thread: starting a team of threads costs a few microseconds,
 * which is more than updating 32K floats (a bias or a norm gain) takes. */
#define OPTIM_PARALLEL_MIN 32768

/* ================================================================ the table */

static const optim_info optim_table[OPTIM_NKINDS] = {
    [OPTIM_SGD] = {"sgd", "SGD (plain; L2 weight decay added to the gradient)", 0,
                   {.lr = 1e-3, .max_trust = INFINITY}},
    [OPTIM_MOMENTUM] = {"momentum", "SGD with momentum (PyTorch semantics, optional Nesterov)", 1,
                        {.lr = 1e-3, .momentum = 0.9, .max_trust = INFINITY}},
    [OPTIM_ADAM] = {"adam", "Adam (L2 weight decay added to the gradient)", 2,
                    {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .max_trust = INFINITY}},
    [OPTIM_ADAMW] = {"adamw", "AdamW (Adam with decoupled weight decay)", 2,
                     {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01,
                      .max_trust = INFINITY}},
    [OPTIM_LAMB] = {"lamb", "LAMB (Adam direction, decoupled decay, per-tensor trust ratio)", 2,
                    {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6, .weight_decay = 0.01,
                     .grad_averaging = true, .max_trust = INFINITY}},
};

const optim_info *optim_info_of(optim_kind kind) {
    MP_ASSERT(kind >= 0 && kind < OPTIM_NKINDS, "optimizer kind %d out of range", (int)kind);
    return &optim_table[kind];
}

size_t optim_state_bytes(optim_kind kind, size_t n) {
    return (size_t)optim_info_of(kind)->state_floats * sizeof(float) * n;
}

bool optim_decays_ndim(int ndim) { return ndim >= 2; }

/* ================================================================ kernels
 * Every loop below is element-wise: element i of the result depends only on element i of the inputs. That is
 * what makes a shard update equal to the same slice of a whole update, and what lets the loops run as
 * `omp parallel for simd` (threads over chunks, SIMD lanes within a chunk) with bit-identical results. */

OPS_ISA_LAB_CLONES
void optim_sgd_update(float *param, const float *grad, size_t n, const optim_hparams *h) {
    const float lr = (float)h->lr, wd = (float)h->weight_decay;
#pragma omp parallel for simd if (parallel: n >= OPTIM_PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) param[i] -= lr * (grad[i] + wd * param[i]);
}

/* SGD with momentum, as torch.optim.SGD: for each element, with g the gradient and p the parameter,
 *     g = g + wd * p                                    (L2 decay, part of the gradient)
 *     b = momentum * b + (1 - dampening) * g            (the momentum buffer)
 *     p = p - lr * (g + momentum * b)    with Nesterov (look ahead along the buffer), else
 *     p = p - lr * b
 * PyTorch starts the buffer as a copy of g at t = 1. The buffer is still zero then, so that is the same
 * formula with dampening 0: the plumbing passes dampening = 0 at t = 1.
 * Locals for the loops: lr, wd, momentum, dampening (floats), nesterov (bool).
 * The Nesterov choice is made outside the loop, not per element: a branch inside would stop the compiler
 * from vectorising the loop. */
OPS_ISA_LAB_CLONES
void optim_momentum_update(float *param, const float *grad, float *buf, size_t n, const optim_hparams *h, long step) {
    MP_ASSERT(step >= 1, "optimizer steps count from 1, got %ld", step);
    const float lr = (float)h->lr, wd = (float)h->weight_decay, momentum = (float)h->momentum;
    const float dampening = step == 1 ? 0.0f : (float)h->dampening;
    const bool nesterov = h->nesterov;
    /* LAB 02 BEGIN SGD with momentum: L2 decay into g, the momentum buffer, the step (plain or Nesterov) */
    if (nesterov) {
#pragma omp parallel for simd if (parallel: n >= OPTIM_PARALLEL_MIN)
        for (size_t i = 0; i < n; i++) {
            float g = grad[i] + wd * param[i];
            float b = momentum * buf[i] + (1.0f - dampening) * g;
            buf[i] = b;
            param[i] -= lr * (g + momentum * b);
        }
    } else {
#pragma omp parallel for simd if (parallel: n >= OPTIM_PARALLEL_MIN)
        for (size_t i = 0; i < n; i++) {
            float g = grad[i] + wd * param[i];
            float b = momentum * buf[i] + (1.0f - dampening) * g;
            buf[i] = b;
            param[i] -= lr * b;
        }
    }
    /* LAB 02 END */
}

/* Bias correction, computed once per step in double. After t steps from m = v = 0 the moments are
 * weighted sums whose weights add up to 1 - beta^t, not 1, so early moments are too small; dividing by
 * 1 - beta^t undoes that. The division is folded into two per-step constants:
 *     step_size    = lr / (1 - beta1^t)              m_hat = m / (1 - beta1^t)
 *     inv_sqrt_bc2 = 1 / sqrt(1 - beta2^t)           sqrt(v_hat) = sqrt(v) * inv_sqrt_bc2
 * The weights of the new gradient, 1 - beta, are also computed in double and rounded once (as PyTorch does):
 * in float, 1 - 0.999f is 0.00099998713, 1.3e-5 too small, which would make every Adam step 6.7e-6 too long. */
typedef struct {
    float lr, beta1, beta2, eps, wd;
    float one_minus_beta1, one_minus_beta2;
    float step_size, inv_sqrt_bc2, inv_bc1;
} adam_constants;

static adam_constants adam_constants_at(const optim_hparams *h, long step) {
    MP_ASSERT(step >= 1, "optimizer steps count from 1, got %ld", step);
    double bc1 = 1.0 - pow(h->beta1, (double)step), bc2 = 1.0 - pow(h->beta2, (double)step);
    MP_ASSERT(bc1 > 0 && bc2 > 0, "bias correction 1 - beta^t must be > 0 (beta1 %g beta2 %g)", h->beta1, h->beta2);
    return (adam_constants){
        .lr = (float)h->lr, .beta1 = (float)h->beta1, .beta2 = (float)h->beta2, .eps = (float)h->eps,
        .one_minus_beta1 = (float)(1.0 - h->beta1), .one_minus_beta2 = (float)(1.0 - h->beta2),
        .wd = (float)h->weight_decay, .step_size = (float)(h->lr / bc1), .inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2)),
        .inv_bc1 = (float)(1.0 / bc1),
    };
}

/* Adam, as torch.optim.Adam: for each element, with g the gradient and p the parameter,
 *     g = g + wd * p                                    (L2 decay: it goes through the normalisation)
 *     m = beta1 * m + (1 - beta1) * g
 *     v = beta2 * v + (1 - beta2) * g * g
 *     p = p - step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps)
 * Locals for the loop (floats; see adam_constants): beta1, beta2, one_minus_beta1, one_minus_beta2, eps, wd,
 * step_size, inv_sqrt_bc2. */
OPS_ISA_LAB_CLONES
void optim_adam_update(float *param, const float *grad, float *m, float *v, size_t n, const optim_hparams *h,
                       long step) {
    const adam_constants k = adam_constants_at(h, step);
    const float beta1 = k.beta1, beta2 = k.beta2, one_minus_beta1 = k.one_minus_beta1;
    const float one_minus_beta2 = k.one_minus_beta2, eps = k.eps, wd = k.wd;
    const float step_size = k.step_size, inv_sqrt_bc2 = k.inv_sqrt_bc2;
    /* LAB 02 BEGIN Adam: L2 decay into g, first and second moments, the bias-corrected step */
#pragma omp parallel for simd if (parallel: n >= OPTIM_PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] + wd * param[i];
        m[i] = beta1 * m[i] + one_minus_beta1 * g;
        v[i] = beta2 * v[i] + one_minus_beta2 * g * g;
        param[i] -= step_size * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + eps);
    }
    /* LAB 02 END */
}

/* AdamW, as torch.optim.AdamW: the decay shrinks p directly instead of entering the gradient, so it is not
 * divided by sqrt(v) (Loshchilov & Hutter, "Decoupled Weight Decay Regularization"). For each element:
 *     p = p - lr * wd * p                               (decoupled decay, first)
 *     m = beta1 * m + (1 - beta1) * g
 *     v = beta2 * v + (1 - beta2) * g * g
 *     p = p - step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps)
 * Locals for the loop (floats; see adam_constants): lr, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, wd,
 * step_size, inv_sqrt_bc2. */
OPS_ISA_LAB_CLONES
void optim_adamw_update(float *param, const float *grad, float *m, float *v, size_t n, const optim_hparams *h,
                        long step) {
    const adam_constants k = adam_constants_at(h, step);
    const float lr = k.lr, beta1 = k.beta1, beta2 = k.beta2, one_minus_beta1 = k.one_minus_beta1;
    const float one_minus_beta2 = k.one_minus_beta2, eps = k.eps, wd = k.wd;
    const float step_size = k.step_size, inv_sqrt_bc2 = k.inv_sqrt_bc2;
    /* LAB 02 BEGIN AdamW: decoupled decay of p, first and second moments, the bias-corrected step */
#pragma omp parallel for simd if (parallel: n >= OPTIM_PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        float g = grad[i];
        float p = param[i] - lr * wd * param[i];
        m[i] = beta1 * m[i] + one_minus_beta1 * g;
        v[i] = beta2 * v[i] + one_minus_beta2 * g * g;
        param[i] = p - step_size * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + eps);
    }
    /* LAB 02 END */
}

/* LAMB's per-element update direction u = m_hat / (sqrt(v_hat) + eps) + wd * p. Both phases call this one
 * function, so the u that is measured is the u that is applied. */
static inline float lamb_direction(float p, float m, float v, const adam_constants *k) {
    return (m * k->inv_bc1) / (sqrtf(v) * k->inv_sqrt_bc2 + k->eps) + k->wd * p;
}

void optim_lamb_moments(const float *param, const float *grad, float *m, float *v, size_t n, const optim_hparams *h,
                        long step, double *param_sumsq, double *update_sumsq) {
    const adam_constants k = adam_constants_at(h, step);
    const float beta1 = k.beta1, beta2 = k.beta2, one_minus_beta2 = k.one_minus_beta2;
    const float grad_weight = h->grad_averaging ? k.one_minus_beta1 : 1.0f;
    double ps = 0, us = 0;
#pragma omp parallel for simd reduction(+ : ps, us) if (n >= OPTIM_PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        float g = grad[i];
        m[i] = beta1 * m[i] + grad_weight * g;
        v[i] = beta2 * v[i] + one_minus_beta2 * g * g;
        float u = lamb_direction(param[i], m[i], v[i], &k);
        ps += (double)param[i] * param[i];
        us += (double)u * u;
    }
    *param_sumsq = ps;
    *update_sumsq = us;
}

double optim_lamb_trust_ratio(const optim_hparams *h, double param_sumsq, double update_sumsq) {
    double pnorm = sqrt(param_sumsq), unorm = sqrt(update_sumsq);
    /* A zero norm (a freshly zeroed tensor, or a zero update) would give 0 or inf: step as plain Adam. */
    double r = pnorm > 0 && unorm > 0 ? pnorm / unorm : 1.0;
    if (r < h->min_trust) r = h->min_trust;
    if (r > h->max_trust) r = h->max_trust;
    return r;
}

void optim_lamb_apply(float *param, const float *m, const float *v, size_t n, const optim_hparams *h, long step,
                      double trust_ratio) {
    const adam_constants k = adam_constants_at(h, step);
    const float scaled_lr = (float)(h->lr * trust_ratio);
#pragma omp parallel for simd if (parallel: n >= OPTIM_PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) param[i] -= scaled_lr * lamb_direction(param[i], m[i], v[i], &k);
}

void optim_lamb_update(float *param, const float *grad, float *m, float *v, size_t n, const optim_hparams *h,
                       long step) {
    double ps, us;
    optim_lamb_moments(param, grad, m, v, n, h, step, &ps, &us);
    optim_lamb_apply(param, m, v, n, h, step, optim_lamb_trust_ratio(h, ps, us));
}

void optim_update(optim_kind kind, float *param, const float *grad, float *m, float *v, size_t n,
                  const optim_hparams *h, long step) {
    int need = optim_info_of(kind)->state_floats;
    MP_ASSERT((need < 1 || m) && (need < 2 || v), "%s needs %d state arrays", optim_table[kind].name, need);
    switch (kind) {
    case OPTIM_SGD: optim_sgd_update(param, grad, n, h); break;
    case OPTIM_MOMENTUM: optim_momentum_update(param, grad, m, n, h, step); break;
    case OPTIM_ADAM: optim_adam_update(param, grad, m, v, n, h, step); break;
    case OPTIM_ADAMW: optim_adamw_update(param, grad, m, v, n, h, step); break;
    case OPTIM_LAMB: optim_lamb_update(param, grad, m, v, n, h, step); break;
    case OPTIM_NKINDS: break;
    }
}

/* ================================================================ configuration */

#define KIND_BIT(k) (1u << (k))
#define ALL_KINDS (KIND_BIT(OPTIM_NKINDS) - 1)
#define SGD_KINDS (KIND_BIT(OPTIM_SGD) | KIND_BIT(OPTIM_MOMENTUM))
#define ADAM_KINDS (KIND_BIT(OPTIM_ADAM) | KIND_BIT(OPTIM_ADAMW) | KIND_BIT(OPTIM_LAMB))

/* The hyperparameters by name: which kinds take each, where it lives, and its valid range. */
typedef struct {
    const char *name;
    unsigned kinds;
    size_t offset;      /* into optim_hparams */
    bool is_bool;
    double lo, hi;      /* valid values: lo <= x < hi, or x <= hi when hi_closed */
    bool hi_closed;
    const char *range;  /* the range in words, for messages */
} optim_key;

#define HP(field) offsetof(optim_hparams, field)
static const optim_key optim_keys[] = {
    {"lr", ALL_KINDS, HP(lr), false, 0, INFINITY, false, "a finite number >= 0"},
    {"beta1", ADAM_KINDS, HP(beta1), false, 0, 1, false, "a number in [0, 1)"},
    {"beta2", ADAM_KINDS, HP(beta2), false, 0, 1, false, "a number in [0, 1)"},
    {"eps", ADAM_KINDS, HP(eps), false, 0, INFINITY, false, "a finite number >= 0"},
    {"weight_decay", ALL_KINDS, HP(weight_decay), false, 0, INFINITY, false, "a finite number >= 0"},
    {"momentum", SGD_KINDS, HP(momentum), false, 0, 1, false, "a number in [0, 1)"},
    {"dampening", SGD_KINDS, HP(dampening), false, 0, 1, true, "a number in [0, 1]"},
    {"nesterov", SGD_KINDS, HP(nesterov), true, 0, 1, true, "true or false (1 or 0)"},
    {"grad_averaging", KIND_BIT(OPTIM_LAMB), HP(grad_averaging), true, 0, 1, true, "true or false (1 or 0)"},
    {"min_coeff", KIND_BIT(OPTIM_LAMB), HP(min_trust), false, 0, INFINITY, false, "a finite number >= 0"},
    {"max_coeff", KIND_BIT(OPTIM_LAMB), HP(max_trust), false, 0, INFINITY, true, "a number > 0 (inf: no clamp)"},
};
#undef HP
enum { OPTIM_NKEYS = sizeof optim_keys / sizeof optim_keys[0] };

static void kind_names(char *out, size_t len) {
    size_t used = 0;
    out[0] = '\0';
    for (int k = 0; k < OPTIM_NKINDS && used < len; k++)
        used += (size_t)snprintf(out + used, len - used, "%s%s", k ? ", " : "", optim_table[k].name);
}

static void keys_of_kind(optim_kind kind, char *out, size_t len) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < OPTIM_NKEYS && used < len; i++)
        if (optim_keys[i].kinds & KIND_BIT(kind))
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? ", " : "", optim_keys[i].name);
}

optim_kind optim_kind_from_name(const char *name) {
    for (int k = 0; k < OPTIM_NKINDS; k++)
        if (name && strcasecmp(name, optim_table[k].name) == 0) return (optim_kind)k;
    char names[128];
    kind_names(names, sizeof names);
    MP_FAIL_HINT("an optimizer name", "the optimizers are: sgd, momentum, adam, adamw, lamb",
                 "'%s' (known: %s)", name ? name : "(none)", names);
}

optim_config optim_config_default(optim_kind kind) {
    return (optim_config){.kind = kind, .h = optim_info_of(kind)->defaults};
}

void optim_config_set(optim_config *cfg, const char *key, double value) {
    const optim_key *k = NULL;
    for (int i = 0; i < OPTIM_NKEYS; i++)
        if (strcmp(key, optim_keys[i].name) == 0) k = &optim_keys[i];
    char accepted[256];
    keys_of_kind(cfg->kind, accepted, sizeof accepted);
    if (!k || !(k->kinds & KIND_BIT(cfg->kind)))
        MP_FAIL_HINT("a hyperparameter of this optimizer", accepted, "'%s' for %s (it takes: %s)", key,
                     optim_table[cfg->kind].name, accepted);
    bool ok = !isnan(value) && value >= k->lo && (k->hi_closed ? value <= k->hi : value < k->hi);
    if (ok && !k->is_bool && isinf(value)) ok = k->hi_closed && isinf(k->hi);
    if (ok && k->is_bool) ok = value == 0 || value == 1;
    if (!ok) MP_FAIL_HINT(k->range, "check the optimizer config", "%s = %g", key, value);
    char *field = (char *)&cfg->h + k->offset;
    if (k->is_bool) *(bool *)field = value != 0;
    else *(double *)field = value;
    /* torch.optim.SGD: momentum 0 is plain SGD (no buffer), momentum > 0 keeps a buffer. */
    if (strcmp(key, "momentum") == 0) cfg->kind = value > 0 ? OPTIM_MOMENTUM : OPTIM_SGD;
}

void optim_config_check(const optim_config *cfg) {
    const optim_hparams *h = &cfg->h;
    if (cfg->kind == OPTIM_MOMENTUM && h->nesterov && (h->momentum <= 0 || h->dampening != 0))
        MP_FAIL_HINT("Nesterov momentum with momentum > 0 and dampening = 0", "as torch.optim.SGD requires",
                     "nesterov with momentum %g, dampening %g", h->momentum, h->dampening);
    if (cfg->kind == OPTIM_SGD && h->nesterov)
        MP_FAIL_HINT("Nesterov only with momentum > 0", "set momentum, e.g. 0.9", "nesterov with momentum 0");
    if (cfg->kind == OPTIM_LAMB && h->min_trust > h->max_trust)
        MP_FAIL("min_coeff <= max_coeff", "min_coeff %g > max_coeff %g", h->min_trust, h->max_trust);
}

/* Defaults of the DeepSpeed optimizers where they differ from this module's (PyTorch/apex) defaults:
 * DeepSpeed's FusedAdam has weight_decay 0 in both modes; its FusedLamb has eps 1e-8, weight_decay 0 and a
 * trust-ratio clamp of [0.01, 10]. */
static void apply_deepspeed_defaults(optim_config *cfg) {
    if (cfg->kind == OPTIM_ADAM || cfg->kind == OPTIM_ADAMW) cfg->h.weight_decay = 0;
    if (cfg->kind == OPTIM_LAMB) {
        cfg->h.eps = 1e-8;
        cfg->h.weight_decay = 0;
        cfg->h.min_trust = 0.01;
        cfg->h.max_trust = 10.0;
    }
}

static bool json_flag(const cJSON *item, const char *key) {
    if (cJSON_IsBool(item)) return cJSON_IsTrue(item);
    if (cJSON_IsNumber(item) && (item->valuedouble == 0 || item->valuedouble == 1)) return item->valuedouble != 0;
    MP_FAIL("true or false", "optimizer.params.%s is not a boolean", key);
}

optim_config optim_config_from_json(const struct cJSON *optimizer) {
    if (!cJSON_IsObject(optimizer))
        MP_FAIL("an \"optimizer\" object such as {\"type\": \"AdamW\", \"params\": {\"lr\": 6e-4}}",
                "%s", optimizer ? "a value that is not an object" : "nothing");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(optimizer, "type");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(optimizer, "params");
    if (!cJSON_IsString(type)) MP_FAIL("optimizer.type, a string such as \"AdamW\"", "no string 'type'");
    if (params && !cJSON_IsObject(params)) MP_FAIL("optimizer.params, an object", "'params' is not an object");
    for (const cJSON *it = optimizer->child; it; it = it->next)
        if (strcmp(it->string, "type") != 0 && strcmp(it->string, "params") != 0)
            MP_FAIL("only 'type' and 'params' in the optimizer block", "'%s'", it->string);

    optim_config cfg = optim_config_default(optim_kind_from_name(type->valuestring));
    apply_deepspeed_defaults(&cfg);
    /* DeepSpeed: "Adam" is AdamW unless adam_w_mode is false. */
    if (cfg.kind == OPTIM_ADAM) {
        const cJSON *mode = cJSON_GetObjectItemCaseSensitive(params, "adam_w_mode");
        if (!mode || json_flag(mode, "adam_w_mode")) cfg.kind = OPTIM_ADAMW;
    }
    for (const cJSON *it = params ? params->child : NULL; it; it = it->next) {
        const char *key = it->string;
        if (strcmp(key, "betas") == 0) {
            if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !cJSON_IsNumber(it->child) ||
                !cJSON_IsNumber(it->child->next))
                MP_FAIL("optimizer.params.betas as two numbers, e.g. [0.9, 0.95]", "something else");
            optim_config_set(&cfg, "beta1", it->child->valuedouble);
            optim_config_set(&cfg, "beta2", it->child->next->valuedouble);
        } else if (strcmp(key, "adam_w_mode") == 0 || strcmp(key, "torch_adam") == 0) {
            if (cfg.kind != OPTIM_ADAM && cfg.kind != OPTIM_ADAMW)
                MP_FAIL("adam_w_mode and torch_adam only for Adam and AdamW", "'%s' for %s", key, type->valuestring);
            (void)json_flag(it, key); /* adam_w_mode was read above; torch_adam picks an implementation only */
        } else if (strcmp(key, "bias_correction") == 0) {
            if (!json_flag(it, key)) MP_FAIL("bias_correction true (the only mode here)", "false");
        } else if (strcmp(key, "amsgrad") == 0) {
            if (json_flag(it, key)) MP_FAIL("amsgrad false (AMSGrad is not implemented)", "true");
        } else if (cJSON_IsBool(it)) {
            if (strcmp(key, "nesterov") != 0 && strcmp(key, "grad_averaging") != 0)
                MP_FAIL("a number", "optimizer.params.%s is a boolean", key);
            optim_config_set(&cfg, key, cJSON_IsTrue(it) ? 1 : 0);
        } else if (cJSON_IsNumber(it)) {
            optim_config_set(&cfg, key, it->valuedouble);
        } else {
            MP_FAIL("a number or boolean", "optimizer.params.%s has another JSON type", key);
        }
    }
    optim_config_check(&cfg);
    return cfg;
}

void optim_config_format(const optim_config *cfg, char *out, size_t outlen) {
    const optim_hparams *h = &cfg->h;
    int used = snprintf(out, outlen, "%s lr=%g", optim_table[cfg->kind].name, h->lr);
#define APPEND(...) \
    if (used >= 0 && (size_t)used < outlen) used += snprintf(out + used, outlen - (size_t)used, __VA_ARGS__)
    if (cfg->kind == OPTIM_MOMENTUM) {
        APPEND(" momentum=%g", h->momentum);
        if (h->dampening != 0) APPEND(" dampening=%g", h->dampening);
        if (h->nesterov) APPEND(" nesterov");
    }
    if (cfg->kind >= OPTIM_ADAM) APPEND(" betas=(%g, %g) eps=%g", h->beta1, h->beta2, h->eps);
    APPEND(" weight_decay=%g", h->weight_decay);
    if (cfg->kind == OPTIM_LAMB) {
        if (!h->grad_averaging) APPEND(" grad_averaging=false");
        if (h->min_trust > 0 || isfinite(h->max_trust)) APPEND(" trust_clamp=[%g, %g]", h->min_trust, h->max_trust);
    }
#undef APPEND
}

/* ================================================================ state and step */

void optim_state_init_tagged(optim_state *st, optim_kind kind, size_t n, mem_tag tag) {
    int floats = optim_info_of(kind)->state_floats;
    *st = (optim_state){.kind = kind, .n = n};
    if (floats >= 1) st->m = mem_alloc(n * sizeof(float), tag, kind == OPTIM_MOMENTUM ? "optim.buf" : "optim.m");
    if (floats >= 2) st->v = mem_alloc(n * sizeof(float), tag, "optim.v");
}

void optim_state_init(optim_state *st, optim_kind kind, size_t n) { optim_state_init_tagged(st, kind, n, MEM_OPTIM); }

void optim_state_free(optim_state *st) {
    mem_free(st->m);
    mem_free(st->v);
    st->m = st->v = NULL;
    st->n = 0;
}

void optim_step(const optim_config *cfg, optim_state *st, const optim_span *spans, int nspans, double lr) {
    MP_ASSERT(st->kind == cfg->kind, "state made for %s, config is %s", optim_table[st->kind].name,
              optim_table[cfg->kind].name);
    size_t total = 0;
    for (int s = 0; s < nspans; s++) total += spans[s].n;
    MP_ASSERT(total == st->n, "spans cover %zu parameters, the optimizer state %zu", total, st->n);
    long t = st->step + 1;
    size_t offset = 0;
    for (int s = 0; s < nspans; s++) {
        optim_hparams h = cfg->h;
        h.lr = lr;
        if (!spans[s].decay) h.weight_decay = 0;
        optim_update(cfg->kind, spans[s].param, spans[s].grad, st->m ? st->m + offset : NULL,
                     st->v ? st->v + offset : NULL, spans[s].n, &h, t);
        offset += spans[s].n;
    }
    st->step = t;
}
