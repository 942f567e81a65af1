/* allreduce.h: the ring allreduce, step by step (reduce-scatter, then allgather), and its alpha-beta cost. */
#ifndef MIXPAR_VIZ_ALLREDUCE_H
#define MIXPAR_VIZ_ALLREDUCE_H

#include <stdbool.h>
#include <stdint.h>

/* N ranks each hold a buffer cut into N chunks. In reduce-scatter step s (0 .. N-2) rank r sends chunk
 * (r - s) mod N to rank r+1, which adds it to its own; after N-1 steps rank r holds the full sum of chunk
 * (r + 1) mod N. In allgather step k (0 .. N-2) rank r sends chunk (r + 1 - k) mod N, which the receiver
 * copies. 2(N-1) steps in all, each moving S/N bytes per rank: that is why a ring is bandwidth-optimal.
 *
 *     vz_allreduce a;
 *     vz_allreduce_reset(&a, 4);
 *     while (a.step < vz_allreduce_steps(4)) vz_allreduce_advance(&a);
 *     // now every a.holds[r][c] == 0xF: every rank has every rank's contribution to every chunk */
enum { VZ_ALLREDUCE_MAX_RANKS = 16 };

typedef struct {
    int ranks;
    int step; /* steps done, 0 .. 2(ranks-1) */
    /* holds[r][c]: bit q set when rank r's chunk c includes rank q's contribution */
    uint32_t holds[VZ_ALLREDUCE_MAX_RANKS][VZ_ALLREDUCE_MAX_RANKS];
} vz_allreduce;

void vz_allreduce_reset(vz_allreduce *a, int ranks); /* ranks is clamped to 2 .. VZ_ALLREDUCE_MAX_RANKS */
int vz_allreduce_steps(int ranks);                   /* 2(ranks-1) */
/* The chunk rank r sends in step `step` (0-based), or -1 past the end. */
int vz_allreduce_send_chunk(int ranks, int rank, int step);
bool vz_allreduce_in_allgather(int ranks, int step);
/* Performs step a->step (every rank sends at once); does nothing when done. */
void vz_allreduce_advance(vz_allreduce *a);
int vz_allreduce_count(const vz_allreduce *a, int rank, int chunk); /* contributions held: 1 .. ranks */

/* Alpha-beta model of a ring allreduce of `bytes` over n ranks: 2(n-1) steps of alpha + (bytes/n)/beta.
 * alpha: seconds of latency per step; beta: bytes per second of each link. */
double vz_allreduce_model_seconds(int ranks, double bytes, double alpha, double beta);

#endif
