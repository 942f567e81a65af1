/* diag.h: diagnosis helpers (lab 24): pure functions on a run's numbers (a loss series, memory samples, parameter
 * hashes, a memory plan) that say whether and where something went wrong. `mixpar doctor` applies them to a run's
 * events; the tests apply them to crafted series. Each rule and its thresholds are documented here and in
 * labs/lab24-common-problems/README.md. */
#ifndef MIXPAR_DIAG_DIAG_H
#define MIXPAR_DIAG_DIAG_H

#include "plan/plan.h"

#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------------ divergence */

/* The divergence rule's thresholds. */
typedef struct {
    int window;       /* the running minimum looks back this many points (not counting the current one) */
    double factor;    /* a point above factor x that minimum is a spike */
    int min_history;  /* no spike is called before this many finite points were seen (the first steps move fast) */
} diag_divergence_rule;

#define DIAG_DIVERGENCE_DEFAULT ((diag_divergence_rule){.window = 50, .factor = 1.5, .min_history = 5})

typedef enum { DIAG_HEALTHY, DIAG_NONFINITE, DIAG_SPIKE } diag_divergence_kind;

typedef struct {
    diag_divergence_kind kind;
    long index;       /* the first point that breaks the rule; -1 when healthy */
    double value;     /* loss[index] */
    double reference; /* the running minimum it was compared with (NAN for a non-finite point) */
} diag_divergence;

/* The first point of loss[0..n) that is not finite (NaN, inf), or that exceeds rule->factor x the smallest finite
 * value among the rule->window points before it, once rule->min_history finite points have been seen. Non-finite
 * points are never part of a minimum. Returns true (and fills *out) when it finds one; false with kind
 * DIAG_HEALTHY and index -1 when the series is healthy. */
bool diag_find_divergence(const double *loss, long n, const diag_divergence_rule *rule, diag_divergence *out);

/* ------------------------------------------------------------------ memory leak */

/* The leak rule's thresholds. */
typedef struct {
    double skip_fraction;  /* the fit leaves out this leading share of the samples: memory allocated once at the
                            * start (optimizer states at the first step, buffers of the first forward) is a step,
                            * not a slope */
    int min_samples;       /* fewer samples in the fit: no verdict */
    double min_t;          /* the slope must be at least min_t standard errors above 0 */
    double min_growth;     /* and grow at least this many bytes over the fitted steps */
} diag_leak_rule;

#define DIAG_LEAK_DEFAULT ((diag_leak_rule){.skip_fraction = 0.25, .min_samples = 6, .min_t = 5.0, .min_growth = 1024})

typedef struct {
    bool leak;
    long first;          /* the first sample in the fit */
    long used;           /* samples in the fit */
    double slope;        /* bytes per step, least squares */
    double slope_se;     /* its standard error (0 when every sample lies on the line) */
    double growth;       /* slope x (last fitted step - first fitted step) */
} diag_leak;

/* Fits bytes = a + slope x step by least squares over the samples from floor(skip_fraction x n) on, and calls it
 * a leak when slope > 0, slope >= min_t x its standard error and the growth over the fitted steps >= min_growth.
 * step[] need not be evenly spaced but must not be all equal. Returns out->leak. */
bool diag_find_leak(const double *step, const double *bytes, long n, const diag_leak_rule *rule, diag_leak *out);

/* ------------------------------------------------------------------ replicas that drift apart */

#define DIAG_NO_HASH 0u /* a (rank, step) that recorded no hash */

typedef struct {
    bool desync;
    long step_index; /* the first step index where some rank's hash differs from rank 0's; -1 when none */
    int rank;        /* the lowest such rank at that step */
    uint64_t expected, got;
} diag_desync;

/* hash[r * nsteps + s]: rank r's parameter hash after step index s (DIAG_NO_HASH: not recorded, ignored). Finds
 * the first step index, and at it the lowest rank, whose hash differs from rank 0's. Returns out->desync. */
bool diag_find_desync(const uint64_t *hash, int nranks, long nsteps, diag_desync *out);

/* ------------------------------------------------------------------ out of memory, before launch */

typedef struct {
    bool fits;
    uint64_t need;       /* the plan's device bytes: model states + activations */
    uint64_t limit;
    int biggest;         /* the mem_tag holding the most bytes */
    double share;        /* its share of need */
    const char *fix;     /* what lowers that tag (a config key to change) */
} diag_oom;

/* Compares a plan (plan/plan.h: bytes per tag on one rank) with a device limit in bytes (0: no limit, fits), names
 * the tag that holds the most bytes and the config change that lowers it. Returns out->fits. */
bool diag_check_oom(const plan_result *plan, uint64_t limit, diag_oom *out);

#endif
