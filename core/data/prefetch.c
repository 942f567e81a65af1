/* prefetch.c: the prefetching loader: a claim counter, a ring of slots tagged by sequence number, pthread workers. */
#include "data/prefetch.h"

#include "base/clock.h"
#include "base/mem.h"

#include <pthread.h>
#include <string.h>

enum { PREFETCH_MAX_WORKERS = 2, PREFETCH_MAX_DEPTH = 64, PREFETCH_DEFAULT_DEPTH = 4 };

typedef enum { SLOT_FREE, SLOT_FILLING, SLOT_READY } slot_state;

typedef struct {
    prefetch_batch batch;
    slot_state state;
} slot;

struct prefetch_loader {
    const tokfile *file;
    uint64_t begin;
    prefetch_config cfg;
    dist_sampler sampler;
    uint64_t n_windows, batches_per_epoch;
    uint64_t *epoch_windows; /* (num_samples) this rank's windows of epoch `loaded_epoch` */
    uint64_t loaded_epoch;
    bool loaded;

    slot slots[PREFETCH_MAX_DEPTH];
    int depth;
    /* Every field below is guarded by lock. Batches [released, next_claim) own slots (seq % depth):
     * claimed by a worker, ready, or held by the caller. */
    pthread_mutex_t lock;
    pthread_cond_t ready_cond;  /* a slot became ready */
    pthread_cond_t space_cond;  /* a slot was released, or stop */
    uint64_t next_claim;        /* the next sequence number to prepare */
    uint64_t released;          /* every batch before this one is done with */
    bool holding;               /* the caller holds batch `released` */
    bool stop;
    double wait_s;

    pthread_t threads[PREFETCH_MAX_WORKERS];
    int started;
};

uint64_t prefetch_batches_per_epoch(const prefetch_loader *pl) { return pl->batches_per_epoch; }
uint64_t prefetch_n_windows(const prefetch_loader *pl) { return pl->n_windows; }
double prefetch_wait_seconds(const prefetch_loader *pl) { return pl->wait_s; }
/* Only the caller's thread changes released and holding, so it reads them without the lock. */
uint64_t prefetch_next_seq(const prefetch_loader *pl) { return pl->released + (pl->holding ? 1 : 0); }

/* Under the lock: takes the next sequence number and writes its windows into its slot. The claims are
 * sequential, so the sampler's order is computed once per epoch, here, by whichever thread crosses into it. */
static slot *claim_locked(prefetch_loader *pl) {
    uint64_t seq = pl->next_claim++;
    uint64_t epoch = seq / pl->batches_per_epoch, batch = seq % pl->batches_per_epoch;
    if (!pl->loaded || pl->loaded_epoch != epoch) {
        dist_sampler_set_epoch(&pl->sampler, epoch);
        dist_sampler_indices(&pl->sampler, pl->epoch_windows);
        pl->loaded_epoch = epoch;
        pl->loaded = true;
    }
    slot *s = &pl->slots[seq % (uint64_t)pl->depth];
    s->state = SLOT_FILLING;
    s->batch.seq = seq;
    s->batch.epoch = epoch;
    s->batch.batch = batch;
    memcpy(s->batch.windows, pl->epoch_windows + batch * (uint64_t)pl->cfg.B, (size_t)pl->cfg.B * sizeof(uint64_t));
    return s;
}

/* Outside the lock: the slot is this thread's alone until it is marked ready. */
static void fill(prefetch_loader *pl, prefetch_batch *b) {
    const int B = pl->cfg.B, T = pl->cfg.T;
    for (int r = 0; r < B; r++) {
        uint64_t start = pl->begin + b->windows[r] * (uint64_t)T;
        tokfile_read(pl->file, start, (uint64_t)T, b->inputs + (size_t)r * T);
        tokfile_read(pl->file, start + 1, (uint64_t)T, b->targets + (size_t)r * T);
    }
    if (pl->cfg.prepare) pl->cfg.prepare(pl->cfg.prepare_ctx, b, B, T);
}

static bool has_room_locked(const prefetch_loader *pl) { return pl->next_claim < pl->released + (uint64_t)pl->depth; }

static void *worker_main(void *arg) {
    prefetch_loader *pl = arg;
    pthread_mutex_lock(&pl->lock);
    for (;;) {
        while (!pl->stop && !has_room_locked(pl)) pthread_cond_wait(&pl->space_cond, &pl->lock);
        if (pl->stop) break;
        slot *s = claim_locked(pl);
        pthread_mutex_unlock(&pl->lock);
        fill(pl, &s->batch);
        pthread_mutex_lock(&pl->lock);
        s->state = SLOT_READY;
        pthread_cond_broadcast(&pl->ready_cond);
    }
    pthread_mutex_unlock(&pl->lock);
    return NULL;
}

prefetch_loader *prefetch_open(const tokfile *file, uint64_t begin, uint64_t end, const prefetch_config *cfg,
                               data_err *err) {
    if (cfg->B < 1 || cfg->T < 1)
        return DATA_ERR(err, "batch size B >= 1 and sequence length T >= 1", NULL, "B=%d T=%d", cfg->B, cfg->T), NULL;
    if (cfg->workers < 0 || cfg->workers > PREFETCH_MAX_WORKERS)
        return DATA_ERR(err, "0, 1 or 2 worker threads", NULL, "%d", cfg->workers), NULL;
    int depth = cfg->depth == 0 ? PREFETCH_DEFAULT_DEPTH : cfg->depth;
    if (depth < 1 || depth > PREFETCH_MAX_DEPTH)
        return DATA_ERR(err, "a queue depth of 1 to 64 batches (0 for the default, 4)", NULL, "%d", cfg->depth), NULL;
    if (begin > end || end > file->token_count)
        return DATA_ERR(err, "a token range inside the file", NULL, "[%llu, %llu) of '%s', which has %llu tokens",
                        (unsigned long long)begin, (unsigned long long)end, file->path,
                        (unsigned long long)file->token_count),
               NULL;
    uint64_t n_tokens = end - begin;
    uint64_t n_windows = n_tokens > 0 ? (n_tokens - 1) / (uint64_t)cfg->T : 0;
    dist_sampler sampler;
    if (n_windows == 0 || !dist_sampler_init(&sampler, n_windows, cfg->world, cfg->rank, cfg->shuffle, cfg->seed,
                                             cfg->drop_last, err)) {
        if (n_windows == 0)
            DATA_ERR(err, "at least T+1 tokens (one window)", NULL, "%llu tokens, T=%d", (unsigned long long)n_tokens,
                     cfg->T);
        return NULL;
    }
    if (sampler.num_samples < (uint64_t)cfg->B)
        return DATA_ERR(err, "at least B windows per rank for one batch",
                        "use a smaller batch (B) or sequence length (T), fewer ranks, or a bigger dataset",
                        "%llu windows of T=%d tokens on %d ranks give %llu per rank; B=%d",
                        (unsigned long long)n_windows, cfg->T, cfg->world, (unsigned long long)sampler.num_samples,
                        cfg->B),
               NULL;

    prefetch_loader *pl = mem_alloc(sizeof *pl, MEM_OTHER, "prefetch loader");
    memset(pl, 0, sizeof *pl);
    pl->file = file;
    pl->begin = begin;
    pl->cfg = *cfg;
    pl->depth = depth;
    pl->sampler = sampler;
    pl->n_windows = n_windows;
    pl->batches_per_epoch = sampler.num_samples / (uint64_t)cfg->B;
    pl->next_claim = pl->released = cfg->first_seq;
    pl->epoch_windows = mem_alloc(sampler.num_samples * sizeof(uint64_t), MEM_OTHER, "prefetch epoch windows");
    const size_t bt = (size_t)cfg->B * (size_t)cfg->T;
    for (int i = 0; i < depth; i++) {
        prefetch_batch *b = &pl->slots[i].batch;
        b->windows = mem_alloc((size_t)cfg->B * sizeof(uint64_t), MEM_OTHER, "prefetch windows");
        b->inputs = mem_alloc(bt * sizeof(int32_t), MEM_OTHER, "prefetch inputs");
        b->targets = mem_alloc(bt * sizeof(int32_t), MEM_OTHER, "prefetch targets");
    }
    pthread_mutex_init(&pl->lock, NULL);
    pthread_cond_init(&pl->ready_cond, NULL);
    pthread_cond_init(&pl->space_cond, NULL);
    for (int w = 0; w < cfg->workers; w++) {
        if (pthread_create(&pl->threads[w], NULL, worker_main, pl) != 0) {
            prefetch_free(pl);
            return DATA_ERR(err, "a prefetch worker thread", "is the process out of threads?", "pthread_create failed"),
                   NULL;
        }
        pl->started++;
    }
    return pl;
}

const prefetch_batch *prefetch_next(prefetch_loader *pl) {
    double t0 = mp_now();
    pthread_mutex_lock(&pl->lock);
    if (pl->holding) { /* the caller is done with the batch it held: its slot can be refilled */
        pl->slots[pl->released % (uint64_t)pl->depth].state = SLOT_FREE;
        pl->released++;
        pl->holding = false;
        pthread_cond_broadcast(&pl->space_cond);
    }
    const uint64_t want = pl->released;
    slot *s = &pl->slots[want % (uint64_t)pl->depth];
    if (pl->cfg.workers == 0) { /* no workers: prepare it here, through the same claim and fill */
        slot *mine = claim_locked(pl);
        pthread_mutex_unlock(&pl->lock);
        fill(pl, &mine->batch);
        pthread_mutex_lock(&pl->lock);
        mine->state = SLOT_READY;
    }
    while (!(s->state == SLOT_READY && s->batch.seq == want)) pthread_cond_wait(&pl->ready_cond, &pl->lock);
    pl->holding = true;
    pl->wait_s += mp_now() - t0;
    pthread_mutex_unlock(&pl->lock);
    return &s->batch;
}

void prefetch_free(prefetch_loader *pl) {
    if (!pl) return;
    pthread_mutex_lock(&pl->lock);
    pl->stop = true;
    pthread_cond_broadcast(&pl->space_cond);
    pthread_mutex_unlock(&pl->lock);
    /* A worker in the middle of a batch finishes that batch (it holds no lock), sees stop and leaves. */
    for (int w = 0; w < pl->started; w++) pthread_join(pl->threads[w], NULL);
    pthread_mutex_destroy(&pl->lock);
    pthread_cond_destroy(&pl->ready_cond);
    pthread_cond_destroy(&pl->space_cond);
    for (int i = 0; i < pl->depth; i++) {
        mem_free(pl->slots[i].batch.windows);
        mem_free(pl->slots[i].batch.inputs);
        mem_free(pl->slots[i].batch.targets);
    }
    mem_free(pl->epoch_windows);
    mem_free(pl);
}
