/* allreduce.c: the ring allreduce, step by step, and its alpha-beta cost. */
#include "allreduce.h"

#include <string.h>

static int mod(int a, int n) { return ((a % n) + n) % n; }

void vz_allreduce_reset(vz_allreduce *a, int ranks) {
    if (ranks < 2) ranks = 2;
    if (ranks > VZ_ALLREDUCE_MAX_RANKS) ranks = VZ_ALLREDUCE_MAX_RANKS;
    memset(a, 0, sizeof *a);
    a->ranks = ranks;
    for (int r = 0; r < ranks; r++)
        for (int c = 0; c < ranks; c++) a->holds[r][c] = 1u << r; /* each rank starts with its own gradients */
}

int vz_allreduce_steps(int ranks) { return 2 * (ranks - 1); }

bool vz_allreduce_in_allgather(int ranks, int step) { return step >= ranks - 1; }

int vz_allreduce_send_chunk(int ranks, int rank, int step) {
    if (step < 0 || step >= vz_allreduce_steps(ranks)) return -1;
    if (!vz_allreduce_in_allgather(ranks, step)) return mod(rank - step, ranks);
    return mod(rank + 1 - (step - (ranks - 1)), ranks);
}

void vz_allreduce_advance(vz_allreduce *a) {
    int n = a->ranks;
    if (a->step >= vz_allreduce_steps(n)) return;
    uint32_t before[VZ_ALLREDUCE_MAX_RANKS][VZ_ALLREDUCE_MAX_RANKS];
    memcpy(before, a->holds, sizeof before); /* all sends of a step happen at once, from the old state */
    bool gather = vz_allreduce_in_allgather(n, a->step);
    for (int r = 0; r < n; r++) {
        int c = vz_allreduce_send_chunk(n, r, a->step), to = mod(r + 1, n);
        a->holds[to][c] = gather ? before[r][c] : (before[to][c] | before[r][c]);
    }
    a->step++;
}

int vz_allreduce_count(const vz_allreduce *a, int rank, int chunk) { return __builtin_popcount(a->holds[rank][chunk]); }

double vz_allreduce_model_seconds(int ranks, double bytes, double alpha, double beta) {
    if (ranks < 2) return 0;
    return vz_allreduce_steps(ranks) * (alpha + bytes / ranks / beta);
}
