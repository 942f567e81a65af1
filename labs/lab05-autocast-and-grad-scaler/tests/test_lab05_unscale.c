/* test_lab05_unscale.c: lab 05 visible tests, part A: the fused unscale and inf/NaN check (amp_scaler_unscale in
 * core/amp/scaler.c): the gradients come back divided by the scale, and any +inf, -inf or NaN is reported. */
#include "lab05_util.h"
#include "base/rng.h"

#include <float.h>
#include <math.h>

/* A scale that is not a power of two: the product with inv_scale = (float)(1.0 / S) and the quotient g / S differ in
 * the last bit for some g. PyTorch multiplies; so must the unscale. */
MPT_TEST(unscale_multiplies_by_the_rounded_reciprocal) {
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    s.scale = 3.0f;
    const float inv = (float)(1.0 / 3.0);
    enum { N = 256 };
    float g[N], want[N];
    int differs = 0;
    for (int i = 0; i < N; i++) {
        g[i] = 1.0f + (float)i / 128.0f;
        want[i] = g[i] * inv;
        differs += want[i] != g[i] / 3.0f;
    }
    MPT_REQUIRE(differs > 0, "the test's values must tell g * (1/S) from g / S");
    clip_span span = {g, N};
    amp_scaler_unscale(&s, &span, 1);
    for (int i = 0; i < N; i++) MPT_OBSERVE(float_bits_of(g[i]));
    for (int i = 0; i < N; i++)
        if (g[i] != want[i]) {
            mpt_fail(__FILE__, __LINE__, "scale 3, gradient %d\n      expected: %.9g (g * (float)(1.0 / 3))\n"
                     "      got:      %.9g\n      likely mistake: %s", i, (double)want[i], (double)g[i],
                     g[i] == (1.0f + (float)i / 128.0f) / 3.0f
                         ? "dividing by the scale (g / S): multiply by inv_scale = (float)(1.0 / (double)S), once "
                           "rounded, as PyTorch does (the handout's part A)"
                         : "inv_scale must be 1/S computed in double and rounded once to float");
            return;
        }
}

/* A scaled gradient drawn from this grade's seed: a multiple of 1/64 in [-64, 64) times 2^16. */
static float lab05_scaled_gradient(mp_rng *rng) {
    return ldexpf((float)((int)(mp_rng_u32(rng) % 8192) - 4096), 10);
}

/* Gradients as backward leaves them under scale S = 2^16: the true gradients times S. Unscaling by a power of
 * two is exact, so every value must come back bit for bit. */
MPT_TEST(unscale_divides_by_the_scale) {
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    MPT_REQUIRE(amp_scaler_scale(&s) == 65536.0f, "the PyTorch scaler starts at 2^16 (amp_scaler_init)");
    enum { N = 64 };
    float truth[N], g[N];
    for (int i = 0; i < N; i++) {
        truth[i] = ldexpf((float)((i * 37) % 23 + 1) / 24.0f, -(i % 30)) * (i % 3 ? 1.0f : -1.0f);
        g[i] = truth[i] * 65536.0f;
    }
    g[7] = 0.0f, truth[7] = 0.0f;
    clip_span span = {g, N};
    bool found = amp_scaler_unscale(&s, &span, 1);
    MPT_CHECK(!found, "all values are finite, so found_inf must be false; got true\n"
                      "      likely mistake: testing isnan/isinf on the wrong thing, or not resetting the flag");
    int wrong = 0;
    for (int i = 0; i < N; i++) MPT_OBSERVE(float_bits_of(g[i]));
    for (int i = 0; i < N && wrong < 3; i++)
        if (g[i] != truth[i]) {
            wrong++;
            mpt_fail(__FILE__, __LINE__,
                     "gradient %d after unscaling\n      expected: %.9g (the scaled value %.9g / 65536)\n"
                     "      got:      %.9g\n      likely mistake: %s",
                     i, (double)truth[i], (double)truth[i] * 65536, (double)g[i],
                     g[i] == truth[i] * 65536.0f ? "the gradients were not changed: multiply each by inv_scale"
                     : g[i] == truth[i] * 65536.0f * 65536.0f ? "multiplied by the scale instead of by 1/scale"
                                                               : "use inv_scale = (float)(1.0 / (double)scale)");
        }
}

/* +inf, -inf and NaN each make found_inf true; the largest finite float does not. */
MPT_TEST(unscale_finds_inf_and_nan) {
    static const struct {
        float bad;
        const char *name;
    } cases[] = {{INFINITY, "+inf"}, {-INFINITY, "-inf"}, {NAN, "NaN"}};
    mp_rng rng;
    mp_rng_seed(&rng, 0x50f1 ^ mpt_seed());
    for (int c = 0; c < 3; c++) {
        amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
        float g[6];
        for (int i = 0; i < 6; i++) g[i] = lab05_scaled_gradient(&rng);
        float last = g[5];
        int where = (int)(mp_rng_u32(&rng) % 5); /* the bad value sits anywhere before the last element */
        g[where] = cases[c].bad;
        clip_span span = {g, 6};
        bool found = amp_scaler_unscale(&s, &span, 1);
        MPT_OBSERVE(found);
        for (int i = 0; i < 6; i++) MPT_OBSERVE(float_bits_of(g[i]));
        MPT_CHECK(found, "a gradient holding %s (element %d): found_inf should be true, got false\n"
                         "      likely mistake: %s", cases[c].name, where,
                  c == 2 ? "NaN compares false with everything: x > FLT_MAX is false for NaN; use isfinite(x)"
                         : c == 1 ? "checking only x == INFINITY misses -inf; use isfinite(x)"
                                  : "the check must look at every value");
        MPT_CHECK(g[5] == last / 65536.0f, "values after the %s must still be unscaled (one full pass; PyTorch "
                  "unscales every gradient even when it finds an inf): element 5 expected %g, got %g",
                  cases[c].name, (double)last / 65536.0, (double)g[5]);
        amp_scaler_update(&s, true);
    }
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    float g[6] = {FLT_MAX, -FLT_MAX, 0x1p-149f, -0.0f, lab05_scaled_gradient(&rng), lab05_scaled_gradient(&rng)};
    clip_span span = {g, 6};
    bool found = amp_scaler_unscale(&s, &span, 1);
    MPT_OBSERVE(found);
    for (int i = 0; i < 6; i++) MPT_OBSERVE(float_bits_of(g[i]));
    MPT_CHECK(!found,
              "FLT_MAX, -FLT_MAX, the smallest subnormal and -0 are all finite: found_inf should be false\n"
              "      likely mistake: comparing against a threshold instead of testing isfinite");
}

/* The check and the unscale cover every span, not just the first. */
MPT_TEST(unscale_checks_every_span) {
    mp_rng rng;
    mp_rng_seed(&rng, 0x5e5a ^ mpt_seed());
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    float a[3] = {65536.0f, 131072.0f, -65536.0f}, b[2] = {32768.0f, 0.0f}, c[4] = {65536.0f, NAN, 1.0f, 2.0f};
    a[2] = lab05_scaled_gradient(&rng), b[1] = lab05_scaled_gradient(&rng), c[3] = lab05_scaled_gradient(&rng);
    clip_span spans[3] = {{a, 3}, {b, 2}, {c, 4}};
    bool found = amp_scaler_unscale(&s, spans, 3);
    MPT_OBSERVE(found);
    for (int i = 0; i < 3; i++) MPT_OBSERVE(float_bits_of(a[i]));
    for (int i = 0; i < 2; i++) MPT_OBSERVE(float_bits_of(b[i]));
    for (int i = 0; i < 4; i++) MPT_OBSERVE(float_bits_of(c[i]));
    if (!found) {
        /* Which mistake: a NaN alone in one span tells a NaN test that misses from a loop that misses spans. */
        amp_scaler one = lab05_scaler(AMP_SCALER_PYTORCH);
        float lone[1] = {NAN};
        clip_span only = {lone, 1};
        bool nan_seen = amp_scaler_unscale(&one, &only, 1);
        MPT_CHECK(found, "the NaN is in the third span: found_inf should be true\n      likely mistake: %s",
                  nan_seen ? "looping over the first span only, or overwriting found_inf per span "
                             "(found_inf = bad instead of found_inf |= bad)"
                           : "the test misses NaN even alone in one span: isinf() is false for NaN, and every "
                             "comparison with NaN is false (x > max too); isfinite() catches both");
    }
    MPT_CHECK(a[1] == 2.0f && b[0] == 0.5f && c[0] == 1.0f,
              "every span is unscaled: expected a[1] = 2, b[0] = 0.5, c[0] = 1; got %g, %g, %g", (double)a[1],
              (double)b[0], (double)c[0]);
    amp_scaler_update(&s, true);
    amp_scaler t = lab05_scaler(AMP_SCALER_PYTORCH);
    float d[2] = {NAN, lab05_scaled_gradient(&rng)}, e[2] = {65536.0f, lab05_scaled_gradient(&rng)};
    float e1 = e[1];
    clip_span spans2[2] = {{d, 2}, {e, 2}};
    found = amp_scaler_unscale(&t, spans2, 2);
    MPT_OBSERVE(found);
    MPT_OBSERVE(float_bits_of(d[1]));
    MPT_OBSERVE(float_bits_of(e[1]));
    MPT_CHECK(found, "a NaN in the first span followed by a clean span: found_inf "
              "should stay true (found_inf |= bad, not found_inf = bad)");
    MPT_CHECK(e[1] == e1 / 65536.0f, "the span after the bad one is unscaled too: expected %g, got %g",
              (double)e1 / 65536.0, (double)e[1]);
}
