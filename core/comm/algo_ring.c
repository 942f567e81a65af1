/* algo_ring.c: the ring algorithms (lab 12): reduce-scatter and allgather around a ring of ranks, and
 * allreduce as the two in a row, which is bandwidth-optimal: each rank sends 2(p-1)/p of the data. */
#include "comm/algo.h"

#include "base/lab.h"

/* The ring: rank r sends to r+1 and receives from r-1 (mod p). The buffer (count elements) is cut into p
 * chunks (comm_chunk_offset: sizes differ by at most one), and rank r "owns" chunk r.
 *
 * Reduce-scatter, p-1 steps. In step s rank r sends chunk (r-s-1) mod p to the right and receives chunk
 * (r-s-2) mod p from the left, adding it to its own copy. The chunk a rank sends in step s+1 is the one it
 * just received and added to, so each chunk travels once around the ring collecting one contribution
 * per hop; after the last step chunk r on rank r holds every rank's contribution. With p = 3 and rank r's
 * data x_r (a+b: the sum of a's and b's copies of that chunk):
 *
 *                    chunk 0       chunk 1       chunk 2
 *   step 0  rank 0   .             x0+x2         .           (rank 0 got chunk 1 from rank 2)
 *           rank 1   .             .             x1+x0
 *           rank 2   x2+x1         .             .
 *   step 1  rank 0   x0+x2+x1      .             .           (chunk r on rank r: done)
 *           rank 1   .             x1+x0+x2      .
 *           rank 2   .             .             x2+x1+x0                                          */
void algo_ring_reduce_scatter(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op) {
    const int p = comm_size(c), r = comm_rank(c);
    const int right = comm_mod(r + 1, p), left = comm_mod(r - 1, p);
    comm_chunks chunks = comm_chunks_of(buf, count, p, dt);
    /* LAB 12 BEGIN ring reduce-scatter: p-1 steps; send one chunk right, add the chunk from the left */
    for (int step = 0; step < p - 1; step++) {
        int send = comm_mod(r - step - 1, p), recv = comm_mod(r - step - 2, p);
        algo_sendrecv_reduce(c, chunk_at(&chunks, send), chunk_len(&chunks, send), right, chunk_at(&chunks, recv),
                             chunk_len(&chunks, recv), left, dt, op);
    }
    /* LAB 12 END */
}

/* Allgather, p-1 steps: rank r starts with chunk r valid. In step s it sends chunk (r-s) mod p to the
 * right (its own at first, then the one it received last step) and receives chunk (r-s-1) mod p from the
 * left, straight into place. */
void algo_ring_allgather(comm_t *c, void *buf, size_t count, comm_dtype dt) {
    const int p = comm_size(c), r = comm_rank(c);
    const int right = comm_mod(r + 1, p), left = comm_mod(r - 1, p);
    comm_chunks chunks = comm_chunks_of(buf, count, p, dt);
    /* LAB 12 BEGIN ring allgather: p-1 steps; pass the chunk received last step on to the right */
    for (int step = 0; step < p - 1; step++) {
        int send = comm_mod(r - step, p), recv = comm_mod(r - step - 1, p);
        algo_sendrecv(c, chunk_at(&chunks, send), chunk_len(&chunks, send), right, chunk_at(&chunks, recv),
                      chunk_len(&chunks, recv), left, dt);
    }
    /* LAB 12 END */
}

/* Ring allreduce = reduce-scatter (rank r ends with the reduced chunk r) + allgather (of those chunks).
 * Each phase sends (p-1)/p of the buffer per rank, so 2(p-1)/p in all, whatever p: the ring's time is
 * 2(p-1) alpha + 2(p-1)/p n beta, which for large n is about twice the time to send n once. */
void algo_ring_allreduce(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op) {
    algo_ring_reduce_scatter(c, buf, count, dt, op);
    algo_ring_allgather(c, buf, count, dt);
}
