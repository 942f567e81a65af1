/* gelu.c: GELU (tanh approximation) forward and backward, elementwise. */
#include "ops/gelu.h"

#include "base/lab.h"
#include "ops/fastmath.h"
#include "ops/isa.h"
#include "ops/parallel.h"

#include <math.h> /* tanhf, coshf: not used here (ops_tanhf vectorises), but a natural first version uses them */

#define GELU_SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f

/* Elements per task: large enough that a call through the level's table is nothing beside the work,
 * small enough to share GPT-2's 786K elements evenly over the threads. */
enum { GELU_CHUNK = 16384 };

OPS_ISA_INLINE void gelu_forward_range(float *out, const float *inp, long lo, long hi) {
#pragma omp simd
    for (long i = lo; i < hi; i++) {
        float x = inp[i];
        float u = GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
        out[i] = 0.5f * x * (1.0f + ops_tanhf(u));
    }
}
OPS_ISA_CLONES(gelu_forward_range, (float *out, const float *inp, long lo, long hi), (out, inp, lo, hi));

void gelu_forward(float *out, const float *inp, long N) {
    void (*const range)(float *, const float *, long, long) = gelu_forward_range_isa[ops_isa_current()];
    const long chunks = (N + GELU_CHUNK - 1) / GELU_CHUNK;
#pragma omp parallel for schedule(static) if (ops_worth_threads(N))
    for (long c = 0; c < chunks; c++) {
        const long lo = c * GELU_CHUNK, hi = N - lo < GELU_CHUNK ? N : lo + GELU_CHUNK;
        range(out, inp, lo, hi);
    }
}

OPS_ISA_LAB_CLONES
void gelu_backward(float *dinp, const float *inp, const float *dout, long N) {
    /* LAB 02 BEGIN GELU backward: dinp += gelu'(x) * dout, product rule through x and tanh(u(x)) */
    /* gelu(x) = 0.5 x (1 + tanh u):
     *   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'(x),  u'(x) = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
     * (tanh' = 1 - tanh^2 = sech^2). ops_tanhf is tanhf written so this loop vectorises. */
#pragma omp parallel for simd schedule(static) if (parallel: ops_worth_threads(N))
    for (long i = 0; i < N; i++) {
        float x = inp[i];
        float u = GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
        float du = GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_CUBIC * x * x);
        float th = ops_tanhf(u);
        float local = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
        dinp[i] += local * dout[i];
    }
    /* LAB 02 END */
}
