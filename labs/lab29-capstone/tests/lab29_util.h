/* lab29_util.h: helpers for the lab 29 tests: checked calls of the report arithmetic (core/plan/report_math.h) that
 * record what the regions computed and say, on a mismatch, which mistake gives that number. */
#ifndef LAB29_UTIL_H
#define LAB29_UTIL_H

#include "base/mem.h"
#include "base/rng.h"
#include "mptest.h"
#include "plan/report_math.h"

#include <math.h>
#include <stdio.h>

/* report_run_tokens against the expected count; `why` is the arithmetic. */
#define CHECK_TOKENS(steps, B, T, accum, world, want, why) \
    lab29_check_tokens(__FILE__, __LINE__, (steps), (B), (T), (accum), (world), (want), (why))
static inline bool lab29_check_tokens(const char *file, int line, long steps, int B, int T, int accum, int world,
                                      uint64_t want, const char *why) {
    report_batch b = {.steps = steps, .micro_batch = B, .seq_len = T, .grad_accum = accum, .dp_world = world};
    uint64_t got = report_run_tokens(&b);
    mpt_observe(file, line, got);
    if (got == want) return true;
    uint64_t without_world = (uint64_t)steps * (uint64_t)B * (uint64_t)T * (uint64_t)accum;
    uint64_t without_accum = (uint64_t)steps * (uint64_t)B * (uint64_t)T * (uint64_t)world;
    mpt_fail(file, line,
             "report_run_tokens(steps %ld, B %d, T %d, accumulation %d, dp world %d)\n      expected: %llu   (%s)\n"
             "      got:      %llu\n      likely mistake: %s", steps, B, T, accum, world, (unsigned long long)want, why,
             (unsigned long long)got,
             got == without_world && world > 1 ? "the data-parallel ranks are left out: each reads its own rows"
             : got == without_accum && accum > 1 ? "the accumulated micro-batches are left out: a step runs accumulation of them"
             : got < want && want > UINT32_MAX ? "the product overflowed: multiply in 64 bits (uint64_t), not int"
                                               : "tokens = steps * B * T * accumulation * dp_world");
    return false;
}

/* report_run_tokens_per_s against total tokens / total time. */
#define CHECK_RATE(rates, n, skip, want, why) lab29_check_rate(__FILE__, __LINE__, (rates), (n), (skip), (want), (why))
static inline bool lab29_check_rate(const char *file, int line, const double *rates, long n, long skip, double want,
                                    const char *why) {
    double got = report_run_tokens_per_s(rates, n, skip);
    double arithmetic = 0;
    long counted = 0;
    for (long i = skip > 0 ? skip : 0; i < n; i++) arithmetic += rates[i], counted++;
    arithmetic = counted ? arithmetic / (double)counted : NAN;
    if (isnan(want)) {
        mpt_observe(file, line, isnan(got));
        if (isnan(got)) return true;
        mpt_fail(file, line, "report_run_tokens_per_s(%ld rates, skip %ld)\n      expected: NAN   (%s)\n      got:      %.9g",
                 n, skip, why, got);
        return false;
    }
    mpt_observe_near(file, line, got, 1e-12, 0);
    if (fabs(got - want) <= 1e-9 * fabs(want)) return true;
    mpt_fail(file, line,
             "report_run_tokens_per_s(%ld rates, skip %ld)\n      expected: %.9g   (%s)\n      got:      %.9g\n"
             "      likely mistake: %s", n, skip, want, why, got,
             fabs(got - arithmetic) <= 1e-9 * fabs(arithmetic)
                 ? "the arithmetic mean of the rates: a slow step takes more time than a fast one saves, so the run's "
                   "rate is steps / sum(1 / rate) (every step has the same tokens)"
                 : "leave out the first `skip` steps, then total tokens over total time");
    return false;
}

/* report_check_plan on one tag: the ratio and the verdict. */
#define CHECK_TAG(plan, measured, tol, want_off, why) \
    lab29_check_tag(__FILE__, __LINE__, (plan), (measured), (tol), (want_off), (why))
static inline bool lab29_check_tag(const char *file, int line, uint64_t plan, uint64_t measured, double tol,
                                   bool want_off, const char *why) {
    report_tag_check c;
    int off = report_check_plan(&plan, &measured, 1, tol, &c);
    mpt_observe(file, line, (uint64_t)off);
    mpt_observe(file, line, (uint64_t)c.off);
    mpt_observe(file, line, (uint64_t)c.planned);
    bool ok = c.off == want_off && off == (int)want_off && c.planned == (plan > 0);
    if (plan > 0) {
        double want_ratio = (double)measured / (double)plan;
        mpt_observe_near(file, line, c.ratio, 1e-12, 0);
        ok = ok && fabs(c.ratio - want_ratio) <= 1e-12 * want_ratio;
        if (!ok)
            mpt_fail(file, line,
                     "report_check_plan(plan %llu, measured %llu, tolerance %g)\n      expected: ratio %.6f, off %d (%s)\n"
                     "      got:      ratio %.6f, off %d, returned %d\n      likely mistake: %s",
                     (unsigned long long)plan, (unsigned long long)measured, tol, want_ratio, want_off, why, c.ratio, c.off,
                     off, fabs(c.ratio - 1 / want_ratio) < 1e-9 ? "the ratio is measured / plan, not plan / measured"
                          : "off means |ratio - 1| > tolerance, on either side: using too little memory means the plan is wrong too");
    } else if (!ok) {
        mpt_fail(file, line,
                 "report_check_plan(plan 0, measured %llu)\n      expected: not planned, not off (%s)\n"
                 "      got:      planned %d, off %d, returned %d\n      likely mistake: a tag the planner does not model "
                 "has no ratio (ratio NAN, planned false); only the device total counts it", (unsigned long long)measured,
                 why, c.planned, c.off, off);
    }
    return ok;
}

#endif
