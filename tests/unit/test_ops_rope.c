/* test_ops_rope.c: rotary embedding: known rotations, inverse, relative positions, v untouched, gradient check. */
#include "ops/gradcheck.h"
#include "ops/rope.h"
#include "ops_testutil.h"

#include <math.h>

Test(ops_rope, rotates_pairs_by_position_times_frequency) {
    /* B=1, T=3, NH=KVH=1, HS=4: pairs (0,2) with freq 1 and (1,3) with freq theta^(-1/2) = 0.01. */
    const int T = 3, HS = 4, row = 3 * HS;
    float *qkv = tu_uniform(T * row, -1, 1, 1), *orig = tu_copy(qkv, T * row);
    rope_forward(qkv, 1, T, 1, 1, HS, 10000.0f);
    for (int t = 0; t < T; t++)
        for (int head = 0; head < 2; head++) /* q and k */
            for (int i = 0; i < 2; i++) {
                const float *x = orig + t * row + head * HS;
                const double freq = i == 0 ? 1.0 : 0.01, a = t * freq;
                const double y1 = x[i] * cos(a) - x[i + 2] * sin(a), y2 = x[i] * sin(a) + x[i + 2] * cos(a);
                const float *y = qkv + t * row + head * HS;
                cr_expect(fabs(y[i] - y1) < 1e-6 && fabs(y[i + 2] - y2) < 1e-6,
                          "t=%d head=%d pair %d: got (%g, %g), expected (%g, %g)", t, head, i, y[i], y[i + 2], y1, y2);
            }
    /* Position 0 is not rotated at all; v heads never are. */
    cr_expect(tu_bits_equal(orig, qkv, 2 * HS), "t = 0 must be unchanged");
    for (int t = 0; t < T; t++)
        cr_expect(tu_bits_equal(orig + t * row + 2 * HS, qkv + t * row + 2 * HS, HS), "v at t=%d must be unchanged", t);
    free(qkv), free(orig);
}

Test(ops_rope, backward_is_the_inverse_rotation) {
    const int B = 2, T = 17, NH = 4, KVH = 2, HS = 10;
    const long n = (long)B * T * (NH + 2 * KVH) * HS;
    float *x = tu_uniform(n, -2, 2, 2), *orig = tu_copy(x, n);
    rope_forward(x, B, T, NH, KVH, HS, 10000.0f);
    rope_backward(x, B, T, NH, KVH, HS, 10000.0f);
    /* R^T R = I up to float rounding of cos/sin and two rotations: a few ulp. */
    cr_expect(ops_compare("rope backward(forward(x)) vs x", orig, x, n, 1e-6));
    free(x), free(orig);
}

Test(ops_rope, scores_depend_only_on_relative_position) {
    /* q at position m and k at position n: q.k after RoPE depends on m - n only. Put the same q and k
     * vectors at every position, then compare (m, n) = (5, 2) with (9, 6) and (3, 0). */
    const int T = 10, HS = 16, row = 3 * HS;
    float *qkv = tu_zeros(T * row);
    float *q = tu_uniform(HS, -1, 1, 3), *k = tu_uniform(HS, -1, 1, 4);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < HS; i++) qkv[t * row + i] = q[i], qkv[t * row + HS + i] = k[i];
    rope_forward(qkv, 1, T, 1, 1, HS, 500000.0f);
    double dots[3];
    const int pairs[3][2] = {{5, 2}, {9, 6}, {3, 0}};
    for (int p = 0; p < 3; p++) {
        dots[p] = 0;
        for (int i = 0; i < HS; i++) dots[p] += (double)qkv[pairs[p][0] * row + i] * qkv[pairs[p][1] * row + HS + i];
    }
    cr_expect(fabs(dots[0] - dots[1]) < 1e-5 && fabs(dots[0] - dots[2]) < 1e-5,
              "q.k at (5,2), (9,6), (3,0) should be equal: %.9g %.9g %.9g", dots[0], dots[1], dots[2]);
    free(qkv), free(q), free(k);
}

typedef struct {
    float *inp, *work, *w;
    int B, T, NH, KVH, HS;
    long n;
} rope_ctx;

static double rope_loss(void *p) {
    rope_ctx *r = p;
    memcpy(r->work, r->inp, (size_t)r->n * sizeof(float));
    rope_forward(r->work, r->B, r->T, r->NH, r->KVH, r->HS, 10000.0f);
    return tu_weighted_sum(r->w, r->work, r->n);
}

Test(ops_rope, backward_matches_finite_differences) {
    rope_ctx r = {.B = 2, .T = 5, .NH = 3, .KVH = 1, .HS = 6};
    r.n = (long)r.B * r.T * (r.NH + 2 * r.KVH) * r.HS;
    r.inp = tu_uniform(r.n, -1, 1, 5);
    r.w = tu_uniform(r.n, -1, 1, 6);
    r.work = tu_zeros(r.n);
    float *grad = tu_copy(r.w, r.n);
    rope_backward(grad, r.B, r.T, r.NH, r.KVH, r.HS, 10000.0f);
    /* Linear in the input: only float rounding noise remains. */
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS;
    opt.rel_tol = 1e-3;
    cr_expect_eq(ops_gradcheck("rope dqkv", rope_loss, &r, r.inp, grad, r.n, &opt).failed, 0);
    free(r.inp), free(r.w), free(r.work), free(grad);
}

Test(ops_rope, odd_head_size_is_an_internal_error, .exit_code = 3) {
    float x[9] = {0};
    rope_forward(x, 1, 1, 1, 1, 3, 10000.0f);
}
