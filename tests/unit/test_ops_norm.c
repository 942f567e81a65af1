/* test_ops_norm.c: layernorm and rmsnorm: double references, large-mean rows, gradient checks, determinism. */
#include "ops/gradcheck.h"
#include "ops/layernorm.h"
#include "ops/rmsnorm.h"
#include "ops_testutil.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>

#define RMS_EPS 1e-5f

/* The definitions in double; mean/var from the float inputs. */
static void layernorm_double(float *out, double *rstd_out, const float *inp, const float *w, const float *b, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + n * C;
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        double s = 1.0 / sqrt(v / C + LAYERNORM_EPS);
        for (int c = 0; c < C; c++) out[n * C + c] = (float)((x[c] - m) * s * w[c] + b[c]);
        if (rstd_out) rstd_out[n] = s;
    }
}

static void rmsnorm_double(float *out, const float *inp, const float *w, int N, int C) {
    for (int n = 0; n < N; n++) {
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)inp[n * C + c] * inp[n * C + c];
        double s = 1.0 / sqrt(ss / C + RMS_EPS);
        for (int c = 0; c < C; c++) out[n * C + c] = (float)(inp[n * C + c] * s * w[c]);
    }
}

typedef struct {
    float *inp, *weight, *bias, *out, *mean, *rstd, *w;
    int N, C;
    int rms; /* 1: rmsnorm, 0: layernorm */
} norm_ctx;

static void norm_setup(norm_ctx *k, int N, int C, int rms, float offset, uint64_t seed) {
    *k = (norm_ctx){.N = N, .C = C, .rms = rms};
    k->inp = tu_uniform((long)N * C, offset - 1.5f, offset + 1.5f, seed);
    k->weight = tu_uniform(C, 0.5f, 1.5f, seed + 1);
    k->bias = tu_uniform(C, -0.5f, 0.5f, seed + 2);
    k->w = tu_uniform((long)N * C, -1, 1, seed + 3);
    k->out = tu_zeros((long)N * C);
    k->mean = tu_zeros(N);
    k->rstd = tu_zeros(N);
}

static void norm_free(norm_ctx *k) {
    free(k->inp), free(k->weight), free(k->bias), free(k->w), free(k->out), free(k->mean), free(k->rstd);
}

static void norm_forward(norm_ctx *k) {
    if (k->rms) rmsnorm_forward(k->out, k->rstd, k->inp, k->weight, k->N, k->C, RMS_EPS);
    else layernorm_forward(k->out, k->mean, k->rstd, k->inp, k->weight, k->bias, k->N, k->C);
}

static double norm_loss(void *p) {
    norm_ctx *k = p;
    norm_forward(k);
    return tu_weighted_sum(k->w, k->out, (long)k->N * k->C);
}

Test(ops_norm, layernorm_forward_matches_double_reference) {
    norm_ctx k;
    norm_setup(&k, 9, 37, 0, 0.3f, 1);
    float *ref = tu_zeros(9 * 37);
    norm_forward(&k);
    layernorm_double(ref, NULL, k.inp, k.weight, k.bias, 9, 37);
    cr_expect(ops_compare("layernorm out", ref, k.out, 9 * 37, 1e-6));
    free(ref);
    norm_free(&k);
}

Test(ops_norm, rmsnorm_forward_matches_double_reference) {
    norm_ctx k;
    norm_setup(&k, 9, 37, 1, 0.3f, 2);
    float *ref = tu_zeros(9 * 37);
    norm_forward(&k);
    rmsnorm_double(ref, k.inp, k.weight, 9, 37);
    cr_expect(ops_compare("rmsnorm out", ref, k.out, 9 * 37, 1e-6));
    free(ref);
    norm_free(&k);
}

Test(ops_norm, layernorm_keeps_precision_on_large_mean_rows) {
    /* Rows with mean 1e4 and spread 1: E[x^2] - E[x]^2 in float would be 1e8 - 1e8 = noise (often
     * negative, then NaN). The two-pass double sums get the variance right; what remains is the float
     * mean: it is stored to within half an ulp of 1e4 (4.9e-4), which shifts every normalised value by
     * up to 4.9e-4 * rstd. So the honest tolerance is 1e-3 here, against 1e-6 for zero-mean rows. */
    const int N = 4, C = 768;
    norm_ctx k;
    norm_setup(&k, N, C, 0, 1e4f, 3);
    float *ref = tu_zeros(N * C);
    double rstd_ref[4];
    norm_forward(&k);
    layernorm_double(ref, rstd_ref, k.inp, k.weight, k.bias, N, C);
    cr_expect(ops_compare("layernorm out, mean 1e4", ref, k.out, N * C, 1e-3));
    for (int n = 0; n < N; n++) {
        cr_expect(fabs(k.rstd[n] - rstd_ref[n]) < 1e-6 * rstd_ref[n], "rstd[%d] = %.9g, expected %.9g", n, k.rstd[n],
                  rstd_ref[n]);
        cr_expect(fabs(k.mean[n] - 1e4) < 0.2, "mean[%d] = %g", n, k.mean[n]);
    }
    free(ref);
    norm_free(&k);
}

Test(ops_norm, rmsnorm_keeps_precision_on_large_mean_rows) {
    /* For rmsnorm a large mean is harmless (no subtraction); the sum of squares (~1e8 per element,
     * 768 of them) is taken in double, so the result is as good as for small inputs. */
    const int N = 4, C = 768;
    norm_ctx k;
    norm_setup(&k, N, C, 1, 1e4f, 4);
    float *ref = tu_zeros(N * C);
    norm_forward(&k);
    rmsnorm_double(ref, k.inp, k.weight, N, C);
    cr_expect(ops_compare("rmsnorm out, mean 1e4", ref, k.out, N * C, 1e-6));
    free(ref);
    norm_free(&k);
}

/* Normalisations are smooth; for inputs of size ~1 with C = 13 the third derivative of the loss is
 * O(1), so h = 1e-2 gives ~1e-5 truncation error. Tolerance 1e-4 absolute + 1e-2 relative. */
static void gradcheck_norm(int rms, int N, int C, uint64_t seed) {
    norm_ctx k;
    norm_setup(&k, N, C, rms, 0.2f, seed);
    float *dinp = tu_zeros((long)N * C), *dweight = tu_zeros(C), *dbias = tu_zeros(C);
    norm_forward(&k);
    if (rms) rmsnorm_backward(dinp, dweight, k.w, k.inp, k.weight, k.rstd, N, C);
    else layernorm_backward(dinp, dweight, dbias, k.w, k.inp, k.weight, k.mean, k.rstd, N, C);
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS;
    const char *name = rms ? "rmsnorm" : "layernorm";
    char label[64];
    snprintf(label, sizeof label, "%s dinp", name);
    cr_expect_eq(ops_gradcheck(label, norm_loss, &k, k.inp, dinp, (long)N * C, &opt).failed, 0);
    snprintf(label, sizeof label, "%s dweight", name);
    cr_expect_eq(ops_gradcheck(label, norm_loss, &k, k.weight, dweight, C, &opt).failed, 0);
    if (!rms) cr_expect_eq(ops_gradcheck("layernorm dbias", norm_loss, &k, k.bias, dbias, C, &opt).failed, 0);
    free(dinp), free(dweight), free(dbias);
    norm_free(&k);
}

Test(ops_norm, layernorm_backward_matches_finite_differences) { gradcheck_norm(0, 5, 13, 10); }
Test(ops_norm, rmsnorm_backward_matches_finite_differences) { gradcheck_norm(1, 5, 13, 20); }
Test(ops_norm, layernorm_backward_single_row_odd_width) { gradcheck_norm(0, 1, 3, 30); }

Test(ops_norm, backward_accumulates_and_does_not_depend_on_thread_count) {
    const int N = 64, C = 600; /* big enough to run multi-threaded */
    norm_ctx k;
    norm_setup(&k, N, C, 0, 0.0f, 5);
    norm_forward(&k);
    float *d1[3] = {tu_uniform(N * C, -1, 1, 6), tu_uniform(C, -1, 1, 7), tu_uniform(C, -1, 1, 8)};
    float *d2[3] = {tu_copy(d1[0], N * C), tu_copy(d1[1], C), tu_copy(d1[2], C)};
    float *fresh[3] = {tu_zeros(N * C), tu_zeros(C), tu_zeros(C)};
    omp_set_num_threads(1);
    layernorm_backward(d1[0], d1[1], d1[2], k.w, k.inp, k.weight, k.mean, k.rstd, N, C);
    layernorm_backward(fresh[0], fresh[1], fresh[2], k.w, k.inp, k.weight, k.mean, k.rstd, N, C);
    omp_set_num_threads(2);
    layernorm_backward(d2[0], d2[1], d2[2], k.w, k.inp, k.weight, k.mean, k.rstd, N, C);
    const long sizes[3] = {N * C, C, C};
    const char *names[3] = {"dinp", "dweight", "dbias"};
    for (int i = 0; i < 3; i++) {
        cr_expect(tu_bits_equal(d1[i], d2[i], sizes[i]), "layernorm %s with 1 and 2 threads differ", names[i]);
        float *start = i == 0 ? tu_uniform(N * C, -1, 1, 6) : tu_uniform(C, -1, 1, 6 + i);
        for (long j = 0; j < sizes[i]; j++) start[j] += fresh[i][j];
        /* start + (sum over 64 rows) against the same sum added row by row onto start: rounding differs
         * by a few ulp of the running sums (~8), so 1e-5. */
        cr_expect(ops_compare(names[i], start, d1[i], sizes[i], 1e-5), "layernorm %s must add to the buffer", names[i]);
        free(start), free(d1[i]), free(d2[i]), free(fresh[i]);
    }
    norm_free(&k);
}
