/* comm_internal.h: what the communicator's front end, its backends and its algorithms share (not public). */
#ifndef MIXPAR_COMM_INTERNAL_H
#define MIXPAR_COMM_INTERNAL_H

#include "comm/comm.h"

#include <stdbool.h>
#include <stddef.h>

/* Two channels keep a user's point-to-point messages apart from the ones mixpar's collective algorithms
 * send, so a user's pending receive can never swallow an algorithm's message (MPI: two communicators). */
typedef enum { COMM_CHANNEL_USER, COMM_CHANNEL_COLL } comm_channel;

/* A backend (self, mpi, nccl). Requests are the backend's own (void *); NULL means already complete.
 * Native collectives are non-blocking so that the front end can wait on them with its timeout. On host
 * backends they see only the types they can reduce (fp32, int32, int64: the front end widens fp16/bf16)
 * and sum/max/min (the front end turns avg into sum and one division); a device backend (nccl) gets the
 * call as made, since its buffers are not host memory. */
typedef struct comm_backend {
    const char *name;
    bool device_buffers; /* buffers live on the GPU: only native algorithms, no host-side conversion */
    /* Sets up the world: fills c->rank, c->size and c->impl. */
    void (*init_world)(comm_t *c, int *argc, char ***argv);
    void (*finalize)(comm_t *world);
    /* Fills child->rank, child->size, child->impl; false when this rank's color is COMM_UNDEFINED. */
    bool (*split)(comm_t *parent, comm_t *child, int color, int key);
    void (*free)(comm_t *c);
    void *(*isend)(comm_t *c, const void *buf, size_t bytes, int dst, int tag, comm_channel ch);
    void *(*irecv)(comm_t *c, void *buf, size_t bytes, int src, int tag, comm_channel ch);
    /* Progresses *req; when it has completed, frees it, stores the bytes received (receives; 0 for the
     * rest) in *received when not NULL, and returns true. Backend errors stop the program (exit 2). */
    bool (*test)(comm_t *c, void *req, size_t *received);
    void *(*ibroadcast)(comm_t *c, void *buf, size_t count, comm_dtype dt, int root);
    void *(*ireduce)(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op, int root);
    void *(*iallreduce)(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op);
    void *(*iallgather)(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt);
    void *(*ireduce_scatter)(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op);
    /* Optional: an fp32 reduce-scatter with COMM_AVG whose division (by the rank count, element by element, after
     * the sum) the backend takes while each piece of the result is in cache; NULL when it does not apply to these
     * buffers, and then the caller sums with ireduce_scatter and divides. */
    void *(*ireduce_scatter_avg_fp32)(comm_t *c, const void *send, void *recv, size_t count);
    void *(*iscatter)(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, int root);
    void *(*igather)(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, int root);
    void *(*ibarrier)(comm_t *c);
} comm_backend;

extern const comm_backend comm_backend_self;
extern const comm_backend comm_backend_mpi;
/* Defined only when core/comm/nccl/backend_nccl.c is linked in (tools/cuda_check.sh); NULL otherwise. */
extern const comm_backend comm_backend_nccl __attribute__((weak));

/* What the communicator is doing now, for timeout and error messages. */
typedef struct {
    comm_op op;
    comm_algo algo;
    size_t count;
    comm_dtype dt;
    bool active;
} comm_context;

struct comm {
    const comm_backend *backend;
    void *impl;        /* the backend's state */
    int rank, size;
    int world_rank;    /* this process's rank in the world, for messages */
    bool is_world;
    char name[32];     /* the group's name in events and messages: "world", "tp", "dp", ... (comm_set_name) */
    /* members[r]: the world rank of this communicator's rank r (size entries), found by comm_split from
     * the colors and keys; NULL where unknown (sub-communicators of a device backend, whose collectives
     * cannot take host buffers: comm_world_rank_of then answers -1). */
    int *members;
    double timeout_s;
    bool debug;
    bool wait_sleeps; /* MIXPAR_COMM_WAIT: long waits sleep rather than yield (comm_poll_pause) */
    comm_algo defaults[COMM_NOPS];
    ev_writer *events;
    int event_bucket;        /* written as "bucket" in comm events when >= 0 (DDP's bucket index) */
    double event_queued;     /* written as "queued" when event_bucket >= 0: when backward handed the bucket over */
    bool serialized_threads; /* another thread may make the calls, one thread at a time (MPI_THREAD_SERIALIZED) */
    comm_stats_t stats;
    /* The hierarchical allreduce (algo_hier.c): nodes of ranks_per_node ranks (0: one node), and the two
     * groups it made for them, kept until c is freed or ranks_per_node changes (hier_k: the k they are for). */
    int ranks_per_node;
    int hier_k;
    struct comm *hier_intra, *hier_inter;
    comm_context ctx;
    uint64_t ctx_bytes_sent; /* bytes the running collective has sent so far */
    /* Scratch for the algorithms: received segments waiting to be reduced, widened fp16/bf16 data. */
    void *scratch;
    size_t scratch_bytes;
    void *wide;
    size_t wide_bytes;
};

/* ---------------------------------------------------------------- front-end services for backends and algorithms */

/* Waits for a backend request with the communicator's timeout; `peer` (or -1 for a whole collective)
 * names who is awaited in the timeout message. Returns the bytes received. */
size_t comm_wait_raw(comm_t *c, void *req, int peer);
/* The polite spin of a waiting loop: spins a little, then yields the core (ranks may share cores), sleeps
 * once nothing has moved for 2 ms (MIXPAR_COMM_WAIT=yield: never), and stops the program with the timeout message once `t_start` is more than the timeout ago. */
void comm_poll_pause(comm_t *c, unsigned *spins, double t_start, int peer);
/* Stops the program: "mixpar comm: rank R: <what> ... during <op> (<algo>)"; exit 2. */
_Noreturn void comm_fail(const comm_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A scratch buffer of at least `bytes` owned by the communicator (grown on demand, tag MEM_COMM). */
void *comm_scratch(comm_t *c, size_t bytes);

/* ---------------------------------------------------------------- reduction kernels (comm_reduce.c) */

/* inout[i] = inout[i] op in[i] for i < count; dt is fp32, int32 or int64, op is sum, max or min. */
void comm_reduce_local(void *inout, const void *in, size_t count, comm_dtype dt, comm_redop op);
/* x[i] /= divisor, fp32 (avg = sum, then this). */
void comm_scale_fp32(float *x, size_t count, float divisor);

#endif
