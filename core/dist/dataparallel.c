/* dataparallel.c: single-process DataParallel (the baseline for DDP): scatter the batch, run K replicas, gather onto the master. */
#include "dist/dataparallel.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

struct dataparallel {
    int K;
    model **replicas;        /* (K); replicas[0] is the master */
    int *piece_inputs;       /* (K, B/K, T): the scattered batch, one piece per replica */
    int *piece_targets;      /* (K, B/K, T) */
    size_t piece_cap;        /* ints allocated in each of the two buffers above */
    dataparallel_stats stats;
};

dataparallel *dataparallel_create(const model_config *cfg, int replicas, uint64_t seed) {
    if (replicas < 1) MP_FAIL("at least 1 replica", "%d replicas", replicas);
    dataparallel *dp = calloc(1, sizeof *dp);
    MP_ASSERT(dp, "out of memory");
    dp->K = replicas;
    dp->replicas = calloc((size_t)replicas, sizeof *dp->replicas);
    MP_ASSERT(dp->replicas, "out of memory");
    for (int k = 0; k < replicas; k++) {
        dp->replicas[k] = model_create(cfg);
        model_init(dp->replicas[k], seed); /* the same seed: identical replicas from the start */
    }
    return dp;
}

void dataparallel_free(dataparallel *dp) {
    if (!dp) return;
    for (int k = 0; k < dp->K; k++) model_free(dp->replicas[k]);
    free(dp->replicas);
    if (dp->piece_cap) {
        mem_free(dp->piece_inputs);
        mem_free(dp->piece_targets);
    }
    free(dp);
}

int dataparallel_replicas(const dataparallel *dp) { return dp->K; }
model *dataparallel_master(dataparallel *dp) { return dp->replicas[0]; }
model *dataparallel_replica(dataparallel *dp, int k) {
    MP_ASSERT(k >= 0 && k < dp->K, "replica %d of %d", k, dp->K);
    return dp->replicas[k];
}

float dataparallel_forward_backward(dataparallel *dp, const int *inputs, const int *targets, int B, int T) {
    const int K = dp->K;
    if (B < K || B % K != 0)
        MP_FAIL_HINT("a batch divisible by the number of replicas", "pick B = K * micro-batch",
                     "batch %d over %d replicas", B, K);
    const int b = B / K;
    const size_t piece = (size_t)b * (size_t)T; /* ints per replica */

    /* Scatter: in PyTorch a host-to-device copy per replica; here a copy into each replica's own buffers. */
    double t0 = mp_now();
    if (piece * (size_t)K > dp->piece_cap) {
        if (dp->piece_cap) {
            mem_free(dp->piece_inputs);
            mem_free(dp->piece_targets);
        }
        dp->piece_cap = piece * (size_t)K;
        dp->piece_inputs = mem_alloc(dp->piece_cap * sizeof(int), MEM_OTHER, "dataparallel inputs");
        dp->piece_targets = mem_alloc(dp->piece_cap * sizeof(int), MEM_OTHER, "dataparallel targets");
    }
    memcpy(dp->piece_inputs, inputs, piece * (size_t)K * sizeof(int));
    memcpy(dp->piece_targets, targets, piece * (size_t)K * sizeof(int));
    dp->stats.scatter_bytes += 2 * piece * (size_t)K * sizeof(int);
    double t1 = mp_now();

    /* Compute: one replica after the other. Each scales its loss by 1/K, so that the sum of the K
     * gradients is the gradient of the mean over the whole batch (DataParallel computes the loss on the
     * gathered outputs, which comes to the same). */
    float loss = 0;
    for (int k = 0; k < K; k++) {
        model *m = dp->replicas[k];
        model_zero_grad(m);
        loss += model_forward(m, dp->piece_inputs + (size_t)k * piece, dp->piece_targets + (size_t)k * piece, b, T);
        model_backward(m, 1.0f / (float)K);
    }
    loss /= (float)K;
    double t2 = mp_now();

    /* Gather: every other replica's gradients summed onto the master, in replica order. */
    const size_t P = model_num_params(dp->replicas[0]);
    float *master = model_grads(dp->replicas[0]); // (P)
    for (int k = 1; k < K; k++) {
        const float *g = model_grads(dp->replicas[k]); // (P)
        for (size_t i = 0; i < P; i++) master[i] += g[i];
        dp->stats.gather_bytes += P * sizeof(float);
    }
    double t3 = mp_now();

    dp->stats.steps++;
    dp->stats.scatter_s += t1 - t0;
    dp->stats.compute_s += t2 - t1;
    dp->stats.gather_s += t3 - t2;
    return loss;
}

void dataparallel_broadcast(dataparallel *dp) {
    double t0 = mp_now();
    const size_t P = model_num_params(dp->replicas[0]);
    const float *master = model_params(dp->replicas[0]); // (P)
    for (int k = 1; k < dp->K; k++) {
        memcpy(model_params(dp->replicas[k]), master, P * sizeof(float));
        dp->stats.broadcast_bytes += P * sizeof(float);
    }
    dp->stats.broadcast_s += mp_now() - t0;
}

void dataparallel_get_stats(const dataparallel *dp, dataparallel_stats *out) { *out = dp->stats; }
void dataparallel_reset_stats(dataparallel *dp) { memset(&dp->stats, 0, sizeof dp->stats); }
