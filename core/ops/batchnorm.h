/* batchnorm.h: batch normalisation (BatchNorm) of (N, C, S) activations with fp32 statistics, fp32 running
 * statistics, and SyncBN across data-parallel ranks (lab 25, part D). */
#ifndef MIXPAR_OPS_BATCHNORM_H
#define MIXPAR_OPS_BATCHNORM_H

#include <stdbool.h>

#include "comm/comm.h"
#include "fp/format.h"

/* Layout: x[(i * C + c) * S + k], sample i < N, channel c < C, position k < S (S = H * W of an image, 1 for
 * a (N, C) batch of features). A channel's statistics run over its N * S values:
 *
 *   training:  mean_c = (1/M) sum x;   var_c = (1/M) sum (x - mean_c)^2   (two passes; M = N * S values)
 *              y = (x - mean_c) * rstd_c * gamma_c + beta_c,   rstd_c = 1 / sqrt(var_c + eps)
 *              running_mean = (1 - momentum) * running_mean + momentum * mean_c
 *              running_var  = (1 - momentum) * running_var  + momentum * var_c * M / (M - 1)   (unbiased)
 *   eval:      the same y with running_mean and running_var in place of the batch's
 *
 * Mixed precision: the input may be fp16 or bf16 values (held here as floats), but every recipe accumulates
 * the sums in fp32 (PyTorch's cudnn and native kernels do, with fp32 running buffers): stats_fmt says in which
 * format the sums, the mean and the variance are rounded (norm_round of ops/norm_precision.h), &FP_FP32 except
 * to see why not.
 *
 * SyncBN (comm != NULL): the statistics of the global batch, all ranks' N_r * S values together: the ranks
 * allreduce their per-channel sums and their counts (so uneven batches weigh by their size), then the sums of
 * squared deviations from the global mean; backward allreduces its two per-channel sums (of dy and of
 * dy * xhat). With comm == NULL each rank normalises by its own batch (per-rank BN, what plain DDP does). */
typedef struct {
    int channels;               /* C */
    float momentum;             /* PyTorch's convention: the weight of the new batch, 0.1 */
    float eps;                  /* 1e-5 */
    const fp_format *stats_fmt; /* the format of the statistics' arithmetic: &FP_FP32 */
    comm_t *comm;               /* NULL: per-rank BN; else SyncBN over comm's ranks */
    float *gamma, *beta;        /* [C] fp32 weight (1) and bias (0) */
    float *running_mean;        /* [C] fp32, starts at 0 */
    float *running_var;         /* [C] fp32, starts at 1 */
    float *mean, *var, *rstd;   /* [C] the last training forward's batch statistics (backward reads mean, rstd) */
    double count;               /* M: the values per channel they came from, over all ranks */
    float *work;                /* [2C + 1] the sums (and the count) a step allreduces */
    long steps;                 /* training forwards so far (PyTorch's num_batches_tracked) */
} bn_layer;

void bn_init(bn_layer *bn, int channels, float momentum, float eps);
void bn_free(bn_layer *bn);

/* y (N, C, S) = BatchNorm(x); training: the batch's statistics (and the running ones updated), else the
 * running ones. Under SyncBN every rank of comm calls it (collectively), each with its own n >= 0. Training
 * needs M >= 2 values per channel over all ranks. */
void bn_forward(bn_layer *bn, const float *x, int n, int s, float *y, bool training);

/* After a training forward of the same x: dx (N, C, S) from dy, and this rank's dgamma, dbeta [C] (sums over
 * its own values: the parameter gradients, which DDP averages like any other). Collective under SyncBN. */
void bn_backward(bn_layer *bn, const float *x, const float *dy, int n, int s, float *dx, float *dgamma, float *dbeta);

#endif
