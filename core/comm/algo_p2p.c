/* algo_p2p.c: the plumbing under the collective algorithms: chunk arithmetic, and blocking sends and
 * receives cut into pipelined segments, with the received data optionally reduced on arrival. */
#include "comm/algo.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- chunk arithmetic */

size_t comm_chunk_offset(size_t count, int parts, int i) {
    MP_ASSERT(parts > 0, "a buffer cut into %d chunks", parts);
    if (i < 0 || i > parts) {
        /* One fprintf, so the lines of several ranks failing at once do not interleave. */
        fflush(stdout);
        fprintf(stderr, "mixpar comm: chunk %d of a buffer cut into %d chunks does not exist (chunks 0..%d; an end "
                        "index may be %d)%s\n", i, parts, parts - 1, parts,
                i < 0 ? ": a negative index often comes from C's %, which keeps the sign (-1 % 4 == -1); use "
                        "comm_mod(a, p)" : "");
        exit(EXIT_BAD_INPUT);
    }
    size_t base = count / (size_t)parts, extra = count % (size_t)parts, k = (size_t)i;
    /* The first `extra` chunks hold base + 1 elements, the rest base. */
    return k * base + (k < extra ? k : extra);
}

size_t comm_chunk_count(size_t count, int parts, int i) {
    return comm_chunk_offset(count, parts, i + 1) - comm_chunk_offset(count, parts, i);
}

/* ---------------------------------------------------------------- segments */

enum {
    DEFAULT_SEGMENT_BYTES = 512 << 10,
    WINDOW = 4, /* segments in flight per direction */
};

size_t algo_segment_bytes(void) {
    static size_t bytes = 0;
    if (!bytes) {
        const char *s = getenv("MIXPAR_COMM_SEGMENT");
        double v = DEFAULT_SEGMENT_BYTES;
        if (s && *s && (!parse_bytes(s, &v) || v < 64 || v > (double)(1 << 30)))
            MP_FAIL_HINT("MIXPAR_COMM_SEGMENT between 64 bytes and 1GiB (e.g. 256KiB)", "unset it for 512KiB",
                         "MIXPAR_COMM_SEGMENT='%s'", s);
        bytes = (size_t)v;
    }
    return bytes;
}

/* One exchange: up to WINDOW segments in flight each way. Received segments go straight into `recv`,
 * or, when reducing, into a scratch slot that is reduced into `recv` as soon as it arrives, while the
 * next segments are still on the wire. Blocks until everything is sent and received. */
static void exchange(comm_t *c, const void *send, size_t send_count, int dst, void *recv, size_t recv_count, int src,
                     comm_dtype dt, bool reduce, comm_redop op) {
    const size_t elem = comm_dtype_size(dt);
    size_t seg = algo_segment_bytes() / elem;
    if (seg == 0) seg = 1;
    const size_t nsend = (send_count + seg - 1) / seg, nrecv = (recv_count + seg - 1) / seg;
    char *scratch = reduce && nrecv ? comm_scratch(c, WINDOW * seg * elem) : NULL;
    void *sreq[WINDOW] = {0}, *rreq[WINDOW] = {0};
    size_t s_posted = 0, s_done = 0, r_posted = 0, r_done = 0;
    const comm_backend *b = c->backend;
    double t_progress = mp_now();
    unsigned spins = 0;
    while (s_done < nsend || r_done < nrecv) {
        bool progressed = false;
        /* Receives first, so the peer's sends find them posted. */
        for (; r_posted < nrecv && r_posted - r_done < WINDOW; r_posted++) {
            size_t n = r_posted + 1 < nrecv ? seg : recv_count - r_posted * seg;
            char *into = reduce ? scratch + (r_posted % WINDOW) * seg * elem : (char *)recv + r_posted * seg * elem;
            rreq[r_posted % WINDOW] = b->irecv(c, into, n * elem, src, 0, COMM_CHANNEL_COLL);
        }
        for (; s_posted < nsend && s_posted - s_done < WINDOW; s_posted++) {
            size_t n = s_posted + 1 < nsend ? seg : send_count - s_posted * seg;
            sreq[s_posted % WINDOW] =
                b->isend(c, (const char *)send + s_posted * seg * elem, n * elem, dst, 0, COMM_CHANNEL_COLL);
            c->ctx_bytes_sent += n * elem;
        }
        if (s_done < s_posted && b->test(c, sreq[s_done % WINDOW], NULL)) {
            s_done++;
            progressed = true;
        }
        size_t got = 0;
        if (r_done < r_posted && b->test(c, rreq[r_done % WINDOW], &got)) {
            size_t n = r_done + 1 < nrecv ? seg : recv_count - r_done * seg;
            if (got != n * elem)
                comm_fail(c, "expected %zu elements from rank %d (segment %zu of a %zu-element message), got %zu: the "
                          "two ranks disagree on the size of what is sent", n, src, r_done, recv_count, got / elem);
            if (reduce)
                comm_reduce_local((char *)recv + r_done * seg * elem, scratch + (r_done % WINDOW) * seg * elem, n, dt, op);
            r_done++;
            progressed = true;
        }
        if (progressed) {
            t_progress = mp_now();
            spins = 0;
        } else {
            comm_poll_pause(c, &spins, t_progress, r_done < nrecv ? src : dst);
        }
    }
}

static void check_rank(comm_t *c, int peer, const char *what) {
    if (peer < 0 || peer >= c->size)
        comm_fail(c, "the algorithm named %s rank %d, which is not a rank of this communicator (0..%d)", what, peer,
                  c->size - 1);
}

void algo_send(comm_t *c, const void *buf, size_t count, int dst, comm_dtype dt) {
    check_rank(c, dst, "destination");
    exchange(c, buf, count, dst, NULL, 0, -1, dt, false, COMM_SUM);
}

void algo_recv(comm_t *c, void *buf, size_t count, int src, comm_dtype dt) {
    check_rank(c, src, "source");
    exchange(c, NULL, 0, -1, buf, count, src, dt, false, COMM_SUM);
}

void algo_recv_reduce(comm_t *c, void *inout, size_t count, int src, comm_dtype dt, comm_redop op) {
    check_rank(c, src, "source");
    exchange(c, NULL, 0, -1, inout, count, src, dt, true, op);
}

void algo_sendrecv(comm_t *c, const void *send, size_t send_count, int dst, void *recv, size_t recv_count, int src,
                   comm_dtype dt) {
    check_rank(c, dst, "destination");
    check_rank(c, src, "source");
    exchange(c, send, send_count, dst, recv, recv_count, src, dt, false, COMM_SUM);
}

void algo_sendrecv_reduce(comm_t *c, const void *send, size_t send_count, int dst, void *inout, size_t recv_count,
                          int src, comm_dtype dt, comm_redop op) {
    check_rank(c, dst, "destination");
    check_rank(c, src, "source");
    exchange(c, send, send_count, dst, inout, recv_count, src, dt, true, op);
}
