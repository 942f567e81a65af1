/* test_lab25_bn_hidden.c: lab 25 hidden tests of part D (BatchNorm): SyncBN on 3 ranks with uneven batches (one
 * rank holds a single sample), fp16 statistics of random channels bit for bit, and eval with the running
 * statistics. */
#include "mptest.h"
#include "../../../labs/lab25-advanced-mixed-precision/tests/lab25_bn.h"
#include "ops/norm_precision.h"

/* 3 ranks with 1, 4 and 2 samples of 4 channels of 3 positions: SyncBN weighs each rank by its count. */
MPT_TEST(syncbn_3_ranks_uneven_batches) {
    enum { C = 4, S = 3, RANKS = 3 };
    const int counts[RANKS] = {1, 4, 2}, total = 7;
    static lab25_bn_report rep[RANKS][2];
    uint64_t seed = 31 + mpt_seed() % 100000;
    lab25_bn_launch(RANKS, counts, C, S, seed, rep);
    static float x[LAB25_BN_MAX_VALUES], dy[LAB25_BN_MAX_VALUES];
    static lab25_bn_ref whole;
    bn_layer shape;
    bn_init(&shape, C, LAB25_BN_MOMENTUM, LAB25_BN_EPS);
    lab25_bn_params(&shape);
    lab25_bn_ref_init(&whole, C);
    for (int step = 1; step <= LAB25_BN_STEPS; step++) {
        lab25_bn_batch(seed, step, total, C, S, x, dy);
        lab25_bn_ref_step(&whole, &shape, x, dy, total, S);
    }
    const char *mistake = "uneven batches: allreduce the sums and the counts, never the means (an average of means "
                          "weighs a 1-sample rank like a 4-sample one)";
    for (int r = 0, first = 0; r < RANKS; first += counts[r++]) {
        size_t at = (size_t)first * C * S;
        int v = counts[r] * C * S;
        if (!BN_CLOSE(rep[r][0].y, whole.y + at, v, 1e-5, 1e-5, "SyncBN y on 3 uneven ranks", mistake)) break;
        if (!BN_CLOSE(rep[r][0].dx, whole.dx + at, v, 1e-4, 1e-5, "SyncBN dx on 3 uneven ranks", mistake)) break;
        if (!BN_CLOSE(rep[r][0].running_var, whole.running_var, C, 1e-5, 1e-6, "SyncBN running_var", mistake)) break;
        if (!BN_CLOSE(rep[r][0].running_mean, whole.running_mean, C, 1e-5, 1e-6, "SyncBN running_mean", mistake)) break;
    }
    bn_free(&shape);
}

/* 2 channels of 3 positions, 20 samples of random scale, statistics in fp16 and bf16, bit for bit against the
 * definition (per channel: sample by sample, position by position). */
MPT_TEST(bn_fp16_statistics_bit_for_bit_random) {
    enum { N = 20, C = 2, S = 3 };
    float x[N * C * S], y[N * C * S];
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed() ^ 0x25bd);
    const fp_format *fmts[2] = {&FP_FP16, &FP_BF16};
    for (int t = 0; t < 6; t++) {
        const fp_format *f = fmts[t % 2];
        float centre = ldexpf(1.0f + mp_rng_uniform(&rng), (int)(mp_rng_u32(&rng) % 10)), spread = 0.05f + mp_rng_uniform(&rng);
        for (int i = 0; i < N * C * S; i++) x[i] = norm_round(f, centre * (1 + (float)(i % C)) + spread * mp_rng_normal(&rng));
        bn_layer bn;
        bn_init(&bn, C, LAB25_BN_MOMENTUM, LAB25_BN_EPS);
        bn.stats_fmt = f;
        bn_forward(&bn, x, N, S, y, true);
        for (int c = 0; c < C; c++) {
            float s = 0, q = 0, m = norm_round(f, (float)(N * S));
            for (int i = 0; i < N; i++)
                for (int k = 0; k < S; k++) s = norm_round(f, s + x[(i * C + c) * S + k]);
            float mean = norm_round(f, s / m);
            for (int i = 0; i < N; i++)
                for (int k = 0; k < S; k++) {
                    float d = norm_round(f, x[(i * C + c) * S + k] - mean);
                    q = norm_round(f, q + norm_round(f, d * d));
                }
            float var = norm_round(f, q / m);
            MPT_CHECK_FLOAT_BITS(mean, bn.mean[c], "16-bit statistics: the mean, every add rounded to the format");
            MPT_CHECK_FLOAT_BITS(var, bn.var[c], "16-bit statistics: the variance, every operation rounded");
        }
        bn_free(&bn);
    }
}

/* After 3 training steps, eval normalises with the running statistics and leaves them alone. */
MPT_TEST(bn_eval_uses_running_statistics) {
    enum { N = 5, C = 3, S = 2 };
    static float x[N * C * S], dy[N * C * S], y[N * C * S];
    static lab25_bn_ref ref;
    bn_layer bn;
    bn_init(&bn, C, 0.3f, LAB25_BN_EPS);
    lab25_bn_params(&bn);
    lab25_bn_ref_init(&ref, C);
    for (int step = 1; step <= 3; step++) {
        lab25_bn_batch(mpt_seed() + 99, step, N, C, S, x, dy);
        bn_forward(&bn, x, N, S, y, true);
        lab25_bn_ref_step(&ref, &bn, x, dy, N, S);
    }
    BN_CLOSE(bn.running_var, ref.running_var, C, 1e-5, 1e-6, "running_var after 3 steps with momentum 0.3",
             "running = (1 - momentum) * running + momentum * unbiased batch variance");
    float rm[C], rv[C];
    memcpy(rm, bn.running_mean, sizeof rm);
    memcpy(rv, bn.running_var, sizeof rv);
    lab25_bn_batch(mpt_seed() + 99, 4, N, C, S, x, dy);
    bn_forward(&bn, x, N, S, y, false);
    static double want[N * C * S];
    for (int i = 0; i < N * C * S; i++) {
        int c = (i / S) % C;
        want[i] = (x[i] - ref.running_mean[c]) / sqrt(ref.running_var[c] + LAB25_BN_EPS) * bn.gamma[c] + bn.beta[c];
    }
    BN_CLOSE(y, want, N * C * S, 1e-5, 1e-5, "eval: y with the running statistics", "eval uses running_mean/var");
    MPT_CHECK(memcmp(rm, bn.running_mean, sizeof rm) == 0 && memcmp(rv, bn.running_var, sizeof rv) == 0 &&
              bn.steps == 3, "eval changed the running statistics or the step count (%ld): it must not", bn.steps);
    bn_free(&bn);
}
