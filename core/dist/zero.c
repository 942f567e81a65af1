/* zero.c: ZeRO-1/2 shard layout over DDP's buckets, reduce-scatter of buckets, all-gather of parameters,
 * sums across ranks, and gathering the sharded optimizer state for checkpoints. */
#include "dist/zero.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t lo, hi; /* the bucket's span of the flat buffer */
    size_t block;  /* k = floor((hi - lo) / N): rank r's block is [lo + r*k, lo + (r+1)*k) */
    size_t rem;    /* hi - lo - N*k left-over elements at the end; element lo + N*k + j belongs to rank j */
} zero_bucket;

/* A piece of a rank's shard inside one tensor: what one optimizer span covers. */
typedef struct {
    size_t offset, n;
    bool decay;
} zero_range;

struct zero {
    model *m;
    comm_t *c;
    int stage, rank, world;
    size_t bucket_elems;
    zero_bucket *buckets; /* in DDP's launch order: the head's bucket (the end of the buffer) first */
    int nbuckets;
    size_t shard_elems;   /* this rank's */
    uint64_t allgather_bytes;
    /* Stage 2 on a model with reserved gradients (model_create_sharded_grads, zero_shard_gradients): */
    bool sharded_grads;
    bool *committed;      /* (nbuckets) the bucket's memory was committed this step (and its shard still is) */
    model_hooks inner;    /* the hooks that were set before (DDP's): called on from ours */
    ddp *dp;              /* whose reductions a new bucket waits for */
};

void zero_check_stage(int stage) {
    if (stage == 3)
        MP_FAIL_HINT("zero_optimization.stage 1 or 2 for dist/zero.h",
                     "stage 3 shards the parameters too: that is dist/fsdp.h (FULL_SHARD), which the trainer uses for it",
                     "zero_optimization.stage 3");
    if (stage < 1 || stage > 2)
        MP_FAIL("zero_optimization.stage 1 or 2 for ZeRO", "zero_optimization.stage %d", stage);
}

/* DDP's rule (ddp.c on_grads_ready): layers finish from L down to -1, a bucket closes once it holds
 * bucket_elems elements, and the embeddings close the last one. */
static void make_buckets(zero *z) {
    const model_config *mc = model_get_config(z->m);
    int cap = mc->L + 2;
    z->buckets = calloc((size_t)cap, sizeof *z->buckets);
    MP_ASSERT(z->buckets, "out of memory");
    size_t open_lo = 0, open_hi = 0;
    bool open = false;
    for (int layer = mc->L; layer >= -1; layer--) {
        size_t off, n;
        model_layer_span(z->m, layer, &off, &n);
        if (!open) {
            open_lo = off;
            open_hi = off + n;
            open = true;
        } else {
            MP_ASSERT(off + n == open_lo, "layer %d's span does not end where the bucket starts", layer);
            open_lo = off;
        }
        if (layer == -1 || (z->bucket_elems && open_hi - open_lo >= z->bucket_elems)) {
            MP_ASSERT(z->nbuckets < cap, "bucket overflow");
            size_t b = open_hi - open_lo, k = b / (size_t)z->world;
            z->buckets[z->nbuckets++] = (zero_bucket){open_lo, open_hi, k, b - k * (size_t)z->world};
            open_hi = open_lo;
        }
    }
}

/* Rank r's shard as ranges cut at tensor boundaries, in the order its optimizer state lays them out
 * (bucket by bucket: the block, then the left-over element). Returns the count; out may be NULL. */
static int rank_ranges(const zero *z, int r, zero_range *out) {
    int ntensors;
    const model_tensor *t = model_tensors(z->m, &ntensors);
    int count = 0;
    for (int b = 0; b < z->nbuckets; b++) {
        const zero_bucket *bk = &z->buckets[b];
        size_t piece_lo[2], piece_hi[2];
        int npieces = 0;
        if (bk->block > 0) {
            piece_lo[npieces] = bk->lo + (size_t)r * bk->block;
            piece_hi[npieces++] = bk->lo + (size_t)(r + 1) * bk->block;
        }
        if ((size_t)r < bk->rem) {
            size_t at = bk->lo + (size_t)z->world * bk->block + (size_t)r;
            piece_lo[npieces] = at;
            piece_hi[npieces++] = at + 1;
        }
        for (int p = 0; p < npieces; p++)
            for (int i = 0; i < ntensors; i++) {
                size_t lo = t[i].offset > piece_lo[p] ? t[i].offset : piece_lo[p];
                size_t hi = t[i].offset + t[i].size < piece_hi[p] ? t[i].offset + t[i].size : piece_hi[p];
                if (lo >= hi) continue;
                if (out) out[count] = (zero_range){lo, hi - lo, t[i].decay};
                count++;
            }
    }
    return count;
}

static size_t rank_elems(const zero *z, int r) {
    int n = rank_ranges(z, r, NULL);
    zero_range *ranges = malloc((size_t)(n > 0 ? n : 1) * sizeof *ranges);
    MP_ASSERT(ranges, "out of memory");
    rank_ranges(z, r, ranges);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += ranges[i].n;
    free(ranges);
    return total;
}

zero *zero_create(model *m, comm_t *c, int stage, size_t bucket_elems) {
    zero_check_stage(stage);
    zero *z = calloc(1, sizeof *z);
    MP_ASSERT(z, "out of memory");
    z->m = m;
    z->c = c;
    z->stage = stage;
    z->rank = comm_rank(c);
    z->world = comm_size(c);
    /* Stage 1 reduces once, after backward: one bucket. Stage 2 reduces bucket by bucket as backward goes. */
    z->bucket_elems = stage == 1 ? 0 : bucket_elems;
    make_buckets(z);
    z->shard_elems = rank_elems(z, z->rank);
    return z;
}

void zero_free(zero *z) {
    if (!z) return;
    free(z->buckets);
    free(z->committed);
    free(z);
}

int zero_stage(const zero *z) { return z->stage; }
size_t zero_bucket_elems(const zero *z) { return z->bucket_elems; }
size_t zero_shard_elems(const zero *z) { return z->shard_elems; }
uint64_t zero_allgather_bytes(const zero *z) { return z->allgather_bytes; }

void zero_shard_spans(const zero *z, optim_span **spans, clip_span **clips, int *count) {
    int n = rank_ranges(z, z->rank, NULL);
    zero_range *ranges = malloc((size_t)(n > 0 ? n : 1) * sizeof *ranges);
    *spans = calloc((size_t)(n > 0 ? n : 1), sizeof **spans);
    *clips = calloc((size_t)(n > 0 ? n : 1), sizeof **clips);
    MP_ASSERT(ranges && *spans && *clips, "out of memory");
    rank_ranges(z, z->rank, ranges);
    float *params = model_params(z->m), *grads = model_grads(z->m);
    for (int i = 0; i < n; i++) {
        (*spans)[i] = (optim_span){params + ranges[i].offset, grads + ranges[i].offset, ranges[i].n, ranges[i].decay};
        (*clips)[i] = (clip_span){grads + ranges[i].offset, ranges[i].n};
    }
    *count = n;
    free(ranges);
}

/* ------------------------------------------------------------------ gradient memory (stage 2) */

/* Gives back the parts of a reduced bucket that are not this rank's: everything but its block and its
 * left-over element. They only held partial sums; decommitted, they read zero again. */
static void release_unowned(zero *z, const zero_bucket *bk) {
    float *g = model_grads(z->m);
    size_t r = (size_t)z->rank, N = (size_t)z->world, k = bk->block, tail = bk->lo + N * k;
    size_t own_lo = bk->lo + r * k, own_hi = own_lo + k, extra = r < bk->rem ? tail + r : SIZE_MAX;
    const size_t cut[][2] = {{bk->lo, own_lo}, {own_hi, tail}, {tail, extra < bk->hi ? extra : bk->hi},
                             {extra < bk->hi ? extra + 1 : bk->hi, bk->hi}};
    for (int i = 0; i < 4; i++)
        if (cut[i][1] > cut[i][0]) mem_decommit(g, cut[i][0] * sizeof(float), (cut[i][1] - cut[i][0]) * sizeof(float));
}

/* Like DeepSpeed's double-buffered reduction bucket: a new bucket gets memory once at most one reduction (the
 * previous bucket's) is still in flight, so the gradients held are the shard plus about two buckets. */
static void commit_bucket_at(zero *z, size_t elem) {
    for (int b = 0; b < z->nbuckets; b++) {
        const zero_bucket *bk = &z->buckets[b];
        if (elem < bk->lo || elem >= bk->hi || z->committed[b]) continue;
        ddp_wait_pending(z->dp, 1);
        mem_commit(model_grads(z->m), bk->lo * sizeof(float), (bk->hi - bk->lo) * sizeof(float));
        z->committed[b] = true;
    }
}

/* Before a layer's backward writes its gradients: the buckets they fall in get memory (a layer never spans
 * two buckets: buckets close at layer boundaries). The tied head writes the embeddings' wte. */
static void before_backward(void *ctx, int layer) {
    zero *z = ctx;
    size_t off, n;
    model_layer_span(z->m, layer, &off, &n);
    if (n > 0) commit_bucket_at(z, off);
    const model_config *mc = model_get_config(z->m);
    if (layer == mc->L && mc->tied) commit_bucket_at(z, model_tensor_find(z->m, "wte")->offset);
    if (z->inner.before_backward) z->inner.before_backward(z->inner.ctx, layer);
}
static void before_forward(void *ctx, int layer) {
    zero *z = ctx;
    if (z->inner.before_forward) z->inner.before_forward(z->inner.ctx, layer);
}
static void grads_ready(void *ctx, int layer) {
    zero *z = ctx;
    if (z->inner.grads_ready) z->inner.grads_ready(z->inner.ctx, layer);
}

void zero_shard_gradients(zero *z, ddp *dp) {
    MP_ASSERT(z->stage == 2 && model_grads_are_reserved(z->m) && !model_is_reserved(z->m),
              "zero_shard_gradients needs stage 2 and a model made by model_create_sharded_grads");
    z->sharded_grads = true;
    z->dp = dp;
    z->committed = calloc((size_t)z->nbuckets, sizeof *z->committed);
    MP_ASSERT(z->committed, "out of memory");
    z->inner = model_get_hooks(z->m);
    model_set_hooks(z->m, &(model_hooks){before_forward, before_backward, grads_ready, z});
}

void zero_release_gradients(zero *z) {
    if (!z->sharded_grads) return;
    float *g = model_grads(z->m);
    size_t r = (size_t)z->rank, N = (size_t)z->world;
    for (int b = 0; b < z->nbuckets; b++) {
        if (!z->committed[b]) continue;
        const zero_bucket *bk = &z->buckets[b];
        if (bk->block > 0) mem_decommit(g, (bk->lo + r * bk->block) * sizeof(float), bk->block * sizeof(float));
        if (r < bk->rem) mem_decommit(g, (bk->lo + N * bk->block + r) * sizeof(float), sizeof(float));
        z->committed[b] = false;
    }
}

/* ------------------------------------------------------------------ communication */

static const zero_bucket *bucket_at(const zero *z, size_t lo, size_t hi) {
    for (int b = 0; b < z->nbuckets; b++)
        if (z->buckets[b].lo == lo && z->buckets[b].hi == hi) return &z->buckets[b];
    MP_ASSERT(false, "DDP bucket [%zu, %zu) is not one of ZeRO's (bucket sizes differ)", lo, hi);
    return NULL;
}

void zero_reduce_bucket(void *ctx, comm_t *c, float *grads, size_t lo, size_t hi, comm_algo algo) {
    zero *z = ctx;
    const zero_bucket *bk = bucket_at(z, lo, hi);
    size_t k = bk->block, r = (size_t)z->rank, N = (size_t)z->world;
    /* LAB 19 BEGIN reduce-scatter a bucket: rank r keeps the average of its block r, in place; the left-over elements averaged whole */
    if (k > 0) {
        /* In place: the average of block r lands at the start of the bucket; move it home. The other blocks
         * now hold stale partial sums that no one reads. */
        comm_reduce_scatter(c, grads + lo, grads + lo, k, COMM_FP32, COMM_AVG, algo);
        if (r > 0) memmove(grads + lo + r * k, grads + lo, k * sizeof(float));
    }
    if (bk->rem > 0) comm_allreduce(c, grads + lo + N * k, grads + lo + N * k, bk->rem, COMM_FP32, COMM_AVG, algo);
    /* LAB 19 END */
    if (z->sharded_grads) release_unowned(z, bk);
}

double zero_sum_over_ranks(zero *z, double local) {
    /* No fp64 in comm.h: the doubles travel as their 8 bytes, and every rank adds them in rank order. */
    int64_t mine, *all = malloc((size_t)z->world * sizeof *all);
    MP_ASSERT(all, "out of memory");
    memcpy(&mine, &local, sizeof mine);
    comm_allgather(z->c, &mine, all, 1, COMM_INT64, COMM_ALGO_NATIVE);
    double total = 0;
    for (int r = 0; r < z->world; r++) {
        double x;
        memcpy(&x, &all[r], sizeof x);
        total += x;
    }
    free(all);
    return total;
}

void zero_allgather_params(zero *z) {
    comm_stats_t before, after;
    comm_stats(z->c, &before);
    float *params = model_params(z->m);
    size_t r = (size_t)z->rank, N = (size_t)z->world, nb = (size_t)z->nbuckets;
    bool any_rem = false;
    /* LAB 19 BEGIN all-gather the updated shards: every rank's block of every bucket back into place, then the left-over elements */
    for (int b = 0; b < z->nbuckets; b++) {
        const zero_bucket *bk = &z->buckets[b];
        if (bk->block > 0) /* in place: this rank's block already sits at recv + rank * count */
            comm_allgather(z->c, params + bk->lo + r * bk->block, params + bk->lo, bk->block, COMM_FP32,
                           COMM_ALGO_DEFAULT);
        any_rem |= bk->rem > 0;
    }
    if (any_rem) { /* the left-over elements, one per bucket and rank at most: one small all-gather */
        float *send = calloc(nb, sizeof *send), *recv = calloc(nb * N, sizeof *recv);
        MP_ASSERT(send && recv, "out of memory");
        for (size_t b = 0; b < nb; b++)
            if (r < z->buckets[b].rem) send[b] = params[z->buckets[b].lo + N * z->buckets[b].block + r];
        comm_allgather(z->c, send, recv, nb, COMM_FP32, COMM_ALGO_DEFAULT);
        for (size_t b = 0; b < nb; b++)
            for (size_t j = 0; j < z->buckets[b].rem; j++)
                params[z->buckets[b].lo + N * z->buckets[b].block + j] = recv[j * nb + b];
        free(send);
        free(recv);
    }
    /* LAB 19 END */
    comm_stats(z->c, &after);
    z->allgather_bytes = 0;
    for (int op = 0; op < COMM_NOPS; op++) z->allgather_bytes += after.bytes_sent[op] - before.bytes_sent[op];
}

/* ------------------------------------------------------------------ checkpoints */

int zero_shard_ranges(const zero *z, int rank, size_t *offsets, size_t *lengths) {
    MP_ASSERT(rank >= 0 && rank < z->world, "rank %d of %d", rank, z->world);
    int n = rank_ranges(z, rank, NULL);
    if (!offsets && !lengths) return n;
    zero_range *ranges = malloc((size_t)(n > 0 ? n : 1) * sizeof *ranges);
    MP_ASSERT(ranges, "out of memory");
    rank_ranges(z, rank, ranges);
    for (int i = 0; i < n; i++) {
        if (offsets) offsets[i] = ranges[i].offset;
        if (lengths) lengths[i] = ranges[i].n;
    }
    free(ranges);
    return n;
}

static void gather_one(zero *z, const float *shard, float *full, size_t stride, float *send, float *recv) {
    memset(send, 0, stride * sizeof(float));
    memcpy(send, shard, z->shard_elems * sizeof(float));
    comm_gather(z->c, send, recv, stride, COMM_FP32, 0);
    if (z->rank != 0) return;
    for (int r = 0; r < z->world; r++) {
        int n = rank_ranges(z, r, NULL);
        zero_range *ranges = malloc((size_t)(n > 0 ? n : 1) * sizeof *ranges);
        MP_ASSERT(ranges, "out of memory");
        rank_ranges(z, r, ranges);
        const float *src = recv + (size_t)r * stride;
        for (int i = 0; i < n; i++) {
            memcpy(full + ranges[i].offset, src, ranges[i].n * sizeof(float));
            src += ranges[i].n;
        }
        free(ranges);
    }
}

void zero_gather_state(zero *z, const optim_state *st, float *full_m, float *full_v) {
    MP_ASSERT(st->n == z->shard_elems, "optimizer state of %zu parameters, shard of %zu", st->n, z->shard_elems);
    /* Shards differ by at most one element per bucket: gather in blocks of the largest. */
    size_t stride = 0;
    for (int r = 0; r < z->world; r++) {
        size_t e = rank_elems(z, r);
        if (e > stride) stride = e;
    }
    /* Transient, and only while a checkpoint is written: counted as MEM_OTHER, not as optimizer state. */
    float *send = mem_alloc((stride ? stride : 1) * sizeof(float), MEM_OTHER, "zero.gather.send");
    float *recv = z->rank == 0 ? mem_alloc((stride ? stride : 1) * (size_t)z->world * sizeof(float), MEM_OTHER,
                                           "zero.gather.recv")
                               : NULL;
    if (st->m) gather_one(z, st->m, full_m, stride, send, recv);
    if (st->v) gather_one(z, st->v, full_v, stride, send, recv);
    mem_free(send);
    mem_free(recv);
}

void zero_load_state(const zero *z, optim_state *st, const float *full_m, const float *full_v) {
    MP_ASSERT(st->n == z->shard_elems, "optimizer state of %zu parameters, shard of %zu", st->n, z->shard_elems);
    int n = rank_ranges(z, z->rank, NULL);
    zero_range *ranges = malloc((size_t)(n > 0 ? n : 1) * sizeof *ranges);
    MP_ASSERT(ranges, "out of memory");
    rank_ranges(z, z->rank, ranges);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (st->m) memcpy(st->m + at, full_m + ranges[i].offset, ranges[i].n * sizeof(float));
        if (st->v) memcpy(st->v + at, full_v + ranges[i].offset, ranges[i].n * sizeof(float));
        at += ranges[i].n;
    }
    free(ranges);
}
