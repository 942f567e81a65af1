/* crossentropy.c: fused softmax + cross-entropy over a (possibly padded) vocabulary, forward and backward. */
#include "ops/crossentropy.h"

#include "base/error.h"
#include "base/lab.h"
#include "ops/fastmath.h"
#include "ops/isa.h"
#include "ops/parallel.h"

#include <math.h>
#include <stddef.h>

static void check_shapes(const int *targets, int N, int V, int Vp) {
    MP_ASSERT(V > 0 && Vp >= V, "cross-entropy needs 0 < V <= Vp, got V=%d Vp=%d", V, Vp);
    for (int n = 0; n < N; n++)
        MP_ASSERT(targets[n] >= -1 && targets[n] < V, "target %d at position %d is outside [-1, %d)", targets[n], n, V);
}

/* Floats per block of a row: 8 KiB, so a block read once from memory (its max) is still in L1 when its exps
 * are summed. The row is read from memory once, not twice (max, then sum), and no exp is taken twice. */
enum { CE_BLOCK = 2048 };

/* One row: the online (running) max and sum of exp over blocks. When a block raises the max from m to m',
 * the sum so far is rescaled by exp(m - m') (one exp per rise, a few per row), so every term is
 * exp(z - running max) <= 1 and the sum stays in [1, V]: no overflow, as with a separate max pass. */
OPS_ISA_INLINE void crossentropy_forward_row(float *losses, float *lse, const float *logits, const int *targets,
                                              int n, int V, int Vp) {
    const float *restrict z = logits + (size_t)n * Vp;
    float max = -INFINITY, sum = 0.0f;
    for (int lo = 0; lo < V; lo += CE_BLOCK) {
        const int hi = V - lo < CE_BLOCK ? V : lo + CE_BLOCK;
        float block_max = -INFINITY;
#pragma omp simd reduction(max : block_max)
        for (int v = lo; v < hi; v++) block_max = z[v] > block_max ? z[v] : block_max;
        if (block_max > max) { /* the first block: sum is 0 and exp(-inf) is 0 */
            sum *= ops_expf(max - block_max);
            max = block_max;
        }
        float block_sum = 0.0f;
#pragma omp simd reduction(+ : block_sum)
        for (int v = lo; v < hi; v++) block_sum += ops_expf(z[v] - max);
        sum += block_sum;
    }
    const float row_lse = max + logf(sum); /* NaN in, NaN out: exp(NaN - max) poisons the sum */
    if (lse) lse[n] = row_lse;
    losses[n] = targets[n] < 0 ? 0.0f : row_lse - z[targets[n]];
}
OPS_ISA_CLONES(crossentropy_forward_row,
               (float *losses, float *lse, const float *logits, const int *targets, int n, int V, int Vp),
               (losses, lse, logits, targets, n, V, Vp));

void crossentropy_forward(float *losses, float *lse, const float *logits, const int *targets, int N, int V, int Vp) {
    check_shapes(targets, N, V, Vp);
    void (*const row)(float *, float *, const float *, const int *, int, int, int) =
        crossentropy_forward_row_isa[ops_isa_current()];
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * V))
    for (int n = 0; n < N; n++) row(losses, lse, logits, targets, n, V, Vp);
}

OPS_ISA_LAB_CLONES
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
