/* lab16_util.h: shared helpers of lab 16's tests: a one-rank communicator, seeded test data, and reference
 * checks for top-k with error feedback and for PowerSGD, each failure saying what was expected and why. */
#ifndef LAB16_UTIL_H
#define LAB16_UTIL_H

#include "mptest.h"

#include "base/rng.h"
#include "comm/comm.h"
#include "comm/launch.h"
#include "dist/hooks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The self backend: one rank, no mpirun. Averaging over one rank changes nothing, so what a test sees is the
 * compressor's own arithmetic. */
static inline comm_t *lab16_world(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MIXPAR_COMM", "WORLD_SIZE", "RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    return comm_init(NULL, NULL);
}

static inline void lab16_normal(float *x, size_t n, uint64_t seed, float scale) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) x[i] = scale * mp_rng_normal(&rng);
}

/* Runs top-k once and checks everything the contract says: k distinct indices in range, values equal to
 * acc = grad + residual_old at those indices, residual zero there and acc elsewhere, and every unsent |acc| no
 * larger than every sent one. Returns the number of problems reported. */
static inline int lab16_check_topk(const float *grad, float *residual, size_t n, size_t k, const char *what) {
    float *acc = malloc(n * sizeof *acc), *value = malloc((k ? k : 1) * sizeof *value);
    int32_t *index = malloc((k ? k : 1) * sizeof *index);
    char *sent = calloc(n, 1);
    MPT_REQUIRE(acc && value && index && sent, "out of memory");
    for (size_t i = 0; i < n; i++) acc[i] = grad[i] + residual[i];
    hooks_topk_compress(grad, residual, n, k, index, value);
    MPT_OBSERVE_NEAR_F32(residual, residual, (long)n, 0, 0); /* what the grader compares: it tells what was sent */
    int problems = 0;
    float smallest_sent = INFINITY;
    for (size_t j = 0; j < k && problems < 4; j++) {
        int32_t at = index[j];
        if (at < 0 || (size_t)at >= n) {
            mpt_fail(__FILE__, __LINE__, "%s: index[%zu] = %d is outside [0, %zu)\n      likely mistake: not filling "
                     "all k slots of index/value", what, j, (int)at, n);
            problems++;
            continue;
        }
        if (sent[at]) {
            mpt_fail(__FILE__, __LINE__, "%s: index %d is sent twice\n      likely mistake: taking the entries equal "
                     "to the threshold again after the ones above it", what, (int)at);
            problems++;
        }
        sent[at] = 1;
        if (value[j] != acc[at]) {
            mpt_fail(__FILE__, __LINE__, "%s: value sent for index %d\n      expected: %.9g (grad + residual = %.9g + "
                     "%.9g)\n      got:      %.9g\n      likely mistake: sending the gradient alone, without the "
                     "residual (no error feedback)", what, (int)at, acc[at], grad[at], acc[at] - grad[at], value[j]);
            problems++;
        }
        if (fabsf(acc[at]) < smallest_sent) smallest_sent = fabsf(acc[at]);
    }
    for (size_t i = 0; i < n && problems < 6; i++) {
        float want = sent[i] ? 0.0f : acc[i];
        if (residual[i] != want) {
            mpt_fail(__FILE__, __LINE__, "%s: residual[%zu] after the step\n      expected: %.9g (%s)\n      got:      "
                     "%.9g\n      likely mistake: %s", what, i, want, sent[i] ? "sent, so nothing stays" :
                     "not sent, so grad + old residual stays", residual[i],
                     sent[i] ? "not zeroing what was sent" : "overwriting the residual with the gradient instead of adding");
            problems++;
        } else if (!sent[i] && fabsf(acc[i]) > smallest_sent) {
            mpt_fail(__FILE__, __LINE__, "%s: entry %zu with |acc| = %.9g was kept back while an entry with |acc| = "
                     "%.9g was sent\n      likely mistake: choosing by value instead of magnitude (fabsf), or a wrong "
                     "threshold", what, i, fabsf(acc[i]), smallest_sent);
            problems++;
        }
    }
    free(acc), free(value), free(index), free(sent);
    return problems;
}

/* M = A B^T with A (m, rank), B (n, rank): exactly rank `rank`. */
static inline void lab16_low_rank(float *M, size_t m, size_t n, size_t rank, uint64_t seed) {
    float *A = malloc(m * rank * sizeof *A), *B = malloc(n * rank * sizeof *B);
    MPT_REQUIRE(A && B, "out of memory");
    lab16_normal(A, m * rank, seed, 1.0f);
    lab16_normal(B, n * rank, seed + 1, 1.0f);
    for (size_t i = 0; i < m; i++)
        for (size_t k = 0; k < n; k++) {
            double s = 0;
            for (size_t j = 0; j < rank; j++) s += (double)A[i * rank + j] * B[k * rank + j];
            M[i * n + k] = (float)s;
        }
    free(A), free(B);
}

/* One PowerSGD step of rank r on M (m, n) from a seeded Q; checks that P comes back with orthonormal columns,
 * that Q = M^T P (the second product, with the input M), and that M became P Q^T. Returns the largest
 * |P Q^T - M_in| relative to max |M_in| through *rel_err. */
static inline void lab16_powersgd(float *M, size_t m, size_t n, size_t r, uint64_t seed, double *rel_err) {
    comm_t *c = lab16_world();
    float *P = malloc(m * r * sizeof *P), *Q = malloc(n * r * sizeof *Q), *in = malloc(m * n * sizeof *in);
    MPT_REQUIRE(P && Q && in, "out of memory");
    memcpy(in, M, m * n * sizeof *M);
    lab16_normal(Q, n * r, seed, 1.0f);
    for (size_t i = 0; i < m * r; i++) P[i] = NAN; /* P is output only: it must be written */
    hooks_powersgd_step(c, M, m, n, r, P, Q, COMM_ALGO_DEFAULT);
    MPT_OBSERVE_NEAR_F32(M, M, (long)(m * n), 1e-3, 1e-5); /* what the grader compares with the reference */
    double worst = 0, scale = 0;
    for (size_t a = 0; a < r; a++)
        for (size_t b = 0; b <= a; b++) {
            double dot = 0;
            for (size_t i = 0; i < m; i++) dot += (double)P[i * r + a] * P[i * r + b];
            double want = a == b ? 1.0 : 0.0;
            if (a == b && fabs(dot) < 1e-6) continue; /* a column zeroed for a rank-deficient M is allowed */
            MPT_CHECK(fabs(dot - want) < 1e-4, "P's columns %zu and %zu: dot product %.6g, expected %.0f\n      "
                      "likely mistake: not orthonormalising P (hooks_orthonormalize) after its allreduce, or doing it "
                      "before", a, b, dot, want);
        }
    for (size_t k = 0; k < n; k++)
        for (size_t j = 0; j < r; j++) {
            double s = 0;
            for (size_t i = 0; i < m; i++) s += (double)in[i * n + k] * P[i * r + j];
            double d = fabs(s - Q[k * r + j]);
            if (d > 1e-3 * (1 + fabs(s))) {
                mpt_fail(__FILE__, __LINE__, "Q[%zu][%zu] after the step\n      expected: %.6g (M^T P, with the "
                         "orthonormal P)\n      got:      %.6g\n      likely mistake: computing Q from the P before "
                         "orthonormalising it, or M P instead of M^T P", k, j, s, Q[k * r + j]);
                k = n;
                break;
            }
        }
    for (size_t i = 0; i < m * n; i++) {
        scale = fmax(scale, fabs(in[i]));
        worst = fmax(worst, fabs((double)M[i] - in[i]));
    }
    *rel_err = scale > 0 ? worst / scale : worst;
    free(P), free(Q), free(in);
    comm_finalize(c);
}

/* Starts build/labs/lab16_worker with args (after the program's name: MODE DIR ...; DIR is made here and written into
 * args[1]'s place) on `ranks` ranks through mpirun; stops the test with the likely cause when a rank fails. */
static inline void lab16_launch(int ranks, char **args, char *dir, size_t dir_len, const char *what) {
    const char *worker = "./build/labs/lab16_worker";
    MPT_REQUIRE(access(worker, X_OK) == 0, "%s is missing: 'make labtests LAB=16' (or make grade LAB=16) builds it",
                worker);
    MPT_REQUIRE(comm_launch_mpirun() != NULL, "mpirun is not on PATH: 'make deps' installs OpenMPI");
    snprintf(dir, dir_len, "/tmp/mixpar-lab16-XXXXXX");
    MPT_REQUIRE(mkdtemp(dir) != NULL, "cannot make a temporary folder in /tmp");
    char *argv[10] = {(char *)worker};
    int argc = 1;
    for (; args[argc - 1] && argc < 9; argc++) argv[argc] = argc == 2 ? dir : args[argc - 1];
    argv[argc] = NULL;
    setenv("MIXPAR_COMM_TIMEOUT", "10", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    comm_launch_opts o = {.ranks = ranks, .timeout_s = 25, .quiet = true};
    char *output = NULL;
    int rc = comm_launch_run(&o, argv, &output);
    if (rc != 0) {
        const char *out = output ? output : "";
        size_t len = strlen(out);
        char copy[1600];
        snprintf(copy, sizeof copy, "%s", len > 1500 ? out + len - 1500 : out);
        free(output);
        mpt_fail_stop(__FILE__, __LINE__, "%s on %d ranks: mpirun exited with %d: %s\n      ranks' output (end):\n%s",
                      what, ranks, rc, strstr(copy, "not done") ? "a region is still a LAB_TODO stub"
                      : rc == 124 ? "the ranks did not finish: every rank must call the same collectives" : "a rank failed",
                      copy);
    }
    free(output);
}

#endif
