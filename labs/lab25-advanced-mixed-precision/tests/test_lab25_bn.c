/* test_lab25_bn.c: lab 25 visible tests of part D, BatchNorm under mixed precision (core/ops/batchnorm.c): the
 * statistics and the running statistics against double, backward against double, fp16 statistics against fp32
 * ones for values around 1000, and SyncBN on 2 real ranks against 1 rank on the whole batch. */
#include "mptest.h"
#include "lab25_bn.h"
#include "ops/norm_precision.h"

static const char *const STATS_MISTAKE =
    "two passes per channel over its N * S values (sample by sample, position by position): mean = sum / M, then "
    "var = sum of (x - mean)^2 / M (biased: divided by M, not M - 1); M = N * S, the count over all ranks";
static const char *const RUNNING_MISTAKE =
    "running = (1 - momentum) * running + momentum * batch, with the batch variance made unbiased for the running "
    "one: var * M / (M - 1) (PyTorch's convention; momentum is the new batch's weight, 0.1)";
static const char *const BACKWARD_MISTAKE =
    "dx = gamma * rstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M), xhat = (x - mean) * rstd, the sums per "
    "channel; dbeta = sum(dy), dgamma = sum(dy * xhat)";

/* The layer's batch statistics as floats next to the reference's, for BN_CLOSE. */
static void copy_stats(const bn_layer *bn, float *mean, float *var) {
    memcpy(mean, bn->mean, (size_t)bn->channels * sizeof(float));
    memcpy(var, bn->var, (size_t)bn->channels * sizeof(float));
}

/* One rank, 6 samples of 3 channels of 5 positions (an image of 5 pixels), two training steps: the batch mean and
 * variance, y, and the running statistics after each step, against double. */
MPT_TEST(bn_fp32_statistics_match_double) {
    enum { N = 6, C = 3, S = 5 };
    static float x[N * C * S], dy[N * C * S], y[N * C * S];
    float mean[C], var[C];
    static lab25_bn_ref ref;
    bn_layer bn;
    bn_init(&bn, C, LAB25_BN_MOMENTUM, LAB25_BN_EPS);
    lab25_bn_params(&bn);
    lab25_bn_ref_init(&ref, C);
    for (int step = 1; step <= 2; step++) {
        lab25_bn_batch(mpt_seed(), step, N, C, S, x, dy);
        bn_forward(&bn, x, N, S, y, true);
        lab25_bn_ref_step(&ref, &bn, x, dy, N, S);
        copy_stats(&bn, mean, var);
        char what[96];
        snprintf(what, sizeof what, "step %d: the batch mean per channel", step);
        if (!BN_CLOSE(mean, ref.mean, C, 1e-5, 1e-5, what, STATS_MISTAKE)) break;
        snprintf(what, sizeof what, "step %d: the batch variance per channel", step);
        if (!BN_CLOSE(var, ref.var, C, 1e-5, 1e-6, what, STATS_MISTAKE)) break;
        snprintf(what, sizeof what, "step %d: y = (x - mean) * rstd * gamma + beta", step);
        if (!BN_CLOSE(y, ref.y, N * C * S, 1e-5, 1e-5, what, STATS_MISTAKE)) break;
        snprintf(what, sizeof what, "step %d: running_mean (starts at 0)", step);
        if (!BN_CLOSE(bn.running_mean, ref.running_mean, C, 1e-5, 1e-6, what, RUNNING_MISTAKE)) break;
        snprintf(what, sizeof what, "step %d: running_var (starts at 1)", step);
        if (!BN_CLOSE(bn.running_var, ref.running_var, C, 1e-5, 1e-6, what, RUNNING_MISTAKE)) break;
    }
    MPT_CHECK_EQ_I64(2, bn.steps, "training forwards counted (num_batches_tracked)");
    bn_free(&bn);
}

/* The same layer's backward after a training forward: dx, dgamma, dbeta against double. */
MPT_TEST(bn_backward_matches_double) {
    enum { N = 4, C = 3, S = 7 };
    static float x[N * C * S], dy[N * C * S], y[N * C * S], dx[N * C * S];
    float dgamma[C], dbeta[C];
    static lab25_bn_ref ref;
    bn_layer bn;
    bn_init(&bn, C, LAB25_BN_MOMENTUM, LAB25_BN_EPS);
    lab25_bn_params(&bn);
    lab25_bn_ref_init(&ref, C);
    lab25_bn_batch(mpt_seed() + 7, 1, N, C, S, x, dy);
    bn_forward(&bn, x, N, S, y, true);
    bn_backward(&bn, x, dy, N, S, dx, dgamma, dbeta);
    lab25_bn_ref_step(&ref, &bn, x, dy, N, S);
    BN_CLOSE(dbeta, ref.dbeta, C, 1e-5, lab25_bn_sum_tol(&ref, C), "dbeta = sum of dy per channel", BACKWARD_MISTAKE);
    BN_CLOSE(dgamma, ref.dgamma, C, 1e-5, lab25_bn_sum_tol(&ref, C), "dgamma = sum of dy * xhat per channel",
             BACKWARD_MISTAKE);
    BN_CLOSE(dx, ref.dx, N * C * S, 1e-4, 1e-5, "dx", BACKWARD_MISTAKE);
    /* y's gradient through the mean: every channel's dx sums to 0 */
    for (int c = 0; c < C; c++) {
        double s = 0, scale = 0;
        for (int i = 0; i < N * S; i++) {
            s += dx[((size_t)(i / S) * C + c) * S + i % S];
            scale += fabs(dx[((size_t)(i / S) * C + c) * S + i % S]);
        }
        MPT_CHECK(fabs(s) <= 1e-5 * scale + 1e-6, "channel %d: dx summed over the channel's values\n"
                  "      expected: 0 (the mean's gradient takes out sum(dy) / M)\n      got:      %g\n"
                  "      likely mistake: %s", c, s, BACKWARD_MISTAKE);
    }
    bn_free(&bn);
}

/* fp16 inputs around 1000 with spread 0.5: statistics whose sums are rounded to fp16 at every add lose the
 * variance (the running sum passes 32768, where fp16's spacing is 32: the mean is off by units, and the variance
 * around a wrong mean is too large by the error squared); fp32 sums keep it. */
MPT_TEST(bn_fp16_statistics_lose_the_variance) {
    enum { N = 48 };
    float x[N], y[N];
    mp_rng rng;
    mp_rng_seed(&rng, 1000 + mpt_seed() % 1000);
    double s = 0, q = 0;
    for (int i = 0; i < N; i++) s += x[i] = norm_round(&FP_FP16, 1000.0f + 0.5f * mp_rng_normal(&rng));
    for (int i = 0; i < N; i++) q += (x[i] - s / N) * (x[i] - s / N);
    double var = q / N;
    /* the fp16 statistics as batchnorm.h defines them: every sum, the mean and the variance rounded to fp16 */
    float r_s = 0, r_q = 0, r_n = norm_round(&FP_FP16, (float)N);
    for (int i = 0; i < N; i++) r_s = norm_round(&FP_FP16, r_s + x[i]);
    float r_mean = norm_round(&FP_FP16, r_s / r_n);
    for (int i = 0; i < N; i++) {
        float d = norm_round(&FP_FP16, x[i] - r_mean);
        r_q = norm_round(&FP_FP16, r_q + norm_round(&FP_FP16, d * d));
    }
    float r_var = norm_round(&FP_FP16, r_q / r_n);
    bn_layer bn;
    bn_init(&bn, 1, LAB25_BN_MOMENTUM, LAB25_BN_EPS);
    bn.stats_fmt = &FP_FP32;
    bn_forward(&bn, x, N, 1, y, true);
    MPT_CHECK_NEAR(var, bn.var[0], 1e-4, 0, "fp32 statistics of 48 fp16 values around 1000: the variance");
    bn.stats_fmt = &FP_FP16;
    bn_forward(&bn, x, N, 1, y, true);
    MPT_CHECK_FLOAT_BITS(r_mean, bn.mean[0], "fp16 statistics: the mean (s = r(s + x) at every add, mean = r(s / M))");
    MPT_CHECK_FLOAT_BITS(r_var, bn.var[0], "fp16 statistics: the variance (d = r(x - mean), q = r(q + r(d * d)), "
                         "var = r(q / M)); r() is norm_round(stats_fmt, .)");
    MPT_CHECK(fabs(bn.var[0] - var) > 0.5 * var,
              "fp16 statistics of values around 1000 with spread 0.5: the variance should be far off\n"
              "      expected: more than 50%% from %.5f (fp16's spacing is 32 above 32768: the sum's rounding moves "
              "the mean by units)\n      got:      %.5f\n      likely mistake: round every add of the sums to "
              "stats_fmt with norm_round, as the fp16 accumulator would", var, (double)bn.var[0]);
    bn_free(&bn);
}

/* SyncBN on 2 real ranks with 5 and 3 samples: every rank's y and dx are the rows of 1 rank's BatchNorm on the 8
 * samples together, their running statistics are that run's, and their dgamma, dbeta sum to its. Per-rank BN (the
 * same ranks without comm) is BatchNorm on each rank's own samples. */
MPT_TEST(syncbn_2_ranks_equal_1_rank_on_the_whole_batch) {
    enum { C = 3, S = 4, RANKS = 2 };
    const int counts[RANKS] = {5, 3}, total = 8;
    static lab25_bn_report rep[RANKS][2];
    uint64_t seed = 17 + mpt_seed() % 100000;
    lab25_bn_launch(RANKS, counts, C, S, seed, rep);
    static float x[LAB25_BN_MAX_VALUES], dy[LAB25_BN_MAX_VALUES];
    static lab25_bn_ref whole, own[RANKS];
    bn_layer shape;
    bn_init(&shape, C, LAB25_BN_MOMENTUM, LAB25_BN_EPS);
    lab25_bn_params(&shape);
    lab25_bn_ref_init(&whole, C);
    for (int r = 0; r < RANKS; r++) lab25_bn_ref_init(&own[r], C);
    for (int step = 1; step <= LAB25_BN_STEPS; step++) {
        lab25_bn_batch(seed, step, total, C, S, x, dy);
        lab25_bn_ref_step(&whole, &shape, x, dy, total, S);
        for (int r = 0, first = 0; r < RANKS; first += counts[r++])
            lab25_bn_ref_step(&own[r], &shape, x + (size_t)first * C * S, dy + (size_t)first * C * S, counts[r], S);
    }
    static const char *const SYNC_MISTAKE =
        "SyncBN allreduces the per-channel sums AND the count (M = 8 * S here, not this rank's), then the sums of "
        "squared deviations from the global mean; backward allreduces sum(dy) and sum(dy * xhat)";
    char what[120];
    double dgamma[C] = {0}, dbeta[C] = {0};
    for (int r = 0, first = 0; r < RANKS; first += counts[r++]) {
        const lab25_bn_report *sy = &rep[r][0], *pr = &rep[r][1];
        size_t at = (size_t)first * C * S, v = (size_t)counts[r] * C * S;
        snprintf(what, sizeof what, "SyncBN, rank %d (%d samples): y against 1 rank on all 8", r, counts[r]);
        if (!BN_CLOSE(sy->y, whole.y + at, (int)v, 1e-5, 1e-5, what, SYNC_MISTAKE)) break;
        snprintf(what, sizeof what, "SyncBN, rank %d: dx against 1 rank on all 8", r);
        if (!BN_CLOSE(sy->dx, whole.dx + at, (int)v, 1e-4, 1e-5, what, SYNC_MISTAKE)) break;
        snprintf(what, sizeof what, "SyncBN, rank %d: running_mean after 2 steps", r);
        if (!BN_CLOSE(sy->running_mean, whole.running_mean, C, 1e-5, 1e-6, what, SYNC_MISTAKE)) break;
        snprintf(what, sizeof what, "SyncBN, rank %d: running_var after 2 steps (unbiased with the global M)", r);
        if (!BN_CLOSE(sy->running_var, whole.running_var, C, 1e-5, 1e-6, what, SYNC_MISTAKE)) break;
        snprintf(what, sizeof what, "per-rank BN, rank %d: y against BatchNorm of its own %d samples", r, counts[r]);
        if (!BN_CLOSE(pr->y, own[r].y, (int)v, 1e-5, 1e-5, what, "without comm a rank's statistics are its own")) break;
        snprintf(what, sizeof what, "per-rank BN, rank %d: dx against BatchNorm of its own samples", r);
        if (!BN_CLOSE(pr->dx, own[r].dx, (int)v, 1e-4, 1e-5, what, "without comm a rank's statistics are its own"))
            break;
        for (int c = 0; c < C; c++) dgamma[c] += sy->dgamma[c], dbeta[c] += sy->dbeta[c];
    }
    float got_dgamma[C], got_dbeta[C];
    for (int c = 0; c < C; c++) got_dgamma[c] = (float)dgamma[c], got_dbeta[c] = (float)dbeta[c];
    BN_CLOSE(got_dbeta, whole.dbeta, C, 1e-5, lab25_bn_sum_tol(&whole, C), "SyncBN: dbeta summed over the ranks",
             "dbeta and dgamma are this rank's own sums (DDP averages them like any parameter gradient): take them "
             "before the allreduce, or every rank reports the global sum");
    BN_CLOSE(got_dgamma, whole.dgamma, C, 1e-5, lab25_bn_sum_tol(&whole, C), "SyncBN: dgamma summed over the ranks",
             "dgamma = this rank's sum of dy * xhat, with xhat from the global statistics, before the allreduce");
    bn_free(&shape);
}
