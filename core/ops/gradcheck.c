/* gradcheck.c: the finite-difference gradient checker and the tensor comparison used by tests and labs. */
#include "ops/gradcheck.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/rng.h"

#include <math.h>
#include <stdio.h>

double ops_central_difference(ops_loss_fn loss, void *ctx, float *x, long i, double h) {
    /* LAB 02 BEGIN central difference: nudge x[i] by +-h, evaluate the loss twice, restore x[i] */
    /* Taylor: L(x+h) - L(x-h) = 2h L'(x) + h^3/3 L'''(x) + ..., so the slope is exact up to O(h^2).
     * x is float: x[i] + h is rounded when stored, so divide by the step that was actually taken. */
    const float saved = x[i];
    const float plus = (float)((double)saved + h);
    const float minus = (float)((double)saved - h);
    x[i] = plus;
    const double loss_plus = loss(ctx);
    x[i] = minus;
    const double loss_minus = loss(ctx);
    x[i] = saved;
    return (loss_plus - loss_minus) / ((double)plus - (double)minus);
    /* LAB 02 END */
}

ops_gradcheck_result ops_gradcheck(const char *name, ops_loss_fn loss, void *ctx, float *x, const float *analytic,
                                   long n, const ops_gradcheck_options *opt) {
    const ops_gradcheck_options defaults = OPS_GRADCHECK_DEFAULTS;
    if (!opt) opt = &defaults;
    MP_ASSERT(opt->h > 0, "gradcheck step h must be > 0, got %g", opt->h);
    ops_gradcheck_result r = {.max_abs_index = -1, .max_rel_index = -1, .worst_index = -1, .worst_ratio = -1.0};
    mp_rng rng;
    mp_rng_seed(&rng, opt->seed);
    const long count = opt->samples <= 0 || opt->samples >= n ? n : opt->samples;
    for (long k = 0; k < count; k++) {
        const long i = count == n ? k : (long)(mp_rng_u64(&rng) % (uint64_t)n);
        const double step = opt->h * fmax(1.0, fabs((double)x[i]));
        const double numeric = ops_central_difference(loss, ctx, x, i, step);
        const double a = analytic[i];
        /* A NaN on either side counts as an infinite error, so it is reported, never hidden. */
        const double err = isnan(a) || isnan(numeric) ? INFINITY : fabs(a - numeric);
        const double scale = fmax(fabs(a), fabs(numeric));
        const double rel = err == 0.0 ? 0.0 : (isinf(err) ? INFINITY : err / scale);
        const double tol = opt->abs_tol + opt->rel_tol * fabs(numeric);
        const double ratio = err == 0.0 ? 0.0 : (tol > 0 ? err / tol : INFINITY);
        r.checked++;
        if (ratio > 1.0) r.failed++;
        if (r.max_abs_index < 0 || err > r.max_abs_err) {
            r.max_abs_err = err;
            r.max_abs_index = i;
        }
        if (r.max_rel_index < 0 || rel > r.max_rel_err) {
            r.max_rel_err = rel;
            r.max_rel_index = i;
        }
        if (ratio > r.worst_ratio) {
            r.worst_ratio = ratio;
            r.worst_index = i;
            r.worst_numeric = numeric;
            r.worst_analytic = a;
        }
    }
    printf("gradcheck %s: %ld of %ld elements, max abs err %.3g at [%ld], max rel err %.3g at [%ld]; worst [%ld]: "
           "analytic %.8g, numeric %.8g (%.2f of tol %g + %g*|numeric|): %s",
           name, r.checked, n, r.max_abs_err, r.max_abs_index, r.max_rel_err, r.max_rel_index, r.worst_index,
           r.worst_analytic, r.worst_numeric, r.worst_ratio, opt->abs_tol, opt->rel_tol, r.failed ? "FAILED" : "OK");
    if (r.failed) printf(" (%ld outside tolerance)", r.failed);
    printf("\n");
    return r;
}

bool ops_compare(const char *name, const float *expected, const float *got, long n, double tol) {
    long worst = -1, outside = 0;
    double worst_diff = -1.0;
    for (long i = 0; i < n; i++) {
        const double e = expected[i], g = got[i];
        double diff;
        if (isnan(e) || isnan(g)) diff = isnan(e) && isnan(g) ? 0.0 : INFINITY;
        else if (e == g) diff = 0.0; /* equal infinities too */
        else diff = fabs(g - e);
        if (!(diff <= tol * fmax(1.0, fabs(e)))) outside++;
        if (diff > worst_diff) {
            worst_diff = diff;
            worst = i;
        }
    }
    if (worst < 0) {
        printf("compare %s: 0 elements: OK\n", name);
        return true;
    }
    printf("compare %s: %ld elements, worst |diff| %.3g at [%ld] (expected %.9g, got %.9g), %ld outside tol %g: %s\n",
           name, n, worst_diff, worst, expected[worst], got[worst], outside, tol, outside ? "MISMATCH" : "OK");
    return outside == 0;
}
