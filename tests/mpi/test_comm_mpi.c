/* test_comm_mpi.c: the communicator under mpirun: every algorithm against MPI's own collectives, on the
 * rank count it is started with (tests/mpi/run.sh starts it on 1..8 ranks). Rank 0 prints one
 * "ok - NAME (p=N)" or "not ok - NAME (p=N)" line per check, with the failing ranks' first complaint. */
#include "base/rng.h"
#include "comm/algo.h"
#include "comm/comm.h"
#include "fp/convert.h"
#include "mpi_check.h"

#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- data */

static const size_t SIZES[] = {0, 1, 2, 3, 7, 64, 1000, 65537};
enum { NSIZES = sizeof SIZES / sizeof SIZES[0] };

static MPI_Datatype mpi_of(comm_dtype dt) {
    return dt == COMM_FP32 ? MPI_FLOAT : dt == COMM_INT32 ? MPI_INT32_T : dt == COMM_INT64 ? MPI_INT64_T : MPI_UINT16_T;
}
static MPI_Op mpi_op(comm_redop op) { return op == COMM_MAX ? MPI_MAX : op == COMM_MIN ? MPI_MIN : MPI_SUM; }

/* The same bytes on every rank? (hash of the buffer compared through MPI) */
static bool same_everywhere(const void *buf, size_t bytes) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ ((const unsigned char *)buf)[i]) * 1099511628211ull;
    uint64_t lo, hi;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

static const comm_algo ALLREDUCE_ALGOS[] = {COMM_ALGO_RING, COMM_ALGO_TREE, COMM_ALGO_RHD, COMM_ALGO_CHAIN, COMM_ALGO_NATIVE,
                                            COMM_ALGO_HIER};
/* The hierarchical allreduce's node sizes tried: 0 (one node), 1 (every rank a node), 2 and 3 (with a smaller
 * last node on odd rank counts), 4. */
static const int RANKS_PER_NODE[] = {0, 1, 2, 3, 4};

/* ---------------------------------------------------------------- allreduce */

/* Integer-valued fp32, int32, int64: every order gives the same answer, so the result must equal MPI's
 * bit for bit. */
static void allreduce_exact(comm_algo algo, comm_dtype dt, comm_redop op) {
    for (int k = 0; k < NSIZES; k++) {
        size_t n = SIZES[k], esz = comm_dtype_size(dt);
        char *send = xmalloc(n * esz), *got = xmalloc(n * esz), *want = xmalloc(n * esz);
        for (size_t i = 0; i < n; i++) {
            float v = small_int(k + 1, rank, i);
            if (dt == COMM_FP32) ((float *)send)[i] = v;
            else if (dt == COMM_INT32) ((int32_t *)send)[i] = (int32_t)v * 1000003;
            else ((int64_t *)send)[i] = (int64_t)v * 1000000007LL;
        }
        comm_allreduce(world, send, got, n, dt, op, algo);
        MPI_Allreduce(send, want, (int)n, mpi_of(dt), mpi_op(op), MPI_COMM_WORLD);
        if (memcmp(got, want, n * esz) != 0) {
            size_t i = 0;
            while (memcmp(got + i * esz, want + i * esz, esz) == 0) i++;
            complain("count %zu: element %zu differs from MPI_Allreduce", n, i);
        }
        free(send), free(got), free(want);
    }
}

/* Random fp32: the reduction order differs from MPI's, so the two may differ by rounding. Both are within
 * (p-1) u sum|x| of the exact sum (u = 2^-24), hence of each other within 2 (p-1) u sum|x|. All ranks must
 * agree bit for bit. */
static void allreduce_random_sum(comm_algo algo) {
    for (int k = 0; k < NSIZES; k++) {
        size_t n = SIZES[k];
        float *send = xmalloc(n * 4), *got = xmalloc(n * 4), *want = xmalloc(n * 4), *abs_x = xmalloc(n * 4), *abs_sum = xmalloc(n * 4);
        for (size_t i = 0; i < n; i++) send[i] = uniform(k + 11, rank, i), abs_x[i] = fabsf(send[i]);
        comm_allreduce(world, send, got, n, COMM_FP32, COMM_SUM, algo);
        MPI_Allreduce(send, want, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(abs_x, abs_sum, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++) {
            double tol = 2.0 * (nranks - 1) * 0x1p-24 * abs_sum[i] * 1.0001;
            if (fabs((double)got[i] - want[i]) > tol) {
                complain("count %zu element %zu: %.9g, MPI says %.9g (tolerance %.3g)", n, i, got[i], want[i], tol);
                break;
            }
        }
        if (!same_everywhere(got, n * 4)) complain("count %zu: the ranks' results differ", n);
        free(send), free(got), free(want), free(abs_x), free(abs_sum);
    }
}

/* The chain is the serial sum: ((x0 + x1) + x2) + ... computed here from every rank's data, bit for bit,
 * for sizes that span one pipeline chunk and several. */
static void chain_is_rank_order_sum(void) {
    static const size_t CHAIN_SIZES[] = {1, 1000, 65537, 300001};
    for (size_t k = 0; k < sizeof CHAIN_SIZES / sizeof CHAIN_SIZES[0]; k++) {
        size_t n = CHAIN_SIZES[k];
        float *send = xmalloc(n * 4), *got = xmalloc(n * 4), *all = xmalloc(n * 4 * (size_t)nranks);
        for (size_t i = 0; i < n; i++) send[i] = uniform(k + 31, rank, i) * (float)(1 + (i % 7) * 1000);
        comm_allreduce(world, send, got, n, COMM_FP32, COMM_SUM, COMM_ALGO_CHAIN);
        MPI_Allgather(send, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++) {
            float sum = all[i];
            for (int r = 1; r < nranks; r++) sum += all[(size_t)r * n + i];
            if (memcmp(&sum, &got[i], 4) != 0) {
                complain("count %zu element %zu: chain %.9g, serial rank-order sum %.9g", n, i, got[i], sum);
                break;
            }
        }
        free(send), free(got), free(all);
    }
}

/* avg = the sum divided once by p: with integer data, exactly MPI's sum / p. */
static void allreduce_avg(comm_algo algo) {
    for (int k = 0; k < NSIZES; k++) {
        size_t n = SIZES[k];
        float *send = xmalloc(n * 4), *got = xmalloc(n * 4), *want = xmalloc(n * 4);
        for (size_t i = 0; i < n; i++) send[i] = small_int(k + 21, rank, i);
        comm_allreduce(world, send, got, n, COMM_FP32, COMM_AVG, algo);
        MPI_Allreduce(send, want, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (size_t i = 0; i < n; i++)
            if (got[i] != want[i] / (float)nranks) {
                complain("count %zu element %zu: avg %.9g, want %.9g", n, i, got[i], want[i] / (float)nranks);
                break;
            }
        free(send), free(got), free(want);
    }
}

/* fp16/bf16: reduced in fp32 and rounded once, so the result is within one ulp of MPI's fp32 sum of the
 * widened inputs rounded once (the fp32 sums may differ in order; integer data: exactly). */
static void allreduce_low_precision(comm_algo algo, comm_dtype dt) {
    for (int k = 0; k < NSIZES; k++) {
        size_t n = SIZES[k];
        uint16_t *send = xmalloc(n * 2), *got = xmalloc(n * 2), *want16 = xmalloc(n * 2);
        float *wide = xmalloc(n * 4), *want = xmalloc(n * 4), *got32 = xmalloc(n * 4), *want32 = xmalloc(n * 4);
        for (size_t i = 0; i < n; i++) wide[i] = uniform(k + 31, rank, i) * 4.0f;
        if (dt == COMM_BF16) fp_f32_to_bf16(send, wide, n), fp_bf16_to_f32(wide, send, n);
        else fp_f32_to_f16(send, wide, n), fp_f16_to_f32(wide, send, n);
        comm_allreduce(world, send, got, n, dt, COMM_SUM, algo);
        MPI_Allreduce(wide, want, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (dt == COMM_BF16) fp_f32_to_bf16(want16, want, n), fp_bf16_to_f32(want32, want16, n), fp_bf16_to_f32(got32, got, n);
        else fp_f32_to_f16(want16, want, n), fp_f16_to_f32(want32, want16, n), fp_f16_to_f32(got32, got, n);
        for (size_t i = 0; i < n; i++) {
            /* one ulp of the rounded expected value: the gap to its neighbour away from zero */
            uint16_t next = (uint16_t)(want16[i] + 1);
            float next32;
            if (dt == COMM_BF16) fp_bf16_to_f32(&next32, &next, 1);
            else fp_f16_to_f32(&next32, &next, 1);
            double ulp = fabs((double)next32 - want32[i]);
            if (fabs((double)got32[i] - want32[i]) > ulp) {
                complain("count %zu element %zu: %s %.6g, want %.6g (one ulp = %.3g)", n, i, comm_dtype_name(dt),
                         got32[i], want32[i], ulp);
                break;
            }
        }
        if (!same_everywhere(got, n * 2)) complain("count %zu: the ranks' results differ", n);
        free(send), free(got), free(want16), free(wide), free(want), free(got32), free(want32);
    }
}

static void allreduce_in_place(comm_algo algo) {
    size_t n = 1000;
    float *buf = xmalloc(n * 4), *want = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) buf[i] = small_int(41, rank, i);
    MPI_Allreduce(buf, want, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    comm_allreduce(world, buf, buf, n, COMM_FP32, COMM_SUM, algo);
    if (memcmp(buf, want, n * 4)) complain("in-place result differs from MPI_Allreduce");
    free(buf), free(want);
}

/* ---------------------------------------------------------------- the other collectives */

static void reduce_scatter_check(comm_algo algo, comm_dtype dt) {
    static const size_t COUNTS[] = {0, 1, 2, 3, 7, 64, 1000, 8193};
    for (size_t k = 0; k < sizeof COUNTS / sizeof COUNTS[0]; k++) {
        size_t n = COUNTS[k], total = n * (size_t)nranks, esz = comm_dtype_size(dt);
        char *send = xmalloc(total * esz), *got = xmalloc(n * esz), *want = xmalloc(n * esz);
        for (size_t i = 0; i < total; i++) {
            float v = small_int(k + 51, rank, i);
            if (dt == COMM_FP32) ((float *)send)[i] = v;
            else ((int32_t *)send)[i] = (int32_t)v;
        }
        comm_reduce_scatter(world, send, got, n, dt, COMM_SUM, algo);
        MPI_Reduce_scatter_block(send, want, (int)n, mpi_of(dt), MPI_SUM, MPI_COMM_WORLD);
        if (memcmp(got, want, n * esz)) complain("count %zu per rank: differs from MPI_Reduce_scatter_block", n);
        free(send), free(got), free(want);
    }
}

/* From 8 MiB of input the MPI backend reduces with its own pairwise exchange in 512 KiB segments (backend_mpi.c):
 * a count that is no multiple of a segment; fp32 sum apart and in place (in place goes through the front end's
 * copy), int32 max and sum. Small integers make every order of the additions exact, so the bits must be MPI's. */
static void reduce_scatter_large_check(void) {
    const size_t n = (size_t)(8 << 20) / 4 / (size_t)nranks + 131075, total = n * (size_t)nranks;
    static const struct {
        comm_dtype dt;
        comm_redop op;
        bool in_place;
    } cases[] = {{COMM_FP32, COMM_SUM, false}, {COMM_FP32, COMM_SUM, true}, {COMM_INT32, COMM_MAX, false},
                 {COMM_INT32, COMM_SUM, true}, {COMM_FP32, COMM_AVG, false}};
    for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        const comm_dtype dt = cases[k].dt;
        const comm_redop op = cases[k].op;
        char *send = xmalloc(total * 4), *got = xmalloc(total * 4), *want = xmalloc(n * 4);
        for (size_t i = 0; i < total; i++) {
            float v = small_int(91 + k, rank, i);
            if (dt == COMM_FP32) ((float *)send)[i] = v;
            else ((int32_t *)send)[i] = (int32_t)v;
        }
        MPI_Reduce_scatter_block(send, want, (int)n, mpi_of(dt), op == COMM_MAX ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
        if (op == COMM_AVG) /* the sum, then one division per element (the backend takes it segment by segment) */
            for (size_t i = 0; i < n; i++) ((float *)want)[i] /= (float)nranks;
        if (cases[k].in_place) {
            memcpy(got, send, total * 4);
            comm_reduce_scatter(world, got, got, n, dt, op, COMM_ALGO_NATIVE);
        } else {
            comm_reduce_scatter(world, send, got, n, dt, op, COMM_ALGO_NATIVE);
        }
        if (memcmp(got, want, n * 4))
            complain("%s %s%s of %zu per rank differs from MPI_Reduce_scatter_block", comm_dtype_name(dt),
                     comm_redop_name(op), cases[k].in_place ? " in place" : "", n);
        free(send), free(got), free(want);
    }
}

static void allgather_check(comm_algo algo, comm_dtype dt, bool in_place) {
  for (int k = 0; k < NSIZES; k++) {
    size_t n = SIZES[k], esz = comm_dtype_size(dt), total = n * (size_t)nranks;
    unsigned char *send = xmalloc(n * esz), *got = xmalloc(total * esz),
                  *want = xmalloc(total * esz);
    for (size_t i = 0; i < n * esz; i++)
      send[i] = (unsigned char)mp_hash32((uint64_t)rank + 61, i);
    memset(got, 0xab, total * esz);
    if (in_place) {
      memcpy(got + (size_t)rank * n * esz, send, n * esz);
      comm_allgather(world, got + (size_t)rank * n * esz, got, n, dt, algo);
    } else {
      comm_allgather(world, send, got, n, dt, algo);
    }
    MPI_Allgather(send, (int)(n * esz), MPI_BYTE, want, (int)(n * esz),
                  MPI_BYTE, MPI_COMM_WORLD);
    if (memcmp(got, want, total * esz))
      complain("count %zu: differs from MPI_Allgather", n);
    free(send), free(got), free(want);
  }
}

static void broadcast_check(comm_algo algo, comm_dtype dt) {
    for (int root = 0; root < nranks; root++)
        for (int k = 0; k < NSIZES; k++) {
            size_t n = SIZES[k], bytes = n * comm_dtype_size(dt);
            unsigned char *got = xmalloc(bytes), *want = xmalloc(bytes);
            for (size_t i = 0; i < bytes; i++) got[i] = want[i] = (unsigned char)mp_hash32((uint64_t)rank * 31 + 71, i);
            comm_broadcast(world, got, n, dt, root, algo);
            MPI_Bcast(want, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
            if (memcmp(got, want, bytes)) complain("root %d count %zu: differs from MPI_Bcast", root, n);
            free(got), free(want);
        }
}

static void reduce_check(comm_algo algo, comm_redop op) {
    for (int root = 0; root < nranks; root++)
        for (int k = 0; k < NSIZES; k++) {
            size_t n = SIZES[k];
            float *send = xmalloc(n * 4), *got = xmalloc(n * 4), *want = xmalloc(n * 4);
            for (size_t i = 0; i < n; i++) send[i] = op == COMM_SUM ? small_int(k + 81, rank, i) : uniform(k + 81, rank, i);
            memset(got, 0, n * 4);
            comm_reduce(world, send, rank == root ? got : NULL, n, COMM_FP32, op, root, algo);
            MPI_Reduce(send, want, (int)n, MPI_FLOAT, mpi_op(op), root, MPI_COMM_WORLD);
            if (rank == root && memcmp(got, want, n * 4)) complain("root %d count %zu: differs from MPI_Reduce", root, n);
            free(send), free(got), free(want);
        }
}

static void scatter_gather_check(void) {
    for (int root = 0; root < nranks; root++) {
        size_t n = 1000, total = n * (size_t)nranks;
        int32_t *all = xmalloc(total * 4), *mine = xmalloc(n * 4), *back = xmalloc(total * 4);
        for (size_t i = 0; i < total; i++) all[i] = (int32_t)(i * 3 + (size_t)root);
        comm_scatter(world, rank == root ? all : NULL, mine, n, COMM_INT32, root);
        for (size_t i = 0; i < n; i++)
            if (mine[i] != (int32_t)(((size_t)rank * n + i) * 3 + (size_t)root)) {
                complain("scatter from root %d: element %zu of rank %d is %d", root, i, rank, mine[i]);
                break;
            }
        comm_gather(world, mine, rank == root ? back : NULL, n, COMM_INT32, root);
        if (rank == root && memcmp(all, back, total * 4)) complain("gather to root %d does not give back what was scattered", root);
        free(all), free(mine), free(back);
    }
}

/* ---------------------------------------------------------------- communicators, point to point */

static void split_check(void) {
    /* Two groups by parity, ordered by descending world rank (key = -rank). */
    comm_t *sub = comm_split(world, rank % 2, -rank);
    MPI_Comm ref;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &ref);
    int ref_rank, ref_size;
    MPI_Comm_rank(ref, &ref_rank);
    MPI_Comm_size(ref, &ref_size);
    if (!sub) {
        complain("comm_split returned NULL for color %d", rank % 2);
    } else {
        if (comm_rank(sub) != ref_rank || comm_size(sub) != ref_size)
            complain("rank %d of %d in the sub-communicator, MPI_Comm_split says %d of %d", comm_rank(sub),
                     comm_size(sub), ref_rank, ref_size);
        size_t n = 1001;
        float *x = xmalloc(n * 4), *want = xmalloc(n * 4);
        for (comm_algo a = COMM_ALGO_RING; a <= COMM_ALGO_NATIVE; a++) {
            for (size_t i = 0; i < n; i++) x[i] = small_int(91, rank, i);
            MPI_Allreduce(x, want, (int)n, MPI_FLOAT, MPI_SUM, ref);
            comm_allreduce(sub, x, x, n, COMM_FP32, COMM_SUM, a);
            if (memcmp(x, want, n * 4)) complain("%s allreduce in the sub-communicator differs from MPI's", comm_algo_name(a));
        }
        free(x), free(want);
        comm_free(sub);
    }
    MPI_Comm_free(&ref);
    /* COMM_UNDEFINED: rank 0 joins nothing. */
    comm_t *rest = comm_split(world, rank == 0 ? COMM_UNDEFINED : 0, rank);
    if (rank == 0 && rest) complain("COMM_UNDEFINED gave a communicator");
    if (rank != 0 && (!rest || comm_size(rest) != nranks - 1)) complain("the others' communicator is not %d ranks", nranks - 1);
    comm_free(rest);
}

static void send_recv_check(void) {
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    size_t n = 5000;
    int64_t *out = xmalloc(n * 8), *in = xmalloc(n * 8), *in2 = xmalloc(8);
    for (size_t i = 0; i < n; i++) out[i] = (int64_t)rank * 1000000 + (int64_t)i;
    int64_t small = -rank;
    /* Two tags, received in the opposite order from the one they are sent in. */
    comm_request *s1 = comm_isend(world, out, n, COMM_INT64, right, 1);
    comm_request *s2 = comm_isend(world, &small, 1, COMM_INT64, right, 2);
    comm_recv(world, in2, 1, COMM_INT64, left, 2);
    comm_recv(world, in, n, COMM_INT64, left, 1);
    comm_wait(&s1);
    comm_wait(&s2);
    if (s1 || s2) complain("comm_wait did not clear the request");
    for (size_t i = 0; i < n; i++)
        if (in[i] != (int64_t)left * 1000000 + (int64_t)i) {
            complain("element %zu from rank %d is %lld", i, left, (long long)in[i]);
            break;
        }
    if (*in2 != -left) complain("tag 2 message from rank %d is %lld", left, (long long)*in2);
    /* Blocking send to oneself works when the receive is posted first. */
    comm_request *r = comm_irecv(world, in2, 1, COMM_INT64, rank, 9);
    comm_send(world, &small, 1, COMM_INT64, rank, 9);
    comm_wait(&r);
    if (*in2 != -rank) complain("message to itself: %lld", (long long)*in2);
    free(out), free(in), free(in2);
}

/* comm_test says false while the message cannot have been sent, then true once it arrives. */
static void wait_test_check(void) {
    if (nranks < 2) return;
    float x = 0, y = 42.5f;
    comm_request *r = NULL;
    if (rank == 1) {
        r = comm_irecv(world, &x, 1, COMM_FP32, 0, 3);
        if (comm_test(&r)) complain("comm_test is true before the sender has sent");
    }
    MPI_Barrier(MPI_COMM_WORLD); /* rank 0 sends only after rank 1's first test */
    if (rank == 0) {
        comm_request *s = comm_isend(world, &y, 1, COMM_FP32, 1, 3);
        while (!comm_test(&s)) usleep(100);
        if (s) complain("comm_test did not clear the request");
    }
    if (rank == 1) {
        int polls = 0;
        while (!comm_test(&r)) polls++, usleep(100);
        if (r || x != 42.5f) complain("after comm_test: request %p, value %g", (void *)r, x);
    }
}

/* The ring's traffic: rank r sends every chunk but its own in reduce-scatter and every chunk but chunk
 * r+1 in allgather, so exactly 2 x count - |chunk r| - |chunk r+1| elements. */
static void stats_check(void) {
    size_t n = 1003;
    float *x = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = 1;
    comm_stats_reset(world);
    comm_allreduce(world, x, x, n, COMM_FP32, COMM_SUM, COMM_ALGO_RING);
    comm_stats_t s;
    comm_stats(world, &s);
    uint64_t want = nranks == 1 ? 0
                                : 4 * (2 * n - comm_chunk_count(n, nranks, rank) -
                                       comm_chunk_count(n, nranks, (rank + 1) % nranks));
    if (s.calls[COMM_OP_ALLREDUCE] != 1 || s.bytes_sent[COMM_OP_ALLREDUCE] != want)
        complain("after one ring allreduce of %zu fp32: %llu calls, %llu bytes sent (want 1 and %llu)", n,
                 (unsigned long long)s.calls[COMM_OP_ALLREDUCE], (unsigned long long)s.bytes_sent[COMM_OP_ALLREDUCE],
                 (unsigned long long)want);
    free(x);
}

static void events_check(void) {
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/mixpar-comm-test-%d", (int)getppid());
    ev_writer *w = ev_open(dir, rank);
    comm_set_events(world, w);
    float x = 1;
    comm_allreduce(world, &x, &x, 1, COMM_FP32, COMM_SUM, COMM_ALGO_TREE);
    comm_set_events(world, NULL);
    char path[300];
    snprintf(path, sizeof path, "%s", ev_path(w));
    ev_close(w);
    FILE *f = fopen(path, "r");
    char line[1024] = "";
    if (!f || !fgets(line, sizeof line, f)) complain("no event written to %s", path);
    else if (!strstr(line, "\"kind\":\"comm\"") || !strstr(line, "\"op\":\"allreduce\"") ||
             !strstr(line, "\"algorithm\":\"tree\"") || !strstr(line, "\"bytes\":4") || !strstr(line, "\"peer\":-1") ||
             !strstr(line, "\"t0\":") || !strstr(line, "\"t1\":"))
        complain("unexpected event line: %s", line);
    if (f) fclose(f);
    unlink(path);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) rmdir(dir);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
    start_under_mpirun(&argc, &argv, "test_comm_mpi");
    char name[128];
    for (size_t a = 0, kk = 0; a < sizeof ALLREDUCE_ALGOS / sizeof ALLREDUCE_ALGOS[0]; a++) {
        comm_algo algo = ALLREDUCE_ALGOS[a];
        char an[48];
        snprintf(an, sizeof an, "%s", comm_algo_name(algo));
        if (algo == COMM_ALGO_HIER) {
            comm_set_ranks_per_node(world, RANKS_PER_NODE[kk]);
            snprintf(an, sizeof an, "hierarchical (%d per node)", RANKS_PER_NODE[kk]);
            if (++kk < sizeof RANKS_PER_NODE / sizeof RANKS_PER_NODE[0]) a--; /* the next node size */
        }
        static const struct { comm_dtype dt; comm_redop op; } EXACT[] = {
            {COMM_FP32, COMM_SUM}, {COMM_FP32, COMM_MAX}, {COMM_FP32, COMM_MIN}, {COMM_INT32, COMM_SUM},
            {COMM_INT32, COMM_MAX}, {COMM_INT32, COMM_MIN}, {COMM_INT64, COMM_SUM}};
        for (size_t e = 0; e < sizeof EXACT / sizeof EXACT[0]; e++) {
            allreduce_exact(algo, EXACT[e].dt, EXACT[e].op);
            snprintf(name, sizeof name, "allreduce %s %s %s equals MPI_Allreduce exactly", an, comm_dtype_name(EXACT[e].dt),
                     comm_redop_name(EXACT[e].op));
            report(name);
        }
        allreduce_random_sum(algo);
        snprintf(name, sizeof name, "allreduce %s fp32 sum of random data within 2(p-1)u sum|x| of MPI's, same on all ranks", an);
        report(name);
        allreduce_avg(algo);
        snprintf(name, sizeof name, "allreduce %s fp32 avg is the sum divided once by p", an);
        report(name);
        allreduce_low_precision(algo, COMM_BF16);
        snprintf(name, sizeof name, "allreduce %s bf16 within one ulp of the fp32 sum rounded once", an);
        report(name);
        allreduce_low_precision(algo, COMM_FP16);
        snprintf(name, sizeof name, "allreduce %s fp16 within one ulp of the fp32 sum rounded once", an);
        report(name);
        allreduce_in_place(algo);
        snprintf(name, sizeof name, "allreduce %s in place", an);
        report(name);
    }
    chain_is_rank_order_sum();
    report("allreduce chain fp32 sum is bit for bit the serial sum in rank order");
    for (comm_algo algo = COMM_ALGO_RING; algo <= COMM_ALGO_NATIVE; algo += COMM_ALGO_NATIVE - COMM_ALGO_RING) {
        reduce_scatter_check(algo, COMM_FP32);
        snprintf(name, sizeof name, "reduce_scatter %s fp32 equals MPI_Reduce_scatter_block", comm_algo_name(algo));
        report(name);
        reduce_scatter_check(algo, COMM_INT32);
        snprintf(name, sizeof name, "reduce_scatter %s int32 equals MPI_Reduce_scatter_block", comm_algo_name(algo));
        report(name);
        allgather_check(algo, COMM_FP32, false);
        allgather_check(algo, COMM_BF16, false);
        allgather_check(algo, COMM_INT64, false);
        snprintf(name, sizeof name, "allgather %s fp32/bf16/int64 equals MPI_Allgather", comm_algo_name(algo));
        report(name);
        allgather_check(algo, COMM_FP32, true);
        snprintf(name, sizeof name, "allgather %s in place", comm_algo_name(algo));
        report(name);
    }
    if (nranks == 3 || nranks == 4) { /* 8 MiB a rank: two sizes of group are enough, and cheap enough */
        reduce_scatter_large_check();
        report("reduce_scatter native from 8 MiB (pairwise segments): fp32 sum apart and in place, fp32 avg, int32 max and sum, "
               "equals MPI_Reduce_scatter_block");
    }
    for (comm_algo algo = COMM_ALGO_TREE; algo <= COMM_ALGO_NATIVE; algo += COMM_ALGO_NATIVE - COMM_ALGO_TREE) {
        broadcast_check(algo, COMM_FP32);
        broadcast_check(algo, COMM_FP16);
        snprintf(name, sizeof name, "broadcast %s from every root equals MPI_Bcast", comm_algo_name(algo));
        report(name);
        reduce_check(algo, COMM_SUM);
        reduce_check(algo, COMM_MAX);
        snprintf(name, sizeof name, "reduce %s sum and max to every root equal MPI_Reduce", comm_algo_name(algo));
        report(name);
    }
    scatter_gather_check();
    report("scatter and gather from every root");
    split_check();
    report("comm_split by parity, reversed keys: ranks as MPI_Comm_split, every algorithm inside");
    send_recv_check();
    report("send/recv around the ring with two tags out of order, and to itself");
    wait_test_check();
    report("isend/irecv with comm_test before and after the message");
    stats_check();
    report("comm_stats counts the ring's bytes exactly");
    events_check();
    report("a comm event per collective");
    comm_finalize(world);
    return failed_checks ? 1 : 0;
}
