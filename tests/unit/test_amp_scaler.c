/* test_amp_scaler.c: Criterion tests of the loss scalers (amp/scaler.c): traces replayed against sequences worked out
 * by hand from PyTorch's GradScaler and DeepSpeed's DynamicLossScaler rules, the fused unscale, the once-per-step
 * rule, and the checkpoint state round trip. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amp/scaler.h"

/* n updates with the same found_inf; returns the last update. */
static amp_update run(amp_scaler *s, long n, bool found_inf) {
    amp_update u = {0};
    for (long i = 0; i < n; i++) u = amp_scaler_update(s, found_inf);
    return u;
}

static amp_scaler make(amp_scaler_kind kind) {
    amp_scaler s;
    amp_scaler_config c = amp_scaler_defaults(kind);
    amp_scaler_init(&s, &c);
    return s;
}

/* ------------------------------------------------------------------ PyTorch GradScaler */

Test(amp_scaler_pytorch, defaults_are_the_code_defaults) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    cr_expect_eq(c.init_scale, 65536.0, "init_scale=2.0**16");
    cr_expect_eq(c.growth_factor, 2.0);
    cr_expect_eq(c.backoff_factor, 0.5);
    cr_expect_eq(c.growth_interval, 2000);
    amp_scaler s = make(AMP_SCALER_PYTORCH);
    cr_expect_eq(amp_scaler_scale(&s), 65536.0f);
    cr_expect_eq(amp_scaler_inv_scale(&s), 1.0f / 65536.0f);
}

/* tracker counts clean steps; at the 2000th in a row (tracker+1 == 2000) the scale doubles and tracker resets. */
Test(amp_scaler_pytorch, grows_after_exactly_2000_clean_steps) {
    amp_scaler s = make(AMP_SCALER_PYTORCH);
    amp_update u = run(&s, 1999, false);
    cr_expect_eq(u.skipped, false);
    cr_expect_eq(s.scale, 65536.0f, "1999 clean steps: no growth yet");
    cr_expect_eq(s.growth_tracker, 1999);
    u = amp_scaler_update(&s, false);
    cr_expect_eq(u.scale, 65536.0f, "the 2000th step itself ran at 2^16");
    cr_expect_eq(u.next_scale, 131072.0f, "and the next runs at 2^17");
    cr_expect_eq(s.growth_tracker, 0);
    run(&s, 2000, false);
    cr_expect_eq(s.scale, 262144.0f, "another 2000: 2^18");
    cr_expect_eq(s.skipped, 0);
}

/* On inf/NaN: scale *= 0.5, tracker = 0, the step is skipped. */
Test(amp_scaler_pytorch, overflow_backs_off_skips_and_resets_the_tracker) {
    amp_scaler s = make(AMP_SCALER_PYTORCH);
    run(&s, 1500, false);
    cr_assert_eq(s.growth_tracker, 1500);
    amp_update u = amp_scaler_update(&s, true);
    cr_expect(u.skipped);
    cr_expect_eq(u.scale, 65536.0f);
    cr_expect_eq(u.next_scale, 32768.0f);
    cr_expect_eq(s.growth_tracker, 0, "the overflow resets the count of clean steps");
    cr_expect_eq(u.status, AMP_SCALER_OK, "a dynamic scaler's overflow is routine");
    /* 1999 clean steps after the reset: no growth (the 1500 before the overflow do not count). */
    run(&s, 1999, false);
    cr_expect_eq(s.scale, 32768.0f);
    amp_scaler_update(&s, false);
    cr_expect_eq(s.scale, 65536.0f, "growth 2000 clean steps after the overflow");
    cr_expect_eq(s.skipped, 1);
}

/* "C*2000 O C*5 O O O" from the handout: 2^16 -> 2^17 at step 2000, then 2^16, 2^15, 2^14, 2^13. */
Test(amp_scaler_pytorch, handout_trace) {
    amp_scaler s = make(AMP_SCALER_PYTORCH);
    run(&s, 2000, false);
    cr_expect_eq(s.scale, 131072.0f);
    amp_update u = amp_scaler_update(&s, true);
    cr_expect(u.skipped && u.next_scale == 65536.0f);
    run(&s, 5, false);
    cr_expect_eq(s.growth_tracker, 5);
    const float expect[3] = {32768.0f, 16384.0f, 8192.0f};
    for (int i = 0; i < 3; i++) {
        u = amp_scaler_update(&s, true);
        cr_expect(u.skipped);
        cr_expect_eq(u.next_scale, expect[i], "overflow %d in a row", i + 1);
    }
    cr_expect_eq(s.skipped, 4);
    cr_expect_eq(s.consecutive_skipped, 3);
}

/* Growth is refused when the grown scale is inf in fp32; the tracker still resets. */
Test(amp_scaler_pytorch, growth_stays_finite_in_fp32) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    c.init_scale = 0x1p127;
    c.growth_interval = 1;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    amp_update u = amp_scaler_update(&s, false);
    cr_expect_eq(u.next_scale, 0x1p127f, "2^128 is inf in fp32: keep 2^127");
    cr_expect_eq(s.growth_tracker, 0);
    cr_expect(isfinite(s.scale));
}

/* A growth factor of 3 is not a power of two: 65536*3 = 196608, exactly. */
Test(amp_scaler_pytorch, other_factors) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    c.growth_factor = 3;
    c.backoff_factor = 0.25;
    c.growth_interval = 2;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    run(&s, 2, false);
    cr_expect_eq(s.scale, 196608.0f);
    amp_scaler_update(&s, true);
    cr_expect_eq(s.scale, 49152.0f);
}

/* PyTorch has no floor: 142 overflows take 2^16 to 2^-126 (FLT_MIN, still fine); the 143rd to 2^-127, a
 * subnormal: reported as a vanished scale. */
Test(amp_scaler_pytorch, scale_vanishes_after_143_overflows) {
    amp_scaler s = make(AMP_SCALER_PYTORCH);
    amp_update u = run(&s, 142, true);
    cr_expect_eq(u.next_scale, FLT_MIN);
    cr_expect_eq(u.status, AMP_SCALER_OK);
    u = amp_scaler_update(&s, true);
    cr_expect_eq(u.next_scale, 0x1p-127f);
    cr_expect_eq(u.status, AMP_SCALER_SCALE_VANISHED);
    cr_expect(amp_scaler_status_is_fatal(u.status));
    char buf[640];
    amp_scaler_explain(&s, &u, buf, sizeof buf);
    cr_expect(strstr(buf, "143 overflowing steps in a row") != NULL, "%s", buf);
}

Test(amp_scaler_keras, same_rule_from_2_to_the_15) {
    amp_scaler s = make(AMP_SCALER_KERAS);
    cr_expect_eq(s.scale, 32768.0f, "initial_scale=32768.0");
    run(&s, 2000, false);
    cr_expect_eq(s.scale, 65536.0f, "dynamic_growth_steps=2000");
    amp_update u = amp_scaler_update(&s, true);
    cr_expect(u.skipped && u.next_scale == 32768.0f);
}

/* ------------------------------------------------------------------ DeepSpeed DynamicLossScaler */

Test(amp_scaler_deepspeed, defaults_are_the_code_defaults) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_DEEPSPEED);
    cr_expect_eq(c.init_scale, 65536.0, "initial_scale_power 16 (the code; the docs say 32)");
    cr_expect_eq(c.growth_interval, 1000, "loss_scale_window");
    cr_expect_eq(c.hysteresis, 2);
    cr_expect_eq(c.consecutive_hysteresis, false);
    cr_expect_eq(c.min_scale, 1.0, "min_loss_scale 1 (the code; the docs say 1000)");
}

/* cur_iter starts at 0 and last_overflow_iter at -1: (iter - last) % 1000 == 0 first at iter 999, the 1000th step. */
Test(amp_scaler_deepspeed, grows_after_a_window_of_1000) {
    amp_scaler s = make(AMP_SCALER_DEEPSPEED);
    run(&s, 999, false);
    cr_expect_eq(s.scale, 65536.0f);
    amp_update u = amp_scaler_update(&s, false);
    cr_expect_eq(u.next_scale, 131072.0f, "the 1000th clean step doubles the scale");
    run(&s, 1000, false);
    cr_expect_eq(s.scale, 262144.0f, "and every 1000 after");
}

/* hysteresis 2: the first overflow only uses up one unit (scale kept, step skipped); the second halves. */
Test(amp_scaler_deepspeed, hysteresis_2_absorbs_one_overflow) {
    amp_scaler s = make(AMP_SCALER_DEEPSPEED);
    run(&s, 10, false);
    amp_update u = amp_scaler_update(&s, true);
    cr_expect(u.skipped, "an absorbed overflow still skips its step");
    cr_expect_eq(u.next_scale, 65536.0f, "absorbed: the scale stays");
    cr_expect_eq(s.hysteresis_left, 1);
    run(&s, 10, false);
    cr_expect_eq(s.hysteresis_left, 1, "clean steps do not refill it (consecutive_hysteresis is false)");
    u = amp_scaler_update(&s, true);
    cr_expect(u.skipped);
    cr_expect_eq(u.next_scale, 32768.0f, "hysteresis used up: halve");
    cr_expect_eq(s.hysteresis_left, 1, "it stays used up");
    u = amp_scaler_update(&s, true);
    cr_expect_eq(u.next_scale, 16384.0f, "every further overflow halves");
    cr_expect_eq(s.skipped, 3);
}

/* The window counts from the last overflow, absorbed or not; growth refills the hysteresis. */
Test(amp_scaler_deepspeed, window_counts_from_the_last_overflow_and_refills) {
    amp_scaler s = make(AMP_SCALER_DEEPSPEED);
    run(&s, 5, false);                            /* iters 0..4 */
    amp_scaler_update(&s, true);                  /* iter 5: absorbed, last_overflow = 5 */
    cr_expect_eq(s.last_overflow_iter, 5);
    run(&s, 999, false);                          /* iters 6..1004: (iter - 5) reaches 999 */
    cr_expect_eq(s.scale, 65536.0f, "999 clean steps after the overflow: no growth yet");
    cr_expect_eq(s.hysteresis_left, 1);
    amp_scaler_update(&s, false);                 /* iter 1005: 1005 - 5 = 1000 */
    cr_expect_eq(s.scale, 131072.0f, "1000 clean steps after the overflow: growth");
    cr_expect_eq(s.hysteresis_left, 2, "and the hysteresis is refilled");
    amp_update u = amp_scaler_update(&s, true);
    cr_expect_eq(u.next_scale, 131072.0f, "so the next overflow is absorbed again");
}

/* consecutive_hysteresis: every clean step refills, so alternating overflows never halve the scale. */
Test(amp_scaler_deepspeed, consecutive_hysteresis_refills_on_every_clean_step) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_DEEPSPEED);
    c.consecutive_hysteresis = true;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    for (int i = 0; i < 20; i++) {
        amp_update u = amp_scaler_update(&s, true);
        cr_expect(u.skipped);
        cr_expect_eq(u.next_scale, 65536.0f, "overflow %d is absorbed", i);
        amp_scaler_update(&s, false);
        cr_expect_eq(s.hysteresis_left, 2, "refilled by the clean step");
    }
    /* Two overflows in a row are still one too many. */
    amp_scaler_update(&s, true);
    amp_update u = amp_scaler_update(&s, true);
    cr_expect_eq(u.next_scale, 32768.0f);
}

/* hysteresis 1: every overflow halves, down to the floor; an overflow at the floor is the stop. */
Test(amp_scaler_deepspeed, overflow_at_the_minimum_is_fatal) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_DEEPSPEED);
    c.init_scale = 4;
    c.hysteresis = 1;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    amp_update u = amp_scaler_update(&s, true);
    cr_expect_eq(u.next_scale, 2.0f);
    u = amp_scaler_update(&s, true);
    cr_expect_eq(u.next_scale, 1.0f, "max(2/2, 1) = 1: at the floor, not yet past it");
    cr_expect_eq(u.status, AMP_SCALER_OK);
    u = amp_scaler_update(&s, true);
    cr_expect_eq(u.status, AMP_SCALER_AT_MINIMUM, "overflow while already at min_loss_scale");
    cr_expect(u.skipped);
    cr_expect_eq(u.next_scale, 1.0f);
    cr_expect(amp_scaler_status_is_fatal(u.status));
    char buf[640];
    amp_scaler_explain(&s, &u, buf, sizeof buf);
    cr_expect(strstr(buf, "Current loss scale already at minimum") != NULL, "%s", buf);
}

/* min_loss_scale 1000 (the docs' value): 2048 -> 1024 -> max(512, 1000) = 1000 -> stop. */
Test(amp_scaler_deepspeed, floor_that_is_not_a_power_of_two) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_DEEPSPEED);
    c.init_scale = 2048;
    c.min_scale = 1000;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    amp_update u = amp_scaler_update(&s, true);
    cr_expect_eq(u.next_scale, 2048.0f, "absorbed by the hysteresis");
    u = amp_scaler_update(&s, true);
    cr_expect_eq(u.next_scale, 1024.0f);
    u = amp_scaler_update(&s, true);
    cr_expect_eq(u.next_scale, 1000.0f, "clamped to the floor");
    u = amp_scaler_update(&s, true);
    cr_expect_eq(u.status, AMP_SCALER_AT_MINIMUM);
}

Test(amp_scaler_deepspeed, stop_exits_2_with_the_advice, .exit_code = 2) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_DEEPSPEED);
    c.init_scale = 1;
    c.hysteresis = 1;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    amp_update u = amp_scaler_update(&s, true);
    cr_assert_eq(u.status, AMP_SCALER_AT_MINIMUM);
    amp_scaler_stop(&s, &u, 7);
}

/* ------------------------------------------------------------------ static and none */

Test(amp_scaler_static, never_moves_and_says_when_it_skips) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_STATIC);
    c.init_scale = 1024;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    amp_update u = run(&s, 5000, false);
    cr_expect(!u.skipped);
    cr_expect_eq(s.scale, 1024.0f, "no growth, ever");
    u = amp_scaler_update(&s, true);
    cr_expect(u.skipped, "non-finite gradients are never applied");
    cr_expect_eq(u.status, AMP_SCALER_SKIPPED_FIXED);
    cr_expect(!amp_scaler_status_is_fatal(u.status));
    cr_expect_eq(u.next_scale, 1024.0f, "no backoff either");
    char buf[640];
    amp_scaler_explain(&s, &u, buf, sizeof buf);
    cr_expect(strstr(buf, "static scale 1024") && strstr(buf, "cannot back off"), "%s", buf);
}

Test(amp_scaler_none, scale_one_but_still_checks) {
    amp_scaler s = make(AMP_SCALER_NONE);
    cr_expect_eq(amp_scaler_scale(&s), 1.0f);
    float g[3] = {1e-30f, NAN, 2.0f};
    clip_span span = {g, 3};
    cr_expect(amp_scaler_unscale(&s, &span, 1), "a NaN is found without a scale too");
    cr_expect_eq(g[0], 1e-30f, "multiplying by 1 changes nothing");
    amp_update u = amp_scaler_update(&s, true);
    cr_expect(u.skipped);
    cr_expect_eq(u.status, AMP_SCALER_SKIPPED_FIXED);
}

Test(amp_scaler_config, bad_configs_name_the_field) {
    data_err err;
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_STATIC);
    c.init_scale = 0;
    cr_expect_not(amp_scaler_config_check(&c, &err));
    cr_expect(strstr(err.expected, "init_scale") != NULL, "%s", err.expected);
    c.init_scale = -8;
    cr_expect_not(amp_scaler_config_check(&c, &err));
    c.init_scale = 1e39; /* inf in fp32 */
    cr_expect_not(amp_scaler_config_check(&c, &err));
    c = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    c.growth_factor = 1;
    cr_expect_not(amp_scaler_config_check(&c, &err));
    cr_expect(strstr(err.expected, "growth_factor") != NULL);
    c = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    c.backoff_factor = 1;
    cr_expect_not(amp_scaler_config_check(&c, &err));
    c = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    c.growth_interval = 0;
    cr_expect_not(amp_scaler_config_check(&c, &err));
    c = amp_scaler_defaults(AMP_SCALER_DEEPSPEED);
    c.hysteresis = 0;
    cr_expect_not(amp_scaler_config_check(&c, &err));
    c = amp_scaler_defaults(AMP_SCALER_DEEPSPEED);
    c.min_scale = 1e6;
    cr_expect_not(amp_scaler_config_check(&c, &err), "a floor above the start");
    c = amp_scaler_defaults(AMP_SCALER_DEEPSPEED);
    c.growth_factor = 4;
    cr_expect_not(amp_scaler_config_check(&c, &err), "DeepSpeed's factor is fixed at 2");
    for (int k = 0; k < AMP_SCALER_NKINDS; k++) {
        c = amp_scaler_defaults((amp_scaler_kind)k);
        cr_expect(amp_scaler_config_check(&c, &err), "defaults of %s", amp_scaler_kind_get((amp_scaler_kind)k)->name);
        cr_expect_eq(amp_scaler_kind_from_name(amp_scaler_kind_get((amp_scaler_kind)k)->name), k);
    }
    cr_expect_eq(amp_scaler_kind_from_name("apex"), -1);
}

/* ------------------------------------------------------------------ unscale */

Test(amp_unscale, finds_inf_minus_inf_and_nan) {
    const float bad[3] = {INFINITY, -INFINITY, NAN};
    for (int b = 0; b < 3; b++) {
        amp_scaler s = make(AMP_SCALER_PYTORCH);
        float g[5] = {1, 2, 3, 4, 5};
        g[3] = bad[b];
        clip_span span = {g, 5};
        cr_expect(amp_scaler_unscale(&s, &span, 1), "bad value %g", (double)bad[b]);
        cr_expect_eq(g[4], 5.0f / 65536.0f, "values after the bad one are unscaled too (one full pass)");
        amp_scaler_update(&s, true);
    }
}

Test(amp_unscale, finite_extremes_are_not_overflow) {
    amp_scaler s = make(AMP_SCALER_PYTORCH);
    float g[4] = {FLT_MAX, -FLT_MAX, FLT_MIN, 0x1p-149f};
    clip_span span = {g, 4};
    cr_expect_not(amp_scaler_unscale(&s, &span, 1), "the largest and smallest floats are finite");
    cr_expect_eq(g[0], FLT_MAX / 65536.0f);
}

/* Scaling by a power of two and unscaling is exact: the gradients come back bit for bit. */
Test(amp_unscale, power_of_two_round_trip_is_exact) {
    amp_scaler s = make(AMP_SCALER_PYTORCH);
    enum { N = 1000 };
    float orig[N], g[N];
    for (int i = 0; i < N; i++) orig[i] = (float)((i * 2654435761u) % 100000) * 1e-9f - 5e-5f;
    for (int i = 0; i < N; i++) g[i] = orig[i] * amp_scaler_scale(&s);
    clip_span span = {g, N};
    cr_assert_not(amp_scaler_unscale(&s, &span, 1));
    for (int i = 0; i < N; i++) cr_assert_eq(g[i], orig[i], "element %d", i);
}

Test(amp_unscale, several_spans_one_bad) {
    amp_scaler s = make(AMP_SCALER_DEEPSPEED);
    float a[3] = {65536, 131072, 0}, b[2] = {NAN, 65536};
    clip_span spans[2] = {{a, 3}, {b, 2}};
    cr_expect(amp_scaler_unscale(&s, spans, 2));
    cr_expect_eq(a[1], 2.0f);
    cr_expect_eq(b[1], 1.0f);
}

/* A second unscale in one step stops the program (exit 3) naming the mistake, like PyTorch's RuntimeError. */
Test(amp_unscale, twice_in_one_step_is_an_error) {
    int pipefd[2];
    cr_assert_eq(pipe(pipefd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(pipefd[1], 2);
        amp_scaler s = make(AMP_SCALER_PYTORCH);
        float g[2] = {1, 2};
        clip_span span = {g, 2};
        amp_scaler_unscale(&s, &span, 1);
        amp_scaler_unscale(&s, &span, 1);
        _exit(0);
    }
    close(pipefd[1]);
    char out[4096] = "";
    size_t used = 0;
    ssize_t k;
    while ((k = read(pipefd[0], out + used, sizeof out - 1 - used)) > 0) used += (size_t)k;
    out[used] = '\0';
    close(pipefd[0]);
    int status;
    waitpid(pid, &status, 0);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 3, "exit 3 expected");
    cr_expect(strstr(out, "unscale_() has already been called") != NULL, "message: %s", out);
}

/* Unscale, update, unscale again: a new step, allowed. */
Test(amp_unscale, once_per_step_across_steps) {
    amp_scaler s = make(AMP_SCALER_PYTORCH);
    for (int step = 0; step < 3; step++) {
        float g[2] = {65536, 0};
        clip_span span = {g, 2};
        cr_expect_not(amp_scaler_unscale(&s, &span, 1));
        cr_expect(s.unscaled);
        amp_scaler_update(&s, false);
        cr_expect_not(s.unscaled);
        cr_expect_eq(g[0], 1.0f);
    }
}

/* ------------------------------------------------------------------ state for checkpoints */

/* Two scalers fed the same pattern stay identical across a save and load in the middle. */
static void round_trip(amp_scaler_kind kind) {
    const char *pattern = "CCCOCCCCOOCCCCCCCCOCCOOO";
    amp_scaler_config c = amp_scaler_defaults(kind);
    c.growth_interval = 3;
    amp_scaler a, b;
    amp_scaler_init(&a, &c);
    for (int i = 0; i < 12; i++) amp_scaler_update(&a, pattern[i] == 'O');
    amp_kv kv[AMP_SCALER_NSTATE];
    cr_assert_eq(amp_scaler_save_state(&a, kv), AMP_SCALER_NSTATE);
    amp_scaler_init(&b, &c);
    data_err err;
    cr_assert(amp_scaler_load_state(&b, kv, AMP_SCALER_NSTATE, &err), "%s %s", err.expected, err.found);
    cr_expect_eq(b.scale, a.scale);
    cr_expect_eq(b.growth_tracker, a.growth_tracker);
    cr_expect_eq(b.hysteresis_left, a.hysteresis_left);
    cr_expect_eq(b.iter, a.iter);
    cr_expect_eq(b.last_overflow_iter, a.last_overflow_iter);
    cr_expect_eq(b.skipped, a.skipped);
    for (int i = 12; pattern[i]; i++) {
        amp_update ua = amp_scaler_update(&a, pattern[i] == 'O'), ub = amp_scaler_update(&b, pattern[i] == 'O');
        cr_expect_eq(ua.next_scale, ub.next_scale, "%s step %d", amp_scaler_kind_get(kind)->name, i);
        cr_expect_eq(ua.skipped, ub.skipped);
    }
}

Test(amp_scaler_state, round_trip_every_kind) {
    for (int k = 0; k < AMP_SCALER_NKINDS; k++) round_trip((amp_scaler_kind)k);
}

Test(amp_scaler_state, odd_scale_reads_back_exactly) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_STATIC);
    c.init_scale = 0.1; /* not exact in binary: 9 digits are needed to read the float back */
    amp_scaler a, b;
    amp_scaler_init(&a, &c);
    amp_scaler_init(&b, &c);
    b.scale = 1;
    amp_kv kv[AMP_SCALER_NSTATE];
    amp_scaler_save_state(&a, kv);
    cr_assert(amp_scaler_load_state(&b, kv, AMP_SCALER_NSTATE, NULL));
    cr_expect_eq(b.scale, a.scale);
}

Test(amp_scaler_state, bad_state_names_the_key) {
    amp_scaler a = make(AMP_SCALER_PYTORCH), b = make(AMP_SCALER_DEEPSPEED);
    amp_kv kv[AMP_SCALER_NSTATE + 1];
    amp_scaler_save_state(&a, kv);
    data_err err;
    cr_expect_not(amp_scaler_load_state(&b, kv, AMP_SCALER_NSTATE, &err), "another kind");
    cr_expect(strstr(err.found, "loss_scaler.kind") != NULL, "%s", err.found);
    amp_scaler c = make(AMP_SCALER_PYTORCH);
    cr_expect_not(amp_scaler_load_state(&c, kv, AMP_SCALER_NSTATE - 1, &err), "a key missing");
    cr_expect(strstr(err.found, "loss_scaler.skipped") != NULL, "%s", err.found);
    snprintf(kv[1].value, sizeof kv[1].value, "-3");
    cr_expect_not(amp_scaler_load_state(&c, kv, AMP_SCALER_NSTATE, &err), "negative scale");
    cr_expect(strstr(err.found, "loss_scaler.scale") != NULL, "%s", err.found);
    amp_scaler_save_state(&a, kv);
    snprintf(kv[2].value, sizeof kv[2].value, "2000");
    cr_expect_not(amp_scaler_load_state(&c, kv, AMP_SCALER_NSTATE, &err), "tracker must be below the interval");
    cr_expect(strstr(err.found, "loss_scaler.growth_tracker") != NULL, "%s", err.found);
    /* Unknown keys (the rest of a checkpoint's metadata) are ignored. */
    amp_scaler_save_state(&a, kv);
    snprintf(kv[AMP_SCALER_NSTATE].key, sizeof kv[0].key, "step");
    snprintf(kv[AMP_SCALER_NSTATE].value, sizeof kv[0].value, "300");
    cr_expect(amp_scaler_load_state(&c, kv, AMP_SCALER_NSTATE + 1, &err));
}
