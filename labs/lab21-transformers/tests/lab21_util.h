/* lab21_util.h: helpers for the lab 21 tests: seeded inputs, the LLaMA block's ops written out again in double (the
 * references the tests compare with), finite-difference checks, and array comparisons that record for the grader. */
#ifndef LAB21_UTIL_H
#define LAB21_UTIL_H

#include "base/rng.h"
#include "model/model.h"
#include "mptest.h"
#include "ops/crossentropy.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"
#include "optim/decay.h"
#include "optim/schedule.h"
#include "train/eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* n values ~ N(mean, sd), from this grade's seed and a salt (so every array of a test differs). */
static inline void lab21_fill(float *x, long n, float mean, float sd, uint64_t salt) {
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed() * 0x9e3779b97f4a7c15ULL + salt);
    for (long i = 0; i < n; i++) x[i] = mean + sd * mp_rng_normal(&rng);
}

static inline float *lab21_alloc(long n) {
    float *p = calloc((size_t)n, sizeof(float));
    MPT_REQUIRE(p != NULL, "out of memory for %ld floats", n);
    return p;
}

/* got (n) against want (n, double) element by element: |got - want| <= abs_tol + rel_tol * |want|. Records the
 * array for the grader and reports the worst element with the likely mistake. */
#define CHECK_ARRAY(got, want, n, rel, abs, what, mistake) \
    lab21_check_array(__FILE__, __LINE__, (got), (want), (n), (rel), (abs), (what), (mistake))
static inline bool lab21_check_array(const char *file, int line, const float *got, const double *want, long n,
                                     double rel, double abs_tol, const char *what, const char *mistake) {
    mpt_observe_near_f64(file, line, got, want, n, rel, abs_tol);
    long worst = -1, bad = 0;
    double worst_ratio = 0;
    for (long i = 0; i < n; i++) {
        double tol = abs_tol + rel * fabs(want[i]), err = fabs((double)got[i] - want[i]);
        double ratio = isfinite(got[i]) ? err / tol : INFINITY;
        if (ratio > 1) bad++;
        if (ratio > worst_ratio || worst < 0) worst_ratio = ratio, worst = i;
    }
    if (bad == 0) return true;
    mpt_fail(file, line,
             "%s: %ld of %ld values off\n      expected: [%ld] = %.9g (within %.1e + %.1e relative)\n"
             "      got:      [%ld] = %.9g\n      likely mistake: %s",
             what, bad, n, worst, want[worst], abs_tol, rel, worst, (double)got[worst], mistake);
    return false;
}

/* The loss as a function of the inputs a finite-difference check perturbs (read through ctx). */
typedef double (*lab21_loss_fn)(void *ctx);

/* A finite-difference check of `analytic` (n, the gradient of loss with respect to x): the central difference
 * (loss(x + h) - loss(x - h)) / (x+h - (x-h) as stored), h = 1e-2 max(1, |x|), against the analytic gradient within
 * 5e-4 + 1e-2 relative (the kernels run in fp32: the loss, a sum of hundreds of terms, carries rounding noise that
 * the difference divides by 2h; the double reference is the precise check). Written
 * out here rather than taken from ops/gradcheck.h, whose central difference is lab 02's region: a lab 21 grade must
 * not depend on lab 02's code. Records the gradient for the grader and fails with the worst element. */
#define CHECK_GRADIENT(name, loss, ctx, x, analytic, n, mistake) \
    lab21_check_gradient(__FILE__, __LINE__, (name), (loss), (ctx), (x), (analytic), (n), (mistake))
static inline void lab21_check_gradient(const char *file, int line, const char *name, lab21_loss_fn loss, void *ctx,
                                        float *x, const float *analytic, long n, const char *mistake) {
    long failed = 0, worst = -1;
    double worst_ratio = -1, worst_numeric = 0;
    for (long i = 0; i < n; i++) {
        float keep = x[i];
        double h = 1e-2 * (fabs(keep) > 1 ? fabs(keep) : 1);
        float up = (float)(keep + h), down = (float)(keep - h);
        x[i] = up;
        double lu = loss(ctx);
        x[i] = down;
        double ld = loss(ctx);
        x[i] = keep;
        double numeric = (lu - ld) / ((double)up - (double)down);
        double ratio = fabs(analytic[i] - numeric) / (5e-4 + 1e-2 * fabs(numeric));
        if (ratio > 1) failed++;
        if (ratio > worst_ratio) worst_ratio = ratio, worst = i, worst_numeric = numeric;
    }
    loss(ctx); /* leave the outputs of the unperturbed inputs */
    /* for the grader: the gradient at an element drawn from the seed (not the worst one: which is worst depends on
     * the code under test) */
    mpt_observe_near(file, line, analytic[mp_hash32(mpt_seed(), (uint64_t)n) % (uint64_t)n], 1e-3, 1e-5);
    if (failed == 0) return;
    mpt_fail(file, line,
             "%s: %ld of %ld gradient elements disagree with finite differences\n"
             "      expected: d loss / dx[%ld] = %.6g (central difference)\n      got:      %.6g\n"
             "      likely mistake: %s",
             name, failed, n, worst, worst_numeric, (double)analytic[worst], mistake);
}

/* sum_i w_i * y_i in double: the scalar a gradient check differentiates (its gradient at y is w). */
static inline double lab21_dot(const float *w, const float *y, long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s += (double)w[i] * y[i];
    return s;
}

/* ---------------------------------------------------------------- the references, in double */

/* RMSNorm backward of one (N, C) batch, from the chain rule written out: with r = (mean(x^2) + eps)^(-1/2),
 * y_j = w_j x_j r, dr/dx_k = -r^3 x_k / C, so dx_k = r w_k dy_k - (r^3 x_k / C) sum_j w_j dy_j x_j. */
static inline void lab21_ref_rmsnorm_backward(double *dx, double *dw, const float *dy, const float *x, const float *w,
                                              int N, int C, float eps) {
    for (int j = 0; j < C; j++) dw[j] = 0;
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C, *g = dy + (size_t)n * C;
        double sq = 0, dot = 0;
        for (int j = 0; j < C; j++) sq += (double)xr[j] * xr[j];
        double r = 1.0 / sqrt(sq / C + eps);
        for (int j = 0; j < C; j++) dot += (double)w[j] * g[j] * xr[j];
        for (int k = 0; k < C; k++) {
            dx[(size_t)n * C + k] = r * w[k] * g[k] - r * r * r * xr[k] / C * dot;
            dw[k] += (double)g[k] * xr[k] * r;
        }
    }
}

/* RoPE of a packed (B, T, (NH + 2 KVH) HS) qkv, in double: q and k heads rotated by +angle (sign 1) or -angle
 * (sign -1), v left alone; the angle of pair i at position t is t * theta^(-2i/HS). */
static inline void lab21_ref_rope(double *out, const float *qkv, int B, int T, int NH, int KVH, int HS, double theta,
                                  int sign) {
    int row = (NH + 2 * KVH) * HS, half = HS / 2;
    for (long i = 0; i < (long)B * T * row; i++) out[i] = qkv[i];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH + KVH; h++) {
                size_t at = ((size_t)b * T + t) * row + (size_t)h * HS;
                for (int i = 0; i < half; i++) {
                    double a = sign * t * pow(theta, -2.0 * i / HS), c = cos(a), s = sin(a);
                    double x1 = qkv[at + i], x2 = qkv[at + i + half];
                    out[at + i] = x1 * c - x2 * s;
                    out[at + i + half] = x1 * s + x2 * c;
                }
            }
}

/* SwiGLU backward in double: out = silu(g) u, silu(g) = g / (1 + e^-g), silu'(g) = sigma(g) (1 + g (1 - sigma(g))). */
static inline void lab21_ref_swiglu_backward(double *dinp, const float *dout, const float *inp, int N, int F) {
    for (int n = 0; n < N; n++)
        for (int f = 0; f < F; f++) {
            double g = inp[(size_t)n * 2 * F + f], u = inp[(size_t)n * 2 * F + F + f], dy = dout[(size_t)n * F + f];
            double sg = 1.0 / (1.0 + exp(-g));
            dinp[(size_t)n * 2 * F + f] = dy * u * sg * (1.0 + g * (1.0 - sg));
            dinp[(size_t)n * 2 * F + F + f] = dy * g * sg;
        }
}

/* warmup + cosine written out again (schedule.h): linear warmup from start to peak over W steps, then cosine from
 * peak to end over T - W steps, end after T. */
static inline double lab21_ref_lr(long t, long W, long T, double start, double peak, double end) {
    if (t < 0) t = 0;
    if (t < W) return start + (peak - start) * (double)t / (double)W;
    double q = (double)(t - W) / (double)(T - W > 1 ? T - W : 1);
    if (q > 1) q = 1;
    return end + (peak - end) * (1 + cos(M_PI * q)) / 2;
}

/* lr_warmup_cosine against the reference, recorded for the grader. */
#define CHECK_LR(t, W, T, start, peak, end, what) \
    lab21_check_lr(__FILE__, __LINE__, (t), (W), (T), (start), (peak), (end), (what))
static inline void lab21_check_lr(const char *file, int line, long t, long W, long T, double start, double peak,
                                  double end, const char *what) {
    double want = lab21_ref_lr(t, W, T, start, peak, end), got = lr_warmup_cosine(t, W, T, start, peak, end);
    mpt_observe_near(file, line, got, 1e-12, 1e-15);
    if (fabs(got - want) <= 1e-12 * fabs(want) + 1e-15) return;
    mpt_fail(file, line,
             "lr_warmup_cosine(t %ld, W %ld, T %ld, start %g, peak %g, end %g): %s\n      expected: %.12g\n"
             "      got:      %.12g\n      likely mistake: %s",
             t, W, T, start, peak, end, what, want, got,
             t < W ? "warmup is linear from start (t = 0) toward peak: start + (peak - start) * t / W, peak first at t = W"
             : t >= T ? "after T the rate stays at end: clamp q = (t - W) / (T - W) to 1"
                      : "cosine: end + (peak - end) * (1 + cos(pi * q)) / 2 with q = (t - W) / (T - W), 0 at the peak");
}

/* ---------------------------------------------------------------- loss functions for the gradient checks */

typedef struct {
    float *x, *w, *out, *rstd, *dout;
    int N, C;
    float eps;
} lab21_rms_ctx;

static inline double lab21_rms_loss(void *p) {
    lab21_rms_ctx *k = p;
    rmsnorm_forward(k->out, k->rstd, k->x, k->w, k->N, k->C, k->eps);
    return lab21_dot(k->dout, k->out, (long)k->N * k->C);
}

typedef struct {
    float *qkv, *work, *w;
    int B, T, NH, KVH, HS;
    float theta;
} lab21_rope_ctx;

static inline double lab21_rope_loss(void *p) {
    lab21_rope_ctx *k = p;
    long n = (long)k->B * k->T * (k->NH + 2 * k->KVH) * k->HS;
    memcpy(k->work, k->qkv, (size_t)n * sizeof(float));
    rope_forward(k->work, k->B, k->T, k->NH, k->KVH, k->HS, k->theta);
    return lab21_dot(k->w, k->work, n);
}

typedef struct {
    float *inp, *out, *w;
    int N, F;
} lab21_swiglu_ctx;

static inline double lab21_swiglu_loss(void *p) {
    lab21_swiglu_ctx *k = p;
    swiglu_forward(k->out, k->inp, k->N, k->F);
    return lab21_dot(k->w, k->out, (long)k->N * k->F);
}

/* ---------------------------------------------------------------- the checks the visible and hidden tests share */

/* RMSNorm backward on (N, C) rows of mean `mean`: finite differences and the double reference, dinp and dweight. */
static inline void lab21_check_rmsnorm(int N, int C, float mean, uint64_t salt) {
    long n = (long)N * C;
    lab21_rms_ctx k = {lab21_alloc(n), lab21_alloc(C), lab21_alloc(n), lab21_alloc(N), lab21_alloc(n), N, C, 1e-5f};
    lab21_fill(k.x, n, mean, 1.0f, salt);
    lab21_fill(k.w, C, 1.0f, 0.3f, salt + 1);
    lab21_fill(k.dout, n, 0.0f, 1.0f, salt + 2);
    float *dx = lab21_alloc(n), *dw = lab21_alloc(C);
    rmsnorm_forward(k.out, k.rstd, k.x, k.w, N, C, k.eps);
    for (long i = 0; i < n; i++) dx[i] = 0.25f; /* backward adds: start from something that is not 0 */
    for (int j = 0; j < C; j++) dw[j] = -0.5f;
    rmsnorm_backward(dx, dw, k.dout, k.x, k.w, k.rstd, N, C);
    double *rdx = malloc(sizeof(double) * (size_t)n), *rdw = malloc(sizeof(double) * (size_t)C);
    MPT_REQUIRE(rdx && rdw, "out of memory");
    lab21_ref_rmsnorm_backward(rdx, rdw, k.dout, k.x, k.w, N, C, k.eps);
    for (long i = 0; i < n; i++) rdx[i] += 0.25;
    for (int j = 0; j < C; j++) rdw[j] -= 0.5;
    char what[96];
    snprintf(what, sizeof what, "rmsnorm_backward dinp, N=%d C=%d, rows of mean %g", N, C, (double)mean);
    CHECK_ARRAY(dx, rdx, n, 1e-4, 1e-5, what,
                "dx = rstd * (g - xhat * mean(g * xhat)) with g = weight * dout and xhat = x * rstd, ADDED to dinp; "
                "the mean is over the C channels of the row");
    snprintf(what, sizeof what, "rmsnorm_backward dweight, N=%d C=%d", N, C);
    CHECK_ARRAY(dw, rdw, C, 1e-4, 1e-5, what,
                "dweight[c] += sum over the rows of dout * x * rstd (xhat, not x), ADDED to what dweight holds");
    /* The finite differences see only the gradient, so start from zero. A row of a few channels is close to
     * w * sign(x) with a steep middle of width ~sqrt(eps) that a step of 1e-2 cannot resolve: the double reference
     * above checks those alone. */
    if (C < 8) goto done;
    memset(dx, 0, sizeof(float) * (size_t)n);
    memset(dw, 0, sizeof(float) * (size_t)C);
    rmsnorm_backward(dx, dw, k.dout, k.x, k.w, k.rstd, N, C);
    CHECK_GRADIENT("rmsnorm dinp", lab21_rms_loss, &k, k.x, dx, n,
                   "the term through rstd: every x of a row moves rstd, so each dx_k has -xhat_k * mean(g * xhat)");
    CHECK_GRADIENT("rmsnorm dweight", lab21_rms_loss, &k, k.w, dw, C, "dweight = sum over rows of dout * xhat");
done:
    free(k.x), free(k.w), free(k.out), free(k.rstd), free(k.dout), free(dx), free(dw), free(rdx), free(rdw);
}

/* RoPE forward against the double reference, backward against finite differences and the reference of the
 * inverse rotation, on a (B, T) batch of NH query and KVH key/value heads of HS channels. */
static inline void lab21_check_rope(int B, int T, int NH, int KVH, int HS, float theta, uint64_t salt) {
    long n = (long)B * T * (NH + 2 * KVH) * HS;
    float *x = lab21_alloc(n), *y = lab21_alloc(n), *w = lab21_alloc(n), *work = lab21_alloc(n);
    double *want = malloc(sizeof(double) * (size_t)n);
    MPT_REQUIRE(want != NULL, "out of memory");
    lab21_fill(x, n, 0.0f, 1.0f, salt);
    lab21_fill(w, n, 0.0f, 1.0f, salt + 1);
    memcpy(y, x, sizeof(float) * (size_t)n);
    rope_forward(y, B, T, NH, KVH, HS, theta);
    lab21_ref_rope(want, x, B, T, NH, KVH, HS, theta, 1);
    char what[128];
    snprintf(what, sizeof what, "rope_forward, B=%d T=%d NH=%d KVH=%d HS=%d theta=%g", B, T, NH, KVH, HS, (double)theta);
    CHECK_ARRAY(y, want, n, 1e-5, 2e-5, what,
                "pairs are (i, i + HS/2) of every q and k head (NH + KVH of them; the v heads stay), the angle of "
                "pair i at position t is t * theta^(-2i/HS), and (x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos)");
    memcpy(y, w, sizeof(float) * (size_t)n);
    rope_backward(y, B, T, NH, KVH, HS, theta);
    lab21_ref_rope(want, w, B, T, NH, KVH, HS, theta, -1);
    snprintf(what, sizeof what, "rope_backward, B=%d T=%d NH=%d KVH=%d HS=%d", B, T, NH, KVH, HS);
    CHECK_ARRAY(y, want, n, 1e-5, 2e-5, what,
                "the gradient goes back through the transpose of the rotation, which is the rotation by -angle: "
                "(d1, d2) -> (d1 cos + d2 sin, -d1 sin + d2 cos)");
    if (n <= 4096) { /* finite differences on the small cases: one forward per element and side */
        lab21_rope_ctx k = {x, work, w, B, T, NH, KVH, HS, theta};
        CHECK_GRADIENT("rope dqkv", lab21_rope_loss, &k, x, y, n,
                       "rope_backward must undo the forward's rotation, not repeat it");
    }
    free(x), free(y), free(w), free(work), free(want);
}

/* SwiGLU backward on (N, 2F) rows of gates spread by gate_sd: the double reference and finite differences. */
static inline void lab21_check_swiglu(int N, int F, float gate_sd, uint64_t salt) {
    long nin = (long)N * 2 * F, nout = (long)N * F;
    lab21_swiglu_ctx k = {lab21_alloc(nin), lab21_alloc(nout), lab21_alloc(nout), N, F};
    lab21_fill(k.inp, nin, 0.0f, 1.0f, salt);
    for (int r = 0; r < N; r++) /* the gates, wider than the up projections */
        for (int f = 0; f < F; f++) k.inp[(size_t)r * 2 * F + f] *= gate_sd;
    lab21_fill(k.w, nout, 0.0f, 1.0f, salt + 1);
    float *d = lab21_alloc(nin);
    for (long i = 0; i < nin; i++) d[i] = 0.125f; /* backward adds */
    swiglu_backward(d, k.w, k.inp, N, F);
    double *want = malloc(sizeof(double) * (size_t)nin);
    MPT_REQUIRE(want != NULL, "out of memory");
    lab21_ref_swiglu_backward(want, k.w, k.inp, N, F);
    for (long i = 0; i < nin; i++) want[i] += 0.125;
    char what[96];
    snprintf(what, sizeof what, "swiglu_backward, N=%d F=%d, gates ~ N(0, %g^2)", N, F, (double)gate_sd);
    CHECK_ARRAY(d, want, nin, 1e-4, 1e-5, what,
                "row layout [gate (F) | up (F)]: dgate = dout * up * silu'(g) with silu'(g) = s (1 + g (1 - s)), "
                "s = sigmoid(g); dup = dout * silu(g); both ADDED to dinp");
    memset(d, 0, sizeof(float) * (size_t)nin);
    swiglu_backward(d, k.w, k.inp, N, F);
    CHECK_GRADIENT("swiglu dinp", lab21_swiglu_loss, &k, k.inp, d, nin,
                   "silu'(g) = sigmoid(g) + g * sigmoid(g) * (1 - sigmoid(g)): the product rule on g * sigmoid(g)");
    free(k.inp), free(k.out), free(k.w), free(d), free(want);
}

/* Every tensor of a real model's registry against the expected group, by the table below. */
static inline decay_group lab21_expected_group(const model_tensor *t) {
    const char *base = strrchr(t->name, '.') ? strrchr(t->name, '.') + 1 : t->name;
    if (strncmp(base, "ln", 2) == 0) return DECAY_GROUP_NORM;
    if (strcmp(t->name, "wte") == 0 || strcmp(t->name, "wpe") == 0) return DECAY_GROUP_EMBEDDING;
    return t->ndim == 1 ? DECAY_GROUP_BIAS : DECAY_GROUP_WEIGHT;
}

static inline void lab21_check_decay_groups(const model_config *cfg, const char *what) {
    model *m = model_create(cfg);
    int n, wrong = 0;
    const model_tensor *t = model_tensors(m, &n);
    uint64_t seen = 0;
    for (int i = 0; i < n; i++) {
        decay_group got = decay_group_of(t[i].name, t[i].ndim), want = lab21_expected_group(&t[i]);
        seen = seen * 5 + (uint64_t)got;
        if (got != want && wrong++ < 3)
            mpt_fail(__FILE__, __LINE__,
                     "%s: tensor %s (%d-D, %d x %d)\n      expected: group %s\n      got:      %s\n"
                     "      likely mistake: strip the block prefix \"h.<layer>.\" first; a name starting with \"ln\" is a "
                     "norm (gain or bias), wte/wpe the embeddings, another 1-D tensor a bias, the rest weights",
                     what, t[i].name, t[i].ndim, t[i].shape[0], t[i].shape[1], decay_group_name(want),
                     got >= 0 && got < DECAY_NGROUPS ? decay_group_name(got) : "(out of range)");
    }
    mpt_observe(__FILE__, __LINE__, seen); /* every tensor's group, for the grader */
    MPT_CHECK_EQ_I64(0, wrong, what);
    model_free(m);
}

/* The perplexity of a batch of losses with some positions masked, against the double written out. */
static inline void lab21_check_perplexity(const float *losses, const int *targets, long N, const char *what) {
    double sum = 0;
    long count = 0;
    for (long i = 0; i < N; i++)
        if (targets[i] >= 0) sum += losses[i], count++;
    eval_totals tot = {0};
    eval_add_losses(&tot, losses, targets, N);
    MPT_CHECK_EQ_I64(count, tot.tokens, "tokens counted: positions whose target is >= 0");
    MPT_CHECK_NEAR(sum, tot.loss_sum, 1e-12, 1e-12, "sum of the counted positions' losses");
    double got = eval_perplexity(&tot);
    mpt_observe_near(__FILE__, __LINE__, got, 1e-12, 0);
    double want = count ? exp(sum / count) : NAN;
    if (count == 0 ? isnan(got) : fabs(got - want) <= 1e-12 * want) return;
    mpt_fail(__FILE__, __LINE__,
             "%s: perplexity of %ld positions, %ld counted\n      expected: %.12g\n      got:      %.12g\n"
             "      likely mistake: %s",
             what, N, count, want, got,
             count == 0 ? "no token counted: the mean is undefined, return NAN"
                        : "exp of (sum of the counted losses / number of counted tokens); a position with target -1 "
                          "counts in neither");
}

#endif
