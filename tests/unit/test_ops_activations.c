/* test_ops_activations.c: gelu, swiglu and residual against double formulas, gradient checks, and the fast math. */
#include "ops/fastmath.h"
#include "ops/gelu.h"
#include "ops/gradcheck.h"
#include "ops/residual.h"
#include "ops/swiglu.h"
#include "ops_testutil.h"

#include <math.h>

static double gelu_double(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
static double silu_double(double x) { return x / (1 + exp(-x)); }

/* ---- fast math: the accuracy the header promises */
Test(ops_fastmath, expf_within_2e7_relative_over_the_normal_range) {
    double worst = 0, at = 0;
    for (double x = -87.33; x < 88.0; x += 0.00137) {
        float f = (float)x;
        double e = exp((double)f), rel = fabs(ops_expf(f) - e) / e;
        if (rel > worst) worst = rel, at = f;
    }
    cr_expect(worst < 2e-7, "ops_expf: worst relative error %.3g at x = %.9g (promised < 2e-7)", worst, at);
}

Test(ops_fastmath, special_values) {
    cr_expect(ops_expf(0.0f) == 1.0f, "exp(0) = %.9g", ops_expf(0.0f));
    cr_expect(ops_expf(-100.0f) == 0.0f && ops_expf(-INFINITY) == 0.0f, "exp of very negative numbers is 0");
    cr_expect(isfinite(ops_expf(1000.0f)) && ops_expf(1000.0f) > 1e38f, "exp(1000) is clamped to exp(88), finite");
    cr_expect(isnan(ops_expf(NAN)), "exp(NaN) must be NaN, not hide it");
    cr_expect(ops_sigmoidf(100.0f) == 1.0f && ops_sigmoidf(-100.0f) >= 0.0f && ops_sigmoidf(-100.0f) < 1e-38f);
    cr_expect(ops_tanhf(50.0f) == 1.0f && ops_tanhf(-50.0f) == -1.0f && ops_tanhf(0.0f) == 0.0f);
}

/* NaN through the vectorised loops, mixed with finite lanes: NaN comes out where NaN went in, the finite lanes
 * are untouched. Under `make sanitize` this also checks that no lane converts NaN to an integer (undefined). */
Test(ops_fastmath, nan_lanes_give_nan_in_vector_loops) {
    float x[64], e[64], t[64];
    for (int i = 0; i < 64; i++) x[i] = i % 3 == 0 ? NAN : (float)(i - 32) * 0.5f;
#pragma omp simd
    for (int i = 0; i < 64; i++) e[i] = ops_expf(x[i]);
#pragma omp simd
    for (int i = 0; i < 64; i++) t[i] = ops_tanhf(x[i]);
    for (int i = 0; i < 64; i++) {
        if (i % 3 == 0) {
            cr_expect(isnan(e[i]) && isnan(t[i]), "lane %d: exp(NaN) = %g, tanh(NaN) = %g; both must be NaN", i, e[i], t[i]);
        } else {
            cr_expect(e[i] == ops_expf(x[i]) && isfinite(e[i]), "lane %d: exp(%g) = %g in the loop, %g alone", i, x[i],
                      e[i], ops_expf(x[i]));
        }
    }
}

Test(ops_fastmath, sigmoid_and_tanh_within_3e7_absolute) {
    double worst_s = 0, worst_t = 0;
    for (double x = -30; x < 30; x += 0.000731) {
        float f = (float)x;
        worst_s = fmax(worst_s, fabs(ops_sigmoidf(f) - 1 / (1 + exp(-(double)f))));
        worst_t = fmax(worst_t, fabs(ops_tanhf(f) - tanh((double)f)));
    }
    cr_expect(worst_s < 3e-7, "sigmoid worst absolute error %.3g", worst_s);
    cr_expect(worst_t < 3e-7, "tanh worst absolute error %.3g", worst_t);
}

/* ---- gelu */
Test(ops_gelu, forward_matches_double_formula) {
    const long n = 4001;
    float *x = tu_zeros(n), *y = tu_zeros(n), *ref = tu_zeros(n);
    for (long i = 0; i < n; i++) x[i] = -10.0f + 20.0f * i / (n - 1);
    gelu_forward(y, x, n);
    for (long i = 0; i < n; i++) ref[i] = (float)gelu_double(x[i]);
    /* tanh to 3e-7 absolute, times 0.5|x| <= 5: 2e-6 */
    cr_expect(ops_compare("gelu out", ref, y, n, 2e-6));
    free(x), free(y), free(ref);
}

typedef struct {
    float *inp, *out, *w;
    long n;
    int N, F; /* swiglu rows and width */
} act_ctx;

static double gelu_loss(void *p) {
    act_ctx *a = p;
    gelu_forward(a->out, a->inp, a->n);
    return tu_weighted_sum(a->w, a->out, a->n);
}

Test(ops_gelu, backward_matches_finite_differences) {
    act_ctx a = {.n = 300};
    a.inp = tu_uniform(a.n, -4, 4, 1);
    a.w = tu_uniform(a.n, -1, 1, 2);
    a.out = tu_zeros(a.n);
    float *dinp = tu_uniform(a.n, -1, 1, 3), *start = tu_copy(dinp, a.n);
    gelu_backward(dinp, a.inp, a.w, a.n);
    for (long i = 0; i < a.n; i++) dinp[i] -= start[i]; /* the backward adds: take the start value back off */
    /* gelu''' is O(1) on [-4, 4]: truncation ~h^2/6 ~ 2e-5 with h = 1e-2. */
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS;
    cr_expect_eq(ops_gradcheck("gelu dinp", gelu_loss, &a, a.inp, dinp, a.n, &opt).failed, 0);
    free(a.inp), free(a.w), free(a.out), free(dinp), free(start);
}

Test(ops_gelu, derivative_at_known_points) {
    /* gelu'(0) = 0.5; gelu' -> 1 for large x and -> 0 for very negative x, with no NaN from x^3. */
    const float x[] = {0.0f, 30.0f, -30.0f, 1.0f};
    const float dout[] = {1, 1, 1, 1};
    float d[4] = {0};
    gelu_backward(d, x, dout, 4);
    const double h = 1e-6;
    const double d1 = (gelu_double(1 + h) - gelu_double(1 - h)) / (2 * h);
    cr_expect(fabs(d[0] - 0.5) < 1e-7, "gelu'(0) = %.9g, expected 0.5", d[0]);
    cr_expect(fabs(d[1] - 1.0) < 1e-6, "gelu'(30) = %.9g, expected 1", d[1]);
    cr_expect(fabs(d[2]) < 1e-6, "gelu'(-30) = %.9g, expected 0", d[2]);
    cr_expect(fabs(d[3] - d1) < 1e-6, "gelu'(1) = %.9g, expected %.9g", d[3], d1);
}

/* ---- swiglu */
Test(ops_swiglu, forward_matches_double_formula) {
    const int N = 7, F = 19;
    float *inp = tu_uniform(N * 2 * F, -5, 5, 4), *out = tu_zeros(N * F), *ref = tu_zeros(N * F);
    swiglu_forward(out, inp, N, F);
    for (int n = 0; n < N; n++)
        for (int f = 0; f < F; f++)
            ref[n * F + f] = (float)(silu_double(inp[n * 2 * F + f]) * inp[n * 2 * F + F + f]);
    cr_expect(ops_compare("swiglu out", ref, out, N * F, 2e-6));
    free(inp), free(out), free(ref);
}

static double swiglu_loss(void *p) {
    act_ctx *a = p;
    swiglu_forward(a->out, a->inp, a->N, a->F);
    return tu_weighted_sum(a->w, a->out, (long)a->N * a->F);
}

Test(ops_swiglu, backward_matches_finite_differences) {
    act_ctx a = {.N = 6, .F = 11};
    a.inp = tu_uniform(a.N * 2 * a.F, -3, 3, 5);
    a.w = tu_uniform(a.N * a.F, -1, 1, 6);
    a.out = tu_zeros(a.N * a.F);
    float *dinp = tu_zeros(a.N * 2 * a.F);
    swiglu_backward(dinp, a.w, a.inp, a.N, a.F);
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS;
    cr_expect_eq(ops_gradcheck("swiglu dinp (gate and up)", swiglu_loss, &a, a.inp, dinp, a.N * 2 * a.F, &opt).failed, 0);
    free(a.inp), free(a.w), free(a.out), free(dinp);
}

/* ---- residual */
Test(ops_residual, forward_and_backward_exact) {
    const long n = 37;
    float *a = tu_uniform(n, -1, 1, 7), *b = tu_uniform(n, -1, 1, 8), *out = tu_zeros(n), *sum = tu_zeros(n);
    residual_forward(out, a, b, n);
    for (long i = 0; i < n; i++) sum[i] = a[i] + b[i];
    cr_expect(tu_bits_equal(sum, out, n), "residual forward is one float add per element");
    residual_forward(a, a, b, n); /* in place */
    cr_expect(tu_bits_equal(sum, a, n), "residual forward in place");
    float *da = tu_uniform(n, -1, 1, 9), *db = tu_zeros(n), *dout = tu_uniform(n, -1, 1, 10), *expect = tu_copy(da, n);
    residual_backward(da, db, dout, n);
    for (long i = 0; i < n; i++) expect[i] += dout[i];
    cr_expect(tu_bits_equal(expect, da, n), "dinp1 += dout");
    cr_expect(tu_bits_equal(dout, db, n), "dinp2 += dout");
    free(a), free(b), free(out), free(sum), free(da), free(db), free(dout), free(expect);
}

typedef struct {
    float *a, *b, *out, *w;
    long n;
} residual_ctx;

static double residual_loss(void *p) {
    residual_ctx *r = p;
    residual_forward(r->out, r->a, r->b, r->n);
    return tu_weighted_sum(r->w, r->out, r->n);
}

Test(ops_residual, backward_matches_finite_differences) {
    residual_ctx r = {.n = 50};
    r.a = tu_uniform(r.n, -1, 1, 11);
    r.b = tu_uniform(r.n, -1, 1, 12);
    r.w = tu_uniform(r.n, -1, 1, 13);
    r.out = tu_zeros(r.n);
    float *da = tu_zeros(r.n), *db = tu_zeros(r.n);
    residual_backward(da, db, r.w, r.n);
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS; /* linear: rounding noise only */
    opt.rel_tol = 1e-3;
    cr_expect_eq(ops_gradcheck("residual dinp1", residual_loss, &r, r.a, da, r.n, &opt).failed, 0);
    cr_expect_eq(ops_gradcheck("residual dinp2", residual_loss, &r, r.b, db, r.n, &opt).failed, 0);
    free(r.a), free(r.b), free(r.w), free(r.out), free(da), free(db);
}
