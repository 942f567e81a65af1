/* algo_rhd.c: recursive halving-doubling allreduce (Rabenseifner): a reduce-scatter by recursive halving,
 * then an allgather by recursive doubling, in 2 log2(p) steps and 2(p-1)/p of the data per rank; lab 12. */
#include "comm/algo.h"

#include "base/error.h"
#include "base/lab.h"

#include <stdlib.h>

/* The exchange among pow2 ranks (a power of two), virtual ranks 0..pow2-1. The buffer is cut into pow2
 * chunks; each rank keeps track of the span of chunks [lo, hi) it is responsible for, at first all.
 *
 * Halving: for dist = pow2/2, pow2/4, ..., 1 the rank pairs with vrank ^ dist. Of its span, the rank
 * whose dist bit is 0 keeps the lower half and the other the upper half; each sends the half it gives
 * up and reduces the half it keeps with what the partner sent. After log2(pow2) steps the span is the
 * single chunk vrank, fully reduced.
 *
 * Doubling runs the steps backwards (dist = 1, 2, ..., pow2/2): partners swap their spans, each receiving
 * the partner's span next to its own, so the span doubles back to the whole buffer.
 *
 *   pow2 = 4, vrank 1:  halving  dist 2: partner 3, keep chunks [0,2), send [2,4)
 *                                dist 1: partner 0, keep chunk  [1,2), send [0,1)
 *                       doubling dist 1: partner 0, send [1,2), get [0,1)  -> span [0,2)
 *                                dist 2: partner 3, send [0,2), get [2,4)  -> span [0,4)          */
void algo_rhd_exchange(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op, int vrank, int pow2,
                       const int *vreal) {
    comm_chunks chunks = comm_chunks_of(buf, count, pow2, dt);
    /* LAB 12 BEGIN recursive halving then doubling: halve the span with partners vrank ^ dist, then double it back */
    int lo = 0, hi = pow2;
    for (int dist = pow2 / 2; dist >= 1; dist /= 2) {
        int partner = vreal[vrank ^ dist], mid = (lo + hi) / 2;
        bool upper = vrank & dist;
        int keep_lo = upper ? mid : lo, keep_hi = upper ? hi : mid;
        int give_lo = upper ? lo : mid, give_hi = upper ? mid : hi;
        algo_sendrecv_reduce(c, chunk_at(&chunks, give_lo), chunks_len(&chunks, give_lo, give_hi), partner,
                             chunk_at(&chunks, keep_lo), chunks_len(&chunks, keep_lo, keep_hi), partner, dt, op);
        lo = keep_lo;
        hi = keep_hi;
    }
    for (int dist = 1; dist < pow2; dist *= 2) {
        int partner = vreal[vrank ^ dist];
        int other_lo = vrank & dist ? lo - dist : hi;
        algo_sendrecv(c, chunk_at(&chunks, lo), chunks_len(&chunks, lo, hi), partner, chunk_at(&chunks, other_lo),
                      chunks_len(&chunks, other_lo, other_lo + dist), partner, dt);
        if (vrank & dist) lo = other_lo;
        else hi = other_lo + dist;
    }
    /* LAB 12 END */
}

/* Rank counts that are not a power of two: with pow2 the largest power of two <= p and rem = p - pow2,
 * ranks 0..2rem-1 pair up first: each even rank sends its whole buffer to the odd rank above it, which
 * reduces, and sits out the exchange; the odd ones (vrank r/2) and the ranks from 2rem up (vrank r-rem)
 * make pow2 ranks. At the end every odd rank of the pairs hands the result back to its even partner.
 * The price: two extra full-buffer messages on those ranks, which is why rhd shines at powers of two. */
void algo_rhd_allreduce(comm_t *c, void *buf, size_t count, comm_dtype dt, comm_redop op) {
    const int p = comm_size(c), r = comm_rank(c);
    int pow2 = 1;
    while (pow2 * 2 <= p) pow2 *= 2;
    const int rem = p - pow2;
    const bool paired = r < 2 * rem, sits_out = paired && r % 2 == 0;
    if (paired) {
        if (sits_out) algo_send(c, buf, count, r + 1, dt);
        else algo_recv_reduce(c, buf, count, r - 1, dt, op);
    }
    if (!sits_out) {
        int *vreal = malloc(sizeof(int) * (size_t)pow2);
        MP_ASSERT(vreal, "out of memory");
        for (int v = 0; v < pow2; v++) vreal[v] = v < rem ? 2 * v + 1 : v + rem;
        int vrank = paired ? r / 2 : r - rem;
        algo_rhd_exchange(c, buf, count, dt, op, vrank, pow2, vreal);
        free(vreal);
    }
    if (paired) {
        if (sits_out) algo_recv(c, buf, count, r + 1, dt);
        else algo_send(c, buf, count, r - 1, dt);
    }
}
