/* collective_worker.h: the whole program lab 12's tests start on N ranks (build/labs/lab12_worker, from lab12_worker.c;
 * lab 26's worker is the same program). Each rank runs
 * one collective on known data for each count given, compares its result with the answer it computes
 * itself from the inputs (no communication involved), and writes one line per count to DIR/rank<R>.txt:
 *
 *     root=0 count=1000 wrong=0 first=-1 want=0 got=0 hash=9a3c... sent=6000 to=4.2.1 from=-
 *
 * wrong: elements that differ from the answer; first, want, got: the first of them; hash: of the result
 * bytes (all ranks must agree for allreduce and allgather); sent: bytes this rank sent (comm_stats); to, from:
 * the ranks this rank's messages went to and came from, in the order they were posted (a message cut into
 * segments counts once; '-': none), seen by wrapping the backend's isend and irecv.
 *
 * usage: lab12_worker DIR OP ALGO DTYPE REDOP ROOT SEED COUNT...
 *   OP allreduce|reduce_scatter|allgather|broadcast|reduce, ALGO ring|tree|rhd|native,
 *   DTYPE fp32|bf16|int32, REDOP sum|max|min|avg, ROOT for broadcast and reduce (-1: every root in
 *   turn, one line each), SEED any number.
 *   For reduce_scatter and allgather, COUNT is the count per rank. */
#include "base/rng.h"
#include "comm/comm.h"
#include "comm/comm_internal.h"
#include "fp/convert.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nranks;

/* The peers of this rank's collective messages, in posting order: the backend's isend and irecv wrapped. */
enum { PEERS_MAX = 256 };
typedef struct {
    int n, peer[PEERS_MAX];
} peer_log;
static peer_log sent_to, received_from;
static const comm_backend *real_backend;
static comm_backend recording_backend;

static void note_peer(int peer, bool send) {
    /* Segments of one message follow each other: a peer repeated in a row is one message. */
    peer_log *log = send ? &sent_to : &received_from;
    if (log->n < PEERS_MAX && (log->n == 0 || log->peer[log->n - 1] != peer)) log->peer[log->n++] = peer;
}
static void *recording_isend(comm_t *c, const void *buf, size_t bytes, int dst, int tag, comm_channel ch) {
    if (ch == COMM_CHANNEL_COLL) note_peer(dst, true);
    return real_backend->isend(c, buf, bytes, dst, tag, ch);
}
static void *recording_irecv(comm_t *c, void *buf, size_t bytes, int src, int tag, comm_channel ch) {
    if (ch == COMM_CHANNEL_COLL) note_peer(src, false);
    return real_backend->irecv(c, buf, bytes, src, tag, ch);
}
static void record_peers(comm_t *c) {
    real_backend = c->backend;
    recording_backend = *c->backend;
    recording_backend.isend = recording_isend;
    recording_backend.irecv = recording_irecv;
    c->backend = &recording_backend;
}
static void write_peers(FILE *out, const char *key, const peer_log *log) {
    fprintf(out, " %s=", key);
    if (log->n == 0) fputc('-', out);
    for (int i = 0; i < log->n; i++) fprintf(out, i ? ".%d" : "%d", log->peer[i]);
}

/* Rank r's input element i: a small integer (-8..8, never 0 so a lost contribution always shows), exact
 * in every type and in every sum over up to 32 ranks, so the answer does not depend on the order in
 * which an algorithm adds. */
static int input(unsigned seed, int r, size_t i) {
    int v = (int)(mp_hash32((uint64_t)seed * 1000003u + (uint64_t)r, i) % 16u) - 8;
    return v >= 0 ? v + 1 : v;
}

static double reduce_inputs(unsigned seed, comm_redop op, size_t i) {
    double acc = input(seed, 0, i);
    for (int r = 1; r < nranks; r++) {
        double v = input(seed, r, i);
        acc = op == COMM_MAX ? (v > acc ? v : acc) : op == COMM_MIN ? (v < acc ? v : acc) : acc + v;
    }
    return op == COMM_AVG ? (double)((float)acc / (float)nranks) : acc;
}

static void store(void *buf, size_t i, double v, comm_dtype dt) {
    float f = (float)v;
    if (dt == COMM_FP32) ((float *)buf)[i] = f;
    else if (dt == COMM_BF16) fp_f32_to_bf16((uint16_t *)buf + i, &f, 1);
    else ((int32_t *)buf)[i] = (int32_t)v;
}

static double load(const void *buf, size_t i, comm_dtype dt) {
    float f;
    if (dt == COMM_FP32) return ((const float *)buf)[i];
    if (dt == COMM_BF16) return fp_bf16_to_f32(&f, (const uint16_t *)buf + i, 1), f;
    return ((const int32_t *)buf)[i];
}

static _Noreturn void usage(const char *why) {
    fprintf(stderr, "lab12_worker: %s\nusage: lab12_worker DIR OP ALGO DTYPE REDOP ROOT SEED COUNT...\n", why);
    exit(2);
}

typedef struct {
    const char *op;
    comm_algo algo;
    comm_dtype dt;
    comm_redop redop;
    unsigned seed;
} job;

/* One collective of `count` elements (per rank for reduce_scatter and allgather), checked; one line out. */
static void run_one(comm_t *c, FILE *out, const job *j, int root, size_t count) {
    const int rank = comm_rank(c);
    const size_t esz = comm_dtype_size(j->dt);
    /* in: this rank's input; res: the result. Their lengths, and the answer, depend on the operation. */
    size_t in_n = count, res_n = count;
    if (strcmp(j->op, "reduce_scatter") == 0) in_n = count * (size_t)nranks;
    if (strcmp(j->op, "allgather") == 0) res_n = count * (size_t)nranks;
    char *in = calloc(in_n + 1, esz), *res = calloc(res_n + 1, esz);
    if (!in || !res) usage("out of memory");
    for (size_t i = 0; i < in_n; i++) store(in, i, input(j->seed, rank, i), j->dt);
    comm_stats_reset(c);
    sent_to.n = received_from.n = 0;
    bool check = true;
    if (strcmp(j->op, "allreduce") == 0) {
        comm_allreduce(c, in, res, count, j->dt, j->redop, j->algo);
    } else if (strcmp(j->op, "reduce_scatter") == 0) {
        comm_reduce_scatter(c, in, res, count, j->dt, j->redop, j->algo);
    } else if (strcmp(j->op, "allgather") == 0) {
        comm_allgather(c, in, res, count, j->dt, j->algo);
    } else if (strcmp(j->op, "broadcast") == 0) {
        memcpy(res, in, count * esz); /* every rank's own data: only the root's may survive */
        comm_broadcast(c, res, count, j->dt, root, j->algo);
    } else if (strcmp(j->op, "reduce") == 0) {
        comm_reduce(c, in, res, count, j->dt, j->redop, root, j->algo);
        check = rank == root; /* elsewhere the result is not defined */
    } else {
        usage("unknown operation");
    }
    long long wrong = 0, first = -1;
    double want_first = 0, got_first = 0;
    for (size_t i = 0; check && i < res_n; i++) {
        double want;
        if (strcmp(j->op, "reduce_scatter") == 0) want = reduce_inputs(j->seed, j->redop, (size_t)rank * count + i);
        else if (strcmp(j->op, "allgather") == 0) want = input(j->seed, (int)(i / count), i % count);
        else if (strcmp(j->op, "broadcast") == 0) want = input(j->seed, root, i);
        else want = reduce_inputs(j->seed, j->redop, i);
        double got = load(res, i, j->dt);
        if (got != want && wrong++ == 0) first = (long long)i, want_first = want, got_first = got;
    }
    uint64_t hash = 1469598103934665603ull; /* FNV-1a of the result bytes */
    for (size_t i = 0; i < res_n * esz; i++) hash = (hash ^ (unsigned char)res[i]) * 1099511628211ull;
    comm_stats_t s;
    comm_stats(c, &s);
    uint64_t sent = 0;
    for (int k = 0; k < COMM_NOPS; k++) sent += s.bytes_sent[k];
    fprintf(out, "root=%d count=%zu wrong=%lld first=%lld want=%g got=%g hash=%016llx sent=%llu", root, count, wrong,
            first, want_first, got_first, (unsigned long long)hash, (unsigned long long)sent);
    write_peers(out, "to", &sent_to);
    write_peers(out, "from", &received_from);
    fputc('\n', out);
    fflush(out);
    free(in);
    free(res);
}

int main(int argc, char **argv) {
    comm_t *c = comm_init(&argc, &argv);
    if (argc < 9) usage("too few arguments");
    const char *dir = argv[1];
    int algo = comm_algo_from_name(argv[3]), dt = comm_dtype_from_name(argv[4]), op = comm_redop_from_name(argv[5]);
    if (algo < 0 || dt < 0 || op < 0) usage("unknown algorithm, type or reduction");
    job j = {argv[2], (comm_algo)algo, (comm_dtype)dt, (comm_redop)op, (unsigned)strtoul(argv[7], NULL, 10)};
    int root = atoi(argv[6]);
    nranks = comm_size(c);
    record_peers(c);
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.txt", dir, comm_rank(c));
    FILE *out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "lab12_worker: cannot write %s: %s\n", path, strerror(errno));
        return 2;
    }
    for (int a = 8; a < argc; a++) {
        size_t count = strtoull(argv[a], NULL, 10);
        if (root >= 0) run_one(c, out, &j, root, count);
        else
            for (int r = 0; r < nranks; r++) run_one(c, out, &j, r, count);
    }
    fclose(out);
    comm_finalize(c);
    return 0;
}
