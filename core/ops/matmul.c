/* matmul.c: the linear layer forward and backward: three sgemm calls on OpenBLAS, and a plain-loop reference. */
#include "ops/matmul.h"

#include "base/error.h"
#include "base/lab.h"

#include <cblas.h>
#include <stddef.h>
#include <string.h>

static void check_dims(int N, int C, int OC) {
    MP_ASSERT(N >= 0 && C >= 0 && OC >= 0, "matmul dims must be >= 0: N=%d C=%d OC=%d", N, C, OC);
}

/* ---------------------------------------------------------------- BLAS path */

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    check_dims(N, C, OC);
    if (N == 0 || OC == 0) return;
    /* sgemm computes out = alpha * A @ B + beta * out. With a bias we first fill every row with it and
     * let sgemm add the product on top (beta = 1): one pass over `out` instead of two. */
    float beta = 0.0f;
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof *out);
        beta = 1.0f;
    }
    if (C == 0) { /* an empty product: BLAS rejects a leading dimension of 0, and there is nothing to add */
        if (!bias) memset(out, 0, (size_t)N * OC * sizeof *out);
        return;
    }
    /* out (N,OC) = inp (N,C) @ weight^T (C,OC): weight is stored (OC,C), so it is read transposed. */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

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
     * beta = 1 makes sgemm add to what is there: gradients accumulate. */
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
    if (dweight)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias) {
        /* Each thread owns a range of output channels and walks down the rows: no two threads write the
         * same dbias[o], and the sum order per channel does not depend on the thread count. */
#pragma omp parallel for schedule(static)
        for (int o = 0; o < OC; o++) {
            float sum = 0.0f;
            for (int n = 0; n < N; n++) sum += dout[(size_t)n * OC + o];
            dbias[o] += sum;
        }
    }
    /* LAB 02 END */
}

/* ---------------------------------------------------------------- reference loops */

void matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    check_dims(N, C, OC);
#pragma omp parallel for schedule(static)
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
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++) {
                double sum = 0.0;
                for (int o = 0; o < OC; o++) sum += (double)dout[(size_t)n * OC + o] * weight[(size_t)o * C + c];
                dinp[(size_t)n * C + c] += (float)sum;
            }
    }
    if (dweight) {
#pragma omp parallel for schedule(static)
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
