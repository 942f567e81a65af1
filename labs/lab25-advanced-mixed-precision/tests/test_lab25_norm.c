/* test_lab25_norm.c: lab 25 visible tests of part B, layer norm statistics computed in a chosen format
 * (norm_stats_in_format in core/ops/norm_precision.c): exact on small rows, accurate in fp32 two-pass, and the two
 * ways they break: an fp16 sum that overflows, and the one-pass variance that cancels. */
#include "base/rng.h"
#include "lab25_util.h"

/* 768 values (GPT-2 small's width) around 3 with unit spread: two passes in fp32 give the mean and the variance to
 * fp32's precision, as double computes them. */
MPT_TEST(norm_stats_fp32_two_pass_is_accurate) {
    enum { N = 768 };
    float x[N];
    mp_rng rng;
    mp_rng_seed(&rng, 25);
    double sum = 0, ss = 0;
    for (int i = 0; i < N; i++) {
        x[i] = 3.0f + mp_rng_normal(&rng);
        sum += x[i];
    }
    double mean = sum / N;
    for (int i = 0; i < N; i++) ss += (x[i] - mean) * (x[i] - mean);
    norm_stats st;
    norm_stats_in_format(x, N, &FP_FP32, NORM_TWO_PASS, 1e-5f, &st);
    MPT_CHECK_NEAR(mean, st.mean, 1e-5, 0, "fp32 two-pass mean of 768 values ~ N(3, 1)");
    MPT_CHECK_NEAR(ss / N, st.var, 1e-5, 0, "fp32 two-pass variance (biased: divided by n)");
    SAME_STATS(x, N, &FP_FP32, NORM_TWO_PASS, "fp32, the same operations in the same order");
}

/* Small rows where every step can be followed by hand. 1..8: all exact in fp16 (mean 4.5, variance 5.25, both ways).
 * 1000..1007: fp16's spacing is 0.5 from 512 and 2, 4 from 2048 and 4096: the running sum rounds. */
MPT_TEST(norm_stats_fp16_small_rows_exactly) {
    const float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    norm_stats st;
    for (int method = 0; method < NORM_NMETHODS; method++) {
        norm_stats_in_format(a, 8, &FP_FP16, (norm_method)method, 1e-5f, &st);
        MPT_CHECK(st.mean == 4.5f && st.var == 5.25f,
                  "%s, fp16, x = 1..8: expected mean 4.5, var 5.25 (every step exact in fp16); got mean %g, var %g",
                  norm_method_name((norm_method)method), (double)st.mean, (double)st.var);
    }
    const float b[8] = {1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007};
    SAME_STATS(b, 8, &FP_FP16, NORM_TWO_PASS, "x = 1000..1007");
    SAME_STATS(b, 8, &FP_FP16, NORM_ONE_PASS, "x = 1000..1007");
    const float c[5] = {0.1f, -0.2f, 0.3f, 0.7f, -0.05f};
    SAME_STATS(c, 5, &FP_BF16, NORM_TWO_PASS, "five small values in bf16");
    SAME_STATS(c, 5, &FP_BF16, NORM_ONE_PASS, "five small values in bf16");
    /* Values with more bits than fp16 and bf16 keep: each x[i] is rounded to the format before it is used. */
    float d[64];
    mp_rng rng;
    mp_rng_seed(&rng, 2526);
    for (int i = 0; i < 64; i++) d[i] = 3.0f + 0.5f * mp_rng_normal(&rng);
    SAME_STATS(d, 64, &FP_FP16, NORM_TWO_PASS, "64 values ~ N(3, 0.25), not exact in fp16");
    SAME_STATS(d, 64, &FP_FP16, NORM_ONE_PASS, "64 values ~ N(3, 0.25), not exact in fp16: round x[i] first");
    SAME_STATS(d, 64, &FP_BF16, NORM_TWO_PASS, "64 values ~ N(3, 0.25), not exact in bf16");
    SAME_STATS(d, 64, &FP_BF16, NORM_ONE_PASS, "64 values ~ N(3, 0.25), not exact in bf16: round x[i] first");
}

/* Range: 768 activations of mean 100. Their sum, 76800, is past fp16's largest value 65504: the mean is inf, every
 * x - inf is -inf, its square inf: the variance is inf, rstd 0, and the normalised output -inf * 0 = NaN. fp32 has no
 * such problem. */
MPT_TEST(norm_stats_fp16_sum_overflows_for_a_large_mean) {
    enum { N = 768 };
    float x[N];
    mp_rng rng;
    mp_rng_seed(&rng, 86);
    for (int i = 0; i < N; i++) x[i] = 100.0f + mp_rng_normal(&rng);
    norm_stats st;
    norm_stats_in_format(x, N, &FP_FP16, NORM_TWO_PASS, 1e-5f, &st);
    MPT_CHECK(isinf(st.mean) && !isfinite(st.var),
              "768 values of mean 100 in fp16: the running sum passes 65504 at about the 655th value\n"
              "      expected: mean inf, var not finite (what an fp16 accumulator gives; then rstd = 0 and the output "
              "(x - mean) * rstd = -inf * 0 is NaN)\n"
              "      got:      mean %g, var %g\n      likely mistake: round the running sum to the format at "
              "every add (norm_round), not only at the end", (double)st.mean, (double)st.var);
    SAME_STATS(x, N, &FP_FP16, NORM_TWO_PASS, "768 values of mean 100");
    norm_stats_in_format(x, N, &FP_FP32, NORM_TWO_PASS, 1e-5f, &st);
    MPT_CHECK(fabsf(st.mean - 100.0f) < 0.2f && st.var > 0.7f && st.var < 1.3f,
              "the same row in fp32: expected mean ~100, var ~1; got mean %g, var %g", (double)st.mean, (double)st.var);
}

/* Cancellation: the one-pass variance E[x^2] - E[x]^2 subtracts two numbers near M^2. In fp32 (24 bits), a row of
 * mean 10^4 and unit spread has E[x^2] ~ 1e8, whose spacing is 8: the variance 1 is lost entirely. Two passes
 * subtract the mean first and keep it. */
MPT_TEST(norm_stats_one_pass_cancels_even_in_fp32) {
    enum { N = 768 };
    float x[N];
    mp_rng rng;
    mp_rng_seed(&rng, 4000);
    double sum = 0, ss = 0;
    for (int i = 0; i < N; i++) {
        x[i] = 10000.0f + mp_rng_normal(&rng);
        sum += x[i];
    }
    double mean = sum / N;
    for (int i = 0; i < N; i++) ss += (x[i] - mean) * (x[i] - mean);
    double var = ss / N;
    norm_stats one, two;
    norm_stats_in_format(x, N, &FP_FP32, NORM_ONE_PASS, 1e-5f, &one);
    norm_stats_in_format(x, N, &FP_FP32, NORM_TWO_PASS, 1e-5f, &two);
    MPT_CHECK_NEAR(var, two.var, 1e-3, 0, "fp32 two-pass variance of 768 values ~ N(1e4, 1)");
    MPT_CHECK(fabs(one.var - var) > 0.5 * var,
              "fp32 one-pass variance of the same row: expected it to be far off (the true value is %.4f, and "
              "E[x^2] ~ 1e8 is only known to about 8)\n      got:      %.6g\n      likely mistake: one-pass is "
              "var = round(round(q / n) - round(mean * mean)) with q the running sum of round(xi * xi)",
              var, (double)one.var);
    SAME_STATS(x, N, &FP_FP32, NORM_ONE_PASS, "mean 1e4, fp32, one pass");
}
