/* report_math.c: tokens of a run, its throughput over steps, and the plan checked per tag (report_math.h, lab 29). */
#include "plan/report_math.h"

#include <math.h>

#include "base/error.h"
#include "base/lab.h"

uint64_t report_run_tokens(const report_batch *b) {
    MP_ASSERT(b->steps >= 0 && b->micro_batch >= 1 && b->seq_len >= 1 && b->grad_accum >= 1 && b->dp_world >= 1,
              "report_run_tokens: steps %ld, B %d, T %d, accumulation %d, dp world %d", b->steps, b->micro_batch,
              b->seq_len, b->grad_accum, b->dp_world);
    uint64_t tokens = 0;
    /* LAB 29 BEGIN tokens of a run: every step, every accumulated micro-batch, every data-parallel replica */
    uint64_t per_step = (uint64_t)b->micro_batch * (uint64_t)b->seq_len * (uint64_t)b->grad_accum * (uint64_t)b->dp_world;
    tokens = (uint64_t)b->steps * per_step;
    /* LAB 29 END */
    return tokens;
}

double report_run_tokens_per_s(const double *tokens_per_s, long n, long skip) {
    if (skip < 0) skip = 0;
    double rate = NAN;
    /* LAB 29 BEGIN the run's rate: total tokens over total time, a harmonic mean of the steps' rates */
    /* Every step carries the same tokens, say 1 unit: step i took 1 / rate_i seconds. */
    double seconds = 0;
    long counted = 0;
    for (long i = skip; i < n; i++) {
        seconds += 1.0 / tokens_per_s[i];
        counted++;
    }
    if (counted > 0) rate = (double)counted / seconds;
    /* LAB 29 END */
    return rate;
}

int report_check_plan(const uint64_t *plan, const uint64_t *measured, int ntags, double tolerance,
                      report_tag_check *out) {
    int off = 0;
    for (int t = 0; t < ntags; t++) {
        report_tag_check *c = &out[t];
        c->plan = plan[t];
        c->measured = measured[t];
        /* LAB 29 BEGIN plan against measurement: the ratio per tag, off when outside 1 +- tolerance */
        c->planned = plan[t] > 0;
        c->ratio = c->planned ? (double)measured[t] / (double)plan[t] : NAN;
        c->off = c->planned && !(fabs(c->ratio - 1.0) <= tolerance);
        /* LAB 29 END */
        off += c->off;
    }
    return off;
}
