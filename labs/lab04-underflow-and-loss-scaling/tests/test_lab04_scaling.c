/* test_lab04_scaling.c: lab 04 visible tests, part B: the static loss scaler (update_fixed in core/amp/scaler.c)
 * and choosing a static scale from an exponent histogram (amp_scale_choose in core/amp/scale_choice.c). */
#include "lab04_util.h"

/* A static scale never moves: clean steps are taken at S and S stays S. */
MPT_TEST(static_scaler_keeps_its_scale) {
    amp_scaler s = lab04_static_scaler(1024);
    for (int step = 1; step <= 5; step++) {
        amp_update u = amp_scaler_update(&s, false);
        MPT_CHECK(!u.skipped && u.status == AMP_SCALER_OK && u.scale == 1024.0f && u.next_scale == 1024.0f,
                  "clean step %d at static scale 1024\n"
                  "      expected: skipped=no, status ok, scale 1024 -> 1024\n"
                  "      got:      skipped=%s, status %s, scale %g -> %g\n"
                  "      likely mistake: a clean step is taken (skipped = false) and a static scaler changes nothing else",
                  step, u.skipped ? "yes" : "no", amp_scaler_status_name(u.status), (double)u.scale,
                  (double)u.next_scale);
    }
    MPT_CHECK_EQ_I64(0, s.skipped, "steps skipped by a static scaler on clean gradients");
}

/* An inf/NaN gradient at a static scale: skip the step, say so (skipped_fixed: a fixed scale cannot back off), keep
 * S; the next clean step is taken again. */
MPT_TEST(static_scaler_skips_on_overflow_and_says_so) {
    amp_scaler s = lab04_static_scaler(65536);
    amp_update u = amp_scaler_update(&s, false);
    MPT_REQUIRE(!u.skipped, "a clean first step was skipped: u->skipped must follow found_inf (false here)");
    u = amp_scaler_update(&s, true);
    MPT_CHECK(u.skipped, "an overflow (found_inf = true) at static scale 65536 was not skipped: the optimizer would "
                         "apply inf/NaN gradients; set u->skipped = found_inf");
    MPT_CHECK(u.status == AMP_SCALER_SKIPPED_FIXED,
              "status after an overflow at a static scale\n      expected: skipped_fixed\n      got:      %s\n"
              "      likely mistake: a static scaler reports its skips (AMP_SCALER_SKIPPED_FIXED), so the trainer can "
              "say \"lower the scale or use dynamic scaling\"",
              amp_scaler_status_name(u.status));
    MPT_CHECK(u.next_scale == 65536.0f && s.scale == 65536.0f,
              "scale after an overflow at a static scale: expected 65536 (a static scale never backs off), got %g",
              (double)s.scale);
    u = amp_scaler_update(&s, false);
    MPT_CHECK(!u.skipped && u.status == AMP_SCALER_OK,
              "the clean step after an overflow: expected taken with status ok, got skipped=%s status %s",
              u.skipped ? "yes" : "no", amp_scaler_status_name(u.status));
    MPT_CHECK_EQ_I64(1, s.skipped, "skipped steps after clean, overflow, clean");
}

/* Gradients whose largest value is in binade -2 (0.25 .. 0.5). fp16's top binade is 15 (65504 = 1.999 * 2^15).
 *   margin 1: k = 15 - 1 - (-2) = 16: the largest land in binade 14 (below 32768): nothing can overflow;
 *   margin 0: k = 17: they land in binade 15, where values from 65520 up would overflow;
 *   margin 3: k = 14. */
MPT_TEST(choose_scale_from_a_crafted_histogram) {
    fp_hist h;
    fp_hist_clear(&h);
    lab04_hist_put(&h, -2, 10);
    lab04_hist_put(&h, -20, 1000);
    lab04_hist_put(&h, -40, 5);
    static const struct {
        int margin, k;
    } want[] = {{1, 16}, {0, 17}, {3, 14}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        amp_scale_choice c = amp_scale_choose(&h, &FP_FP16, want[i].margin);
        MPT_CHECK(c.log2_scale == want[i].k && c.scale == ldexpf(1.0f, want[i].k),
                  "top binade -2, fp16 (top binade 15), margin %d\n"
                  "      expected: k = 15 - %d - (-2) = %d, scale %g\n"
                  "      got:      k = %d, scale %g\n"
                  "      likely mistake: k = format_top - margin - top_binade, with format_top = floor(log2 65504) = 15",
                  want[i].margin, want[i].margin, want[i].k, (double)ldexpf(1.0f, want[i].k), c.log2_scale,
                  (double)c.scale);
    }
    amp_scale_choice c = amp_scale_choose(&h, &FP_FP16, 1);
    MPT_CHECK_EQ_I64(14, c.top_after, "binade of the largest gradients after the chosen scale (margin 1)");
    /* Binades at or below -26 flush whole (every value there is below 2^-25). At scale 1 that is binade -40 (5
     * values; binade -20 is a subnormal range, kept); at 2^16 binade -40 moves to -24: kept. */
    MPT_CHECK_EQ_U64(0, c.flushed, "values still flushed at the chosen scale 2^16 (binade -40 moves to -24)");
    MPT_CHECK_EQ_U64(5, amp_scale_flushed(&h, &FP_FP16, 0), "values flushed at scale 1 (binade -40)");
    /* Gradients already at fp16's largest value need a scale below 1. */
    fp_hist big;
    fp_hist_clear(&big);
    lab04_hist_put(&big, 15, 1);
    c = amp_scale_choose(&big, &FP_FP16, 1);
    MPT_CHECK(c.log2_scale == -1, "top binade 15 with margin 1: expected k = -1 (scale 0.5), got k = %d", c.log2_scale);
    MPT_CHECK(!c.clamped, "k = -1 is inside [AMP_SCALE_MIN_LOG2, AMP_SCALE_MAX_LOG2]: expected clamped = false, got true");
    /* Gradients all in binade -120 would ask for k = 15 - 1 + 120 = 134, past fp32's largest power of two. */
    fp_hist tiny;
    fp_hist_clear(&tiny);
    lab04_hist_put(&tiny, -120, 3);
    c = amp_scale_choose(&tiny, &FP_FP16, 1);
    MPT_CHECK(c.log2_scale == AMP_SCALE_MAX_LOG2 && c.clamped && isfinite(c.scale),
              "top binade -120, fp16, margin 1\n      expected: k = 15 - 1 + 120 = 134 clamped to %d, clamped = true\n"
              "      got:      k = %d, clamped = %s, scale %g\n"
              "      likely mistake: clamp k to [AMP_SCALE_MIN_LOG2, AMP_SCALE_MAX_LOG2] and set c.clamped when you do",
              AMP_SCALE_MAX_LOG2, c.log2_scale, c.clamped ? "true" : "false", (double)c.scale);
}
