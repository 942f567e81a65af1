/* test_lab09_hidden_abd.c: lab 09 hidden tests of parts A (the random bits of stochastic rounding: fresh per step, per
 * tensor, per seed, and repeatable), B (tied embeddings, the weight scan, three bad tensors) and D (Kahan: the
 * compensation stays small, bit-exact against the algorithm transcribed here, NaN is not hidden). */
#include "../../../labs/lab09-numerical-stability/tests/lab09_model.h"
#include "amp/detect.h"
#include "base/rng.h"
#include "optim/compensated.h"
#include "../../../labs/lab09-numerical-stability/tests/lab09_observe.h"

/* ------------------------------------------------------------------ part A: the random bits */

/* Sets every nonzero weight of span i to its bf16 value plus a fraction f of an ulp (f from the grade's seed, away
 * from 1/2): stochastic rounding goes up with probability f, so two independent roundings disagree on a share
 * 2 f (1 - f) of them, and rounding to nearest on none. */
static void between(train_step *ts, int i, const float *base, double f) {
    for (size_t j = 0; j < ts->spans[i].n; j++)
        ts->spans[i].param[j] = base[j] == 0 ? 0 : base[j] + (float)f * (float)fp_ulp(&FP_BF16, base[j]);
}

/* Share of elements where a and b differ (over the nonzero ones of base). */
static double differ(const float *a, const float *b, const float *base, size_t n) {
    size_t d = 0, k = 0;
    for (size_t j = 0; j < n; j++) {
        if (base[j] == 0) continue;
        k++;
        d += a[j] != b[j];
    }
    return k ? (double)d / k : 0;
}

/* The values before a write-back of span i (what between() wrote), for the counts. */
static float *values_between(const train_step *ts, int i, const float *base, double f) {
    float *v = calloc(ts->spans[i].n, sizeof(float));
    for (size_t j = 0; j < ts->spans[i].n; j++)
        v[j] = base[j] == 0 ? 0 : base[j] + (float)f * (float)fp_ulp(&FP_BF16, base[j]);
    return v;
}

/* Records (for the grader) and checks the share of `after` rounded up from `before`. */
static void check_share_up(const float *before, const float *after, size_t n, double f, const char *what) {
    lab09_draws up;
    size_t bad = lab09_count_up(before, after, n, &up);
    MPT_OBSERVE(bad == n);
    lab09_observe_draws(&up);
    MPT_CHECK(bad == n && lab09_draws_fit(&up, 5), "%s: values %.3f ulp above a bf16 number: %.0f of %zu rounded up, "
              "expected about %.0f", what, f, up.count, up.trials, up.expect);
}

/* Records (for the grader) and checks the share where two roundings of `before` disagree. */
static void check_disagree(const float *before, const float *a, const float *b, size_t n, const char *what,
                           const char *mistake) {
    lab09_draws d;
    lab09_count_disagree(before, a, b, n, &d);
    lab09_observe_draws(&d);
    MPT_CHECK(lab09_draws_fit(&d, 5),
              "%s should disagree on about %.1f%% of the weights (independent random bits); they disagree on "
              "%.1f%%\n      likely mistake: %s", what, 100 * d.expect / (double)(d.trials ? d.trials : 1),
              100 * d.count / (double)(d.trials ? d.trials : 1),
              d.count == 0 ? mistake : "the rounding's random bits are not uniform");
}

MPT_TEST(stochastic_rounding_draws_fresh_bits_every_step) {
    model *m = lab09_tiny_gpt2(true);
    train_step ts;
    lab09_amp_step(&ts, m, AMP_RECIPE_BF16_PURE, true, mpt_seed() ^ 7);
    ts.updates = (long)(mpt_seed() % 1000);
    int i = 0; /* wte: the largest tensor */
    size_t n = ts.spans[i].n;
    const double f = lab09_seeded_fraction(2);
    float *base = calloc(n, sizeof(float)), *first = calloc(n, sizeof(float)), *again = calloc(n, sizeof(float));
    memcpy(base, ts.spans[i].param, n * sizeof(float));
    float *before = values_between(&ts, i, base, f);
    between(&ts, i, base, f);
    lab09_write_working_weights(&ts);
    memcpy(first, ts.spans[i].param, n * sizeof(float));
    check_share_up(before, first, n, f, "step 1 of 2");
    ts.updates++; /* the next step: the same values to round */
    between(&ts, i, base, f);
    lab09_write_working_weights(&ts);
    check_disagree(before, first, ts.spans[i].param, n, "the same values rounded at two consecutive steps",
                   "the random bits do not change from step to step: derive them from s->updates (and the tensor)");
    ts.updates--; /* the first step again: the same bits, the same result (a resumed run repeats itself) */
    between(&ts, i, base, f);
    lab09_write_working_weights(&ts);
    memcpy(again, ts.spans[i].param, n * sizeof(float));
    double same = differ(first, again, base, n);
    MPT_OBSERVE(same == 0);
    MPT_CHECK(same == 0,
              "rounding the same values at the same step twice gave different results: the bits must be a function "
              "of (rounding_seed, step, tensor), not of a clock or a global generator");
    free(before);
    free(base);
    free(first);
    free(again);
    train_step_free(&ts);
    model_free(m);
}

MPT_TEST(stochastic_rounding_differs_between_tensors) {
    model *m = lab09_tiny_gpt2(true);
    train_step ts;
    lab09_amp_step(&ts, m, AMP_RECIPE_BF16_PURE, true, mpt_seed() ^ 7);
    ts.updates = (long)(mpt_seed() % 1000);
    int a = -1, b = -1, n;
    const model_tensor *t = model_tensors(m, &n);
    for (int k = 0; k < n; k++) {
        if (strcmp(t[k].name, "h.0.fcw") == 0) a = k;
        if (strcmp(t[k].name, "h.1.fcw") == 0) b = k;
    }
    MPT_REQUIRE(a >= 0 && b >= 0 && ts.spans[a].n == ts.spans[b].n, "two fc weights of the same size");
    size_t len = ts.spans[a].n;
    const double f = lab09_seeded_fraction(3);
    float *base = calloc(len, sizeof(float));
    memcpy(base, ts.spans[a].param, len * sizeof(float));
    float *before = values_between(&ts, a, base, f);
    between(&ts, a, base, f);
    between(&ts, b, base, f); /* the same values in both tensors */
    lab09_write_working_weights(&ts);
    check_share_up(before, ts.spans[b].param, len, f, "the second tensor");
    check_disagree(before, ts.spans[a].param, ts.spans[b].param, len,
                   "two tensors holding the same values, rounded in the same step,",
                   "mix the tensor index into the bits, or every tensor rounds the same way and the errors of equal "
                   "tensors add up");
    free(before);
    free(base);
    train_step_free(&ts);
    model_free(m);
}

MPT_TEST(stochastic_rounding_follows_the_seed) {
    model *m1 = lab09_tiny_gpt2(true), *m2 = lab09_tiny_gpt2(true), *m3 = lab09_tiny_gpt2(true);
    train_step t1, t2, t3;
    const uint64_t seed = mpt_seed() >> 1; /* and seed + 1: neighbouring seeds must round independently too */
    lab09_amp_step(&t1, m1, AMP_RECIPE_BF16_PURE, true, seed);
    lab09_amp_step(&t2, m2, AMP_RECIPE_BF16_PURE, true, seed);
    lab09_amp_step(&t3, m3, AMP_RECIPE_BF16_PURE, true, seed + 1);
    size_t n = t1.spans[0].n;
    const double f = lab09_seeded_fraction(4);
    float *base = calloc(n, sizeof(float));
    memcpy(base, t1.spans[0].param, n * sizeof(float));
    float *before = values_between(&t1, 0, base, f);
    train_step *all[3] = {&t1, &t2, &t3};
    for (int k = 0; k < 3; k++) {
        all[k]->updates = 5;
        between(all[k], 0, base, f);
        lab09_write_working_weights(all[k]);
    }
    check_share_up(before, t1.spans[0].param, n, f, "the first run");
    double same = differ(t1.spans[0].param, t2.spans[0].param, base, n);
    MPT_OBSERVE(same == 0);
    MPT_CHECK(same == 0,
              "two runs with the same seed must round identically (a rerun or a resume repeats the run bit for bit)");
    check_disagree(before, t1.spans[0].param, t3.spans[0].param, n, "runs with neighbouring seeds",
                   "use s->rounding_seed");
    free(before);
    free(base);
    train_step_free(&t1);
    train_step_free(&t2);
    train_step_free(&t3);
    model_free(m1);
    model_free(m2);
    model_free(m3);
}

/* fp16-o2 with the stochastic flag set: fp16 working weights are rounded to nearest (round_values has no
 * stochastic fp16 path), and the master is copied first whatever the flag says. */
MPT_TEST(master_write_back_ignores_the_bf16_flag_for_fp16) {
    model *m = lab09_tiny_gpt2(false);
    train_step ts;
    lab09_amp_step(&ts, m, AMP_RECIPE_FP16_O2, true, 3);
    size_t n = model_num_params(m);
    for (size_t i = 0; i < n; i++) ts.master[i] += 0.37f * (float)fp_ulp(&FP_FP16, ts.master[i]) * (i % 3 ? 1 : -3);
    lab09_write_working_weights(&ts);
    size_t wrong = 0;
    MPT_OBSERVE_NEAR_F32(model_params(m), model_params(m), (long)n, 0, 0);
    for (size_t i = 0; i < n; i++) wrong += model_params(m)[i] != lab09_round(&FP_FP16, ts.master[i]);
    MPT_CHECK(wrong == 0, "%zu of %zu working weights are not the fp16 rounding (nearest) of the master", wrong, n);
    train_step_free(&ts);
    model_free(m);
}

/* ------------------------------------------------------------------ part B */

MPT_TEST(detect_tied_embedding_first_and_the_next_named) {
    model *m = lab09_tiny_gpt2(true);
    const model_tensor *wte = model_tensor_find(m, "wte"), *qkv = model_tensor_find(m, "h.0.qkvw");
    memset(model_grads(m), 0, model_num_params(m) * sizeof(float));
    model_grads(m)[wte->offset + 11] = NAN;
    model_grads(m)[qkv->offset + 2] = -INFINITY;
    amp_nonfinite nf;
    MPT_REQUIRE(amp_find_nonfinite(m, AMP_SCAN_GRADS, &nf), "two bad tensors");
    MPT_CHECK(strcmp(nf.first.name, "wte") == 0 && nf.first_is_tied,
              "tied wte is first in backward order (it is the LM head): expected first wte, flagged tied; got %s%s",
              nf.first.name, nf.first_is_tied ? " (tied)" : "");
    MPT_CHECK(strcmp(nf.second.name, "h.0.qkvw") == 0 && nf.second.neginf == 1 && nf.second.first_offset == 2,
              "second: expected h.0.qkvw with one -inf at element 2; got %s (%llu -inf, first at %llu)",
              nf.second.name, (unsigned long long)nf.second.neginf, (unsigned long long)nf.second.first_offset);
    model_free(m);
}

/* Weights are scanned in registry (forward) order: the first bad weight is the earliest in the forward pass. */
MPT_TEST(detect_weights_in_forward_order) {
    model *m = lab09_tiny_gpt2(true);
    const model_tensor *fc0 = model_tensor_find(m, "h.0.fcw"), *att1 = model_tensor_find(m, "h.1.attprojw");
    model_params(m)[att1->offset + 1] = INFINITY;
    model_params(m)[fc0->offset + 9] = NAN;
    amp_nonfinite nf;
    MPT_REQUIRE(amp_find_nonfinite(m, AMP_SCAN_PARAMS, &nf), "two bad weights");
    MPT_CHECK(strcmp(nf.first.name, "h.0.fcw") == 0 && strcmp(nf.second.name, "h.1.attprojw") == 0,
              "weights: expected first h.0.fcw, second h.1.attprojw; got %s, %s", nf.first.name, nf.second.name);
    int n;
    const model_tensor *t = model_tensors(m, &n);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) total += t[i].size;
    MPT_CHECK_EQ_U64(total, nf.count, "count: every weight of every tensor");
    MPT_CHECK(nf.what == AMP_SCAN_PARAMS, "out->what: the scan of weights");
    model_free(m);
}

/* Three bad tensors: second is the second found, not the last; the totals add all three. */
MPT_TEST(detect_second_is_the_next_not_the_last) {
    model_tensor reg[4] = {
        {.name = "w0", .ndim = 1, .shape = {3}, .offset = 0, .size = 3, .layer = 0},
        {.name = "w1", .ndim = 1, .shape = {3}, .offset = 3, .size = 3, .layer = 1},
        {.name = "w2", .ndim = 1, .shape = {3}, .offset = 6, .size = 3, .layer = 2},
        {.name = "w3", .ndim = 1, .shape = {3}, .offset = 9, .size = 3, .layer = 3},
    };
    float buf[12] = {0, NAN, 0, 0, 0, 0, INFINITY, -INFINITY, 0, 0, 0, NAN};
    int order[4] = {3, 2, 1, 0};
    amp_nonfinite nf = {.what = AMP_SCAN_GRADS};
    MPT_REQUIRE(amp_scan_nonfinite(reg, order, 4, buf, &nf), "three bad tensors");
    MPT_CHECK(strcmp(nf.first.name, "w3") == 0 && strcmp(nf.second.name, "w2") == 0 && nf.nbad == 3,
              "order w3 w2 w1 w0, bad w3 w2 w0: expected first w3, second w2, nbad 3; got %s, %s, %d", nf.first.name,
              nf.second.name, nf.nbad);
    MPT_CHECK(nf.nan == 2 && nf.posinf == 1 && nf.neginf == 1 && nf.count == 12,
              "totals: expected 2 NaN, 1 +inf, 1 -inf, 12 values; got %llu, %llu, %llu, %llu",
              (unsigned long long)nf.nan, (unsigned long long)nf.posinf, (unsigned long long)nf.neginf,
              (unsigned long long)nf.count);
    MPT_CHECK(nf.what == AMP_SCAN_GRADS, "out->what must be kept");
}

/* ------------------------------------------------------------------ part D */

/* The algorithm transcribed with the generic format engine: every result rounded to bf16. */
static float r16(float x) { return fp_decode(&FP_BF16, fp_encode(&FP_BF16, x, FP_ROUND_NEAREST_EVEN, 0, 0)); }

MPT_TEST(kahan_matches_the_algorithm_bit_for_bit) {
    enum { N = 2048, STEPS = 200 };
    float *w = malloc(N * sizeof(float)), *c = calloc(N, sizeof(float)), *u = malloc(N * sizeof(float));
    float *rw = malloc(N * sizeof(float)), *rc = calloc(N, sizeof(float));
    mp_rng rng;
    mp_rng_seed(&rng, 77);
    for (int i = 0; i < N; i++) w[i] = rw[i] = r16(0.05f * mp_rng_normal(&rng) + (i % 5 == 0 ? 1.0f : 0.0f));
    int first_bad = -1, bad_step = -1;
    for (int t = 0; t < STEPS && first_bad < 0; t++) {
        for (int i = 0; i < N; i++) u[i] = 1e-4f * mp_rng_normal(&rng) * (i % 7 == 0 ? 30 : 1);
        optim_kahan_bf16_update(w, c, u, N);
        for (int i = 0; i < N; i++) {
            float y = r16(r16(u[i]) - rc[i]), s = r16(rw[i] + y);
            rc[i] = r16(r16(s - rw[i]) - y);
            rw[i] = s;
            if (first_bad < 0 && (fp_float_bits(w[i]) != fp_float_bits(rw[i]) || fp_float_bits(c[i]) != fp_float_bits(rc[i]))) {
                first_bad = i;
                bad_step = t;
            }
        }
    }
    MPT_CHECK(first_bad < 0,
              "step %d, element %d: expected w %.9g, c %.9g; got w %.9g, c %.9g\n      the algorithm: u = bf16(update); "
              "y = bf16(u - c); s = bf16(w + y); c = bf16(bf16(s - w) - y); w = s", bad_step, first_bad,
              first_bad >= 0 ? (double)rw[first_bad] : 0, first_bad >= 0 ? (double)rc[first_bad] : 0,
              first_bad >= 0 ? (double)w[first_bad] : 0, first_bad >= 0 ? (double)c[first_bad] : 0);
    free(w);
    free(c);
    free(u);
    free(rw);
    free(rc);
}

MPT_TEST(kahan_compensation_stays_under_an_ulp) {
    enum { N = 1024, STEPS = 1000 };
    float *w = malloc(N * sizeof(float)), *c = calloc(N, sizeof(float)), *u = malloc(N * sizeof(float));
    mp_rng rng;
    mp_rng_seed(&rng, 5);
    for (int i = 0; i < N; i++) w[i] = optim_round_bf16(0.02f * mp_rng_normal(&rng) + 0.5f);
    float worst = 0;
    for (int t = 0; t < STEPS; t++) {
        for (int i = 0; i < N; i++) u[i] = 2e-4f * mp_rng_uniform(&rng); /* all positive: a steady drift */
        optim_kahan_bf16_update(w, c, u, N);
        for (int i = 0; i < N; i++) worst = fmaxf(worst, fabsf(c[i]) / (float)fp_ulp(&FP_BF16, w[i]));
    }
    MPT_CHECK(worst <= 1.0f, "|c| should stay within one ulp of w; the largest was %.3g ulps", (double)worst);
    free(w);
    free(c);
    free(u);
}

MPT_TEST(kahan_does_not_hide_a_nan) {
    float w[3] = {0.25f, 1.0f, -2.0f}, c[3] = {0}, u[3] = {NAN, INFINITY, 1e-3f};
    optim_kahan_bf16_update(w, c, u, 3);
    MPT_CHECK(isnan(w[0]), "a NaN update must make the weight NaN (got %g): a hidden NaN is a silent corruption",
              (double)w[0]);
    MPT_CHECK(!isfinite(w[1]), "an inf update must make the weight non-finite (got %g)", (double)w[1]);
    MPT_CHECK(w[2] == -2.0f && isfinite(c[2]), "element 2 (finite) is unaffected by its neighbours: w %g, c %g",
              (double)w[2], (double)c[2]);
}
