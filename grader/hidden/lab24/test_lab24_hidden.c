/* test_lab24_hidden.c: lab 24 hidden tests: the detectors' edge cases and random series against a reference, and
 * the rest of the zoo's config bugs run with the student's fixes. */
#include "../../../labs/lab24-common-problems/tests/lab24_util.h"
#include "base/mem.h"
#include "base/rng.h"

/* The running minimum covers only the last `window` points: a low point 60 steps back is forgotten. */
MPT_TEST(divergence_window_forgets_an_old_minimum) {
    double loss[120];
    for (int i = 0; i < 120; i++) loss[i] = 3.0;
    loss[10] = 1.0;  /* 3.0 > 1.5 x 1.0 until index 60 */
    DIVERGENCE_AT(loss, 120, DIAG_SPIKE, 11, "3.0 everywhere but 1.0 at index 10: index 11 is 3x the minimum");
    loss[10] = 2.5; /* 3.0 < 1.5 x 2.5 */
    DIVERGENCE_AT(loss, 120, DIAG_HEALTHY, -1, "3.0 everywhere but 2.5 at index 10");
    for (int i = 0; i < 120; i++) loss[i] = i < 20 ? 1.0 : 2.0;
    DIVERGENCE_AT(loss, 120, DIAG_SPIKE, 20, "1.0 for 20 steps, then 2.0 (2.0 > 1.5 x 1.0 at index 20)");
    for (int i = 0; i < 120; i++) loss[i] = i == 40 ? 1.1 : 2.0;
    DIVERGENCE_AT(loss, 120, DIAG_SPIKE, 41, "2.0 with 1.1 at index 40 (2.0 > 1.5 x 1.1 = 1.65 at index 41)");
    for (int i = 0; i < 120; i++) loss[i] = i == 40 ? 1.5 : (i == 95 ? 2.9 : 2.0);
    DIVERGENCE_AT(loss, 120, DIAG_HEALTHY, -1,
                  "2.0 with 1.5 at index 40 and 2.9 at index 95: 1.5 has left the window (95 - 50 = 45 > 40) and "
                  "2.9 < 1.5 x 2.0");
}

/* No spike before min_history (5) points were seen; then random noisy series with one spike at a drawn index. */
MPT_TEST(divergence_min_history_and_random_series) {
    double loss[8] = {5, 1, 1, 1, 1, 1.6, 1.6, 1.6};
    DIVERGENCE_AT(loss, 8, DIAG_SPIKE, 5, "5 1 1 1 1 then 1.6 (index 5: five finite points seen)");
    double early[6] = {1, 1, 1, 1, 1.6, 1};
    DIVERGENCE_AT(early, 6, DIAG_HEALTHY, -1, "1 1 1 1 1.6 1: only four points before the 1.6");
    /* Random series: a slow fall with noise, and a spike of 1.5-3x at a drawn index; found there. */
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed());
    for (int trial = 0; trial < 20; trial++) {
        double s[300];
        long at = 10 + (long)(mp_rng_u32(&rng) % 280);
        for (int i = 0; i < 300; i++) s[i] = (2 + 3 * exp(-i / 30.0)) * (1 + 0.08 * mp_rng_uniform(&rng));
        s[at] *= 1.9 + mp_rng_uniform(&rng);
        DIVERGENCE_AT(s, 300, DIAG_SPIKE, at, "a noisy falling loss with one point 1.9-2.9x its level");
    }
}

/* The slope and its standard error on random noisy lines, against least squares computed here. */
MPT_TEST(leak_slope_matches_least_squares_on_random_lines) {
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed());
    for (int trial = 0; trial < 10; trial++) {
        enum { N = 80 };
        double step[N], bytes[N], slope, se;
        double b = 1000.0 * (double)(mp_rng_u32(&rng) % 100);
        for (int i = 0; i < N; i++) step[i] = 5.0 * i, bytes[i] = 1e7 + b * step[i] + 20000.0 * mp_rng_normal(&rng);
        diag_leak_rule rule = DIAG_LEAK_DEFAULT;
        diag_leak lk;
        bool found = diag_find_leak(step, bytes, N, &rule, &lk);
        lab24_ls_slope(step + 20, bytes + 20, N - 20, &slope, &se);
        MPT_CHECK_NEAR(slope, lk.slope, 1e-9, 1e-6, "least-squares slope over samples 20..79");
        MPT_CHECK_NEAR(se, lk.slope_se, 1e-9, 1e-9, "its standard error sqrt(SSR / (n - 2) / Sxx)");
        bool want = slope > 0 && slope >= 5 * se && slope * (step[N - 1] - step[20]) >= 1024;
        MPT_CHECK(found == want, "slope %g, se %g: expected leak %d, got %d", slope, se, want, found);
    }
}

/* Too few samples: no verdict; a falling series: no leak; all samples at one step: no slope. */
MPT_TEST(leak_edge_cases) {
    double step[8] = {1, 2, 3, 4, 5, 6, 7, 8}, up[8] = {1, 2e6, 4e6, 6e6, 8e6, 1e7, 1.2e7, 1.4e7};
    diag_leak_rule rule = DIAG_LEAK_DEFAULT;
    diag_leak lk;
    MPT_CHECK(!diag_find_leak(step, up, 6, &rule, &lk) && lk.used == 5,
              "6 samples: floor(0.25 x 6) = 1 left out, 5 fitted, fewer than min_samples (6): no verdict; got leak %d "
              "from %ld samples", lk.leak, lk.used);
    MPT_CHECK(diag_find_leak(step, up, 7, &rule, &lk) && lk.used == 6,
              "7 samples: floor(1.75) = 1 left out, 6 fitted: growing 2 MB a step, a leak; got leak %d from %ld samples",
              lk.leak, lk.used);
    MPT_CHECK(diag_find_leak(step, up, 8, &rule, &lk), "8 samples growing 2 MB a step: a leak");
    double down[8];
    for (int i = 0; i < 8; i++) down[i] = 1e8 - 1e6 * i;
    MPT_CHECK(!diag_find_leak(step, down, 8, &rule, &lk), "memory falling 1 MB a step: no leak (slope < 0)");
    double same[8] = {3, 3, 3, 3, 3, 3, 3, 3};
    MPT_CHECK(!diag_find_leak(same, up, 8, &rule, &lk), "every sample at step 3: no slope, no leak");
    double tiny[40], st[40];
    for (int i = 0; i < 40; i++) st[i] = i, tiny[i] = 5e6 + 8.0 * i; /* 8 bytes a step: 232 bytes over the fit */
    MPT_CHECK(!diag_find_leak(st, tiny, 40, &rule, &lk), "8 bytes a step (232 over the fit): under min_growth 1024");
}

/* Missing hashes (DIAG_NO_HASH) on either side are ignored; only rank 0 is the reference. */
MPT_TEST(desync_ignores_missing_hashes) {
    enum { R = 4, S = 5 };
    uint64_t h[R * S];
    for (int r = 0; r < R; r++)
        for (int s = 0; s < S; s++) h[r * S + s] = 0xabc0 + (uint64_t)s;
    h[0 * S + 1] = DIAG_NO_HASH;
    h[3 * S + 1] = 0x1; /* differs where rank 0 has none: ignored */
    h[2 * S + 2] = DIAG_NO_HASH;
    h[3 * S + 3] = 0x2;
    h[1 * S + 4] = 0x3;
    diag_desync d;
    MPT_CHECK(diag_find_desync(h, R, S, &d), "rank 3 differs at step index 3: expected a desync");
    MPT_CHECK_EQ_I64(3, d.step_index, "first step index that differs (index 1: rank 0 has no hash)");
    MPT_CHECK_EQ_I64(3, d.rank, "the rank");
    MPT_CHECK(!diag_find_desync(h, 1, S, &d), "one rank: nothing to compare");
}

/* No limit fits; host bytes never count; the tag with most bytes wins. */
MPT_TEST(oom_edge_cases) {
    plan_result p = {0};
    p.bytes[MEM_PARAM] = 5000, p.bytes[MEM_MASTER] = 10000, p.bytes[MEM_OPTIM] = 20000, p.bytes[MEM_ACT] = 3000;
    p.bytes[MEM_HOST] = 1000000;
    diag_oom o;
    MPT_CHECK(diag_check_oom(&p, 0, &o) && o.fits, "limit 0 means no limit: fits");
    MPT_CHECK_EQ_U64(38000, o.need, "device bytes");
    MPT_CHECK_EQ_I64(MEM_OPTIM, o.biggest, "the biggest device tag (MEM_OPTIM; host is not on the device)");
    MPT_CHECK(o.fix && strstr(o.fix, "zero_optimization"), "the fix for optimizer states names ZeRO; got \"%s\"",
              o.fix ? o.fix : "(null)");
    MPT_CHECK(!diag_check_oom(&p, 37999, &o), "one byte short: no fit");
}

/* bf16 weights, lr 1e-5, no stochastic rounding: most updates are rounded away. Fixed: it learns faster than the
 * broken run, on the same batches. */
MPT_TEST(fix_bf16_no_master_weights_learns) {
    lab24_run broken = lab24_run_bug("bf16-no-master-weights", false, 30);
    lab24_run r = lab24_run_bug("bf16-no-master-weights", true, 30);
    FIX_RAN(r, "bf16-no-master-weights", 30);
    MPT_CHECK(broken.exit_code == 0 && r.last_loss < broken.last_loss - 0.005,
              "bf16-no-master-weights: expected the fixed run's loss after 30 steps at least 0.005 under the broken "
              "run's\n      got: fixed %.4f, broken %.4f", r.last_loss, broken.last_loss);
}

/* Activations of 128 sequences over a 32 MB limit. Fixed: runs within the limit, the same global batch of 128. */
MPT_TEST(fix_oom_at_launch_fits_with_the_same_batch) {
    lab24_run r = lab24_run_bug("oom-at-launch", true, 3);
    FIX_RAN(r, "oom-at-launch", 3);
    MPT_CHECK(r.train_batch_size == 128, "oom-at-launch fixed: expected the global batch kept at 128 sequences "
              "(micro-batch x accumulation), got %ld", r.train_batch_size);
}

/* fp16 with a static scale of 1e9 and no stop: 60 skipped steps and a flat loss. Fixed: it learns. */
MPT_TEST(fix_silent_skipped_run_learns) {
    lab24_run r = lab24_run_bug("silent-skipped-run", true, 20);
    FIX_RAN(r, "silent-skipped-run", 20);
    MPT_CHECK(r.skipped_last10 == 0 && r.last_loss < r.first_loss - 0.05,
              "silent-skipped-run fixed: expected no skipped step among the last 10 and a loss 0.05 lower\n"
              "      got: %ld skipped, loss %.4f -> %.4f", r.skipped_last10, r.first_loss, r.last_loss);
}
