/* test_ops_matmul.c: the linear layer: BLAS path vs plain-loop reference, accumulation, gradient check. */
#include "ops/gradcheck.h"
#include "ops/matmul.h"
#include "ops_testutil.h"

#include <omp.h>

/* Shapes with sizes that are not multiples of 16 (BLAS kernels have edge cases there), N = 1 and C = 1,
 * and two big enough (N*C*OC > 2^18) for matmul_sgemm to split the work over threads, one by columns and
 * one by rows. */
static const int shapes[][3] = {{1, 1, 1},   {1, 7, 5},    {3, 5, 7},     {17, 33, 19},
                                {64, 48, 80}, {37, 100, 65}, {5, 1, 9},     {61, 70, 211}, {300, 47, 29}};
enum { NSHAPES = sizeof shapes / sizeof shapes[0] };

/* The BLAS path sums C products in float, the reference in double: the gap grows like sqrt(C) * 6e-8 for
 * unit-sized values (worst case C * 6e-8), so 1e-5 relative (absolute below 1) is honest up to C of a
 * few hundred. */
#define MATMUL_TOL 1e-5

Test(ops_matmul, blas_forward_matches_reference) {
    for (int s = 0; s < NSHAPES; s++) {
        int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        float *inp = tu_uniform((long)N * C, -1, 1, 10 + s), *weight = tu_uniform((long)OC * C, -1, 1, 20 + s);
        float *bias = tu_uniform(OC, -1, 1, 30 + s);
        float *out = tu_zeros((long)N * OC), *ref = tu_zeros((long)N * OC);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *b = with_bias ? bias : NULL;
            matmul_forward(out, inp, weight, b, N, C, OC);
            matmul_forward_ref(ref, inp, weight, b, N, C, OC);
            cr_expect(ops_compare("matmul forward", ref, out, (long)N * OC, MATMUL_TOL),
                      "N=%d C=%d OC=%d bias=%d: BLAS forward differs from the reference", N, C, OC, with_bias);
        }
        free(inp), free(weight), free(bias), free(out), free(ref);
    }
}

Test(ops_matmul, blas_backward_matches_reference_and_accumulates) {
    for (int s = 0; s < NSHAPES; s++) {
        int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
        float *inp = tu_uniform((long)N * C, -1, 1, 40 + s), *weight = tu_uniform((long)OC * C, -1, 1, 50 + s);
        float *dout = tu_uniform((long)N * OC, -1, 1, 60 + s);
        /* Start from non-zero gradients: both paths must add to them, not overwrite. */
        float *dinp = tu_uniform((long)N * C, -1, 1, 70 + s), *dweight = tu_uniform((long)OC * C, -1, 1, 80 + s);
        float *dbias = tu_uniform(OC, -1, 1, 90 + s);
        float *dinp_ref = tu_copy(dinp, (long)N * C), *dweight_ref = tu_copy(dweight, (long)OC * C);
        float *dbias_ref = tu_copy(dbias, OC);
        matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
        matmul_backward_ref(dinp_ref, dweight_ref, dbias_ref, dout, inp, weight, N, C, OC);
        cr_expect(ops_compare("matmul dinp", dinp_ref, dinp, (long)N * C, MATMUL_TOL), "N=%d C=%d OC=%d", N, C, OC);
        cr_expect(ops_compare("matmul dweight", dweight_ref, dweight, (long)OC * C, MATMUL_TOL), "N=%d C=%d OC=%d", N,
                  C, OC);
        cr_expect(ops_compare("matmul dbias", dbias_ref, dbias, OC, MATMUL_TOL), "N=%d C=%d OC=%d", N, C, OC);
        free(inp), free(weight), free(dout), free(dinp), free(dweight), free(dbias);
        free(dinp_ref), free(dweight_ref), free(dbias_ref);
    }
}

Test(ops_matmul, tiny_case_by_hand) {
    /* inp = [[1, 2]], weight = [[1, 0], [0, 1], [1, 1]], bias = [0.5, -1, 2]:
     * out = [1 + 0.5, 2 - 1, 3 + 2] = [1.5, 1, 5]. With dout = [1, 2, 3]:
     * dinp = dout @ weight = [1 + 3, 2 + 3] = [4, 5]; dweight = dout^T @ inp = [[1,2],[2,4],[3,6]]. */
    const float inp[] = {1, 2}, weight[] = {1, 0, 0, 1, 1, 1}, bias[] = {0.5f, -1, 2}, dout[] = {1, 2, 3};
    float out[3], dinp[2] = {0}, dweight[6] = {0}, dbias[3] = {0};
    matmul_forward(out, inp, weight, bias, 1, 2, 3);
    const float out_expected[] = {1.5f, 1, 5}, dinp_expected[] = {4, 5}, dweight_expected[] = {1, 2, 2, 4, 3, 6};
    cr_expect(ops_compare("out", out_expected, out, 3, 0));
    matmul_backward(dinp, dweight, dbias, dout, inp, weight, 1, 2, 3);
    cr_expect(ops_compare("dinp", dinp_expected, dinp, 2, 0));
    cr_expect(ops_compare("dweight", dweight_expected, dweight, 6, 0));
    cr_expect(ops_compare("dbias", dout, dbias, 3, 0));
}

Test(ops_matmul, null_gradients_and_empty_shapes_are_fine) {
    const int N = 4, C = 3, OC = 2;
    float *inp = tu_uniform(N * C, -1, 1, 1), *weight = tu_uniform(OC * C, -1, 1, 2), *dout = tu_uniform(N * OC, -1, 1, 3);
    float *dweight = tu_zeros(OC * C), *dweight_ref = tu_zeros(OC * C);
    matmul_backward(NULL, dweight, NULL, dout, inp, weight, N, C, OC);
    matmul_backward_ref(NULL, dweight_ref, NULL, dout, inp, weight, N, C, OC);
    cr_expect(ops_compare("dweight alone", dweight_ref, dweight, OC * C, MATMUL_TOL));
    /* C = 0: the output is just the bias. N = 0: nothing happens. */
    float out[2] = {7, 7}, bias[2] = {1, -2}, dbias[2] = {0, 0};
    matmul_forward(out, inp, weight, bias, 1, 0, 2);
    cr_expect(out[0] == 1 && out[1] == -2, "C = 0 with a bias: out should be the bias, got %g %g", out[0], out[1]);
    matmul_forward(out, inp, weight, NULL, 1, 0, 2);
    cr_expect(out[0] == 0 && out[1] == 0, "C = 0 without a bias: out should be 0");
    matmul_backward(NULL, NULL, dbias, dout, inp, weight, 1, 0, 2);
    cr_expect(dbias[0] == dout[0] && dbias[1] == dout[1], "C = 0: dbias still sums dout");
    matmul_forward(NULL, NULL, NULL, NULL, 0, 3, 2);
    free(inp), free(weight), free(dout), free(dweight), free(dweight_ref);
}

/* ---- gradient check: loss = sum w * matmul_forward(inp, weight, bias) */
typedef struct {
    float *inp, *weight, *bias, *out, *w;
    int N, C, OC;
} matmul_ctx;

static double matmul_loss(void *p) {
    matmul_ctx *m = p;
    matmul_forward(m->out, m->inp, m->weight, m->bias, m->N, m->C, m->OC);
    return tu_weighted_sum(m->w, m->out, (long)m->N * m->OC);
}

Test(ops_matmul, backward_matches_finite_differences) {
    matmul_ctx m = {.N = 5, .C = 7, .OC = 6};
    m.inp = tu_uniform(m.N * m.C, -1, 1, 1);
    m.weight = tu_uniform(m.OC * m.C, -1, 1, 2);
    m.bias = tu_uniform(m.OC, -1, 1, 3);
    m.w = tu_uniform(m.N * m.OC, -1, 1, 4);
    m.out = tu_zeros(m.N * m.OC);
    float *dinp = tu_zeros(m.N * m.C), *dweight = tu_zeros(m.OC * m.C), *dbias = tu_zeros(m.OC);
    matmul_backward(dinp, dweight, dbias, m.w, m.inp, m.weight, m.N, m.C, m.OC);
    /* The loss is linear in each input, so the central difference has no truncation error: what is
     * left is float rounding of the forward (about 1e-7 * sum |w * out| / h): 1e-4 absolute is ample. */
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS;
    opt.abs_tol = 1e-4;
    opt.rel_tol = 1e-3;
    cr_expect_eq(ops_gradcheck("matmul dinp", matmul_loss, &m, m.inp, dinp, m.N * m.C, &opt).failed, 0);
    cr_expect_eq(ops_gradcheck("matmul dweight", matmul_loss, &m, m.weight, dweight, m.OC * m.C, &opt).failed, 0);
    cr_expect_eq(ops_gradcheck("matmul dbias", matmul_loss, &m, m.bias, dbias, m.OC, &opt).failed, 0);
    free(m.inp), free(m.weight), free(m.bias), free(m.w), free(m.out), free(dinp), free(dweight), free(dbias);
}

Test(ops_matmul, dbias_does_not_depend_on_thread_count) {
    const int N = 300, C = 8, OC = 170; /* N*OC above the size where kernels go multi-threaded */
    float *dout = tu_uniform(N * OC, -1, 1, 5), *inp = tu_uniform(N * C, -1, 1, 6), *weight = tu_uniform(OC * C, -1, 1, 7);
    float *one = tu_zeros(OC), *two = tu_zeros(OC);
    omp_set_num_threads(1);
    matmul_backward(NULL, NULL, one, dout, inp, weight, N, C, OC);
    omp_set_num_threads(2);
    matmul_backward(NULL, NULL, two, dout, inp, weight, N, C, OC);
    cr_expect(tu_bits_equal(one, two, OC), "dbias with 1 and 2 threads should be bit-identical");
    free(dout), free(inp), free(weight), free(one), free(two);
}

/* The bias gradient, bit for bit: each channel adds its rows in order, in fp32, from 0, and then adds that sum
 * to what dbias held. matmul_backward sums 64 channels side by side; widths that are not a multiple of 64 (or
 * of any vector width) and a single row check the edges of that. */
Test(ops_matmul, dbias_adds_each_channels_rows_in_order) {
    const int cases[][2] = {{1, 1}, {7, 63}, {5, 64}, {300, 65}, {33, 170}, {256, 2304}};
    for (int k = 0; k < 6; k++) {
        const int N = cases[k][0], OC = cases[k][1], C = 3;
        float *dout = tu_uniform(N * OC, -1, 1, 40 + k), *inp = tu_uniform(N * C, -1, 1, 50 + k);
        float *weight = tu_uniform(OC * C, -1, 1, 60 + k), *dbias = tu_uniform(OC, -1, 1, 70 + k);
        float *want = malloc((size_t)OC * sizeof *want);
        for (int o = 0; o < OC; o++) {
            float sum = 0.0f;
            for (int n = 0; n < N; n++) sum += dout[(size_t)n * OC + o];
            want[o] = dbias[o] + sum;
        }
        matmul_backward(NULL, NULL, dbias, dout, inp, weight, N, C, OC);
        cr_expect(tu_bits_equal(dbias, want, OC), "N=%d OC=%d: dbias is not each channel's rows added in order", N, OC);
        free(dout), free(inp), free(weight), free(dbias), free(want);
    }
}

Test(ops_matmul, sgemm_every_transpose_and_both_splits) {
    /* matmul_sgemm splits C by columns when it is wider than tall, by rows otherwise: try both, with
     * every combination of transposes, against a double loop. A and B are stored with padded leading
     * dimensions (lda, ldb > the logical width) so that offsets into them are exercised too. */
    /* M, N, K: the first two are over the 2^18 multiply-adds where the split starts */
    const int sizes[][3] = {{40, 700, 13}, {700, 40, 13}, {33, 33, 5}};
    for (int s = 0; s < 3; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
                const int a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
                const int lda = a_cols + 3, ldb = b_cols + 5, ldc = N + 2;
                float *A = tu_uniform((long)a_rows * lda, -1, 1, 100 + s), *B = tu_uniform((long)b_rows * ldb, -1, 1, 200 + s);
                float *Cm = tu_uniform((long)M * ldc, -1, 1, 300 + s), *ref = tu_copy(Cm, (long)M * ldc);
                matmul_sgemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 2.0f, Cm, ldc);
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double sum = 0;
                        for (int k = 0; k < K; k++)
                            sum += (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
                        ref[i * ldc + j] = (float)(0.5 * sum + 2.0 * ref[i * ldc + j]);
                    }
                cr_expect(ops_compare("matmul_sgemm", ref, Cm, (long)M * ldc, MATMUL_TOL),
                          "M=%d N=%d K=%d trans_a=%d trans_b=%d (the padding columns of C must stay untouched too)", M,
                          N, K, ta, tb);
                free(A), free(B), free(Cm), free(ref);
            }
}
