/* test_lab05_scaler.c: lab 05 visible tests, part B: the dynamic loss scaler's update rule (update_growth_backoff
 * in core/amp/scaler.c) against torch.amp.GradScaler's semantics: init 2^16, x2 after 2000 clean steps in a row,
 * x0.5 and skip on inf/NaN, the tracker reset by an overflow. Expected values are worked out in the comments. */
#include "lab05_util.h"

#include <math.h>

/* Clean steps 1 .. 1999: tracker 1 .. 1999, scale 2^16. Step 2000: tracker + 1 == 2000, so the scale doubles to
 * 2^17 and the tracker goes back to 0. The step itself ran at 2^16; only the next one uses 2^17. */
MPT_TEST(scaler_grows_after_growth_interval_clean_steps) {
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    if (!CLEAN_STEPS(&s, 1999, "steps 1 .. 1999 at scale 2^16")) return;
    CHECK_UPDATE(&s, false, false, 131072.0f, 0, "step 2000, the 2000th clean step in a row",
                 "grow when tracker + 1 == growth_interval (count this step first), then reset the tracker to 0; "
                 "growing one step early or late means comparing before adding, or with >");
    if (!CLEAN_STEPS(&s, 1999, "steps 2001 .. 3999 at scale 2^17")) return;
    CHECK_UPDATE(&s, false, false, 262144.0f, 0, "step 4000", "the tracker must restart from 0 after growing");
    /* At 2^127 growth would give inf: the scale stays, and the tracker still restarts (PyTorch's update). */
    amp_scaler top = lab05_scaler(AMP_SCALER_PYTORCH);
    top.scale = ldexpf(1.0f, 127);
    top.growth_tracker = top.cfg.growth_interval - 1;
    CHECK_UPDATE(&top, false, false, ldexpf(1.0f, 127), 0, "the 2000th clean step at scale 2^127",
                 "2^127 * 2 is inf in fp32: keep the scale, and still reset the tracker to 0 (the handout's part B)");
}

/* An overflow at scale 2^16: skip, scale 2^15, tracker 0. Then another: 2^14. */
MPT_TEST(scaler_backs_off_on_overflow) {
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    CHECK_UPDATE(&s, true, true, 32768.0f, 0, "an overflow on the first step",
                 "on found_inf: skipped = true and scale *= backoff_factor (0.5)");
    CHECK_UPDATE(&s, true, true, 16384.0f, 0, "a second overflow in a row", "every overflow backs off again");
    CHECK_UPDATE(&s, false, false, 16384.0f, 1, "a clean step after them", "a clean step is never skipped");
}

/* 1500 clean steps, an overflow (tracker back to 0), then growth only 2000 clean steps after the overflow:
 * at step 1501 + 2000 = 3501, not at step 2000. */
MPT_TEST(scaler_overflow_resets_the_tracker) {
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    if (!CLEAN_STEPS(&s, 1500, "steps 1 .. 1500")) return;
    CHECK_UPDATE(&s, true, true, 32768.0f, 0, "an overflow at step 1501 (tracker was 1500)",
                 "set growth_tracker = 0 on an overflow: the clean steps before it do not count");
    if (!CLEAN_STEPS(&s, 1999, "steps 1502 .. 3500")) return;
    CHECK_UPDATE(&s, false, false, 65536.0f, 0, "step 3501, the 2000th clean step since the overflow",
                 "growth after growth_interval clean steps counted from the last overflow");
}

/* Only the overflow steps are skipped. */
MPT_TEST(scaler_skips_exactly_the_overflow_steps) {
    static const char pattern[] = "CCOCOOCCCOCC";
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    for (int i = 0; pattern[i]; i++) {
        bool overflow = pattern[i] == 'O';
        amp_update u = amp_scaler_update(&s, overflow);
        MPT_CHECK(u.skipped == overflow, "step %d of \"%s\" (%s): expected skipped=%s, got %s\n"
                  "      likely mistake: u->skipped must be set on both branches (true on overflow, false otherwise)",
                  i + 1, pattern, overflow ? "overflow" : "clean", overflow ? "yes" : "no", u.skipped ? "yes" : "no");
    }
    MPT_CHECK_EQ_I64(4, s.skipped, "skipped steps counted over the pattern");
}

/* The handout's trace: mixpar amp scaler-trace "C*2000 O C*5 O O O".
 *   steps 1..2000 clean: 2^16, growth at step 2000 -> 2^17
 *   step 2001 overflow: skipped, 2^17 -> 2^16, tracker 0
 *   steps 2002..2006 clean: tracker 1..5
 *   steps 2007, 2008, 2009 overflow: 2^15, 2^14, 2^13 */
MPT_TEST(scaler_handout_trace) {
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    for (int i = 0; i < 1999; i++) amp_scaler_update(&s, false);
    if (!CHECK_UPDATE(&s, false, false, 131072.0f, 0, "step 2000", "growth after 2000 clean steps")) return;
    if (!CHECK_UPDATE(&s, true, true, 65536.0f, 0, "step 2001 (overflow)", "backoff x0.5 on overflow")) return;
    if (!CLEAN_STEPS(&s, 5, "steps 2002 .. 2006")) return;
    CHECK_UPDATE(&s, true, true, 32768.0f, 0, "step 2007 (overflow)", "backoff x0.5, tracker 0");
    CHECK_UPDATE(&s, true, true, 16384.0f, 0, "step 2008 (overflow)", "backoff x0.5, tracker 0");
    CHECK_UPDATE(&s, true, true, 8192.0f, 0, "step 2009 (overflow)", "backoff x0.5, tracker 0");
}
