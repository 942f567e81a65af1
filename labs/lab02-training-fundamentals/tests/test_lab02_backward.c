/* test_lab02_backward.c: lab 02 part A visible tests: the central difference, and the matmul, GELU and
 * softmax cross-entropy backward passes, checked by hand-computed cases and by finite differences. */
#include "lab02_backward_util.h"

#include <math.h>
#include <stdio.h>

/* ---------------------------------------------------------------- ops_central_difference */

/* loss = sum_i coef * x_i^power over a small float array */
typedef struct {
    float *x;
    int n, power;
    double coef;
} poly_case;

static double poly_loss(void *p) {
    poly_case *c = p;
    double s = 0;
    for (int i = 0; i < c->n; i++) s += c->coef * pow(c->x[i], c->power);
    return s;
}

MPT_TEST(central_difference_of_a_cubic) {
    /* (f(x+h) - f(x-h)) / 2h for f = x^3 is exactly 3x^2 + h^2: at x = 2, h = 0.5 that is 12.25. */
    float x[3] = {5.0f, 2.0f, -1.0f};
    poly_case c = {x, 3, 3, 1.0};
    double d = ops_central_difference(poly_loss, &c, x, 1, 0.5);
    MPT_CHECK_NEAR(12.25, d, 1e-12, 0, "central difference of x^3 at x = 2 with h = 0.5 (exactly 3x^2 + h^2; a "
                                       "one-sided difference would give 15.25 or 9.25)");
    MPT_CHECK(x[0] == 5.0f && x[1] == 2.0f && x[2] == -1.0f,
              "x must be left as it was: got {%g, %g, %g}, expected {5, 2, -1} (restore x[i] after perturbing it)",
              x[0], x[1], x[2]);
}

MPT_TEST(central_difference_divides_by_the_step_taken) {
    /* f(x) = 1000 x at x = 3 with h = 1e-3: in float, 3 + 1e-3 is stored as 3.00099993, so the step
     * actually taken is 1.99986e-3, not 2e-3. Dividing by 2h gives 999.93; the slope is exactly 1000. */
    float x[1] = {3.0f};
    poly_case c = {x, 1, 1, 1000.0};
    double d = ops_central_difference(poly_loss, &c, x, 0, 1e-3);
    MPT_CHECK_NEAR(1000.0, d, 1e-9, 0, "slope of 1000 x: divide by (x_plus - x_minus) as stored in float, not by 2h");
    MPT_CHECK(x[0] == 3.0f, "x[0] must be restored to 3, found %.9g", x[0]);
}

MPT_TEST(gradcheck_reports_a_wrong_gradient) {
    /* ops_gradcheck (given) calls your ops_central_difference for every element: with a right gradient
     * it must pass, with one wrong element it must name that element. */
    enum { N = 12 };
    float *x = lab02_uniform(N, -1, 1, 7), grad[N];
    poly_case c = {x, N, 2, 1.5}; /* loss = 1.5 sum x^2, gradient 3 x */
    for (int i = 0; i < N; i++) grad[i] = 3.0f * x[i];
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS;
    ops_gradcheck_result r = ops_gradcheck("1.5 sum x^2, right gradient", poly_loss, &c, x, grad, N, &opt);
    MPT_OBSERVE((uint64_t)r.checked << 32 | (uint64_t)r.failed);
    MPT_CHECK_NEAR(3.0 * x[r.worst_index], r.worst_numeric, 1e-3, 1e-4, "the central difference at the worst element");
    MPT_CHECK(r.failed == 0, "the right gradient 3x failed at element %ld: numeric %.9g vs analytic %.9g", r.worst_index,
              r.worst_numeric, r.worst_analytic);
    grad[7] += 0.5f;
    r = ops_gradcheck("1.5 sum x^2, element 7 off by 0.5", poly_loss, &c, x, grad, N, &opt);
    MPT_OBSERVE((uint64_t)r.failed << 32 | (uint64_t)r.worst_index);
    MPT_CHECK_NEAR(3.0 * x[7], r.worst_numeric, 1e-3, 1e-4, "the central difference at element 7");
    MPT_CHECK(r.failed == 1 && r.worst_index == 7, "a gradient wrong at element 7 only: expected 1 failure at [7], got "
                                                   "%ld failures, worst at [%ld]", r.failed, r.worst_index);
    free(x);
}

/* ---------------------------------------------------------------- matmul_backward */

MPT_TEST(matmul_backward_tiny_case_by_hand) {
    /* inp = [[1, 2]], weight (OC=3, C=2) = [[1, 0], [0, 1], [1, 1]], dout = [[1, 2, 3]]:
     *   dinp    = dout @ weight   = [[1 + 3, 2 + 3]]            = [[4, 5]]
     *   dweight = dout^T @ inp    = [[1, 2], [2, 4], [3, 6]]
     *   dbias   = sum of dout rows = [1, 2, 3] */
    const float inp[] = {1, 2}, weight[] = {1, 0, 0, 1, 1, 1}, dout[] = {1, 2, 3};
    float dinp[2] = {0}, dweight[6] = {0}, dbias[3] = {0};
    matmul_backward(dinp, dweight, dbias, dout, inp, weight, 1, 2, 3);
    const float e_dinp[] = {4, 5}, e_dweight[] = {1, 2, 2, 4, 3, 6}, e_dbias[] = {1, 2, 3};
    char what[96];
    for (int i = 0; i < 2; i++) {
        snprintf(what, sizeof what, "dinp[0][%d] = sum_o dout[0][o] * weight[o][%d]", i, i);
        MPT_CHECK_NEAR(e_dinp[i], dinp[i], 0, 1e-6, what);
    }
    for (int i = 0; i < 6; i++) {
        snprintf(what, sizeof what, "dweight[%d][%d] = dout[0][%d] * inp[0][%d]", i / 2, i % 2, i / 2, i % 2);
        MPT_CHECK_NEAR(e_dweight[i], dweight[i], 0, 1e-6, what);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(what, sizeof what, "dbias[%d] = sum over rows of dout[.][%d]", i, i);
        MPT_CHECK_NEAR(e_dbias[i], dbias[i], 0, 1e-6, what);
    }
}

MPT_TEST(matmul_backward_accumulates) {
    /* Gradients add to what the buffers hold (the caller zeroes them once per step): start from 10. */
    const float inp[] = {1, 2}, weight[] = {1, 0, 0, 1, 1, 1}, dout[] = {1, 2, 3};
    float dinp[2] = {10, 10}, dweight[6] = {10, 10, 10, 10, 10, 10}, dbias[3] = {10, 10, 10};
    matmul_backward(dinp, dweight, dbias, dout, inp, weight, 1, 2, 3);
    MPT_CHECK_NEAR(14, dinp[0], 0, 1e-6, "dinp[0][0]: 10 already there + 4 (add with +=, or beta = 1 in sgemm)");
    MPT_CHECK_NEAR(16, dweight[5], 0, 1e-6, "dweight[2][1]: 10 already there + 6");
    MPT_CHECK_NEAR(13, dbias[2], 0, 1e-6, "dbias[2]: 10 already there + 3");
}

MPT_TEST(matmul_backward_matches_reference_loops) {
    /* Against matmul_backward_ref (given, plain loops) on shapes that are not multiples of anything. */
    const int shapes[][3] = {{3, 5, 7}, {17, 33, 19}, {40, 24, 56}};
    for (int s = 0; s < 3; s++) {
        const int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        float *inp = lab02_uniform((long)N * C, -1, 1, 10 + s), *weight = lab02_uniform((long)OC * C, -1, 1, 20 + s);
        float *dout = lab02_uniform((long)N * OC, -1, 1, 30 + s);
        float *dinp = lab02_zeros((long)N * C), *dweight = lab02_zeros((long)OC * C), *dbias = lab02_zeros(OC);
        float *rinp = lab02_zeros((long)N * C), *rweight = lab02_zeros((long)OC * C), *rbias = lab02_zeros(OC);
        matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
        matmul_backward_ref(rinp, rweight, rbias, dout, inp, weight, N, C, OC);
        char what[96];
        snprintf(what, sizeof what, "matmul dinp, N=%d C=%d OC=%d", N, C, OC);
        MPT_CHECK(ops_compare(what, rinp, dinp, (long)N * C, 1e-5), "%s differs from the reference (printed above)", what);
        snprintf(what, sizeof what, "matmul dweight, N=%d C=%d OC=%d", N, C, OC);
        MPT_CHECK(ops_compare(what, rweight, dweight, (long)OC * C, 1e-5), "%s differs from the reference", what);
        snprintf(what, sizeof what, "matmul dbias, N=%d C=%d OC=%d", N, C, OC);
        MPT_CHECK(ops_compare(what, rbias, dbias, OC, 1e-5), "%s differs from the reference", what);
        free(inp), free(weight), free(dout), free(dinp), free(dweight), free(dbias), free(rinp), free(rweight), free(rbias);
    }
}

MPT_TEST(matmul_backward_matches_finite_differences) {
    lab02_matmul_case m;
    lab02_matmul_setup(&m, 4, 6, 5, 40);
    float *dinp = lab02_zeros(4 * 6), *dweight = lab02_zeros(5 * 6), *dbias = lab02_zeros(5);
    matmul_backward(dinp, dweight, dbias, m.w, m.inp, m.weight, m.N, m.C, m.OC);
    /* linear in each input: only float rounding noise, ~1e-5 */
    LAB02_EXPECT_GRADCHECK("matmul dinp", lab02_matmul_loss, &m, m.inp, dinp, 4 * 6, 1e-4, 1e-3);
    LAB02_EXPECT_GRADCHECK("matmul dweight", lab02_matmul_loss, &m, m.weight, dweight, 5 * 6, 1e-4, 1e-3);
    LAB02_EXPECT_GRADCHECK("matmul dbias", lab02_matmul_loss, &m, m.bias, dbias, 5, 1e-4, 1e-3);
    free(dinp), free(dweight), free(dbias);
    lab02_matmul_free(&m);
}

/* ---------------------------------------------------------------- gelu_backward */

/* gelu'(x) in double, from the formula */
static double gelu_grad_double(double x) {
    const double k = sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x), th = tanh(u);
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * k * (1 + 3 * 0.044715 * x * x);
}

MPT_TEST(gelu_backward_at_known_points) {
    const float x[] = {0.0f, 1.0f, -1.0f, 2.5f, -0.3f};
    const float dout[] = {1, 1, 1, 1, 2};
    float d[5] = {0};
    gelu_backward(d, x, dout, 5);
    MPT_CHECK_NEAR(0.5, d[0], 0, 1e-6, "gelu'(0) = 0.5 (the 0.5 (1 + tanh u) term; the other term is 0 at x = 0)");
    char what[80];
    for (int i = 1; i < 5; i++) {
        snprintf(what, sizeof what, "gelu'(%g) * dout %g", x[i], dout[i]);
        MPT_CHECK_NEAR(gelu_grad_double(x[i]) * dout[i], d[i], 0, 2e-6, what);
    }
    /* A second backward adds to what dinp holds (a shared input gets gradient from every use): now twice. */
    gelu_backward(d, x, dout, 5);
    for (int i = 0; i < 5; i++) {
        snprintf(what, sizeof what, "second gelu_backward at x = %g: dinp += gelu' * dout (twice it now, not once)",
                 x[i]);
        MPT_CHECK_NEAR(2 * gelu_grad_double(x[i]) * dout[i], d[i], 0, 4e-6, what);
    }
}

MPT_TEST(gelu_backward_matches_finite_differences) {
    lab02_gelu_case g = {.n = 200};
    g.inp = lab02_uniform(g.n, -5, 5, 50);
    g.w = lab02_uniform(g.n, -1, 1, 51);
    g.out = lab02_zeros(g.n);
    float *dinp = lab02_zeros(g.n);
    gelu_backward(dinp, g.inp, g.w, g.n);
    /* smooth: h = 1e-2 gives ~2e-5 truncation error */
    LAB02_EXPECT_GRADCHECK("gelu dinp", lab02_gelu_loss, &g, g.inp, dinp, g.n, 1e-4, 1e-2);
    free(g.inp), free(g.w), free(g.out), free(dinp);
}

/* ---------------------------------------------------------------- crossentropy_backward */

MPT_TEST(crossentropy_backward_tiny_case_by_hand) {
    /* Row 0: logits [0, 0, ln 2] -> softmax [1/4, 1/4, 1/2], target 2, dloss 1:
     *        dlogits = [1/4, 1/4, 1/2 - 1] = [0.25, 0.25, -0.5]
     * Row 1: logits [ln 3, 0, 0] -> softmax [3/5, 1/5, 1/5], target 1, dloss 0.5:
     *        dlogits = 0.5 * [0.6, 0.2 - 1, 0.2] = [0.3, -0.4, 0.1] */
    const float logits[] = {0, 0, (float)M_LN2, (float)log(3.0), 0, 0};
    const int targets[] = {2, 1};
    const float dloss[] = {1.0f, 0.5f};
    float losses[2], lse[2], dlogits[6];
    crossentropy_forward(losses, lse, logits, targets, 2, 3, 3);
    crossentropy_backward(dlogits, logits, lse, targets, dloss, 2, 3, 3);
    const double expected[] = {0.25, 0.25, -0.5, 0.3, -0.4, 0.1};
    char what[96];
    for (int i = 0; i < 6; i++) {
        snprintf(what, sizeof what, "dlogits[%d][%d] = (softmax - onehot) * dloss", i / 3, i % 3);
        MPT_CHECK_NEAR(expected[i], dlogits[i], 0, 1e-6, what);
    }
    /* The same two rows padded to Vp = 4, then a third row with target -1 (ignored), into a dlogits that holds
     * 7s: the padding column and the whole ignored row must come out 0, not keep what was there. */
    const float padded[] = {0, 0, (float)M_LN2, 5, (float)log(3.0), 0, 0, 5, 1, 2, 3, 5};
    const int targets3[] = {2, 1, -1};
    const float dloss3[] = {1.0f, 0.5f, 1.0f};
    float losses3[3], lse3[3], d3[12];
    for (int i = 0; i < 12; i++) d3[i] = 7.0f;
    crossentropy_forward(losses3, lse3, padded, targets3, 3, 3, 4);
    crossentropy_backward(d3, padded, lse3, targets3, dloss3, 3, 3, 4);
    for (int i = 0; i < 12; i++) {
        int n = i / 4, v = i % 4;
        double want = n < 2 && v < 3 ? expected[n * 3 + v] : 0.0;
        snprintf(what, sizeof what, "V = 3, Vp = 4: dlogits[%d][%d]%s", n, v,
                 n == 2 ? " (target -1: the whole ignored row is 0)"
                 : v == 3 ? " (padding column V..Vp-1: set to 0, it is not in the softmax)"
                          : " = (softmax - onehot) * dloss");
        MPT_CHECK_NEAR(want, d3[i], 0, 1e-6, what);
    }
}

MPT_TEST(crossentropy_backward_huge_logits_stay_finite) {
    /* Logits [1000, 1001, 999]: exp(1000) overflows to inf in float (and in double). Subtracting the
     * row's lse (or max) first gives softmax [0.2447, 0.6652, 0.0900], as for [1, 2, 0]. */
    const float logits[] = {1000, 1001, 999}, small[] = {1, 2, 0};
    const int targets[] = {0};
    const float dloss[] = {1};
    float losses[1], lse[1], d[3], d_small[3], lse_small[1];
    crossentropy_forward(losses, lse, logits, targets, 1, 3, 3);
    crossentropy_backward(d, logits, lse, targets, dloss, 1, 3, 3);
    crossentropy_forward(losses, lse_small, small, targets, 1, 3, 3);
    crossentropy_backward(d_small, small, lse_small, targets, dloss, 1, 3, 3);
    for (int v = 0; v < 3; v++) {
        MPT_CHECK(isfinite(d[v]), "dlogits[%d] = %g for logits near 1000: use exp(z - lse), which is <= 1, never exp(z)",
                  v, d[v]);
        MPT_CHECK_NEAR(d_small[v], d[v], 0, 1e-4, "softmax is shift-invariant: logits [1000,1001,999] as [1,2,0]");
    }
}

MPT_TEST(crossentropy_backward_matches_finite_differences) {
    static const int targets[] = {3, 0, 9, 3};
    lab02_ce_case c = {.targets = targets, .N = 4, .V = 10, .Vp = 10};
    c.logits = lab02_uniform(4 * 10, -3, 3, 60);
    c.losses = lab02_zeros(4);
    c.lse = lab02_zeros(4);
    c.dloss = lab02_uniform(4, 0.2f, 1, 61);
    float *dlogits = lab02_zeros(4 * 10);
    crossentropy_forward(c.losses, c.lse, c.logits, c.targets, c.N, c.V, c.Vp);
    crossentropy_backward(dlogits, c.logits, c.lse, c.targets, c.dloss, c.N, c.V, c.Vp);
    LAB02_EXPECT_GRADCHECK("crossentropy dlogits", lab02_ce_loss, &c, c.logits, dlogits, 4 * 10, 1e-4, 1e-2);
    free(c.logits), free(c.losses), free(c.lse), free(c.dloss), free(dlogits);
}
