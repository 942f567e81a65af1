/* train_data.c: the trainer's training batches: a global-batch loader sliced per rank, or a DistributedSampler prefetcher. */
#include "train/train_data.h"

#include "base/error.h"
#include "data/prefetch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct train_data {
    data_sampler kind;
    int B, T, world, rank;
    int shard;                 /* the rank's slice of each global batch: its rank, or 0 under MIXPAR_DEBUG_SAME_SHARD */
    const tokfile *file;
    loader global;             /* DATA_SAMPLER_GLOBAL: batches of B x world windows */
    prefetch_config pcfg;      /* DATA_SAMPLER_DISTRIBUTED: this rank's share, reopened on restore */
    prefetch_loader *prefetch;
};

static prefetch_loader *open_prefetch(const train_data *d) {
    data_err err;
    prefetch_loader *pl = prefetch_open(d->file, 0, d->file->token_count, &d->pcfg, &err);
    if (!pl) MP_FAIL_HINT(err.expected, err.hint, "%s (data.sampler \"distributed\")", err.found);
    return pl;
}

/* FNV-1a of 256 tokens spread evenly over the file: cheap on any size, and two different files that happen
 * to have the same length almost surely differ in it. */
static int64_t token_fingerprint(const tokfile *f) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint64_t k = 0, n = f->token_count; n > 0 && k < 256; k++)
        h = (h ^ tokfile_get(f, k * (n - 1) / 255)) * 0x100000001b3ULL;
    return (int64_t)h;
}

/* Every rank must have as many batches an epoch as the others, or one of them runs out of data first: an
 * epoch-based loop would leave the others waiting for it in the gradient allreduce forever, and in this
 * step-based one the ranks would cross epochs at different steps. Different token files (each machine with
 * its own copy of data.dir) are the usual cause, so the files' sizes and a fingerprint are compared too. */
static void check_ranks_have_the_same_data(const train_data *d, comm_t *comm) {
    enum { N = 3 }; /* tokens, batches an epoch, fingerprint */
    int world = comm_size(comm);
    int64_t mine[N] = {(int64_t)d->file->token_count, (int64_t)train_data_batches_per_epoch(d),
                       token_fingerprint(d->file)};
    int64_t *all = malloc((size_t)world * N * sizeof *all);
    MP_ASSERT(all, "out of memory");
    comm_allgather(comm, mine, all, N, COMM_INT64, COMM_ALGO_NATIVE);
    char found[512] = "";
    size_t used = 0;
    bool differ = false;
    for (int r = 1; r < world; r++) differ |= memcmp(all + N * r, all, N * sizeof *all) != 0;
    for (int r = 0; differ && r < world && used < sizeof found - 100; r++) {
        const int64_t *a = all + N * r;
        if (r > 0 && memcmp(a, all, N * sizeof *all) == 0) continue;
        used += (size_t)snprintf(found + used, sizeof found - used, "%srank %d: %" PRId64 " tokens, %" PRId64
                                 " batches an epoch%s", used ? "; " : "", r, a[0], a[1],
                                 r > 0 && a[0] == all[0] && a[2] != all[2] ? ", other tokens" : "");
    }
    free(all);
    if (differ)
        MP_FAIL_HINT("the same training data on every rank",
                     "every rank must read the same token file (on several machines: the same data.dir contents on "
                     "each); with fewer batches a rank runs out of data early and the others wait for it forever",
                     "%s", found);
}

train_data *train_data_open(const train_config *cfg, const tokfile *file, int B, int T, comm_t *comm) {
    train_data *d = calloc(1, sizeof *d);
    MP_ASSERT(d, "out of memory");
    d->kind = cfg->data.sampler;
    d->B = B;
    d->T = T;
    d->world = comm ? comm_size(comm) : 1;
    d->rank = comm ? comm_rank(comm) : 0;
    /* MIXPAR_DEBUG_SAME_SHARD=1: a bug on purpose (lab 24's zoo): every rank reads rank 0's share of the data */
    const char *same = getenv("MIXPAR_DEBUG_SAME_SHARD");
    d->shard = same && *same && strcmp(same, "0") != 0 ? 0 : d->rank;
    d->file = file;
    if (d->kind == DATA_SAMPLER_GLOBAL) {
        data_err err;
        if (!loader_init(&d->global, file, 0, file->token_count, B * d->world, T, cfg->data.order, cfg->train.seed,
                         &err))
            MP_FAIL_HINT(err.expected, err.hint, "%s (a global batch of %d ranks x %d rows)",
                         err.found, d->world, B);
    } else {
        d->pcfg = (prefetch_config){.B = B, .T = T, .world = d->world, .rank = d->shard,
                                    .shuffle = cfg->data.order == LOADER_SHUFFLE, .drop_last = cfg->data.drop_last,
                                    .seed = cfg->train.seed, .workers = cfg->data.workers};
        d->prefetch = open_prefetch(d);
    }
    if (comm && d->world > 1) check_ranks_have_the_same_data(d, comm);
    return d;
}

void train_data_next(train_data *d, int32_t *inputs, int32_t *targets) {
    const size_t bt = (size_t)d->B * (size_t)d->T;
    if (d->kind == DATA_SAMPLER_GLOBAL) {
        loader_next(&d->global);
        memcpy(inputs, d->global.inputs + (size_t)d->shard * bt, bt * sizeof *inputs);
        memcpy(targets, d->global.targets + (size_t)d->shard * bt, bt * sizeof *targets);
        return;
    }
    const prefetch_batch *b = prefetch_next(d->prefetch);
    memcpy(inputs, b->inputs, bt * sizeof *inputs);
    memcpy(targets, b->targets, bt * sizeof *targets);
}

uint64_t train_data_batches_per_epoch(const train_data *d) {
    return d->kind == DATA_SAMPLER_GLOBAL ? d->global.batches_per_epoch : prefetch_batches_per_epoch(d->prefetch);
}

loader_state train_data_position(const train_data *d) {
    if (d->kind == DATA_SAMPLER_GLOBAL) return d->global.state;
    uint64_t seq = prefetch_next_seq(d->prefetch), per_epoch = prefetch_batches_per_epoch(d->prefetch);
    return (loader_state){seq / per_epoch, seq % per_epoch};
}

void train_data_restore(train_data *d, loader_state position) {
    uint64_t per_epoch = train_data_batches_per_epoch(d);
    if (position.batch > per_epoch) { /* saved by a run whose epochs had more batches (fewer ranks, smaller B) */
        if (d->rank == 0)
            fprintf(stderr,
                    "data: the checkpoint stopped at batch %" PRIu64 " of epoch %" PRIu64 ", past this run's %" PRIu64
                    " batches an epoch (another world size or batch size): resuming at epoch %" PRIu64 "\n",
                    position.batch, position.epoch, per_epoch, position.epoch + 1);
        position = (loader_state){position.epoch + 1, 0};
    }
    if (d->kind == DATA_SAMPLER_GLOBAL) {
        loader_restore(&d->global, position, NULL);
        return;
    }
    prefetch_free(d->prefetch);
    d->pcfg.first_seq = position.epoch * per_epoch + position.batch;
    d->prefetch = open_prefetch(d);
}

void train_data_describe(const train_data *d, char *out, int out_len) {
    uint64_t per_epoch = train_data_batches_per_epoch(d);
    if (d->kind == DATA_SAMPLER_GLOBAL)
        snprintf(out, (size_t)out_len, "global, %" PRIu64 " batches an epoch of %d rows (%d a rank), %s", per_epoch,
                 d->B * d->world, d->B, loader_order_name(d->global.order));
    else
        snprintf(out, (size_t)out_len,
                 "distributed (PyTorch's DistributedSampler), %" PRIu64 " batches an epoch of %d rows a rank, %s, %s, "
                 "%d prefetch worker%s",
                 per_epoch, d->B, d->pcfg.shuffle ? "shuffle" : "sequential", d->pcfg.drop_last ? "drop_last" : "padded",
                 d->pcfg.workers, d->pcfg.workers == 1 ? "" : "s");
}

void train_data_free(train_data *d) {
    if (!d) return;
    if (d->kind == DATA_SAMPLER_GLOBAL) loader_free(&d->global);
    else prefetch_free(d->prefetch);
    free(d);
}
