/* lab05_util.h: helpers for the lab 05 tests: a checked scaler update, and a fresh scaler of a kind. */
#ifndef LAB05_UTIL_H
#define LAB05_UTIL_H

#include <string.h>

#include "amp/scaler.h"
#include "mptest.h"

#include <stdio.h>

static inline uint32_t float_bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline amp_scaler lab05_scaler(amp_scaler_kind kind) {
    amp_scaler s;
    amp_scaler_config c = amp_scaler_defaults(kind);
    amp_scaler_init(&s, &c);
    return s;
}

/* One amp_scaler_update(s, found_inf), compared with what it should decide: skip or not, the next scale and
 * the growth tracker after it. Prints expected and got for each, with the likely mistake. */
#define CHECK_UPDATE(s, found_inf, want_skipped, want_next, want_tracker, what, mistake) \
    lab05_check_update(__FILE__, __LINE__, (s), (found_inf), (want_skipped), (want_next), (want_tracker), (what), \
                       (mistake))
static inline bool lab05_check_update(const char *file, int line, amp_scaler *s, bool found_inf, bool want_skipped,
                                      float want_next, int want_tracker, const char *what, const char *mistake) {
    float before = s->scale;
    int tracker_before = s->growth_tracker;
    amp_update u = amp_scaler_update(s, found_inf);
    uint32_t scale_bits, next_bits;
    memcpy(&scale_bits, &s->scale, 4);
    memcpy(&next_bits, &u.next_scale, 4);
    /* what the grader compares with the reference regions' answers */
    mpt_observe(file, line, (uint64_t)scale_bits << 32 | next_bits);
    mpt_observe(file, line, (uint64_t)(uint32_t)s->growth_tracker << 1 | u.skipped);
    bool ok = u.skipped == want_skipped && s->scale == want_next && u.next_scale == want_next &&
              s->growth_tracker == want_tracker;
    /* The hint for the first field that is wrong: the caller's names what this step is about (the scale, or the
     * tracker when its mistake says so); a wrong skip or a wrong count gets its own. */
    if (u.skipped != want_skipped)
        mistake = "skipped must be true exactly on a step with found_inf, and false on every other step";
    else if (s->scale == want_next && u.next_scale == want_next && s->growth_tracker != want_tracker &&
             !strstr(mistake, "tracker"))
        mistake = "the growth tracker counts clean steps in a row: + 1 on a clean step, back to 0 after an overflow "
                  "and after growing";
    if (!ok)
        mpt_fail(file, line,
                 "%s: update(found_inf=%s) at scale %g with tracker %d\n"
                 "      expected: skipped=%s, next scale %g, tracker %d\n"
                 "      got:      skipped=%s, next scale %g, tracker %d\n"
                 "      likely mistake: %s",
                 what, found_inf ? "true" : "false", (double)before, tracker_before, want_skipped ? "yes" : "no",
                 (double)want_next, want_tracker, u.skipped ? "yes" : "no", (double)s->scale, s->growth_tracker,
                 mistake);
    return ok;
}

/* n clean updates that should neither skip nor grow; stops at the first wrong one. */
static inline bool lab05_clean_steps(const char *file, int line, amp_scaler *s, int n, const char *what) {
    for (int i = 0; i < n; i++) {
        int want = s->growth_tracker + 1;
        float scale = s->scale;
        char label[256];
        snprintf(label, sizeof label, "%s (clean step %d of %d)", what, i + 1, n);
        if (!lab05_check_update(file, line, s, false, false, scale, want, label,
                                "a clean step before the interval is over adds 1 to the tracker and changes "
                                "nothing else"))
            return false;
    }
    return true;
}
#define CLEAN_STEPS(s, n, what) lab05_clean_steps(__FILE__, __LINE__, (s), (n), (what))

#endif
