/* backend_mpi.c: the OpenMPI backend: point-to-point and MPI's own (non-blocking) collectives, with MPI
 * errors returned to mixpar rather than aborting, so each failure gets a message that names the call. */
#include "comm/comm_internal.h"

#include "base/error.h"
#include "base/mem.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* Two MPI communicators per mixpar communicator: users' messages travel on one, the collective
 * algorithms' on a duplicate, so the two can never match each other's receives. */
typedef struct {
    MPI_Comm user;
    MPI_Comm coll;
    bool initialized_mpi; /* the world: whether we called MPI_Init (and so must call MPI_Finalize) */
} mpi_state;

typedef struct pairwise_rs pairwise_rs;

typedef struct {
    MPI_Request req;
    bool is_recv;
    pairwise_rs *rs; /* not NULL: mixpar's own reduce-scatter (below), progressed by mpi_test */
} mpi_request;

static void check_mpi(const comm_t *c, int rc, const char *call) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    text[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = '\0';
    comm_fail(c, "%s failed: %s%s", call, text,
              strstr(text, "truncat") ? " (a message was longer than its receive buffer: the two ranks disagree on the count)"
                                      : " (another rank may have died)");
}

/* A switch, not a table: OpenMPI's handles are addresses, not constant expressions. */
static MPI_Datatype mpi_type(comm_dtype dt) {
    switch (dt) {
    case COMM_FP32: return MPI_FLOAT;
    case COMM_FP16:
    case COMM_BF16: return MPI_UINT16_T; /* moved, never reduced by MPI (the front end widens first) */
    case COMM_INT32: return MPI_INT32_T;
    case COMM_INT64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(comm_redop op) {
    switch (op) {
    case COMM_SUM: return MPI_SUM;
    case COMM_MAX: return MPI_MAX;
    case COMM_MIN: return MPI_MIN;
    default: return MPI_OP_NULL;
    }
}

static int checked_count(const comm_t *c, size_t count) {
    if (count > INT_MAX) comm_fail(c, "MPI counts are ints: %zu elements is more than %d; split the call", count, INT_MAX);
    return (int)count;
}

static void mpi_init_world(comm_t *c, int *argc, char ***argv) {
    mpi_state *s = calloc(1, sizeof *s);
    MP_ASSERT(s, "out of memory");
    int already = 0;
    MPI_Initialized(&already);
    if (!already) {
        int provided = 0;
        /* SERIALIZED: OpenMP threads compute and never call MPI; MPI is called by one thread at a time,
         * which may be DDP's communication thread while the main thread runs backward (dist/ddp.c). */
        if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            MP_FAIL_HINT("MPI to start", "is this program started by mpirun or 'mixpar run'?", "MPI_Init_thread failed");
        s->initialized_mpi = true;
        c->serialized_threads = provided >= MPI_THREAD_SERIALIZED;
    } else {
        int provided = 0;
        MPI_Query_thread(&provided);
        c->serialized_threads = provided >= MPI_THREAD_SERIALIZED;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &s->user);
    MPI_Comm_dup(MPI_COMM_WORLD, &s->coll);
    MPI_Comm_set_errhandler(s->user, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(s->coll, MPI_ERRORS_RETURN);
    MPI_Comm_rank(s->user, &c->rank);
    MPI_Comm_size(s->user, &c->size);
    c->impl = s;
}

static void mpi_free(comm_t *c) {
    mpi_state *s = c->impl;
    if (!s) return;
    MPI_Comm_free(&s->user);
    MPI_Comm_free(&s->coll);
    free(s);
    c->impl = NULL;
}

static void mpi_finalize(comm_t *world) {
    mpi_state *s = world->impl;
    bool finalize = s && s->initialized_mpi;
    mpi_free(world);
    int done = 0;
    MPI_Finalized(&done);
    if (finalize && !done) MPI_Finalize();
}

static bool mpi_split(comm_t *parent, comm_t *child, int color, int key) {
    mpi_state *p = parent->impl;
    MPI_Comm user;
    check_mpi(parent, MPI_Comm_split(p->user, color == COMM_UNDEFINED ? MPI_UNDEFINED : color, key, &user),
              "MPI_Comm_split");
    if (user == MPI_COMM_NULL) return false;
    mpi_state *s = calloc(1, sizeof *s);
    MP_ASSERT(s, "out of memory");
    s->user = user;
    MPI_Comm_dup(user, &s->coll);
    MPI_Comm_set_errhandler(s->user, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(s->coll, MPI_ERRORS_RETURN);
    MPI_Comm_rank(user, &child->rank);
    MPI_Comm_size(user, &child->size);
    child->impl = s;
    return true;
}

static MPI_Comm channel_comm(const comm_t *c, comm_channel ch) {
    mpi_state *s = c->impl;
    return ch == COMM_CHANNEL_USER ? s->user : s->coll;
}

static mpi_request *new_request(bool is_recv) {
    mpi_request *r = malloc(sizeof *r);
    MP_ASSERT(r, "out of memory for a request");
    r->is_recv = is_recv;
    r->req = MPI_REQUEST_NULL;
    r->rs = NULL;
    return r;
}

static bool pairwise_rs_progress(comm_t *c, pairwise_rs *rs);

static void *mpi_isend(comm_t *c, const void *buf, size_t bytes, int dst, int tag, comm_channel ch) {
    mpi_request *r = new_request(false);
    check_mpi(c, MPI_Isend(buf, checked_count(c, bytes), MPI_BYTE, dst, tag, channel_comm(c, ch), &r->req), "MPI_Isend");
    return r;
}

static void *mpi_irecv(comm_t *c, void *buf, size_t bytes, int src, int tag, comm_channel ch) {
    mpi_request *r = new_request(true);
    check_mpi(c, MPI_Irecv(buf, checked_count(c, bytes), MPI_BYTE, src, tag, channel_comm(c, ch), &r->req), "MPI_Irecv");
    return r;
}

static bool mpi_test(comm_t *c, void *req, size_t *received) {
    mpi_request *r = req;
    if (r->rs) {
        if (!pairwise_rs_progress(c, r->rs)) return false;
        if (received) *received = 0;
        free(r);
        return true;
    }
    int done = 0;
    MPI_Status status;
    check_mpi(c, MPI_Test(&r->req, &done, &status), r->is_recv ? "MPI_Test (receive)" : "MPI_Test");
    if (!done) return false;
    if (received) {
        int n = 0;
        if (r->is_recv) MPI_Get_count(&status, MPI_BYTE, &n);
        *received = (size_t)n;
    }
    free(r);
    return true;
}

/* Native collectives run on the user communicator's duplicate, like the algorithms. In-place calls
 * (send == recv) become MPI_IN_PLACE where MPI allows it. */
static void *mpi_ibroadcast(comm_t *c, void *buf, size_t count, comm_dtype dt, int root) {
    mpi_request *r = new_request(false);
    check_mpi(c, MPI_Ibcast(buf, checked_count(c, count), mpi_type(dt), root, channel_comm(c, COMM_CHANNEL_COLL), &r->req),
              "MPI_Ibcast");
    return r;
}

static void *mpi_ireduce(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op, int root) {
    mpi_request *r = new_request(false);
    const void *sendbuf = send;
    void *recvbuf = recv;
    if (send == recv) {
        if (c->rank == root) sendbuf = MPI_IN_PLACE;
        else recvbuf = NULL;
    }
    check_mpi(c, MPI_Ireduce(sendbuf, recvbuf, checked_count(c, count), mpi_type(dt), mpi_op(op), root,
                             channel_comm(c, COMM_CHANNEL_COLL), &r->req), "MPI_Ireduce");
    return r;
}

static void *mpi_iallreduce(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op) {
    mpi_request *r = new_request(false);
    check_mpi(c, MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, checked_count(c, count), mpi_type(dt),
                                mpi_op(op), channel_comm(c, COMM_CHANNEL_COLL), &r->req), "MPI_Iallreduce");
    return r;
}

static void *mpi_iallgather(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt) {
    mpi_request *r = new_request(false);
    int n = checked_count(c, count);
    check_mpi(c, MPI_Iallgather(send == recv ? MPI_IN_PLACE : send, n, mpi_type(dt), recv, n, mpi_type(dt),
                                channel_comm(c, COMM_CHANNEL_COLL), &r->req), "MPI_Iallgather");
    return r;
}

/* Reduce-scatter of a large array. OpenMPI's non-blocking MPI_Ireduce_scatter_block (libnbc) is a binomial
 * reduce of the whole array to rank 0 followed by a scatter: rank 0 adds up p full arrays while the others wait,
 * and on 4 ranks from 16 MB up it moves 0.07-0.1 GB/s against a ring's 1-1.5 GB/s (mixpar comm-bench --op
 * reduce_scatter --algo ring,native). So from PAIRWISE_RS_MIN_BYTES of input the backend runs its own: a
 * pairwise exchange in segments. Every rank sends each peer that peer's chunk of its input and receives from
 * every peer its piece of this rank's chunk, PAIRWISE_RS_WINDOW segments at a time, and sums the pieces of a
 * segment as soon as they are all in: (p-1)/p of the input leaves each rank, as in a ring, and every rank does
 * its own 1/p of the additions. The sum is taken in rank order, so every rank and every run gets the same bits
 * (the result of MPI's SUM up to the order of the additions). The segments' receive buffers, p x
 * PAIRWISE_RS_WINDOW x PAIRWISE_RS_SEGMENT bytes (the slot of the rank itself stays unused, so that a slot's place
 * is its peer's rank), are the communicator's (MEM_COMM) while the call runs. */
enum { PAIRWISE_RS_MIN_BYTES = 8 << 20, PAIRWISE_RS_SEGMENT = 512 << 10, PAIRWISE_RS_WINDOW = 2, PAIRWISE_RS_TAG = 0x5253 };

struct pairwise_rs {
    const char *send; /* count * p elements: chunk j goes to rank j */
    char *recv;       /* count elements: this rank's chunk, reduced */
    size_t count, elem, seg, nseg, posted, reduced;
    int p, rank;
    comm_dtype dt;
    comm_redop op;
    bool average;       /* fp32 COMM_AVG: each segment's sum is divided by p as soon as it is taken */
    MPI_Comm comm;
    char *slots;        /* [window][peer][seg elements] */
    MPI_Request *reqs;  /* [window][2 * p]: receives from and sends to each peer (MPI_REQUEST_NULL for itself) */
};

/* Elements in a segment: PAIRWISE_RS_SEGMENT bytes, or the whole chunk when it is smaller. */
static size_t pairwise_rs_segment(size_t count, size_t elem) {
    return PAIRWISE_RS_SEGMENT / elem < count ? PAIRWISE_RS_SEGMENT / elem : count;
}

static void pairwise_rs_post(comm_t *c, pairwise_rs *rs, size_t k) {
    const size_t w = k % PAIRWISE_RS_WINDOW, lo = k * rs->seg;
    const size_t n = (k + 1 < rs->nseg ? rs->seg : rs->count - lo);
    MPI_Request *req = rs->reqs + w * 2 * (size_t)rs->p;
    for (int j = 0; j < rs->p; j++) {
        req[j] = req[rs->p + j] = MPI_REQUEST_NULL;
        if (j == rs->rank) continue;
        char *slot = rs->slots + (w * (size_t)rs->p + (size_t)j) * rs->seg * rs->elem;
        check_mpi(c, MPI_Irecv(slot, (int)n, mpi_type(rs->dt), j, PAIRWISE_RS_TAG, rs->comm, &req[j]), "MPI_Irecv");
    }
    for (int j = 0; j < rs->p; j++) {
        if (j == rs->rank) continue;
        const char *piece = rs->send + ((size_t)j * rs->count + lo) * rs->elem;
        check_mpi(c, MPI_Isend(piece, (int)n, mpi_type(rs->dt), j, PAIRWISE_RS_TAG, rs->comm, &req[rs->p + j]),
                  "MPI_Isend");
    }
}

/* Tests the oldest segment in flight; once all of its pieces are in, sums them into recv in rank order and posts
 * the next segment. True when every segment is reduced (the state is then freed). */
static bool pairwise_rs_progress(comm_t *c, pairwise_rs *rs) {
    while (rs->reduced < rs->nseg) {
        const size_t k = rs->reduced, w = k % PAIRWISE_RS_WINDOW, lo = k * rs->seg;
        const size_t n = (k + 1 < rs->nseg ? rs->seg : rs->count - lo);
        int done = 0;
        check_mpi(c, MPI_Testall(2 * rs->p, rs->reqs + w * 2 * (size_t)rs->p, &done, MPI_STATUSES_IGNORE),
                  "MPI_Testall (reduce-scatter segment)");
        if (!done) return false;
        char *out = rs->recv + lo * rs->elem;
        for (int j = 0; j < rs->p; j++) {
            const char *piece = j == rs->rank ? rs->send + ((size_t)rs->rank * rs->count + lo) * rs->elem
                                              : rs->slots + (w * (size_t)rs->p + (size_t)j) * rs->seg * rs->elem;
            if (j == 0) memcpy(out, piece, n * rs->elem);
            else comm_reduce_local(out, piece, n, rs->dt, rs->op);
        }
        if (rs->average) comm_scale_fp32((float *)out, n, (float)rs->p);
        rs->reduced++;
        if (rs->posted < rs->nseg) pairwise_rs_post(c, rs, rs->posted++);
    }
    mem_free(rs->slots);
    free(rs->reqs);
    free(rs);
    return true;
}

static void *pairwise_reduce_scatter(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt,
                                     comm_redop op) {
    pairwise_rs *rs = calloc(1, sizeof *rs);
    MP_ASSERT(rs, "out of memory for a reduce-scatter");
    rs->send = send;
    rs->recv = recv;
    rs->count = count;
    rs->elem = comm_dtype_size(dt);
    rs->seg = pairwise_rs_segment(count, rs->elem);
    rs->nseg = (count + rs->seg - 1) / rs->seg;
    rs->p = c->size;
    rs->rank = c->rank;
    rs->dt = dt;
    rs->op = op;
    rs->comm = channel_comm(c, COMM_CHANNEL_COLL);
    rs->slots = mem_alloc(comm_mpi_reduce_scatter_scratch_bytes(count, rs->p, rs->elem), MEM_COMM,
                          "reduce-scatter segments (MPI backend)");
    rs->reqs = malloc(PAIRWISE_RS_WINDOW * 2 * (size_t)rs->p * sizeof *rs->reqs);
    MP_ASSERT(rs->reqs, "out of memory for a reduce-scatter");
    for (; rs->posted < rs->nseg && rs->posted < PAIRWISE_RS_WINDOW; rs->posted++) pairwise_rs_post(c, rs, rs->posted);
    mpi_request *r = new_request(false);
    r->rs = rs;
    return r;
}

static bool pairwise_rs_applies(size_t count, int p, size_t elem) {
    return p > 1 && count * (size_t)p * elem >= PAIRWISE_RS_MIN_BYTES;
}

size_t comm_mpi_reduce_scatter_scratch_bytes(size_t count, int p, size_t elem) {
    if (!pairwise_rs_applies(count, p, elem)) return 0;
    return PAIRWISE_RS_WINDOW * (size_t)p * pairwise_rs_segment(count, elem) * elem;
}

static void *mpi_ireduce_scatter(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op) {
    checked_count(c, count * (size_t)c->size);
    const size_t elem = comm_dtype_size(dt), total = count * (size_t)c->size * elem;
    const char *in = send, *out = recv;
    if (pairwise_rs_applies(count, c->size, elem) && (out + count * elem <= in || in + total <= out))
        return pairwise_reduce_scatter(c, send, recv, count, dt, op);
    mpi_request *r = new_request(false);
    check_mpi(c, MPI_Ireduce_scatter_block(send == recv ? MPI_IN_PLACE : send, recv, (int)count, mpi_type(dt),
                                           mpi_op(op), channel_comm(c, COMM_CHANNEL_COLL), &r->req),
              "MPI_Ireduce_scatter_block");
    return r;
}

static void *mpi_ireduce_scatter_avg_fp32(comm_t *c, const void *send, void *recv, size_t count) {
    checked_count(c, count * (size_t)c->size);
    const size_t total = count * (size_t)c->size * sizeof(float);
    const char *in = send, *out = recv;
    if (!pairwise_rs_applies(count, c->size, sizeof(float)) || !(out + count * sizeof(float) <= in || in + total <= out))
        return NULL;
    mpi_request *r = pairwise_reduce_scatter(c, send, recv, count, COMM_FP32, COMM_SUM);
    r->rs->average = true;
    return r;
}

static void *mpi_iscatter(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, int root) {
    mpi_request *r = new_request(false);
    int n = checked_count(c, count);
    check_mpi(c, MPI_Iscatter(send, n, mpi_type(dt), recv, n, mpi_type(dt), root, channel_comm(c, COMM_CHANNEL_COLL),
                              &r->req), "MPI_Iscatter");
    return r;
}

static void *mpi_igather(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, int root) {
    mpi_request *r = new_request(false);
    int n = checked_count(c, count);
    check_mpi(c, MPI_Igather(send, n, mpi_type(dt), recv, n, mpi_type(dt), root, channel_comm(c, COMM_CHANNEL_COLL),
                             &r->req), "MPI_Igather");
    return r;
}

static void *mpi_ibarrier(comm_t *c) {
    mpi_request *r = new_request(false);
    check_mpi(c, MPI_Ibarrier(channel_comm(c, COMM_CHANNEL_COLL), &r->req), "MPI_Ibarrier");
    return r;
}

const comm_backend comm_backend_mpi = {
    .name = "mpi",
    .device_buffers = false,
    .init_world = mpi_init_world,
    .finalize = mpi_finalize,
    .split = mpi_split,
    .free = mpi_free,
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .test = mpi_test,
    .ibroadcast = mpi_ibroadcast,
    .ireduce = mpi_ireduce,
    .iallreduce = mpi_iallreduce,
    .iallgather = mpi_iallgather,
    .ireduce_scatter = mpi_ireduce_scatter,
    .ireduce_scatter_avg_fp32 = mpi_ireduce_scatter_avg_fp32,
    .iscatter = mpi_iscatter,
    .igather = mpi_igather,
    .ibarrier = mpi_ibarrier,
};
