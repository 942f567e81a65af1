/* lab09_util.h: helpers for the lab 09 tests: a DeepSpeed scaler and a checked update. */
#ifndef LAB09_UTIL_H
#define LAB09_UTIL_H

#include "amp/scaler.h"
#include "mptest.h"

#include <string.h>

/* DeepSpeed's defaults (scale 2^16, window 1000, hysteresis 2, floor 1) with the given changes. */
static inline amp_scaler lab09_scaler(double init_scale, int window, int hysteresis, bool consecutive, double min_scale) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_DEEPSPEED);
    if (init_scale > 0) c.init_scale = init_scale;
    if (window > 0) c.growth_interval = window;
    if (hysteresis > 0) c.hysteresis = hysteresis;
    c.consecutive_hysteresis = consecutive;
    if (min_scale > 0) c.min_scale = min_scale;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    return s;
}

/* One update compared with what DeepSpeed's DynamicLossScaler decides: skip, next scale, hysteresis left, and
 * the status (AMP_SCALER_AT_MINIMUM when it would raise "Current loss scale already at minimum"). */
#define CHECK_DS(s, overflow, want_skipped, want_next, want_hyst, want_status, what, mistake) \
    lab09_check(__FILE__, __LINE__, (s), (overflow), (want_skipped), (want_next), (want_hyst), (want_status), (what), \
                (mistake))
static inline bool lab09_check(const char *file, int line, amp_scaler *s, bool overflow, bool want_skipped,
                               float want_next, int want_hyst, amp_scaler_status want_status, const char *what,
                               const char *mistake) {
    float before = s->scale;
    int hyst_before = s->hysteresis_left;
    long iter = s->iter, last = s->last_overflow_iter;
    amp_update u = amp_scaler_update(s, overflow);
    uint32_t scale_bits;
    memcpy(&scale_bits, &s->scale, sizeof scale_bits);
    /* what the grader compares with the reference */
    mpt_observe(file, line, (uint64_t)scale_bits << 32 | (uint64_t)(uint32_t)s->hysteresis_left << 8 |
                                (uint64_t)u.status << 1 | u.skipped);
    bool ok = u.skipped == want_skipped && s->scale == want_next && s->hysteresis_left == want_hyst &&
              u.status == want_status;
    if (!ok)
        mpt_fail(file, line,
                 "%s: update(overflow=%s) at iter %ld (last overflow %ld), scale %g, hysteresis left %d\n"
                 "      expected: skipped=%s, next scale %g, hysteresis left %d, status %s\n"
                 "      got:      skipped=%s, next scale %g, hysteresis left %d, status %s\n"
                 "      likely mistake: %s",
                 what, overflow ? "true" : "false", iter, last, (double)before, hyst_before, want_skipped ? "yes" : "no",
                 (double)want_next, want_hyst, amp_scaler_status_name(want_status), u.skipped ? "yes" : "no",
                 (double)s->scale, s->hysteresis_left, amp_scaler_status_name(u.status), mistake);
    return ok;
}

/* n clean updates that must not change the scale or the hysteresis. */
static inline bool lab09_quiet(const char *file, int line, amp_scaler *s, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (!lab09_check(file, line, s, false, false, s->scale, s->hysteresis_left, AMP_SCALER_OK, what,
                         "inside the window a clean step changes nothing (growth only when (iter - last_overflow) "
                         "% window == 0)"))
            return false;
    return true;
}
#define QUIET_STEPS(s, n, what) lab09_quiet(__FILE__, __LINE__, (s), (n), (what))

#endif
