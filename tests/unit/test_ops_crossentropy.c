/* test_ops_crossentropy.c: fused softmax cross-entropy: double reference, padding, ignored targets, stability, gradcheck. */
#include "ops/crossentropy.h"
#include "ops/gradcheck.h"
#include "ops_testutil.h"

#include <math.h>

/* loss and lse of one row in double, with the max subtracted */
static double row_lse_double(const float *z, int V) {
    double max = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) max = fmax(max, z[v]);
    for (int v = 0; v < V; v++) sum += exp(z[v] - max);
    return max + log(sum);
}

Test(ops_crossentropy, forward_matches_double_reference) {
    const int N = 6, V = 37, Vp = 48;
    const int targets[] = {0, 36, 5, -1, 17, 17};
    float *logits = tu_uniform(N * Vp, -6, 6, 1), *losses = tu_zeros(N), *lse = tu_zeros(N);
    crossentropy_forward(losses, lse, logits, targets, N, V, Vp);
    for (int n = 0; n < N; n++) {
        double l = row_lse_double(logits + n * Vp, V);
        double expected = targets[n] < 0 ? 0.0 : l - logits[n * Vp + targets[n]];
        cr_expect(fabs(lse[n] - l) < 1e-6 * fmax(1, fabs(l)), "lse[%d] = %.9g, expected %.9g", n, lse[n], l);
        cr_expect(fabs(losses[n] - expected) < 2e-6 * fmax(1, expected), "loss[%d] = %.9g, expected %.9g", n, losses[n],
                  expected);
    }
    free(logits), free(losses), free(lse);
}

Test(ops_crossentropy, padding_columns_do_not_count) {
    /* The same logits with garbage (huge) values in the padding must give the same losses. */
    const int N = 3, V = 10, Vp = 16;
    const int targets[] = {1, 9, 0};
    float *logits = tu_uniform(N * Vp, -3, 3, 2), *losses1 = tu_zeros(N), *losses2 = tu_zeros(N), *lse = tu_zeros(N);
    crossentropy_forward(losses1, lse, logits, targets, N, V, Vp);
    for (int n = 0; n < N; n++)
        for (int v = V; v < Vp; v++) logits[n * Vp + v] = 1e30f;
    crossentropy_forward(losses2, lse, logits, targets, N, V, Vp);
    cr_expect(tu_bits_equal(losses1, losses2, N), "values in the padding columns changed the loss");
    float *dloss = tu_uniform(N, 0.1f, 1, 3), *dlogits = tu_uniform(N * Vp, -1, 1, 4);
    crossentropy_backward(dlogits, logits, lse, targets, dloss, N, V, Vp);
    for (int n = 0; n < N; n++)
        for (int v = V; v < Vp; v++)
            cr_assert(dlogits[n * Vp + v] == 0.0f, "dlogits[%d][%d] in the padding = %g, expected 0", n, v,
                      dlogits[n * Vp + v]);
    free(logits), free(losses1), free(losses2), free(lse), free(dloss), free(dlogits);
}

Test(ops_crossentropy, ignored_targets_have_zero_loss_and_gradient) {
    const int N = 4, V = 9, Vp = 9;
    const int targets[] = {-1, 3, -1, 8};
    float *logits = tu_uniform(N * Vp, -3, 3, 5), *losses = tu_zeros(N), *lse = tu_zeros(N);
    float *dloss = tu_uniform(N, 0.1f, 1, 6), *dlogits = tu_uniform(N * Vp, -1, 1, 7);
    crossentropy_forward(losses, lse, logits, targets, N, V, Vp);
    crossentropy_backward(dlogits, logits, lse, targets, dloss, N, V, Vp);
    for (int n = 0; n < N; n += 2) {
        cr_expect(losses[n] == 0.0f, "ignored position %d has loss %g", n, losses[n]);
        for (int v = 0; v < Vp; v++) cr_assert(dlogits[n * Vp + v] == 0.0f, "ignored position %d: dlogits[%d] = %g", n, v, dlogits[n * Vp + v]);
    }
    cr_expect(losses[1] > 0 && losses[3] > 0);
    free(logits), free(losses), free(lse), free(dloss), free(dlogits);
}

Test(ops_crossentropy, huge_logits_are_stable) {
    /* Logits near 1e4: exp(1e4) overflows float and double alike; with the max subtracted nothing does. */
    const int N = 2, V = 5;
    const float logits[] = {10000, 10001, 9999, 10000.5f, 10000, -10000, -9999, -10001, -10000, -10000};
    const int targets[] = {1, 4};
    float losses[2], lse[2], dlogits[10];
    const float dloss[] = {1, 1};
    crossentropy_forward(losses, lse, logits, targets, N, V, V);
    crossentropy_backward(dlogits, logits, lse, targets, dloss, N, V, V);
    for (int n = 0; n < N; n++) {
        double expected = row_lse_double(logits + n * V, V) - logits[n * V + targets[n]];
        /* lse ~ 1e4 in float has an ulp of 1e-3: the loss can be no better than that */
        cr_expect(fabs(losses[n] - expected) < 2e-3, "loss[%d] = %.9g, expected %.9g", n, losses[n], expected);
        double row_sum = 0;
        for (int v = 0; v < V; v++) {
            cr_assert(isfinite(dlogits[n * V + v]), "dlogits[%d][%d] = %g", n, v, dlogits[n * V + v]);
            row_sum += dlogits[n * V + v];
        }
        cr_expect(fabs(row_sum) < 1e-3, "softmax - onehot sums to 0 over a row; row %d sums to %g", n, row_sum);
    }
}

Test(ops_crossentropy, backward_in_place_over_the_logits) {
    const int N = 5, V = 30, Vp = 32;
    const int targets[] = {3, -1, 29, 0, 7};
    float *logits = tu_uniform(N * Vp, -4, 4, 8), *lse = tu_zeros(N), *losses = tu_zeros(N);
    float *dloss = tu_uniform(N, 0.1f, 1, 9), *dlogits = tu_zeros(N * Vp);
    crossentropy_forward(losses, lse, logits, targets, N, V, Vp);
    crossentropy_backward(dlogits, logits, lse, targets, dloss, N, V, Vp);
    crossentropy_backward(logits, logits, lse, targets, dloss, N, V, Vp);
    cr_expect(tu_bits_equal(dlogits, logits, N * Vp), "backward into the logits array must give the same gradient");
    free(logits), free(lse), free(losses), free(dloss), free(dlogits);
}

typedef struct {
    float *logits, *losses, *lse, *dloss;
    const int *targets;
    int N, V, Vp;
} ce_ctx;

/* loss = sum_n dloss[n] * loss[n]: its gradient at the logits is what backward computes with dloss. */
static double ce_loss(void *p) {
    ce_ctx *c = p;
    crossentropy_forward(c->losses, c->lse, c->logits, c->targets, c->N, c->V, c->Vp);
    return tu_weighted_sum(c->dloss, c->losses, c->N);
}

Test(ops_crossentropy, backward_matches_finite_differences) {
    static const int targets[] = {4, -1, 0, 12, 12};
    ce_ctx c = {.targets = targets, .N = 5, .V = 13, .Vp = 16};
    c.logits = tu_uniform(c.N * c.Vp, -3, 3, 10);
    c.losses = tu_zeros(c.N);
    c.lse = tu_zeros(c.N);
    c.dloss = tu_uniform(c.N, 0.2f, 1, 11);
    float *dlogits = tu_zeros(c.N * c.Vp);
    crossentropy_forward(c.losses, c.lse, c.logits, c.targets, c.N, c.V, c.Vp);
    crossentropy_backward(dlogits, c.logits, c.lse, c.targets, c.dloss, c.N, c.V, c.Vp);
    /* The loss is smooth with bounded derivatives (softmax); h = 1e-2: truncation ~2e-5. The padding
     * and ignored rows must have a numeric gradient of exactly 0, and they do. */
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS;
    cr_expect_eq(ops_gradcheck("crossentropy dlogits", ce_loss, &c, c.logits, dlogits, c.N * c.Vp, &opt).failed, 0);
    free(c.logits), free(c.losses), free(c.lse), free(c.dloss), free(dlogits);
}

Test(ops_crossentropy, target_out_of_range_is_an_internal_error, .exit_code = 3) {
    const float logits[3] = {0};
    const int targets[] = {3};
    float losses[1], lse[1];
    crossentropy_forward(losses, lse, logits, targets, 1, 3, 3);
}
