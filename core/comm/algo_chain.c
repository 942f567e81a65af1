/* algo_chain.c: the deterministic allreduce: a chain that adds the ranks' buffers in rank order, then a broadcast. */
#include "comm/algo.h"

/* Every element is reduced as ((x0 op x1) op x2) ... op x(p-1), the order a single process summing the
 * ranks' buffers one after the other would use: the result is bit for bit that serial sum, whatever the
 * message size, the bucket boundaries or the number of chunks, on every run. The ring, the trees and MPI's
 * own allreduce each add in an order of their own (which depends on p and, for MPI, on the message size),
 * so their fp32 sums differ in the last bits from each other and from the serial one.
 *
 * The chain: rank 0 sends its buffer to rank 1, which adds its own and passes the partial sum to rank 2,
 * and so on; rank p-1 ends with the total and broadcasts it down a binomial tree. The buffer goes in
 * chunks, so rank r adds chunk k while rank r+1 adds chunk k-1: a pipeline, p-1 + chunks steps long.
 * Per rank about 2 x the buffer is sent (like the ring), but the chain's latency grows with p: it is the
 * price of reproducibility, for debugging and for bitwise comparisons (`"communication": {"deterministic":
 * true}` makes DDP use it). */
void algo_chain_allreduce(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op) {
    int p = c->size, r = c->rank;
    /* Chunks of about one pipeline segment, at least one. */
    size_t esz = comm_dtype_size(dt), seg = algo_segment_bytes() / esz;
    int chunks = (int)((count + (seg ? seg : 1) - 1) / (seg ? seg : 1));
    if (chunks < 1) chunks = 1;
    comm_chunks b = comm_chunks_of(buf, count, chunks, dt);
    for (int k = 0; k < chunks; k++) {
        /* buf here holds x_r; the partial sum x_0 op ... op x_(r-1) arrives: add it (op commutes, exactly). */
        if (r > 0) algo_recv_reduce(c, chunk_at(&b, k), chunk_len(&b, k), r - 1, dt, op);
        if (r < p - 1) algo_send(c, chunk_at(&b, k), chunk_len(&b, k), r + 1, dt);
    }
    algo_binomial_broadcast(c, buf, count, dt, p - 1);
}
