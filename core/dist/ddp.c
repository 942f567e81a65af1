/* ddp.c: data parallel training: parameter broadcast, config agreement, bucketed gradient averaging on a comm thread. */
#include "dist/ddp.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/lab.h"
#include "dist/fusion.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Buckets per backward: DDP's are at most the layers + 2, Horovod's fusion buffers at most the tensors. */
enum { MAX_BUCKETS = 4096, STATS_SPANS = 64, NO_SPAN = -1 };

typedef struct {
    size_t lo, hi;
    int index;
    int fused;     /* the fusion buffer it reduces (Horovod mode), -1 for a bucket */
    double queued; /* when backward handed it over (mp_elapsed): the reduction may start later, on its thread */
} bucket_job;

struct ddp {
    model *m;
    comm_t *c;
    ddp_options opt;
    bool sync;
    float *grads;
    long open_lo, open_hi;      /* the bucket being filled: [open_lo, open_hi) of the gradient buffer */
    int launched;               /* buckets launched in this backward */
    ev_writer *ev;
    ddp_hook *hook;             /* how a bucket is averaged (dist/hooks.h) */
    fusion *fusion;             /* Horovod's tensor fusion instead of buckets (dist/fusion.h), or NULL */
    ddp_stats stats;
    /* the communication thread and its queue */
    bool threaded;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    bucket_job queue[MAX_BUCKETS];
    int head, tail;             /* jobs queue[head..tail) are waiting */
    bool busy, stop;
};

/* ------------------------------------------------------------------ reducing one bucket */

/* Averages one launched bucket (or fusion buffer) over the ranks, through the hook or options.reduce_bucket,
 * and records its time and bytes: what the communication thread runs for each job it takes. */
static void reduce_job(ddp *d, const bucket_job *job) {
    double t0 = mp_elapsed();
    if (job->index == 0) d->stats.first_comm_start = t0;
    comm_set_event_bucket(d->c, job->index, job->queued);
    /* Bytes sent: what comm_stats counted during the hook (only this thread communicates in backward). */
    comm_stats_t before, after;
    comm_stats(d->c, &before);
    if (job->fused >= 0) fusion_reduce(d->fusion, job->fused, d->hook, d->c, d->grads, d->opt.algo);
    else if (d->opt.reduce_bucket) d->opt.reduce_bucket(d->opt.reduce_ctx, d->c, d->grads, job->lo, job->hi, d->opt.algo);
    else ddp_hook_reduce(d->hook, d->c, d->grads, job->lo, job->hi, d->opt.algo);
    comm_stats(d->c, &after);
    for (int op = 0; op < COMM_NOPS; op++) d->stats.bytes_sent += after.bytes_sent[op] - before.bytes_sent[op];
    comm_set_event_bucket(d->c, -1, 0);
    d->stats.comm_end = mp_elapsed();
}

/* The communication thread: reduces the queued buckets one at a time, in the order they were queued, while
 * the main thread goes on with backward; stops when asked (d->stop) once the queue is empty. Protocol with
 * launch and ddp_wait_pending: jobs queue[head..tail) wait (head and tail under mu); busy says a job taken off
 * the queue is being reduced; work is signalled when a job is queued (or stop set), idle after each reduction. */
static void *comm_thread(void *arg) {
    ddp *d = arg;
    MP_ASSERT(d != NULL && d->threaded, "the communication thread runs for a threaded DDP");
    /* LAB 13 BEGIN the communication thread: take queued buckets in launch order, reduce each outside the lock, signal when idle */
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (d->head == d->tail && !d->stop) pthread_cond_wait(&d->work, &d->mu);
        if (d->head == d->tail && d->stop) break;
        bucket_job job = d->queue[d->head++];
        d->busy = true;
        pthread_mutex_unlock(&d->mu);
        reduce_job(d, &job);
        pthread_mutex_lock(&d->mu);
        d->busy = false;
        pthread_cond_broadcast(&d->idle);
    }
    pthread_mutex_unlock(&d->mu);
    /* LAB 13 END */
    return NULL;
}

static void launch(ddp *d, size_t lo, size_t hi, int fused) {
    MP_ASSERT(d->launched < MAX_BUCKETS, "more than %d buckets: raise bucket_elems (or the fusion threshold)", MAX_BUCKETS);
    bucket_job job = {lo, hi, d->launched, fused, mp_elapsed()};
    if (d->launched < STATS_SPANS) { /* ddp_stats keeps the first 64 spans */
        d->stats.bucket_lo[d->launched] = lo;
        d->stats.bucket_hi[d->launched] = hi;
    }
    d->launched++;
    d->stats.buckets = d->launched;
    if (!d->threaded) {
        reduce_job(d, &job);
        return;
    }
    MP_ASSERT(d->tail < MAX_BUCKETS, "bucket queue overflow");
    /* LAB 13 BEGIN hand the bucket to the communication thread: queue it at the tail and wake the thread */
    pthread_mutex_lock(&d->mu);
    d->queue[d->tail++] = job;
    pthread_cond_signal(&d->work);
    pthread_mutex_unlock(&d->mu);
    /* LAB 13 END */
}

/* ------------------------------------------------------------------ the model's hooks */

static void on_before_backward(void *ctx, int layer) {
    ddp *d = ctx;
    if (layer != model_get_config(d->m)->L) return; /* the head comes first: a new backward begins */
    d->open_lo = d->open_hi = NO_SPAN;
    d->launched = 0;
    if (d->fusion) fusion_start(d->fusion);
    if (d->sync) d->stats.bytes_sent = 0; /* no_sync backwards send nothing: keep the count for the step */
    if (d->threaded) pthread_mutex_lock(&d->mu); /* the queue is drained (ddp_finish ran), but it is shared */
    d->head = d->tail = 0;
    if (d->threaded) pthread_mutex_unlock(&d->mu);
}

static void on_grads_ready(void *ctx, int layer) {
    ddp *d = ctx;
    if (!d->sync) return;
    if (d->fusion) { /* Horovod: every fusion buffer whose tensors are now all ready */
        size_t lo, hi;
        for (int b; (b = fusion_next_complete(d->fusion, layer)) >= 0;) {
            fusion_buffer_span(d->fusion, b, &lo, &hi);
            launch(d, lo, hi, b);
        }
        if (layer == -1) d->stats.backward_end = mp_elapsed();
        return;
    }
    size_t off, n;
    model_layer_span(d->m, layer, &off, &n);
    /* LAB 13 BEGIN bucket bookkeeping: grow the span down by this layer, launch when full or at the embeddings */
    if (d->open_hi == NO_SPAN) {
        d->open_lo = (long)off;
        d->open_hi = (long)(off + n);
    } else {
        /* Layers finish from the end of the buffer towards its start, each one just below the last. */
        MP_ASSERT((long)(off + n) == d->open_lo, "layer %d's gradients [%zu, %zu) do not end where the bucket starts (%ld)",
                  layer, off, off + n, d->open_lo);
        d->open_lo = (long)off;
    }
    size_t filled = (size_t)(d->open_hi - d->open_lo);
    if (layer == -1 || (d->opt.bucket_elems && filled >= d->opt.bucket_elems)) {
        launch(d, (size_t)d->open_lo, (size_t)d->open_hi, -1);
        d->open_hi = d->open_lo;
    }
    /* LAB 13 END */
    if (layer == -1) d->stats.backward_end = mp_elapsed();
}

/* ------------------------------------------------------------------ set-up */

/* Every rank must build the same model: compare a hash of the config and the parameter count. */
void ddp_check_replicas_agree(comm_t *c, uint64_t hash) {
    int size = comm_size(c);
    int64_t mine = (int64_t)hash, *all = malloc((size_t)size * sizeof *all);
    MP_ASSERT(all, "out of memory");
    comm_allgather(c, &mine, all, 1, COMM_INT64, COMM_ALGO_NATIVE);
    char differ[256] = "";
    for (int r = 1; r < size; r++)
        if (all[r] != all[0] && strlen(differ) < sizeof differ - 16)
            snprintf(differ + strlen(differ), sizeof differ - strlen(differ), "%s%d", differ[0] ? ", " : "", r);
    free(all);
    if (differ[0])
        MP_FAIL_HINT("the same model config and parameter count on every rank",
                     "start every rank with the same config and --set overrides (mixpar run passes them to all)",
                     "rank(s) %s differ from rank 0 (config hash)", differ);
}

ddp *ddp_create(model *m, comm_t *c, const ddp_options *opt, uint64_t config_hash) {
    ddp *d = calloc(1, sizeof *d);
    MP_ASSERT(d, "out of memory");
    d->m = m;
    d->c = c;
    d->opt = *opt;
    d->sync = true;
    d->grads = model_grads(m);
    d->open_lo = d->open_hi = NO_SPAN;
    int ntensors = 0;
    const model_tensor *tensors = model_tensors(m, &ntensors);
    d->hook = ddp_hook_create(&opt->hook, tensors, ntensors, model_num_params(m));
    if (opt->fusion) {
        MP_ASSERT(!opt->reduce_bucket && opt->hook.kind <= DDP_HOOK_BF16,
                  "tensor fusion reduces with allreduce, fp16 or bf16 (not ZeRO, top-k or PowerSGD)");
        d->fusion = fusion_create(tensors, ntensors, opt->fusion_elems);
    }
    ddp_check_replicas_agree(c, config_hash ^ (uint64_t)model_num_params(m) * 0x9e3779b97f4a7c15ULL);
    /* Rank 0's initial weights for everyone, so the replicas start identical whatever their seeds. */
    /* LAB 13 BEGIN parameter broadcast: every replica starts from rank 0's weights */
    comm_broadcast(c, model_params(m), model_num_params(m), COMM_FP32, 0, COMM_ALGO_DEFAULT);
    /* LAB 13 END */
    if (opt->events_dir) {
        d->ev = ev_open_append(opt->events_dir, comm_rank(c));
        comm_set_events(c, d->ev);
    }
    d->threaded = opt->overlap && comm_thread_safe_serialized(c) && comm_size(c) > 1;
    d->stats.overlapping = d->threaded;
    if (d->threaded) {
        pthread_mutex_init(&d->mu, NULL);
        pthread_cond_init(&d->work, NULL);
        pthread_cond_init(&d->idle, NULL);
        if (pthread_create(&d->thread, NULL, comm_thread, d) != 0) {
            d->threaded = d->stats.overlapping = false;
        }
    }
    model_hooks hooks = {.before_backward = on_before_backward, .grads_ready = on_grads_ready, .ctx = d};
    model_set_hooks(m, &hooks);
    return d;
}

void ddp_set_sync(ddp *d, bool sync) { d->sync = sync; }
void ddp_before_backward(ddp *d, int layer) { on_before_backward(d, layer); }
void ddp_grads_ready(ddp *d, int layer) { on_grads_ready(d, layer); }

void ddp_finish(ddp *d) { ddp_wait_pending(d, 0); }

void ddp_wait_pending(ddp *d, int at_most) {
    if (!d->threaded) return;
    MP_ASSERT(at_most >= 0, "ddp_wait_pending: at most %d buckets pending is not a count", at_most);
    /* LAB 13 BEGIN wait until at most at_most buckets are queued or being reduced (0: all of them done) */
    pthread_mutex_lock(&d->mu);
    while ((d->tail - d->head) + (d->busy ? 1 : 0) > at_most) pthread_cond_wait(&d->idle, &d->mu);
    pthread_mutex_unlock(&d->mu);
    /* LAB 13 END */
}

int ddp_buckets_launched(const ddp *d) { return d->launched; }

void ddp_get_stats(const ddp *d, ddp_stats *out) { *out = d->stats; }

void ddp_free(ddp *d) {
    if (!d) return;
    if (d->threaded) {
        pthread_mutex_lock(&d->mu);
        d->stop = true;
        pthread_cond_signal(&d->work);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->work);
        pthread_cond_destroy(&d->idle);
    }
    ddp_hook_free(d->hook);
    fusion_free(d->fusion);
    model_hooks none = {0};
    model_set_hooks(d->m, &none);
    if (d->ev) {
        comm_set_events(d->c, NULL);
        ev_close(d->ev);
    }
    free(d);
}
