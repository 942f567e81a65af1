/* dataparallel.h: single-process DataParallel, the baseline DDP replaced: K replicas, scatter, gather onto a master, copy back. */
#ifndef MIXPAR_DIST_DATAPARALLEL_H
#define MIXPAR_DIST_DATAPARALLEL_H

#include "model/model.h"

#include <stdint.h>

/* PyTorch's nn.DataParallel, written out: one process holds K replicas of the model. Each step
 *   scatter    the (B,T) batch is cut into K pieces of B/K rows, copied into each replica's input buffers;
 *   compute    each replica runs forward and backward on its piece, one after the other (one process);
 *   gather     the replicas' gradients are summed onto replica 0, the master (K-1 gradient buffers read);
 *   (step)     the caller's optimizer updates the master only;
 *   broadcast  the master's weights are copied into the other K-1 replicas.
 * Everything funnels through the master: it reads (K-1)·P floats and writes (K-1)·P more every step,
 * where DDP's ring allreduce has every rank send only 2(K-1)/K·P and no rank is special.
 *
 *     dataparallel *dp = dataparallel_create(&cfg, K, seed);
 *     for each step:
 *         dataparallel_forward_backward(dp, inputs, targets, B, T);   // master grads = grads of the whole batch
 *         optimizer step on dataparallel_master(dp)
 *         dataparallel_broadcast(dp);
 */
typedef struct dataparallel dataparallel;

/* K >= 1 replicas of a model of this (completed) config, all initialised with `seed`. */
dataparallel *dataparallel_create(const model_config *cfg, int replicas, uint64_t seed);
void dataparallel_free(dataparallel *dp);
int dataparallel_replicas(const dataparallel *dp);
model *dataparallel_master(dataparallel *dp);
model *dataparallel_replica(dataparallel *dp, int k);

/* Zeroes every replica's gradients, scatters the (B,T) batch (B divisible by K), runs each replica, and sums
 * the gradients onto the master. Each replica's loss is scaled by 1/K, so the master ends up with the
 * gradient of the mean loss over all B*T positions: exactly what one model on the whole batch computes.
 * Returns that mean loss. */
float dataparallel_forward_backward(dataparallel *dp, const int *inputs, const int *targets, int B, int T);
/* Copies the master's parameters into every other replica (after the optimizer step). */
void dataparallel_broadcast(dataparallel *dp);

/* Where the time went and what was copied, summed since create (or the last reset). */
typedef struct {
    int steps;                 /* forward_backward calls */
    double scatter_s, compute_s, gather_s, broadcast_s;
    uint64_t scatter_bytes;    /* inputs and targets copied into the replicas */
    uint64_t gather_bytes;     /* gradient bytes read from replicas 1..K-1 into the master */
    uint64_t broadcast_bytes;  /* parameter bytes written into replicas 1..K-1 */
} dataparallel_stats;
void dataparallel_get_stats(const dataparallel *dp, dataparallel_stats *out);
void dataparallel_reset_stats(dataparallel *dp);

#endif
