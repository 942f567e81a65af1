/* residual.c: elementwise sum (forward) and gradient fan-out (backward) of a residual connection. */
#include "ops/residual.h"

#include "ops/parallel.h"

void residual_forward(float *out, const float *inp1, const float *inp2, long N) {
    /* No restrict: out may alias an input; each element is read before it is written. */
#pragma omp parallel for simd schedule(static) if (parallel: ops_worth_threads(N))
    for (long i = 0; i < N; i++) out[i] = inp1[i] + inp2[i];
}

void residual_backward(float *dinp1, float *dinp2, const float *dout, long N) {
#pragma omp parallel for simd schedule(static) if (parallel: ops_worth_threads(N))
    for (long i = 0; i < N; i++) {
        dinp1[i] += dout[i];
        dinp2[i] += dout[i];
    }
}
