/* backend_mpi.c: the OpenMPI backend: point-to-point and MPI's own (non-blocking) collectives, with MPI
 * errors returned to mixpar rather than aborting, so each failure gets a message that names the call. */
#include "comm/comm_internal.h"

#include "base/error.h"

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

typedef struct {
    MPI_Request req;
    bool is_recv;
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
    return r;
}

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

static void *mpi_ireduce_scatter(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op) {
    mpi_request *r = new_request(false);
    checked_count(c, count * (size_t)c->size);
    check_mpi(c, MPI_Ireduce_scatter_block(send == recv ? MPI_IN_PLACE : send, recv, (int)count, mpi_type(dt),
                                           mpi_op(op), channel_comm(c, COMM_CHANNEL_COLL), &r->req),
              "MPI_Ireduce_scatter_block");
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
    .iscatter = mpi_iscatter,
    .igather = mpi_igather,
    .ibarrier = mpi_ibarrier,
};
