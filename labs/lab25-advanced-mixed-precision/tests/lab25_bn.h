/* lab25_bn.h: what lab 25's BatchNorm tests (part D) and its worker share: the batches (drawn from a seed, the
 * same on every rank), the layer's weights, a double-precision reference step, element-wise comparison, and
 * running build/labs/lab25_worker on N ranks to read back what SyncBN and per-rank BN gave each rank. */
#ifndef LAB25_BN_H
#define LAB25_BN_H

#include "base/rng.h"
#include "ops/batchnorm.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef MIXPAR_MPTEST_H
#include "comm/launch.h"
#endif

enum { LAB25_BN_MAX_C = 8, LAB25_BN_MAX_VALUES = 4096, LAB25_BN_STEPS = 2 };
#define LAB25_BN_MOMENTUM 0.1f
#define LAB25_BN_EPS 1e-5f

/* The global batch of step `step` (from 1): N samples of C channels of S positions; channel c has mean 3(c - 1)
 * and spread 0.5 + c, so the channels differ; dy ~ N(0, 1) + 0.3 (not centred: sum dy matters). */
static inline void lab25_bn_batch(uint64_t seed, int step, int n, int C, int S, float *x, float *dy) {
    mp_rng rng;
    mp_rng_seed(&rng, seed * 1000003u + (uint64_t)step);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < C; c++)
            for (int k = 0; k < S; k++) {
                size_t at = ((size_t)i * C + c) * S + k;
                x[at] = 3.0f * (float)(c - 1) + (0.5f + (float)c) * mp_rng_normal(&rng);
                dy[at] = mp_rng_normal(&rng) + 0.3f;
            }
}

/* gamma and beta that are not 1 and 0, so a formula that drops one shows. */
static inline void lab25_bn_params(bn_layer *bn) {
    for (int c = 0; c < bn->channels; c++) {
        bn->gamma[c] = 1.5f + 0.25f * (float)c;
        bn->beta[c] = 0.1f * (float)c - 0.2f;
    }
}

/* What one training step gives, in double: y, dx (N*C*S), dgamma, dbeta, mean, var (biased), and the running
 * statistics after it. sum_size: per channel, the sum of |dy| (1 + |xhat|), the size of the terms that dbeta and
 * dgamma add up (lab25_bn_sum_tol). */
typedef struct {
    double y[LAB25_BN_MAX_VALUES], dx[LAB25_BN_MAX_VALUES];
    double dgamma[LAB25_BN_MAX_C], dbeta[LAB25_BN_MAX_C], mean[LAB25_BN_MAX_C], var[LAB25_BN_MAX_C];
    double running_mean[LAB25_BN_MAX_C], running_var[LAB25_BN_MAX_C], sum_size[LAB25_BN_MAX_C];
} lab25_bn_ref;

static inline void lab25_bn_ref_init(lab25_bn_ref *r, int C) {
    for (int c = 0; c < C; c++) r->running_mean[c] = 0, r->running_var[c] = 1;
}

/* One training step of BatchNorm in double on the whole batch x, as batchnorm.h defines it. */
static inline void lab25_bn_ref_step(lab25_bn_ref *r, const bn_layer *bn, const float *x, const float *dy, int n,
                                     int S) {
    const int C = bn->channels;
    const double M = (double)n * S, mom = bn->momentum;
    for (int c = 0; c < C; c++) {
        double s = 0, q = 0, sdy = 0, sdyx = 0, size = 0;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < S; k++) s += x[((size_t)i * C + c) * S + k];
        double mean = s / M;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < S; k++) q += (x[((size_t)i * C + c) * S + k] - mean) * (x[((size_t)i * C + c) * S + k] - mean);
        double var = q / M, rstd = 1 / sqrt(var + bn->eps);
        for (int i = 0; i < n; i++)
            for (int k = 0; k < S; k++) {
                size_t at = ((size_t)i * C + c) * S + k;
                double xhat = (x[at] - mean) * rstd;
                r->y[at] = xhat * bn->gamma[c] + bn->beta[c];
                sdy += dy[at];
                sdyx += dy[at] * xhat;
                size += fabs(dy[at]) * (1 + fabs(xhat));
            }
        for (int i = 0; i < n; i++)
            for (int k = 0; k < S; k++) {
                size_t at = ((size_t)i * C + c) * S + k;
                double xhat = (x[at] - mean) * rstd;
                r->dx[at] = bn->gamma[c] * rstd * (dy[at] - sdy / M - xhat * sdyx / M);
            }
        r->mean[c] = mean;
        r->var[c] = var;
        r->dgamma[c] = sdyx;
        r->dbeta[c] = sdy;
        r->sum_size[c] = size;
        r->running_mean[c] = (1 - mom) * r->running_mean[c] + mom * mean;
        r->running_var[c] = (1 - mom) * r->running_var[c] + mom * var * M / (M - 1);
    }
}

/* The absolute tolerance of dbeta and dgamma, sums of M float terms: a float sum of terms t_i is off by at most about
 * (M - 1) x 2^-24 x sum |t_i| (M = 28: 1.6e-6 x the terms' size), and xhat's own float error (x - mean with |x| up
 * to about 10 and a spread of 0.5 to 2.5: about 5e-7) adds as much times sum |dy|. So 2e-6 x sum |dy| (1 + |xhat|),
 * the largest channel's: a fixed 1e-5 failed a correct sum on some seeds, while a wrong formula is off by about the
 * sum itself. */
static inline double lab25_bn_sum_tol(const lab25_bn_ref *r, int C) {
    double size = 0;
    for (int c = 0; c < C; c++) size = r->sum_size[c] > size ? r->sum_size[c] : size;
    return 2e-6 * size;
}

/* ---------------------------------------------------------------- the worker's report */

/* What the worker writes per rank and mode (SyncBN, then per-rank BN), after LAB25_BN_STEPS training steps:
 * the last step's y and dx for the rank's samples, its dgamma, dbeta, and the running statistics. */
typedef struct {
    int n;                                    /* this rank's samples */
    float y[LAB25_BN_MAX_VALUES], dx[LAB25_BN_MAX_VALUES];
    float dgamma[LAB25_BN_MAX_C], dbeta[LAB25_BN_MAX_C], running_mean[LAB25_BN_MAX_C], running_var[LAB25_BN_MAX_C];
} lab25_bn_report;

static inline bool lab25_bn_write(FILE *f, const lab25_bn_report *r, int C, int S) {
    size_t v = (size_t)r->n * C * S;
    return fwrite(&r->n, sizeof r->n, 1, f) == 1 && fwrite(r->y, sizeof(float), v, f) == v &&
           fwrite(r->dx, sizeof(float), v, f) == v && fwrite(r->dgamma, sizeof(float), C, f) == (size_t)C &&
           fwrite(r->dbeta, sizeof(float), C, f) == (size_t)C && fwrite(r->running_mean, sizeof(float), C, f) == (size_t)C &&
           fwrite(r->running_var, sizeof(float), C, f) == (size_t)C;
}

static inline bool lab25_bn_read(FILE *f, lab25_bn_report *r, int C, int S) {
    if (fread(&r->n, sizeof r->n, 1, f) != 1 || r->n < 0 || (size_t)r->n * C * S > LAB25_BN_MAX_VALUES) return false;
    size_t v = (size_t)r->n * C * S;
    return fread(r->y, sizeof(float), v, f) == v && fread(r->dx, sizeof(float), v, f) == v &&
           fread(r->dgamma, sizeof(float), C, f) == (size_t)C && fread(r->dbeta, sizeof(float), C, f) == (size_t)C &&
           fread(r->running_mean, sizeof(float), C, f) == (size_t)C &&
           fread(r->running_var, sizeof(float), C, f) == (size_t)C;
}

#ifdef MIXPAR_MPTEST_H
/* got[0..n) against want within abs_tol + rel_tol * |want|; on the first miss a failure that names the element
 * and the likely mistake. Records the array for the grader. */
static inline bool lab25_bn_close(const char *file, int line, const float *got, const double *want, int n,
                                  double rel_tol, double abs_tol, const char *what, const char *mistake) {
    mpt_observe_near_f64(file, line, got, want, n, rel_tol, abs_tol);
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= abs_tol + rel_tol * fabs(want[i]))) {
            mpt_fail(file, line, "%s, element %d of %d\n      expected: %.7g\n      got:      %.7g\n"
                     "      likely mistake: %s", what, i, n, want[i], (double)got[i], mistake);
            return false;
        }
    return true;
}
#define BN_CLOSE(got, want, n, rel, abs_, what, mistake) \
    lab25_bn_close(__FILE__, __LINE__, (got), (want), (n), (rel), (abs_), (what), (mistake))


/* ---------------------------------------------------------------- tests only */

/* Starts build/labs/lab25_worker check on `ranks` ranks (counts[r] samples each) and reads every rank's
 * reports: out[r][0] SyncBN, out[r][1] per-rank BN. Stops the test with the reason when the run fails. */
enum { LAB25_BN_MAX_RANKS = 4, LAB25_BN_WAIT_S = 40 };
static inline void lab25_bn_launch(int ranks, const int *counts, int C, int S, uint64_t seed,
                                   lab25_bn_report out[][2]) {
    const char *worker = "build/labs/lab25_worker";
    MPT_REQUIRE(ranks <= LAB25_BN_MAX_RANKS, "at most %d ranks", LAB25_BN_MAX_RANKS);
    MPT_REQUIRE(access(worker, X_OK) == 0, "%s is missing: 'make labtests LAB=25' (or make grade LAB=25) builds it",
                worker);
    MPT_REQUIRE(comm_launch_mpirun() != NULL, "mpirun is not on PATH: 'make deps' installs OpenMPI");
    char dir[] = "/tmp/mixpar-lab25-XXXXXX";
    MPT_REQUIRE(mkdtemp(dir) != NULL, "cannot make a temporary folder in /tmp");
    char seed_text[24], c_text[16], s_text[16], counts_text[64] = "";
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    snprintf(c_text, sizeof c_text, "%d", C);
    snprintf(s_text, sizeof s_text, "%d", S);
    for (int r = 0; r < ranks; r++)
        snprintf(counts_text + strlen(counts_text), sizeof counts_text - strlen(counts_text), r ? ",%d" : "%d",
                 counts[r]);
    char *argv[] = {(char *)worker, "check", dir, seed_text, c_text, s_text, counts_text, NULL};
    setenv("MIXPAR_COMM_TIMEOUT", "20", 1);
    comm_launch_opts o = {.ranks = ranks, .timeout_s = LAB25_BN_WAIT_S, .quiet = true};
    char *output = NULL;
    int rc = comm_launch_run(&o, argv, &output);
    bool ok = rc == 0;
    char path[512];
    for (int r = 0; r < ranks; r++) {
        snprintf(path, sizeof path, "%s/rank%d.bin", dir, r);
        FILE *f = fopen(path, "rb");
        if (ok) ok = f && lab25_bn_read(f, &out[r][0], C, S) && lab25_bn_read(f, &out[r][1], C, S);
        if (f) fclose(f);
        unlink(path);
    }
    rmdir(dir);
    if (!ok) {
        size_t len = output ? strlen(output) : 0;
        const char *tail = output ? output + (len > 1500 ? len - 1500 : 0) : "";
        const char *why = output && strstr(output, "not done") ? "a LAB 25 region is still a LAB_TODO stub"
                        : rc == 124 ? "the ranks did not finish: do all ranks make the same allreduce calls, with the "
                                      "same counts, in the same order?"
                        : output && strstr(output, "disagree") ? "the ranks' allreduce calls disagree on the number of "
                                                                 "elements"
                        : rc == 0 ? "a rank wrote no report" : "a rank failed (see its output)";
        mpt_fail_stop(__FILE__, __LINE__, "BatchNorm on %d ranks (samples %s): mpirun exited with %d: %s\n"
                      "      ranks' output (end):\n%s", ranks, counts_text, rc, why, tail);
    }
    free(output);
}
#endif

#endif
