/* comm.h: the communicator: one API for point-to-point and collective communication, backends behind it. */
#ifndef MIXPAR_COMM_COMM_H
#define MIXPAR_COMM_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/events.h"

/* A communicator is a group of ranks (processes) that can talk to each other: the world (every rank of
 * the job) or a sub-communicator made by comm_split (a data-parallel group, a tensor-parallel group).
 *
 * Backends (chosen once, by comm_init; like Redis's ae picks epoll, kqueue or select):
 *   self  one rank, no MPI at all: every single-process program works without mpirun
 *   mpi   OpenMPI ranks on one machine or many (launched by mpirun, `mixpar run`, or srun --mpi=pmix)
 *   nccl  GPU ranks; built only by tools/cuda_check.sh (core/comm/nccl/), buffers are device memory
 *
 * Algorithms. Every collective takes a comm_algo: the backend's own collective (NATIVE: MPI_Allreduce and
 * friends) or one of mixpar's, written on top of send/recv in core/comm/algo_*.c (lab 12):
 *   allreduce       ring (reduce-scatter + allgather), tree (pipelined binary tree), rhd (Rabenseifner),
 *                   chain (deterministic), hierarchical (ring inside each node, ring across nodes; lab 26)
 *   allgather       ring
 *   reduce_scatter  ring
 *   broadcast       tree (binomial)
 *   reduce          tree (binomial)
 *   scatter, gather, barrier: native only
 * COMM_ALGO_DEFAULT takes the communicator's default: native, unless the environment variable
 * MIXPAR_ALLREDUCE=ring|tree|rhd|native says otherwise when the world communicator is made (then
 * allreduce uses that algorithm and the other collectives use mixpar's own: ring for allgather and
 * reduce-scatter, binomial trees for broadcast and reduce). comm_set_default_algo changes it per call site.
 *
 * Data. Counts are element counts (size_t); 0 is allowed everywhere. fp16 and bf16 are uint16_t bit
 * patterns (fp/half.h). Reductions of fp16/bf16 data are done in fp32 and rounded once at the end (with
 * fp/convert.h), so an allreduce of bf16 gradients equals the fp32 sum rounded to bf16, whatever the rank
 * count: twice the bytes on the wire of a bf16 reduction, in exchange for one rounding instead of one per
 * hop. avg is sum then one division by the rank count; it is defined for the float types only.
 *
 * Send and receive buffers of one call must not overlap, except in place: send == recv for allreduce,
 * reduce and reduce_scatter (the result goes to the start of the buffer), and for allgather send == recv +
 * rank * count elements (this rank's block already in place), as MPI_IN_PLACE allows.
 *
 * Waiting: a rank that waits spins a little, then yields its core, and once nothing has moved for 2 ms sleeps
 * (20 us .. 1 ms a round), so that with more ranks than cores the waiting ones leave the cores to those still
 * computing; MIXPAR_COMM_WAIT=yield never sleeps (for comparison; comm_stats counts the idle polls and sleeps).
 *
 * Errors never hang: a blocking wait gives up after MIXPAR_COMM_TIMEOUT seconds (default 300) with a
 * message naming this rank, the operation and the peer, and exits 2. MIXPAR_COMM_DEBUG=1 checks before
 * every collective that all ranks called the same one with the same count (one extra small allgather).
 *
 *     comm_t *world = comm_init(&argc, &argv);
 *     float grad[1000];                                             // this rank's gradient
 *     comm_allreduce(world, grad, grad, 1000, COMM_FP32, COMM_AVG, COMM_ALGO_RING);
 *     comm_finalize(world);
 */

typedef struct comm comm_t;
typedef struct comm_request comm_request;

typedef enum {
    COMM_FP32,
    COMM_FP16, /* uint16_t IEEE half bits */
    COMM_BF16, /* uint16_t bfloat16 bits */
    COMM_INT32,
    COMM_INT64,
    COMM_NDTYPES
} comm_dtype;

typedef enum { COMM_SUM, COMM_AVG, COMM_MAX, COMM_MIN, COMM_NREDOPS } comm_redop;

typedef enum {
    COMM_ALGO_DEFAULT, /* the communicator's default for this operation */
    COMM_ALGO_RING,
    COMM_ALGO_TREE,    /* binary tree for allreduce, binomial tree for broadcast and reduce */
    COMM_ALGO_RHD,     /* recursive halving-doubling (Rabenseifner) */
    COMM_ALGO_NATIVE,  /* the backend's own collective */
    COMM_ALGO_CHAIN,   /* allreduce only: the ranks' buffers added in rank order (deterministic, algo_chain.c) */
    COMM_ALGO_HIER,    /* allreduce only: "hierarchical", inside nodes then across them (algo_hier.c, lab 26) */
    COMM_NALGOS
} comm_algo;

/* Operations, for statistics and events. */
typedef enum {
    COMM_OP_SEND,
    COMM_OP_RECV,
    COMM_OP_BROADCAST,
    COMM_OP_REDUCE,
    COMM_OP_ALLREDUCE,
    COMM_OP_ALLGATHER,
    COMM_OP_REDUCE_SCATTER,
    COMM_OP_SCATTER,
    COMM_OP_GATHER,
    COMM_OP_BARRIER,
    COMM_NOPS
} comm_op;

enum { COMM_UNDEFINED = -1 }; /* comm_split color: this rank joins no sub-communicator */

/* ---------------------------------------------------------------- setup */

/* Makes the world communicator. The backend: "mpi" when the program was started by mpirun (the variable
 * OMPI_COMM_WORLD_SIZE is set) or MIXPAR_COMM=mpi; "nccl" when MIXPAR_COMM=nccl in a build that has it;
 * else "self". A program started by torchrun-style variables (WORLD_SIZE > 1 without mpirun) stops with
 * an explanation (comm_launch_refuse_torchrun in comm/launch.c). argc/argv may be NULL. Call once;
 * comm_finalize at the end. */
comm_t *comm_init(int *argc, char ***argv);
/* Frees the world communicator (sub-communicators must have been freed) and shuts the backend down. */
void comm_finalize(comm_t *world);

int comm_rank(const comm_t *c);
int comm_size(const comm_t *c);
const char *comm_backend_name(const comm_t *c); /* "self", "mpi", "nccl" */

/* Splits c into sub-communicators, as MPI_Comm_split: ranks with the same color form one, numbered in
 * the order of (key, rank in c). Collective over c: every rank of c calls it, with its own color and key.
 * Returns NULL for color COMM_UNDEFINED (that rank joins no group); any other negative color is an error.
 * The child copies c's settings (timeout, debug check, events writer, default algorithms); its name is
 * "split" until comm_set_name. Every call of this API works on the child, mixpar's own algorithms
 * included (they are written on send/recv of a comm_t, and ranks in them are ranks of the child).
 * Free sub-communicators with comm_free, before comm_finalize of the world.
 *     comm_t *tp = comm_split(world, rank / 2, rank);    // pairs {0,1} {2,3} ...
 *     comm_set_name(tp, "tp");                           // comm events say "group":"tp"
 *     comm_allreduce(tp, x, x, n, COMM_FP32, COMM_SUM, COMM_ALGO_RING);
 *     comm_free(tp); */
comm_t *comm_split(comm_t *c, int color, int key);
void comm_free(comm_t *c);

/* The group's name, written as "group" in its comm events and named in its timeout and mismatch
 * messages: "world" for the world, "split" for a sub-communicator until named. At most 31 characters
 * of letters, digits, '_' and '-'. */
void comm_set_name(comm_t *c, const char *name);
const char *comm_name(const comm_t *c);
/* The world rank of rank `rank` of c (c's own numbering), or -1 when c cannot know it (a sub-communicator
 * of the nccl backend). comm_world_rank_of(c, comm_rank(c)) is this process's world rank. */
int comm_world_rank_of(const comm_t *c, int rank);

/* Per-communicator settings (sub-communicators copy their parent's). */
void comm_set_default_algo(comm_t *c, comm_op op, comm_algo algo);
comm_algo comm_default_algo(const comm_t *c, comm_op op);
void comm_set_timeout(comm_t *c, double seconds);   /* blocking waits give up after this (> 0) */
void comm_set_debug(comm_t *c, bool check_collectives);
/* The hierarchical allreduce's nodes: ranks 0..k-1 are node 0, k..2k-1 node 1, ...; the last node may be
 * smaller. k >= 1; k >= size (or 0, the default) makes the whole communicator one node. The default comes
 * from MIXPAR_RANKS_PER_NODE when the world is made; sub-communicators copy their parent's. Every rank
 * must set the same k. */
void comm_set_ranks_per_node(comm_t *c, int k);
int comm_ranks_per_node(const comm_t *c); /* 0: one node */
/* Emit one "comm" event per call (core/base/EVENTS.md) into w; NULL stops. The writer is not owned.
 * Events carry "group" (comm_name) and, on a sub-communicator, "group_rank" and "members" (the world
 * ranks of the group, in group order) so a trace shows which group each collective ran on. */
void comm_set_events(comm_t *c, ev_writer *w);
/* Tags the comm events that follow with "bucket": b and "queued": the time (mp_elapsed) the bucket was handed
 * over, which may be earlier than the call's t0 when it waits for a communication thread (b < 0: no tag).
 * DDP names its gradient buckets so. */
void comm_set_event_bucket(comm_t *c, int bucket, double queued);
/* True when calls may come from a thread other than the one that called comm_init, one thread at a time
 * (MPI_THREAD_SERIALIZED or better, or one rank): what DDP's communication thread needs. */
bool comm_thread_safe_serialized(const comm_t *c);

/* ---------------------------------------------------------------- point to point */

/* Blocking send/receive of count elements. tag >= 0. A receive must name the exact count sent. */
void comm_send(comm_t *c, const void *buf, size_t count, comm_dtype dt, int dst, int tag);
void comm_recv(comm_t *c, void *buf, size_t count, comm_dtype dt, int src, int tag);

/* Non-blocking: the buffer must stay untouched until the request completes. comm_wait blocks (with the
 * timeout) and sets *req to NULL; comm_test returns true and sets *req to NULL once complete. A NULL
 * request is complete.
 *     comm_request *r = comm_irecv(c, buf, n, COMM_FP32, left, 0);
 *     ... compute ...
 *     comm_wait(&r);                         // r == NULL now */
comm_request *comm_isend(comm_t *c, const void *buf, size_t count, comm_dtype dt, int dst, int tag);
comm_request *comm_irecv(comm_t *c, void *buf, size_t count, comm_dtype dt, int src, int tag);
void comm_wait(comm_request **req);
bool comm_test(comm_request **req);
/* Waits for n requests (NULLs allowed) and sets each to NULL: a pipeline stage's sends and receives of
 * one schedule step, whatever order they complete in. */
void comm_wait_all(comm_request **reqs, size_t n);

/* ---------------------------------------------------------------- collectives (all ranks call them) */

/* buf (count) at root -> buf on every rank. */
void comm_broadcast(comm_t *c, void *buf, size_t count, comm_dtype dt, int root, comm_algo algo);
/* recv (count, significant at root only; may be NULL elsewhere) = op over ranks of send (count). */
void comm_reduce(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op, int root,
                 comm_algo algo);
/* recv (count) = op over ranks of send (count), on every rank, bit for bit the same on every rank. */
void comm_allreduce(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op,
                    comm_algo algo);
/* recv (size * count): block r is rank r's send (count). */
void comm_allgather(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_algo algo);
/* recv (count) = block `rank` of op over ranks of send (size * count). */
void comm_reduce_scatter(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op,
                         comm_algo algo);
/* send (size * count, at root) -> recv (count): block r to rank r. */
void comm_scatter(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, int root);
/* send (count) -> recv (size * count, at root): rank r's to block r. */
void comm_gather(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, int root);
void comm_barrier(comm_t *c);

/* ---------------------------------------------------------------- statistics */

/* Per operation: calls, bytes this rank sent (payload, counted where mixpar sends them; for native
 * collectives, whose traffic the library hides, the bytes a bandwidth-optimal algorithm sends: allreduce
 * 2(p-1)/p x n, allgather and reduce-scatter (p-1)/p x n, broadcast and reduce n, scatter and gather
 * (p-1)/p x n at the root), and seconds spent. Since the communicator was made or last reset. */
typedef struct {
    uint64_t calls[COMM_NOPS];
    uint64_t bytes_sent[COMM_NOPS];
    double seconds[COMM_NOPS];
    uint64_t idle_polls; /* rounds of a waiting loop that found nothing done (each a spin, yield or sleep) */
    uint64_t sleeps;     /* of those, the ones that slept (MIXPAR_COMM_WAIT) */
} comm_stats_t;

void comm_stats(const comm_t *c, comm_stats_t *out);
void comm_stats_reset(comm_t *c);

/* Bytes the MPI backend holds while a native reduce-scatter of `count` elements of `elem` bytes per rank runs on
 * `p` ranks (the receive segments of its pairwise exchange; 0 when MPI's own runs): for the memory planner. */
size_t comm_mpi_reduce_scatter_scratch_bytes(size_t count, int p, size_t elem);

/* ---------------------------------------------------------------- names */

size_t comm_dtype_size(comm_dtype dt);
const char *comm_dtype_name(comm_dtype dt);   /* "fp32", "fp16", "bf16", "int32", "int64" */
const char *comm_redop_name(comm_redop op);   /* "sum", "avg", "max", "min" */
const char *comm_algo_name(comm_algo algo);   /* "default", "ring", "tree", "rhd", "native", "chain", "hierarchical" */
const char *comm_op_name(comm_op op);         /* "send", ..., "reduce_scatter", ... */
/* Parsers: -1 when the name is unknown. */
int comm_dtype_from_name(const char *name);
int comm_redop_from_name(const char *name);
int comm_algo_from_name(const char *name);
int comm_op_from_name(const char *name);
/* Whether mixpar implements `algo` for collective `op` (DEFAULT and NATIVE always). */
bool comm_algo_supported(comm_op op, comm_algo algo);

#endif
