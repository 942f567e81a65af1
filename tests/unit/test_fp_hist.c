/* test_fp_hist.c: Criterion tests of exponent histograms (fp/hist.c): binades, zeros, non-finite, and per-format
 * subnormal/underflow/overflow counts on crafted tensors, with and without a loss-scale factor. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "fp/format.h"
#include "fp/half.h"
#include "fp/hist.h"

Test(fp_hist, binade_of_values) {
    cr_expect_eq(fp_hist_binade(1.0f), 0);
    cr_expect_eq(fp_hist_binade(1.5f), 0);
    cr_expect_eq(fp_hist_binade(-2.0f), 1);
    cr_expect_eq(fp_hist_binade(0.1f), -4);
    cr_expect_eq(fp_hist_binade(65504.0f), 15);
    cr_expect_eq(fp_hist_binade(FLT_MAX), 127);
    cr_expect_eq(fp_hist_binade(0x1p-126f), -126);
    cr_expect_eq(fp_hist_binade(fp_float_from_bits(1)), -149, "smallest fp32 subnormal");
    cr_expect_eq(fp_hist_binade(fp_float_from_bits(0x007fffff)), -127, "largest fp32 subnormal");
    cr_expect_eq(fp_hist_binade(0.0f), FP_HIST_MIN_BINADE - 1);
    cr_expect_eq(fp_hist_binade(NAN), FP_HIST_MIN_BINADE - 1);
    for (int e = -149; e <= 127; e++) {
        float p = ldexpf(1.0f, e);
        cr_assert_eq(fp_hist_binade(p), e, "2^%d", e);
        if (e > -149) cr_assert_eq(fp_hist_binade(nextafterf(p, INFINITY)), e, "just above 2^%d", e);
        if (e > -149) cr_assert_eq(fp_hist_binade(nextafterf(p, 0)), e - 1, "just below 2^%d", e);
    }
}

/* A crafted tensor whose every count is known by hand. */
Test(fp_hist, crafted_tensor_counts) {
    const float x[] = {
        0.0f, -0.0f,                 /* zeros */
        INFINITY, -INFINITY, NAN,    /* non-finite */
        1.0f, -1.5f,                 /* binade 0 */
        0.1f,                        /* binade -4 */
        65504.0f,                    /* binade 15: fp16 max, no overflow */
        65520.0f,                    /* binade 15: fp16 overflow (rounds to inf), e4m3/e5m2 overflow too */
        1e-8f,                       /* binade -27: fp16 underflow (< 2^-25), e4m3/e5m2 underflow */
        0x1p-24f,                    /* binade -24: fp16 subnormal; e5m2 underflow (min sub 2^-16) */
        0x1p-25f,                    /* binade -25: fp16 tie -> 0, underflow */
        0x1.8p-25f,                  /* binade -25: fp16 rounds up to 2^-24: subnormal */
        0x1p-130f,                   /* binade -130: fp32 subnormal; bf16/tf32 subnormal */
        fp_float_from_bits(1),       /* binade -149: bf16 underflow (2^-149 < 2^-134), tf32 underflow */
        1e30f,                       /* binade 99: overflow in fp16, e4m3, e5m2 */
    };
    size_t n = sizeof x / sizeof x[0];
    fp_hist h;
    fp_hist_clear(&h);
    fp_hist_add(&h, x, n, 1.0f);
    cr_assert_eq(h.count, n);
    cr_expect_eq(h.zeros, 2);
    cr_expect_eq(h.infs, 2);
    cr_expect_eq(h.nans, 1);
    cr_expect_eq(fp_hist_nonfinite(&h), 3);
    cr_expect_eq(fp_hist_bin(&h, 0), 2);
    cr_expect_eq(fp_hist_bin(&h, -4), 1);
    cr_expect_eq(fp_hist_bin(&h, 15), 2);
    cr_expect_eq(fp_hist_bin(&h, -27), 1);
    cr_expect_eq(fp_hist_bin(&h, -24), 1);
    cr_expect_eq(fp_hist_bin(&h, -25), 2);
    cr_expect_eq(fp_hist_bin(&h, -130), 1);
    cr_expect_eq(fp_hist_bin(&h, -149), 1);
    cr_expect_eq(fp_hist_bin(&h, 99), 1);
    uint64_t binned = 0;
    for (int b = FP_HIST_MIN_BINADE; b <= FP_HIST_MAX_BINADE; b++) binned += fp_hist_bin(&h, b);
    cr_expect_eq(binned, n - 5, "every finite nonzero value is in exactly one bin");
    int lo, hi;
    cr_assert(fp_hist_range(&h, &lo, &hi));
    cr_expect_eq(lo, -149);
    cr_expect_eq(hi, 99);

    const fp_hist_losses *fp16 = &h.target[FP_HIST_FP16];
    cr_expect_eq(fp16->underflow, 4, "fp16 underflow: 1e-8, 2^-25 (tie to 0), 2^-130, 2^-149; got %llu",
                 (unsigned long long)fp16->underflow);
    cr_expect_eq(fp16->subnormal, 2, "fp16 subnormal: 2^-24 and 1.5*2^-25; got %llu", (unsigned long long)fp16->subnormal);
    cr_expect_eq(fp16->overflow, 2, "fp16 overflow: 65520 and 1e30; got %llu", (unsigned long long)fp16->overflow);

    const fp_hist_losses *bf16 = &h.target[FP_HIST_BF16];
    cr_expect_eq(bf16->underflow, 1, "bf16 underflow: only 2^-149");
    cr_expect_eq(bf16->subnormal, 1, "bf16 subnormal: 2^-130");
    cr_expect_eq(bf16->overflow, 0, "bf16 reaches 3.4e38");

    const fp_hist_losses *tf32 = &h.target[FP_HIST_TF32];
    cr_expect_eq(tf32->underflow, 1, "tf32 underflow: 2^-149 (< half of 2^-136)");
    cr_expect_eq(tf32->subnormal, 1);
    cr_expect_eq(tf32->overflow, 0);

    const fp_hist_losses *e4m3 = &h.target[FP_HIST_E4M3];
    cr_expect_eq(e4m3->overflow, 3, "e4m3 overflow: 65504, 65520, 1e30");
    cr_expect_eq(e4m3->underflow, 6, "e4m3 underflow: everything below 2^-10; got %llu",
                 (unsigned long long)e4m3->underflow);
    cr_expect_eq(e4m3->subnormal, 0);

    const fp_hist_losses *e5m2 = &h.target[FP_HIST_E5M2];
    cr_expect_eq(e5m2->overflow, 3, "e5m2 overflow: 65504, 65520 (both past 61440), 1e30");
    cr_expect_eq(e5m2->underflow, 6);
    cr_expect_eq(e5m2->subnormal, 0);
}

/* The counts agree with classifying each value through the format engine. */
Test(fp_hist, counts_agree_with_the_engine_on_random_values) {
    enum { N = 200000 };
    float *x = malloc(N * sizeof(float));
    mp_rng rng;
    mp_rng_seed(&rng, 8);
    for (int i = 0; i < N; i++) {
        /* log-uniform magnitudes from 2^-150 to 2^130, some exactly at format boundaries */
        x[i] = (float)exp2(-150 + 280 * (double)mp_rng_uniform(&rng)) * ((i & 1) ? -1.0f : 1.0f);
        if (i % 7 == 0) x[i] = fp_decode(&FP_FP16, mp_rng_u32(&rng) & 0xffff);
        if (i % 11 == 0) x[i] = fp_decode(&FP_E4M3, mp_rng_u32(&rng) & 0xff);
    }
    fp_hist h;
    fp_hist_clear(&h);
    fp_hist_add(&h, x, N, 1.0f);
    for (int t = 0; t < FP_HIST_NTARGETS; t++) {
        const fp_format *f = fp_hist_target_format((fp_hist_target)t);
        uint64_t sub = 0, under = 0, over = 0;
        for (int i = 0; i < N; i++) {
            if (!isfinite(x[i]) || x[i] == 0) continue;
            fp_class c = fp_classify_bits(f, fp_encode(f, x[i], FP_ROUND_NEAREST_EVEN, 0, 0));
            under += c == FP_CLASS_ZERO;
            sub += c == FP_CLASS_SUBNORMAL;
            over += c == FP_CLASS_INF || c == FP_CLASS_NAN;
        }
        cr_expect_eq(h.target[t].underflow, under, "%s underflow", f->name);
        cr_expect_eq(h.target[t].subnormal, sub, "%s subnormal", f->name);
        cr_expect_eq(h.target[t].overflow, over, "%s overflow", f->name);
    }
    free(x);
}

/* scale = 2^k shifts every binade by k: the histogram of (x, 2^k) is the histogram of the scaled copy. */
Test(fp_hist, scale_shifts_binades_like_a_loss_scaler) {
    enum { N = 50000 };
    float *x = malloc(N * sizeof(float)), *scaled = malloc(N * sizeof(float));
    mp_rng rng;
    mp_rng_seed(&rng, 9);
    for (int i = 0; i < N; i++) x[i] = mp_rng_normal(&rng) * 1e-6f; /* gradient-like: many fp16 underflows */
    fp_hist plain, by_arg, by_copy;
    fp_hist_clear(&plain);
    fp_hist_clear(&by_arg);
    fp_hist_clear(&by_copy);
    fp_hist_add(&plain, x, N, 1.0f);
    fp_hist_add(&by_arg, x, N, 1024.0f);
    for (int i = 0; i < N; i++) scaled[i] = x[i] * 1024.0f;
    fp_hist_add(&by_copy, scaled, N, 1.0f);
    cr_assert(memcmp(&by_arg, &by_copy, sizeof by_arg) == 0, "scale argument == scaling a copy");
    for (int b = FP_HIST_MIN_BINADE; b + 10 <= FP_HIST_MAX_BINADE; b++)
        cr_assert_eq(fp_hist_bin(&plain, b), fp_hist_bin(&by_arg, b + 10), "binade %d moves to %d", b, b + 10);
    cr_expect_gt(plain.target[FP_HIST_FP16].subnormal + plain.target[FP_HIST_FP16].underflow,
                 by_arg.target[FP_HIST_FP16].subnormal + by_arg.target[FP_HIST_FP16].underflow,
                 "loss scaling moves values out of fp16's subnormal range");
    /* a scale too large overflows fp32 itself: those count as non-finite */
    fp_hist huge;
    fp_hist_clear(&huge);
    float big[2] = {1e30f, -1e-30f};
    fp_hist_add(&huge, big, 2, 1e20f);
    cr_expect_eq(huge.infs, 1);
    cr_expect_eq(huge.target[FP_HIST_FP16].overflow, 0, "the inf is non-finite, not an fp16 overflow");
    cr_expect_eq(fp_hist_bin(&huge, -34), 1, "-1e-30 * 1e20 = -1e-10 is in binade -34");
    free(x);
    free(scaled);
}

Test(fp_hist, merge_adds_up) {
    float a[3] = {1.0f, 0.0f, NAN}, b[2] = {1e-9f, 70000.0f};
    fp_hist ha, hb, both;
    fp_hist_clear(&ha);
    fp_hist_clear(&hb);
    fp_hist_clear(&both);
    fp_hist_add(&ha, a, 3, 1.0f);
    fp_hist_add(&hb, b, 2, 1.0f);
    fp_hist_add(&both, a, 3, 1.0f);
    fp_hist_add(&both, b, 2, 1.0f);
    fp_hist_merge(&ha, &hb);
    cr_assert(memcmp(&ha, &both, sizeof ha) == 0);
    cr_expect_str_eq(fp_hist_target_name(FP_HIST_E4M3), "e4m3");
    cr_expect_eq(fp_hist_target_format(FP_HIST_TF32), &FP_TF32);
}
