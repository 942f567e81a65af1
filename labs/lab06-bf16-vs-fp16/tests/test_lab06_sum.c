/* test_lab06_sum.c: lab 06 visible tests, parts A and B: the running sum rounded to a format (fp_sum_rounded) and
 * Kahan's compensated sum in the format (fp_sum_kahan), in core/fp/accumulate.c. Every expected value is derived
 * in the comment above its test. */
#include "lab06_util.h"

/* bf16 has 8 significant bits. From 256 = 2^8 up its spacing is 2, so 256 + 1 = 257 is exactly halfway between
 * 256 (mantissa ...0, even) and 258 (...1, odd): the tie goes to 256. Every later add of 1 is the same tie: the
 * sum stays 256 however many ones follow. Below 256 every integer is exact. */
MPT_TEST(sum_bf16_of_ones_stalls_at_256) {
    float *x = lab06_fill(1.0f, 1000);
    CHECK_SUM(255.0f, fp_sum_rounded(&FP_BF16, x, 255), "bf16 running sum of 255 ones",
              "integers up to 256 are exact in bf16; round the sum to the format after every add, nothing else");
    CHECK_SUM(256.0f, fp_sum_rounded(&FP_BF16, x, 256), "bf16 running sum of 256 ones", "256 = 2^8 is exact");
    CHECK_SUM(256.0f, fp_sum_rounded(&FP_BF16, x, 1000), "bf16 running sum of 1000 ones",
              "256 + 1 is a tie between 256 and 258 that goes to the even 256: round the sum (fp_round_to) after every "
              "add; summing in fp32 and rounding once at the end gives 1000");
    CHECK_SUM(256.0f, fp_sum_rounded(&FP_BF16, x, 257), "bf16 running sum of 257 ones",
              "the 257th add is the first that rounds back: 256 + 1 is a tie, and ties go to the even 256");
    free(x);
}

/* 0.01 in fp16 is 0.01000213623046875 (10 mantissa bits). In [16, 32) fp16's spacing is 2^-6 = 0.015625, half of it
 * 0.0078 < 0.01: each add still moves the sum, by one whole spacing (more than 0.01). In [32, 64) the spacing is
 * 2^-5 = 0.03125, half of it 0.015625 > 0.01: s + 0.01 rounds back to s. The sum stops at 32. */
MPT_TEST(sum_fp16_of_001_stalls_at_32) {
    float *x = lab06_fill(0.01f, 10000);
    CHECK_SUM(32.0f, fp_sum_rounded(&FP_FP16, x, 10000), "fp16 running sum of 10^4 addends 0.01 (exact: 100)",
              "in fp16 the sum cannot pass 32: there half the spacing (2^-6) exceeds 0.01; round after every add");
    CHECK_SUM(32.0f, fp_sum_rounded(&FP_FP16, x, 5000), "fp16 running sum of 5000 addends 0.01",
              "the stall is reached before 5000 adds");
    /* bf16 (8 bits): 0.01 is 0.010009765625; in [4, 8) the spacing is 2^-5, half of it 0.0156 > 0.01. */
    CHECK_SUM(4.0f, fp_sum_rounded(&FP_BF16, x, 10000), "bf16 running sum of 10^4 addends 0.01 (exact: 100)",
              "bf16 stalls at 4: from 4 up half its spacing (2^-6) exceeds 0.01");
    free(x);
}

/* The order matters. fp16 spacing at 2048 = 2^11 is 2: 2048 + 1 is a tie that goes to 2048 (even), four times.
 * Adding the ones first makes 4, and 4 + 2048 = 2052 is exact. */
MPT_TEST(sum_order_matters) {
    const float big_first[] = {2048, 1, 1, 1, 1};
    const float small_first[] = {1, 1, 1, 1, 2048};
    CHECK_SUM(2048.0f, fp_sum_rounded(&FP_FP16, big_first, 5), "fp16 sum of 2048, 1, 1, 1, 1 in that order",
              "each 2048 + 1 is a tie between 2048 and 2050 that goes to the even 2048");
    CHECK_SUM(2052.0f, fp_sum_rounded(&FP_FP16, small_first, 5), "fp16 sum of 1, 1, 1, 1, 2048 in that order",
              "1 + 1 + 1 + 1 = 4 is exact, and 4 + 2048 = 2052 is an fp16 value");
    CHECK_SUM(2052.0f, fp_sum_rounded(&FP_FP32, big_first, 5), "fp32 sum of 2048, 1, 1, 1, 1",
              "fp32 has 24 bits: nothing is rounded here");
}

/* The addends are values of the format too (a tensor stored in bf16 holds bf16 values): one addend 0.01 sums to
 * its bf16 rounding 0.010009765625 = 41 * 2^-12; in fp16, 0.1 is 0.0999755859375 = 1638 * 2^-14. */
MPT_TEST(sum_rounds_the_addends_to_the_format) {
    const float one[] = {0.01f};
    CHECK_SUM(0x1.48p-7f, fp_sum_rounded(&FP_BF16, one, 1), "bf16 sum of the single addend 0.01",
              "round each addend to the format before adding it");
    const float tenth[] = {0.1f};
    CHECK_SUM(0x1.998p-4f, fp_sum_rounded(&FP_FP16, tenth, 1), "fp16 sum of the single addend 0.1",
              "round each addend to the format before adding it");
    CHECK_SUM(0.0f, fp_sum_rounded(&FP_FP16, tenth, 0), "the sum of no addends", "start from 0");
    /* Where it shows: 256 + (1 + 2^-9) in bf16. The addend rounds to 1 first (2^-9 is below half of bf16's spacing
     * 2^-7 at 1), and 256 + 1 = 257 is the tie that goes to the even 256. Unrounded, 257.002 is past the tie: 258. */
    const float two[] = {256.0f, 0x1.008p0f};
    CHECK_SUM(256.0f, fp_sum_rounded(&FP_BF16, two, 2), "bf16 sum of 256 and 1 + 2^-9",
              "round each addend to the format (1 + 2^-9 -> 1) before adding it: 256 + 1.002 rounds to 258, 256 + 1 "
              "to 256");
}

/* Kahan in bf16: the compensation keeps the 1s that each add of 1 to 256 loses. 1000 ones sum to 1000 exactly
 * (1000 = 125 * 8 is a bf16 value: spacing 4 in [512, 1024)). */
MPT_TEST(kahan_bf16_of_ones_reaches_1000) {
    float *x = lab06_fill(1.0f, 1000);
    CHECK_SUM(1000.0f, fp_sum_kahan(&FP_BF16, x, 1000), "bf16 Kahan sum of 1000 ones",
              "y = addend - c; t = sum + y; c = (t - sum) - y; sum = t, each operation rounded to bf16");
    CHECK_SUM(256.0f, fp_sum_kahan(&FP_BF16, x, 256), "bf16 Kahan sum of 256 ones", "exact up to 256");
    /* Kahan's addends are values of the format too: 1 + 2^-9 becomes 1, 256 + 1 ties to 256 and c = -1 keeps the
     * lost 1 for a next addend (there is none). Every step in bf16 gives 256; y left in fp32 gives 258. */
    const float two[] = {256.0f, 0x1.008p0f};
    CHECK_SUM(256.0f, fp_sum_kahan(&FP_BF16, two, 2), "bf16 Kahan sum of 256 and 1 + 2^-9",
              "round the addend to bf16 and y = addend - c to bf16 too: every operation of Kahan's is one of the format");
    free(x);
}

/* Kahan in fp16: 10^4 addends 0.01 (each 0.01000213623 in fp16) sum to 100.02136..., whose nearest fp16 value is 100
 * (spacing 2^-4 at 100); 10^3 of them to 10.002136, nearest fp16 10. The plain sum stalls at 32. */
MPT_TEST(kahan_fp16_of_001) {
    float *x = lab06_fill(0.01f, 10000);
    CHECK_SUM(100.0f, fp_sum_kahan(&FP_FP16, x, 10000), "fp16 Kahan sum of 10^4 addends 0.01",
              "the compensation must be subtracted from the next addend (y = x - c), and c = (t - sum) - y after the add");
    CHECK_SUM(10.0f, fp_sum_kahan(&FP_FP16, x, 1000), "fp16 Kahan sum of 10^3 addends 0.01", "see above");
    free(x);
}

/* Measured against the classic bounds (Higham, "Accuracy and Stability of Numerical Algorithms", ch. 4), with u =
 * 2^-p the unit roundoff of a format with p significant bits and S = sum |x_i| of the format's addends:
 *   Kahan:   |error| <= (2u + O(n u^2)) S         here taken as (2u + n u^2) S
 *   plain:   |error| <= (n - 1) u S               (a bound the stalls come nowhere near needing)
 * 2000 addends uniform in [0, 1), in fp16 (u = 2^-11, S about 1000). The plain sum loses far more than Kahan's
 * bound allows; Kahan stays inside it. */
MPT_TEST(kahan_error_within_its_bound) {
    enum { N = 2000 };
    float *x = lab06_uniform(11, 0.0f, 1.0f, N);
    double exact_in_f = 0;
    for (int i = 0; i < N; i++) exact_in_f += fp_round_to(&FP_FP16, x[i]);
    double u = ldexp(1.0, -11), bound = (2 * u + N * u * u) * exact_in_f;
    float kahan = fp_sum_kahan(&FP_FP16, x, N), plain = fp_sum_rounded(&FP_FP16, x, N);
    MPT_OBSERVE(fp_float_bits(kahan));
    MPT_OBSERVE(fp_float_bits(plain));
    double kahan_err = fabs(kahan - exact_in_f);
    double plain_err = fabs(plain - exact_in_f);
    MPT_CHECK(kahan_err <= bound, "fp16 Kahan sum of %d values in [0,1): error %g, expected at most (2u + n u^2) S = %g",
              N, kahan_err, bound);
    MPT_CHECK(plain_err > bound, "fp16 plain sum of %d values in [0,1): error %g should exceed Kahan's bound %g (a plain "
              "running sum in fp16 loses half a spacing at each add once the sum is large)", N, plain_err, bound);
    free(x);
}
