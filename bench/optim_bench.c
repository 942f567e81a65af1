/* optim_bench.c: time one optimizer step over a GPT-2-124M-sized flat span, for every optimizer, and the
 * gradient-norm pass; report seconds per step and the memory traffic in GB/s.
 *
 *     build/bench/optim_bench [PARAMS [REPS]]       defaults: 124M parameters, 5 timed steps
 *     OMP_NUM_THREADS=1 build/bench/optim_bench     one thread
 *
 * An optimizer step does a few flops per parameter and streams every array once, so its speed is set by
 * memory bandwidth: the line "copy" (read one array, write another, same threads) is the practical ceiling. Bytes per
 * parameter counted as moved (fp32 arrays, each read or written once):
 *     sgd       12   read p, g; write p
 *     momentum  20   read p, g, b; write p, b
 *     adam(w)   28   read p, g, m, v; write p, m, v
 *     lamb      40   pass 1 reads p, g, m, v and writes m, v; pass 2 reads p, m, v and writes p
 *     norm       4   read g (sum of squares in double)
 */
#include "base/clock.h"
#include "base/mem.h"
#include "base/parse.h"
#include "optim/clip.h"
#include "optim/optimizer.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_REPS = 100 };

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double bytes_per_param, size_t n, double *times, int reps) {
    qsort(times, (size_t)reps, sizeof *times, cmp_double);
    double best = times[0], median = times[reps / 2];
    printf("%-9s %6.0f B/param   best %8.4f s   median %8.4f s   %6.1f GB/s (best)\n", what, bytes_per_param, best,
           median, bytes_per_param * (double)n / best / 1e9);
}

int main(int argc, char **argv) {
    double count = 124e6, reps_d = 5;
    if (argc > 1 && !parse_count(argv[1], &count)) {
        fprintf(stderr, "usage: optim_bench [PARAMS [REPS]]   PARAMS like 124M, 1.5B; got '%s'\n", argv[1]);
        return 2;
    }
    if (argc > 2 && (!parse_count(argv[2], &reps_d) || reps_d < 1 || reps_d > MAX_REPS)) {
        fprintf(stderr, "usage: optim_bench [PARAMS [REPS]]   REPS 1..%d; got '%s'\n", MAX_REPS, argv[2]);
        return 2;
    }
    if (count < 1 || count > 4e9) {
        fprintf(stderr, "optim_bench: PARAMS between 1 and 4B, got %g\n", count);
        return 2;
    }
    size_t n = (size_t)count;
    int reps = (int)reps_d;
    float *p = mem_alloc(n * sizeof(float), MEM_PARAM, "bench.param");   // (n)
    float *g = mem_alloc(n * sizeof(float), MEM_GRAD, "bench.grad");     // (n)
    float *m = mem_alloc(n * sizeof(float), MEM_OPTIM, "bench.m");       // (n)
    float *v = mem_alloc(n * sizeof(float), MEM_OPTIM, "bench.v");       // (n)
    /* Touch every page from the threads that will use it (first-touch placement), with values that keep
     * the arithmetic ordinary: no zeros, no denormals. */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        p[i] = 0.02f * (float)((i * 2654435761u) % 1000) / 1000.0f - 0.01f;
        g[i] = 1e-3f * (float)((i * 40503u) % 997) / 997.0f - 5e-4f;
        m[i] = v[i] = 0;
    }
    printf("optimizer step over %zu fp32 parameters (%.0f MB per array), %d threads, %d timed steps after 1 warm-up\n",
           n, (double)n * 4 / 1e6, omp_get_max_threads(), reps);

    double times[MAX_REPS];
    for (int r = 0; r <= reps; r++) {
        double t0 = mp_now();
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) m[i] = p[i];
        if (r) times[r - 1] = mp_now() - t0;
    }
    report("copy", 8, n, times, reps);

    static const double bytes[OPTIM_NKINDS] = {12, 20, 28, 28, 40};
    for (int k = 0; k < OPTIM_NKINDS; k++) {
        memset(m, 0, n * sizeof(float));
        memset(v, 0, n * sizeof(float));
        optim_hparams h = optim_info_of((optim_kind)k)->defaults;
        h.weight_decay = 0.1;
        for (int r = 0; r <= reps; r++) {
            double t0 = mp_now();
            optim_update((optim_kind)k, p, g, m, v, n, &h, r + 1);
            if (r) times[r - 1] = mp_now() - t0;
        }
        report(optim_info_of((optim_kind)k)->name, bytes[k], n, times, reps);
    }

    double norm = 0;
    for (int r = 0; r <= reps; r++) {
        double t0 = mp_now();
        norm = clip_norm_finish(clip_sum_squares(g, n));
        if (r) times[r - 1] = mp_now() - t0;
    }
    report("norm", 4, n, times, reps);
    printf("(gradient norm %.6g; parameter 0 after the runs %.6g)\n", norm, (double)p[0]);
    mem_free(p), mem_free(g), mem_free(m), mem_free(v);
    return 0;
}
