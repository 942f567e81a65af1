/* crossentropy.c: fused softmax + cross-entropy over a (possibly padded) vocabulary, forward and backward. */
#include "ops/crossentropy.h"

#include "base/error.h"
#include "base/lab.h"
#include "ops/fastmath.h"
#include "ops/parallel.h"

#include <math.h>
#include <stddef.h>

static void check_shapes(const int *targets, int N, int V, int Vp) {
    MP_ASSERT(V > 0 && Vp >= V, "cross-entropy needs 0 < V <= Vp, got V=%d Vp=%d", V, Vp);
    for (int n = 0; n < N; n++)
        MP_ASSERT(targets[n] >= -1 && targets[n] < V, "target %d at position %d is outside [-1, %d)", targets[n], n, V);
}

void crossentropy_forward(float *losses, float *lse, const float *logits, const int *targets, int N, int V, int Vp) {
    check_shapes(targets, N, V, Vp);
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * V))
    for (int n = 0; n < N; n++) {
        const float *restrict z = logits + (size_t)n * Vp;
        float max = -INFINITY;
        for (int v = 0; v < V; v++) max = z[v] > max ? z[v] : max;
        /* Each exp(z - max) is in (0, 1] and the largest is exactly 1, so the sum is in [1, V]: no
         * overflow, and log(sum) loses nothing to underflow. */
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int v = 0; v < V; v++) sum += ops_expf(z[v] - max);
        float row_lse = max + logf(sum);
        if (lse) lse[n] = row_lse;
        losses[n] = targets[n] < 0 ? 0.0f : row_lse - z[targets[n]];
    }
}

void crossentropy_backward(float *dlogits, const float *logits, const float *lse, const int *targets,
                           const float *dloss, int N, int V, int Vp) {
    check_shapes(targets, N, V, Vp);
    /* LAB 02 BEGIN softmax cross-entropy backward: dlogits = (exp(z - lse) - onehot(target)) * dloss */
    /* No restrict on the rows: dlogits may be logits itself. Element v is read, then written, and no
     * other element is touched in between, so working in place is safe. */
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * V))
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * Vp;
        float *dz = dlogits + (size_t)n * Vp;
        const int y = targets[n];
        if (y < 0) { /* an ignored position contributes nothing */
            for (int v = 0; v < Vp; v++) dz[v] = 0.0f;
            continue;
        }
        const float g = dloss[n], row_lse = lse[n];
        /* z - lse <= 0, so exp never overflows: the stable form of softmax. */
#pragma omp simd
        for (int v = 0; v < V; v++) dz[v] = ops_expf(z[v] - row_lse) * g;
        dz[y] -= g;
        for (int v = V; v < Vp; v++) dz[v] = 0.0f; /* padding columns are not in the softmax */
    }
    /* LAB 02 END */
}
