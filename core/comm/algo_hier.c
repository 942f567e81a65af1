/* algo_hier.c: the hierarchical allreduce (lab 26): a ring inside each node, a ring across the nodes, a ring
 * inside again, so the slow network between nodes carries 1/k of the data a flat ring would send over it. */
#include "comm/algo.h"

#include "base/lab.h"

/* A cluster has two kinds of links: fast ones inside a node (NVLink, shared memory: hundreds of GB/s) and a
 * slower network between nodes (InfiniBand, Ethernet: 12 to 50 GB/s per GPU). A flat ring over all p ranks
 * runs at the pace of its slowest hop, and every rank's data crosses the network. The hierarchy (NCCL's and
 * Horovod's hierarchical allreduce) splits the work by link:
 *
 *   1. reduce-scatter inside the node (k ranks): local rank j ends with chunk j of the node's sum (1/k of n)
 *   2. allreduce across the nodes, among the ranks with the same local rank j: chunk j of the global sum
 *   3. allgather inside the node: every rank ends with every chunk
 *
 * Phase 2 moves only n/k per rank over the network, and the k local ranks use it at the same time (one NIC
 * each in a DGX). With q nodes, in the alpha-beta model (alpha: latency per message, B: bandwidth):
 *
 *   t = 2 (k-1) (alpha_intra + n / (k B_intra))  +  2 (q-1) (alpha_inter + n / (k q B_inter))
 *
 * Nodes are consecutive ranks: node = rank / k, local rank = rank % k. When k does not divide p, the last
 * node is smaller (m < k ranks) and its chunks would not line up with the full nodes' chunks; its ranks
 * therefore fold in first, as recursive halving-doubling does for rank counts that are not powers of two:
 * rank j of the small node sends its buffer to local rank j of node 0, which adds it to its own, and gets
 * the result back at the end. */

typedef struct {
    comm_t *intra;   /* this rank's node (local ranks 0..k-1); NULL on a rank folded into node 0 */
    comm_t *inter;   /* the ranks with this local rank, one per full node; NULL on a folded rank */
    int fold_partner; /* on node 0: the small node's rank that folds into this one (-1: none); on a folded
                       * rank: the node-0 rank it folds into */
    bool folded;     /* this rank is in the small last node: it only sends its buffer and receives the result */
} hier_layout;

/* The layout for c's ranks_per_node, making (once) and caching the two groups. Collective over c. */
static hier_layout hier_layout_of(comm_t *c) {
    const int p = c->size, r = c->rank;
    int k = c->ranks_per_node;
    if (k <= 0 || k > p) k = p;
    const int full_nodes = p / k, full_ranks = full_nodes * k;
    if (c->hier_k != k) {
        algo_hier_release(c);
        bool in_full = r < full_ranks;
        c->hier_intra = comm_split(c, in_full ? r / k : COMM_UNDEFINED, r);
        c->hier_inter = comm_split(c, in_full ? r % k : COMM_UNDEFINED, r);
        if (c->hier_intra) comm_set_name(c->hier_intra, "node");
        if (c->hier_inter) comm_set_name(c->hier_inter, "across-nodes");
        c->hier_k = k;
    }
    hier_layout h = {c->hier_intra, c->hier_inter, -1, r >= full_ranks};
    if (h.folded) h.fold_partner = r - full_ranks;                         /* local rank j of node 0 */
    else if (r < p - full_ranks) h.fold_partner = full_ranks + r;           /* node 0's rank j <- small node's j */
    return h;
}

void algo_hier_release(comm_t *c) {
    comm_free(c->hier_intra);
    comm_free(c->hier_inter);
    c->hier_intra = c->hier_inter = NULL;
    c->hier_k = 0;
}

/* The groups' messages count as c's (comm_stats, comm events), and a timeout inside them names c's call. */
static void groups_begin(comm_t *c, const hier_layout *h, uint64_t sent[2]) {
    comm_t *g[2] = {h->intra, h->inter};
    for (int i = 0; i < 2; i++)
        if (g[i]) g[i]->ctx = c->ctx, sent[i] = g[i]->ctx_bytes_sent;
}

static void groups_end(comm_t *c, const hier_layout *h, const uint64_t sent[2]) {
    comm_t *g[2] = {h->intra, h->inter};
    for (int i = 0; i < 2; i++)
        if (g[i]) c->ctx_bytes_sent += g[i]->ctx_bytes_sent - sent[i], g[i]->ctx.active = false;
}

void algo_hier_allreduce(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op) {
    hier_layout h = hier_layout_of(c);
    uint64_t sent[2] = {0, 0};
    groups_begin(c, &h, sent);
    /* LAB 26 BEGIN hierarchical allreduce: fold the small node in, reduce-scatter in the node, allreduce across nodes, allgather in the node */
    if (h.folded) {
        algo_send(c, buf, count, h.fold_partner, dt);
        algo_recv(c, buf, count, h.fold_partner, dt);
    } else {
        if (h.fold_partner >= 0) algo_recv_reduce(c, buf, count, h.fold_partner, dt, op);
        const int k = comm_size(h.intra), j = comm_rank(h.intra);
        comm_chunks chunks = comm_chunks_of(buf, count, k, dt);
        algo_ring_reduce_scatter(h.intra, buf, count, dt, op);
        algo_ring_allreduce(h.inter, chunk_at(&chunks, j), chunk_len(&chunks, j), dt, op);
        algo_ring_allgather(h.intra, buf, count, dt);
        if (h.fold_partner >= 0) algo_send(c, buf, count, h.fold_partner, dt);
    }
    /* LAB 26 END */
    groups_end(c, &h, sent);
}
