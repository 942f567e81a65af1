/* test_ops_gemm_f32.c: the core's fp32 kernel against its definition, bit for bit, in every layout and on any thread count. */
#include "ops/gemm_f32.h"
#include "ops/matmul.h"
#include "ops_testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>

/* gemm_f32.h's definition, one element at a time: k in blocks of GEMM_F32_KC, each block a chain of fmaf from 0;
 * the first block's sum plus the bias (or 0), plus C when accumulating; each later block's sum added to C. */
static void gemm_f32_definition(bool ta, bool tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                                const float *bias, bool accumulate, float *C, int ldc) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float *c = C + (size_t)m * ldc + n;
            if (K == 0) {
                if (accumulate && !bias) continue;
                *c = (accumulate ? *c : 0.0f) + (bias ? bias[n] : 0.0f);
                continue;
            }
            for (int k0 = 0; k0 < K; k0 += GEMM_F32_KC) {
                float s = 0.0f;
                for (int k = k0; k < K && k < k0 + GEMM_F32_KC; k++) {
                    const float a = ta ? A[(size_t)k * lda + m] : A[(size_t)m * lda + k];
                    const float b = tb ? B[(size_t)n * ldb + k] : B[(size_t)k * ldb + n];
                    s = fmaf(a, b, s);
                }
                float x = s;
                if (k0 == 0) {
                    x = x + (bias ? bias[n] : 0.0f);
                    if (accumulate) x = x + *c;
                } else x = x + *c;
                *c = x;
            }
        }
}

static float *guarded_uniform(size_t n, uint64_t seed) {
    float *p = guarded_alloc(n * sizeof(float)), *src = tu_uniform((long)n, -1.0f, 1.0f, seed);
    memcpy(p, src, n * sizeof(float));
    free(src);
    return p;
}

/* Every shape in all four layouts, adding to C and not, with and without a bias, on 1 and 2 threads. The columns
 * of C past N hold a sentinel that must survive, and A and B end just before an inaccessible page, so a read past
 * either crashes. The shapes: ragged in every dimension,
 * one k block exactly and one value more, three k blocks and a bit, a short k whose B block takes more columns,
 * C wider than tall (columns split over threads) and taller than wide (rows split). */
Test(gemm_f32, matches_its_definition_bit_for_bit) {
    if (!gemm_f32_available()) cr_skip_test("no AVX-512 on this CPU");
    const int shapes[][3] = {{1, 1, 1},     {7, 5, 3},      {33, 47, 29},   {47, 33, 31},     {5, 3, 801},
                             {9, 50, 770},  {70, 9, 3},     {16, 200, 256}, {24, 100, 257},   {40, 1100, 100},
                             {600, 97, 300}, {3, 1000, 0}};
    const int shape_count = sizeof shapes / sizeof *shapes;
    const int saved_threads = omp_get_max_threads();
    int checked = 0;
    for (int s = 0; s < shape_count; s++)
        for (int layout = 0; layout < 4; layout++)
            for (int variant = 0; variant < 2; variant++) {
                const bool ta = layout & 1, tb = layout & 2, accumulate = variant, with_bias = (s + layout + variant) % 2;
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                /* leading dimensions wider than the matrices when adding to C; exact otherwise, where the last
                 * element of A and B is the last before the inaccessible page */
                const int lda = (ta ? M : K) + 2 * variant, ldb = (tb ? K : N) + variant, ldc = N + 3;
                const size_t a_size = (size_t)(ta ? K : M) * lda, b_size = (size_t)(tb ? N : K) * ldb;
                float *A = guarded_uniform(a_size ? a_size : 1, 10 + s), *B = guarded_uniform(b_size ? b_size : 1, 20 + s);
                float *bias = with_bias ? guarded_uniform((size_t)N, 30 + s) : NULL;
                float *start = tu_uniform((long)M * ldc, -1.0f, 1.0f, 40 + s);
                for (int m = 0; m < M; m++)
                    for (int n = N; n < ldc; n++) start[(size_t)m * ldc + n] = 12345.0f; /* the sentinel */
                float *want = tu_copy(start, (long)M * ldc);
                gemm_f32_definition(ta, tb, M, N, K, A, lda, B, ldb, bias, accumulate, want, ldc);
                for (int threads = 1; threads <= 2; threads++) {
                    omp_set_num_threads(threads);
                    float *got = tu_copy(start, (long)M * ldc);
                    gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, bias, accumulate, got, ldc);
                    long first_difference = -1;
                    for (long i = 0; i < (long)M * ldc && first_difference < 0; i++)
                        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) first_difference = i;
                    cr_expect(first_difference < 0,
                              "M=%d N=%d K=%d trans_a=%d trans_b=%d accumulate=%d bias=%d on %d thread(s): element "
                              "(%ld, %ld) is %.9g, its definition %.9g",
                              M, N, K, ta, tb, accumulate, with_bias, threads, first_difference / ldc,
                              first_difference % ldc, first_difference < 0 ? 0.0 : got[first_difference],
                              first_difference < 0 ? 0.0 : want[first_difference]);
                    free(got);
                    checked++;
                }
                guarded_free(A, (a_size ? a_size : 1) * sizeof(float));
                guarded_free(B, (b_size ? b_size : 1) * sizeof(float));
                if (bias) guarded_free(bias, (size_t)N * sizeof(float));
                free(start), free(want);
            }
    omp_set_num_threads(saved_threads);
    cr_expect_eq(checked, shape_count * 4 * 2 * 2, "every case ran");
}

/* A product whose operands are all +inf leaves infinities in the packing areas; the next, smaller product must
 * not read them (lines past its edge are packed as zeros): 0 * inf would be NaN. */
Test(gemm_f32, a_smaller_product_does_not_see_the_last_ones_panels) {
    if (!gemm_f32_available()) cr_skip_test("no AVX-512 on this CPU");
    enum { BIG = 100, SMALL = 5 };
    float *inf = tu_zeros(BIG * BIG), *ones = tu_zeros(BIG * BIG), *C = tu_zeros(BIG * BIG);
    for (int i = 0; i < BIG * BIG; i++) inf[i] = INFINITY, ones[i] = 1.0f;
    for (int layout = 0; layout < 4; layout++) {
        const bool ta = layout & 1, tb = layout & 2;
        gemm_f32(ta, tb, BIG, BIG, BIG, inf, BIG, inf, BIG, NULL, false, C, BIG);
        gemm_f32(ta, tb, SMALL, SMALL + 2, 3, ones, ta ? SMALL : 3, ones, tb ? 3 : SMALL + 2, NULL, false, C, BIG);
        for (int m = 0; m < SMALL; m++)
            for (int n = 0; n < SMALL + 2; n++)
                cr_expect_eq(C[m * BIG + n], 3.0f, "trans_a=%d trans_b=%d: (%d, %d) should be 3 (ones), got %g", ta, tb,
                             m, n, C[m * BIG + n]);
    }
    free(inf), free(ones), free(C);
}

/* matmul_sgemm, the path every fp32 matmul of the model takes, runs this kernel where it is available (its bits
 * are the definition's), and OpenBLAS when it is turned off; both agree with the double-precision reference. */
Test(gemm_f32, matmul_runs_the_kernel_and_openblas_when_asked) {
    if (!gemm_f32_available()) cr_skip_test("no AVX-512 on this CPU");
    const int N = 37, C = 300, OC = 70;
    float *inp = tu_uniform((long)N * C, -1, 1, 1), *weight = tu_uniform((long)OC * C, -1, 1, 2);
    float *bias = tu_uniform(OC, -1, 1, 3), *out = tu_zeros((long)N * OC), *want = tu_zeros((long)N * OC);
    float *ref = tu_zeros((long)N * OC);
    matmul_forward_ref(ref, inp, weight, bias, N, C, OC);
    matmul_forward(out, inp, weight, NULL, N, C, OC);
    gemm_f32_definition(false, true, N, OC, C, inp, C, weight, C, NULL, false, want, OC);
    cr_expect(tu_bits_equal(out, want, (long)N * OC), "matmul_forward gives the kernel's definition, bit for bit");
    for (int on = 1; on >= 0; on--) {
        cr_expect_eq(gemm_f32_use(on), (bool)on, "the kernel is %s", on ? "on" : "off");
        matmul_forward(out, inp, weight, bias, N, C, OC);
        for (int i = 0; i < N * OC; i++)
            if (fabsf(out[i] - ref[i]) > 1e-4f * (1.0f + fabsf(ref[i]))) {
                cr_expect(false, "kernel %s: out[%d] = %.9g, the reference %.9g", on ? "on" : "off", i, out[i], ref[i]);
                break;
            }
    }
    cr_expect(gemm_f32_use(true), "the kernel back on");
    free(inp), free(weight), free(bias), free(out), free(want), free(ref);
}
