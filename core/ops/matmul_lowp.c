/* matmul_lowp.c: 16-bit-input matmuls with fp32 accumulation: the portable decode+sgemm path and the definition. */
#include "ops/matmul_lowp.h"

#include "base/error.h"
#include "base/mem.h"
#include "fp/convert.h"
#include "ops/matmul.h"

#include <stdlib.h>
#include <string.h>

void lowp_decode(float *dst, const uint16_t *src, size_t n, lowp_format fmt) {
    if (fmt == LOWP_BF16) fp_bf16_to_f32(dst, src, n);
    else fp_f16_to_f32(dst, src, n);
}

void lowp_encode(uint16_t *dst, const float *src, size_t n, lowp_format fmt) {
    if (fmt == LOWP_BF16) fp_f32_to_bf16(dst, src, n);
    else fp_f32_to_f16(dst, src, n);
}

/* Two grow-only fp32 scratch buffers for the widened operands (the weight and the activation side).
 * They belong to the calling thread's step: the model calls matmuls one at a time and each product
 * splits its own work over the OpenMP threads. */
typedef struct {
    float *data;
    size_t floats;
} scratch;
static scratch widened[3];

static float *scratch_get(int which, size_t floats) {
    scratch *s = &widened[which];
    if (s->floats < floats) {
        mem_free(s->data);
        s->data = mem_alloc(floats * sizeof(float), MEM_OTHER, "lowp matmul: widened operands");
        s->floats = floats;
    }
    return s->data;
}

static float *widen(int which, const uint16_t *src, size_t n, lowp_format fmt) {
    float *dst = scratch_get(which, n);
    lowp_decode(dst, src, n, fmt);
    return dst;
}

void matmul_lowp_forward(float *out, const uint16_t *inp, const uint16_t *weight, const float *bias, int N, int C,
                         int OC, lowp_format fmt) {
    float *x = widen(0, inp, (size_t)N * C, fmt);
    float *w = widen(1, weight, (size_t)OC * C, fmt);
    matmul_forward(out, x, w, bias, N, C, OC);
}

void matmul_lowp_backward(float *dinp, float *dweight, float *dbias, const uint16_t *dout, const uint16_t *inp,
                          const uint16_t *weight, int N, int C, int OC, lowp_format fmt) {
    if (N == 0 || C == 0 || OC == 0) {
        if (dinp) memset(dinp, 0, (size_t)N * C * sizeof(float));
        return;
    }
    float *g = widen(2, dout, (size_t)N * OC, fmt);
    if (dinp) /* dinp = dout @ weight, (N,OC) @ (OC,C); beta 0 overwrites */
        matmul_sgemm(false, false, N, C, OC, 1.0f, g, OC, widen(1, weight, (size_t)OC * C, fmt), C, 0.0f, dinp, C);
    if (dweight) /* dweight += dout^T @ inp, (N,OC)^T @ (N,C) */
        matmul_sgemm(true, false, OC, C, N, 1.0f, g, OC, widen(0, inp, (size_t)N * C, fmt), C, 1.0f, dweight, C);
    if (dbias) {
#pragma omp parallel for schedule(static)
        for (int o = 0; o < OC; o++) {
            float sum = 0.0f;
            for (int n = 0; n < N; n++) sum += g[(size_t)n * OC + o];
            dbias[o] += sum;
        }
    }
}

static float *decoded_copy(const uint16_t *src, size_t n, lowp_format fmt) {
    float *dst = malloc((n ? n : 1) * sizeof(float));
    MP_ASSERT(dst, "out of memory");
    lowp_decode(dst, src, n, fmt);
    return dst;
}

void matmul_lowp_forward_ref(float *out, const uint16_t *inp, const uint16_t *weight, const float *bias, int N,
                             int C, int OC, lowp_format fmt) {
    float *x = decoded_copy(inp, (size_t)N * C, fmt), *w = decoded_copy(weight, (size_t)OC * C, fmt);
    matmul_forward_ref(out, x, w, bias, N, C, OC);
    free(x);
    free(w);
}

void matmul_lowp_backward_ref(float *dinp, float *dweight, float *dbias, const uint16_t *dout,
                              const uint16_t *inp, const uint16_t *weight, int N, int C, int OC, lowp_format fmt) {
    float *g = decoded_copy(dout, (size_t)N * OC, fmt);
    float *x = decoded_copy(inp, (size_t)N * C, fmt), *w = decoded_copy(weight, (size_t)OC * C, fmt);
    if (dinp) memset(dinp, 0, (size_t)N * C * sizeof(float));
    matmul_backward_ref(dinp, dweight, dbias, g, x, w, N, C, OC);
    free(g);
    free(x);
    free(w);
}

const char *matmul_lowp_path(lowp_format fmt) {
    (void)fmt;
    return "decode+sgemm";
}
