/* test_lab06_hidden.c: lab 06 hidden tests: fp32's own stall at 2^24, the running sums and Kahan's sum against
 * references written here on random values (signs mixed, several formats), edge cases, the error bound over many
 * seeds, the probe of every format fp/format.h knows, and the classification against fp_encode. */
#include "../../../labs/lab06-bf16-vs-fp16/tests/lab06_util.h"

#include <float.h>
#include <string.h>

static float round_f(const fp_format *f, float x) { return fp_decode(f, fp_encode(f, x, FP_ROUND_NEAREST_EVEN, 0, 0)); }

/* ================================================================ A. rounded running sum */

/* fp32 has 24 significant bits: 2^24 + 1 is a tie that goes back to 2^24 = 16777216. */
MPT_TEST(sum_fp32_of_ones_stalls_at_2_to_the_24) {
    size_t n = (1u << 24) + 1000;
    float *x = lab06_fill(1.0f, n);
    CHECK_SUM(16777216.0f, fp_sum_rounded(&FP_FP32, x, n), "fp32 running sum of 2^24 + 1000 ones",
              "fp32 stalls at 2^24, where its spacing becomes 2");
    free(x);
}

/* The running sum, partial sum by partial sum, against a reference written here, on values of mixed sign and
 * magnitude, for four formats. */
MPT_TEST(sum_rounded_matches_a_reference) {
    enum { N = 3000 };
    const fp_format *formats[] = {&FP_FP16, &FP_BF16, &FP_E5M2, &FP_TF32};
    float *x = lab06_uniform(21 ^ mpt_seed(), -1.0f, 1.0f, N);
    for (int i = 0; i < N; i++) x[i] = ldexpf(x[i], (int)(i % 13) - 6); /* magnitudes 2^-6 .. 2^6 */
    for (size_t k = 0; k < sizeof formats / sizeof formats[0]; k++) {
        const fp_format *f = formats[k];
        float want = 0.0f;
        for (int n = 1; n <= N; n++) {
            want = round_f(f, want + round_f(f, x[n - 1]));
            if (n % 97 != 0 && n != N) continue;
            float got = fp_sum_rounded(f, x, (size_t)n);
            MPT_OBSERVE(fp_float_bits(got));
            if (fp_float_bits(got) != fp_float_bits(want)) {
                mpt_fail(__FILE__, __LINE__, "%s running sum of the first %d values: expected %.9g, got %.9g\n"
                         "      likely mistake: s = round(s + round(x[i])) for i in order, starting from s = 0",
                         f->name, n, (double)want, (double)got);
                break;
            }
        }
    }
    free(x);
}

MPT_TEST(sum_of_one_value_and_of_negatives) {
    const float x[] = {-20.0f, 0x1p-30f, -65504.0f};
    CHECK_SUM(-20.0f, fp_sum_rounded(&FP_BF16, x, 1), "bf16 sum of -20", "a single addend is its own rounding");
    CHECK_SUM(-20.0f, fp_sum_rounded(&FP_FP16, x, 2), "fp16 sum of -20 and 2^-30", "2^-30 rounds to 0 in fp16 (flushed)");
    CHECK_SUM(-INFINITY, fp_sum_rounded(&FP_FP16, x, 3), "fp16 sum of -20, 2^-30 and -65504",
              "-65524 is past the midpoint -65520 between fp16's -max and -2^16: -inf (nearest even, no saturation)");
}

/* ================================================================ B. Kahan */

static float kahan_reference(const fp_format *f, const float *x, size_t n) {
    float sum = 0.0f, c = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float y = round_f(f, round_f(f, x[i]) - c);
        float t = round_f(f, sum + y);
        c = round_f(f, round_f(f, t - sum) - y);
        sum = t;
    }
    return sum;
}

MPT_TEST(kahan_matches_a_reference) {
    enum { N = 2500 };
    const fp_format *formats[] = {&FP_FP16, &FP_BF16, &FP_FP32, &FP_E5M2};
    float *x = lab06_uniform(5 ^ mpt_seed(), -0.5f, 1.0f, N);
    for (size_t k = 0; k < sizeof formats / sizeof formats[0]; k++)
        for (size_t n = 1; n <= N; n += n < 20 ? 1 : 311) {
            float want = kahan_reference(formats[k], x, n), got = fp_sum_kahan(formats[k], x, n);
            MPT_OBSERVE(fp_float_bits(got));
            if (fp_float_bits(got) != fp_float_bits(want)) {
                mpt_fail(__FILE__, __LINE__, "%s Kahan sum of the first %zu values: expected %.9g, got %.9g\n"
                         "      likely mistake: y = round(round(x) - c); t = round(sum + y); c = round(round(t - sum) - "
                         "y); sum = t (every operation rounded to the format, in this order)",
                         formats[k]->name, n, (double)want, (double)got);
                break;
            }
        }
    free(x);
}

/* Kahan's bound (2u + n u^2) S for fp16 and bf16 on ten seeds each, positive addends. */
MPT_TEST(kahan_bound_over_many_seeds) {
    enum { N = 1500 };
    const fp_format *formats[] = {&FP_FP16, &FP_BF16};
    const int bits[] = {11, 8};
    for (int k = 0; k < 2; k++)
        for (uint64_t seed = 1; seed <= 10; seed++) {
            float *x = lab06_uniform(100 + seed, 0.0f, 2.0f, N);
            double exact = 0;
            for (int i = 0; i < N; i++) exact += round_f(formats[k], x[i]);
            double u = ldexp(1.0, -bits[k]), bound = (2 * u + N * u * u) * exact;
            float sum = fp_sum_kahan(formats[k], x, N);
            MPT_OBSERVE(fp_float_bits(sum));
            double err = fabs(sum - exact);
            free(x);
            if (err > bound) {
                mpt_fail(__FILE__, __LINE__, "%s Kahan sum, seed %llu: error %g above the bound %g", formats[k]->name,
                         (unsigned long long)seed, err, bound);
                return;
            }
        }
}

/* ================================================================ C. range probe */

/* Every format the engine knows, including the OCP MX element formats and the variants: the probe's limits equal
 * fp_max, fp_min_normal, fp_min_subnormal; its binades follow from them. */
MPT_TEST(range_probe_every_format) {
    static const char *const names[] = {"fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2", "e2m1", "e2m3", "e3m2",
                                        "e4m3fn", "e5m2ieee", "e5m0fn", "e3m0", "e8m7", "e6m5fn", "e7m1"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const fp_format *f = fp_format_by_name(names[i]);
        MPT_REQUIRE(f, "format %s unknown to fp_format_by_name", names[i]);
        fp_range r = fp_range_probe(f);
        LAB06_OBSERVE_RANGE(&r);
        int top = ilogb(fp_max(f)), min_norm = ilogb(fp_min_normal(f)), min_sub = ilogb(fp_min_subnormal(f));
        bool ok = r.max == fp_max(f) && r.min_normal == fp_min_normal(f) && r.min_subnormal == fp_min_subnormal(f) &&
                  r.top_binade == top && r.min_normal_binade == min_norm && r.min_subnormal_binade == min_sub &&
                  r.normal_binades == top - min_norm + 1 && r.subnormal_binades == min_norm - min_sub;
        MPT_CHECK(ok,
                  "%s (e%d m%d bias %d, specials %s)\n"
                  "      expected: max %.9g, min normal %g, min subnormal %g; binades top %d, min normal %d, min "
                  "subnormal %d; %d normal, %d subnormal\n"
                  "      got:      max %.9g, min normal %g, min subnormal %g; binades top %d, min normal %d, min "
                  "subnormal %d; %d normal, %d subnormal",
                  names[i], f->ebits, f->mbits, f->bias, fp_specials_name(f->specials), fp_max(f), fp_min_normal(f),
                  fp_min_subnormal(f), top, min_norm, min_sub, top - min_norm + 1, min_norm - min_sub, r.max,
                  r.min_normal, r.min_subnormal, r.top_binade, r.min_normal_binade, r.min_subnormal_binade,
                  r.normal_binades, r.subnormal_binades);
    }
}

/* e4m3 (OCP "fn"): the all-ones exponent field holds numbers (only S.1111.111 is NaN), so its top binade is
 * 15 - 7 = 8, not 7, and max is 1.110b * 2^8 = 448: 15 binades of normals. */
MPT_TEST(range_probe_e4m3_uses_its_top_field) {
    fp_range r = fp_range_probe(&FP_E4M3);
    LAB06_OBSERVE_RANGE(&r);
    MPT_CHECK(r.top_binade == 8 && r.normal_binades == 15 && r.max == 448.0,
              "e4m3: expected top binade 8, 15 normal binades, max 448; got %d, %d, %g\n"
              "      likely mistake: only IEEE formats reserve the whole all-ones exponent field; FN formats reserve "
              "one pattern of it (mantissa all ones)", r.top_binade, r.normal_binades, r.max);
}

/* The classification against the engine on values spread over fp32's range, for six formats and two scales. */
MPT_TEST(range_count_agrees_with_fp_encode) {
    enum { N = 20000 };
    static float x[N];
    mp_rng rng;
    mp_rng_seed(&rng, 33 ^ mpt_seed());
    for (int i = 0; i < N; i++) {
        x[i] = (float)exp2(-150 + 280 * (double)mp_rng_uniform(&rng)) * ((i & 1) ? -1.0f : 1.0f);
        if (i % 9 == 0) x[i] = fp_decode(&FP_FP16, mp_rng_u32(&rng) & 0xffff); /* exact fp16 values, edges included */
        if (i % 17 == 0) x[i] = 0.0f;
    }
    const fp_format *formats[] = {&FP_FP32, &FP_TF32, &FP_FP16, &FP_BF16, &FP_E4M3, &FP_E5M2};
    const float scales[] = {1.0f, 0x1p-10f};
    for (size_t k = 0; k < sizeof formats / sizeof formats[0]; k++)
        for (int s = 0; s < 2; s++) {
            const fp_format *f = formats[k];
            fp_range_counts want = {0}, got = {0};
            want.count = N;
            for (int i = 0; i < N; i++) {
                float v = x[i] * scales[s];
                if (!isfinite(v)) { want.nonfinite++; continue; }
                if (v == 0) { want.zero++; continue; }
                fp_class c = fp_classify_bits(f, fp_encode(f, v, FP_ROUND_NEAREST_EVEN, 0, 0));
                if (c == FP_CLASS_ZERO) want.flushed++;
                else if (c == FP_CLASS_SUBNORMAL) want.subnormal++;
                else if (c == FP_CLASS_NORMAL) want.normal++;
                else want.overflow++;
            }
            fp_range_count(f, x, N, scales[s], &got);
            LAB06_OBSERVE_COUNTS(&got);
            MPT_CHECK(memcmp(&want, &got, sizeof want) == 0,
                      "%s at scale %g: expected count %llu zero %llu nonfinite %llu normal %llu subnormal %llu flushed "
                      "%llu overflow %llu; got %llu %llu %llu %llu %llu %llu %llu", f->name, (double)scales[s],
                      (unsigned long long)want.count, (unsigned long long)want.zero, (unsigned long long)want.nonfinite,
                      (unsigned long long)want.normal, (unsigned long long)want.subnormal,
                      (unsigned long long)want.flushed, (unsigned long long)want.overflow, (unsigned long long)got.count,
                      (unsigned long long)got.zero, (unsigned long long)got.nonfinite, (unsigned long long)got.normal,
                      (unsigned long long)got.subnormal, (unsigned long long)got.flushed,
                      (unsigned long long)got.overflow);
        }
}

/* Counts add up over calls, and the scale applies before rounding: 1e-8 flushes in fp16, 1e-8 * 2^16 = 6.6e-4 does
 * not; but 1 * 2^16 = 65536 overflows (a loss scale has two edges). */
MPT_TEST(range_count_adds_up_and_scales) {
    const float x[] = {1e-8f, 1.0f, 1e-8f};
    fp_range_counts c = {0};
    fp_range_count(&FP_FP16, x, 3, 1.0f, &c);
    fp_range_count(&FP_FP16, x, 3, 65536.0f, &c);
    LAB06_OBSERVE_COUNTS(&c);
    MPT_CHECK(c.count == 6 && c.flushed == 2 && c.normal == 3 && c.overflow == 1 && c.subnormal == 0,
              "fp16, {1e-8, 1, 1e-8} at scale 1 then 2^16: expected count 6, flushed 2 (1e-8 at scale 1), normal 3, "
              "overflow 1 (65536); got count %llu, flushed %llu, normal %llu, overflow %llu, subnormal %llu\n"
              "      likely mistake: add to the counts (the caller zeroes them), and round x[i] * scale",
              (unsigned long long)c.count, (unsigned long long)c.flushed, (unsigned long long)c.normal,
              (unsigned long long)c.overflow, (unsigned long long)c.subnormal);
}
