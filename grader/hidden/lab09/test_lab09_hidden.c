/* test_lab09_hidden.c: lab 09 hidden tests of the hysteresis scaler: a floor that is not a power of two, hysteresis
 * 1 and 3, capped growth, and a long random trace against a model of DeepSpeed's update_scale written here. */
#include "../../../labs/lab09-numerical-stability/tests/lab09_util.h"
#include "base/rng.h"

#include <math.h>

/* min_loss_scale 1000 (the docs' value), from 2048, hysteresis 2:
 *   overflow: absorbed (2048, left 1); overflow: 1024; overflow: max(512, 1000) = 1000; overflow: at minimum. */
MPT_TEST(hysteresis_floor_not_a_power_of_two) {
    amp_scaler s = lab09_scaler(2048, 0, 2, false, 1000);
    CHECK_DS(&s, true, true, 2048.0f, 1, AMP_SCALER_OK, "overflow 1", "absorbed");
    CHECK_DS(&s, true, true, 1024.0f, 1, AMP_SCALER_OK, "overflow 2", "halve");
    CHECK_DS(&s, true, true, 1000.0f, 1, AMP_SCALER_OK, "overflow 3", "max(scale / 2, min_scale): clamp to the floor");
    CHECK_DS(&s, true, true, 1000.0f, 1, AMP_SCALER_AT_MINIMUM, "overflow 4",
             "compare with the floor as a float: scale == (float)min_scale");
}

/* hysteresis 3: two overflows absorbed, the third halves; growth refills all three. */
MPT_TEST(hysteresis_3_and_a_small_window) {
    amp_scaler s = lab09_scaler(64, 4, 3, false, 0);
    CHECK_DS(&s, true, true, 64.0f, 2, AMP_SCALER_OK, "overflow 1 (iter 0)", "absorbed: 3 -> 2");
    CHECK_DS(&s, true, true, 64.0f, 1, AMP_SCALER_OK, "overflow 2 (iter 1)", "absorbed: 2 -> 1");
    CHECK_DS(&s, true, true, 32.0f, 1, AMP_SCALER_OK, "overflow 3 (iter 2)", "used up: halve");
    if (!QUIET_STEPS(&s, 3, "iters 3 .. 5")) return;
    CHECK_DS(&s, false, false, 64.0f, 3, AMP_SCALER_OK, "iter 6 = last overflow 2 + window 4",
             "grow and refill to cfg.hysteresis");
}

MPT_TEST(hysteresis_growth_capped_in_fp32) {
    amp_scaler s = lab09_scaler(0x1p127, 2, 0, false, 0);
    if (!QUIET_STEPS(&s, 1, "iter 0")) return;
    CHECK_DS(&s, false, false, 0x1p127f, 2, AMP_SCALER_OK, "iter 1, a full window",
             "2^128 is inf in fp32: keep the scale (the loss is multiplied in fp32)");
}

/* A random trace against DeepSpeed's update_scale, transcribed here in plain C. */
MPT_TEST(hysteresis_random_trace_matches_reference) {
    for (int variant = 0; variant < 2; variant++) {
        bool consecutive = variant == 1;
        amp_scaler s = lab09_scaler(1024, 20, 2, consecutive, 4);
        double cur_scale = 1024;
        int cur_hysteresis = 2;
        long cur_iter = 0, last_overflow = -1;
        mp_rng rng;
        mp_rng_seed(&rng, (909 + variant) ^ mpt_seed());
        for (int i = 0; i < 20000; i++) {
            bool overflow = mp_rng_uniform(&rng) < (cur_scale >= 4096 ? 0.3f : 0.03f);
            amp_scaler_status want_status = AMP_SCALER_OK;
            if (overflow) {
                if (cur_hysteresis == 1) {
                    if (cur_scale == 4) want_status = AMP_SCALER_AT_MINIMUM;
                    else cur_scale = fmax(cur_scale / 2, 4);
                } else {
                    cur_hysteresis--;
                }
                last_overflow = cur_iter;
            } else {
                if (consecutive) cur_hysteresis = 2;
                if ((cur_iter - last_overflow) % 20 == 0) {
                    if (!consecutive) cur_hysteresis = 2;
                    cur_scale *= 2;
                }
            }
            cur_iter++;
            amp_update u = amp_scaler_update(&s, overflow);
            MPT_OBSERVE((uint64_t)(uint32_t)s.hysteresis_left << 8 | (uint64_t)u.status << 1 | u.skipped);
            MPT_OBSERVE_NEAR(s.scale, 0, 0);
            if (u.skipped != overflow || s.scale != (float)cur_scale || s.hysteresis_left != cur_hysteresis ||
                u.status != want_status) {
                mpt_fail(__FILE__, __LINE__,
                         "%s, step %d (%s): expected scale %g, hysteresis %d, status %s; got scale %g, hysteresis %d, "
                         "status %s, skipped=%d",
                         consecutive ? "consecutive_hysteresis" : "default", i + 1, overflow ? "overflow" : "clean",
                         cur_scale, cur_hysteresis, amp_scaler_status_name(want_status), (double)s.scale,
                         s.hysteresis_left, amp_scaler_status_name(u.status), u.skipped);
                return;
            }
            if (want_status == AMP_SCALER_AT_MINIMUM) break; /* the run would stop here */
        }
    }
}
