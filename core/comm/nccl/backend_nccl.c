/* backend_nccl.c: the NCCL backend: GPU ranks, buffers in device memory, NCCL's collectives on a CUDA stream.
 * Not part of libmixpar's CPU build: tools/cuda_check.sh compiles it and links it (with -lnccl -lcudart)
 * into build/cuda/nccl_check; any program linked with it gets MIXPAR_COMM=nccl (comm.c finds the backend
 * through a weak symbol). MPI starts the ranks and carries NCCL's unique id from rank 0 to the others. */
#include "comm/comm_internal.h"

#include "base/error.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "the NCCL backend needs NCCL 2.18 or newer (bf16, avg and ncclCommSplit)"
#endif

/* What a rank holds: the MPI side (rank, size, the bootstrap; comm_backend_mpi's state), the NCCL
 * communicator, and the stream every operation is queued on, in call order. */
typedef struct {
    comm_t host; /* a shadow communicator on the MPI backend, same ranks */
    ncclComm_t nccl;
    cudaStream_t stream;
    int *d_one; /* one device int, the barrier's payload */
    int device;
} nccl_state;

/* A request: an event recorded on the stream after the operation; complete when the event is. */
typedef struct {
    cudaEvent_t done;
    size_t received; /* a receive's size: NCCL always fills exactly the posted size */
} nccl_request;

static void check_cuda(const comm_t *c, cudaError_t rc, const char *call) {
    if (rc != cudaSuccess) comm_fail(c, "%s failed: %s", call, cudaGetErrorString(rc));
}

static void check_nccl(const comm_t *c, ncclResult_t rc, const char *call) {
    if (rc != ncclSuccess && rc != ncclInProgress)
        comm_fail(c, "%s failed: %s (%s)", call, ncclGetErrorString(rc),
                  rc == ncclRemoteError || rc == ncclSystemError ? "another rank may have died" : "check the arguments");
}

static nccl_state *state(const comm_t *c) { return c->impl; }

static ncclDataType_t nccl_type(comm_dtype dt) {
    switch (dt) {
    case COMM_FP32: return ncclFloat32;
    case COMM_FP16: return ncclFloat16;
    case COMM_BF16: return ncclBfloat16;
    case COMM_INT32: return ncclInt32;
    default: return ncclInt64;
    }
}

/* NCCL has avg itself; on the GPU fp16/bf16 are reduced in their own type hop by hop, not widened to fp32
 * as the host backends do (so results can differ from the CPU's by the roundings of the hops). */
static ncclRedOp_t nccl_op(comm_redop op) {
    switch (op) {
    case COMM_SUM: return ncclSum;
    case COMM_AVG: return ncclAvg;
    case COMM_MAX: return ncclMax;
    default: return ncclMin;
    }
}

static void *enqueued_bytes(comm_t *c, size_t received) {
    nccl_request *r = malloc(sizeof *r);
    MP_ASSERT(r, "out of memory");
    r->received = received;
    check_cuda(c, cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(c, cudaEventRecord(r->done, state(c)->stream), "cudaEventRecord");
    return r;
}

static void *enqueued(comm_t *c) { return enqueued_bytes(c, 0); }

/* The local rank picks the GPU: mpirun says it (OMPI_COMM_WORLD_LOCAL_RANK), Slurm too (SLURM_LOCALID). */
static int local_rank(void) {
    static const char *const VARS[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) {
        const char *v = getenv(VARS[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

static void nccl_setup(comm_t *c, nccl_state *s, const ncclUniqueId *id) {
    check_nccl(c, ncclCommInitRank(&s->nccl, c->size, *id, c->rank), "ncclCommInitRank");
    check_cuda(c, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(c, cudaMalloc((void **)&s->d_one, sizeof(int)), "cudaMalloc");
}

static void nccl_init_world(comm_t *c, int *argc, char ***argv) {
    nccl_state *s = calloc(1, sizeof *s);
    MP_ASSERT(s, "out of memory");
    /* MPI first: it knows the ranks, and it carries the unique id. */
    s->host = *c;
    s->host.backend = &comm_backend_mpi;
    comm_backend_mpi.init_world(&s->host, argc, argv);
    c->rank = s->host.rank;
    c->size = s->host.size;
    c->impl = s;
    int devices = 0;
    check_cuda(c, cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    if (devices < 1) comm_fail(c, "MIXPAR_COMM=nccl, but this machine has no CUDA device");
    s->device = local_rank() % devices;
    check_cuda(c, cudaSetDevice(s->device), "cudaSetDevice");
    ncclUniqueId id;
    if (c->rank == 0) check_nccl(c, ncclGetUniqueId(&id), "ncclGetUniqueId");
    /* ncclUniqueId is 128 opaque bytes: broadcast as 32 int32s. */
    comm_wait_raw(&s->host, comm_backend_mpi.ibroadcast(&s->host, &id, sizeof id / 4, COMM_INT32, 0), 0);
    nccl_setup(c, s, &id);
}

static void nccl_free(comm_t *c) {
    nccl_state *s = state(c);
    if (!s) return;
    cudaStreamSynchronize(s->stream);
    ncclCommDestroy(s->nccl);
    cudaStreamDestroy(s->stream);
    cudaFree(s->d_one);
    comm_backend_mpi.free(&s->host);
    free(s);
    c->impl = NULL;
}

static void nccl_finalize(comm_t *world) {
    nccl_state *s = state(world);
    cudaStreamSynchronize(s->stream);
    ncclCommDestroy(s->nccl);
    cudaStreamDestroy(s->stream);
    cudaFree(s->d_one);
    comm_backend_mpi.finalize(&s->host); /* frees the MPI side and calls MPI_Finalize */
    free(s);
    world->impl = NULL;
}

/* The front end (comm.c, split_members) learns a sub-communicator's world ranks by an allgather of host
 * memory, which a device backend cannot take, so on nccl comm_world_rank_of answers -1 for a group's
 * members and comm events on a group carry "group" and "group_rank" but no "members". To add them:
 * allgather (color, key) on p->host here and hand the list back through the backend interface. */
static bool nccl_split(comm_t *parent, comm_t *child, int color, int key) {
    nccl_state *p = state(parent);
    nccl_state *s = calloc(1, sizeof *s);
    MP_ASSERT(s, "out of memory");
    s->host = *child;
    s->host.backend = &comm_backend_mpi;
    bool member = comm_backend_mpi.split(&p->host, &s->host, color, key);
    ncclComm_t sub = NULL;
    /* Collective over the parent: ranks that join nothing still take part, with NCCL_SPLIT_NOCOLOR. */
    check_nccl(parent, ncclCommSplit(p->nccl, member ? color : NCCL_SPLIT_NOCOLOR, key, &sub, NULL), "ncclCommSplit");
    if (!member) {
        free(s);
        return false;
    }
    s->nccl = sub;
    s->device = p->device;
    check_cuda(parent, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(parent, cudaMalloc((void **)&s->d_one, sizeof(int)), "cudaMalloc");
    child->rank = s->host.rank;
    child->size = s->host.size;
    child->impl = s;
    return true;
}

/* NCCL matches point-to-point messages between two ranks in the order they are posted; it has no tags,
 * so the tag and the channel are not used (a pair's messages must be received in the order sent). */
static void *nccl_isend(comm_t *c, const void *buf, size_t bytes, int dst, int tag, comm_channel ch) {
    (void)tag, (void)ch;
    check_nccl(c, ncclSend(buf, bytes, ncclUint8, dst, state(c)->nccl, state(c)->stream), "ncclSend");
    return enqueued(c);
}

static void *nccl_irecv(comm_t *c, void *buf, size_t bytes, int src, int tag, comm_channel ch) {
    (void)tag, (void)ch;
    check_nccl(c, ncclRecv(buf, bytes, ncclUint8, src, state(c)->nccl, state(c)->stream), "ncclRecv");
    return enqueued_bytes(c, bytes);
}

static bool nccl_test(comm_t *c, void *req, size_t *received) {
    nccl_request *r = req;
    cudaError_t rc = cudaEventQuery(r->done);
    if (rc == cudaErrorNotReady) {
        /* Still running: a rank that died shows up here as an asynchronous error, not as a hang. */
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(state(c)->nccl, &async);
        check_nccl(c, async, "an NCCL operation (asynchronous error)");
        return false;
    }
    check_cuda(c, rc, "cudaEventQuery");
    if (received) *received = r->received;
    cudaEventDestroy(r->done);
    free(r);
    return true;
}

static void *nccl_ibroadcast(comm_t *c, void *buf, size_t count, comm_dtype dt, int root) {
    check_nccl(c, ncclBroadcast(buf, buf, count, nccl_type(dt), root, state(c)->nccl, state(c)->stream), "ncclBroadcast");
    return enqueued(c);
}

static void *nccl_ireduce(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op, int root) {
    check_nccl(c, ncclReduce(send, recv, count, nccl_type(dt), nccl_op(op), root, state(c)->nccl, state(c)->stream),
               "ncclReduce");
    return enqueued(c);
}

static void *nccl_iallreduce(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op) {
    check_nccl(c, ncclAllReduce(send, recv, count, nccl_type(dt), nccl_op(op), state(c)->nccl, state(c)->stream),
               "ncclAllReduce");
    return enqueued(c);
}

static void *nccl_iallgather(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt) {
    /* In place, NCCL wants sendbuff = recvbuff + rank * count: the front end says "in place" as send == recv. */
    if (send == recv) send = (const char *)recv + (size_t)c->rank * count * comm_dtype_size(dt);
    check_nccl(c, ncclAllGather(send, recv, count, nccl_type(dt), state(c)->nccl, state(c)->stream), "ncclAllGather");
    return enqueued(c);
}

static void *nccl_ireduce_scatter(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op) {
    /* NCCL's in place is recvbuff = sendbuff + rank * count; mixpar's (send == recv, result at the start)
     * would overwrite input NCCL still has to read. */
    if (send == recv && c->size > 1 && count > 0)
        comm_fail(c, "reduce_scatter in place (send == recv) is not possible on the nccl backend: pass recv = send + "
                     "rank * count elements, NCCL's in-place form, or a separate buffer");
    check_nccl(c, ncclReduceScatter(send, recv, count, nccl_type(dt), nccl_op(op), state(c)->nccl, state(c)->stream),
               "ncclReduceScatter");
    return enqueued(c);
}

/* NCCL has no scatter or gather: a group of sends and receives, as NCCL's documentation shows. */
static void *nccl_iscatter(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, int root) {
    nccl_state *s = state(c);
    size_t bytes = count * comm_dtype_size(dt);
    check_nccl(c, ncclGroupStart(), "ncclGroupStart");
    if (c->rank == root)
        for (int r = 0; r < c->size; r++)
            check_nccl(c, ncclSend((const char *)send + (size_t)r * bytes, bytes, ncclUint8, r, s->nccl, s->stream), "ncclSend");
    check_nccl(c, ncclRecv(recv, bytes, ncclUint8, root, s->nccl, s->stream), "ncclRecv");
    check_nccl(c, ncclGroupEnd(), "ncclGroupEnd");
    return enqueued(c);
}

static void *nccl_igather(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, int root) {
    nccl_state *s = state(c);
    size_t bytes = count * comm_dtype_size(dt);
    check_nccl(c, ncclGroupStart(), "ncclGroupStart");
    if (c->rank == root)
        for (int r = 0; r < c->size; r++)
            check_nccl(c, ncclRecv((char *)recv + (size_t)r * bytes, bytes, ncclUint8, r, s->nccl, s->stream), "ncclRecv");
    check_nccl(c, ncclSend(send, bytes, ncclUint8, root, s->nccl, s->stream), "ncclSend");
    check_nccl(c, ncclGroupEnd(), "ncclGroupEnd");
    return enqueued(c);
}

static void *nccl_ibarrier(comm_t *c) {
    nccl_state *s = state(c);
    check_nccl(c, ncclAllReduce(s->d_one, s->d_one, 1, ncclInt32, ncclSum, s->nccl, s->stream), "ncclAllReduce (barrier)");
    return enqueued(c);
}

const comm_backend comm_backend_nccl = {
    .name = "nccl",
    .device_buffers = true,
    .init_world = nccl_init_world,
    .finalize = nccl_finalize,
    .split = nccl_split,
    .free = nccl_free,
    .isend = nccl_isend,
    .irecv = nccl_irecv,
    .test = nccl_test,
    .ibroadcast = nccl_ibroadcast,
    .ireduce = nccl_ireduce,
    .iallreduce = nccl_iallreduce,
    .iallgather = nccl_iallgather,
    .ireduce_scatter = nccl_ireduce_scatter,
    .iscatter = nccl_iscatter,
    .igather = nccl_igather,
    .ibarrier = nccl_ibarrier,
};
