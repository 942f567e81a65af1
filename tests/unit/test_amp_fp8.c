/* test_amp_fp8.c: Criterion tests of fp8 delayed scaling (amp/fp8.c): the scale formula on crafted amaxes, the history
 * window (max and most recent), quantize/dequantize round trips, saturation and underflow counts. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "amp/fp8.h"

/* scale = 2^(floor(log2(fmax / amax)) - margin). e4m3: fmax 448. */
Test(amp_fp8, scale_formula_on_crafted_amaxes) {
    cr_expect_eq(amp_fp8_scale_for_amax(448.0f, 448, 0, 1), 1.0f, "amax = fmax: log2(1) = 0");
    cr_expect_eq(amp_fp8_scale_for_amax(1.0f, 448, 0, 1), 256.0f, "448/1 = 448: floor(log2) = 8");
    cr_expect_eq(amp_fp8_scale_for_amax(1.75f, 448, 0, 1), 256.0f, "448/1.75 = 256 exactly");
    cr_expect_eq(amp_fp8_scale_for_amax(1.76f, 448, 0, 1), 128.0f, "just above: 254.5, floor(log2) = 7");
    cr_expect_eq(amp_fp8_scale_for_amax(1.0f, 448, 2, 1), 64.0f, "margin 2: two binades of headroom");
    cr_expect_eq(amp_fp8_scale_for_amax(1e-3f, 57344, 0, 1), 0x1p25f, "e5m2: 57344/1e-3 = 5.7e7, 2^25 = 3.4e7");
    cr_expect_eq(amp_fp8_scale_for_amax(1e4f, 448, 0, 1), 0x1p-5f, "amax above fmax: a scale below 1");
    /* amax * scale never exceeds fmax: the point of the floor. */
    for (float a = 1e-6f; a < 1e6f; a *= 1.37f) {
        float s = amp_fp8_scale_for_amax(a, 448, 0, 1);
        cr_assert_leq((double)a * s, 448.0, "amax %g", (double)a);
        cr_assert_gt((double)a * s * 2, 448.0, "and the largest such power of two: amax %g", (double)a);
    }
}

Test(amp_fp8, degenerate_amax_keeps_the_previous_scale) {
    cr_expect_eq(amp_fp8_scale_for_amax(0.0f, 448, 0, 8.0f), 8.0f, "an all-zero tensor");
    cr_expect_eq(amp_fp8_scale_for_amax(INFINITY, 448, 0, 8.0f), 8.0f);
    cr_expect_eq(amp_fp8_scale_for_amax(NAN, 448, 0, 8.0f), 8.0f);
    cr_expect_eq(amp_fp8_scale_for_amax(1e-40f, 448, 0, 1), 0x1p127f, "clamped to a finite fp32 scale");
    cr_expect_eq(amp_fp8_scale_for_amax(3e38f, 448, 0, 1), 0x1p-120f, "448/3e38 = 1.5e-36: 2^-120");
    cr_expect_eq(amp_fp8_scale_for_amax(3e38f, 448, 10, 1), 0x1p-126f, "2^-130 clamped to a normal fp32 scale");
}

/* amax history [2, 8, 1] with "max": the scale follows 8 until 8 leaves the window. */
Test(amp_fp8, history_window_max_and_most_recent) {
    amp_fp8_meta m;
    amp_fp8_init(&m, &FP_E4M3, 3, 0, AMP_AMAX_MAX);
    cr_expect_eq(m.scale, 1.0f, "no history yet: scale 1");
    amp_fp8_record_amax(&m, 2);
    amp_fp8_record_amax(&m, 8);
    amp_fp8_record_amax(&m, 1);
    amp_fp8_update_scale(&m);
    cr_expect_eq(amp_fp8_history_amax(&m), 8.0f);
    cr_expect_eq(m.scale, 32.0f, "448/8 = 56: 2^5");
    cr_expect_eq(m.scale_inv, 1.0f / 32);
    amp_fp8_record_amax(&m, 1); /* overwrites 2 */
    amp_fp8_update_scale(&m);
    cr_expect_eq(m.scale, 32.0f, "8 is still in the window");
    amp_fp8_record_amax(&m, 1); /* overwrites 8 */
    amp_fp8_update_scale(&m);
    cr_expect_eq(m.scale, 256.0f, "8 has left: amax 1, 448/1 -> 2^8");
    amp_fp8_free(&m);

    amp_fp8_init(&m, &FP_E4M3, 3, 0, AMP_AMAX_MOST_RECENT);
    amp_fp8_record_amax(&m, 8);
    amp_fp8_record_amax(&m, 1);
    amp_fp8_update_scale(&m);
    cr_expect_eq(m.scale, 256.0f, "most recent: 1");
    amp_fp8_free(&m);
}

Test(amp_fp8, default_history_is_16) {
    amp_fp8_meta m;
    amp_fp8_init(&m, &FP_E5M2, 0, 0, AMP_AMAX_MAX);
    cr_expect_eq(m.history_len, 16);
    amp_fp8_free(&m);
}

/* Values that are exact in e4m3 after scaling come back exactly. */
Test(amp_fp8, quantize_dequantize_round_trip) {
    amp_fp8_meta m;
    amp_fp8_init(&m, &FP_E4M3, 4, 0, AMP_AMAX_MAX);
    amp_fp8_record_amax(&m, 0.5f);
    amp_fp8_update_scale(&m); /* 448/0.5 = 896: 2^9 = 512 */
    cr_assert_eq(m.scale, 512.0f);
    const float x[6] = {0.5f, -0.25f, 0.375f, 0.0f, -0.0f, 0x1p-18f}; /* 0x1p-18 * 512 = 2^-9: e4m3's smallest */
    uint8_t q[6];
    float back[6];
    float amax = amp_fp8_quantize(&m, x, q, 6);
    cr_expect_eq(amax, 0.5f);
    amp_fp8_dequantize(&FP_E4M3, q, back, 6, m.scale_inv);
    for (int i = 0; i < 6; i++) cr_expect_eq(back[i], x[i], "element %d", i);
    cr_expect_eq(m.saturated, 0);
    cr_expect_eq(m.underflowed, 0);
    cr_expect_eq(m.history[m.newest], 0.5f, "quantize recorded the amax");
    amp_fp8_free(&m);
}

/* A tensor that grew since the scale was computed saturates; one that shrank underflows. */
Test(amp_fp8, stale_scale_saturates_or_underflows) {
    amp_fp8_meta m;
    amp_fp8_init(&m, &FP_E4M3, 2, 0, AMP_AMAX_MAX);
    amp_fp8_record_amax(&m, 1);
    amp_fp8_update_scale(&m); /* scale 256: fine for |x| <= 1.75 */
    float grown[4] = {10.0f, -3.0f, 1.0f, 0.5f};
    uint8_t q[4];
    float back[4];
    amp_fp8_quantize(&m, grown, q, 4);
    cr_expect_eq(m.saturated, 2, "10*256 and 3*256 exceed 448");
    amp_fp8_dequantize(&FP_E4M3, q, back, 4, m.scale_inv);
    cr_expect_eq(back[0], 448.0f / 256, "saturated to +fmax, not NaN");
    cr_expect_eq(back[1], -448.0f / 256);
    cr_expect_eq(back[2], 1.0f);
    float shrunk[3] = {1e-6f, 2e-6f, 1.0f}; /* 1e-6 * 256 = 2.6e-4 < 2^-10 (half of 2^-9): 0 */
    amp_fp8_quantize(&m, shrunk, q, 3);
    cr_expect_eq(m.underflowed, 2);
    /* The next update follows the window: amax 10 is in it now. */
    amp_fp8_update_scale(&m);
    cr_expect_eq(m.scale, 32.0f, "448/10 = 44.8: 2^5");
    amp_fp8_free(&m);
}

Test(amp_fp8, nan_stays_nan_and_is_not_the_amax) {
    amp_fp8_meta m;
    amp_fp8_init(&m, &FP_E4M3, 2, 0, AMP_AMAX_MAX);
    float x[3] = {NAN, 2.0f, -1.0f};
    uint8_t q[3];
    float back[3];
    cr_expect_eq(amp_fp8_quantize(&m, x, q, 3), 2.0f);
    amp_fp8_dequantize(&FP_E4M3, q, back, 3, m.scale_inv);
    cr_expect(isnan(back[0]));
    cr_expect_eq(back[1], 2.0f);
    amp_fp8_free(&m);
}

Test(amp_fp8, long_tensor_in_chunks) {
    enum { N = 5000 };
    static float x[N], back[N];
    static uint8_t q[N];
    for (int i = 0; i < N; i++) x[i] = (float)((i % 17) - 8) / 8.0f; /* multiples of 1/8 in [-1, 1]: exact in e4m3 */
    amp_fp8_meta m;
    amp_fp8_init(&m, &FP_E5M2, 0, 0, AMP_AMAX_MAX);
    amp_fp8_record_amax(&m, 1.0f);
    amp_fp8_update_scale(&m);
    cr_assert_eq(m.scale, 32768.0f, "57344/1: 2^15");
    amp_fp8_quantize(&m, x, q, N);
    amp_fp8_dequantize(&FP_E5M2, q, back, N, m.scale_inv);
    int wrong = 0;
    for (int i = 0; i < N; i++) wrong += fabsf(back[i] - x[i]) > 0.125f * fabsf(x[i]); /* e5m2: 2 mantissa bits */
    cr_expect_eq(wrong, 0);
    amp_fp8_free(&m);
}

Test(amp_fp8, bad_arguments_exit_2, .exit_code = 2) {
    amp_fp8_meta m;
    amp_fp8_init(&m, &FP_FP16, 16, 0, AMP_AMAX_MAX);
}
