/* hooks.h: DDP communication hooks: how one gradient bucket is averaged over the ranks (plain, 16-bit, top-k, PowerSGD). */
#ifndef MIXPAR_DIST_HOOKS_H
#define MIXPAR_DIST_HOOKS_H

#include "comm/comm.h"
#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

/* A communication hook (通信钩子) replaces "allreduce the bucket in fp32" with something that sends fewer
 * bytes, as PyTorch DDP's register_comm_hook does. Every hook leaves the same averaged gradient on every
 * rank, so the replicas stay bit-identical; the lossy ones keep what they did not send in a per-rank
 * residual (error feedback, 误差反馈) and add it to the next step's gradient, so nothing is lost for good.
 *
 *   allreduce  the fp32 average (PyTorch's default allreduce_hook). Bytes: 2(p-1)/p x 4n.
 *   fp16,bf16  round the bucket to 16 bits, reduce, widen back (fp16_compress_hook, bf16_compress_hook).
 *              The CPU communicator reduces 16-bit data in fp32 on the wire, so these hooks reduce by hand:
 *              each rank sends every other rank that rank's 1/p chunk in 16 bits (a reduce-scatter by
 *              point-to-point), sums what it receives in fp32 in rank order, rounds once, and allgathers the
 *              16-bit chunks. Bytes: 2(p-1)/p x 2n, half of allreduce's.
 *   topk       error feedback + top-k sparsification (Stich et al. 2018; DGC, Lin et al. 2018): acc = g + e;
 *              send the k = ceil(ratio n) entries of largest |acc| as (int32 index, fp32 value) pairs by
 *              allgather, average what the ranks sent, and keep e = acc - sent. Bytes: (p-1) x 8k.
 *   powersgd   rank-r PowerSGD (Vogels et al. 2019) per 2-D tensor (rows m, cols n) of the bucket, with error
 *              feedback and warm start: M = G + E; P = M Q; allreduce P; orthonormalise P's columns;
 *              Q = M^T P; allreduce Q; G' = P Q^T; E = M - G'. Q is kept for the next step. Vectors, and
 *              matrices with r(m+n) >= mn, go uncompressed. Bytes: 2(p-1)/p x 4 r(m+n) per matrix.
 *
 *     ddp_hook *h = ddp_hook_create(&(ddp_hook_options){.kind = DDP_HOOK_TOPK, .topk_ratio = 0.01},
 *                                   tensors, ntensors, nparams);
 *     ddp_hook_reduce(h, comm, grads, lo, hi, COMM_ALGO_DEFAULT); // grads[lo, hi) is now the average
 */
typedef enum { DDP_HOOK_ALLREDUCE, DDP_HOOK_FP16, DDP_HOOK_BF16, DDP_HOOK_TOPK, DDP_HOOK_POWERSGD, DDP_NHOOKS } ddp_hook_kind;

/* "allreduce", "fp16", "bf16", "topk", "powersgd", then NULL: index = ddp_hook_kind (the config's enum). */
extern const char *const ddp_hook_names[];
int ddp_hook_from_name(const char *name); /* -1 when unknown */

typedef struct {
    ddp_hook_kind kind;
    double topk_ratio;  /* topk: share of each bucket's entries sent, (0, 1] [0.01 when 0] */
    int powersgd_rank;  /* powersgd: r [1 when 0] */
    uint64_t seed;      /* powersgd: Q's first values (the same on every rank) */
} ddp_hook_options;

typedef struct ddp_hook ddp_hook;

/* tensors (ntensors) describe the flat gradient buffer of nparams floats (model_tensors); powersgd needs
 * their shapes. The hook allocates its residual and PowerSGD's Q here (MEM_COMM). */
ddp_hook *ddp_hook_create(const ddp_hook_options *opt, const model_tensor *tensors, int ntensors, size_t nparams);
void ddp_hook_free(ddp_hook *h);
/* Replaces grads[lo, hi) by its average over c's ranks (exact or compressed). Buckets must be unions of
 * whole tensors (DDP's are: unions of layers). Collective: every rank calls it with the same span. */
void ddp_hook_reduce(ddp_hook *h, comm_t *c, float *grads, size_t lo, size_t hi, comm_algo algo);
const ddp_hook_options *ddp_hook_get_options(const ddp_hook *h);
/* The error-feedback residual (nparams floats; zeros for the exact hooks). */
const float *ddp_hook_residual(const ddp_hook *h);

/* ---------------------------------------------------------------- building blocks (tests, lab 16) */

/* k = ceil(ratio * n), at least 1 and at most n (0 when n is 0). */
size_t hooks_topk_count(size_t n, double ratio);
/* The k-th largest |x[i]| (k >= 1, k <= n); +inf when k is 0. */
float hooks_kth_magnitude(const float *x, size_t n, size_t k);
/* Top-k with error feedback over n entries. In: grad (n), residual (n, last step's e). Out: index, value
 * (k each): the k entries of acc = grad + residual with the largest |acc| (ties: lower index first);
 * residual = acc with those entries set to 0. So, entry by entry and exactly,
 *     residual_new[i] + (value sent for i, or 0) == (float)(grad[i] + residual_old[i]). */
void hooks_topk_compress(const float *grad, float *residual, size_t n, size_t k, int32_t *index, float *value);
/* Gram-Schmidt on the r columns of P (m, r) row-major: orthonormal columns (a zero column stays zero). */
void hooks_orthonormalize(float *P, size_t m, size_t r);
/* One PowerSGD step on M (m, n), already error-fed. P (m, r): scratch, out: the orthonormal left factor.
 * Q (n, r): in the warm start, out the averaged right factor. M out: P Q^T, the same on every rank. */
void hooks_powersgd_step(comm_t *c, float *M, size_t m, size_t n, size_t r, float *P, float *Q, comm_algo algo);
/* The 16-bit average of x (n) over c's ranks, as the fp16/bf16 hooks do it (dt COMM_FP16 or COMM_BF16). */
void hooks_lowp_allreduce(comm_t *c, float *x, size_t n, comm_dtype dt);

#endif
