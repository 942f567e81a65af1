/* swiglu.c: SwiGLU (silu(gate) * up) forward and backward over rows laid out [gate | up] (lab 21 writes the backward). */
#include "ops/swiglu.h"

#include "base/lab.h"
#include "ops/fastmath.h"
#include "ops/isa.h"
#include "ops/parallel.h"

#include <stddef.h>

void swiglu_forward(float *out, const float *inp, int N, int F) {
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * F))
    for (int n = 0; n < N; n++) {
        const float *restrict gate = inp + (size_t)n * 2 * F;
        const float *restrict up = gate + F;
        float *restrict y = out + (size_t)n * F;
#pragma omp simd
        for (int f = 0; f < F; f++) y[f] = gate[f] * ops_sigmoidf(gate[f]) * up[f];
    }
}

OPS_ISA_LAB_CLONES
void swiglu_backward(float *dinp, const float *dout, const float *inp, int N, int F) {
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * F))
    for (int n = 0; n < N; n++) {
        const float *restrict gate = inp + (size_t)n * 2 * F;
        const float *restrict up = gate + F;
        const float *restrict dy = dout + (size_t)n * F;
        float *restrict dgate = dinp + (size_t)n * 2 * F;
        float *restrict dup = dgate + F;
        /* LAB 21 BEGIN SwiGLU backward, one row: the gradients at the gate (through silu) and at the up projection */
#pragma omp simd
        for (int f = 0; f < F; f++) {
            float g = gate[f], s = ops_sigmoidf(g);
            dgate[f] += dy[f] * up[f] * s * (1.0f + g * (1.0f - s));
            dup[f] += dy[f] * g * s;
        }
        /* LAB 21 END */
    }
}
