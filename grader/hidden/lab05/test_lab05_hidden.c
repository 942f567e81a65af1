/* test_lab05_hidden.c: lab 05 hidden tests: the unscale's arithmetic and special values, the dynamic scaler on
 * capped growth, other factors, Keras's start and a long random trace, and the whole policy table. */
#include "../../../labs/lab05-autocast-and-grad-scaler/tests/lab05_util.h"
#include "amp/policy.h"
#include "base/rng.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ A. unscale */

/* PyTorch multiplies by inv_scale = (float)(1/(double)S); for S = 3 that is not the same as dividing by 3 for
 * many floats (g/3 is rounded once, g*inv twice). The fused kernel multiplies: match it bit for bit. */
MPT_TEST(unscale_multiplies_by_the_reciprocal) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_STATIC);
    c.init_scale = 3;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    enum { N = 4096 };
    static float g[N], want[N];
    float inv = (float)(1.0 / 3.0);
    int differ = 0;
    mp_rng rng;
    mp_rng_seed(&rng, 0x5ec1 ^ mpt_seed());
    for (int i = 0; i < N; i++) {
        g[i] = (1.0f + (float)i * 0.000244140625f) * (1.0f + mp_rng_uniform(&rng));
        want[i] = g[i] * inv;
        differ += want[i] != g[i] / 3.0f;
    }
    MPT_REQUIRE(differ > 0, "test data: some values must tell multiplying from dividing");
    clip_span span = {g, N};
    MPT_OBSERVE(amp_scaler_unscale(&s, &span, 1));
    int wrong = 0;
    for (int i = 0; i < N; i++) wrong += g[i] != want[i];
    for (int i = 0; i < N; i++) MPT_OBSERVE(float_bits_of(g[i]));
    MPT_CHECK(wrong == 0, "%d of %d gradients differ from g * inv_scale with inv_scale = (float)(1.0 / 3.0)\n"
              "      likely mistake: dividing by the scale (g / S) instead of multiplying by 1/S as PyTorch does",
              wrong, N);
}

MPT_TEST(unscale_special_values) {
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    float g[5] = {-0.0f, INFINITY, NAN, 0x1p-130f, -65536.0f};
    clip_span span = {g, 5};
    MPT_CHECK(amp_scaler_unscale(&s, &span, 1), "inf and NaN present: found_inf should be true");
    MPT_CHECK_FLOAT_BITS(-0.0f, g[0], "-0 * inv_scale is -0");
    MPT_CHECK(isinf(g[1]) && g[1] > 0, "+inf * inv_scale stays +inf, got %g", (double)g[1]);
    MPT_CHECK(isnan(g[2]), "NaN stays NaN, got %g", (double)g[2]);
    MPT_CHECK_FLOAT_BITS(0x1p-146f, g[3], "a subnormal result: 2^-130 / 2^16 = 2^-146");
    MPT_CHECK_FLOAT_BITS(-1.0f, g[4], "-65536 / 65536");
}

MPT_TEST(unscale_large_and_empty_spans) {
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    enum { N = 1 << 20 };
    float *big = malloc(N * sizeof *big);
    MPT_REQUIRE(big, "out of memory");
    uint64_t k = 3 + mpt_seed() % 5; /* 3 .. 7, from this grade's seed */
    for (int i = 0; i < N; i++) big[i] = 65536.0f * (float)(i % k);
    big[N - 1] = -INFINITY;
    float empty_dummy = 1.0f;
    clip_span spans[3] = {{&empty_dummy, 0}, {big, N}, {&empty_dummy, 0}};
    bool found = amp_scaler_unscale(&s, spans, 3);
    MPT_OBSERVE(found);
    for (int i = 0; i < N; i += 4099) MPT_OBSERVE(float_bits_of(big[i]));
    MPT_OBSERVE(float_bits_of(big[N - 2]));
    MPT_CHECK(found, "-inf at the very end of a 2^20-value span must be found");
    MPT_CHECK(big[N - 2] == (float)((N - 2) % k), "values are unscaled up to the end: expected %d, got %g",
              (int)((N - 2) % k), (double)big[N - 2]);
    MPT_CHECK(empty_dummy == 1.0f, "a span of length 0 must not be touched");
    free(big);
}

/* ================================================================ B. the dynamic scaler */

MPT_TEST(scaler_growth_capped_in_fp32) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    c.init_scale = 0x1p126;
    c.growth_interval = 3;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    amp_scaler_update(&s, false);
    amp_scaler_update(&s, false);
    CHECK_UPDATE(&s, false, false, 0x1p127f, 0, "growth from 2^126", "2^127 is finite: grow");
    amp_scaler_update(&s, false);
    amp_scaler_update(&s, false);
    CHECK_UPDATE(&s, false, false, 0x1p127f, 0, "growth from 2^127",
                 "2^128 is inf in fp32: keep the scale (grow only if the grown value is finite), but still reset "
                 "the tracker");
}

/* growth_factor 3, backoff 0.25, interval 7, from 2^16:
 *   7 clean -> 196608; overflow -> 49152; 6 clean -> 49152 (tracker 6); clean -> 147456. */
MPT_TEST(scaler_non_default_factors) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    c.growth_factor = 3;
    c.backoff_factor = 0.25;
    c.growth_interval = 7;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    if (!CLEAN_STEPS(&s, 6, "steps 1 .. 6")) return;
    CHECK_UPDATE(&s, false, false, 196608.0f, 0, "step 7", "use cfg.growth_interval and cfg.growth_factor, not 2000 and 2");
    CHECK_UPDATE(&s, true, true, 49152.0f, 0, "step 8 (overflow)", "use cfg.backoff_factor, not 0.5");
    if (!CLEAN_STEPS(&s, 6, "steps 9 .. 14")) return;
    CHECK_UPDATE(&s, false, false, 147456.0f, 0, "step 15", "growth by cfg.growth_factor");
}

MPT_TEST(scaler_keras_kind_from_2_to_the_15) {
    amp_scaler s = lab05_scaler(AMP_SCALER_KERAS);
    MPT_REQUIRE(s.scale == 32768.0f, "Keras's LossScaleOptimizer starts at 2^15");
    for (int i = 0; i < 1999; i++) amp_scaler_update(&s, false);
    CHECK_UPDATE(&s, false, false, 65536.0f, 0, "Keras, step 2000", "the same rule serves the keras kind");
    CHECK_UPDATE(&s, true, true, 32768.0f, 0, "Keras, overflow", "the same rule serves the keras kind");
}

/* A long random trace with bursts of overflows, against a model of GradScaler written here. */
MPT_TEST(scaler_random_trace_matches_reference) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    c.growth_interval = 50;
    amp_scaler s;
    amp_scaler_init(&s, &c);
    float ref_scale = 65536.0f;
    int ref_tracker = 0;
    mp_rng rng;
    mp_rng_seed(&rng, 505 ^ mpt_seed());
    for (int i = 0; i < 30000; i++) {
        /* Overflows are likelier when the scale is high, as in training. */
        bool overflow = mp_rng_uniform(&rng) < (ref_scale > 1e6f ? 0.2f : 0.01f);
        if (overflow) {
            ref_scale = (float)(ref_scale * 0.5);
            ref_tracker = 0;
        } else if (++ref_tracker == 50) {
            float grown = (float)(ref_scale * 2.0);
            if (isfinite(grown)) ref_scale = grown;
            ref_tracker = 0;
        }
        amp_update u = amp_scaler_update(&s, overflow);
        MPT_OBSERVE((uint64_t)(uint32_t)s.growth_tracker << 1 | u.skipped);
        MPT_CHECK_FLOAT_BITS(ref_scale, s.scale, "the scale after this step");
        if (u.skipped != overflow || s.scale != ref_scale || s.growth_tracker != ref_tracker) {
            mpt_fail(__FILE__, __LINE__,
                     "step %d (%s): expected skipped=%d scale %g tracker %d, got skipped=%d scale %g tracker %d", i + 1,
                     overflow ? "overflow" : "clean", overflow, (double)ref_scale, ref_tracker, u.skipped,
                     (double)s.scale, s.growth_tracker);
            return;
        }
    }
}

/* PyTorch has no floor: 143 overflows in a row take 2^16 below fp32's normal range. */
MPT_TEST(scaler_keeps_halving_until_it_vanishes) {
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    amp_update u = {0};
    /* clean steps (fewer than the interval) between the overflows, at places drawn from this grade's seed */
    mp_rng rng;
    mp_rng_seed(&rng, 0x5a1f ^ mpt_seed());
    for (int i = 0; i < 143; i++) {
        if (mp_rng_u32(&rng) % 4 == 0) {
            u = amp_scaler_update(&s, false);
            MPT_OBSERVE((uint64_t)float_bits_of(u.next_scale) << 32 | (uint32_t)s.growth_tracker);
        }
        u = amp_scaler_update(&s, true);
        MPT_OBSERVE((uint64_t)float_bits_of(u.next_scale) << 8 | (uint32_t)u.status << 1 | u.skipped);
    }
    MPT_CHECK(u.next_scale == 0x1p-127f, "after 143 overflows from 2^16 the scale should be 2^-127, got %g\n"
              "      likely mistake: a floor (PyTorch's GradScaler has none; DeepSpeed's is lab 09)", (double)u.next_scale);
    MPT_CHECK(u.status == AMP_SCALER_SCALE_VANISHED, "status should be scale_vanished, got %s",
              amp_scaler_status_name(u.status));
}

/* ================================================================ C. the policy */

/* The ops of a policy test in an order drawn from this grade's seed; each answer is recorded for the grader. */
static void lab05_op_order(int order[AMP_NOPS], uint64_t salt) {
    mp_rng rng;
    mp_rng_seed(&rng, salt ^ mpt_seed());
    for (int i = 0; i < AMP_NOPS; i++) order[i] = i;
    for (int i = AMP_NOPS - 1; i > 0; i--) {
        int j = (int)(mp_rng_u32(&rng) % (uint32_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
}

MPT_TEST(policy_tf32_only_matmuls) {
    int order[AMP_NOPS];
    lab05_op_order(order, 0x7f32);
    for (int k = 0; k < AMP_NOPS; k++) {
        int o = order[k];
        amp_precision want = amp_op_get((amp_op)o)->gemm ? AMP_PREC_LOW : AMP_PREC_FP32;
        amp_precision got = amp_policy_default(AMP_RECIPE_TF32, (amp_op)o);
        MPT_OBSERVE((uint64_t)o << 8 | got);
        MPT_CHECK(got == want, "tf32, %s: expected %s, got %s\n      likely mistake: tf32 is a matmul mode; with fp32 "
                  "weights and no autocast everything else stays fp32 (info->weights != info->low)",
                  amp_op_get((amp_op)o)->name, amp_precision_name(want), amp_precision_name(got));
    }
}

MPT_TEST(policy_fp8_linear_layers_only) {
    int order[AMP_NOPS];
    lab05_op_order(order, 0xf8);
    for (int k = 0; k < AMP_NOPS; k++)
        MPT_OBSERVE((uint64_t)order[k] << 8 | amp_policy_default(AMP_RECIPE_FP8, (amp_op)order[k]));
    MPT_CHECK(amp_policy_default(AMP_RECIPE_FP8, AMP_OP_MATMUL) == AMP_PREC_FP8,
              "fp8 recipe, matmul: expected fp8 (info->fp8_matmul)");
    MPT_CHECK(amp_policy_default(AMP_RECIPE_FP8, AMP_OP_ATTN_SCORES) == AMP_PREC_LOW &&
                  amp_policy_default(AMP_RECIPE_FP8, AMP_OP_ATTN_PRODUCT) == AMP_PREC_LOW,
              "fp8 recipe, attention products: expected low (bf16); only the linear layers (AMP_OP_MATMUL) go to fp8");
    MPT_CHECK(amp_policy_default(AMP_RECIPE_FP8, AMP_OP_ACTIVATION) == AMP_PREC_FOLLOW,
              "fp8 recipe, activation: expected follow (the rest is bf16 autocast)");
    MPT_CHECK(amp_policy_default(AMP_RECIPE_FP8, AMP_OP_NORM) == AMP_PREC_FP32, "fp8 recipe, norm: expected fp32");
}

MPT_TEST(policy_every_recipe_full_table) {
    /* F fp32, L low, W follow, 8 fp8; columns in amp_op order: matmul attn_scores attn_product softmax norm
     * norm_stats loss reduction activation residual embedding */
    static const char *const table[AMP_NRECIPES] = {
        [AMP_RECIPE_FP32] = "FFFFFFFFFFF",      [AMP_RECIPE_TF32] = "LLLFFFFFFFF",
        [AMP_RECIPE_FP16] = "LLLFFFFFWWW",      [AMP_RECIPE_FP16_O2] = "LLLFLFFFLLL",
        [AMP_RECIPE_BF16] = "LLLFFFFFWWW",      [AMP_RECIPE_BF16_PURE] = "LLLFLFFFLLL",
        [AMP_RECIPE_FP8] = "8LLFFFFFWWW",
    };
    int order[AMP_NOPS];
    lab05_op_order(order, 0x7ab1e);
    for (int r = 0; r < AMP_NRECIPES; r++)
        for (int k = 0; k < AMP_NOPS; k++) {
            int o = order[(k + r) % AMP_NOPS];
            char c = table[r][o];
            amp_precision want = c == 'F' ? AMP_PREC_FP32 : c == 'L' ? AMP_PREC_LOW : c == 'W' ? AMP_PREC_FOLLOW
                                                                                           : AMP_PREC_FP8;
            amp_precision got = amp_policy_default((amp_recipe)r, (amp_op)o);
            MPT_OBSERVE((uint64_t)r << 16 | (uint64_t)o << 8 | got);
            MPT_CHECK(got == want, "recipe %s, op %s: expected %s, got %s", amp_recipe_get((amp_recipe)r)->name,
                      amp_op_get((amp_op)o)->name, amp_precision_name(want), amp_precision_name(got));
        }
}
