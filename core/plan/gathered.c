/* gathered.c: the planner's ZeRO-3 / FSDP term: one step's unit schedule replayed with the slowest communication
 * thread, to find the most gathered weights, unreduced gradients and reduce buffers a rank holds at once. */
#include "plan/gathered.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/comm.h"

/* The units as core/dist/fsdp.c makes them. Untied: the embeddings are unit 0 (backward of a lookup reads no
 * weights, so it is never gathered for backward), block l is unit l + 1, the final norm and head unit L + 1 (kept
 * from its forward into backward). Tied: unit 0 is the root (embeddings, final norm; the head is the embedding
 * table), gathered for the whole step, in two spans. */
typedef struct {
    uint64_t n;       /* elements */
    uint64_t k;       /* shard: ceil(n / G) */
    bool direct;      /* one span the shards divide exactly: the collectives need no staging buffer */
    bool half;        /* gathered in 16 bits into the cache (fsdp.c's gather_half): fp32 only for its wide tensors */
    uint64_t wide;    /* elements read in fp32 (norm gains, biases) */
    bool lookup, keep_forward, whole_step;
    /* replay state */
    bool pending;     /* a gather is queued (fsdp.c's UNIT_PENDING) */
    bool ready;       /* gathered and not let go (UNIT_READY) */
    bool resident;    /* its fp32 weights are in their spans */
    bool cast;        /* its autocast cache is made */
    bool grads_live;  /* its gradient span is committed */
} unit;

typedef struct {
    bool reduce;
    int unit;
} job;

typedef struct {
    const plan_gather_run *run;
    unit *u;
    int nunits, L;
    bool tied;
    job *queue;
    int head, tail;
    plan_gathered *out;
} replay;

static int unit_of_layer(const replay *r, int layer) {
    if (layer < 0) return 0;
    if (layer >= r->L) return r->tied ? 0 : r->L + 1;
    return layer + 1;
}

static void drop(unit *u) {
    u->resident = u->cast = u->ready = false;
}

/* Runs the oldest queued job to its end, as the communication thread does. */
static void finish_oldest(replay *r) {
    job j = r->queue[r->head++];
    unit *u = &r->u[j.unit];
    if (!j.reduce) {
        u->resident = true;
        u->cast = u->cast || u->half; /* a 16-bit gather writes the cache itself */
        u->pending = false;
        u->ready = true;
    } else {
        u->grads_live = false;
        if (!u->whole_step) drop(u);
    }
}

static void submit(replay *r, bool reduce, int i) {
    if (!reduce) r->u[i].pending = true;
    r->queue[r->tail++] = (job){reduce, i};
    if (!r->run->overlap) finish_oldest(r); /* no thread: the job runs in line */
}

static void request(replay *r, int i) {
    if (i < 0 || i >= r->nunits) return;
    if (!r->u[i].pending && !r->u[i].ready) submit(r, false, i);
}

/* The compute needs unit i: jobs finish in order up to its gather, and no further (the slowest thread). */
static void ensure(replay *r, int i) {
    request(r, i);
    while (!r->u[i].ready) finish_oldest(r);
    r->u[i].cast = true;
}

static void prefetch(replay *r, int from, int dir) {
    if (!r->run->overlap) return; /* without the thread a gather ahead would only wait in line */
    for (int d = 1; d <= r->run->max_inflight; d++) {
        int i = from + dir * d;
        if (i < 1 || i >= r->nunits) break;
        request(r, i);
    }
}

/* What the rank holds now, with the oldest queued job running (its weights or buffers are already there). */
static void measure(replay *r, const char *where) {
    uint64_t bytes = 0, cached = 0, G = r->run->shard_group;
    for (int i = 0; i < r->nunits; i++) {
        const unit *u = &r->u[i];
        if (u->resident) bytes += (u->half ? u->wide : u->n) * 4;
        if (u->grads_live) bytes += u->n * 4;
        if (u->cast) cached += u->n;
    }
    if (r->head < r->tail) {
        const job *j = &r->queue[r->head];
        const unit *u = &r->u[j->unit];
        uint64_t staging = u->direct ? 0 : u->k * G;
        if (j->reduce) {
            bytes += (u->k + staging) * 4; /* its reduced shard, and the spans packed when not direct */
        } else if (u->half) { /* the 16-bit spans (the cache) and staging, the fp32 pieces */
            uint64_t wide_k = u->wide < u->k ? u->wide : u->k; /* at most: the most one rank can own */
            bytes += staging * 2 + (u->resident ? 0 : u->wide * 4) + wide_k * (G + 1) * 4;
            if (!u->cast) cached += u->n;
        } else {
            bytes += ((u->resident ? 0 : u->n) + staging) * 4; /* a gather commits the unit's spans first */
        }
    }
    uint64_t other = cached * r->run->cache_bytes;
    /* A reduce-scatter running on the MPI backend also holds its receive segments (comm/comm.h). */
    if (r->head < r->tail && r->queue[r->head].reduce)
        bytes += comm_mpi_reduce_scatter_scratch_bytes(r->u[r->queue[r->head].unit].k, (int)r->run->shard_group, 4);
    if (bytes + other > r->out->comm + r->out->other) {
        r->out->comm = bytes;
        r->out->other = other;
        r->out->where = where;
    }
}

static void forward(replay *r) {
    bool reshard = true; /* FULL_SHARD: the layer before goes as the next one starts */
    for (int layer = -1; layer <= r->L; layer++) {
        int i = unit_of_layer(r, layer);
        if (layer >= 0 && reshard) {
            unit *before = &r->u[unit_of_layer(r, layer - 1)];
            if (before->ready && !before->keep_forward) drop(before);
        }
        ensure(r, i);
        if (layer < r->L && r->run->forward_prefetch) prefetch(r, i, +1);
        measure(r, layer < 0 ? "forward, at the embeddings" : layer < r->L ? "forward, in the blocks"
                                                                            : "forward, at the head");
    }
}

static void backward(replay *r) {
    for (int layer = r->L; layer >= -1; layer--) {
        int i = unit_of_layer(r, layer);
        unit *u = &r->u[i];
        if (!u->lookup) ensure(r, i);
        u->grads_live = true;
        if (r->run->backward_prefetch) prefetch(r, layer == r->L ? r->L + 1 : i, -1);
        measure(r, layer == r->L ? "backward, at the head" : layer >= 0 ? "backward, in the blocks"
                                                                        : "backward, at the embeddings");
        if (layer == r->L && u->whole_step) continue; /* the tied root is reduced after the embeddings */
        if (!u->whole_step) {
            u->pending = false;
            u->ready = false; /* fsdp.c marks it free: its copy goes once its gradients are reduced */
        }
        submit(r, true, i);
    }
    while (r->head < r->tail) finish_oldest(r);
}

void plan_gathered_bytes(const plan_model *m, const plan_gather_run *run, plan_gathered *out) {
    MP_ASSERT(run->shard_group >= 1 && run->max_inflight >= 1, "a shard group and max_inflight of at least 1");
    const plan_arch_info *arch = plan_arch_get(m->arch);
    uint64_t h = m->hidden, G = run->shard_group;
    uint64_t embeddings = m->vocab * h + (arch->learned_positions ? m->context * h : 0);
    uint64_t final_norm = arch->norm_vectors * h;
    uint64_t kv = m->kv_heads * (m->hidden / m->heads), F = m->ffn;
    uint64_t block_matrices = 2 * h * h + 2 * h * kv + arch->mlp_matrices * h * F; /* plan.c's, without the vectors */
    replay r = {.run = run, .L = (int)m->layers, .tied = m->tied_head, .out = out};
    r.nunits = r.tied ? r.L + 1 : r.L + 2;
    r.u = calloc((size_t)r.nunits, sizeof *r.u);
    r.queue = calloc((size_t)r.nunits * 4, sizeof *r.queue); /* each unit: two gathers and a reduce at most */
    MP_ASSERT(r.u && r.queue, "out of memory");
    for (int i = 0; i < r.nunits; i++) {
        unit *u = &r.u[i];
        u->n = i == 0 ? embeddings + (r.tied ? final_norm : 0) : i <= r.L ? plan_block_params(m) : final_norm + m->vocab * h;
        u->k = (u->n + G - 1) / G;
        u->direct = !(r.tied && i == 0) && u->n == u->k * G;
        /* 16-bit gathers (fsdp.c's find_wide_pieces): the blocks and the untied head, whose matrices only the
         * matmuls read, when the tensors read in fp32 are at most half a shard */
        uint64_t matrices = i == 0 ? 0 : i <= r.L ? block_matrices : m->vocab * h;
        u->wide = u->n > matrices ? u->n - matrices : 0;
        u->half = run->cache_bytes == 2 && matrices > 0 && 2 * (u->wide < u->k ? u->wide : u->k) <= u->k;
    }
    r.u[0].whole_step = r.u[0].keep_forward = r.tied;
    r.u[0].lookup = !r.tied;
    if (!r.tied) r.u[r.L + 1].keep_forward = true;
    memset(out, 0, sizeof *out);
    out->units = (uint64_t)r.nunits;
    out->where = "nowhere";
    forward(&r);
    backward(&r);
    free(r.u);
    free(r.queue);
}
