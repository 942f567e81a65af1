/* algo_tree.c: binary-tree allreduce: reduce up to rank 0, broadcast back down, segment by segment so
 * the levels of the tree work on different segments at once (a pipeline). */
#include "comm/algo.h"

/* The tree: rank v's children are 2v+1 and 2v+2 (those below p), its parent (v-1)/2; rank 0 is the root.
 * Depth log2(p), so a small message takes about 2 log2(p) alpha, against the ring's 2(p-1) alpha. For a
 * large message the root's link carries n up and n down, twice from each child, so the tree moves about
 * twice the data per link the ring does, and reduces at one rank per level: the ring wins.
 *
 * Segments: the buffer goes up in segments of MIXPAR_COMM_SEGMENT bytes; while the root reduces segment
 * k, its children already reduce segment k+1 and the leaves send segment k+2. The whole time is
 * about (depth + segments) segment steps instead of depth x segments. */
void algo_tree_allreduce(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op) {
    const int p = comm_size(c), v = comm_rank(c);
    const int parent = (v - 1) / 2, kids[2] = {2 * v + 1, 2 * v + 2};
    const size_t elem = comm_dtype_size(dt);
    size_t seg = algo_segment_bytes() / elem;
    if (seg == 0) seg = 1;
    const size_t nseg = (count + seg - 1) / seg;
    char *base = buf;
    for (size_t k = 0; k < nseg; k++) { /* up: children's segment k folded in, then sent to the parent */
        size_t n = k + 1 < nseg ? seg : count - k * seg;
        char *at = base + k * seg * elem;
        for (int i = 0; i < 2; i++)
            if (kids[i] < p) algo_recv_reduce(c, at, n, kids[i], dt, op);
        if (v > 0) algo_send(c, at, n, parent, dt);
    }
    for (size_t k = 0; k < nseg; k++) { /* down: the root's result, passed on to the children */
        size_t n = k + 1 < nseg ? seg : count - k * seg;
        char *at = base + k * seg * elem;
        if (v > 0) algo_recv(c, at, n, parent, dt);
        for (int i = 0; i < 2; i++)
            if (kids[i] < p) algo_send(c, at, n, kids[i], dt);
    }
}
