/* test_lab25_hidden.c: lab 25 hidden tests: fp8 scales at fp32's limits and at exact powers of two, a long random
 * history against a model of the window, e5m2 quantize with underflow, what an unscaled cast loses; norm statistics
 * on random rows in bf16 and fp16 bit for bit, a negative one-pass variance, and a single value. */
#include "../../../labs/lab25-advanced-mixed-precision/tests/lab25_util.h"
#include "base/rng.h"

#include <float.h>

/* ------------------------------------------------------------------ part A */

MPT_TEST(fp8_scale_exact_at_powers_of_two) {
    /* fmax / amax exactly 2^k: floor(log2) is k, not k - 1 (log2f of a power of two computed in float can land
     * just under it for some inputs, and a ratio computed in float can round onto 2^k when it is just under). */
    for (int k = -20; k <= 30; k++) {
        float amax = (float)ldexp(448.0, -k);
        if (!CHECK_SCALE(amax, 448, 0, 1, ldexpf(1, k), "448 / amax = 2^k exactly: scale 2^k")) return;
    }
    /* Just above: the ratio is just under 2^k, so 2^(k-1). */
    CHECK_SCALE(nextafterf(3.5f, 10), 448, 0, 1, 64.0f, "448 / (3.5 + 1 ulp) is just under 128: 2^6");
    CHECK_SCALE(nextafterf(1.75f, 10), 57344, 0, 1, 16384.0f, "57344 / (1.75 + 1 ulp) is just under 32768: 2^14");
}

MPT_TEST(fp8_scale_clamped_to_normal_fp32) {
    CHECK_SCALE(1e-38f, 448, 0, 1, 0x1p127f, "448 / 1e-38 = 2^135.4: clamp the exponent to 127 (2^128 is inf)");
    CHECK_SCALE(1e-45f, 57344, 0, 1, 0x1p127f, "a subnormal amax: clamp to 2^127");
    CHECK_SCALE(FLT_MAX, 448, 10, 1, 0x1p-126f,
                "448 / 3.4e38 = 2^-119.5, floor -120, margin 10: -130, clamped to -126 so 1/scale stays finite");
    CHECK_SCALE(FLT_MAX, 448, 0, 1, 0x1p-120f, "448 / FLT_MAX: 2^-120, inside the range");
}

/* 500 random amaxes through windows of 1, 3 and 16, each step checked against a plain model of the window. */
MPT_TEST(fp8_history_random_against_a_model) {
    static const int lens[] = {1, 3, 16};
    for (int l = 0; l < 3; l++)
        for (int algo = 0; algo < 2; algo++) {
            int len = lens[l];
            amp_fp8_meta m;
            amp_fp8_init(&m, &FP_E5M2, len, 0, (amp_amax_algo)algo);
            float window[16] = {0};
            mp_rng rng;
            mp_rng_seed(&rng, (uint64_t)(31 * len + algo) ^ mpt_seed());
            for (int t = 0; t < 500; t++) {
                float a = mp_rng_uniform(&rng) < 0.1f ? 0.0f : ldexpf(mp_rng_uniform(&rng), (int)(mp_rng_u32(&rng) % 20) - 10);
                window[t % len] = a;
                amp_fp8_record_amax(&m, a);
                float want = a;
                if (algo == AMP_AMAX_MAX)
                    for (int i = 0; i < len; i++) want = fmaxf(want, window[i]);
                float got = amp_fp8_history_amax(&m);
                MPT_OBSERVE(fp_float_bits(got));
                if (got != want) {
                    mpt_fail(__FILE__, __LINE__, "history %d, algo %s, after %d records: expected %g, got %g", len,
                             algo == AMP_AMAX_MAX ? "max" : "most_recent", t + 1, (double)want, (double)got);
                    amp_fp8_free(&m);
                    return;
                }
            }
            amp_fp8_free(&m);
        }
}

/* e5m2 (57344, subnormals down to 2^-16) at scale 2^10: values below 2^-26 underflow to 0, beyond 56 saturate. */
MPT_TEST(fp8_quantize_e5m2_counts_and_nan) {
    amp_fp8_meta m;
    amp_fp8_init(&m, &FP_E5M2, 4, 0, AMP_AMAX_MAX);
    m.scale = 1024.0f;
    m.scale_inv = 1.0f / 1024;
    enum { N = 2000 };
    float *x = malloc(N * sizeof(float));
    uint8_t *q = malloc(N);
    for (int i = 0; i < N; i++) x[i] = ldexpf(1.0f + (float)(i % 7) / 8, (i % 40) - 32) * (i % 3 ? 1 : -1);
    x[17] = NAN;
    amp_fp8_quantize(&m, x, q, N);
    uint64_t want_sat = 0, want_under = 0;
    int bad = -1;
    for (int i = 0; i < N; i++) {
        float s = x[i] * 1024.0f;
        uint8_t want = lab25_code(&FP_E5M2, s);
        want_sat += fabsf(s) > 57344.0f;
        want_under += fp_decode(&FP_E5M2, want) == 0 && s != 0;
        if (q[i] != want && bad < 0) bad = i;
    }
    MPT_CHECK(bad < 0, "e5m2 at scale 1024, x[%d] = %g: expected code 0x%02x, got 0x%02x", bad, bad >= 0 ? (double)x[bad] : 0,
              bad >= 0 ? lab25_code(&FP_E5M2, x[bad] * 1024.0f) : 0, bad >= 0 ? q[bad] : 0);
    MPT_CHECK_EQ_U64(want_sat, m.saturated, "saturated (|x * scale| > 57344)");
    MPT_CHECK_EQ_U64(want_under, m.underflowed, "underflowed (nonzero x * scale that became 0)");
    MPT_CHECK((q[17] & 0x7f) > 0x7c, "NaN stays NaN in e5m2: got code 0x%02x", q[17]);
    free(x);
    free(q);
    amp_fp8_free(&m);
}

/* Why the scale: gradients of 1e-4 .. 1e-3 in e4m3 with scale 1 mostly fall under its smallest subnormal 2^-9 and
 * vanish; after one delayed update the scale puts their amax near 448 and none vanish. */
MPT_TEST(fp8_scaling_saves_small_values) {
    amp_fp8_meta m;
    amp_fp8_init(&m, &FP_E4M3, 16, 0, AMP_AMAX_MAX);
    enum { N = 1000 };
    float x[N];
    uint8_t q[N];
    for (int i = 0; i < N; i++) x[i] = 1e-4f + 9e-4f * (float)i / N;
    amp_fp8_quantize(&m, x, q, N);
    uint64_t lost_unscaled = m.underflowed;
    for (int i = 0; i < N; i++) MPT_OBSERVE(q[i]);
    amp_fp8_update_scale(&m);
    MPT_OBSERVE(fp_float_bits(m.scale));
    MPT_CHECK(m.scale == 262144.0f, "amax 1e-3: 448 / 1e-3 = 448000: expected scale 2^18, got %g", (double)m.scale);
    amp_fp8_quantize(&m, x, q, N);
    for (int i = 0; i < N; i++) MPT_OBSERVE(q[i]);
    MPT_OBSERVE(m.underflowed);
    MPT_CHECK(lost_unscaled > N / 2 && m.underflowed == 0,
              "values 1e-4 .. 1e-3 in e4m3: expected most lost at scale 1 and none at 2^18; got %llu and %llu lost",
              (unsigned long long)lost_unscaled, (unsigned long long)m.underflowed);
    amp_fp8_free(&m);
}

/* ------------------------------------------------------------------ part B */

MPT_TEST(norm_stats_random_rows_bit_for_bit) {
    static const size_t sizes[] = {1, 7, 64, 128, 768};
    static const float means[] = {0.0f, 3.0f, 40.0f, -12.0f};
    const fp_format *formats[] = {&FP_FP16, &FP_BF16, &FP_FP32};
    mp_rng rng;
    mp_rng_seed(&rng, 2525);
    float x[768];
    for (int s = 0; s < 5; s++)
        for (int mi = 0; mi < 4; mi++) {
            for (size_t i = 0; i < sizes[s]; i++) x[i] = means[mi] + 0.5f * mp_rng_normal(&rng);
            for (int f = 0; f < 3; f++)
                for (int method = 0; method < NORM_NMETHODS; method++)
                    if (!SAME_STATS(x, sizes[s], formats[f], (norm_method)method, "a random row")) return;
        }
}

/* One pass in fp16 around 20 with spread 0.05: E[x^2] ~ 400 has spacing 0.25, the variance 0.0025 is lost and the
 * difference can come out negative: then rstd = 1/sqrt(negative) is NaN, and the whole row of the output with it. */
MPT_TEST(norm_stats_one_pass_negative_variance) {
    float x[64];
    norm_stats st;
    for (uint64_t seed = 1; seed < 200; seed++) {
        mp_rng rng;
        mp_rng_seed(&rng, seed);
        for (int i = 0; i < 64; i++) x[i] = 20.0f + 0.05f * mp_rng_normal(&rng);
        float mean, var;
        lab25_reference_stats(x, 64, &FP_FP16, NORM_ONE_PASS, &mean, &var);
        if (!(var < 0)) continue;
        if (!SAME_STATS(x, 64, &FP_FP16, NORM_ONE_PASS, "mean 20, spread 0.05, one pass in fp16")) return;
        norm_stats_in_format(x, 64, &FP_FP16, NORM_ONE_PASS, 1e-5f, &st);
        MPT_CHECK(isnan(st.rstd), "a negative variance (%g) gives rstd NaN; got %g", (double)st.var, (double)st.rstd);
        norm_stats_in_format(x, 64, &FP_FP16, NORM_TWO_PASS, 1e-5f, &st);
        MPT_CHECK(st.var >= 0, "two passes never give a negative variance (a sum of squares): got %g", (double)st.var);
        return;
    }
    mpt_fail(__FILE__, __LINE__, "no seed gave a negative one-pass variance: the reference itself changed?");
}

MPT_TEST(norm_stats_single_value) {
    const float x[1] = {3.14159f};
    norm_stats st;
    norm_stats_in_format(x, 1, &FP_FP16, NORM_TWO_PASS, 1e-5f, &st);
    MPT_CHECK(st.mean == lab25_round(&FP_FP16, 3.14159f) && st.var == 0,
              "one value in fp16, two passes: mean = the value rounded (%g), var 0; got %g, %g",
              (double)lab25_round(&FP_FP16, 3.14159f), (double)st.mean, (double)st.var);
    SAME_STATS(x, 1, &FP_FP16, NORM_ONE_PASS, "one value, one pass");
    SAME_STATS(x, 1, &FP_BF16, NORM_ONE_PASS, "one value, one pass, bf16");
}
