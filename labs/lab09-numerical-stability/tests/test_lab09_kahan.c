/* test_lab09_kahan.c: lab 09 visible tests of part D, the Kahan-compensated bf16 update (optim_kahan_bf16_update in
 * core/optim/compensated.c), against an fp32 reference that sums the same updates. */
#include "base/rng.h"
#include "mptest.h"
#include "optim/compensated.h"
#include "lab09_observe.h"

#include <math.h>
#include <stdlib.h>

/* A gain of 1.0 (bf16 ulp 2^-7 = 0.0078) and 2000 updates of 1e-4, each under half an ulp (0.0039). Rounded to
 * nearest the gain never moves; Kahan's compensation collects the updates and releases them an ulp at a time, so
 * the weight follows the fp32 sum 1.2 within one ulp. (Not exactly: c has only bf16's 8 bits too, so u - c is
 * rounded at every step, here by up to 7% of u; the error stays within the ulp of w.) */
MPT_TEST(kahan_keeps_updates_under_half_an_ulp) {
    float w = 1.0f, c = 0.0f, plain = 1.0f, u = 1e-4f;
    double exact = 1.0;
    for (int t = 0; t < 2000; t++) {
        optim_kahan_bf16_update(&w, &c, &u, 1);
        optim_bf16_nearest_update(&plain, &u, 1);
        exact += optim_round_bf16(u); /* the update as bf16 holds it: 1.00016594e-4 */
    }
    MPT_CHECK(plain == 1.0f, "rounded to nearest, 1.0 + 1e-4 is 1.0 every time: expected 1, got %.9g", (double)plain);
    MPT_CHECK(fabs(w - exact) <= 0x1p-7,
              "after 2000 updates of 1e-4 to a bf16 weight of 1.0\n      expected: within one bf16 ulp (0.0078) of %.6f\n"
              "      got:      w %.9g, c %.9g\n      likely mistake: %s",
              exact, (double)w, (double)c,
              w == 1.0f ? "the weight never moved: y = u - c; s = w + y; c = (s - w) - y; w = s, each rounded to bf16"
                        : "check the signs: c is what the rounding added beyond y, and y subtracts it");
    MPT_CHECK(fabsf(c) <= 0x1p-7f,
              "the compensation holds less than one ulp of w (0.0078): got c %.9g\n      likely mistake: c = (s - w) - y "
              "with the s and w of this step (before w is replaced), each result rounded to bf16", (double)c);
}

/* One step by hand. w = 1, c = 0, u = 0.3 ulp = 0.3 * 2^-7: y = u, s = bf16(1 + y) = 1 (lost), c = (1 - 1) - y = -y.
 * Next step with the same u: y = u - c = 2u = 0.6 ulp; s = 1 + 2^-7 (one ulp up); c = 2^-7 - 0.6 ulp = 0.4 ulp. */
MPT_TEST(kahan_one_step_by_hand) {
    float w = 1.0f, c = 0.0f, u = optim_round_bf16(0.3f * 0x1p-7f);
    optim_kahan_bf16_update(&w, &c, &u, 1);
    MPT_CHECK(w == 1.0f && c == -u,
              "step 1: w = 1, c = 0, u = %.9g (0.3 ulp)\n      expected: w 1 (the update is lost), c %.9g (= -u: the lost "
              "part, with the sign that y = u - c adds it back)\n      got:      w %.9g, c %.9g",
              (double)u, (double)-u, (double)w, (double)c);
    optim_kahan_bf16_update(&w, &c, &u, 1);
    float want_c = optim_round_bf16(0x1p-7f - optim_round_bf16(u - -u));
    MPT_CHECK(w == 1.0f + 0x1p-7f && c == want_c,
              "step 2: y = u - c = 0.6 ulp\n      expected: w %.9g (one ulp up), c %.9g (the 0.4 ulp added too much)\n"
              "      got:      w %.9g, c %.9g", (double)(1.0f + 0x1p-7f), (double)want_c, (double)w, (double)c);
    /* A representable update leaves no error: c stays 0. */
    float w2 = 0.5f, c2 = 0.0f, u2 = 0.25f;
    optim_kahan_bf16_update(&w2, &c2, &u2, 1);
    MPT_CHECK(w2 == 0.75f && c2 == 0.0f, "0.5 + 0.25 is exact: expected w 0.75, c 0; got w %.9g, c %.9g", (double)w2,
              (double)c2);
}

/* 4096 weights ~ N(0, 0.02), 500 steps of Adam-sized updates ~ N(0, 3e-5) (most under half an ulp of their
 * weight). fp32 sums them exactly enough; Kahan in bf16 must end within one bf16 ulp of fp32 for every weight,
 * while rounding to nearest drifts far off. */
MPT_TEST(kahan_tracks_the_fp32_update) {
    enum { N = 4096, STEPS = 500 };
    float *w = malloc(N * sizeof(float)), *c = calloc(N, sizeof(float)), *plain = malloc(N * sizeof(float));
    float *w32 = malloc(N * sizeof(float)), *u = malloc(N * sizeof(float));
    mp_rng rng;
    mp_rng_seed(&rng, 2020);
    for (int i = 0; i < N; i++) w[i] = plain[i] = w32[i] = optim_round_bf16(0.02f * mp_rng_normal(&rng));
    for (int t = 0; t < STEPS; t++) {
        for (int i = 0; i < N; i++) {
            u[i] = optim_round_bf16(3e-5f * mp_rng_normal(&rng) + 1e-5f); /* a small drift, as a gradient has */
            w32[i] += u[i];
        }
        optim_kahan_bf16_update(w, c, u, N);
        optim_bf16_nearest_update(plain, u, N);
    }
    int worst = 0, outside = 0;
    double err_kahan = 0, err_plain = 0, worst_ulps = 0;
    for (int i = 0; i < N; i++) {
        /* one bf16 ulp of the weight, or of 2^-8 for weights that ended near 0 (their own ulp is far smaller than
         * one update, which c rounds relative to its own size) */
        double ulp = ldexp(1.0, ilogb(fmax(fabs(w32[i]), 0x1p-8)) - 7);
        double ek = fabs((double)w[i] - w32[i]) / ulp;
        if (ek > worst_ulps) {
            worst_ulps = ek;
            worst = i;
        }
        outside += ek > 1.0;
        err_kahan += ((double)w[i] - w32[i]) * ((double)w[i] - w32[i]);
        err_plain += ((double)plain[i] - w32[i]) * ((double)plain[i] - w32[i]);
    }
    MPT_CHECK(outside == 0,
              "%d of %d weights end more than one bf16 ulp (of max(|w|, 2^-8)) from the fp32 sum; worst element %d: fp32 %.9g, kahan %.9g "
              "(%.2f ulps)\n      likely mistake: round every operation to bf16 in the order y, s, c, w (the "
              "compensation must use the rounded s)", outside, N, worst, (double)w32[worst], (double)w[worst], worst_ulps);
    MPT_CHECK(sqrt(err_kahan) < 0.1 * sqrt(err_plain),
              "RMS distance from fp32: kahan %.3g, round to nearest %.3g: Kahan should be at least 10x closer",
              sqrt(err_kahan / N), sqrt(err_plain / N));
    free(w);
    free(c);
    free(plain);
    free(w32);
    free(u);
}
