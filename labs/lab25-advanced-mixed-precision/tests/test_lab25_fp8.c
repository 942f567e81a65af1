/* test_lab25_fp8.c: lab 25 visible tests of part A, fp8 per-tensor delayed scaling (core/amp/fp8.c): the scale from an
 * amax with a margin, the amax history (max and most_recent), the saturating quantize, and the recipe step by step. */
#include "lab25_util.h"

/* e4m3's largest value is 448 (S.1111.110), e5m2's 57344. scale = 2^(floor(log2(fmax / amax)) - margin). */
MPT_TEST(fp8_scale_from_amax_with_margin) {
    CHECK_SCALE(1.0f, 448, 0, 1, 256.0f, "448 / 1 = 448, floor(log2 448) = 8: 2^8; the amax lands at 256, under 448");
    CHECK_SCALE(448.0f, 448, 0, 1, 1.0f, "448 / 448 = 1: 2^0");
    CHECK_SCALE(449.0f, 448, 0, 1, 0.5f, "448 / 449 < 1: floor(log2) = -1, so 2^-1: the amax must not pass 448");
    CHECK_SCALE(3.5f, 448, 0, 1, 128.0f, "448 / 3.5 = 128 exactly: 2^7 (log2f(128.0f) may not be exactly 7)");
    CHECK_SCALE(0.001f, 448, 0, 1, 262144.0f, "448 / 0.001 = 448000, floor(log2) = 18: 2^18");
    CHECK_SCALE(1.0f, 448, 2, 1, 64.0f, "margin 2: two binades of headroom, 2^(8 - 2)");
    CHECK_SCALE(3.5f, 448, 1, 1, 64.0f, "2^(7 - 1)");
    CHECK_SCALE(1.0f, 57344, 0, 1, 32768.0f, "e5m2: 57344 / 1, floor(log2 57344) = 15: 2^15");
    CHECK_SCALE(0.25f, 57344, 3, 1, 16384.0f, "e5m2, margin 3: 57344 / 0.25 = 229376 = 1.75 * 2^17: 2^(17 - 3)");
    /* The clamp: the exponent stays in [-126, 127], so that the scale and 1/scale are normal fp32 numbers. */
    CHECK_SCALE(3e38f, 448, 10, 1, 0x1p-126f,
                "448 / 3e38 ~ 1.5 * 2^-119, margin 10: 2^-129 is clamped to 2^-126 (2^-129 is subnormal, and "
                "1 / 2^-129 overflows fp32 to inf)");
    CHECK_SCALE(1e-44f, 57344, 0, 1, 0x1p127f,
                "57344 / 1e-44 ~ 2^159 (a subnormal amax): clamped to 2^127, fp32's largest power of two");
}

/* An amax of 0 (a tensor of zeros, or no cast yet), inf or NaN keeps the scale: it carries no information. */
MPT_TEST(fp8_amax_zero_keeps_the_scale) {
    CHECK_SCALE(0.0f, 448, 0, 32.0f, 32.0f, "amax 0: keep the previous scale (TE does the same)");
    CHECK_SCALE(INFINITY, 448, 0, 0.25f, 0.25f, "amax inf: a step that overflowed says nothing; keep the scale");
    CHECK_SCALE(NAN, 57344, 0, 8.0f, 8.0f, "amax NaN: keep the scale");
    /* And through the history: a window of zeros leaves the scale where it was. */
    amp_fp8_meta m;
    amp_fp8_init(&m, &FP_E4M3, 4, 0, AMP_AMAX_MAX);
    m.scale = 16.0f;
    m.scale_inv = 1.0f / 16;
    for (int i = 0; i < 6; i++) amp_fp8_record_amax(&m, 0.0f);
    amp_fp8_update_scale(&m);
    MPT_CHECK(m.scale == 16.0f && m.scale_inv == 1.0f / 16, "a history of zeros: expected scale 16 kept, got %g (inv %g)",
              (double)m.scale, (double)m.scale_inv);
    amp_fp8_free(&m);
}

/* A window of 4: amax_compute_algo "max" takes the largest of the last 4 amaxes, "most_recent" the newest. */
MPT_TEST(fp8_history_max_and_most_recent) {
    static const float amaxes[] = {1, 5, 2, 3, 4, 1, 0.5f};
    /* window after each record (newest last)        max   newest */
    static const float want_max[] = {1, 5, 5, 5, 5, 4, 4};
    amp_fp8_meta mx, mr;
    amp_fp8_init(&mx, &FP_E4M3, 4, 0, AMP_AMAX_MAX);
    amp_fp8_init(&mr, &FP_E4M3, 4, 0, AMP_AMAX_MOST_RECENT);
    for (int k = 0; k < 7; k++) {
        amp_fp8_record_amax(&mx, amaxes[k]);
        amp_fp8_record_amax(&mr, amaxes[k]);
        float got_max = amp_fp8_history_amax(&mx), got_recent = amp_fp8_history_amax(&mr);
        MPT_CHECK(got_max == want_max[k],
                  "after recording %d amaxes (the last %g), history of 4, algo max\n      expected: %g\n      got:      %g\n"
                  "      likely mistake: %s", k + 1, (double)amaxes[k], (double)want_max[k], (double)got_max,
                  k >= 4 ? "the window holds only the last history_len amaxes: the newest overwrites the oldest (a ring)"
                         : "max over every entry of the window (entries not yet written are 0)");
        MPT_CHECK(got_recent == amaxes[k],
                  "after recording %d amaxes, algo most_recent\n      expected: %g (the newest)\n      got:      %g", k + 1,
                  (double)amaxes[k], (double)got_recent);
    }
    MPT_CHECK_EQ_I64(7, mx.recorded, "recorded: amaxes recorded so far");
    amp_fp8_update_scale(&mx);
    MPT_CHECK(mx.scale == 64.0f, "update_scale from the window {3, 4, 1, 0.5}: max 4, 448/4 = 112: expected 2^6 = 64, "
                                 "got %g", (double)mx.scale);
    amp_fp8_free(&mx);
    amp_fp8_free(&mr);
    /* Every slot counts: windows of 1, 3 and 5 whose largest amax sits in each slot in turn. */
    for (int len = 1; len <= 5; len += 2)
        for (int big = 0; big < 2 * len; big++) {
            amp_fp8_meta w;
            amp_fp8_init(&w, &FP_E4M3, len, 0, AMP_AMAX_MAX);
            for (int k = 0; k <= big; k++) amp_fp8_record_amax(&w, k == big ? 9.0f : 1.0f);
            float got = amp_fp8_history_amax(&w);
            MPT_CHECK(got == 9.0f, "history of %d, algo max, %d amaxes recorded, the last one 9 and the others 1\n"
                      "      expected: 9\n      got:      %g\n      likely mistake: the max must run over all "
                      "history_len slots of the ring (the newest may sit in its last slot)", len, big + 1, (double)got);
            amp_fp8_free(&w);
        }
}

/* The cast multiplies by the scale and saturates: beyond +-448 a value becomes +-448 (e4m3 has no inf; a plain cast
 * would give NaN), and each such value is counted. The amax of x is recorded for later scales. */
MPT_TEST(fp8_quantize_saturates) {
    amp_fp8_meta m;
    amp_fp8_init(&m, &FP_E4M3, 8, 0, AMP_AMAX_MAX);
    m.scale = 64.0f;
    m.scale_inv = 1.0f / 64;
    const float x[] = {1.0f, 10.0f, -100.0f, 0.001f, 3.3f, NAN, -7.0f, 6.9f};
    enum { N = sizeof x / sizeof *x };
    uint8_t q[N];
    float amax = amp_fp8_quantize(&m, x, q, N);
    for (int i = 0; i < N; i++) {
        uint8_t want = lab25_code(&FP_E4M3, x[i] * 64.0f);
        MPT_CHECK(q[i] == want,
                  "x[%d] = %g at scale 64: expected code 0x%02x (%g), got 0x%02x (%g)\n      likely mistake: %s", i,
                  (double)x[i], want, (double)fp_decode(&FP_E4M3, want), q[i], (double)fp_decode(&FP_E4M3, q[i]),
                  q[i] == lab25_code(&FP_E4M3, x[i]) ? "multiply by m->scale before the cast"
                  : (q[i] & 0x7f) == 0x7f && !isnan(x[i])
                      ? "cast with saturation (fp_f32_to_e4m3(..., 1)): 640 becomes 448, not NaN"
                      : "q = cast(x * scale), nearest even, saturating");
    }
    MPT_CHECK_EQ_U64(2, m.saturated, "saturated: |x * 64| > 448 for x = 10 and -100 (-7 * 64 = -448 is e4m3's largest "
                                     "value itself: not saturated)");
    MPT_CHECK(amax == 100.0f && amp_fp8_history_amax(&m) == 100.0f,
              "quantize returns amax(x) = 100 (NaN passed over) and records it: got %g, history %g", (double)amax,
              (double)amp_fp8_history_amax(&m));
    amp_fp8_free(&m);
    /* A long tensor: quantize works in batches of 1024; every batch, the last partial one too, lands in its place. */
    enum { LONG = 2500 };
    static float y[LONG];
    static uint8_t qy[LONG];
    for (int i = 0; i < LONG; i++) y[i] = (float)((i * 37) % 201 - 100) / 16.0f;
    for (int f = 0; f < 2; f++) {
        const fp_format *fmt = f ? &FP_E5M2 : &FP_E4M3;
        amp_fp8_init(&m, fmt, 8, 0, AMP_AMAX_MAX);
        m.scale = f ? 4096.0f : 128.0f;
        m.scale_inv = 1.0f / m.scale;
        memset(qy, 0xAA, sizeof qy);
        amp_fp8_quantize(&m, y, qy, LONG);
        uint64_t over = 0;
        for (int i = 0; i < LONG; i++) over += fabsf(y[i] * m.scale) > fp_max(fmt);
        for (int i = 0; i < LONG; i++) {
            uint8_t want = lab25_code(fmt, y[i] * m.scale);
            if (qy[i] != want) {
                MPT_CHECK(0, "%s, %d values at scale %g: x[%d] = %g\n      expected: code 0x%02x\n      got:      "
                          "0x%02x\n      likely mistake: each batch of 1024 is cast into q + start (its own place), "
                          "the last partial batch too", fmt->name, LONG, (double)m.scale, i, (double)y[i], want, qy[i]);
                break;
            }
        }
        MPT_CHECK_EQ_U64(over, m.saturated, "saturated: counted over every batch of a 2500-value tensor");
        amp_fp8_free(&m);
    }
}

/* The recipe over steps, with a history of 4 (TE's DelayedScaling in miniature). Each step quantizes with the scale
 * of the steps before, then updates it:
 *   step 1: scale 1 (nothing recorded yet); amax 2 is recorded; next scale 448/2 = 224 -> 2^7 = 128
 *   step 2: amax 2 at 128 (2 * 128 = 256: fits)
 *   step 3: a spike, amax 8, still cast at 128: the values past 448/128 = 3.5 saturate (the cost of the delay: 36
 *           of the 64); next scale 448/8 = 56 -> 2^5 = 32
 *   steps 4-7: amax 2, cast at 32 while the spike is in the window (the amaxes of steps 3-6); step 8: back to 128. */
MPT_TEST(fp8_delayed_scaling_step_by_step) {
    amp_fp8_meta m;
    amp_fp8_init(&m, &FP_E4M3, 4, 0, AMP_AMAX_MAX);
    static const float amax_of_step[] = {2, 2, 8, 2, 2, 2, 2, 2};
    static const float scale_used[] = {1, 128, 128, 32, 32, 32, 32, 128};
    static const int saturated[] = {0, 0, 36, 0, 0, 0, 0, 0};
    float x[64];
    uint8_t q[64];
    for (int step = 0; step < 8; step++) {
        for (int i = 0; i < 64; i++) x[i] = amax_of_step[step] * (float)(i + 1) / 64 * (i % 2 ? -1 : 1);
        MPT_CHECK(m.scale == scale_used[step],
                  "step %d quantizes with scale %g (from the amaxes of the steps before), got %g\n"
                  "      likely mistake: update_scale = scale_for_amax(history_amax(window)), with the window the last "
                  "4 amaxes recorded", step + 1, (double)scale_used[step], (double)m.scale);
        amp_fp8_quantize(&m, x, q, 64);
        MPT_CHECK_EQ_U64((uint64_t)saturated[step], m.saturated, "values saturated in this step's cast");
        amp_fp8_update_scale(&m);
    }
    amp_fp8_free(&m);
}
