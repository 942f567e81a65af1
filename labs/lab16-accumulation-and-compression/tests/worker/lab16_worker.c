/* lab16_worker.c: the program lab 16's two-rank test starts (build/labs/lab16_worker): one PowerSGD P/Q step
 * (hooks_powersgd_step) on every rank, each with a matrix of its own.
 *
 *   lab16_worker powersgd DIR M N R
 *     rank k fills its M x N matrix from mp_rng seed 1600 + k (normal values) and every rank the same N x R
 *     starting Q from seed 1699; after one step rank k writes DIR/rank<k>.txt:
 *       world=W m=M n=N r=R
 *       M=v0,v1,...      (the matrix after the step, row-major, %.9g) */
#include "base/rng.h"
#include "comm/comm.h"
#include "dist/hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Noreturn void usage(const char *why) {
    fprintf(stderr, "lab16_worker: %s\nusage: lab16_worker powersgd DIR M N R\n", why);
    exit(2);
}

static void normal(float *x, size_t n, uint64_t seed) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) x[i] = mp_rng_normal(&rng);
}

int main(int argc, char **argv) {
    comm_t *c = comm_init(&argc, &argv);
    if (argc != 6 || strcmp(argv[1], "powersgd") != 0) usage("wrong arguments");
    long m = atol(argv[3]), n = atol(argv[4]), r = atol(argv[5]);
    if (m < 1 || n < 1 || r < 1 || m > 4096 || n > 4096 || r > n) usage("M, N, R out of range");
    const int rank = comm_rank(c);
    float *M = malloc((size_t)(m * n) * sizeof *M), *P = malloc((size_t)(m * r) * sizeof *P),
          *Q = malloc((size_t)(n * r) * sizeof *Q);
    if (!M || !P || !Q) usage("out of memory");
    normal(M, (size_t)(m * n), 1600 + (uint64_t)rank);
    normal(Q, (size_t)(n * r), 1699);
    hooks_powersgd_step(c, M, (size_t)m, (size_t)n, (size_t)r, P, Q, COMM_ALGO_DEFAULT);
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.txt", argv[2], rank);
    FILE *f = fopen(path, "w");
    if (!f) usage("cannot write the report");
    fprintf(f, "world=%d m=%ld n=%ld r=%ld\nM=", comm_size(c), m, n, r);
    for (long i = 0; i < m * n; i++) fprintf(f, "%s%.9g", i ? "," : "", M[i]);
    fprintf(f, "\n");
    fclose(f);
    free(M), free(P), free(Q);
    comm_finalize(c);
    return 0;
}
