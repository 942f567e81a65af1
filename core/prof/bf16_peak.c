/* bf16_peak.c: the peak of the bf16 products, measured as the sgemm peak is (prof/bf16_peak.h). */
#include "prof/bf16_peak.h"

#include "base/clock.h"
#include "base/mem.h"
#include "ops/matmul_lowp.h"

#include <math.h>
#include <stdint.h>

double prof_measure_bf16_gemm_flops(int n) {
    const size_t nn = (size_t)n * n;
    uint16_t *a = mem_alloc(nn * sizeof *a, MEM_OTHER, "bf16 peak a");
    uint16_t *b = mem_alloc(nn * sizeof *b, MEM_OTHER, "bf16 peak b");
    float *c = mem_alloc(nn * sizeof *c, MEM_OTHER, "bf16 peak c");
    for (size_t i = 0; i < nn; i++) c[i] = 0.5f + (float)(i % 7);
    lowp_encode(a, c, nn, LOWP_BF16);
    lowp_encode(b, c, nn, LOWP_BF16);
    double best = INFINITY;
    for (int r = 0; r <= 3; r++) { /* the first call warms the caches, the packing areas and the threads */
        double t0 = mp_now();
        matmul_lowp_forward(c, a, b, NULL, n, n, n, LOWP_BF16);
        double t = mp_now() - t0;
        if (r > 0 && t < best) best = t;
    }
    mem_free(a);
    mem_free(b);
    mem_free(c);
    return 2.0 * n * n * n / best;
}
