/* test_lab09_master.c: lab 09 visible tests of part A, the write-back of an update into low-precision working weights
 * (write_working_weights in core/train/step.c): fp16-o2's master copy, bf16-pure's rounding to nearest and
 * stochastic rounding. Each test writes what the optimizer would have written, calls the write-back, and compares
 * every weight with a reference rounding from fp/format.h. */
#include "lab09_model.h"
#include "lab09_observe.h"

/* Finds the first weight where got != expected (bit patterns); reports it with its tensor and the likely mistake. */
#define same_bits(ts, got, expected, what, mistake) same_bits_at(__LINE__, (ts), (got), (expected), (what), (mistake))
static bool same_bits_at(int line, const train_step *ts, const float *got, const float *expected, const char *what,
                         const char *mistake) {
    size_t at = 0, total = 0;
    for (int i = 0; i < ts->nspans; i++) total += ts->spans[i].n;
    mpt_observe_near_f32(__FILE__, line, got, expected, (long)total, 0, 0); /* what the grader compares */
    for (int i = 0; i < ts->nspans; i++)
        for (size_t j = 0; j < ts->spans[i].n; j++, at++)
            if (fp_float_bits(got[at]) != fp_float_bits(expected[at])) {
                mpt_fail(__FILE__, line,
                         "%s: tensor %d (%s) element %zu\n      expected: %.9g\n      got:      %.9g\n"
                         "      likely mistake: %s",
                         what, i, model_tensors(ts->m, &(int){0})[i].name, j, (double)expected[at], (double)got[at],
                         mistake);
                return false;
            }
    return true;
}

/* fp16-o2: the optimizer updated the fp32 master; the working weights (what forward reads) must become exactly
 * the fp16 rounding of the master, and the master must keep every bit the optimizer wrote. The updates range from
 * a tenth of an fp16 ulp to several ulps, so a write-back that skips the rounding, rounds the master, or forgets to
 * copy is caught. */
MPT_TEST(master_working_weights_are_the_rounded_master) {
    model *m = lab09_tiny_gpt2(true);
    train_step ts;
    lab09_amp_step(&ts, m, AMP_RECIPE_FP16_O2, false, 1);
    MPT_REQUIRE(ts.master != NULL, "fp16-o2 should have an fp32 master copy (train_step_set_amp makes it)");
    size_t n = model_num_params(m);
    static const float fractions[] = {0.1f, -0.4f, 0.6f, -1.5f, 7.3f, 0.25f, -0.05f};
    float *master = ts.master, *want_master = calloc(n, sizeof(float)), *want_working = calloc(n, sizeof(float));
    float *working_before = calloc(n, sizeof(float));
    memcpy(working_before, model_params(m), n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        float ulp = (float)fp_ulp(&FP_FP16, master[i]);
        master[i] += fractions[i % 7] * ulp; /* the optimizer's step, in fp32 */
        want_master[i] = master[i];
        want_working[i] = lab09_round(&FP_FP16, master[i]);
    }
    lab09_write_working_weights(&ts);
    if (same_bits(&ts, master, want_master, "the master copy after the write-back",
                  "never round the master: it is the fp32 copy that keeps the small updates; round the working "
                  "copy (s->spans[i].param) after copying the master into it"))
        same_bits(&ts, model_params(m), want_working, "the working weights: fp16 rounding of the master",
                  memcmp(model_params(m), working_before, n * sizeof(float)) == 0
                      ? "the working weights did not change: copy s->master_spans[i].param into s->spans[i].param"
                      : "copy the master into the working weights, then round them (round_values with the recipe's "
                        "low format) - every span, every element");
    free(want_master);
    free(want_working);
    free(working_before);
    train_step_free(&ts);
    model_free(m);
}

/* 1000 steps of an update of 1/8 ulp. The master adds them up; its fp16 rounding moves about 125 ulps. A weight
 * updated in fp16 itself (rounded where it is stored) would not move at all: the stall the experiment shows. */
MPT_TEST(master_copy_accumulates_updates_below_half_an_ulp) {
    model *m = lab09_tiny_gpt2(true);
    train_step ts;
    lab09_amp_step(&ts, m, AMP_RECIPE_FP16_O2, false, 1);
    MPT_REQUIRE(ts.master != NULL, "fp16-o2 should have an fp32 master copy");
    size_t n = model_num_params(m);
    float *start = calloc(n, sizeof(float)), *want = calloc(n, sizeof(float)), *step = calloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) {
        start[i] = model_params(m)[i]; /* the working weight: fp16 */
        want[i] = ts.master[i];        /* the master: fp32 */
        step[i] = (i % 2 ? -1.0f : 1.0f) * (float)fp_ulp(&FP_FP16, start[i]) / 8; /* the same each step */
    }
    for (int t = 0; t < 1000; t++) {
        for (size_t i = 0; i < n; i++) {
            ts.master[i] += step[i];
            want[i] += step[i];
        }
        lab09_write_working_weights(&ts);
        ts.updates++;
    }
    MPT_OBSERVE_NEAR_F32(model_params(m), model_params(m), (long)n, 0, 0); /* what the grader compares */
    MPT_OBSERVE_NEAR_F32(ts.master, ts.master, (long)n, 0, 0);
    size_t moved = 0, wrong = 0, first_wrong = n;
    for (size_t i = 0; i < n; i++) {
        float w = model_params(m)[i];
        moved += fabsf(w - start[i]) >= 100 * (float)fp_ulp(&FP_FP16, start[i]) / 2;
        if (fp_float_bits(w) != fp_float_bits(lab09_round(&FP_FP16, want[i])) ||
            fp_float_bits(ts.master[i]) != fp_float_bits(want[i])) {
            if (!wrong++) first_wrong = i;
        }
    }
    MPT_CHECK(wrong == 0,
              "after 1000 updates of 1/8 ulp each: %zu of %zu weights differ from the fp16 rounding of the summed "
              "master (first at element %zu: master %.9g, working %.9g, expected master %.9g)\n"
              "      likely mistake: the master must stay fp32 and unrounded; the working copy is remade from it each step",
              wrong, n, first_wrong, (double)ts.master[first_wrong < n ? first_wrong : 0],
              (double)model_params(m)[first_wrong < n ? first_wrong : 0], (double)want[first_wrong < n ? first_wrong : 0]);
    MPT_CHECK(moved > n * 9 / 10,
              "only %zu of %zu working weights moved by 50 fp16 ulps or more after 1000 updates of 1/8 ulp "
              "(expected: nearly all, about 125 ulps each)", moved, n);
    free(start);
    free(want);
    free(step);
    train_step_free(&ts);
    model_free(m);
}

/* bf16-pure, round to nearest: the optimizer updated the bf16 weights in place (in fp32); the write-back rounds
 * them to the nearest bf16 value. Updates under half an ulp vanish, the rest land on the nearest value. */
MPT_TEST(bf16_pure_round_to_nearest_drops_updates_under_half_an_ulp) {
    model *m = lab09_tiny_gpt2(true);
    train_step ts;
    lab09_amp_step(&ts, m, AMP_RECIPE_BF16_PURE, false, 1);
    size_t n = model_num_params(m);
    float *w = model_params(m), *before = calloc(n, sizeof(float)), *want = calloc(n, sizeof(float));
    static const float fractions[] = {0.2f, -0.49f, 0.51f, -0.9f, 2.3f, 0.45f};
    size_t small = 0;
    for (size_t i = 0; i < n; i++) {
        before[i] = w[i];
        float ulp = (float)fp_ulp(&FP_BF16, w[i]);
        w[i] += fractions[i % 6] * ulp;
        want[i] = lab09_round(&FP_BF16, w[i]);
        small += fabsf(fractions[i % 6]) < 0.5f;
    }
    lab09_write_working_weights(&ts);
    if (same_bits(&ts, w, want, "bf16-pure, nearest: the weights after the write-back",
                  "round every weight to the nearest bf16 value (round_values with stochastic = "
                  "s->stochastic_rounding, which is false here)")) {
        size_t kept = 0;
        for (size_t i = 0; i < n; i++) kept += w[i] == before[i];
        MPT_CHECK(kept >= small * 9 / 10, "only %zu weights kept their value; about %zu updates were under half an ulp",
                  kept, small);
    }
    free(before);
    free(want);
    train_step_free(&ts);
    model_free(m);
}

/* bf16-pure, stochastic rounding: a value a fraction f of an ulp above a bf16 number rounds up with probability f
 * (f drawn from the grade's seed, as is the rounding seed). Over the ~7,700 nonzero weights the share that rounded up
 * must be f within 5 standard deviations, and every result must be one of the two neighbours. Then 100 steps of a
 * 0.1-ulp update: on average each weight moves 10 ulps, as in fp32, and every weight moves at some point. */
MPT_TEST(bf16_pure_stochastic_rounding_is_unbiased) {
    model *m = lab09_tiny_gpt2(true);
    train_step ts;
    lab09_amp_step(&ts, m, AMP_RECIPE_BF16_PURE, true, mpt_seed() ^ 42);
    size_t n = model_num_params(m);
    float *w = model_params(m), *start = calloc(n, sizeof(float));
    const double f = lab09_seeded_fraction(1);
    for (size_t i = 0; i < n; i++) {
        /* the biases stay at 0 (their ulp is a subnormal's); the rest go f ulp up, between two neighbours */
        if (w[i] != 0) w[i] += (float)f * (float)fp_ulp(&FP_BF16, w[i]);
        start[i] = w[i];
    }
    lab09_write_working_weights(&ts);
    lab09_draws up;
    size_t bad = lab09_count_up(start, w, n, &up);
    if (bad < n) {
        float down, upv;
        lab09_neighbours(&FP_BF16, start[bad], &down, &upv);
        MPT_OBSERVE(bad);
        mpt_fail(__FILE__, __LINE__,
                 "element %zu: %.9g before the write-back became %.9g, which is neither bf16 neighbour (%.9g, "
                 "%.9g)\n      likely mistake: the write-back must round to bf16 (stochastically here)",
                 bad, (double)start[bad], (double)w[bad], (double)down, (double)upv);
        goto done;
    }
    lab09_observe_draws(&up); /* what the grader compares: the share rounded up, near f */
    MPT_CHECK(lab09_draws_fit(&up, 5),
              "values %.3f ulp above a bf16 number: %.0f of %zu rounded up\n      expected: about %.0f (%.1f%%, within "
              "%.0f)\n      likely mistake: %s", f, up.count, up.trials, up.expect, 100 * f, 5 * sqrt(up.variance),
              up.count == 0 || up.count == (double)up.trials
                  ? "rounding to nearest: pass s->stochastic_rounding to round_values"
                  : "the rounding must use fresh, uniform random bits per element");

    /* 100 steps of +0.1 ulp: the expected total move is the sum of the updates, with variance sum p(1-p) ulp^2. */
    double drift = 0, variance = 0, asked = 0;
    for (size_t i = 0; i < n; i++) start[i] = w[i];
    for (int t = 0; t < 100; t++) {
        ts.updates++;
        for (size_t i = 0; i < n; i++) {
            if (start[i] == 0) continue;
            float ulp = (float)fp_ulp(&FP_BF16, w[i]);
            w[i] += 0.1f * ulp;
            drift -= 0.1 * ulp; /* subtract what was asked for; add what happened below */
            asked += 0.1 * ulp;
            variance += 0.09 * (double)ulp * ulp;
        }
        lab09_write_working_weights(&ts);
    }
    size_t stuck = 0, counted = 0;
    for (size_t i = 0; i < n; i++)
        if (start[i] != 0) {
            drift += (double)w[i] - start[i];
            stuck += w[i] == start[i];
            counted++;
        }
    /* For the grader: what the weights moved over what the updates asked for (1 within the rounding's noise). */
    MPT_OBSERVE_NEAR(1 + drift / asked, 0, 6 * sqrt(2 * variance) / asked + 1e-9);
    /* Each step a weight goes up with probability 0.1, independently: staying put 100 times is 0.9^100 = 3e-5. */
    MPT_CHECK(stuck <= counted / 100,
              "100 updates of +0.1 ulp: %zu of %zu weights never moved (expected almost none)\n      likely mistake: the "
              "same random bits at every step round the same weights up every time and the others never: derive "
              "them from s->updates as well", stuck, counted);
    MPT_CHECK(fabs(drift) < 5 * sqrt(variance),
              "100 updates of +0.1 ulp each: the weights moved %.4g in total more than the updates asked for "
              "(expected 0 within %.3g)\n      likely mistake: the random bits must differ from step to step: derive "
              "them from s->updates and the tensor index", drift, 5 * sqrt(variance));
done:
    free(start);
    train_step_free(&ts);
    model_free(m);
}
