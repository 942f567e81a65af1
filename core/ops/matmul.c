/* matmul.c: the linear layer forward and backward: three sgemm calls (the core's AVX-512 kernel or OpenBLAS), and a plain-loop reference. */
#include "ops/matmul.h"

#include "base/error.h"
#include "base/lab.h"

#include "ops/gemm_f32.h"
#include "ops/isa.h"
#include "ops/parallel.h"

#include <cblas.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static void check_dims(int N, int C, int OC) {
    MP_ASSERT(N >= 0 && C >= 0 && OC >= 0, "matmul dims must be >= 0: N=%d C=%d OC=%d", N, C, OC);
}

/* ---------------------------------------------------------------- one pool of threads */

/* OpenBLAS has its own thread pool, and its threads keep spinning for a while after each call
 * (OPENBLAS_THREAD_TIMEOUT, ~0.1 s by default). The OpenMP kernels that run between two matmuls then
 * fight them for the cores: on 2 cores the encoder forward took 7.6 ms instead of 13 us right after a
 * multi-threaded sgemm (bench/ops_bench). So the matmuls run on the OpenMP threads too: OpenBLAS is told
 * to use one thread, and each OpenMP thread multiplies its own block of the output. */
void openblas_set_num_threads(int threads); /* OpenBLAS's own API (not part of CBLAS) */

static pthread_once_t blas_single_thread_once = PTHREAD_ONCE_INIT;
static void blas_single_thread(void) { openblas_set_num_threads(1); }

void matmul_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc) {
    /* The core's own kernel where the CPU has AVX-512 (gemm_f32.c says why): it adds C (beta = 1) or not (beta =
     * 0), and is not reentrant, so inside a parallel region the product goes to OpenBLAS. */
    if (alpha == 1.0f && (beta == 0.0f || beta == 1.0f) && !omp_in_parallel() && gemm_f32_available()) {
        gemm_f32(trans_a, trans_b, M, N, K, A, lda, B, ldb, NULL, beta == 1.0f, C, ldc);
        return;
    }
    pthread_once(&blas_single_thread_once, blas_single_thread);
    const enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    const bool split_columns = N >= M;
    /* one thread below ~0.5 MFLOP (a few microseconds of work), where starting threads costs more */
#pragma omp parallel if ((double)M * N * K >= 1 << 18)
    {
        int lo, hi;
        ops_thread_range(split_columns ? N : M, OPS_SIMD_FLOATS, &lo, &hi);
        if (hi > lo) {
            if (split_columns) {
                /* columns lo..hi of op(B): columns of B when not transposed, rows of B when transposed */
                const float *b_part = trans_b ? B + (size_t)lo * ldb : B + lo;
                cblas_sgemm(CblasRowMajor, ta, tb, M, hi - lo, K, alpha, A, lda, b_part, ldb, beta, C + lo, ldc);
            } else {
                /* rows lo..hi of op(A): rows of A when not transposed, columns of A when transposed */
                const float *a_part = trans_a ? A + lo : A + (size_t)lo * lda;
                cblas_sgemm(CblasRowMajor, ta, tb, hi - lo, N, K, alpha, a_part, lda, B, ldb, beta, C + (size_t)lo * ldc,
                            ldc);
            }
        }
    }
}

/* ---------------------------------------------------------------- BLAS path */

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    check_dims(N, C, OC);
    if (N == 0 || OC == 0) return;
    /* sgemm computes out = alpha * A @ B + beta * out. With a bias we first fill every row with it and
     * let sgemm add the product on top (beta = 1): one pass over `out` instead of two. */
    float beta = 0.0f;
    if (bias) {
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * OC))
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof *out);
        beta = 1.0f;
    }
    if (C == 0) { /* an empty product: BLAS rejects a leading dimension of 0, and there is nothing to add */
        if (!bias) memset(out, 0, (size_t)N * OC * sizeof *out);
        return;
    }
    /* out (N,OC) = inp (N,C) @ weight^T (C,OC): weight is stored (OC,C), so it is read transposed. */
    matmul_sgemm(false, true, N, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

OPS_ISA_LAB_CLONES
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int C, int OC) {
    check_dims(N, C, OC);
    if (N == 0 || OC == 0 || C == 0) { /* empty products: only dbias can change, and only when C == 0 */
        if (dbias && C == 0) matmul_backward_ref(NULL, NULL, dbias, dout, inp, weight, N, C, OC);
        return;
    }
    /* LAB 02 BEGIN linear layer backward: dinp += dout @ weight, dweight += dout^T @ inp, dbias += column sums */
    /* out[n][o] = sum_c inp[n][c] * weight[o][c] + bias[o], so by the chain rule:
     *   dinp[n][c]    += sum_o dout[n][o] * weight[o][c]    (N,OC) @ (OC,C)
     *   dweight[o][c] += sum_n dout[n][o] * inp[n][c]       (N,OC)^T @ (N,C)
     *   dbias[o]      += sum_n dout[n][o]
     * beta = 1 makes sgemm add to what is there: gradients accumulate. matmul_sgemm is cblas_sgemm (row-major,
     * transposes as booleans) with the work split over the OpenMP threads. */
    if (dinp)
        matmul_sgemm(false, false, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
    if (dweight)
        matmul_sgemm(true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias) {
        /* Each thread owns a range of output channels and walks down the rows: no two threads write the
         * same dbias[o], and the sum order per channel does not depend on the thread count. It takes 64
         * channels at a time, side by side: a row's 64 values are contiguous, so the inner loop is one
         * vector add per 4 to 16 channels, where one channel at a time would wait for each addition and
         * read one value per cache line. Every channel still adds its rows in order, from 0. */
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * OC))
        for (int o0 = 0; o0 < OC; o0 += 64) {
            const int width = OC - o0 < 64 ? OC - o0 : 64;
            float sum[64] = {0};
            for (int n = 0; n < N; n++) {
                const float *row = dout + (size_t)n * OC + o0;
#pragma omp simd
                for (int j = 0; j < width; j++) sum[j] += row[j];
            }
            for (int j = 0; j < width; j++) dbias[o0 + j] += sum[j];
        }
    }
    /* LAB 02 END */
}

/* ---------------------------------------------------------------- reference loops */

void matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    check_dims(N, C, OC);
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * C * OC))
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OC; o++) {
            double sum = bias ? bias[o] : 0.0;
            for (int c = 0; c < C; c++) sum += (double)inp[(size_t)n * C + c] * weight[(size_t)o * C + c];
            out[(size_t)n * OC + o] = (float)sum;
        }
    }
}

void matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                         const float *weight, int N, int C, int OC) {
    check_dims(N, C, OC);
    if (dinp) {
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * C * OC))
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++) {
                double sum = 0.0;
                for (int o = 0; o < OC; o++) sum += (double)dout[(size_t)n * OC + o] * weight[(size_t)o * C + c];
                dinp[(size_t)n * C + c] += (float)sum;
            }
    }
    if (dweight) {
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * C * OC))
        for (int o = 0; o < OC; o++)
            for (int c = 0; c < C; c++) {
                double sum = 0.0;
                for (int n = 0; n < N; n++) sum += (double)dout[(size_t)n * OC + o] * inp[(size_t)n * C + c];
                dweight[(size_t)o * C + c] += (float)sum;
            }
    }
    if (dbias) {
        for (int o = 0; o < OC; o++) {
            double sum = 0.0;
            for (int n = 0; n < N; n++) sum += dout[(size_t)n * OC + o];
            dbias[o] += (float)sum;
        }
    }
}
