/* test_lab08_lso.c: lab 08 visible tests, part C: Keras's LossScaleOptimizer (amp_lso_apply_gradients in
 * core/amp/loss_scale_optimizer.c): step only on finite gradients, update the scale once per call. */
#include "lab08_util.h"

#include <math.h>

enum { N1 = 5, N2 = 3, N = N1 + N2 };

/* Two spans of weights (one decayed, one not) with their gradients: (gradient, weight) pairs as Keras's
 * apply_gradients(zip(grads, vars)) takes them, and the gradient spans get_unscaled_gradients works on. */
typedef struct {
    float p[N], g[N];
    optim_span pairs[2];
    clip_span grads[2];
} two_spans;

static void two_spans_init(two_spans *t) {
    for (int i = 0; i < N; i++) {
        t->p[i] = 0.25f * (float)(i + 1) - 1.0f;
        t->g[i] = 0.01f * (float)((i * 7) % 5 - 2) + 0.003f;
    }
    t->pairs[0] = (optim_span){t->p, t->g, N1, true};
    t->pairs[1] = (optim_span){t->p + N1, t->g + N1, N2, false};
    t->grads[0] = (clip_span){t->g, N1};
    t->grads[1] = (clip_span){t->g + N1, N2};
}

/* SGD with weight decay 0.1 on the first span, by hand: p -= lr * (g + wd * p). */
static void sgd_by_hand(float *p, const float *g, float lr) {
    for (int i = 0; i < N; i++) p[i] -= lr * (g[i] + (i < N1 ? 0.1f : 0.0f) * p[i]);
}

/* An inf, a NaN, then a -inf at the last value of each span, in the gradients: nothing is touched and the step is
 * skipped. The scaler hears of it: its update ran once per call (iter) and counted every skip. */
MPT_TEST(lso_skips_non_finite_steps) {
    optim_config sgd = lab08_sgd(0.1);
    amp_scaler_config scale = lab08_static_scale(1024);
    two_spans t;
    two_spans_init(&t);
    amp_loss_scale_optimizer opt;
    amp_lso_init(&opt, &sgd, N, &scale);
    float before[N];
    memcpy(before, t.p, sizeof before);
    enum { NBAD = 4 };
    static const int at[NBAD] = {6, 0, N1 - 1, N - 1}; /* the last two: each span's last value */
    static const float bad[NBAD] = {INFINITY, NAN, -INFINITY, INFINITY};
    for (int k = 0; k < NBAD; k++) {
        float keep = t.g[at[k]];
        t.g[at[k]] = bad[k];
        amp_update u = amp_lso_apply_gradients(&opt, t.pairs, 2, 0.5);
        t.g[at[k]] = keep;
        MPT_CHECK(u.skipped, "gradient %d = %g: expected skipped=yes, got no\n"
                  "      likely mistake: check every value of every span with isfinite (inf and NaN), up to and "
                  "including each span's last", at[k],
                  (double)bad[k]);
        MPT_CHECK(u.status == AMP_SCALER_SKIPPED_FIXED, "a skip at a static scale: expected status skipped_fixed, got %s"
                  "\n      likely mistake: return amp_scaler_update(&o->scaler, !finite)",
                  amp_scaler_status_name(u.status));
    }
    MPT_CHECK(memcmp(before, t.p, sizeof before) == 0, "a skipped step changed the weights\n"
              "      likely mistake: call optim_step only when every gradient is finite");
    MPT_CHECK_EQ_I64(0, opt.state.step, "the inner optimizer's step count after four skipped steps");
    MPT_CHECK_EQ_I64(NBAD, opt.scaler.iter, "scaler updates after four apply_gradients calls (one update per call)");
    MPT_CHECK_EQ_I64(NBAD, opt.scaler.skipped, "skipped steps the scaler counted");

    /* A clean step now: SGD's step, exactly. */
    float want[N];
    memcpy(want, t.p, sizeof want);
    sgd_by_hand(want, t.g, 0.5f);
    amp_update u = amp_lso_apply_gradients(&opt, t.pairs, 2, 0.5);
    MPT_CHECK(!u.skipped && u.status == AMP_SCALER_OK, "finite gradients: expected a step (status ok), got skipped=%s "
              "status %s", u.skipped ? "yes" : "no", amp_scaler_status_name(u.status));
    for (int i = 0; i < N; i++)
        MPT_CHECK_NEAR(want[i], t.p[i], 1e-6, 0, "weight after the clean step (SGD, lr 0.5, decay 0.1 on span 0)");
    MPT_CHECK_EQ_I64(1, opt.state.step, "the inner optimizer's step count after one clean step");
    amp_lso_free(&opt);
}

/* Keras's custom-loop order, five times: the scaled loss, the scaled gradients (here: the true ones times S, as
 * backward would give them), the unscale, apply. Every step is the inner optimizer's, on the true gradients. */
MPT_TEST(lso_clean_steps_are_the_inner_optimizers) {
    optim_config sgd = lab08_sgd(0.1);
    amp_scaler_config scale = lab08_static_scale(4096);
    two_spans t;
    two_spans_init(&t);
    amp_loss_scale_optimizer opt;
    amp_lso_init(&opt, &sgd, N, &scale);
    float want[N], truth[N];
    memcpy(want, t.p, sizeof want);
    memcpy(truth, t.g, sizeof truth);
    MPT_CHECK(amp_lso_get_scaled_loss(&opt, 2.5f) == 10240.0f, "get_scaled_loss(2.5) at scale 4096: expected 10240, "
              "got %g", (double)amp_lso_get_scaled_loss(&opt, 2.5f));
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < N; i++) t.g[i] = truth[i] * 4096.0f; /* what backward of S * loss gives */
        amp_lso_get_unscaled_gradients(&opt, t.grads, 2);
        amp_update u = amp_lso_apply_gradients(&opt, t.pairs, 2, 0.25);
        sgd_by_hand(want, truth, 0.25f);
        MPT_CHECK(!u.skipped, "clean step %d was skipped", k + 1);
        for (int i = 0; i < N; i++)
            MPT_CHECK_NEAR(want[i], t.p[i], 1e-6, 0, "weight after a clean step: the inner SGD on the true gradients");
    }
    MPT_CHECK_EQ_I64(5, opt.state.step, "inner optimizer steps after 5 clean steps");
    MPT_CHECK_EQ_I64(5, opt.scaler.iter, "scaler updates after 5 calls");
    MPT_CHECK_EQ_I64(0, opt.scaler.skipped, "skipped steps");
    amp_lso_free(&opt);
}

/* A pattern of clean (C) and overflowing (O) steps: exactly the O steps are skipped, the scaler is told once per
 * call, and the skips in a row are counted as the scaler counts them. */
MPT_TEST(lso_updates_the_scale_once_per_apply) {
    static const char pattern[] = "CCOCOOCOOOC";
    optim_config sgd = lab08_sgd(0);
    amp_scaler_config scale = lab08_static_scale(8);
    two_spans t;
    two_spans_init(&t);
    amp_loss_scale_optimizer opt;
    amp_lso_init(&opt, &sgd, N, &scale);
    long taken = 0, skipped = 0;
    for (int k = 0; pattern[k]; k++) {
        bool overflow = pattern[k] == 'O';
        float keep = t.g[3];
        if (overflow) t.g[3] = -INFINITY;
        amp_update u = amp_lso_apply_gradients(&opt, t.pairs, 2, 0.01);
        t.g[3] = keep;
        taken += !overflow;
        skipped += overflow;
        MPT_CHECK(u.skipped == overflow, "step %d of \"%s\": expected skipped=%s, got %s", k + 1, pattern,
                  overflow ? "yes" : "no", u.skipped ? "yes" : "no");
        MPT_CHECK(opt.scaler.iter == k + 1, "after call %d the scaler was updated %ld times\n"
                  "      likely mistake: amp_scaler_update once per apply_gradients, skipped or not", k + 1,
                  opt.scaler.iter);
    }
    MPT_CHECK_EQ_I64(taken, opt.state.step, "inner optimizer steps over the pattern");
    MPT_CHECK_EQ_I64(skipped, opt.scaler.skipped, "skips the scaler counted");
    MPT_CHECK_EQ_I64(0, opt.scaler.consecutive_skipped, "skips in a row after the last (clean) step");
    amp_lso_free(&opt);
}
