/* test_lab04_hidden.c: lab 04 hidden tests: every target's range edges found again by bisection with fp_encode,
 * e4m3's even maximum, bf16/tf32 edges, every power of two's binade, the scale argument, the 'none' scaler,
 * the scale chooser's limits and other formats, and a static scale too large for fp16 on the tiny GPT. */
#include "../../../labs/lab04-underflow-and-loss-scaling/tests/lab04_util.h"

#include <float.h>

/* ================================================================ A. exponent histogram */

/* The smallest non-negative fp32 bit pattern (in [0, 0x7f800000]) whose fp_encode result passes `test`. */
typedef bool (*class_test)(fp_class c);
static bool is_nonzero(fp_class c) { return c != FP_CLASS_ZERO; }
static bool is_normal_or_more(fp_class c) { return c == FP_CLASS_NORMAL || c == FP_CLASS_INF || c == FP_CLASS_NAN; }
static bool is_overflow(fp_class c) { return c == FP_CLASS_INF || c == FP_CLASS_NAN; }
static uint32_t first_bits(const fp_format *f, class_test test) {
    uint32_t lo = 0, hi = 0x7f800000u;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (test(fp_classify_bits(f, fp_encode(f, fp_float_from_bits(mid), FP_ROUND_NEAREST_EVEN, 0, 0)))) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* For each target: the last value that flushes and the first that does not, the last subnormal and the first
 * normal, the last that fits and the first that overflows, each as the engine rounds them. */
MPT_TEST(hist_edges_agree_with_fp_encode_for_every_target) {
    for (int t = 0; t < FP_HIST_NTARGETS; t++) {
        const fp_format *f = fp_hist_target_format((fp_hist_target)t);
        uint32_t first_kept = first_bits(f, is_nonzero), first_normal = first_bits(f, is_normal_or_more),
                 first_over = first_bits(f, is_overflow);
        const struct {
            uint32_t bits;
            lab04_fate fate;
            const char *edge;
        } probes[] = {
            {first_kept - 1, LAB04_UNDERFLOW, "the largest value that rounds to 0"},
            {first_kept, LAB04_SUBNORMAL, "the smallest value that rounds to a nonzero subnormal"},
            {first_normal - 1, LAB04_SUBNORMAL, "the largest value that stays subnormal"},
            {first_normal, LAB04_NORMAL, "the smallest value that rounds to a normal"},
            {first_over - 1, LAB04_NORMAL, "the largest value that does not overflow"},
            {first_over, LAB04_OVERFLOW, "the smallest value that overflows"},
        };
        for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
            float v = fp_float_from_bits(probes[i].bits);
            MPT_OBSERVE_NEAR(v, 1e-5, 1e-30);
            lab04_fate got = lab04_fate_of(v, (fp_hist_target)t);
            if (got != probes[i].fate)
                mpt_fail(__FILE__, __LINE__,
                         "%s: %s is %.9g (fp32 bits 0x%08x)\n      expected: %s\n      got:      %s\n"
                         "      likely mistake: the edges are midpoints between neighbouring values of the format, and "
                         "the tie goes to the neighbour whose last mantissa bit is 0",
                         f->name, probes[i].edge, (double)v, probes[i].bits, LAB04_FATE_NAMES[probes[i].fate],
                         LAB04_FATE_NAMES[got]);
        }
    }
}

/* e4m3's largest value 448 is S.1111.110: its last mantissa bit is 0, so the midpoint 464 between 448 and the
 * 480 the format does not have is a tie that stays at 448. Overflow starts one fp32 step above 464. */
MPT_TEST(hist_e4m3_tie_at_464_stays_at_448) {
    static const lab04_case cases[] = {
        {448.0f, "448", LAB04_NORMAL, "e4m3's largest value"},
        {464.0f, "464", LAB04_NORMAL,
         "464 is the midpoint between 448 (mantissa 110, even) and 480; the tie goes to the even 448: no overflow"},
        {0x1.d00002p8f, "464 + 2^-15", LAB04_OVERFLOW, "just above the midpoint: rounds past max (NaN in e4m3)"},
        {0x1p-10f, "2^-10", LAB04_UNDERFLOW, "half of e4m3's smallest subnormal 2^-9: a tie that goes to 0"},
        {0x1p-9f, "2^-9", LAB04_SUBNORMAL, "e4m3's smallest subnormal"},
    };
    CHECK_CASES(FP_HIST_E4M3, cases);
    static const lab04_case e5m2[] = {
        {57344.0f, "57344", LAB04_NORMAL, "e5m2's largest value, 1.11b * 2^15"},
        {61440.0f, "61440", LAB04_OVERFLOW, "the midpoint between 57344 (mantissa 11, odd) and 65536: the tie overflows"},
        {0x1p-17f, "2^-17", LAB04_UNDERFLOW, "half of e5m2's smallest subnormal 2^-16"},
    };
    CHECK_CASES(FP_HIST_E5M2, e5m2);
}

/* bf16 and tf32 have fp32's exponent range: their edges sit among fp32's own subnormals. */
MPT_TEST(hist_bf16_and_tf32_edges) {
    static const lab04_case bf16[] = {
        {0x1p-133f, "2^-133", LAB04_SUBNORMAL, "bf16's smallest subnormal"},
        {0x1p-134f, "2^-134", LAB04_UNDERFLOW, "half of it: a tie that goes to 0"},
        {0x1.000000p-134f + 0x1p-149f, "2^-134 + 2^-149", LAB04_SUBNORMAL, "just above the tie: rounds up"},
        {0x1p-126f, "2^-126", LAB04_NORMAL, "bf16's smallest normal"},
        {65520.0f, "65520", LAB04_NORMAL, "bf16 reaches 3.4e38: no overflow where fp16 overflows"},
        {1e-8f, "1e-8", LAB04_NORMAL, "bf16 keeps what fp16 flushes"},
        {FLT_MAX, "FLT_MAX", LAB04_OVERFLOW, "fp32's max is past bf16's max (3.3895e38) and past its midpoint"},
    };
    CHECK_CASES(FP_HIST_BF16, bf16);
    static const lab04_case tf32[] = {
        {0x1p-136f, "2^-136", LAB04_SUBNORMAL, "tf32's smallest subnormal (10 mantissa bits below 2^-126)"},
        {0x1p-137f, "2^-137", LAB04_UNDERFLOW, "half of it: a tie that goes to 0"},
    };
    CHECK_CASES(FP_HIST_TF32, tf32);
}

MPT_TEST(hist_binade_of_every_power_of_two) {
    for (int e = FP_HIST_MIN_BINADE; e <= FP_HIST_MAX_BINADE; e++) {
        float p = ldexpf(1.0f, e);
        int got = fp_hist_binade(p), got_neg = fp_hist_binade(-p);
        MPT_OBSERVE(got);
        if (got != e || got_neg != e) {
            mpt_fail(__FILE__, __LINE__, "fp_hist_binade(+-2^%d): expected %d, got %d and %d", e, e, got, got_neg);
            return;
        }
        if (e > FP_HIST_MIN_BINADE) {
            int below = fp_hist_binade(nextafterf(p, 0)), above = fp_hist_binade(nextafterf(p, INFINITY));
            MPT_OBSERVE(below);
            if (below != e - 1 || (e < FP_HIST_MAX_BINADE && above != e)) {
                mpt_fail(__FILE__, __LINE__,
                         "around 2^%d: the fp32 just below should be in binade %d (got %d), just above in %d (got %d)", e,
                         e - 1, below, e, above);
                return;
            }
        }
    }
}

/* fp_hist_add(x, scale = 2^10) sees x * 2^10: every binade moves up by 10, and fp16 loses fewer values. */
MPT_TEST(hist_scale_moves_every_binade) {
    enum { N = 4096 };
    static float x[N];
    mp_rng rng;
    mp_rng_seed(&rng, 4 ^ mpt_seed());
    for (int i = 0; i < N; i++) x[i] = mp_rng_normal(&rng) * 1e-6f;
    fp_hist plain, scaled;
    fp_hist_clear(&plain);
    fp_hist_clear(&scaled);
    fp_hist_add(&plain, x, N, 1.0f);
    fp_hist_add(&scaled, x, N, 1024.0f);
    LAB04_OBSERVE_HIST(&plain);
    LAB04_OBSERVE_HIST(&scaled);
    for (int b = FP_HIST_MIN_BINADE; b + 10 <= FP_HIST_MAX_BINADE; b++)
        if (fp_hist_bin(&plain, b) != fp_hist_bin(&scaled, b + 10)) {
            mpt_fail(__FILE__, __LINE__, "binade %d at scale 1 holds %llu values, binade %d at scale 2^10 holds %llu: "
                     "they should be the same values", b, (unsigned long long)fp_hist_bin(&plain, b), b + 10,
                     (unsigned long long)fp_hist_bin(&scaled, b + 10));
            return;
        }
    uint64_t lost_plain = plain.target[FP_HIST_FP16].underflow, lost_scaled = scaled.target[FP_HIST_FP16].underflow;
    MPT_CHECK(lost_plain > lost_scaled, "fp16 underflow of N(0, 1e-6) values: expected fewer at scale 2^10 than at 1, "
              "got %llu and %llu", (unsigned long long)lost_scaled, (unsigned long long)lost_plain);
}

/* ================================================================ B. static loss scaling */

/* The 'none' scaler (bf16 and fp32 recipes) shares the rule: scale 1, skip and report a non-finite step. */
MPT_TEST(none_scaler_skips_like_a_static_one) {
    amp_scaler_config c = amp_scaler_defaults(AMP_SCALER_NONE);
    amp_scaler s;
    amp_scaler_init(&s, &c);
    amp_update u = amp_scaler_update(&s, true);
    MPT_CHECK(u.skipped && u.status == AMP_SCALER_SKIPPED_FIXED && u.next_scale == 1.0f,
              "'none' scaler on inf/NaN gradients: expected skipped, status skipped_fixed, scale 1; got skipped=%s, "
              "status %s, scale %g", u.skipped ? "yes" : "no", amp_scaler_status_name(u.status), (double)u.next_scale);
    for (int i = 0; i < 3; i++) {
        u = amp_scaler_update(&s, false);
        MPT_CHECK(!u.skipped && u.status == AMP_SCALER_OK, "'none' scaler, clean step %d: expected taken, status ok", i + 1);
    }
    MPT_CHECK_EQ_I64(1, s.skipped, "skipped steps");
    MPT_CHECK_EQ_I64(0, s.consecutive_skipped, "consecutive skips after clean steps");
}

/* Limits: tiny gradients would ask for 2^163, which fp32 cannot hold: clamp to 2^127; huge ones ask for a
 * scale below 1. An all-zero histogram has nothing to go by: scale 1. */
MPT_TEST(choose_scale_limits) {
    fp_hist tiny;
    fp_hist_clear(&tiny);
    lab04_hist_put(&tiny, -149, 3);
    amp_scale_choice c = amp_scale_choose(&tiny, &FP_FP16, 1);
    LAB04_OBSERVE_CHOICE(&c);
    MPT_CHECK(c.log2_scale == AMP_SCALE_MAX_LOG2 && c.clamped && isfinite(c.scale),
              "gradients all in binade -149: 15 - 1 + 149 = 163 is past fp32; expected k = 127, clamped, got k = %d "
              "(clamped %s)", c.log2_scale, c.clamped ? "yes" : "no");
    fp_hist huge;
    fp_hist_clear(&huge);
    lab04_hist_put(&huge, 100, 1);
    c = amp_scale_choose(&huge, &FP_FP16, 2);
    LAB04_OBSERVE_CHOICE(&c);
    MPT_CHECK(c.log2_scale == 15 - 2 - 100 && !c.clamped, "a gradient in binade 100, margin 2: expected k = %d, got %d",
              15 - 2 - 100, c.log2_scale);
    fp_hist empty;
    fp_hist_clear(&empty);
    c = amp_scale_choose(&empty, &FP_FP16, 1);
    LAB04_OBSERVE_CHOICE(&c);
    MPT_CHECK(c.empty && c.log2_scale == 0 && c.scale == 1.0f, "an empty histogram: expected scale 1, got 2^%d",
              c.log2_scale);
}

/* The format's top binade is floor(log2 max): e4m3 8 (448), e5m2 15 (57344), bf16 127. For bf16, 127 - 1 + 10
 * = 136 is past fp32's largest power of two: clamped to 127 (bf16 has fp32's range: it needs no scale). */
MPT_TEST(choose_scale_for_other_formats) {
    fp_hist h;
    fp_hist_clear(&h);
    lab04_hist_put(&h, -10, 7);
    lab04_hist_put(&h, -20 - (int)(mpt_seed() % 40), 3); /* smaller values, from this grade's seed, change nothing */
    static const struct {
        const fp_format *f;
        int top, k;
    } formats[] = {{&FP_E4M3, 8, 17}, {&FP_E5M2, 15, 24}, {&FP_FP16, 15, 24}, {&FP_BF16, 127, 127}};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        amp_scale_choice c = amp_scale_choose(&h, formats[i].f, 1);
        LAB04_OBSERVE_CHOICE(&c);
        MPT_CHECK(c.log2_scale == formats[i].k,
                  "%s (top binade %d), gradients up to binade -10, margin 1: expected k = %d, got %d",
                  formats[i].f->name, formats[i].top, formats[i].k, c.log2_scale);
    }
}

/* ================================================================ C. end to end */

/* Far past the chosen scale, fp16 overflows inside backward: inf gradients, which the static scaler must skip and
 * report, keeping its scale. */
MPT_TEST(too_large_a_static_scale_overflows_and_is_skipped) {
    lab04_gpt g;
    lab04_gpt_init(&g);
    lab04_gpt_backward(&g, 1.0f);
    fp_hist h = lab04_grad_hist(&g);
    amp_scale_choice c = amp_scale_choose(&h, &FP_FP16, 1);
    LAB04_OBSERVE_CHOICE(&c);
    float too_large = ldexpf(1.0f, c.log2_scale + 12);
    lab04_use_fp16(&g);
    amp_scaler s = lab04_static_scaler(too_large);
    model_rounding_reset(g.m);
    lab04_gpt_backward(&g, amp_scaler_scale(&s));
    lab04_flushes f = lab04_grad_flushes(&g);
    MPT_REQUIRE(f.overflowed > 0, "fp16 backward at 2^%d (12 binades past the chosen scale): expected some gradients to "
                "overflow to inf, got none", c.log2_scale + 12);
    bool finite = lab04_unscale(&g, amp_scaler_scale(&s));
    MPT_REQUIRE(!finite, "the overflowed gradients should reach the weight gradients as inf or NaN");
    amp_update u = amp_scaler_update(&s, !finite);
    MPT_OBSERVE((uint64_t)u.status << 1 | u.skipped);
    MPT_OBSERVE(f.overflowed);
    MPT_CHECK(u.skipped && u.status == AMP_SCALER_SKIPPED_FIXED && u.next_scale == too_large,
              "static scale 2^%d with inf gradients: expected skipped, skipped_fixed, the same scale; got skipped=%s, "
              "status %s, next scale %g", c.log2_scale + 12, u.skipped ? "yes" : "no", amp_scaler_status_name(u.status),
              (double)u.next_scale);
    model_free(g.m);
}
