/* test_lab02_backward_hidden.c: lab 02 part A hidden tests: other shapes (N = 1, odd widths), a padded vocabulary,
 * ignored targets, in-place and scaled cross-entropy gradients, GELU extremes, the central difference at large |x|. */
#include "../../../labs/lab02-training-fundamentals/tests/lab02_backward_util.h"

#include <math.h>
#include <stdio.h>

/* ---------------------------------------------------------------- central difference */

/* loss = coef * x[0]^power */
typedef struct {
    float *x;
    double coef;
    int power;
} mono_case;

static double mono_loss(void *p) {
    mono_case *c = p;
    return c->coef * pow(c->x[0], c->power);
}

/* loss = x[0] * x[1] * x[2] */
static double product_loss(void *p) {
    const float *x = p;
    return (double)x[0] * x[1] * x[2];
}

MPT_TEST(central_difference_is_two_sided) {
    /* f = x^2 at x = 1, h = 0.25: the central difference is exactly 2 (a quadratic leaves no error);
     * a forward difference gives 2.25 and a backward one 1.75. */
    float x[1] = {1.0f};
    mono_case c = {x, 1.0, 2};
    double d = ops_central_difference(mono_loss, &c, x, 0, 0.25);
    MPT_CHECK_NEAR(2.0, d, 1e-12, 0, "central difference of x^2 at 1 with h = 0.25: use loss(x+h) and loss(x-h)");
    MPT_CHECK(x[0] == 1.0f, "x[0] must be restored to 1, found %.9g", x[0]);
}

MPT_TEST(central_difference_at_large_magnitude) {
    /* x = 10000: floats there are 2^-10 = 0.000977 apart, so x + 0.001 is stored as 10000.000977 and the
     * step taken is 0.00195, not 0.002 (2.3% off). The slope of 7x must still come out as exactly 7. */
    float x[1] = {10000.0f};
    mono_case c = {x, 7.0, 1};
    double d = ops_central_difference(mono_loss, &c, x, 0, 1e-3);
    MPT_CHECK_NEAR(7.0, d, 1e-9, 0, "slope of 7x at x = 10000 with h = 1e-3: divide by (x_plus - x_minus) as stored "
                                    "in float, not by 2h");
    MPT_CHECK(x[0] == 10000.0f, "x[0] must be restored, found %.9g", x[0]);
}

MPT_TEST(central_difference_perturbs_only_element_i) {
    /* d(x0 x1 x2)/dx1 = x0 x2 = 6 at (2, 5, 3), exactly, whatever h is, if only x[1] moves. */
    float x[3] = {2.0f, 5.0f, 3.0f};
    double d = ops_central_difference(product_loss, x, x, 1, 0.5);
    MPT_CHECK_NEAR(6.0, d, 1e-12, 0, "d(x0 x1 x2)/dx1 at (2, 5, 3): perturb x[i] only");
    MPT_CHECK(x[0] == 2.0f && x[1] == 5.0f && x[2] == 3.0f, "x must be left as {2, 5, 3}, found {%g, %g, %g}", x[0],
              x[1], x[2]);
}

/* ---------------------------------------------------------------- matmul_backward */

static void check_matmul_against_reference(int N, int C, int OC, uint64_t seed) {
    float *inp = lab02_uniform((long)N * C, -1, 1, seed), *weight = lab02_uniform((long)OC * C, -1, 1, seed + 1);
    float *dout = lab02_uniform((long)N * OC, -1, 1, seed + 2);
    /* non-zero starting gradients: the backward adds */
    float *dinp = lab02_uniform((long)N * C, -1, 1, seed + 3), *dweight = lab02_uniform((long)OC * C, -1, 1, seed + 4);
    float *dbias = lab02_uniform(OC, -1, 1, seed + 5);
    float *rinp = lab02_copy(dinp, (long)N * C), *rweight = lab02_copy(dweight, (long)OC * C), *rbias = lab02_copy(dbias, OC);
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

MPT_TEST(matmul_backward_single_row) {
    check_matmul_against_reference(1, 7, 5, 100);
    check_matmul_against_reference(1, 1, 1, 110);
}

MPT_TEST(matmul_backward_odd_shapes) {
    check_matmul_against_reference(13, 1, 31, 120);
    check_matmul_against_reference(31, 17, 3, 130);
    check_matmul_against_reference(65, 129, 47, 140);
}

MPT_TEST(matmul_backward_null_gradients) {
    /* Only dweight wanted (dinp = dbias = NULL, e.g. the first layer's input is data). */
    const int N = 6, C = 5, OC = 4;
    float *inp = lab02_uniform(N * C, -1, 1, 150), *weight = lab02_uniform(OC * C, -1, 1, 151);
    float *dout = lab02_uniform(N * OC, -1, 1, 152), *dweight = lab02_zeros(OC * C), *rweight = lab02_zeros(OC * C);
    matmul_backward(NULL, dweight, NULL, dout, inp, weight, N, C, OC);
    matmul_backward_ref(NULL, rweight, NULL, dout, inp, weight, N, C, OC);
    MPT_CHECK(ops_compare("matmul dweight alone", rweight, dweight, OC * C, 1e-5),
              "with dinp and dbias NULL, dweight must still be right (skip what is NULL)");
    float *dinp = lab02_zeros(N * C), *rinp = lab02_zeros(N * C);
    matmul_backward(dinp, NULL, NULL, dout, inp, weight, N, C, OC);
    matmul_backward_ref(rinp, NULL, NULL, dout, inp, weight, N, C, OC);
    MPT_CHECK(ops_compare("matmul dinp alone", rinp, dinp, N * C, 1e-5), "with dweight and dbias NULL");
    free(inp), free(weight), free(dout), free(dweight), free(rweight), free(dinp), free(rinp);
}

MPT_TEST(matmul_backward_gradcheck_tiny_odd_shape) {
    lab02_matmul_case m;
    lab02_matmul_setup(&m, 1, 3, 2, 160);
    float *dinp = lab02_zeros(3), *dweight = lab02_zeros(6), *dbias = lab02_zeros(2);
    matmul_backward(dinp, dweight, dbias, m.w, m.inp, m.weight, m.N, m.C, m.OC);
    LAB02_EXPECT_GRADCHECK("matmul dinp (1x3 -> 2)", lab02_matmul_loss, &m, m.inp, dinp, 3, 1e-4, 1e-3);
    LAB02_EXPECT_GRADCHECK("matmul dweight (1x3 -> 2)", lab02_matmul_loss, &m, m.weight, dweight, 6, 1e-4, 1e-3);
    LAB02_EXPECT_GRADCHECK("matmul dbias (1x3 -> 2)", lab02_matmul_loss, &m, m.bias, dbias, 2, 1e-4, 1e-3);
    free(dinp), free(dweight), free(dbias);
    lab02_matmul_free(&m);
}

/* ---------------------------------------------------------------- gelu_backward */

static double gelu_grad_double(double x) {
    const double k = sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x), th = tanh(u);
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * k * (1 + 3 * 0.044715 * x * x);
}

MPT_TEST(gelu_backward_accumulates_and_handles_extremes) {
    /* For |x| large, tanh(u) is +-1 and gelu' is 1 (x >> 0) or 0 (x << 0); nothing may be NaN. */
    const float x[] = {-30, -10, -3, 0, 0.7f, 3, 10, 30};
    const float dout[] = {1, 2, -1, 1, 0.5f, 1, -2, 1};
    float d[8];
    for (int i = 0; i < 8; i++) d[i] = 1.0f; /* already holds 1: the backward adds */
    gelu_backward(d, x, dout, 8);
    char what[96];
    for (int i = 0; i < 8; i++) {
        snprintf(what, sizeof what, "1 (already there) + gelu'(%g) * dout %g", x[i], dout[i]);
        MPT_CHECK(!isnan(d[i]), "%s: got NaN", what);
        MPT_CHECK_NEAR(1.0 + gelu_grad_double(x[i]) * dout[i], d[i], 0, 4e-6, what);
    }
}

MPT_TEST(gelu_backward_odd_lengths) {
    const long lengths[] = {1, 17};
    for (int k = 0; k < 2; k++) {
        lab02_gelu_case g = {.n = lengths[k]};
        g.inp = lab02_uniform(g.n, -3, 3, 170 + k);
        g.w = lab02_uniform(g.n, -1, 1, 180 + k);
        g.out = lab02_zeros(g.n);
        float *dinp = lab02_zeros(g.n);
        gelu_backward(dinp, g.inp, g.w, g.n);
        char what[48];
        snprintf(what, sizeof what, "gelu dinp, n=%ld", g.n);
        LAB02_EXPECT_GRADCHECK(what, lab02_gelu_loss, &g, g.inp, dinp, g.n, 1e-4, 1e-2);
        free(g.inp), free(g.w), free(g.out), free(dinp);
    }
}

/* ---------------------------------------------------------------- crossentropy_backward */

MPT_TEST(crossentropy_backward_padded_vocabulary) {
    /* V = 5 real columns in rows of Vp = 8: the padding (holding garbage 50) is not in the softmax and
     * gets gradient 0; the real columns match the same rows stored unpadded. */
    enum { N = 3, V = 5, VP = 8 };
    const int targets[N] = {4, 0, 2};
    const float dloss[N] = {0.5f, 1, 0.25f};
    float *tight = lab02_uniform(N * V, -2, 2, 190), padded[N * VP];
    for (int n = 0; n < N; n++)
        for (int v = 0; v < VP; v++) padded[n * VP + v] = v < V ? tight[n * V + v] : 50.0f;
    float losses[N], lse_t[N], lse_p[N], d_tight[N * V], d_padded[N * VP];
    for (int i = 0; i < N * VP; i++) d_padded[i] = 7.0f; /* garbage: the backward overwrites */
    crossentropy_forward(losses, lse_t, tight, targets, N, V, V);
    crossentropy_forward(losses, lse_p, padded, targets, N, V, VP);
    crossentropy_backward(d_tight, tight, lse_t, targets, dloss, N, V, V);
    crossentropy_backward(d_padded, padded, lse_p, targets, dloss, N, V, VP);
    for (int n = 0; n < N; n++) {
        for (int v = 0; v < V; v++)
            MPT_CHECK_NEAR(d_tight[n * V + v], d_padded[n * VP + v], 1e-6, 1e-7,
                           "a real column of a padded row: same as without padding (softmax over V columns only)");
        for (int v = V; v < VP; v++)
            MPT_CHECK(d_padded[n * VP + v] == 0.0f, "padding column dlogits[%d][%d] = %g, expected 0 (write zeros there)",
                      n, v, d_padded[n * VP + v]);
    }
    free(tight);
}

MPT_TEST(crossentropy_backward_ignored_targets) {
    enum { N = 4, V = 6 };
    const int targets[N] = {-1, 2, -1, 5};
    const float dloss[N] = {0.25f, 0.25f, 0.25f, 0.25f};
    float *logits = lab02_uniform(N * V, -3, 3, 200), losses[N], lse[N], d[N * V];
    for (int i = 0; i < N * V; i++) d[i] = 7.0f;
    crossentropy_forward(losses, lse, logits, targets, N, V, V);
    crossentropy_backward(d, logits, lse, targets, dloss, N, V, V);
    for (int n = 0; n < N; n++) {
        double sum = 0;
        for (int v = 0; v < V; v++) {
            if (targets[n] < 0)
                MPT_CHECK(d[n * V + v] == 0.0f, "ignored position %d (target -1): dlogits[%d] = %g, expected 0", n, v,
                          d[n * V + v]);
            sum += d[n * V + v];
        }
        if (targets[n] >= 0) {
            MPT_CHECK_NEAR(0.0, sum, 0, 1e-6, "a counted row of (softmax - onehot) * dloss sums to 0");
            MPT_CHECK(d[n * V + targets[n]] < 0, "row %d: the target's gradient is (p - 1) * dloss < 0, got %g", n,
                      d[n * V + targets[n]]);
        }
    }
    free(logits);
}

MPT_TEST(crossentropy_backward_in_place) {
    /* dlogits may be the logits array itself (saves 51 MB for GPT-2): read each element before writing it. */
    enum { N = 3, V = 7, VP = 8 };
    const int targets[N] = {6, -1, 0};
    const float dloss[N] = {1, 1, 0.5f};
    float *logits = lab02_uniform(N * VP, -2, 2, 210), *copy = lab02_copy(logits, N * VP), losses[N], lse[N], d[N * VP];
    crossentropy_forward(losses, lse, logits, targets, N, V, VP);
    crossentropy_backward(d, copy, lse, targets, dloss, N, V, VP);
    crossentropy_backward(logits, logits, lse, targets, dloss, N, V, VP);
    MPT_CHECK(ops_compare("dlogits written over the logits vs into a separate array", d, logits, N * VP, 1e-7),
              "backward in place (dlogits == logits) must give the same gradient");
    free(logits), free(copy);
}

MPT_TEST(crossentropy_backward_scales_by_dloss) {
    /* The same row with dloss 0, 1 and 2: zero, g and exactly 2g (a power-of-two scale is exact). */
    enum { V = 9 };
    float *row = lab02_uniform(V, -2, 2, 220), logits[3 * V], losses[3], lse[3], d[3 * V];
    for (int n = 0; n < 3; n++)
        for (int v = 0; v < V; v++) logits[n * V + v] = row[v];
    const int targets[3] = {4, 4, 4};
    const float dloss[3] = {0, 1, 2};
    crossentropy_forward(losses, lse, logits, targets, 3, V, V);
    crossentropy_backward(d, logits, lse, targets, dloss, 3, V, V);
    for (int v = 0; v < V; v++) {
        MPT_CHECK(d[v] == 0.0f, "dloss = 0: dlogits[0][%d] = %g, expected 0", v, d[v]);
        MPT_CHECK_NEAR(2.0 * d[V + v], d[2 * V + v], 1e-6, 1e-9, "dloss = 2 gives twice the gradient of dloss = 1");
    }
    free(row);
}

MPT_TEST(crossentropy_backward_two_classes_by_hand) {
    /* V = 2 is logistic regression: p1 = sigmoid(z1 - z0). z = [0.5, 2], target 0, dloss 1:
     *   dlogits = [p0 - 1, p1] = [-sigmoid(1.5), sigmoid(1.5)] = [-0.817574, 0.817574] */
    const float logits[2] = {0.5f, 2.0f}, dloss[1] = {1};
    const int targets[1] = {0};
    float losses[1], lse[1], d[2];
    crossentropy_forward(losses, lse, logits, targets, 1, 2, 2);
    crossentropy_backward(d, logits, lse, targets, dloss, 1, 2, 2);
    const double s = 1.0 / (1.0 + exp(-1.5));
    MPT_CHECK_NEAR(-s, d[0], 0, 1e-6, "dlogits[0] = p0 - 1 = -sigmoid(1.5)");
    MPT_CHECK_NEAR(s, d[1], 0, 1e-6, "dlogits[1] = p1 = sigmoid(1.5)");
}

MPT_TEST(crossentropy_backward_gradcheck_padded_and_ignored) {
    static const int targets[] = {10, -1, 0, 3, 10};
    lab02_ce_case c = {.targets = targets, .N = 5, .V = 11, .Vp = 16};
    c.logits = lab02_uniform(5 * 16, -3, 3, 230);
    c.losses = lab02_zeros(5);
    c.lse = lab02_zeros(5);
    c.dloss = lab02_uniform(5, 0.2f, 1, 231);
    float *dlogits = lab02_zeros(5 * 16);
    crossentropy_forward(c.losses, c.lse, c.logits, c.targets, c.N, c.V, c.Vp);
    crossentropy_backward(dlogits, c.logits, c.lse, c.targets, c.dloss, c.N, c.V, c.Vp);
    LAB02_EXPECT_GRADCHECK("crossentropy dlogits (Vp > V, a target of -1)", lab02_ce_loss, &c, c.logits, dlogits,
                           5 * 16, 1e-4, 1e-2);
    free(c.logits), free(c.losses), free(c.lse), free(c.dloss), free(dlogits);
}
