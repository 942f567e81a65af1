/* test_lab09_hysteresis.c: lab 09 visible tests, the hysteresis loss scaler (update_hysteresis in core/amp/scaler.c)
 * against DeepSpeed's DynamicLossScaler rules; expected sequences worked out in the comments. */
#include "lab09_util.h"

/* hysteresis 2 (DeepSpeed's default): the first overflow uses up one unit, skips its step, keeps the scale; the
 * second halves the scale; after that every overflow halves (the hysteresis stays used up). */
MPT_TEST(hysteresis_absorbs_one_overflow) {
    amp_scaler s = lab09_scaler(0, 0, 0, false, 0);
    if (!QUIET_STEPS(&s, 3, "three clean steps")) return;
    CHECK_DS(&s, true, true, 65536.0f, 1, AMP_SCALER_OK, "first overflow",
             "with hysteresis left > 1 an overflow only decrements it; the step is still skipped");
    if (!QUIET_STEPS(&s, 5, "clean steps after it")) return;
    CHECK_DS(&s, true, true, 32768.0f, 1, AMP_SCALER_OK, "second overflow",
             "hysteresis used up (left == 1): scale = max(scale / 2, min_scale); clean steps do not refill it");
    CHECK_DS(&s, true, true, 16384.0f, 1, AMP_SCALER_OK, "third overflow", "every further overflow halves");
}

/* iter counts updates from 0 and last_overflow starts at -1, so with no overflow the scale doubles when
 * (iter + 1) % 1000 == 0: at the 1000th, 2000th, ... step. */
MPT_TEST(hysteresis_window_growth) {
    amp_scaler s = lab09_scaler(0, 0, 0, false, 0);
    if (!QUIET_STEPS(&s, 999, "steps 1 .. 999")) return;
    CHECK_DS(&s, false, false, 131072.0f, 2, AMP_SCALER_OK, "step 1000",
             "(iter - last_overflow_iter) % window == 0 with last_overflow_iter = -1: the 1000th clean step grows");
    if (!QUIET_STEPS(&s, 999, "steps 1001 .. 1999")) return;
    CHECK_DS(&s, false, false, 262144.0f, 2, AMP_SCALER_OK, "step 2000", "and every window after");
}

/* The window counts from the last overflow (absorbed or not), and growth refills the hysteresis:
 *   iters 0..4 clean; iter 5 overflow (absorbed, left 1, last_overflow 5);
 *   iters 6..1004 clean (iter - 5 = 1..999): nothing; iter 1005: 1000 % 1000 == 0: x2 and refill to 2;
 *   iter 1006 overflow: absorbed again. */
MPT_TEST(hysteresis_refills_on_growth) {
    amp_scaler s = lab09_scaler(0, 0, 0, false, 0);
    if (!QUIET_STEPS(&s, 5, "iters 0 .. 4")) return;
    CHECK_DS(&s, true, true, 65536.0f, 1, AMP_SCALER_OK, "iter 5, overflow", "absorbed by the hysteresis");
    if (!QUIET_STEPS(&s, 999, "iters 6 .. 1004")) return;
    CHECK_DS(&s, false, false, 131072.0f, 2, AMP_SCALER_OK, "iter 1005, a window after the overflow",
             "set last_overflow_iter = iter on every overflow, and refill the hysteresis when the scale grows");
    CHECK_DS(&s, true, true, 131072.0f, 1, AMP_SCALER_OK, "iter 1006, overflow", "the refilled hysteresis absorbs it");
}

/* consecutive_hysteresis: every clean step refills, so overflows separated by clean steps never halve. */
MPT_TEST(hysteresis_consecutive_refills_every_clean_step) {
    amp_scaler s = lab09_scaler(0, 0, 0, true, 0);
    for (int i = 0; i < 5; i++) {
        if (!CHECK_DS(&s, true, true, 65536.0f, 1, AMP_SCALER_OK, "an overflow", "absorbed")) return;
        if (!CHECK_DS(&s, false, false, 65536.0f, 2, AMP_SCALER_OK, "the clean step after it",
                      "consecutive_hysteresis refills the hysteresis on every clean step"))
            return;
    }
    CHECK_DS(&s, true, true, 65536.0f, 1, AMP_SCALER_OK, "overflow", "absorbed");
    CHECK_DS(&s, true, true, 32768.0f, 1, AMP_SCALER_OK, "a second overflow in a row", "two in a row still halve");
}

/* hysteresis 1, start at 4, floor 1: 4 -> 2 -> 1, then an overflow at the floor: DeepSpeed raises "Current loss
 * scale already at minimum"; here the status says so (the trainer stops) and the scale stays 1. Then from 3, floor
 * 1: 3 -> 1.5 -> max(0.75, 1) = 1, clamped at the floor, not halved past it. */
MPT_TEST(hysteresis_at_minimum_is_reported) {
    amp_scaler s = lab09_scaler(4, 0, 1, false, 0);
    CHECK_DS(&s, true, true, 2.0f, 1, AMP_SCALER_OK, "overflow at 4", "hysteresis 1: every overflow halves");
    CHECK_DS(&s, true, true, 1.0f, 1, AMP_SCALER_OK, "overflow at 2", "max(2 / 2, 1) = 1");
    CHECK_DS(&s, true, true, 1.0f, 1, AMP_SCALER_AT_MINIMUM, "overflow at the floor",
             "when scale == min_scale and the hysteresis is used up, set u->status = AMP_SCALER_AT_MINIMUM");
    amp_scaler t = lab09_scaler(3, 0, 1, false, 0);
    CHECK_DS(&t, true, true, 1.5f, 1, AMP_SCALER_OK, "overflow at 3", "hysteresis 1: every overflow halves");
    CHECK_DS(&t, true, true, 1.0f, 1, AMP_SCALER_OK, "overflow at 1.5",
             "the halved scale is clamped at the floor: scale = max(scale / 2, min_scale) = max(0.75, 1)");
    CHECK_DS(&t, true, true, 1.0f, 1, AMP_SCALER_AT_MINIMUM, "overflow at the floor reached by the clamp",
             "when scale == min_scale and the hysteresis is used up, set u->status = AMP_SCALER_AT_MINIMUM");
}
