/* lab08_util.h: helpers for the lab 08 tests: checked setups and mistakes, and the LossScaleOptimizer's inner
 * optimizer and scale. */
#ifndef LAB08_UTIL_H
#define LAB08_UTIL_H

#include "amp/loss_scale_optimizer.h"
#include "amp/setup.h"
#include "mptest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline const char *lab08_recipe_name(amp_recipe r) { return amp_recipe_get(r)->name; }
static inline const char *lab08_scaler_name(amp_scaler_kind k) { return amp_scaler_kind_get(k)->name; }

/* A call that should succeed with this recipe, scaler kind and first scale. */
#define CHECK_SETUP(call_text, ok, setup, want_recipe, want_kind, want_scale, mistake) \
    lab08_check_setup(__FILE__, __LINE__, (call_text), (ok), (setup), (want_recipe), (want_kind), (want_scale), \
                      (mistake))
static inline bool lab08_check_setup(const char *file, int line, const char *call_text, bool ok, const amp_setup *s,
                                     amp_recipe want_recipe, amp_scaler_kind want_kind, double want_scale,
                                     const char *mistake) {
    mpt_observe(file, line, ok); /* what the grader compares with the reference */
    if (ok) {
        mpt_observe(file, line, (uint64_t)s->recipe << 8 | (uint64_t)s->scaler.kind);
        mpt_observe_near(file, line, s->scaler.init_scale, 0, 0);
    }
    if (!ok) {
        mpt_fail(file, line, "%s\n      expected: accepted, recipe %s, loss scaler %s\n      got:      rejected\n"
                 "      likely mistake: %s", call_text, lab08_recipe_name(want_recipe), lab08_scaler_name(want_kind),
                 mistake);
        return false;
    }
    bool good = s->recipe == want_recipe && s->scaler.kind == want_kind && s->scaler.init_scale == want_scale;
    if (!good)
        mpt_fail(file, line,
                 "%s\n      expected: recipe %s, loss scaler %s from %g\n      got:      recipe %s, loss scaler %s "
                 "from %g\n      likely mistake: %s",
                 call_text, lab08_recipe_name(want_recipe), lab08_scaler_name(want_kind), want_scale,
                 (unsigned)s->recipe < AMP_NRECIPES ? lab08_recipe_name(s->recipe) : "?",
                 (unsigned)s->scaler.kind < AMP_SCALER_NKINDS ? lab08_scaler_name(s->scaler.kind) : "?",
                 s->scaler.init_scale, mistake);
    return good;
}

/* A call that should be rejected with this mistake's message. */
#define CHECK_MISTAKE(call_text, ok, err, want, mistake) \
    lab08_check_mistake(__FILE__, __LINE__, (call_text), (ok), (err), (want), (mistake))
static inline bool lab08_check_mistake(const char *file, int line, const char *call_text, bool ok, const data_err *err,
                                       amp_setup_mistake want, const char *mistake) {
    const amp_setup_mistake_info *w = amp_setup_mistake_get(want);
    mpt_observe(file, line, ok); /* what the grader compares with the reference: which mistake it named */
    if (!ok)
        for (int k = 0; k < AMP_NMISTAKES; k++) {
            const amp_setup_mistake_info *m = amp_setup_mistake_get((amp_setup_mistake)k);
            if (m && strcmp(err->expected, m->expected) == 0 && strcmp(err->hint, m->hint) == 0) mpt_observe(file, line, (uint64_t)k);
        }
    if (ok) {
        mpt_fail(file, line, "%s\n      expected: rejected as %s (%s)\n      got:      accepted\n"
                 "      likely mistake: %s", call_text, w->name, w->hint, mistake);
        return false;
    }
    bool good = strcmp(err->expected, w->expected) == 0 && strcmp(err->hint, w->hint) == 0;
    if (!good) {
        const char *got = "an unlisted message";
        for (int m = 0; m < AMP_NMISTAKES; m++)
            if (strcmp(err->hint, amp_setup_mistake_get((amp_setup_mistake)m)->hint) == 0)
                got = amp_setup_mistake_get((amp_setup_mistake)m)->name;
        mpt_fail(file, line, "%s\n      expected: rejected as %s\n      got:      rejected as %s (hint: %s)\n"
                 "      likely mistake: %s", call_text, w->name, got, err->hint, mistake);
    }
    return good;
}

/* ------------------------------------------------------------------ the LossScaleOptimizer's tests
 * They use what no other lab writes: plain SGD (optim_sgd_update) and a static loss scale (TF 2 Keras's
 * LossScaleOptimizer(dynamic=False)), so lab 08 is graded on its own. The dynamic (keras) scale is lab 05's rule; the
 * core's unit tests (tests/unit/test_loss_scale_optimizer.c) run it against train_step on a real GPT. */

static inline optim_config lab08_sgd(double weight_decay) {
    optim_config c = optim_config_default(OPTIM_SGD);
    c.h.weight_decay = weight_decay;
    return c;
}

static inline amp_scaler_config lab08_static_scale(double scale) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_STATIC);
    c.init_scale = scale;
    return c;
}

#endif
