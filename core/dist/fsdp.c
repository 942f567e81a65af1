/* fsdp.c: sharded units, their all-gathers and reduce-scatters around each layer, prefetch on a comm thread. */
#include "dist/fsdp.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/events.h"
#include "base/lab.h"
#include "base/mem.h"
#include "dist/ddp.h"
#include "prof/prof.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

const char *const fsdp_strategy_names[] = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", NULL};

int fsdp_strategy_from_name(const char *name) {
    for (int i = 0; fsdp_strategy_names[i]; i++)
        if (strcmp(fsdp_strategy_names[i], name) == 0) return i;
    return -1;
}

enum { MAX_SPANS = 2, MAX_JOBS = 4096, MAX_WIDE = 16 };

/* Where a unit's parameters are gathered, and how far that has got. */
typedef enum { UNIT_FREE, UNIT_PENDING, UNIT_READY } unit_state;

typedef struct {
    size_t off[MAX_SPANS], len[MAX_SPANS]; /* its spans of the flat buffers (the root has two) */
    int nspans;
    size_t n;           /* elements: the spans' lengths added */
    size_t k;           /* shard length: ceil(n / G) */
    size_t shard_at;    /* where this unit's shard starts in the rank's shard buffers */
    unit_state state;
    bool resident;      /* its gathered copy is in the spans (set by the gather, cleared when it goes) */
    bool cast;          /* the model's low-precision cache of it was made (main thread) */
    bool grads_live;    /* its gradient span is committed */
    bool whole_step;    /* the tied root: gathered from the start of forward to the end of backward */
    bool keep_forward;  /* not dropped after its forward (the head: backward starts with it) */
    bool lookup;        /* the untied embeddings: backward of a lookup reads no weights, so no gather */
    /* 16-bit gathers (gather_half): the tensors read in fp32 (norm gains, biases), unit-local [wide_at, +wide_len) */
    int nwide;
    size_t wide_at[MAX_WIDE], wide_len[MAX_WIDE];
    size_t wide_k;      /* the most of them one rank owns: each rank's part of the fp32 all-gather */
    bool wide_listed;   /* all of them are listed (at most MAX_WIDE): commit_grads can zero just those */
    bool can_half;      /* few enough of them that the 16-bit gather moves fewer bytes */
    bool half;          /* its gathered copy came in 16 bits: the weight cache, and fp32 only where read so */
} unit;

typedef enum { JOB_GATHER, JOB_REDUCE } job_kind;
typedef struct {
    job_kind kind;
    int unit;
} job;

struct fsdp {
    model *m;
    comm_t *world, *shard_comm, *replica_comm; /* replica_comm NULL when every group is the whole world */
    fsdp_options opt;
    int rank, world_size, G, shard_rank;
    unit *units;
    int nunits, L;
    bool tied;
    float *param_shard, *grad_shard;            /* (sum of k) each: MEM_PARAM, MEM_GRAD */
    size_t shard_total;                         /* sum of k */
    size_t owned;                               /* elements this rank really owns (no padding) */
    /* reserved (MEM_COMM), committed for one job at a time: a unit's spans packed and padded to G shards (the
     * units that are not direct), and the reduced shard of a reduce-scatter. Reserved once, so the pages of one
     * job are recycled by the next (base/mem.h) instead of being allocated and zeroed every time. */
    float *staging, *reduced;
    /* reserved (MEM_COMM) the same way, for the 16-bit gathers: the gathered unit when it is not direct, and the
     * fp32 pieces (this rank's, then every rank's) */
    uint16_t *staging16;
    float *wide;
    ev_writer *ev;
    fsdp_stats stats;
    /* the communication thread */
    bool threaded;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    job queue[MAX_JOBS];
    int head, tail;
    bool busy, stop;
};

/* ------------------------------------------------------------------ layout */

/* Tied: the root (embeddings and head) is unit 0, block l is unit l + 1. Untied: the embeddings are unit 0 and
 * the final norm and head unit L + 1 of their own, so neither is held longer than it is used. */
static int unit_of_layer(const fsdp *f, int layer) {
    if (layer < 0) return 0;
    if (layer >= f->L) return f->tied ? 0 : f->L + 1;
    return layer + 1;
}

/* Flat offset of element i of a unit (its spans concatenated). */
static size_t flat_of(const unit *u, size_t i) {
    for (int s = 0; s < u->nspans; s++) {
        if (i < u->len[s]) return u->off[s] + i;
        i -= u->len[s];
    }
    MP_ASSERT(false, "element %zu outside its unit", i);
    return 0;
}

/* The unit-local index of a flat offset inside one of the unit's spans. */
static size_t local_of(const unit *u, size_t flat) {
    size_t before = 0;
    for (int s = 0; s < u->nspans; s++) {
        if (flat >= u->off[s] && flat < u->off[s] + u->len[s]) return before + flat - u->off[s];
        before += u->len[s];
    }
    MP_ASSERT(false, "flat offset %zu outside its unit", flat);
    return 0;
}

/* Rank r's part of a unit: local [lo, hi), possibly empty (a small unit on many ranks). */
static void owned_range(const unit *u, int r, size_t *lo, size_t *hi) {
    size_t a = (size_t)r * u->k, b = a + u->k;
    *lo = a < u->n ? a : u->n;
    *hi = b < u->n ? b : u->n;
}

/* The part of fp32 piece p (see find_wide_pieces) that rank r owns: its length, and in *at where it starts,
 * unit-local. */
static size_t owned_piece(const unit *u, int r, int p, size_t *at) {
    size_t lo, hi;
    owned_range(u, r, &lo, &hi);
    size_t a = u->wide_at[p] > lo ? u->wide_at[p] : lo, b = u->wide_at[p] + u->wide_len[p];
    if (b > hi) b = hi;
    *at = a;
    return a < b ? b - a : 0;
}

/* The tensors of a unit that the 16-bit path reads in fp32: all but the matmul weights of the blocks and the
 * head (model_lowp.c), i.e. the norm gains, the biases and the embedding tables. A unit can be gathered in 16
 * bits when these are a small part of it (a block, an untied head; not the embeddings). */
static void find_wide_pieces(const fsdp *f, unit *u) {
    int ntensors;
    const model_tensor *t = model_tensors(f->m, &ntensors);
    u->nwide = 0;
    bool fits = true;
    for (int s = 0; s < u->nspans; s++)
        for (int j = 0; j < ntensors; j++) {
            if (t[j].offset < u->off[s] || t[j].offset >= u->off[s] + u->len[s]) continue;
            if (t[j].ndim == 2 && t[j].layer >= 0) continue;
            if (u->nwide == MAX_WIDE) {
                fits = false;
                continue;
            }
            u->wide_at[u->nwide] = local_of(u, t[j].offset);
            u->wide_len[u->nwide++] = t[j].size;
        }
    u->wide_k = 0;
    for (int r = 0; r < f->G; r++) {
        size_t mine = 0, at;
        for (int p = 0; p < u->nwide; p++) mine += owned_piece(u, r, p, &at);
        if (mine > u->wide_k) u->wide_k = mine;
    }
    u->wide_listed = fits;
    /* A rank receives 2 k G + 4 wide_k G bytes in 16 bits, against 4 k G in fp32. */
    u->can_half = fits && 2 * u->wide_k <= u->k;
}

static void make_units(fsdp *f) {
    f->nunits = f->tied ? f->L + 1 : f->L + 2;
    f->units = calloc((size_t)f->nunits, sizeof *f->units);
    MP_ASSERT(f->units, "out of memory");
    for (int layer = -1; layer <= f->L; layer++) {
        unit *u = &f->units[unit_of_layer(f, layer)];
        size_t off, n;
        model_layer_span(f->m, layer, &off, &n);
        u->off[u->nspans] = off;
        u->len[u->nspans++] = n;
        u->n += n;
    }
    f->units[0].whole_step = f->units[0].keep_forward = f->tied;
    f->units[0].lookup = !f->tied;
    if (!f->tied) f->units[f->L + 1].keep_forward = true;
    size_t at = 0;
    for (int i = 0; i < f->nunits; i++) {
        unit *u = &f->units[i];
        u->k = (u->n + (size_t)f->G - 1) / (size_t)f->G;
        u->shard_at = at;
        at += u->k;
        size_t lo, hi;
        owned_range(u, f->shard_rank, &lo, &hi);
        f->owned += hi - lo;
        if (u->n > f->stats.max_unit_floats) f->stats.max_unit_floats = u->n;
        find_wide_pieces(f, u);
    }
    f->shard_total = at;
}

/* ------------------------------------------------------------------ the collectives of one unit */

/* With `overwrite`, the caller writes every element before reading any (mem_commit_to_overwrite). */
static void commit_spans(const unit *u, float *base, bool overwrite) {
    for (int s = 0; s < u->nspans; s++)
        (overwrite ? mem_commit_to_overwrite : mem_commit)(base, u->off[s] * sizeof(float), u->len[s] * sizeof(float));
}

static void decommit_spans(const unit *u, float *base) {
    for (int s = 0; s < u->nspans; s++) mem_decommit(base, u->off[s] * sizeof(float), u->len[s] * sizeof(float));
}

static uint64_t bytes_sent(comm_t *c) {
    comm_stats_t st;
    comm_stats(c, &st);
    uint64_t total = 0;
    for (int op = 0; op < COMM_NOPS; op++) total += st.bytes_sent[op];
    return total;
}

/* A unit of one span whose length the shards divide exactly needs no staging: the collectives read and write
 * the span itself (every block and the untied head on a power-of-two shard group, as a rule). Otherwise a
 * staging buffer holds the unit's concatenated spans, padded to G shards. */
static bool direct(const fsdp *f, const unit *u) { return u->nspans == 1 && u->n == u->k * (size_t)f->G; }

/* The fp32 pieces of a 16-bit unit (gather_half), committed in the parameter buffer or given back. */
static void commit_wide(const unit *u, float *params) {
    for (int p = 0; p < u->nwide; p++)
        mem_commit_to_overwrite(params, flat_of(u, u->wide_at[p]) * sizeof(float), u->wide_len[p] * sizeof(float));
}

static void decommit_wide(const unit *u, float *params) {
    for (int p = 0; p < u->nwide; p++)
        mem_decommit(params, flat_of(u, u->wide_at[p]) * sizeof(float), u->wide_len[p] * sizeof(float));
}

/* Rank r's part of the fp32 pieces, packed in piece order, from `packed` to their places in the parameter buffer. */
static void unpack_wide(const unit *u, int r, float *params, const float *packed) {
    for (int p = 0; p < u->nwide; p++) {
        size_t at, n = owned_piece(u, r, p, &at);
        if (!n) continue; /* at may lie past the unit */
        memcpy(params + flat_of(u, at), packed, n * sizeof(float));
        packed += n;
    }
}

/* This rank's part of the fp32 pieces, from its fp32 shard, packed in piece order. */
static void pack_wide(const fsdp *f, const unit *u, float *packed) {
    size_t lo, hi;
    owned_range(u, f->shard_rank, &lo, &hi);
    for (int p = 0; p < u->nwide; p++) {
        size_t at, n = owned_piece(u, f->shard_rank, p, &at);
        if (!n) continue;
        memcpy(packed, f->param_shard + u->shard_at + (at - lo), n * sizeof(float));
        packed += n;
    }
}

/* Under a 16-bit compute mode only the matmuls read a block's weights, and they read the 16-bit cache. So the
 * shard is cast before the all-gather, which moves half the bytes and writes the cache itself: no rank casts
 * the whole unit (FSDP's MixedPrecision(param_dtype=torch.bfloat16), DeepSpeed's ZeRO-3 with bf16). The
 * tensors read in fp32 (norm gains, biases) come in a small all-gather of their own, so every value is the one
 * the fp32 gather and the cast would give, bit for bit. */
static void gather_half(fsdp *f, unit *u) {
    model *m = f->m;
    float *params = model_params(m);
    uint16_t *cache = model_weights16(m);
    size_t G = (size_t)f->G;
    comm_dtype dt = model_weights16_are_bf16(m) ? COMM_BF16 : COMM_FP16;
    for (int s = 0; s < u->nspans; s++) model_weights16_commit(m, u->off[s], u->len[s]);
    uint16_t *recv = cache + u->off[0];
    if (!direct(f, u)) {
        mem_commit_to_overwrite(f->staging16, 0, u->k * G * 2);
        recv = f->staging16;
    }
    /* In place: the shard is cast straight into its block of the result, which the all-gather then fills. */
    uint16_t *mine = recv + (size_t)f->shard_rank * u->k;
    model_weights16_encode(m, mine, f->param_shard + u->shard_at, u->k);
    comm_allgather(f->shard_comm, mine, recv, u->k, dt, COMM_ALGO_DEFAULT);
    if (!direct(f, u)) {
        size_t at = 0;
        for (int s = 0; s < u->nspans; s++) {
            memcpy(cache + u->off[s], recv + at, u->len[s] * 2);
            at += u->len[s];
        }
        mem_decommit(f->staging16, 0, u->k * G * 2);
    }
    if (u->wide_k) {
        size_t bytes = u->wide_k * (G + 1) * sizeof(float);
        mem_commit(f->wide, 0, bytes); /* zeros: a rank that owns fewer pieces sends padding */
        float *own = f->wide, *all = f->wide + u->wide_k;
        pack_wide(f, u, own);
        comm_allgather(f->shard_comm, own, all, u->wide_k, COMM_FP32, COMM_ALGO_DEFAULT);
        commit_wide(u, params);
        for (int r = 0; r < f->G; r++) unpack_wide(u, r, params, all + (size_t)r * u->wide_k);
        mem_decommit(f->wide, 0, bytes);
    }
    u->half = u->cast = true;
}

/* The unit's weights from every rank's shard into its spans of the model's parameter buffer. */
static void gather_unit(fsdp *f, unit *u) {
    if (u->can_half && model_weights16(f->m)) {
        uint64_t before = bytes_sent(f->shard_comm);
        gather_half(f, u);
        u->resident = true;
        f->stats.gather_bytes += bytes_sent(f->shard_comm) - before;
        f->stats.gathers++;
        return;
    }
    float *params = model_params(f->m);
    size_t padded_bytes = u->k * (size_t)f->G * sizeof(float);
    commit_spans(u, params, true); /* the all-gather writes all of them */
    float *recv = params + u->off[0];
    if (!direct(f, u)) {
        mem_commit_to_overwrite(f->staging, 0, padded_bytes);
        recv = f->staging;
    }
    uint64_t before = bytes_sent(f->shard_comm);
    /* LAB 20 BEGIN gather a unit: every rank's shard of it, into the unit's spans of the flat buffer */
    comm_allgather(f->shard_comm, f->param_shard + u->shard_at, recv, u->k, COMM_FP32, COMM_ALGO_DEFAULT);
    if (!direct(f, u)) { /* from the padded staging buffer into the spans */
        size_t at = 0;
        for (int s = 0; s < u->nspans; s++) {
            memcpy(params + u->off[s], recv + at, u->len[s] * sizeof(float));
            at += u->len[s];
        }
    }
    /* LAB 20 END */
    u->resident = true;
    f->stats.gather_bytes += bytes_sent(f->shard_comm) - before;
    f->stats.gathers++;
    if (!direct(f, u)) mem_decommit(f->staging, 0, padded_bytes);
}

/* The unit's gathered copy goes: the low-precision cache first, then the fp32 spans. */
static void drop_copy(fsdp *f, unit *u) {
    if (!u->resident) return;
    u->resident = false;
    float *params = model_params(f->m);
    if (u->cast)
        for (int s = 0; s < u->nspans; s++) model_weights_leaving(f->m, u->off[s], u->len[s]);
    u->cast = false;
    if (u->half) decommit_wide(u, params);
    else decommit_spans(u, params);
    u->half = false;
}

static void drop_unit(fsdp *f, unit *u) {
    drop_copy(f, u);
    u->state = UNIT_FREE;
}

/* The unit's gradients averaged over all ranks, this rank's shard of them added into its gradient shard;
 * then the gradient span and the weights are given back. */
static void reduce_unit(fsdp *f, unit *u) {
    float *grads = model_grads(f->m);
    float *staging = grads + u->off[0];
    size_t padded = u->k * (size_t)f->G;
    if (!direct(f, u)) { /* the spans, concatenated and padded with zeros to G shards */
        mem_commit_to_overwrite(f->staging, 0, padded * sizeof(float));
        staging = f->staging;
        size_t at = 0;
        for (int s = 0; s < u->nspans; s++) {
            memcpy(staging + at, grads + u->off[s], u->len[s] * sizeof(float));
            at += u->len[s];
        }
        memset(staging + at, 0, (padded - at) * sizeof(float));
    }
    mem_commit_to_overwrite(f->reduced, 0, u->k * sizeof(float)); /* the reduce-scatter writes all of it */
    float *mine = f->reduced;
    uint64_t before = bytes_sent(f->shard_comm) + (f->replica_comm ? bytes_sent(f->replica_comm) : 0);
    /* LAB 20 BEGIN reduce a unit: average its gradients over every rank, keep this rank's shard */
    /* Inside the shard group: each rank gets the group's average of its own shard. */
    if (f->G > 1) comm_reduce_scatter(f->shard_comm, staging, mine, u->k, COMM_FP32, COMM_AVG, COMM_ALGO_DEFAULT);
    else memcpy(mine, staging, u->k * sizeof(float));
    /* HYBRID_SHARD and NO_SHARD: the groups hold the same shards; average them across the groups. */
    if (f->replica_comm) comm_allreduce(f->replica_comm, mine, mine, u->k, COMM_FP32, COMM_AVG, COMM_ALGO_DEFAULT);
    /* Micro-batches accumulate: add, not assign. */
    float *g = f->grad_shard + u->shard_at;
    for (size_t i = 0; i < u->k; i++) g[i] += mine[i];
    /* LAB 20 END */
    f->stats.reduce_bytes += bytes_sent(f->shard_comm) + (f->replica_comm ? bytes_sent(f->replica_comm) : 0) - before;
    f->stats.reduces++;
    if (!direct(f, u)) mem_decommit(f->staging, 0, padded * sizeof(float));
    mem_decommit(f->reduced, 0, u->k * sizeof(float));
    decommit_spans(u, grads);
    u->grads_live = false;
}

/* ------------------------------------------------------------------ the communication thread */

static void run_job(fsdp *f, job j) {
    unit *u = &f->units[j.unit];
    if (j.kind == JOB_GATHER) {
        gather_unit(f, u);
    } else {
        if (f->stats.reduces == 0) f->stats.first_reduce_start = mp_elapsed();
        reduce_unit(f, u);
    }
}

static void *comm_thread(void *arg) {
    fsdp *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->head == f->tail && !f->stop) pthread_cond_wait(&f->work, &f->mu);
        if (f->head == f->tail && f->stop) break;
        job j = f->queue[f->head++ % MAX_JOBS];
        f->busy = true;
        pthread_mutex_unlock(&f->mu);
        run_job(f, j);
        pthread_mutex_lock(&f->mu);
        /* A reduced block's weights go (on_grads_ready already marked it free, so a later request queues a
         * new gather behind this job); the root's stay until fsdp_after_update. */
        if (j.kind == JOB_GATHER) f->units[j.unit].state = UNIT_READY;
        else if (!f->units[j.unit].whole_step) drop_copy(f, &f->units[j.unit]);
        f->busy = false;
        pthread_cond_broadcast(&f->done);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* Queues a job (or runs it now without the thread). Callers hold no lock. */
static void submit(fsdp *f, job j) {
    if (!f->threaded) {
        run_job(f, j);
        if (j.kind == JOB_GATHER) f->units[j.unit].state = UNIT_READY;
        else if (!f->units[j.unit].whole_step) drop_copy(f, &f->units[j.unit]);
        return;
    }
    pthread_mutex_lock(&f->mu);
    MP_ASSERT(f->tail - f->head < MAX_JOBS, "fsdp job queue overflow");
    if (j.kind == JOB_GATHER) f->units[j.unit].state = UNIT_PENDING;
    f->queue[f->tail++ % MAX_JOBS] = j;
    pthread_cond_signal(&f->work);
    pthread_mutex_unlock(&f->mu);
}

static void wait_idle(fsdp *f) {
    if (!f->threaded) return;
    pthread_mutex_lock(&f->mu);
    while (f->head != f->tail || f->busy) pthread_cond_wait(&f->done, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

/* The unit's gradient span, before backward writes it. Backward adds into the gradients of the norm gains, the
 * biases and the embeddings, so those start at zero. On the 16-bit kernel the weight-gradient products write
 * their matrices (model_set_matrix_grads_written), so that memory is not zeroed first: 4 bytes a parameter and a
 * step that no one reads. */
static void commit_grads(fsdp *f, unit *u) {
    float *grads = model_grads(f->m);
    if (!u->wide_listed || !model_weights16(f->m)) {
        commit_spans(u, grads, false);
        return;
    }
    commit_spans(u, grads, true);
    for (int p = 0; p < u->nwide; p++) memset(grads + flat_of(u, u->wide_at[p]), 0, u->wide_len[p] * sizeof(float));
}

/* Starts the gather of unit i unless it is gathered or on its way. */
static void request(fsdp *f, int i) {
    if (i < 0 || i >= f->nunits) return;
    if (f->threaded) pthread_mutex_lock(&f->mu);
    bool idle = f->units[i].state == UNIT_FREE;
    if (f->threaded) pthread_mutex_unlock(&f->mu);
    if (idle) submit(f, (job){JOB_GATHER, i});
}

/* Unit i's weights are in place (waiting for its gather if needed), and cast for the matmuls. */
static void ensure(fsdp *f, int i) {
    request(f, i);
    unit *u = &f->units[i];
    if (f->threaded) {
        pthread_mutex_lock(&f->mu);
        if (u->state != UNIT_READY) { /* the profile's gather_wait: compute stopped for a gather not yet done */
            PROF_BEGIN("gather_wait");
            while (u->state != UNIT_READY) pthread_cond_wait(&f->done, &f->mu);
            PROF_END("gather_wait");
        }
        pthread_mutex_unlock(&f->mu);
    }
    if (!u->cast) {
        for (int s = 0; s < u->nspans; s++) model_weights_arrived(f->m, u->off[s], u->len[s]);
        u->cast = true;
    }
}

/* Drops unit i if it is gathered (its gather finished: ensure ran before). */
static void release(fsdp *f, int i) {
    if (i < 0 || i >= f->nunits || f->units[i].keep_forward) return;
    if (f->threaded) pthread_mutex_lock(&f->mu);
    if (f->units[i].state == UNIT_READY) drop_unit(f, &f->units[i]);
    if (f->threaded) pthread_mutex_unlock(&f->mu);
}

/* The next `ahead` units in the direction of travel (+1 forward, -1 backward), from the blocks on (unit 0, the
 * root or the embeddings, is never prefetched: forward starts with it, backward needs none of it). */
static void prefetch(fsdp *f, int from, int dir) {
    if (!f->threaded) return;
    /* LAB 20 BEGIN prefetch: ask for the next max_inflight blocks in the direction of travel (never the root) */
    for (int d = 1; d <= f->opt.max_inflight; d++) {
        int i = from + dir * d;
        if (i < 1 || i >= f->nunits) break;
        request(f, i);
    }
    /* LAB 20 END */
}

/* ------------------------------------------------------------------ the model's hooks */

static void on_before_forward(void *ctx, int layer) {
    fsdp *f = ctx;
    int i = unit_of_layer(f, layer);
    /* LAB 20 BEGIN reshard after forward: the strategies that drop the layer that just ran, as the next one starts */
    bool reshard = f->opt.strategy != FSDP_SHARD_GRAD_OP && f->opt.strategy != FSDP_NO_SHARD;
    if (layer >= 0 && reshard) release(f, unit_of_layer(f, layer - 1)); /* the layer before is done */
    /* LAB 20 END */
    ensure(f, i);
    if (layer < f->L && f->opt.forward_prefetch) prefetch(f, i, +1);
}

static void on_before_backward(void *ctx, int layer) {
    fsdp *f = ctx;
    int i = unit_of_layer(f, layer);
    unit *u = &f->units[i];
    if (layer == f->L) f->stats.first_reduce_start = 0;
    if (!u->lookup) ensure(f, i);
    if (!u->grads_live) {
        commit_grads(f, u);
        u->grads_live = true;
    }
    /* Backward goes from block L-1 down to block 0 (units L .. 1) after the head. */
    if (f->opt.backward_prefetch) prefetch(f, layer == f->L ? f->L + 1 : i, -1);
}

static void on_grads_ready(void *ctx, int layer) {
    fsdp *f = ctx;
    int i = unit_of_layer(f, layer);
    if (layer == f->L && f->units[i].whole_step) return; /* the tied root is final after the embeddings (-1) */
    if (layer == -1) f->stats.backward_end = mp_elapsed();
    if (!f->units[i].whole_step) { /* done with its weights in this pass: the copy goes once its gradients are reduced */
        if (f->threaded) pthread_mutex_lock(&f->mu);
        f->units[i].state = UNIT_FREE;
        if (f->threaded) pthread_mutex_unlock(&f->mu);
    }
    submit(f, (job){JOB_REDUCE, i});
}

/* ------------------------------------------------------------------ creation */

typedef struct {
    fsdp *f;
} init_ctx;

static void init_before(void *ctx, int layer) {
    fsdp *f = ctx;
    size_t off, n;
    model_layer_span(f->m, layer, &off, &n);
    mem_commit(model_params(f->m), off * sizeof(float), n * sizeof(float));
}

/* A layer's weights were drawn: keep this rank's part of them, give the span back. */
static void init_after(void *ctx, int layer) {
    fsdp *f = ctx;
    unit *u = &f->units[unit_of_layer(f, layer)];
    size_t off, n, lo, hi;
    model_layer_span(f->m, layer, &off, &n);
    owned_range(u, f->shard_rank, &lo, &hi);
    const float *params = model_params(f->m);
    for (size_t i = lo; i < hi; i++) {
        size_t flat = flat_of(u, i);
        if (flat >= off && flat < off + n) f->param_shard[u->shard_at + (i - lo)] = params[flat];
    }
    mem_decommit(model_params(f->m), off * sizeof(float), n * sizeof(float));
}

static void start_thread(fsdp *f) {
    f->threaded = f->opt.overlap && f->world_size > 1 && comm_thread_safe_serialized(f->world);
    if (!f->threaded) return;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->work, NULL);
    pthread_cond_init(&f->done, NULL);
    if (pthread_create(&f->thread, NULL, comm_thread, f) != 0) f->threaded = false;
}

fsdp *fsdp_create(model *m, comm_t *world, const fsdp_options *opt, uint64_t config_hash, uint64_t seed) {
    MP_ASSERT(model_is_reserved(m), "fsdp_create needs a model made by model_create_reserved");
    if (opt->strategy < 0 || opt->strategy >= FSDP_NSTRATEGIES)
        MP_FAIL("an FSDP sharding strategy", "strategy %d", (int)opt->strategy);
    if (opt->max_inflight < 1) MP_FAIL("fsdp.max_inflight of at least 1", "%d", opt->max_inflight);
    fsdp *f = calloc(1, sizeof *f);
    MP_ASSERT(f, "out of memory");
    f->m = m;
    f->world = world;
    f->opt = *opt;
    f->rank = comm_rank(world);
    f->world_size = comm_size(world);
    f->L = model_get_config(m)->L;
    f->tied = model_get_config(m)->tied;
    switch (opt->strategy) {
    case FSDP_NO_SHARD: f->G = 1; break;
    case FSDP_HYBRID_SHARD:
        if (opt->shard_size < 1 || f->world_size % opt->shard_size != 0)
            MP_FAIL_HINT("fsdp.shard_size dividing the world size (HYBRID_SHARD: shard inside groups of that many "
                         "ranks, replicate across the groups)",
                         "e.g. the ranks of one node: 2 on a 4-rank run makes 2 groups of 2",
                         "shard_size %d with %d ranks", opt->shard_size, f->world_size);
        f->G = opt->shard_size;
        break;
    default: f->G = f->world_size;
    }
    ddp_check_replicas_agree(world, config_hash ^ (uint64_t)model_num_params(m) * 0x9e3779b97f4a7c15ULL);
    /* Groups: ranks [g G, (g+1) G) shard one copy; the ranks with the same place in every group replicate. */
    if (f->G == f->world_size) {
        f->shard_comm = world;
    } else {
        f->shard_comm = comm_split(world, f->rank / f->G, f->rank);
        f->replica_comm = comm_split(world, f->rank % f->G, f->rank);
    }
    f->shard_rank = comm_rank(f->shard_comm);
    make_units(f);
    size_t staging = 1, reduced = 1;
    for (int i = 0; i < f->nunits; i++) {
        const unit *u = &f->units[i];
        if (!direct(f, u) && u->k * (size_t)f->G > staging) staging = u->k * (size_t)f->G;
        if (u->k > reduced) reduced = u->k;
    }
    size_t staging16 = 1, wide = 1;
    for (int i = 0; i < f->nunits; i++) {
        const unit *u = &f->units[i];
        if (!u->can_half) continue;
        if (!direct(f, u) && u->k * (size_t)f->G > staging16) staging16 = u->k * (size_t)f->G;
        if (u->wide_k * (size_t)(f->G + 1) > wide) wide = u->wide_k * (size_t)(f->G + 1);
    }
    f->staging = mem_reserve(staging * sizeof(float), MEM_COMM, "fsdp staging: a unit's spans padded to the shards");
    f->staging16 = mem_reserve(staging16 * 2, MEM_COMM, "fsdp 16-bit staging: a unit's spans padded to the shards");
    f->wide = mem_reserve(wide * sizeof(float), MEM_COMM, "fsdp fp32 pieces of a 16-bit gather (norm gains, biases)");
    f->reduced = mem_reserve(reduced * sizeof(float), MEM_COMM, "fsdp reduced shard");
    f->param_shard = mem_alloc((f->shard_total ? f->shard_total : 1) * sizeof(float), MEM_PARAM, "fsdp parameter shard");
    f->grad_shard = mem_alloc((f->shard_total ? f->shard_total : 1) * sizeof(float), MEM_GRAD, "fsdp gradient shard");
    model_init_layerwise(m, seed, init_before, init_after, f);
    model_set_matrix_grads_written(m, true); /* commit_grads */
    start_thread(f);
    f->stats.overlapping = f->threaded;
    model_hooks hooks = {.before_forward = on_before_forward, .before_backward = on_before_backward,
                         .grads_ready = on_grads_ready, .ctx = f};
    model_set_hooks(m, &hooks);
    return f;
}

void fsdp_free(fsdp *f) {
    if (!f) return;
    wait_idle(f);
    if (f->threaded) {
        pthread_mutex_lock(&f->mu);
        f->stop = true;
        pthread_cond_signal(&f->work);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->thread, NULL);
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->work);
        pthread_cond_destroy(&f->done);
    }
    for (int i = 0; i < f->nunits; i++) {
        if (f->units[i].state == UNIT_READY) drop_unit(f, &f->units[i]);
        if (f->units[i].grads_live) decommit_spans(&f->units[i], model_grads(f->m));
    }
    model_hooks none = {0};
    model_set_hooks(f->m, &none);
    model_set_matrix_grads_written(f->m, false);
    if (f->ev) {
        comm_set_events(f->shard_comm, NULL);
        if (f->replica_comm) comm_set_events(f->replica_comm, NULL);
        ev_close(f->ev);
    }
    if (f->shard_comm != f->world) comm_free(f->shard_comm);
    if (f->replica_comm) comm_free(f->replica_comm);
    mem_free(f->param_shard);
    mem_free(f->grad_shard);
    mem_free(f->staging);
    mem_free(f->staging16);
    mem_free(f->wide);
    mem_free(f->reduced);
    free(f->units);
    free(f);
}

void fsdp_set_events(fsdp *f, const char *dir) {
    wait_idle(f);
    f->ev = ev_open_append(dir, f->rank);
    comm_set_events(f->shard_comm, f->ev);
    if (f->replica_comm) comm_set_events(f->replica_comm, f->ev);
}

int fsdp_shard_size(const fsdp *f) { return f->G; }
int fsdp_units(const fsdp *f) { return f->nunits; }
size_t fsdp_shard_elems(const fsdp *f) { return f->owned; }
float *fsdp_param_shard(fsdp *f) { return f->param_shard; }
void fsdp_get_stats(const fsdp *f, fsdp_stats *out) { *out = f->stats; }

/* ------------------------------------------------------------------ the step */

/* Calls fn for each piece of this rank's shard inside one tensor, in shard order: the tensor's flat offset
 * and the piece's flat offset, unit and offset inside the unit's shard, and length. */
typedef void (*piece_fn)(void *ctx, const model_tensor *t, size_t flat, size_t shard_at, size_t n);
static void for_each_piece(const fsdp *f, piece_fn fn, void *ctx) {
    int ntensors;
    const model_tensor *t = model_tensors(f->m, &ntensors);
    for (int i = 0; i < f->nunits; i++) {
        const unit *u = &f->units[i];
        size_t lo, hi;
        owned_range(u, f->shard_rank, &lo, &hi);
        if (lo >= hi) continue;
        /* Tensors in the unit's local order: the spans in order, each span's tensors by offset. */
        for (int s = 0; s < u->nspans; s++)
            for (int j = 0; j < ntensors; j++) {
                if (t[j].offset < u->off[s] || t[j].offset >= u->off[s] + u->len[s]) continue;
                size_t a = local_of(u, t[j].offset), b = a + t[j].size;
                size_t plo = a > lo ? a : lo, phi = b < hi ? b : hi;
                if (plo >= phi) continue;
                fn(ctx, &t[j], flat_of(u, plo), u->shard_at + (plo - lo), phi - plo);
            }
    }
}

typedef struct {
    const fsdp *f;
    optim_span *spans;
    clip_span *clips;
    size_t *offsets, *lengths;
    int count;
} piece_list;

static void add_piece(void *ctx, const model_tensor *t, size_t flat, size_t shard_at, size_t n) {
    piece_list *p = ctx;
    if (p->spans) {
        p->spans[p->count] = (optim_span){p->f->param_shard + shard_at, p->f->grad_shard + shard_at, n, t->decay};
        p->clips[p->count] = (clip_span){p->f->grad_shard + shard_at, n};
    }
    if (p->offsets) {
        p->offsets[p->count] = flat;
        p->lengths[p->count] = n;
    }
    p->count++;
}

void fsdp_shard_spans(const fsdp *f, optim_span **spans, clip_span **clips, int *count) {
    piece_list p = {.f = f};
    for_each_piece(f, add_piece, &p);
    int n = p.count > 0 ? p.count : 1;
    p.spans = *spans = calloc((size_t)n, sizeof **spans);
    p.clips = *clips = calloc((size_t)n, sizeof **clips);
    MP_ASSERT(*spans && *clips, "out of memory");
    p.count = 0;
    for_each_piece(f, add_piece, &p);
    *count = p.count;
}

int fsdp_shard_ranges(const fsdp *f, size_t *offsets, size_t *lengths) {
    piece_list p = {.f = f, .offsets = offsets, .lengths = lengths};
    for_each_piece(f, add_piece, &p);
    return p.count;
}

bool fsdp_saves_shard(const fsdp *f) { return f->rank < f->G; }

void fsdp_zero_grad(fsdp *f) {
    wait_idle(f);
    memset(f->grad_shard, 0, f->shard_total * sizeof(float));
    f->stats.gather_bytes = f->stats.reduce_bytes = 0;
    f->stats.gathers = f->stats.reduces = 0;
}

void fsdp_finish(fsdp *f) { wait_idle(f); }

double fsdp_sum_over_shards(fsdp *f, double local) {
    int n = comm_size(f->shard_comm);
    int64_t mine, *all = malloc((size_t)n * sizeof *all);
    MP_ASSERT(all, "out of memory");
    memcpy(&mine, &local, sizeof mine);
    comm_allgather(f->shard_comm, &mine, all, 1, COMM_INT64, COMM_ALGO_NATIVE);
    double total = 0;
    for (int r = 0; r < n; r++) {
        double x;
        memcpy(&x, &all[r], sizeof x);
        total += x;
    }
    free(all);
    return total;
}

void fsdp_after_update(fsdp *f) {
    wait_idle(f);
    for (int i = 0; i < f->nunits; i++)
        if (f->units[i].state == UNIT_READY) drop_unit(f, &f->units[i]);
}

/* ------------------------------------------------------------------ whole buffers (checkpoints) */

/* Every rank's packed shard (span order) to every rank, then each piece to its flat place. */
void fsdp_gather_full(fsdp *f, const float *shard, float *full) {
    wait_idle(f);
    int n = comm_size(f->shard_comm);
    /* The shard sizes differ by the padding: gather blocks of the largest. */
    size_t stride = 0;
    for (int i = 0; i < f->nunits; i++) stride += f->units[i].k;
    float *send = mem_alloc((stride ? stride : 1) * sizeof(float), MEM_OTHER, "fsdp gather send");
    float *recv = mem_alloc((stride ? stride : 1) * (size_t)n * sizeof(float), MEM_OTHER, "fsdp gather recv");
    memcpy(send, shard, f->owned * sizeof(float));
    comm_allgather(f->shard_comm, send, recv, stride, COMM_FP32, COMM_ALGO_NATIVE);
    for (int r = 0; r < n; r++) {
        const float *src = recv + (size_t)r * stride;
        for (int i = 0; i < f->nunits; i++) {
            const unit *u = &f->units[i];
            size_t lo, hi;
            owned_range(u, r, &lo, &hi);
            for (size_t j = lo; j < hi; j++) full[flat_of(u, j)] = *src++;
        }
    }
    mem_free(send);
    mem_free(recv);
}

void fsdp_take_shard(const fsdp *f, const float *full, float *shard) {
    for (int i = 0; i < f->nunits; i++) {
        const unit *u = &f->units[i];
        size_t lo, hi;
        owned_range(u, f->shard_rank, &lo, &hi);
        for (size_t j = lo; j < hi; j++) *shard++ = full[flat_of(u, j)];
    }
}
