/* lab26_util.h: what lab 26's tests share: lab 12's multi-rank checker pointed at lab 26's worker, the bytes each
 * rank of the hierarchical allreduce sends (written out without mixpar's helpers), the hints, and a small cluster
 * with round numbers for the cost-model tests. */
#ifndef LAB26_UTIL_H
#define LAB26_UTIL_H

#define LAB12_WORKER "./build/labs/lab26_worker"
#define LAB12_WORKER_LAB "26"
#include "../../lab12-communication-primitives/tests/lab12_run.h"

#include "plan/simulate.h"

#include <math.h>

#define HINT_HIER "phase 1: algo_ring_reduce_scatter on h.intra (local rank j ends with chunk j of the node's sum); " \
    "phase 2: algo_ring_allreduce on h.inter of chunk j only (chunk_at and chunk_len of the buffer cut into k = " \
    "comm_size(h.intra) chunks); phase 3: algo_ring_allgather on h.intra"
#define HINT_FOLD "a rank of the smaller last node (h.folded) sends its whole buffer to h.fold_partner and receives the " \
    "result from it; that partner (h.fold_partner >= 0 on node 0) adds the buffer in before phase 1 " \
    "(algo_recv_reduce) and sends the result back after phase 3"

/* The node size the running test asked for (MIXPAR_RANKS_PER_NODE), for the byte count below. */
static int lab26_ranks_per_node;

static inline void lab26_set_ranks_per_node(int k) {
    char text[16];
    snprintf(text, sizeof text, "%d", k);
    setenv("MIXPAR_RANKS_PER_NODE", text, 1);
    lab26_ranks_per_node = k;
}

/* fp32 bytes rank r of p sends in one hierarchical allreduce of n elements, nodes of k ranks:
 *   a rank of a smaller last node: its buffer once (n), to node 0;
 *   otherwise (local rank j of node v, q full nodes): ring reduce-scatter and allgather inside the node, every chunk
 *   of n/k but its own (chunk j) and but chunk j+1; ring allreduce of chunk j (c elements) among the q nodes, every
 *   sub-chunk of c/q but v's and v+1's; and on node 0 the result back to the folded rank (n). */
static inline uint64_t bytes_hier_allreduce(int r, int p, size_t n, int root) {
    (void)root;
    int k = lab26_ranks_per_node <= 0 || lab26_ranks_per_node > p ? p : lab26_ranks_per_node;
    int q = p / k, full = q * k;
    if (r >= full) return 4ull * n;
    int v = r / k, j = r % k;
    uint64_t e = 0;
    if (k > 1) e += 2 * n - lab12_chunk_size(n, k, j) - lab12_chunk_size(n, k, (j + 1) % k);
    size_t c = lab12_chunk_size(n, k, j);
    if (q > 1) e += 2 * c - lab12_chunk_size(c, q, v) - lab12_chunk_size(c, q, (v + 1) % q);
    if (r < p - full) e += n;
    return 4ull * e;
}

/* Runs `op` hierarchical allreduce checks on `ranks` ranks in nodes of k. */
static inline void lab26_check(int ranks, int k, const char *dtype, const char *redop, unsigned seed, const size_t *counts,
                               int ncounts, const char *hint) {
    lab26_set_ranks_per_node(k);
    lab12_case c = {"allreduce", "hierarchical", dtype, redop, 0, seed, hint};
    lab12_check(ranks, &c, counts, ncounts, true, bytes_hier_allreduce);
}

/* The study's models and their parameter counts (Hugging Face's for GPT-2 XL, Meta's for LLaMA-7B and Llama-2-70B; the
 * planner's plan_model_params gives the same), written out so that these tests do not run lab 01's region. */
static const struct {
    const char *name;
    double params;
} LAB26_MODELS[] = {{"gpt2-1.5b", 1557611200.0}, {"llama-7b", 6738415616.0}, {"llama-70b", 68976648192.0}};
enum { LAB26_NMODELS = sizeof LAB26_MODELS / sizeof LAB26_MODELS[0] };

/* A cluster with round numbers: 4 GPUs per node; inside 1 us and 100 GB/s, between nodes 10 us and 10 GB/s;
 * 100 TFLOP/s per GPU, 80 GB. */
static inline sim_cluster lab26_round_cluster(void) {
    sim_cluster c = {.about = "round numbers", .gpus_per_node = 4, .intra_bw = 100e9, .intra_alpha = 1e-6,
                     .inter_bw = 10e9, .inter_alpha = 10e-6, .peak_flops = 100e12, .gpu_bytes = 80e9};
    snprintf(c.name, sizeof c.name, "round");
    return c;
}

#endif
