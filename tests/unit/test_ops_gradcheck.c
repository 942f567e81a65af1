/* test_ops_gradcheck.c: the gradient checker finds planted errors and NaN; ops_compare reports the worst element. */
#include "ops/gradcheck.h"
#include "ops_testutil.h"

#include <math.h>

/* loss(x) = sum_i c_i x_i^3 with c_i = 1 + (i % 3) / 4: gradient 3 c_i x_i^2. The central difference of a
 * cubic is off by exactly c_i h^2: 1.5e-6 at most with h = 1e-3, well inside the 1e-4 absolute tolerance. */
static double coef(long i) { return 1.0 + (double)(i % 3) / 4.0; }
typedef struct {
    float *x;
    long n;
} cubic_ctx;

static double cubic_loss(void *p) {
    cubic_ctx *c = p;
    double s = 0;
    for (long i = 0; i < c->n; i++) s += coef(i) * c->x[i] * c->x[i] * c->x[i];
    return s;
}

Test(ops_gradcheck, central_difference_of_a_cubic) {
    /* (f(x+h) - f(x-h)) / 2h = 3x^2 + h^2 for f = x^3, exactly: x = 2, h = 0.5 gives 12.25. */
    float x[1] = {2.0f};
    cubic_ctx c = {x, 1};
    double d = ops_central_difference(cubic_loss, &c, x, 0, 0.5);
    cr_expect(d == 12.25, "central difference of x^3 at 2 with h = 0.5: got %.17g, expected 12.25", d);
    cr_expect(x[0] == 2.0f, "x[i] must be restored, found %g", x[0]);
}

Test(ops_gradcheck, finds_a_planted_error_and_names_it) {
    const long n = 50;
    cubic_ctx c = {tu_uniform(n, -1, 1, 1), n};
    float *grad = tu_zeros(n);
    for (long i = 0; i < n; i++) grad[i] = (float)(3.0 * coef(i) * c.x[i] * c.x[i]);
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS;
    opt.h = 1e-3;
    ops_gradcheck_result r = ops_gradcheck("cubic, right", cubic_loss, &c, c.x, grad, n, &opt);
    cr_expect_eq(r.failed, 0);
    cr_expect_eq(r.checked, n);
    grad[31] = grad[31] * 1.05f + 0.01f; /* 5% off (and off even if it was 0): well outside 1% */
    r = ops_gradcheck("cubic, element 31 wrong", cubic_loss, &c, c.x, grad, n, &opt);
    cr_expect_eq(r.failed, 1);
    cr_expect_eq(r.worst_index, 31);
    grad[31] = NAN;
    r = ops_gradcheck("cubic, element 31 NaN", cubic_loss, &c, c.x, grad, n, &opt);
    cr_expect_eq(r.failed, 1, "a NaN gradient must fail");
    cr_expect_eq(r.worst_index, 31);
    free(c.x), free(grad);
}

Test(ops_gradcheck, samples_a_subset_when_asked) {
    const long n = 1000;
    cubic_ctx c = {tu_uniform(n, -1, 1, 2), n};
    float *grad = tu_zeros(n);
    for (long i = 0; i < n; i++) grad[i] = (float)(3.0 * coef(i) * c.x[i] * c.x[i]);
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS;
    opt.h = 1e-3;
    opt.samples = 40;
    ops_gradcheck_result r = ops_gradcheck("cubic, 40 samples", cubic_loss, &c, c.x, grad, n, &opt);
    cr_expect_eq(r.checked, 40);
    cr_expect_eq(r.failed, 0);
    free(c.x), free(grad);
}

Test(ops_gradcheck, compare_reports_worst_index_and_nan) {
    const float expected[] = {1, 2, 1000, 4};
    float got[] = {1, 2.000001f, 1000.001f, 4};
    cr_expect(ops_compare("close", expected, got, 4, 1e-5), "within 1e-5 relative");
    got[1] = 2.1f;
    cr_expect(!ops_compare("one off", expected, got, 4, 1e-5), "element 1 is 5% off");
    got[1] = NAN;
    cr_expect(!ops_compare("NaN", expected, got, 4, 1e-5), "NaN must not match a number");
    const float nan_expected[] = {NAN};
    const float nan_got[] = {NAN};
    cr_expect(ops_compare("NaN vs NaN", nan_expected, nan_got, 1, 0), "NaN matches NaN");
}
