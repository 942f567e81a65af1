/* comm.c: the communicator's front end: backend choice, argument checks, algorithm dispatch, fp16/bf16
 * widening, timeouts, the debug-mode agreement check, events and statistics. */
#include "comm/comm.h"
#include "comm/algo.h"
#include "comm/comm_internal.h"
#include "comm/launch.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/parse.h"
#include "fp/convert.h"
#include "prof/prof.h"

#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- names */

static const struct {
    const char *name;
    size_t size;
    bool reducible_as_is; /* reduced in its own type (fp16/bf16 are widened to fp32 first) */
    bool is_float;
} DTYPES[COMM_NDTYPES] = {
    [COMM_FP32] = {"fp32", 4, true, true},
    [COMM_FP16] = {"fp16", 2, false, true},
    [COMM_BF16] = {"bf16", 2, false, true},
    [COMM_INT32] = {"int32", 4, true, false},
    [COMM_INT64] = {"int64", 8, true, false},
};
static const char *const REDOP_NAMES[COMM_NREDOPS] = {"sum", "avg", "max", "min"};
static const char *const ALGO_NAMES[COMM_NALGOS] = {"default", "ring", "tree", "rhd", "native", "chain",
                                                        "hierarchical"};
static const char *const OP_NAMES[COMM_NOPS] = {"send",      "recv",           "broadcast", "reduce", "allreduce",
                                               "allgather", "reduce_scatter", "scatter",   "gather", "barrier"};

/* Which of mixpar's algorithms exist for which collective (DEFAULT and NATIVE exist for all). */
static const bool ALGO_SUPPORTED[COMM_NOPS][COMM_NALGOS] = {
    [COMM_OP_BROADCAST] = {[COMM_ALGO_TREE] = true},
    [COMM_OP_REDUCE] = {[COMM_ALGO_TREE] = true},
    [COMM_OP_ALLREDUCE] = {[COMM_ALGO_RING] = true, [COMM_ALGO_TREE] = true, [COMM_ALGO_RHD] = true,
                           [COMM_ALGO_CHAIN] = true, [COMM_ALGO_HIER] = true},
    [COMM_OP_ALLGATHER] = {[COMM_ALGO_RING] = true},
    [COMM_OP_REDUCE_SCATTER] = {[COMM_ALGO_RING] = true},
};

/* MIXPAR_ALLREDUCE=X picks X for allreduce; the other collectives then use this row's algorithms. */
static const comm_algo OWN_ALGOS[COMM_NOPS] = {
    [COMM_OP_BROADCAST] = COMM_ALGO_TREE,     [COMM_OP_REDUCE] = COMM_ALGO_TREE,
    [COMM_OP_ALLGATHER] = COMM_ALGO_RING,     [COMM_OP_REDUCE_SCATTER] = COMM_ALGO_RING,
    [COMM_OP_SCATTER] = COMM_ALGO_NATIVE,     [COMM_OP_GATHER] = COMM_ALGO_NATIVE,
    [COMM_OP_BARRIER] = COMM_ALGO_NATIVE,     [COMM_OP_SEND] = COMM_ALGO_NATIVE,
    [COMM_OP_RECV] = COMM_ALGO_NATIVE,
};

size_t comm_dtype_size(comm_dtype dt) { return (unsigned)dt < COMM_NDTYPES ? DTYPES[dt].size : 0; }
const char *comm_dtype_name(comm_dtype dt) { return (unsigned)dt < COMM_NDTYPES ? DTYPES[dt].name : "?"; }
const char *comm_redop_name(comm_redop op) { return (unsigned)op < COMM_NREDOPS ? REDOP_NAMES[op] : "?"; }
const char *comm_algo_name(comm_algo algo) { return (unsigned)algo < COMM_NALGOS ? ALGO_NAMES[algo] : "?"; }
const char *comm_op_name(comm_op op) { return (unsigned)op < COMM_NOPS ? OP_NAMES[op] : "?"; }

static int find_name(const char *name, const char *const *names, int n) {
    for (int i = 0; name && i < n; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}
int comm_dtype_from_name(const char *name) {
    for (int i = 0; name && i < COMM_NDTYPES; i++)
        if (strcmp(name, DTYPES[i].name) == 0) return i;
    return -1;
}
int comm_redop_from_name(const char *name) { return find_name(name, REDOP_NAMES, COMM_NREDOPS); }
int comm_algo_from_name(const char *name) { return find_name(name, ALGO_NAMES, COMM_NALGOS); }
int comm_op_from_name(const char *name) { return find_name(name, OP_NAMES, COMM_NOPS); }

bool comm_algo_supported(comm_op op, comm_algo algo) {
    if ((unsigned)op >= COMM_NOPS || (unsigned)algo >= COMM_NALGOS) return false;
    return algo == COMM_ALGO_DEFAULT || algo == COMM_ALGO_NATIVE || ALGO_SUPPORTED[op][algo];
}

/* ---------------------------------------------------------------- failing, waiting */

static void describe_rank(const comm_t *c, char *buf, size_t cap) {
    if (c->is_world) snprintf(buf, cap, "rank %d of %d", c->rank, c->size);
    else snprintf(buf, cap, "rank %d of %d in group %s (world rank %d)", c->rank, c->size, c->name, c->world_rank);
}

/* " (world rank W)" after a peer's rank in a sub-communicator's messages; "" in the world or when unknown. */
static void describe_peer_world(const comm_t *c, int peer, char *buf, size_t cap) {
    int w = comm_world_rank_of(c, peer);
    if (c->is_world || w < 0) snprintf(buf, cap, "%s", "");
    else snprintf(buf, cap, " (world rank %d)", w);
}

static void describe_context(const comm_t *c, char *buf, size_t cap) {
    const comm_context *x = &c->ctx;
    if (!x->active) {
        snprintf(buf, cap, "%s", "");
    } else if (x->op == COMM_OP_SEND || x->op == COMM_OP_RECV || x->op == COMM_OP_BARRIER) {
        snprintf(buf, cap, "in %s", comm_op_name(x->op));
    } else {
        snprintf(buf, cap, "in %s (%s, %zu x %s)", comm_op_name(x->op), comm_algo_name(x->algo), x->count,
                 comm_dtype_name(x->dt));
    }
}

void comm_fail(const comm_t *c, const char *fmt, ...) {
    char who[128], where[160], what[1024];
    describe_rank(c, who, sizeof who);
    describe_context(c, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "mixpar comm: %s%s%s: %s\n", who, where[0] ? ", " : "", where, what);
    fflush(stderr);
    exit(EXIT_BAD_INPUT);
}

static _Noreturn void fail_timeout(comm_t *c, double waited, int peer) {
    char who[128], where[160], awaited[128], peer_world[32];
    describe_rank(c, who, sizeof who);
    describe_context(c, where, sizeof where);
    describe_peer_world(c, peer, peer_world, sizeof peer_world);
    if (peer == c->rank) snprintf(awaited, sizeof awaited, "a message from rank %d, itself (which never sent it)", peer);
    else if (peer >= 0) snprintf(awaited, sizeof awaited, "a message from rank %d%s", peer, peer_world);
    else snprintf(awaited, sizeof awaited, "the other ranks of the collective");
    fflush(stdout);
    fprintf(stderr,
            "mixpar comm: %s timed out after %.1f s %s, waiting for %s.\n"
            "  That rank (or one it waits for) may have died or hung, or the ranks called different\n"
            "  collectives (MIXPAR_COMM_DEBUG=1 checks every collective's arguments across ranks).\n"
            "  The limit is MIXPAR_COMM_TIMEOUT=%g seconds.\n",
            who, waited, where, awaited, c->timeout_s);
    fflush(stderr);
    exit(EXIT_BAD_INPUT);
}

/* A waiting rank sleeps once nothing has moved for this long: the peers it waits for are still computing. */
#define COMM_SLEEP_AFTER_S 2e-3
#define COMM_SLEEP_MIN_S 20e-6
#define COMM_SLEEP_MAX_S 1e-3

void comm_poll_pause(comm_t *c, unsigned *spins, double t_start, int peer) {
    /* A short hot spin catches replies that are microseconds away; after it, yield on every round, since
     * with more ranks than cores the rank we wait for may need this very core. A wait with no progress for
     * COMM_SLEEP_AFTER_S sleeps instead, for 1/32 of the time waited so far (20 us .. 1 ms): sched_yield
     * leaves the rank runnable, so on an oversubscribed machine every waiting rank (4 ranks on 2 cores)
     * keeps taking turns on the cores the computing ranks need; asleep it takes none, and wakes soon
     * enough that a collective whose peers have all arrived loses at most a millisecond a round.
     * MIXPAR_COMM_WAIT=yield never sleeps (the old behaviour, for comparison). */
    c->stats.idle_polls++;
    if (++*spins < 64) return;
    double waited = -1;
    if ((*spins & 15) == 0) {
        waited = mp_now() - t_start;
        if (waited > c->timeout_s) fail_timeout(c, waited, peer);
    }
    if (c->wait_sleeps && *spins >= 256) {
        if (waited < 0) waited = mp_now() - t_start;
        if (waited > COMM_SLEEP_AFTER_S) {
            double s = fmin(fmax(waited / 32, COMM_SLEEP_MIN_S), COMM_SLEEP_MAX_S);
            struct timespec ts = {0, (long)(s * 1e9)};
            nanosleep(&ts, NULL);
            c->stats.sleeps++;
            return;
        }
    }
    sched_yield();
}

size_t comm_wait_raw(comm_t *c, void *req, int peer) {
    size_t received = 0;
    if (!req) return 0;
    double t0 = mp_now();
    unsigned spins = 0;
    while (!c->backend->test(c, req, &received)) comm_poll_pause(c, &spins, t0, peer);
    return received;
}

void *comm_scratch(comm_t *c, size_t bytes) {
    if (bytes > c->scratch_bytes) {
        mem_free(c->scratch);
        c->scratch = mem_alloc(bytes, MEM_COMM, "comm scratch (received segments)");
        c->scratch_bytes = bytes;
    }
    return c->scratch;
}

static void *wide_buffer(comm_t *c, size_t bytes) {
    if (bytes > c->wide_bytes) {
        mem_free(c->wide);
        c->wide = mem_alloc(bytes, MEM_COMM, "comm work buffer (fp32 copy of fp16/bf16 data)");
        c->wide_bytes = bytes;
    }
    return c->wide;
}

/* ---------------------------------------------------------------- setup */

static double env_seconds(const char *name, double fallback) {
    const char *s = getenv(name);
    double v;
    if (!s || !*s) return fallback;
    if (!parse_double(s, &v) || !(v > 0) || !isfinite(v))
        MP_FAIL_HINT("a positive number of seconds", "unset it for the default", "%s='%s'", name, s);
    return v;
}

static bool env_flag(const char *name) {
    const char *s = getenv(name);
    if (!s || !*s || strcmp(s, "0") == 0) return false;
    if (strcmp(s, "1") == 0) return true;
    MP_FAIL("0 or 1", "%s='%s'", name, s);
}

/* MIXPAR_COMM_WAIT: "sleep" (the default) or "yield" (waits never sleep; comm_poll_pause). */
static bool env_wait_sleeps(void) {
    const char *s = getenv("MIXPAR_COMM_WAIT");
    if (!s || !*s || strcmp(s, "sleep") == 0) return true;
    if (strcmp(s, "yield") == 0) return false;
    MP_FAIL_HINT("MIXPAR_COMM_WAIT=sleep or yield", "unset it for the default (sleep)", "MIXPAR_COMM_WAIT='%s'", s);
}

static int env_ranks_per_node(void) {
    const char *s = getenv("MIXPAR_RANKS_PER_NODE");
    int64_t v;
    if (!s || !*s) return 0;
    if (!parse_i64(s, &v) || v < 1 || v > 1 << 20)
        MP_FAIL_HINT("MIXPAR_RANKS_PER_NODE, a whole number >= 1", "unset it: the whole job is one node",
                     "MIXPAR_RANKS_PER_NODE='%s'", s);
    return (int)v;
}

static void init_defaults(comm_t *c) {
    for (int op = 0; op < COMM_NOPS; op++) c->defaults[op] = COMM_ALGO_NATIVE;
    const char *s = getenv("MIXPAR_ALLREDUCE");
    if (!s || !*s) return;
    int algo = comm_algo_from_name(s);
    if (algo < 0 || algo == COMM_ALGO_DEFAULT)
        MP_FAIL_HINT("MIXPAR_ALLREDUCE=ring, tree, rhd or native", "unset it for the library's own (native)",
                     "MIXPAR_ALLREDUCE='%s'", s);
    if (algo == COMM_ALGO_NATIVE) return;
    for (int op = 0; op < COMM_NOPS; op++) c->defaults[op] = OWN_ALGOS[op];
    c->defaults[COMM_OP_ALLREDUCE] = (comm_algo)algo;
}

static bool under_mpi_launcher(void) {
    /* mpirun (OpenMPI) sets OMPI_COMM_WORLD_SIZE; srun --mpi=pmix and other PMIx launchers set PMIX_RANK. */
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK");
}

static const comm_backend *choose_backend(void) {
    const char *want = getenv("MIXPAR_COMM");
    if (want && *want) {
        if (strcmp(want, "self") == 0) return &comm_backend_self;
        if (strcmp(want, "mpi") == 0) return &comm_backend_mpi;
        if (strcmp(want, "nccl") == 0) {
            if (&comm_backend_nccl == NULL)
                MP_FAIL_HINT("a build with the NCCL backend", "tools/cuda_check.sh builds it (needs CUDA and NCCL)",
                             "MIXPAR_COMM=nccl, but this program was built without core/comm/nccl/backend_nccl.c");
            return &comm_backend_nccl;
        }
        MP_FAIL_HINT("MIXPAR_COMM=self, mpi or nccl", "unset it to choose by launcher", "MIXPAR_COMM='%s'", want);
    }
    if (under_mpi_launcher()) return &comm_backend_mpi;
    comm_launch_refuse_torchrun();
    return &comm_backend_self;
}

static comm_t *comm_new(const comm_backend *backend) {
    comm_t *c = calloc(1, sizeof *c);
    MP_ASSERT(c, "out of memory for a communicator");
    c->backend = backend;
    c->event_bucket = -1;
    return c;
}

comm_t *comm_init(int *argc, char ***argv) {
    comm_launch_die_with_launcher(); /* before anything is written: a rank never outlives mpirun */
    comm_launch_record_exit();
    comm_t *c = comm_new(choose_backend());
    c->is_world = true;
    c->timeout_s = env_seconds("MIXPAR_COMM_TIMEOUT", 300.0);
    c->debug = env_flag("MIXPAR_COMM_DEBUG");
    c->wait_sleeps = env_wait_sleeps();
    c->ranks_per_node = env_ranks_per_node();
    init_defaults(c);
    mp_elapsed(); /* start the event clock */
    c->backend->init_world(c, argc, argv);
    c->world_rank = c->rank;
    snprintf(c->name, sizeof c->name, "%s", "world");
    c->members = malloc(sizeof(int) * (size_t)c->size);
    MP_ASSERT(c->members, "out of memory for %d ranks", c->size);
    for (int r = 0; r < c->size; r++) c->members[r] = r;
    return c;
}

static void comm_release(comm_t *c) {
    free(c->members);
    mem_free(c->scratch);
    mem_free(c->wide);
    free(c);
}

void comm_finalize(comm_t *world) {
    if (!world) return;
    MP_ASSERT(world->is_world, "comm_finalize takes the world communicator; free sub-communicators with comm_free");
    algo_hier_release(world);
    const comm_backend *b = world->backend;
    b->finalize(world);
    comm_release(world);
}

int comm_rank(const comm_t *c) { return c->rank; }
int comm_size(const comm_t *c) { return c->size; }
const char *comm_backend_name(const comm_t *c) { return c->backend->name; }

/* The world ranks the child of (color, key) will hold, in its order, and their count: every rank of c
 * shares its color and key (one small allgather on the collective channel), then each sorts as
 * MPI_Comm_split does, by key and then rank in c. NULL when c cannot allgather host memory (device
 * backends) or does not know its own members. */
static int *split_members(comm_t *c, int color, int key, int *count) {
    *count = 0;
    /* Every rank takes part in the allgather, COMM_UNDEFINED ones too: it is collective over c. */
    if (!c->members || c->backend->device_buffers) return NULL;
    int32_t mine[2] = {color, key};
    int32_t *all = malloc(sizeof(int32_t) * 2 * (size_t)c->size);
    int *order = malloc(sizeof(int) * (size_t)c->size);
    MP_ASSERT(all && order, "out of memory for %d ranks", c->size);
    if (c->size == 1) memcpy(all, mine, sizeof mine);
    else comm_wait_raw(c, c->backend->iallgather(c, mine, all, 2, COMM_INT32), -1);
    int n = 0;
    for (int r = 0; r < c->size && color != COMM_UNDEFINED; r++) {
        if (all[2 * r] != color) continue;
        int at = n++; /* insertion sort by (key, r): r grows, so ties keep their order */
        while (at > 0 && all[2 * order[at - 1] + 1] > all[2 * r + 1]) order[at] = order[at - 1], at--;
        order[at] = r;
    }
    for (int i = 0; i < n; i++) order[i] = c->members[order[i]];
    free(all);
    if (color == COMM_UNDEFINED) {
        free(order);
        return NULL;
    }
    *count = n;
    return order;
}

comm_t *comm_split(comm_t *c, int color, int key) {
    if (color < 0 && color != COMM_UNDEFINED)
        comm_fail(c, "comm_split color must be >= 0 or COMM_UNDEFINED, got %d", color);
    int nmembers = 0;
    int *members = split_members(c, color, key, &nmembers);
    comm_t *child = comm_new(c->backend);
    snprintf(child->name, sizeof child->name, "%s", "split");
    child->world_rank = c->world_rank;
    child->timeout_s = c->timeout_s;
    child->debug = c->debug;
    child->wait_sleeps = c->wait_sleeps;
    child->events = c->events;
    child->serialized_threads = c->serialized_threads;
    child->ranks_per_node = c->ranks_per_node;
    memcpy(child->defaults, c->defaults, sizeof child->defaults);
    if (!c->backend->split(c, child, color, key)) {
        free(members);
        free(child);
        return NULL;
    }
    if (members) {
        MP_ASSERT(child->size == nmembers && members[child->rank] == c->world_rank,
                  "the %s backend's split gave rank %d of %d; the colors and keys give %d members", c->backend->name,
                  child->rank, child->size, nmembers);
        child->members = members;
    }
    return child;
}

void comm_free(comm_t *c) {
    if (!c) return;
    MP_ASSERT(!c->is_world, "comm_free of the world communicator; use comm_finalize");
    algo_hier_release(c);
    c->backend->free(c);
    comm_release(c);
}

void comm_set_name(comm_t *c, const char *name) {
    size_t n = name ? strlen(name) : 0;
    bool ok = n > 0 && n < sizeof c->name;
    for (size_t i = 0; ok && i < n; i++)
        ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') || (name[i] >= '0' && name[i] <= '9') ||
             name[i] == '_' || name[i] == '-';
    if (!ok)
        comm_fail(c, "comm_set_name: a group name is 1 to %zu letters, digits, '_' or '-' (such as \"tp\"), got \"%s\"",
                  sizeof c->name - 1, name ? name : "(null)");
    memcpy(c->name, name, n + 1);
}
const char *comm_name(const comm_t *c) { return c->name; }
int comm_world_rank_of(const comm_t *c, int rank) {
    if (rank < 0 || rank >= c->size || !c->members) return -1;
    return c->members[rank];
}

void comm_set_default_algo(comm_t *c, comm_op op, comm_algo algo) {
    if ((unsigned)op >= COMM_NOPS) comm_fail(c, "comm_set_default_algo: unknown operation %d", (int)op);
    if (algo == COMM_ALGO_DEFAULT || !comm_algo_supported(op, algo))
        comm_fail(c, "comm_set_default_algo: mixpar has no %s algorithm for %s", comm_algo_name(algo),
                  comm_op_name(op));
    c->defaults[op] = algo;
}
void comm_set_ranks_per_node(comm_t *c, int k) {
    if (k < 0) comm_fail(c, "comm_set_ranks_per_node: ranks per node must be >= 1 (or 0: one node), got %d", k);
    c->ranks_per_node = k;
}
int comm_ranks_per_node(const comm_t *c) { return c->ranks_per_node; }

comm_algo comm_default_algo(const comm_t *c, comm_op op) {
    return (unsigned)op < COMM_NOPS ? c->defaults[op] : COMM_ALGO_NATIVE;
}
void comm_set_timeout(comm_t *c, double seconds) {
    if (!(seconds > 0) || !isfinite(seconds)) comm_fail(c, "timeout must be a positive number of seconds, got %g", seconds);
    c->timeout_s = seconds;
}
void comm_set_debug(comm_t *c, bool check_collectives) { c->debug = check_collectives; }
void comm_set_events(comm_t *c, ev_writer *w) { c->events = w; }
void comm_set_event_bucket(comm_t *c, int bucket, double queued) {
    c->event_bucket = bucket;
    c->event_queued = queued;
}
bool comm_thread_safe_serialized(const comm_t *c) { return c->size == 1 || c->serialized_threads; }

void comm_stats(const comm_t *c, comm_stats_t *out) { *out = c->stats; }
void comm_stats_reset(comm_t *c) { memset(&c->stats, 0, sizeof c->stats); }

/* ---------------------------------------------------------------- events and statistics */

static void emit_event(comm_t *c, comm_op op, comm_algo algo, size_t bytes, uint64_t sent, int peer, double t0,
                       double t1) {
    c->stats.calls[op]++;
    c->stats.bytes_sent[op] += sent;
    c->stats.seconds[op] += t1 - t0;
    if (prof_active) prof_comm_call(prof_active, comm_op_name(op), t0, t1, (double)bytes);
    if (!c->events) return;
    ev_begin(c->events, "comm");
    ev_str(c->events, "op", comm_op_name(op));
    ev_str(c->events, "algorithm", comm_algo_name(algo));
    ev_int(c->events, "bytes", (long long)bytes);
    ev_int(c->events, "bytes_sent", (long long)sent);
    ev_int(c->events, "peer", peer);
    ev_num(c->events, "t0", t0);
    ev_num(c->events, "t1", t1);
    ev_int(c->events, "ranks", c->size);
    ev_str(c->events, "group", c->name);
    if (!c->is_world) {
        ev_int(c->events, "group_rank", c->rank);
        if (c->members) {
            long long m[c->size];
            for (int r = 0; r < c->size; r++) m[r] = c->members[r];
            ev_ints(c->events, "members", m, (size_t)c->size);
        }
        if (peer >= 0 && c->members) ev_int(c->events, "peer_world", c->members[peer]);
    }
    if (c->event_bucket >= 0) {
        ev_int(c->events, "bucket", c->event_bucket);
        ev_num(c->events, "queued", c->event_queued);
    }
    ev_end(c->events);
}

/* ---------------------------------------------------------------- checks */

static void check_dtype(const comm_t *c, comm_dtype dt) {
    if ((unsigned)dt >= COMM_NDTYPES) comm_fail(c, "unknown data type %d", (int)dt);
}

static void check_redop(const comm_t *c, comm_dtype dt, comm_redop op) {
    if ((unsigned)op >= COMM_NREDOPS) comm_fail(c, "unknown reduction %d", (int)op);
    if (op == COMM_AVG && !DTYPES[dt].is_float)
        comm_fail(c, "avg is defined for fp32, fp16 and bf16, not %s (use sum and divide)", comm_dtype_name(dt));
}

static void check_peer(const comm_t *c, int peer, const char *what) {
    if (peer < 0 || peer >= c->size) comm_fail(c, "%s %d is not a rank of this communicator (0..%d)", what, peer, c->size - 1);
}

static void check_buffer(const comm_t *c, const void *p, size_t count, const char *what) {
    if (count > 0 && !p) comm_fail(c, "%s is NULL for %zu elements", what, count);
}

static comm_algo resolve_algo(comm_t *c, comm_op op, comm_algo algo) {
    if ((unsigned)algo >= COMM_NALGOS) comm_fail(c, "unknown algorithm %d for %s", (int)algo, comm_op_name(op));
    if (algo == COMM_ALGO_DEFAULT) algo = c->defaults[op];
    if (!comm_algo_supported(op, algo)) {
        char list[128] = "native";
        for (int a = COMM_ALGO_RING; a < COMM_ALGO_NATIVE; a++)
            if (ALGO_SUPPORTED[op][a])
                snprintf(list + strlen(list), sizeof list - strlen(list), ", %s", ALGO_NAMES[a]);
        comm_fail(c, "%s: mixpar has no %s algorithm for %s (it has: %s)", comm_op_name(op), comm_algo_name(algo),
                  comm_op_name(op), list);
    }
    if (c->backend->device_buffers && algo != COMM_ALGO_NATIVE)
        comm_fail(c, "the %s backend keeps buffers on the GPU, so only native algorithms run on it (asked for %s)",
                  c->backend->name, comm_algo_name(algo));
    return algo;
}

/* MIXPAR_COMM_DEBUG=1: before the collective, every rank shares what it is about to call; any difference
 * stops every rank, and the lowest rank prints the whole table. */
static void debug_agreement(comm_t *c, comm_op op, comm_algo algo, size_t count, comm_dtype dt, int redop, int root) {
    if (!c->debug || c->size == 1 || c->backend->device_buffers) return;
    enum { NFIELDS = 6 };
    int64_t mine[NFIELDS] = {op, (int64_t)count, dt, redop, root, algo};
    int64_t *all = malloc(sizeof(int64_t) * NFIELDS * (size_t)c->size);
    MP_ASSERT(all, "out of memory");
    comm_wait_raw(c, c->backend->iallgather(c, mine, all, NFIELDS, COMM_INT64), -1);
    bool same = true;
    for (int r = 1; r < c->size; r++) same &= memcmp(all, all + NFIELDS * r, sizeof mine) == 0;
    if (same) {
        free(all);
        return;
    }
    if (c->rank == 0) {
        fflush(stdout);
        char group[64] = "this communicator";
        if (!c->is_world) snprintf(group, sizeof group, "group %s", c->name);
        fprintf(stderr, "mixpar comm: collective mismatch (MIXPAR_COMM_DEBUG=1): the %d ranks of %s "
                        "called different collectives or counts:\n", c->size, group);
        for (int r = 0; r < c->size; r++) {
            const int64_t *f = all + NFIELDS * r;
            char extra[64] = "", peer_world[32];
            describe_peer_world(c, r, peer_world, sizeof peer_world);
            if (f[3] >= 0) snprintf(extra, sizeof extra, " %s", comm_redop_name((comm_redop)f[3]));
            if (f[4] >= 0) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " root %lld", (long long)f[4]);
            fprintf(stderr, "  rank %d%s: %s count %lld %s%s (%s)%s\n", r, peer_world, comm_op_name((comm_op)f[0]), (long long)f[1],
                    comm_dtype_name((comm_dtype)f[2]), extra, comm_algo_name((comm_algo)f[5]),
                    memcmp(f, all, sizeof mine) ? "   <- differs from rank 0" : "");
        }
        fprintf(stderr, "  every rank must make the same collective calls in the same order, with the same count, "
                        "type, reduction and root\n");
        fflush(stderr);
        exit(EXIT_BAD_INPUT);
    }
    /* Leave the talking to rank 0: the launcher ends this process when rank 0 exits. */
    double t0 = mp_now();
    while (mp_now() - t0 < 10.0) usleep(10000);
    exit(EXIT_BAD_INPUT);
}

/* ---------------------------------------------------------------- one call's bookkeeping */

typedef struct {
    comm_op op;
    comm_algo algo;
    double t0;
} call_scope;

static call_scope call_begin(comm_t *c, comm_op op, comm_algo algo, size_t count, comm_dtype dt, int redop, int root) {
    debug_agreement(c, op, algo, count, dt, redop, root);
    c->ctx = (comm_context){op, algo, count, dt, true};
    c->ctx_bytes_sent = 0;
    return (call_scope){op, algo, mp_elapsed()};
}

/* `modeled` > 0: bytes a native collective is taken to send (the library does not say). */
static void call_end(comm_t *c, call_scope s, size_t payload, uint64_t modeled) {
    uint64_t sent = s.algo == COMM_ALGO_NATIVE && c->size > 1 ? modeled : c->ctx_bytes_sent;
    emit_event(c, s.op, s.algo, payload, sent, -1, s.t0, mp_elapsed());
    c->ctx.active = false;
}

/* ---------------------------------------------------------------- point to point */

struct comm_request {
    comm_t *c;
    void *impl;
    comm_op op;
    size_t bytes;
    int peer;
    double t0;
};

static void check_p2p(comm_t *c, const void *buf, size_t count, comm_dtype dt, int peer, int tag, const char *who) {
    check_dtype(c, dt);
    check_peer(c, peer, who);
    check_buffer(c, buf, count, "the buffer");
    if (tag < 0) comm_fail(c, "tags must be >= 0, got %d", tag);
    if (count * comm_dtype_size(dt) > INT_MAX)
        comm_fail(c, "one message holds at most %d bytes; split %zu x %s into several", INT_MAX, count, comm_dtype_name(dt));
}

static comm_request *request_new(comm_t *c, void *impl, comm_op op, size_t bytes, int peer, double t0) {
    comm_request *r = malloc(sizeof *r);
    MP_ASSERT(r, "out of memory for a request");
    *r = (comm_request){c, impl, op, bytes, peer, t0};
    return r;
}

comm_request *comm_isend(comm_t *c, const void *buf, size_t count, comm_dtype dt, int dst, int tag) {
    check_p2p(c, buf, count, dt, dst, tag, "destination");
    size_t bytes = count * comm_dtype_size(dt);
    double t0 = mp_elapsed();
    return request_new(c, c->backend->isend(c, buf, bytes, dst, tag, COMM_CHANNEL_USER), COMM_OP_SEND, bytes, dst, t0);
}

comm_request *comm_irecv(comm_t *c, void *buf, size_t count, comm_dtype dt, int src, int tag) {
    check_p2p(c, buf, count, dt, src, tag, "source");
    size_t bytes = count * comm_dtype_size(dt);
    double t0 = mp_elapsed();
    return request_new(c, c->backend->irecv(c, buf, bytes, src, tag, COMM_CHANNEL_USER), COMM_OP_RECV, bytes, src, t0);
}

static void request_done(comm_request *r, size_t received) {
    comm_t *c = r->c;
    if (r->op == COMM_OP_RECV && received != r->bytes)
        comm_fail(c, "received %zu bytes from rank %d, but the receive was posted for %zu: a receive must name "
                  "the exact count the sender sends", received, r->peer, r->bytes);
    emit_event(c, r->op, COMM_ALGO_NATIVE, r->bytes, r->op == COMM_OP_SEND ? r->bytes : 0, r->peer, r->t0, mp_elapsed());
    free(r);
}

void comm_wait(comm_request **req) {
    if (!req || !*req) return;
    comm_request *r = *req;
    comm_t *c = r->c;
    comm_context saved = c->ctx;
    c->ctx = (comm_context){r->op, COMM_ALGO_NATIVE, r->bytes, COMM_FP32, true};
    size_t received = comm_wait_raw(c, r->impl, r->peer);
    c->ctx = saved;
    request_done(r, received);
    *req = NULL;
}

bool comm_test(comm_request **req) {
    if (!req || !*req) return true;
    comm_request *r = *req;
    size_t received = 0;
    if (r->impl && !r->c->backend->test(r->c, r->impl, &received)) return false;
    request_done(r, received);
    *req = NULL;
    return true;
}

void comm_wait_all(comm_request **reqs, size_t n) {
    /* Waiting in order is enough: a request waited for later may already be complete, and every
     * request is progressed by the library while any of them is waited on. */
    for (size_t i = 0; i < n; i++) comm_wait(&reqs[i]);
}

void comm_send(comm_t *c, const void *buf, size_t count, comm_dtype dt, int dst, int tag) {
    comm_request *r = comm_isend(c, buf, count, dt, dst, tag);
    comm_wait(&r);
}

void comm_recv(comm_t *c, void *buf, size_t count, comm_dtype dt, int src, int tag) {
    comm_request *r = comm_irecv(c, buf, count, dt, src, tag);
    comm_wait(&r);
}

/* ---------------------------------------------------------------- fp16/bf16 <-> fp32 */

static bool is_low_precision(comm_dtype dt) { return dt == COMM_FP16 || dt == COMM_BF16; }

static void widen(float *dst, const void *src, size_t n, comm_dtype dt) {
    if (dt == COMM_FP16) fp_f16_to_f32(dst, src, n);
    else fp_bf16_to_f32(dst, src, n);
}

/* The one rounding of a low-precision reduction. */
static void narrow(void *dst, const float *src, size_t n, comm_dtype dt) {
    if (dt == COMM_FP16) fp_f32_to_f16(dst, src, n);
    else fp_f32_to_bf16(dst, src, n);
}

/* ---------------------------------------------------------------- collectives */

static uint64_t ring_share(const comm_t *c, size_t bytes) {
    return c->size > 1 ? (uint64_t)((double)bytes * (c->size - 1) / c->size + 0.5) : 0;
}

static void native_wait(comm_t *c, void *req) { comm_wait_raw(c, req, -1); }

void comm_allreduce(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op,
                    comm_algo algo) {
    check_dtype(c, dt);
    check_redop(c, dt, op);
    check_buffer(c, send, count, "allreduce send buffer");
    check_buffer(c, recv, count, "allreduce receive buffer");
    algo = resolve_algo(c, COMM_OP_ALLREDUCE, algo);
    call_scope s = call_begin(c, COMM_OP_ALLREDUCE, algo, count, dt, op, -1);
    size_t elem = comm_dtype_size(dt);
    if (c->backend->device_buffers) {
        native_wait(c, c->backend->iallreduce(c, send, recv, count, dt, op));
        call_end(c, s, count * elem, 2 * ring_share(c, count * elem));
        return;
    }
    comm_dtype wt = is_low_precision(dt) ? COMM_FP32 : dt;
    comm_redop rop = op == COMM_AVG ? COMM_SUM : op;
    void *work = recv;
    if (is_low_precision(dt)) {
        work = wide_buffer(c, count * sizeof(float));
        widen(work, send, count, dt);
    } else if (algo != COMM_ALGO_NATIVE && send != recv) {
        memcpy(recv, send, count * elem);
    }
    if (count > 0 && c->size > 1) {
        switch (algo) {
        case COMM_ALGO_RING: algo_ring_allreduce(c, work, count, wt, rop); break;
        case COMM_ALGO_TREE: algo_tree_allreduce(c, work, count, wt, rop); break;
        case COMM_ALGO_RHD: algo_rhd_allreduce(c, work, count, wt, rop); break;
        case COMM_ALGO_CHAIN: algo_chain_allreduce(c, work, count, wt, rop); break;
        case COMM_ALGO_HIER: algo_hier_allreduce(c, work, count, wt, rop); break;
        default:
            native_wait(c, c->backend->iallreduce(c, work == recv ? send : work, work, count, wt, rop));
            break;
        }
    } else if (algo == COMM_ALGO_NATIVE && work == recv && send != recv) {
        memcpy(recv, send, count * elem);
    }
    if (op == COMM_AVG) comm_scale_fp32(work, count, (float)c->size);
    if (is_low_precision(dt)) narrow(recv, work, count, dt);
    call_end(c, s, count * elem, 2 * ring_share(c, count * comm_dtype_size(wt)));
}

void comm_reduce(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op, int root,
                 comm_algo algo) {
    check_dtype(c, dt);
    check_redop(c, dt, op);
    check_peer(c, root, "root");
    check_buffer(c, send, count, "reduce send buffer");
    if (c->rank == root) check_buffer(c, recv, count, "reduce receive buffer at the root");
    algo = resolve_algo(c, COMM_OP_REDUCE, algo);
    call_scope s = call_begin(c, COMM_OP_REDUCE, algo, count, dt, op, root);
    size_t elem = comm_dtype_size(dt);
    if (c->backend->device_buffers) {
        native_wait(c, c->backend->ireduce(c, send, recv, count, dt, op, root));
        call_end(c, s, count * elem, c->rank == root ? 0 : count * elem);
        return;
    }
    comm_dtype wt = is_low_precision(dt) ? COMM_FP32 : dt;
    comm_redop rop = op == COMM_AVG ? COMM_SUM : op;
    size_t wbytes = count * comm_dtype_size(wt);
    bool at_root = c->rank == root;
    /* The work buffer: the root reduces into recv (or the fp32 copy); other ranks into a copy of send,
     * since the tree overwrites it with partial results. */
    void *work = at_root && !is_low_precision(dt) ? recv : wide_buffer(c, wbytes);
    if (is_low_precision(dt)) widen(work, send, count, dt);
    else if (work != send) memcpy(work, send, wbytes);
    if (count > 0 && c->size > 1) {
        if (algo == COMM_ALGO_TREE) algo_binomial_reduce(c, work, count, wt, rop, root);
        else native_wait(c, c->backend->ireduce(c, work, work, count, wt, rop, root));
    }
    if (at_root) {
        if (op == COMM_AVG) comm_scale_fp32(work, count, (float)c->size);
        if (is_low_precision(dt)) narrow(recv, work, count, dt);
    }
    call_end(c, s, count * elem, at_root ? 0 : wbytes);
}

void comm_broadcast(comm_t *c, void *buf, size_t count, comm_dtype dt, int root, comm_algo algo) {
    check_dtype(c, dt);
    check_peer(c, root, "root");
    check_buffer(c, buf, count, "broadcast buffer");
    algo = resolve_algo(c, COMM_OP_BROADCAST, algo);
    call_scope s = call_begin(c, COMM_OP_BROADCAST, algo, count, dt, -1, root);
    size_t bytes = count * comm_dtype_size(dt);
    if (count > 0 && c->size > 1) {
        if (algo == COMM_ALGO_TREE) algo_binomial_broadcast(c, buf, count, dt, root);
        else native_wait(c, c->backend->ibroadcast(c, buf, count, dt, root));
    }
    call_end(c, s, bytes, c->rank == comm_mod(root - 1, c->size) ? 0 : bytes);
}

void comm_allgather(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_algo algo) {
    check_dtype(c, dt);
    check_buffer(c, send, count, "allgather send buffer");
    check_buffer(c, recv, count, "allgather receive buffer");
    algo = resolve_algo(c, COMM_OP_ALLGATHER, algo);
    call_scope s = call_begin(c, COMM_OP_ALLGATHER, algo, count, dt, -1, -1);
    size_t bytes = count * comm_dtype_size(dt);
    char *mine = (char *)recv + (size_t)c->rank * bytes;
    if (c->backend->device_buffers || (algo == COMM_ALGO_NATIVE && c->size > 1 && count > 0)) {
        native_wait(c, c->backend->iallgather(c, send == mine ? recv : send, recv, count, dt));
    } else {
        if (send != mine && bytes) memcpy(mine, send, bytes);
        if (count > 0 && c->size > 1) algo_ring_allgather(c, recv, count * (size_t)c->size, dt);
    }
    call_end(c, s, bytes * (size_t)c->size, (uint64_t)bytes * (uint64_t)(c->size - 1));
}

void comm_reduce_scatter(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, comm_redop op,
                         comm_algo algo) {
    check_dtype(c, dt);
    check_redop(c, dt, op);
    check_buffer(c, send, count, "reduce_scatter send buffer");
    check_buffer(c, recv, count, "reduce_scatter receive buffer");
    algo = resolve_algo(c, COMM_OP_REDUCE_SCATTER, algo);
    call_scope s = call_begin(c, COMM_OP_REDUCE_SCATTER, algo, count, dt, op, -1);
    size_t elem = comm_dtype_size(dt), total = count * (size_t)c->size;
    if (c->backend->device_buffers) {
        native_wait(c, c->backend->ireduce_scatter(c, send, recv, count, dt, op));
        call_end(c, s, total * elem, (uint64_t)count * elem * (uint64_t)(c->size - 1));
        return;
    }
    comm_dtype wt = is_low_precision(dt) ? COMM_FP32 : dt;
    comm_redop rop = op == COMM_AVG ? COMM_SUM : op;
    size_t welem = comm_dtype_size(wt);
    const char *in = send, *out = recv;
    bool apart = out + count * elem <= in || in + total * elem <= out; /* MPI forbids aliasing buffers */
    if (algo == COMM_ALGO_NATIVE && !is_low_precision(dt) && apart && count > 0 && c->size > 1) {
        /* The library reads send and writes recv: no copy of the whole input (for ZeRO-3's largest unit, a
         * buffer the size of the embedding table that would stay allocated for later calls). */
        void *fused = op == COMM_AVG && dt == COMM_FP32 && c->backend->ireduce_scatter_avg_fp32
                          ? c->backend->ireduce_scatter_avg_fp32(c, send, recv, count)
                          : NULL;
        if (fused) {
            native_wait(c, fused);
        } else {
            native_wait(c, c->backend->ireduce_scatter(c, send, recv, count, dt, rop));
            if (op == COMM_AVG) comm_scale_fp32((float *)recv, count, (float)c->size);
        }
        call_end(c, s, total * elem, (uint64_t)count * elem * (uint64_t)(c->size - 1));
        return;
    }
    /* Otherwise both algorithms reduce in place over the whole (size * count) buffer, so they work on a copy. */
    void *work = wide_buffer(c, total * welem);
    if (is_low_precision(dt)) widen(work, send, total, dt);
    else if (total) memcpy(work, send, total * elem);
    char *result = work;
    if (count > 0 && c->size > 1) {
        if (algo == COMM_ALGO_RING) {
            algo_ring_reduce_scatter(c, work, total, wt, rop);
            result += (size_t)c->rank * count * welem;
        } else if (!is_low_precision(dt)) {
            /* recv lies outside the work copy, so the library reads one and writes the other (not in place). */
            native_wait(c, c->backend->ireduce_scatter(c, work, recv, count, wt, rop));
            result = recv;
        } else {
            native_wait(c, c->backend->ireduce_scatter(c, work, work, count, wt, rop));
        }
    }
    if (op == COMM_AVG) comm_scale_fp32((float *)result, count, (float)c->size);
    if (is_low_precision(dt)) narrow(recv, (float *)result, count, dt);
    else if (count && result != (char *)recv) memmove(recv, result, count * elem);
    call_end(c, s, total * elem, (uint64_t)count * welem * (uint64_t)(c->size - 1));
}

void comm_scatter(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, int root) {
    check_dtype(c, dt);
    check_peer(c, root, "root");
    if (c->rank == root) check_buffer(c, send, count, "scatter send buffer at the root");
    check_buffer(c, recv, count, "scatter receive buffer");
    comm_algo algo = resolve_algo(c, COMM_OP_SCATTER, COMM_ALGO_NATIVE);
    call_scope s = call_begin(c, COMM_OP_SCATTER, algo, count, dt, -1, root);
    size_t bytes = count * comm_dtype_size(dt);
    if (c->backend->device_buffers || (c->size > 1 && count > 0))
        native_wait(c, c->backend->iscatter(c, send, recv, count, dt, root));
    else if (bytes && send != recv) memcpy(recv, send, bytes);
    call_end(c, s, bytes * (size_t)c->size, c->rank == root ? (uint64_t)bytes * (uint64_t)(c->size - 1) : 0);
}

void comm_gather(comm_t *c, const void *send, void *recv, size_t count, comm_dtype dt, int root) {
    check_dtype(c, dt);
    check_peer(c, root, "root");
    check_buffer(c, send, count, "gather send buffer");
    if (c->rank == root) check_buffer(c, recv, count, "gather receive buffer at the root");
    comm_algo algo = resolve_algo(c, COMM_OP_GATHER, COMM_ALGO_NATIVE);
    call_scope s = call_begin(c, COMM_OP_GATHER, algo, count, dt, -1, root);
    size_t bytes = count * comm_dtype_size(dt);
    if (c->backend->device_buffers || (c->size > 1 && count > 0))
        native_wait(c, c->backend->igather(c, send, recv, count, dt, root));
    else if (bytes && send != recv) memcpy(recv, send, bytes);
    call_end(c, s, bytes * (size_t)c->size, c->rank == root ? 0 : bytes);
}

void comm_barrier(comm_t *c) {
    comm_algo algo = resolve_algo(c, COMM_OP_BARRIER, COMM_ALGO_NATIVE);
    call_scope s = call_begin(c, COMM_OP_BARRIER, algo, 0, COMM_FP32, -1, -1);
    if (c->size > 1) native_wait(c, c->backend->ibarrier(c));
    call_end(c, s, 0, 0);
}
