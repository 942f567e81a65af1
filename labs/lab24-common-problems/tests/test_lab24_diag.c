/* test_lab24_diag.c: lab 24 visible tests: the four detectors of core/diag/diag.c on crafted series (true positives,
 * no false alarm on a healthy noisy series), and the zoo's config bugs run with your fixes (core/diag/zoo_fixes.c). */
#include "base/mem.h"
#include "base/rng.h"
#include "lab24_util.h"

/* ------------------------------------------------------------------ A. divergence */

/* A falling loss that turns NaN at index 30: found there, whatever came before. */
MPT_TEST(divergence_finds_the_first_nan) {
    double loss[40];
    for (int i = 0; i < 40; i++) loss[i] = i < 30 ? 3.0 - 0.02 * i : (i == 30 ? NAN : INFINITY);
    DIVERGENCE_AT(loss, 40, DIAG_NONFINITE, 30, "a falling loss, NaN at index 30, inf after");
    loss[2] = INFINITY;
    DIVERGENCE_AT(loss, 40, DIAG_NONFINITE, 2, "the same with an inf at index 2 (before min_history: still found)");
}

/* A loss that settles at 2.0 and jumps to 3.2 (1.6 x the minimum) at index 60; 2.9 (1.45 x) at 45 is no spike. */
MPT_TEST(divergence_finds_a_spike_above_factor_times_the_minimum) {
    double loss[80];
    for (int i = 0; i < 80; i++) loss[i] = 2.0 + 1.0 / (1 + i);
    loss[45] = 2.9;
    loss[60] = 3.2;
    DIVERGENCE_AT(loss, 80, DIAG_SPIKE, 60, "2 + 1/(1+i), 2.9 at index 45 (under 1.5x), 3.2 at index 60 (over 1.5x)");
    /* a climb in two steps: each under 1.5x the point before it, the second over 1.5x the minimum */
    double climb[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1.4, 1.6};
    DIVERGENCE_AT(climb, 12, DIAG_SPIKE, 11, "1.0 for 10 points, then 1.4 and 1.6: 1.6 > 1.5 x the window's minimum 1.0 "
                  "(compared with the previous point 1.4 it would pass)");
    /* the first point that may be judged: exactly min_history (5) finite points before it */
    double first[6] = {4, 1, 1, 1, 1, 1.6};
    DIVERGENCE_AT(first, 6, DIAG_SPIKE, 5, "4 1 1 1 1 then 1.6 at index 5: five finite points seen, judged (seen >= "
                  "min_history)");
}

/* A healthy run: falling from 7 to 2 with 10% multiplicative noise; the first steps fall fast. No alarm. */
MPT_TEST(divergence_no_alarm_on_a_healthy_noisy_loss) {
    enum { N = 500 };
    double loss[N];
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed());
    for (int i = 0; i < N; i++) loss[i] = (2.0 + 5.0 * exp(-i / 40.0)) * (1 + 0.1 * (mp_rng_uniform(&rng) - 0.5));
    DIVERGENCE_AT(loss, N, DIAG_HEALTHY, -1, "a loss from 7 to 2 with +-5% noise");
    /* a low point 70 steps back has left the window of 50: 2.6 < 1.5 x 2.0 is no spike */
    double flat[90];
    for (int i = 0; i < 90; i++) flat[i] = i == 10 ? 1.6 : i == 80 ? 2.6 : 2.0;
    DIVERGENCE_AT(flat, 90, DIAG_HEALTHY, -1, "2.0 with 1.6 at index 10 and 2.6 at index 80: the window 30..79 has "
                  "minimum 2.0 (over the whole history 1.6 would make 2.6 a spike)");
    double early[3] = {10.0, 2.0, 9.0};
    DIVERGENCE_AT(early, 3, DIAG_HEALTHY, -1, "three points: fewer than min_history (5) finite points before the last");
}

/* ------------------------------------------------------------------ B. memory leak */

/* 64 KiB more every step: a leak with slope 65536 and standard error 0. */
MPT_TEST(leak_found_with_its_slope) {
    enum { N = 60 };
    double step[N], bytes[N];
    for (int i = 0; i < N; i++) step[i] = i + 1, bytes[i] = 1e6 + 65536.0 * (i + 1);
    diag_leak_rule rule = DIAG_LEAK_DEFAULT;
    diag_leak lk;
    bool found = diag_find_leak(step, bytes, N, &rule, &lk);
    MPT_CHECK(found && lk.leak, "64 KiB a step for 60 steps: expected a leak, got none (slope %g, se %g)", lk.slope,
              lk.slope_se);
    MPT_CHECK_NEAR(65536.0, lk.slope, 1e-9, 0, "slope in bytes a step");
    MPT_CHECK_NEAR(0.0, lk.slope_se, 0, 1e-6, "standard error of an exact line");
    MPT_CHECK_EQ_I64(15, lk.first, "first sample in the fit: floor(0.25 x 60)");
    MPT_CHECK_NEAR(65536.0 * 44, lk.growth, 1e-9, 0, "growth over steps 16..60");
    /* a noisy line sampled every 10 steps: the slope and its standard error sqrt(SSR / (n - 2) / Sxx) against
     * least squares here, and the growth over the steps the fit spans */
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed());
    for (int i = 0; i < N; i++) step[i] = 10.0 * i, bytes[i] = 1e6 + 300.0 * step[i] + 8192.0 * (mp_rng_uniform(&rng) - 0.5);
    double slope, se;
    lab24_ls_slope(step + 15, bytes + 15, N - 15, &slope, &se);
    diag_find_leak(step, bytes, N, &rule, &lk);
    MPT_CHECK_NEAR(slope, lk.slope, 1e-9, 0, "slope of 300 bytes a step +- 4 KiB of noise, samples 15..59 (steps "
                   "150..590)");
    MPT_CHECK_NEAR(se, lk.slope_se, 1e-9, 0, "its standard error: sqrt(SSR / (n - 2) / Sxx), n - 2 degrees of freedom, "
                   "divided by Sxx (the residuals' spread is not the slope's)");
    MPT_CHECK_NEAR(slope * (590 - 150), lk.growth, 1e-9, 0, "growth: the slope times the steps the fit spans (590 - "
                   "150), not times the number of samples");
}

/* Healthy memory: optimizer states appear at step 1 (a step up), then the activations go up and down by a few
 * KiB around a flat level. No leak. */
MPT_TEST(leak_no_alarm_on_a_step_then_flat_noise) {
    enum { N = 100 };
    double step[N], bytes[N];
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed());
    for (int i = 0; i < N; i++) {
        step[i] = i;
        bytes[i] = (i < 10 ? 1e6 : 5e6) + 4096.0 * (double)(mp_rng_u32(&rng) % 8);
    }
    diag_leak_rule rule = DIAG_LEAK_DEFAULT;
    diag_leak lk;
    MPT_CHECK(!diag_find_leak(step, bytes, N, &rule, &lk),
              "1 MB for 10 steps, then 5 MB +- 16 KiB of noise: expected no leak, got one (slope %g, se %g, from "
              "sample %ld)\n      likely mistake: fit only from floor(skip_fraction x n) on, and require slope >= "
              "min_t x its standard error",
              lk.slope, lk.slope_se, lk.first);
    for (int i = 0; i < 40; i++) step[i] = i, bytes[i] = 5e6 + 16.0 * i;
    MPT_CHECK(!diag_find_leak(step, bytes, 40, &rule, &lk),
              "16 bytes more every step, no noise (464 bytes over the fitted steps 10..39): expected no leak, got one "
              "(growth %g)\n      likely mistake: a leak also needs growth >= min_growth (1024 bytes)", lk.growth);
}

/* ------------------------------------------------------------------ C. desync */

/* Three ranks, eight steps: rank 2 differs from step index 5, rank 1 from step index 6. */
MPT_TEST(desync_first_step_then_lowest_rank) {
    enum { R = 3, S = 8 };
    uint64_t h[R * S];
    for (int r = 0; r < R; r++)
        for (int s = 0; s < S; s++) h[r * S + s] = 0x1000 + (uint64_t)s;
    for (int s = 5; s < S; s++) h[2 * S + s] ^= 0xff;
    for (int s = 6; s < S; s++) h[1 * S + s] ^= 0xf0;
    h[1 * S + 2] = DIAG_NO_HASH; /* rank 1 wrote no hash at step index 2: says nothing */
    diag_desync d;
    MPT_CHECK(diag_find_desync(h, R, S, &d), "rank 2 differs from step index 5: expected a desync, got none");
    MPT_CHECK_EQ_I64(5, d.step_index, "first step index that differs (rank 1's DIAG_NO_HASH at index 2 says nothing)");
    MPT_CHECK_EQ_I64(2, d.rank, "the rank that differs there");
    MPT_CHECK_EQ_HEX(0x1005, d.expected, "rank 0's hash there");
    MPT_CHECK_EQ_HEX(0x1005 ^ 0xff, d.got, "rank 2's hash there");
    for (int s = 0; s < S; s++) h[2 * S + s] = h[1 * S + s] = h[s];
    MPT_CHECK(!diag_find_desync(h, R, S, &d) && d.step_index == -1,
              "identical hashes: expected no desync, got step index %ld rank %d", d.step_index, d.rank);
}

/* ------------------------------------------------------------------ D. out of memory before launch */

MPT_TEST(oom_names_the_biggest_tag_and_its_fix) {
    plan_result p = {0};
    p.bytes[MEM_PARAM] = 400, p.bytes[MEM_GRAD] = 400, p.bytes[MEM_OPTIM] = 800, p.bytes[MEM_ACT] = 38000;
    p.bytes[MEM_HOST] = 1u << 30; /* offloaded: not on the device */
    diag_oom o;
    MPT_CHECK(!diag_check_oom(&p, 32000, &o) && !o.fits, "39,600 device bytes against a limit of 32,000: expected no fit");
    MPT_CHECK_EQ_U64(39600, o.need, "device bytes (every tag but host)");
    MPT_CHECK_EQ_I64(MEM_ACT, o.biggest, "the biggest tag (MEM_ACT)");
    MPT_CHECK_NEAR(38000.0 / 39600, o.share, 1e-12, 0, "its share of the need");
    MPT_CHECK(o.fix && strstr(o.fix, "train_micro_batch_size_per_gpu"), "the fix for activations names "
              "train_micro_batch_size_per_gpu; got \"%s\"", o.fix ? o.fix : "(null)");
    MPT_CHECK(diag_check_oom(&p, 39600, &o), "exactly at the limit fits");
    MPT_CHECK(diag_check_oom(&p, 0, &o) && o.fits, "limit 0 means no limit: expected a fit, got none");
}

/* ------------------------------------------------------------------ E. the zoo's config bugs, fixed */

/* fp16 with lr 10 and no clipping: NaN by step ~30, the scale at its floor. Fixed: finishes, finite, learns. */
MPT_TEST(fix_fp16_lr_too_high_trains) {
    lab24_run r = lab24_run_bug("fp16-lr-too-high", true, 30);
    FIX_RAN(r, "fp16-lr-too-high", 30);
    MPT_CHECK(r.all_finite && r.skipped <= 2 && r.last_loss < r.first_loss,
              "fp16-lr-too-high fixed: expected finite losses, at most 2 skipped steps, a falling loss\n"
              "      got: finite %d, %ld skipped, loss %.4f -> %.4f", r.all_finite, r.skipped, r.first_loss, r.last_loss);
    MPT_CHECK(r.lowest_before_spike <= 1.5, "fp16-lr-too-high fixed: no loss above 1.5x the lowest before it; got %.2fx",
              r.lowest_before_spike);
}

/* A static loss scale of 1e9: every step skipped. Fixed: steps are taken. */
MPT_TEST(fix_scale_stuck_at_minimum_takes_steps) {
    lab24_run r = lab24_run_bug("scale-stuck-at-minimum", true, 20);
    FIX_RAN(r, "scale-stuck-at-minimum", 20);
    MPT_CHECK(r.skipped_last10 == 0 && r.last_loss < r.first_loss,
              "scale-stuck-at-minimum fixed: expected no skipped step among the last 10 and a falling loss\n"
              "      got: %ld skipped of the last 10, loss %.4f -> %.4f", r.skipped_last10, r.first_loss, r.last_loss);
}

/* lr 0.3 from step 1, no clipping: the loss triples at step 6. Fixed: no spike, and it learns. */
MPT_TEST(fix_loss_spike_no_warmup_is_smooth) {
    lab24_run r = lab24_run_bug("loss-spike-no-warmup", true, 40);
    FIX_RAN(r, "loss-spike-no-warmup", 40);
    MPT_CHECK(r.all_finite && r.lowest_before_spike <= 1.5 && r.last_loss < r.first_loss - 0.1,
              "loss-spike-no-warmup fixed: expected no loss above 1.5x the lowest before it and a loss 0.1 lower at the "
              "end\n      got: worst ratio %.2fx, loss %.4f -> %.4f",
              r.lowest_before_spike, r.first_loss, r.last_loss);
}
