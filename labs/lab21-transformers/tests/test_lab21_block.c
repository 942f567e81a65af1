/* test_lab21_block.c: lab 21 visible tests of part A, the LLaMA-style block's ops: RMSNorm backward
 * (core/ops/rmsnorm.c), RoPE forward and backward (core/ops/rope.c), SwiGLU backward (core/ops/swiglu.c), each
 * against finite differences and a double-precision reference written out in lab21_util.h. */
#include "lab21_util.h"

/* 6 rows of 32 channels: the gradient through rstd is what a plain "weight * dout * rstd" misses. */
MPT_TEST(rmsnorm_backward_matches_finite_differences) {
    lab21_check_rmsnorm(6, 32, 0.0f, 11);
}

/* Rows whose mean is far from 0 (RMSNorm does not subtract it: xhat = x / rms), over more channels. */
MPT_TEST(rmsnorm_backward_rows_with_a_mean) {
    lab21_check_rmsnorm(4, 96, 3.0f, 12);
}

/* The frequencies: pair 0 turns by 1 radian per position, pair i by theta^(-2i/HS). */
MPT_TEST(rope_frequencies_follow_theta) {
    const int HS = 64;
    const double thetas[] = {10000, 500000};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < HS / 2; i += 5) {
            char what[96];
            snprintf(what, sizeof what, "rope_frequency(%d, HS %d, theta %g) = theta^(-2i/HS)", i, HS, thetas[k]);
            MPT_CHECK_NEAR(pow(thetas[k], -2.0 * i / HS), rope_frequency(i, HS, thetas[k]), 1e-14, 0, what);
        }
    MPT_CHECK_NEAR(1.0, rope_frequency(0, 128, 10000), 0, 0, "pair 0: theta^0 = 1 radian per position");
}

/* Position 0 is the identity, a rotation keeps the length of every pair, and the values are the double ones. */
MPT_TEST(rope_forward_rotates_pairs_by_position) {
    enum { B = 2, T = 9, NH = 2, KVH = 2, HS = 8, ROW = (NH + 2 * KVH) * HS, N = B * T * ROW };
    float x[N], y[N];
    lab21_fill(x, N, 0.0f, 1.0f, 21);
    memcpy(y, x, sizeof x);
    rope_forward(y, B, T, NH, KVH, HS, 10000.0f);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < ROW; c++) {
            size_t at = (size_t)b * T * ROW + c; /* position 0 */
            MPT_CHECK_FLOAT_BITS(x[at], y[at], "position 0: the angle is 0, so q and k come out unchanged");
        }
    int worst_pair = -1;
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH + KVH; h++)
                for (int i = 0; i < HS / 2; i++) {
                    size_t at = ((size_t)b * T + t) * ROW + (size_t)h * HS;
                    double before = hypot(x[at + i], x[at + i + HS / 2]), after = hypot(y[at + i], y[at + i + HS / 2]);
                    double err = fabs(after - before) / (before + 1e-30);
                    if (err > worst) worst = err, worst_pair = i;
                }
    MPT_CHECK(worst < 1e-5,
              "each pair (x_i, x_{i+HS/2}) keeps its length under a rotation\n      expected: relative change < 1e-5\n"
              "      got:      %.3g (pair %d)\n      likely mistake: pairs are (i, i + HS/2) (rotate half), not "
              "(2i, 2i+1); and the same angle's cos and sin in both lines", worst, worst_pair);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = (NH + KVH) * HS; c < ROW; c++) {
                size_t at = ((size_t)b * T + t) * ROW + c;
                MPT_CHECK_FLOAT_BITS(x[at], y[at], "the v heads are not rotated");
            }
    lab21_check_rope(B, T, NH, KVH, HS, 10000.0f, 22);
}

/* The backward, on a batch with grouped-query heads (4 query heads sharing 2 key/value heads). */
MPT_TEST(rope_backward_matches_finite_differences) {
    lab21_check_rope(1, 7, 4, 2, 8, 10000.0f, 23);
}

MPT_TEST(swiglu_backward_matches_finite_differences) {
    lab21_check_swiglu(5, 24, 1.0f, 31);
}

/* Gates from -6 to 6: silu' goes from about -0.1 (its minimum, near g = -2.4) to about 1.0. */
MPT_TEST(swiglu_backward_wide_gates) {
    lab21_check_swiglu(3, 40, 3.0f, 32);
}
