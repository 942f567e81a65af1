/* lab16_worker.c: the program lab 16's two-rank tests start (build/labs/lab16_worker): one PowerSGD P/Q step
 * on every rank, or a few DDP training steps with gradient accumulation.
 *
 *   lab16_worker powersgd DIR M N R
 *     rank k fills its M x N matrix from mp_rng seed 1600 + k (normal values) and every rank the same N x R
 *     starting Q from seed 1699; after one step rank k writes DIR/rank<k>.txt:
 *       world=W m=M n=N r=R
 *       M=v0,v1,...      (the matrix after the step, row-major, %.9g)
 *
 *   lab16_worker accum DIR STEPS ACCUM B
 *     every rank trains the same tiny fp32 GPT under DDP (one bucket, the MPI library's allreduce, SGD lr 0.1) for
 *     STEPS steps of ACCUM micro-batches of B rows (train_step_run: your LAB 16 region); step s's global batch has
 *     world x ACCUM x B rows, rank k takes the k-th ACCUM x B of them, so runs with the same world x ACCUM x B see
 *     the same rows. Rank k writes DIR/rank<k>.txt:
 *       world=W accum=A b=B
 *       step=S loss=L bytes=N params=HASH   (bytes: what this rank sent during the step; HASH: FNV-1a of the weights) */
#include "base/rng.h"
#include "comm/comm.h"
#include "dist/ddp.h"
#include "dist/hooks.h"
#include "model/model.h"
#include "train/step.h"

#include <omp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Noreturn void usage(const char *why) {
    fprintf(stderr, "lab16_worker: %s\nusage: lab16_worker powersgd DIR M N R\n       lab16_worker accum DIR STEPS "
                    "ACCUM B\n", why);
    exit(2);
}

static void normal(float *x, size_t n, uint64_t seed) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) x[i] = mp_rng_normal(&rng);
}

static FILE *open_report(const char *dir, int rank) {
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.txt", dir, rank);
    FILE *f = fopen(path, "w");
    if (!f) usage("cannot write the report");
    return f;
}

static int powersgd(comm_t *c, char **argv) {
    long m = atol(argv[3]), n = atol(argv[4]), r = atol(argv[5]);
    if (m < 1 || n < 1 || r < 1 || m > 4096 || n > 4096 || r > n) usage("M, N, R out of range");
    const int rank = comm_rank(c);
    float *M = malloc((size_t)(m * n) * sizeof *M), *P = malloc((size_t)(m * r) * sizeof *P),
          *Q = malloc((size_t)(n * r) * sizeof *Q);
    if (!M || !P || !Q) usage("out of memory");
    normal(M, (size_t)(m * n), 1600 + (uint64_t)rank);
    normal(Q, (size_t)(n * r), 1699);
    hooks_powersgd_step(c, M, (size_t)m, (size_t)n, (size_t)r, P, Q, COMM_ALGO_DEFAULT);
    FILE *f = open_report(argv[2], rank);
    fprintf(f, "world=%d m=%ld n=%ld r=%ld\nM=", comm_size(c), m, n, r);
    for (long i = 0; i < m * n; i++) fprintf(f, "%s%.9g", i ? "," : "", M[i]);
    fprintf(f, "\n");
    fclose(f);
    free(M), free(P), free(Q);
    return 0;
}

static uint64_t bytes_sent(const comm_t *c) {
    comm_stats_t st;
    comm_stats(c, &st);
    uint64_t total = 0;
    for (int op = 0; op < COMM_NOPS; op++) total += st.bytes_sent[op];
    return total;
}

enum { T = 16, V = 64 };

static int accumulate(comm_t *c, char **argv) {
    const long steps = atol(argv[3]), accum = atol(argv[4]), b = atol(argv[5]);
    if (steps < 1 || steps > 50 || accum < 1 || accum > 8 || b < 1 || b > 8) usage("STEPS, ACCUM, B out of range");
    const int rank = comm_rank(c), world = comm_size(c);
    omp_set_num_threads(1); /* the ranks share this machine's cores */
    model_config cfg = {.arch = MODEL_GPT2, .V = V, .maxT = T, .L = 2, .C = 32, .NH = 2};
    model_config_complete(&cfg);
    model *m = model_create(&cfg);
    model_init(m, 16);
    ddp_options o = {.bucket_elems = 0, .algo = COMM_ALGO_NATIVE, .overlap = false};
    ddp *d = ddp_create(m, c, &o, 0x16);
    train_step ts;
    optim_config opt = optim_config_default(OPTIM_SGD);
    train_step_init(&ts, m, &opt, 0);
    ts.ddp = d;
    const size_t rows = (size_t)(accum * b), P = model_num_params(m);
    int *inputs = malloc(rows * T * sizeof(int)), *targets = malloc(rows * T * sizeof(int));
    if (!inputs || !targets) usage("out of memory");
    FILE *f = open_report(argv[2], rank);
    fprintf(f, "world=%d accum=%ld b=%ld\n", world, accum, b);
    for (long s = 0; s < steps; s++) {
        for (size_t r = 0; r < rows; r++) /* global row rank * rows + r of step s */
            for (int t = 0; t < T; t++) {
                uint64_t key = (uint64_t)s * 1000003u + (uint64_t)rank * rows + r;
                inputs[r * T + t] = (int)(mp_hash32(key, (uint64_t)t) % (uint32_t)V);
                targets[r * T + t] = (int)(mp_hash32(key, (uint64_t)t + 1) % (uint32_t)V);
            }
        uint64_t before = bytes_sent(c);
        train_step_result res = train_step_run(&ts, inputs, targets, (int)b, T, (int)accum, 0.1);
        const unsigned char *w = (const unsigned char *)model_params(m);
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < P * sizeof(float); i++) h = (h ^ w[i]) * 1099511628211ull;
        fprintf(f, "step=%ld loss=%.9g bytes=%llu params=%016llx\n", s + 1, (double)res.loss,
                (unsigned long long)(bytes_sent(c) - before), (unsigned long long)h);
        fflush(f);
    }
    fclose(f);
    free(inputs);
    free(targets);
    train_step_free(&ts);
    ddp_free(d);
    model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    comm_t *c = comm_init(&argc, &argv);
    int rc;
    if (argc == 6 && strcmp(argv[1], "powersgd") == 0) rc = powersgd(c, argv);
    else if (argc == 6 && strcmp(argv[1], "accum") == 0) rc = accumulate(c, argv);
    else usage("wrong arguments");
    comm_finalize(c);
    return rc;
}
