/* algo.h: the collective algorithms on send/recv (lab 12) and the helpers they are written with. */
#ifndef MIXPAR_COMM_ALGO_H
#define MIXPAR_COMM_ALGO_H

#include "comm/comm_internal.h"

#include <stddef.h>

/* ---------------------------------------------------------------- chunk arithmetic
 * A buffer of `count` elements cut into `parts` chunks that differ by at most one element: the first
 * count % parts chunks get one extra. count = 10, parts = 4 -> sizes 3 3 2 2 at offsets 0 3 6 8.
 * Every rank computes the same cut, so no sizes need to be sent. */
size_t comm_chunk_offset(size_t count, int parts, int i); /* first element of chunk i; i = parts gives count */
size_t comm_chunk_count(size_t count, int parts, int i);  /* elements in chunk i */
/* a mod p in [0, p) for any int a (C's % keeps the sign of a: -1 % 4 == -1). */
static inline int comm_mod(int a, int p) { return ((a % p) + p) % p; }

/* A buffer seen as `parts` chunks, so algorithms can say "chunk i" and "chunks lo..hi-1". */
typedef struct {
    char *base;
    size_t count; /* elements in the whole buffer */
    int parts;
    size_t elem;  /* bytes per element */
} comm_chunks;

static inline comm_chunks comm_chunks_of(void *buf, size_t count, int parts, comm_dtype dt) {
    return (comm_chunks){(char *)buf, count, parts, comm_dtype_size(dt)};
}
/* Chunks lo .. hi-1 (consecutive, so one contiguous span): where they start and how many elements. */
static inline void *chunk_at(const comm_chunks *b, int lo) { return b->base + comm_chunk_offset(b->count, b->parts, lo) * b->elem; }
static inline size_t chunks_len(const comm_chunks *b, int lo, int hi) {
    return comm_chunk_offset(b->count, b->parts, hi) - comm_chunk_offset(b->count, b->parts, lo);
}
static inline size_t chunk_len(const comm_chunks *b, int i) { return chunks_len(b, i, i + 1); }

/* ---------------------------------------------------------------- point-to-point helpers
 * Blocking (with the communicator's timeout), on the collective channel. Counts are elements of dt.
 * The exchanges cut their messages into segments (MIXPAR_COMM_SEGMENT bytes, default 512 KiB) with
 * several in flight, so reducing one segment overlaps receiving the next: the pipelining that makes a
 * ring allreduce reach the link's bandwidth. Each receive must match the sender's count exactly; a
 * mismatch stops the program with a message naming both ranks and both sizes. */
void algo_send(comm_t *c, const void *buf, size_t count, int dst, comm_dtype dt);
void algo_recv(comm_t *c, void *buf, size_t count, int src, comm_dtype dt);
/* buf (count) op= what src sends (count); the message is received into scratch, then reduced. */
void algo_recv_reduce(comm_t *c, void *inout, size_t count, int src, comm_dtype dt, comm_redop op);
/* At the same time: send `send` (send_count) to dst and receive recv_count elements from src into `recv`. */
void algo_sendrecv(comm_t *c, const void *send, size_t send_count, int dst, void *recv, size_t recv_count, int src,
                   comm_dtype dt);
/* At the same time: send `send` to dst, and inout op= what src sends. send and inout must not overlap. */
void algo_sendrecv_reduce(comm_t *c, const void *send, size_t send_count, int dst, void *inout, size_t recv_count,
                          int src, comm_dtype dt, comm_redop op);
/* The segment size in bytes (MIXPAR_COMM_SEGMENT, read once). */
size_t algo_segment_bytes(void);

/* ---------------------------------------------------------------- the algorithms
 * Each works in place on a buffer of a reducible type (fp32, int32, int64) with sum, max or min, or,
 * for data movement, on any type. The front end (comm.c) handles fp16/bf16, avg, out-of-place calls,
 * events and statistics. */

/* Ring (algo_ring.c). Chunks: `count` cut into `size` chunks; rank r owns chunk r.
 * reduce-scatter: afterwards chunk r of rank r holds the reduction over all ranks (other chunks: junk).
 * allgather: before, rank r's chunk r is valid; afterwards every chunk is, on every rank. */
void algo_ring_reduce_scatter(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op);
void algo_ring_allgather(comm_t *c, void *buf, size_t count, comm_dtype dt);
void algo_ring_allreduce(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op);

/* Binomial trees (algo_binomial.c): log2(p) rounds; rank `root` is the tree's root. */
void algo_binomial_broadcast(comm_t *c, void *buf, size_t count, comm_dtype dt, int root);
/* buf: this rank's data in, garbage out except at root, where it is the reduction. */
void algo_binomial_reduce(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op, int root);

/* Binary tree allreduce (algo_tree.c): reduce up to rank 0 and broadcast back down, segment by segment. */
void algo_tree_allreduce(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op);

/* The deterministic allreduce (algo_chain.c): a chain adds the buffers in rank order, ((x0 + x1) + x2) ...,
 * then rank p-1 broadcasts: bit for bit the serial sum, for any size and chunking. */
void algo_chain_allreduce(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op);

/* Recursive halving-doubling, Rabenseifner's allreduce (algo_rhd.c), with the fix-up for rank counts
 * that are not a power of two. */
void algo_rhd_allreduce(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op);
/* Its middle part, on `pow2` ranks numbered vrank 0..pow2-1 (real rank: vreal[vrank]): reduce-scatter
 * by recursive halving, then allgather by recursive doubling. Chunks: `count` cut into pow2 chunks. */
void algo_rhd_exchange(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op, int vrank, int pow2,
                       const int *vreal);

/* Hierarchical allreduce (algo_hier.c, lab 26): ring reduce-scatter inside each node, ring allreduce of
 * each rank's chunk across the nodes (ranks with the same local rank), ring allgather inside the node.
 * Nodes: c->ranks_per_node consecutive ranks; a smaller last node first folds its buffers into node 0. */
void algo_hier_allreduce(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op);
/* Frees the groups algo_hier_allreduce made for c (comm_free and comm_finalize call it). */
void algo_hier_release(comm_t *c);

#endif
