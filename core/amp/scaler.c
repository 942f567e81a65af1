/* scaler.c: the loss scalers: the table of kinds, the fused unscale + inf check, each kind's update rule. */
#include "amp/scaler.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/parse.h"
#include "ops/isa.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ the table of kinds */

/* Each kind's rule: reads found_inf, updates the state, fills u->skipped and u->status. s->iter is the
 * number of this update (0 for the first); the caller advances it afterwards. */
typedef void (*update_rule)(amp_scaler *s, bool found_inf, amp_update *u);

static void update_fixed(amp_scaler *s, bool found_inf, amp_update *u);
static void update_growth_backoff(amp_scaler *s, bool found_inf, amp_update *u);
static void update_hysteresis(amp_scaler *s, bool found_inf, amp_update *u);

static const struct {
    amp_scaler_kind_info info;
    update_rule update;
} KINDS[AMP_SCALER_NKINDS] = {
    [AMP_SCALER_NONE] = {{"none", "no loss scaling (the inf/NaN check and the skip still run)",
                          {AMP_SCALER_NONE, 1, 2, 0.5, 0, 1, false, 1}},
                         update_fixed},
    [AMP_SCALER_STATIC] = {{"static", "a fixed loss scale (DeepSpeed \"loss_scale\": S > 0)",
                            {AMP_SCALER_STATIC, 65536, 2, 0.5, 0, 1, false, 1}},
                           update_fixed},
    [AMP_SCALER_PYTORCH] = {{"pytorch", "torch.amp.GradScaler",
                             {AMP_SCALER_PYTORCH, 65536, 2, 0.5, 2000, 1, false, 0}},
                            update_growth_backoff},
    [AMP_SCALER_KERAS] = {{"keras", "keras LossScaleOptimizer",
                           {AMP_SCALER_KERAS, 32768, 2, 0.5, 2000, 1, false, 0}},
                          update_growth_backoff},
    [AMP_SCALER_DEEPSPEED] = {{"deepspeed", "DeepSpeed DynamicLossScaler, fp16.loss_scale 0",
                               {AMP_SCALER_DEEPSPEED, 65536, 2, 0.5, 1000, 2, false, 1}},
                              update_hysteresis},
};

const char AMP_SCALER_KIND_NAMES[] = "none, static, pytorch, keras, deepspeed";

const amp_scaler_kind_info *amp_scaler_kind_get(amp_scaler_kind kind) {
    MP_ASSERT(kind >= 0 && kind < AMP_SCALER_NKINDS, "scaler kind %d", (int)kind);
    return &KINDS[kind].info;
}

int amp_scaler_kind_from_name(const char *name) {
    for (int k = 0; k < AMP_SCALER_NKINDS; k++)
        if (strcmp(name, KINDS[k].info.name) == 0) return k;
    return -1;
}

amp_scaler_config amp_scaler_defaults(amp_scaler_kind kind) { return amp_scaler_kind_get(kind)->defaults; }

static bool uses_growth_backoff(amp_scaler_kind kind) {
    return kind == AMP_SCALER_PYTORCH || kind == AMP_SCALER_KERAS;
}

/* ------------------------------------------------------------------ setting up */

bool amp_scaler_config_check(const amp_scaler_config *c, data_err *err) {
    if (c->kind < 0 || c->kind >= AMP_SCALER_NKINDS)
        return DATA_ERR(err, "a loss scaler kind", AMP_SCALER_KIND_NAMES, "kind %d", (int)c->kind);
    const char *name = KINDS[c->kind].info.name;
    /* The scale is an fp32 number (PyTorch's _scale tensor is fp32): it must be positive and finite there. */
    if (!(c->init_scale > 0) || !isfinite((float)c->init_scale) || (float)c->init_scale == 0)
        return DATA_ERR(err, "init_scale: a loss scale > 0 that is finite in fp32 (at most 3.4e38)",
                        c->kind == AMP_SCALER_STATIC
                            ? "a static scale multiplies the loss; 0 would zero every gradient and a negative one "
                              "would flip them. DeepSpeed's fp16.loss_scale 0 means dynamic scaling instead"
                            : NULL,
                        "init_scale %g for the %s scaler", c->init_scale, name);
    if (c->kind == AMP_SCALER_NONE && c->init_scale != 1)
        return DATA_ERR(err, "init_scale 1 for the 'none' scaler", "use the static kind for a fixed scale",
                        "init_scale %g", c->init_scale);
    if (uses_growth_backoff(c->kind)) {
        /* PyTorch asserts the same two: growth_factor > 1.0 and backoff_factor < 1.0. */
        if (!(c->growth_factor > 1) || !isfinite(c->growth_factor))
            return DATA_ERR(err, "growth_factor > 1", NULL, "growth_factor %g for the %s scaler", c->growth_factor,
                            name);
        if (!(c->backoff_factor > 0 && c->backoff_factor < 1))
            return DATA_ERR(err, "backoff_factor between 0 and 1 (exclusive)", NULL,
                            "backoff_factor %g for the %s scaler", c->backoff_factor, name);
    }
    if ((uses_growth_backoff(c->kind) || c->kind == AMP_SCALER_DEEPSPEED) && c->growth_interval < 1)
        return DATA_ERR(err, "growth_interval >= 1 (clean steps before the scale grows)", NULL,
                        "growth_interval %d for the %s scaler", c->growth_interval, name);
    if (c->kind == AMP_SCALER_DEEPSPEED) {
        if (c->growth_factor != 2 || c->backoff_factor != 0.5)
            return DATA_ERR(err, "growth_factor 2 and backoff_factor 0.5 for the deepspeed scaler",
                            "DeepSpeed's scale_factor is 2 and its config has no key to change it",
                            "growth_factor %g, backoff_factor %g", c->growth_factor, c->backoff_factor);
        if (c->hysteresis < 1)
            return DATA_ERR(err, "hysteresis >= 1 (1: every overflow halves the scale)", NULL, "hysteresis %d",
                            c->hysteresis);
        if (!(c->min_scale > 0) || !isfinite((float)c->min_scale))
            return DATA_ERR(err, "min_scale > 0 and finite in fp32", NULL, "min_scale %g", c->min_scale);
        if (c->min_scale > c->init_scale)
            return DATA_ERR(err, "min_scale <= init_scale", "on an overflow max(S/2, min) would raise the scale",
                            "min_scale %g above init_scale %g", c->min_scale, c->init_scale);
    }
    return true;
}

void amp_scaler_init(amp_scaler *s, const amp_scaler_config *cfg) {
    amp_scaler_config_check(cfg, NULL);
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->scale = (float)cfg->init_scale;
    s->hysteresis_left = cfg->hysteresis;
    s->last_overflow_iter = -1;
}

float amp_scaler_scale(const amp_scaler *s) { return s->scale; }

/* PyTorch: inv_scale = self._scale.double().reciprocal().float(). For powers of two it is exact. */
float amp_scaler_inv_scale(const amp_scaler *s) { return (float)(1.0 / (double)s->scale); }

/* ------------------------------------------------------------------ unscale */

OPS_ISA_LAB_CLONES
bool amp_scaler_unscale(amp_scaler *s, const clip_span *grads, int nspans) {
    if (s->unscaled)
        mp_fail_internal(__FILE__, __LINE__, "!s->unscaled",
                         "amp_scaler_unscale called twice in one step (update %ld): the gradients would be divided "
                         "by the scale %g twice. PyTorch raises the same error: \"unscale_() has already been called "
                         "on this optimizer since the last update().\" Unscale once per step, after backward and "
                         "before clipping; amp_scaler_update ends the step",
                         s->iter, (double)s->scale);
    s->unscaled = true;
    bool found_inf = false;
    /* LAB 05 BEGIN fused unscale and inf/NaN check: one pass, g *= 1/S, flag any value that is not finite */
    /* 1/S is formed in double and rounded once to float, as PyTorch does; for a power-of-two S it is exact, so
     * unscaling restores the gradients bit for bit (unless they are subnormal). The check looks at each value
     * before it is multiplied, in the same pass, so the gradients are read from memory once: on a large model
     * this loop is bandwidth-bound and a second pass would double its cost. A large span is split over the
     * threads (each value is still read and written once; the order of the products does not matter), and
     * each thread works on several values per instruction (simd): the flag is an int OR-ed together, which the
     * compiler can keep in a vector register, where a bool || would keep the loop one value at a time. */
    float inv_scale = (float)(1.0 / (double)s->scale);
    /* With S = 1 (no loss scaling: the bf16 recipe) g * 1 is g, bit for bit: the pass only looks, and writes
     * nothing back (half the memory traffic of a pass that reads and writes). */
    const bool only_check = inv_scale == 1.0f;
    for (int k = 0; k < nspans; k++) {
        float *g = grads[k].data;
        int bad = 0;
        if (only_check) {
#pragma omp parallel for simd schedule(static) reduction(| : bad) if (parallel: grads[k].n >= (1u << 18))
            for (size_t i = 0; i < grads[k].n; i++) bad |= !isfinite(g[i]);
        } else {
#pragma omp parallel for simd schedule(static) reduction(| : bad) if (parallel: grads[k].n >= (1u << 18))
            for (size_t i = 0; i < grads[k].n; i++) {
                bad |= !isfinite(g[i]); /* +inf, -inf and NaN; NaN * inv_scale stays NaN */
                g[i] *= inv_scale;
            }
        }
        found_inf |= bad;
    }
    /* LAB 05 END */
    return found_inf;
}

/* ------------------------------------------------------------------ the update rules */

/* none and static: the scale never moves; a non-finite gradient skips the step. */
static void update_fixed(amp_scaler *s, bool found_inf, amp_update *u) {
    (void)s;
    /* LAB 04 BEGIN static loss scaling: the scale stays fixed; skip a step whose gradients are not finite, and say so */
    /* A fixed S cannot back off, so an overflow is reported (AMP_SCALER_SKIPPED_FIXED) rather than absorbed: the
     * trainer logs it and, when it repeats, advises a smaller S or a dynamic scaler. A clean step keeps the
     * AMP_SCALER_OK that amp_scaler_update set, and s->scale is left alone in both cases. */
    u->skipped = found_inf;
    if (found_inf) u->status = AMP_SCALER_SKIPPED_FIXED;
    /* LAB 04 END */
}

/* pytorch and keras: torch.amp.GradScaler.update (aten's _amp_update_scale_ kernel). */
static void update_growth_backoff(amp_scaler *s, bool found_inf, amp_update *u) {
    /* LAB 05 BEGIN dynamic loss scaling: back off on overflow, grow after a clean interval */
    if (found_inf) {
        /* The scale was too large for some gradient: skip the step, lower the scale, start counting again. */
        u->skipped = true;
        s->scale = (float)(s->scale * s->cfg.backoff_factor);
        s->growth_tracker = 0;
    } else {
        u->skipped = false;
        /* This step was clean, so it counts before the comparison: growth after exactly growth_interval
         * clean steps in a row. */
        int successful = s->growth_tracker + 1;
        if (successful == s->cfg.growth_interval) {
            float grown = (float)(s->scale * s->cfg.growth_factor);
            if (isfinite(grown)) s->scale = grown; /* never grow the scale to inf in fp32 */
            s->growth_tracker = 0;
        } else {
            s->growth_tracker = successful;
        }
    }
    /* LAB 05 END */
}

/* deepspeed: DynamicLossScaler.update_scale, with the hysteresis ("delayed_shift") and the floor. */
static void update_hysteresis(amp_scaler *s, bool found_inf, amp_update *u) {
    const amp_scaler_config *c = &s->cfg;
    /* LAB 09 BEGIN hysteresis loss scaling (DeepSpeed): absorb overflows before halving, grow after a clean window */
    if (found_inf) {
        u->skipped = true; /* every overflow skips its step, whether or not the scale moves */
        if (c->hysteresis == 1 || s->hysteresis_left == 1) {
            /* The hysteresis is used up: lower the scale, unless it is already at the floor. There, lowering
             * is impossible and the gradients overflow anyway: DeepSpeed raises "Current loss scale already at
             * minimum"; the caller stops the run with that diagnosis. */
            if (s->scale == (float)c->min_scale) u->status = AMP_SCALER_AT_MINIMUM;
            else s->scale = (float)fmax(s->scale * c->backoff_factor, c->min_scale);
        } else {
            s->hysteresis_left -= 1; /* tolerate this overflow: one fewer left before the scale halves */
        }
        s->last_overflow_iter = s->iter;
    } else {
        u->skipped = false;
        if (c->consecutive_hysteresis) s->hysteresis_left = c->hysteresis; /* refill on every clean step */
        /* A full window of clean steps since the last overflow (or since the start, when last_overflow_iter is
         * -1): double the scale and forgive earlier overflows. */
        if ((s->iter - s->last_overflow_iter) % c->growth_interval == 0) {
            if (!c->consecutive_hysteresis) s->hysteresis_left = c->hysteresis;
            float grown = (float)(s->scale * c->growth_factor);
            if (isfinite(grown)) s->scale = grown;
        }
    }
    /* LAB 09 END */
}

amp_update amp_scaler_update(amp_scaler *s, bool found_inf) {
    amp_update u = {.scale = s->scale, .status = AMP_SCALER_OK};
    KINDS[s->cfg.kind].update(s, found_inf, &u);
    s->iter++;
    s->unscaled = false;
    if (u.skipped) {
        s->skipped++;
        s->consecutive_skipped++;
    } else {
        s->consecutive_skipped = 0;
    }
    /* PyTorch keeps halving forever; a scale below fp32's normal range means every step for ~140 in a row
     * overflowed, which no scale will fix. */
    if (u.status == AMP_SCALER_OK && uses_growth_backoff(s->cfg.kind) && !(s->scale >= FLT_MIN))
        u.status = AMP_SCALER_SCALE_VANISHED;
    u.next_scale = s->scale;
    return u;
}

/* ------------------------------------------------------------------ explaining */

static const char *const STATUS_NAMES[AMP_SCALER_NSTATUS] = {"ok", "skipped_fixed", "at_minimum", "scale_vanished"};

bool amp_scaler_status_is_fatal(amp_scaler_status status) {
    return status == AMP_SCALER_AT_MINIMUM || status == AMP_SCALER_SCALE_VANISHED;
}

const char *amp_scaler_status_name(amp_scaler_status status) {
    return status >= 0 && status < AMP_SCALER_NSTATUS ? STATUS_NAMES[status] : "?";
}

static const char ADVICE[] =
    "use bf16 (\"bf16\": {\"enabled\": true}: fp32's range, no loss scale needed), lower the learning rate, check "
    "the data (a corrupt batch or extreme tokens); turn on gradient clipping if it is off";

const char *amp_scaler_explain(const amp_scaler *s, const amp_update *u, char *buf, size_t len) {
    const char *kind = KINDS[s->cfg.kind].info.name;
    switch (u->status) {
    case AMP_SCALER_AT_MINIMUM:
        snprintf(buf, len,
                 "Current loss scale already at minimum: gradients overflowed at scale %g = min_loss_scale, "
                 "%ld skipped step%s in a row. The scale cannot go lower and fp16 still overflows: the gradients "
                 "themselves are exploding, which a loss scale cannot fix",
                 (double)u->scale, s->consecutive_skipped, s->consecutive_skipped == 1 ? "" : "s");
        break;
    case AMP_SCALER_SCALE_VANISHED:
        snprintf(buf, len,
                 "the %s loss scale fell to %g after %ld overflowing steps in a row: every step has inf or NaN "
                 "gradients whatever the scale, so they are not overflowing fp16 but exploding (or NaN from the "
                 "forward pass)",
                 kind, (double)u->next_scale, s->consecutive_skipped);
        break;
    case AMP_SCALER_SKIPPED_FIXED:
        if (s->cfg.kind == AMP_SCALER_NONE)
            snprintf(buf, len,
                     "inf/NaN gradients with no loss scaling: step skipped. No scale is involved, so the cause is "
                     "elsewhere: learning rate, clipping, initialisation or data");
        else
            snprintf(buf, len,
                     "inf/NaN gradients at the static scale %g: step skipped. A static scale cannot back off; if this "
                     "repeats, lower fp16.loss_scale or use dynamic scaling (fp16.loss_scale 0)",
                     (double)u->scale);
        break;
    default:
        if (!u->skipped && u->next_scale > u->scale)
            snprintf(buf, len, "clean step at scale %g: scale grows to %g", (double)u->scale, (double)u->next_scale);
        else if (!u->skipped)
            snprintf(buf, len, "clean step at scale %g", (double)u->scale);
        else if (u->next_scale < u->scale)
            snprintf(buf, len, "inf/NaN gradients at scale %g: step skipped, scale backs off to %g", (double)u->scale,
                     (double)u->next_scale);
        else
            snprintf(buf, len, "inf/NaN gradients at scale %g: step skipped, scale kept (hysteresis %d left)",
                     (double)u->scale, s->hysteresis_left);
    }
    return buf;
}

void amp_scaler_stop(const amp_scaler *s, const amp_update *u, long step) {
    char what[640];
    amp_scaler_explain(s, u, what, sizeof what);
    mp_fail_input_hint(__FILE__, __LINE__, "fp16 gradients that a loss scale can keep finite", ADVICE, "step %ld: %s",
                       step, what);
}

/* ------------------------------------------------------------------ checkpoints */

static const char *const STATE_KEYS[AMP_SCALER_NSTATE] = {
    "loss_scaler.kind", "loss_scaler.scale", "loss_scaler.growth_tracker", "loss_scaler.hysteresis",
    "loss_scaler.iter", "loss_scaler.last_overflow_iter", "loss_scaler.skipped"};

int amp_scaler_save_state(const amp_scaler *s, amp_kv kv[AMP_SCALER_NSTATE]) {
    MP_ASSERT(!s->unscaled, "loss scaler state saved between an unscale and its update (update %ld)", s->iter);
    for (int i = 0; i < AMP_SCALER_NSTATE; i++) snprintf(kv[i].key, sizeof kv[i].key, "%s", STATE_KEYS[i]);
    snprintf(kv[0].value, sizeof kv[0].value, "%s", KINDS[s->cfg.kind].info.name);
    snprintf(kv[1].value, sizeof kv[1].value, "%.9g", (double)s->scale); /* 9 digits: any float reads back exactly */
    snprintf(kv[2].value, sizeof kv[2].value, "%d", s->growth_tracker);
    snprintf(kv[3].value, sizeof kv[3].value, "%d", s->hysteresis_left);
    snprintf(kv[4].value, sizeof kv[4].value, "%ld", s->iter);
    snprintf(kv[5].value, sizeof kv[5].value, "%ld", s->last_overflow_iter);
    snprintf(kv[6].value, sizeof kv[6].value, "%ld", s->skipped);
    return AMP_SCALER_NSTATE;
}

static const char *find_value(const amp_kv *kv, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (strcmp(kv[i].key, key) == 0) return kv[i].value;
    return NULL;
}

/* An integer value of `key` in [lo, hi]. */
static bool load_int(const char *key, const char *text, long lo, long hi, long *out, data_err *err) {
    int64_t v;
    if (!parse_i64(text, &v) || v < lo || v > hi)
        return DATA_ERR(err, "an integer in range", NULL, "%s = '%s' (expected %ld .. %ld)", key, text, lo, hi);
    *out = (long)v;
    return true;
}

bool amp_scaler_load_state(amp_scaler *s, const amp_kv *kv, int n, data_err *err) {
    const char *values[AMP_SCALER_NSTATE];
    for (int i = 0; i < AMP_SCALER_NSTATE; i++)
        if (!(values[i] = find_value(kv, n, STATE_KEYS[i])))
            return DATA_ERR(err, "every loss_scaler.* key of a checkpoint written with a loss scaler", NULL,
                            "%s is missing", STATE_KEYS[i]);
    const char *kind = KINDS[s->cfg.kind].info.name;
    if (strcmp(values[0], kind) != 0)
        return DATA_ERR(err, "the loss scaler this run is configured with", "resume with the checkpoint's precision "
                        "settings (its config is in the metadata), or start the scaler afresh",
                        "loss_scaler.kind = '%s', this run's scaler is '%s'", values[0], kind);
    double scale;
    if (!parse_double(values[1], &scale) || !(scale > 0) || !isfinite((float)scale))
        return DATA_ERR(err, "a loss scale > 0, finite in fp32", NULL, "loss_scaler.scale = '%s'", values[1]);
    long tracker, hysteresis, iter, last_overflow, skipped;
    long max_tracker = uses_growth_backoff(s->cfg.kind) ? s->cfg.growth_interval - 1 : 0;
    long lo_hyst = s->cfg.kind == AMP_SCALER_DEEPSPEED ? 1 : s->cfg.hysteresis;
    if (!load_int(STATE_KEYS[2], values[2], 0, max_tracker, &tracker, err) ||
        !load_int(STATE_KEYS[3], values[3], lo_hyst, s->cfg.hysteresis, &hysteresis, err) ||
        !load_int(STATE_KEYS[4], values[4], 0, INT64_MAX / 2, &iter, err) ||
        !load_int(STATE_KEYS[5], values[5], -1, iter - 1, &last_overflow, err) ||
        !load_int(STATE_KEYS[6], values[6], 0, iter, &skipped, err))
        return false;
    if (s->cfg.kind == AMP_SCALER_NONE && scale != 1)
        return DATA_ERR(err, "scale 1 for the 'none' scaler", NULL, "loss_scaler.scale = '%s'", values[1]);
    s->scale = (float)scale;
    s->growth_tracker = (int)tracker;
    s->hysteresis_left = (int)hysteresis;
    s->iter = iter;
    s->last_overflow_iter = last_overflow;
    s->skipped = skipped;
    s->consecutive_skipped = 0;
    s->unscaled = false;
    return true;
}
