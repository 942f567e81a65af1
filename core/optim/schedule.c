/* schedule.c: learning-rate schedules by formula, by name (ours and DeepSpeed's) and from DeepSpeed JSON.
 * The formulas are written out in schedule.h. */
#include "optim/schedule.h"

#include "base/error.h"
#include "base/lab.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ================================================================ the formula */

/* Fraction of the warmup done at step t < W: linear t/W, or DeepSpeed's log ramp ln(t+1)/ln(W). */
static double warmup_fraction(const lr_schedule *s, long t) {
    if (s->ramp == LR_RAMP_LOG) return log((double)t + 1.0) / log((double)s->warmup_steps);
    return (double)t / (double)s->warmup_steps;
}

double lr_schedule_at(const lr_schedule *s, long t) {
    if (t < 0) t = 0;
    long W = s->warmup_steps, T = s->total_steps;
    if (s->kind != LR_CONSTANT && t < W) return s->start + (s->peak - s->start) * warmup_fraction(s, t);
    double span = (double)(T - W > 1 ? T - W : 1); /* the decay's length, at least one step */
    switch (s->kind) {
    case LR_CONSTANT:
    case LR_WARMUP_CONSTANT: return s->peak;
    case LR_WARMUP_LINEAR: {
        double left = (double)(T - t) / span; /* 1 at t = W, 0 at t = T */
        return s->end + (s->peak - s->end) * (left > 0 ? left : 0);
    }
    case LR_WARMUP_COSINE: {
        double q = (double)(t - W) / span;    /* 0 at t = W, 1 at t = T */
        if (q > 1) q = 1;
        return s->end + (s->peak - s->end) * 0.5 * (1.0 + cos(M_PI * q));
    }
    case LR_NKINDS: break;
    }
    MP_ASSERT(0, "schedule kind %d out of range", (int)s->kind);
    return 0;
}

/* The usual transformer schedule on its own, as lab 21 writes it (the formula is the warmup_cosine row of
 * schedule.h with the linear ramp; lr_schedule_at keeps its own copy, which every lab's training has used since
 * lab 02, so that no earlier lab waits for this one). */
double lr_warmup_cosine(long t, long W, long T, double start, double peak, double end) {
    if (t < 0) t = 0;
    /* LAB 21 BEGIN warmup + cosine: linear from start to peak over W steps, cosine from peak to end by step T */
    if (t < W) return start + (peak - start) * (double)t / (double)W;
    double span = (double)(T - W > 1 ? T - W : 1);
    double q = (double)(t - W) / span;
    if (q > 1) q = 1;
    return end + (peak - end) * 0.5 * (1.0 + cos(M_PI * q));
    /* LAB 21 END */
}

/* ================================================================ names */

static const char *const lr_kind_names[LR_NKINDS] = {
    [LR_CONSTANT] = "constant",
    [LR_WARMUP_CONSTANT] = "warmup_constant",
    [LR_WARMUP_LINEAR] = "warmup_linear",
    [LR_WARMUP_COSINE] = "warmup_cosine",
};

const char *lr_kind_name(lr_kind kind) {
    MP_ASSERT(kind >= 0 && kind < LR_NKINDS, "schedule kind %d out of range", (int)kind);
    return lr_kind_names[kind];
}

/* Each name with its defaults. Peak, start and end are either absolute or ratios of the optimizer's lr. */
typedef struct {
    const char *name;
    lr_kind kind;
    lr_ramp ramp;
    long warmup_steps;
    bool absolute_peak;   /* peak is `peak` below (DeepSpeed's warmup_max_lr), not the optimizer's lr */
    double peak;
    double start_ratio, end_ratio; /* of the optimizer's lr */
} lr_name_row;

static const lr_name_row lr_names[] = {
    {"constant", LR_CONSTANT, LR_RAMP_LINEAR, 0, false, 0, 0, 0},
    {"warmup_constant", LR_WARMUP_CONSTANT, LR_RAMP_LINEAR, 0, false, 0, 0, 0},
    {"warmup_linear", LR_WARMUP_LINEAR, LR_RAMP_LINEAR, 0, false, 0, 0, 0},
    {"warmup_cosine", LR_WARMUP_COSINE, LR_RAMP_LINEAR, 0, false, 0, 0, 0},
    {"WarmupLR", LR_WARMUP_CONSTANT, LR_RAMP_LOG, 1000, true, 0.001, 0, 0},
    {"WarmupDecayLR", LR_WARMUP_LINEAR, LR_RAMP_LOG, 1000, true, 0.001, 0, 0},
    {"WarmupCosineLR", LR_WARMUP_COSINE, LR_RAMP_LOG, 1000, false, 0, 0, 0.0001},
};
enum { LR_NNAMES = sizeof lr_names / sizeof lr_names[0] };

lr_schedule lr_schedule_constant(double lr) { return (lr_schedule){.kind = LR_CONSTANT, .peak = lr}; }

lr_schedule lr_schedule_warmup_cosine(double peak, long warmup_steps, long total_steps, double end) {
    return (lr_schedule){.kind = LR_WARMUP_COSINE, .peak = peak, .end = end, .warmup_steps = warmup_steps,
                         .total_steps = total_steps};
}

lr_schedule lr_schedule_from_name(const char *name, double optimizer_lr) {
    for (int i = 0; i < LR_NNAMES; i++) {
        const lr_name_row *r = &lr_names[i];
        if (!name || strcasecmp(name, r->name) != 0) continue;
        return (lr_schedule){.kind = r->kind, .ramp = r->ramp, .warmup_steps = r->warmup_steps,
                             .peak = r->absolute_peak ? r->peak : optimizer_lr,
                             .start = r->start_ratio * optimizer_lr, .end = r->end_ratio * optimizer_lr};
    }
    MP_FAIL_HINT("a learning-rate schedule name",
                 "constant, warmup_constant, warmup_linear, warmup_cosine, WarmupLR, WarmupDecayLR, WarmupCosineLR",
                 "'%s'", name ? name : "(none)");
}

/* ================================================================ parameters by name */

typedef enum { SET_PEAK, SET_START, SET_END, SET_WARMUP, SET_WARMUP_DS, SET_TOTAL, SET_RAMP, SET_START_RATIO,
               SET_END_RATIO } lr_target;

static const struct {
    const char *name;
    lr_target target;
} lr_keys[] = {
    {"lr", SET_PEAK},           {"warmup_max_lr", SET_PEAK},        {"warmup_start_lr", SET_START},
    {"warmup_min_lr", SET_START}, {"min_lr", SET_END},              {"warmup_steps", SET_WARMUP},
    {"warmup_num_steps", SET_WARMUP_DS}, {"total_steps", SET_TOTAL}, {"total_num_steps", SET_TOTAL},
    {"warmup_type", SET_RAMP},  {"warmup_min_ratio", SET_START_RATIO}, {"cos_min_ratio", SET_END_RATIO},
};
enum { LR_NKEYS = sizeof lr_keys / sizeof lr_keys[0] };

void lr_schedule_set(lr_schedule *s, const char *key, double value, double optimizer_lr) {
    int found = -1;
    for (int i = 0; i < LR_NKEYS; i++)
        if (strcmp(key, lr_keys[i].name) == 0) found = i;
    if (found < 0)
        MP_FAIL_HINT("a schedule parameter",
                     "lr, warmup_start_lr, min_lr, warmup_steps, total_steps, warmup_type, and DeepSpeed's "
                     "warmup_min_lr, warmup_max_lr, warmup_num_steps, total_num_steps, warmup_min_ratio, cos_min_ratio",
                     "'%s'", key);
    lr_target target = lr_keys[found].target;
    bool is_steps = target == SET_WARMUP || target == SET_WARMUP_DS || target == SET_TOTAL;
    bool is_ratio = target == SET_START_RATIO || target == SET_END_RATIO;
    if (!isfinite(value) || value < 0) MP_FAIL("a finite number >= 0", "%s = %g", key, value);
    if (is_steps && (value != floor(value) || value > 1e15)) MP_FAIL("a whole number of steps", "%s = %g", key, value);
    if (is_ratio && value > 1) MP_FAIL("a ratio of the optimizer's lr in [0, 1]", "%s = %g", key, value);
    if (target == SET_RAMP && value != 0 && value != 1) MP_FAIL("0 (linear) or 1 (log)", "%s = %g", key, value);
    switch (target) {
    case SET_PEAK: s->peak = value; break;
    case SET_START:
        s->start = value;
        /* DeepSpeed's WarmupDecayLR decays back to warmup_min_lr. */
        if (strcmp(key, "warmup_min_lr") == 0 && s->kind == LR_WARMUP_LINEAR) s->end = value;
        break;
    case SET_END: s->end = value; break;
    case SET_WARMUP: s->warmup_steps = (long)value; break;
    case SET_WARMUP_DS: s->warmup_steps = value < 2 ? 2 : (long)value; break; /* as DeepSpeed: at least 2 */
    case SET_TOTAL: s->total_steps = (long)value; break;
    case SET_RAMP: s->ramp = value != 0 ? LR_RAMP_LOG : LR_RAMP_LINEAR; break;
    case SET_START_RATIO: s->start = value * optimizer_lr; break;
    case SET_END_RATIO: s->end = value * optimizer_lr; break;
    }
}

void lr_schedule_check(const lr_schedule *s) {
    const char *name = lr_kind_name(s->kind);
    if (!(isfinite(s->peak) && isfinite(s->start) && isfinite(s->end)) || s->peak < 0 || s->start < 0 || s->end < 0)
        MP_FAIL("learning rates that are finite and >= 0", "%s with peak %g, start %g, end %g", name, s->peak,
                s->start, s->end);
    if (s->warmup_steps < 0 || s->total_steps < 0)
        MP_FAIL("step counts >= 0", "%s with warmup %ld, total %ld", name, s->warmup_steps, s->total_steps);
    if (s->kind != LR_CONSTANT && s->ramp == LR_RAMP_LOG && s->warmup_steps < 2)
        MP_FAIL_HINT("a log warmup of at least 2 steps", "ln(W) would be 0; use warmup_type linear",
                     "warmup_steps %ld", s->warmup_steps);
    if ((s->kind == LR_WARMUP_LINEAR || s->kind == LR_WARMUP_COSINE) && s->total_steps <= s->warmup_steps)
        MP_FAIL_HINT("total_steps greater than warmup_steps", "set total_steps (total_num_steps) to the run's length",
                     "%s with warmup %ld and total %ld", name, s->warmup_steps, s->total_steps);
}

lr_schedule lr_schedule_from_json(const struct cJSON *scheduler, double optimizer_lr) {
    if (!cJSON_IsObject(scheduler))
        MP_FAIL("a \"scheduler\" object such as {\"type\": \"WarmupCosineLR\", \"params\": {...}}", "%s",
                scheduler ? "a value that is not an object" : "nothing");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(scheduler, "type");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(scheduler, "params");
    if (!cJSON_IsString(type)) MP_FAIL("scheduler.type, a string such as \"WarmupLR\"", "no string 'type'");
    if (params && !cJSON_IsObject(params)) MP_FAIL("scheduler.params, an object", "'params' is not an object");
    for (const cJSON *it = scheduler->child; it; it = it->next)
        if (strcmp(it->string, "type") != 0 && strcmp(it->string, "params") != 0)
            MP_FAIL("only 'type' and 'params' in the scheduler block", "'%s'", it->string);
    lr_schedule s = lr_schedule_from_name(type->valuestring, optimizer_lr);
    for (const cJSON *it = params ? params->child : NULL; it; it = it->next) {
        if (strcmp(it->string, "warmup_type") == 0) {
            if (!cJSON_IsString(it) || (strcmp(it->valuestring, "linear") != 0 && strcmp(it->valuestring, "log") != 0))
                MP_FAIL("scheduler.params.warmup_type \"linear\" or \"log\"", "something else");
            lr_schedule_set(&s, "warmup_type", strcmp(it->valuestring, "log") == 0, optimizer_lr);
        } else if (cJSON_IsNumber(it)) {
            lr_schedule_set(&s, it->string, it->valuedouble, optimizer_lr);
        } else {
            MP_FAIL("a number", "scheduler.params.%s is not a number", it->string);
        }
    }
    lr_schedule_check(&s);
    return s;
}

void lr_schedule_format(const lr_schedule *s, char *out, size_t outlen) {
    const char *ramp = s->ramp == LR_RAMP_LOG ? "log" : "linear";
    switch (s->kind) {
    case LR_CONSTANT: snprintf(out, outlen, "constant lr=%g", s->peak); break;
    case LR_WARMUP_CONSTANT:
        snprintf(out, outlen, "warmup_constant peak=%g start=%g warmup=%ld (%s)", s->peak, s->start, s->warmup_steps,
                 ramp);
        break;
    default:
        snprintf(out, outlen, "%s peak=%g start=%g end=%g warmup=%ld (%s) total=%ld", lr_kind_name(s->kind), s->peak,
                 s->start, s->end, s->warmup_steps, ramp, s->total_steps);
    }
}
