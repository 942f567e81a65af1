/* lab25_worker.c: the program lab 25's BatchNorm tests and experiment start on N ranks (build/labs/lab25_worker),
 * built from this tree's regions (core/ops/batchnorm.c).
 *
 *   lab25_worker check DIR SEED C S N0,N1,...
 *     rank r takes samples [N0 + ... + N(r-1), + Nr) of each global batch (lab25_bn.h), runs LAB25_BN_STEPS
 *     training steps (forward + backward) with SyncBN and, separately, with per-rank BN, and writes
 *     DIR/rank<r>.bin (the last step's y, dx, dgamma, dbeta and the running statistics, SyncBN first).
 *   lab25_worker experiment TSV
 *     per-rank BN against SyncBN for per-rank batches of 1 to 32 samples of 16 positions (8 channels with known
 *     means and spreads, 200 steps each), iid and with each rank's data shifted (shards sorted by class): the
 *     error of the normalised values in training and in eval, the running variance's error, and how far the
 *     ranks' running means drift apart. Rank 0 prints the table and writes TSV.
 * Bad arguments stop with exit 2. */
#include "../lab25_bn.h"
#include "base/error.h"
#include "comm/comm.h"
#include "ops/norm_precision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(comm_t *world, int argc, char **argv) {
    if (argc != 7) mp_usage_error("lab25_worker", "usage: lab25_worker check DIR SEED C S N0,N1,...");
    const int rank = comm_rank(world), ranks = comm_size(world);
    uint64_t seed = strtoull(argv[3], NULL, 10);
    int C = atoi(argv[4]), S = atoi(argv[5]), counts[64], nc = 0, total = 0, first = 0;
    for (char *p = argv[6]; *p && nc < 64; p = *p == ',' ? p + 1 : p) counts[nc++] = (int)strtol(p, &p, 10);
    if (C < 1 || C > LAB25_BN_MAX_C || S < 1 || nc != ranks)
        mp_usage_error("lab25_worker", "C in 1..%d, S >= 1 and one count per rank (%d ranks, %d counts)",
                       LAB25_BN_MAX_C, ranks, nc);
    for (int r = 0; r < nc; r++) {
        if (r < rank) first += counts[r];
        total += counts[r];
    }
    if ((size_t)total * C * S > LAB25_BN_MAX_VALUES) mp_usage_error("lab25_worker", "at most %d values", LAB25_BN_MAX_VALUES);
    static float x[LAB25_BN_MAX_VALUES], dy[LAB25_BN_MAX_VALUES];
    static lab25_bn_report rep[2];
    const size_t per_sample = (size_t)C * S;
    for (int mode = 0; mode < 2; mode++) {
        bn_layer bn;
        bn_init(&bn, C, LAB25_BN_MOMENTUM, LAB25_BN_EPS);
        lab25_bn_params(&bn);
        bn.comm = mode == 0 ? world : NULL;
        lab25_bn_report *r = &rep[mode];
        r->n = counts[rank];
        for (int step = 1; step <= LAB25_BN_STEPS; step++) {
            lab25_bn_batch(seed, step, total, C, S, x, dy);
            const float *mx = x + (size_t)first * per_sample, *mdy = dy + (size_t)first * per_sample;
            bn_forward(&bn, mx, r->n, S, r->y, true);
            bn_backward(&bn, mx, mdy, r->n, S, r->dx, r->dgamma, r->dbeta);
        }
        memcpy(r->running_mean, bn.running_mean, (size_t)C * sizeof(float));
        memcpy(r->running_var, bn.running_var, (size_t)C * sizeof(float));
        bn_free(&bn);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/rank%d.bin", argv[2], rank);
    FILE *f = fopen(path, "wb");
    if (!f || !lab25_bn_write(f, &rep[0], C, S) || !lab25_bn_write(f, &rep[1], C, S) || fclose(f) != 0) {
        fprintf(stderr, "lab25_worker: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- the experiment */

enum { EXP_C = 8, EXP_S = 16, EXP_STEPS = 200, EXP_MAX_B = 32 };

static double exp_mu(int c) { return 2.0 * c - 7.0; }
static double exp_sigma(int c) { return 0.5 + 0.5 * c; }

/* b samples of rank `rank`'s stream; shard shift: rank r's values moved by shift * (r - (W-1)/2) * sigma_c. */
static void exp_draw(mp_rng *rng, int b, double shift_r, float *x) {
    for (int i = 0; i < b; i++)
        for (int c = 0; c < EXP_C; c++)
            for (int k = 0; k < EXP_S; k++)
                x[((size_t)i * EXP_C + c) * EXP_S + k] =
                    (float)(exp_mu(c) + exp_sigma(c) * (shift_r + mp_rng_normal(rng)));
}

/* Squared error of y against the ideal normalisation with the population's mean and spread (sum, count). */
static void exp_error(const float *x, const float *y, int b, double spread, double *sq, double *cnt) {
    for (int i = 0; i < b; i++)
        for (int c = 0; c < EXP_C; c++)
            for (int k = 0; k < EXP_S; k++) {
                size_t at = ((size_t)i * EXP_C + c) * EXP_S + k;
                double ideal = (x[at] - exp_mu(c)) / (exp_sigma(c) * spread);
                *sq += (y[at] - ideal) * (y[at] - ideal);
                *cnt += 1;
            }
}

typedef struct {
    double train_rms, eval_rms, var_err, drift;
} exp_result;

static exp_result exp_run(comm_t *world, int b, bool sync, double shift) {
    const int rank = comm_rank(world), W = comm_size(world);
    double shift_r = shift * (rank - (W - 1) / 2.0), spread2 = 1;
    for (int r = 0; r < W; r++) spread2 += shift * shift * (r - (W - 1) / 2.0) * (r - (W - 1) / 2.0) / W;
    double spread = sqrt(spread2); /* the mixture's spread in units of sigma_c */
    bn_layer bn;
    bn_init(&bn, EXP_C, 0.1f, 1e-5f);
    bn.comm = sync ? world : NULL;
    static float x[EXP_MAX_B * EXP_C * EXP_S], y[EXP_MAX_B * EXP_C * EXP_S];
    mp_rng rng;
    mp_rng_seed(&rng, 2500 + 97 * (uint64_t)rank + (uint64_t)b);
    double sq = 0, cnt = 0, esq = 0, ecnt = 0;
    for (int t = 0; t < EXP_STEPS; t++) {
        exp_draw(&rng, b, shift_r, x);
        bn_forward(&bn, x, b, EXP_S, y, true);
        if (t >= EXP_STEPS / 2) exp_error(x, y, b, spread, &sq, &cnt);
    }
    /* eval: this rank's running statistics on fresh samples from the whole population (every shard) */
    for (int t = 0; t < 8; t++) {
        exp_draw(&rng, EXP_MAX_B / 4, shift * ((t % W) - (W - 1) / 2.0), x);
        bn_forward(&bn, x, EXP_MAX_B / 4, EXP_S, y, false);
        exp_error(x, y, EXP_MAX_B / 4, spread, &esq, &ecnt);
    }
    float sums[4] = {(float)sq, (float)cnt, (float)esq, (float)ecnt}, var_err = 0;
    comm_allreduce(world, sums, sums, 4, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
    for (int c = 0; c < EXP_C; c++) {
        double want = exp_sigma(c) * exp_sigma(c) * spread2;
        var_err += (float)(fabs(bn.running_var[c] - want) / want / EXP_C);
    }
    comm_allreduce(world, &var_err, &var_err, 1, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
    /* how far the ranks' running means are apart, in units of sigma_c: max over channels of max - min */
    float hi[EXP_C], lo[EXP_C], drift = 0;
    for (int c = 0; c < EXP_C; c++) hi[c] = lo[c] = (float)(bn.running_mean[c] / exp_sigma(c));
    comm_allreduce(world, hi, hi, EXP_C, COMM_FP32, COMM_MAX, COMM_ALGO_DEFAULT);
    comm_allreduce(world, lo, lo, EXP_C, COMM_FP32, COMM_MIN, COMM_ALGO_DEFAULT);
    for (int c = 0; c < EXP_C; c++) drift = fmaxf(drift, hi[c] - lo[c]);
    bn_free(&bn);
    return (exp_result){sqrt(sums[0] / sums[1]), sqrt(sums[2] / sums[3]), var_err / W, drift};
}

/* One rank, values around 1000 with spread 0.5 stored in fp16: the variance with fp16 and with fp32 statistics. */
static void exp_fp16_stats(void) {
    enum { N = 48 };
    float x[N], y[N];
    mp_rng rng;
    mp_rng_seed(&rng, 1000);
    double s = 0, q = 0;
    for (int i = 0; i < N; i++) s += x[i] = norm_round(&FP_FP16, 1000.0f + 0.5f * mp_rng_normal(&rng));
    for (int i = 0; i < N; i++) q += (x[i] - s / N) * (x[i] - s / N);
    printf("\nfp16 inputs around 1000 (spread 0.5), %d values, one channel: the batch variance (true %.5f)\n", N, q / N);
    const fp_format *fmts[2] = {&FP_FP16, &FP_FP32};
    for (int i = 0; i < 2; i++) {
        bn_layer bn;
        bn_init(&bn, 1, 0.1f, 1e-5f);
        bn.stats_fmt = fmts[i];
        bn_forward(&bn, x, N, 1, y, true);
        printf("  statistics in %-5s mean %10.4f  var %9.5f  (error %6.1f%%)\n", fmts[i]->name, (double)bn.mean[0],
               (double)bn.var[0], 100 * fabs(bn.var[0] - q / N) / (q / N));
        bn_free(&bn);
    }
}

static int experiment(comm_t *world, int argc, char **argv) {
    if (argc != 3) mp_usage_error("lab25_worker", "usage: lab25_worker experiment TSV");
    const int rank = comm_rank(world), W = comm_size(world);
    FILE *tsv = NULL;
    if (rank == 0) {
        tsv = fopen(argv[2], "w");
        if (!tsv) mp_usage_error("lab25_worker", "cannot write %s", argv[2]);
        fprintf(tsv, "# shift\tper_rank_batch\tsync\ttrain_rms\teval_rms\tvar_err\tdrift\n");
        printf("%d ranks, %d channels of %d positions, %d steps, momentum 0.1; errors against the population's "
               "normalisation (x - mu) / sigma\n\n", W, EXP_C, EXP_S, EXP_STEPS);
        printf("%-6s %6s  %-9s %10s %10s %13s %15s\n", "shards", "batch", "BN", "train rms", "eval rms",
               "running var", "means apart");
    }
    static const int batches[] = {1, 2, 4, 8, 32};
    static const double shifts[] = {0, 1};
    for (size_t h = 0; h < 2; h++)
        for (size_t i = 0; i < sizeof batches / sizeof *batches; i++) {
            if (shifts[h] > 0 && batches[i] != 8) continue;
            for (int sync = 0; sync < 2; sync++) {
                exp_result e = exp_run(world, batches[i], sync, shifts[h]);
                if (rank != 0) continue;
                printf("%-6s %6d  %-9s %10.4f %10.4f %12.1f%% %15.3f\n", shifts[h] > 0 ? "sorted" : "iid",
                       batches[i], sync ? "SyncBN" : "per-rank", e.train_rms, e.eval_rms, 100 * e.var_err, e.drift);
                fprintf(tsv, "%g\t%d\t%d\t%.6g\t%.6g\t%.6g\t%.6g\n", shifts[h], batches[i], sync, e.train_rms,
                        e.eval_rms, e.var_err, e.drift);
            }
        }
    if (rank == 0) {
        printf("\n(batch: samples per rank, each of %d positions; train rms: the normalised values' error in training, "
               "steps %d-%d;\n eval rms: with the running statistics; running var: its mean relative error; means apart:"
               " how far apart\n the ranks' running means end, in sigmas; sorted: rank r's data shifted by "
               "(r - 1.5) sigma)\n", EXP_S, EXP_STEPS / 2 + 1, EXP_STEPS);
        exp_fp16_stats();
        fclose(tsv);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "check") != 0 && strcmp(argv[1], "experiment") != 0))
        mp_usage_error("lab25_worker", "usage: lab25_worker check DIR SEED C S N0,N1,... | experiment TSV");
    comm_t *world = comm_init(&argc, &argv);
    int rc = strcmp(argv[1], "check") == 0 ? check(world, argc, argv) : experiment(world, argc, argv);
    comm_finalize(world);
    return rc;
}
