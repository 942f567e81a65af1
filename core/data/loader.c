/* loader.c: the deterministic split, and the window loader with seeded per-epoch shuffling and resume. */
#include "data/loader.h"

#include "base/error.h"
#include "base/mem.h"
#include "base/rng.h"
#include "data/rand.h"

#include <string.h>

bool data_split_tokens(uint64_t n_tokens, double val_fraction, data_split *out, data_err *err) {
    if (!(val_fraction >= 0 && val_fraction < 1))
        return DATA_ERR(err, "a validation fraction in [0, 1), such as 0.1", NULL, "%g", val_fraction);
    /* The product is rounded down; in double it is exact for N < 2^53 tokens. */
    uint64_t n_val = (uint64_t)((double)n_tokens * val_fraction);
    if (n_val > n_tokens) n_val = n_tokens;
    out->n_val = n_val;
    out->n_train = n_tokens - n_val;
    return true;
}

const char *loader_order_name(loader_order order) { return order == LOADER_SHUFFLE ? "shuffle" : "sequential"; }

/* The rng for epoch e: one stream per (seed, epoch) pair, so any epoch can be regenerated on its own. */
static void epoch_rng(mp_rng *rng, uint64_t seed, uint64_t epoch) {
    mp_rng_seed(rng, seed ^ (0x9e3779b97f4a7c15ULL * (epoch + 1)));
}

/* This epoch's window order: Fisher-Yates from the identity, seeded by (seed, epoch). */
static void shuffle_windows(loader *l) {
    uint64_t *w = l->window_order;
    for (uint64_t i = 0; i < l->n_windows; i++) w[i] = i;
    mp_rng rng;
    epoch_rng(&rng, l->seed, l->state.epoch);
    for (uint64_t i = l->n_windows - 1; i > 0; i--) {
        uint64_t j = data_rng_below(&rng, i + 1);
        uint64_t t = w[i];
        w[i] = w[j];
        w[j] = t;
    }
}

bool loader_init(loader *l, const tokfile *file, uint64_t begin, uint64_t end, int B, int T, loader_order order,
                 uint64_t seed, data_err *err) {
    memset(l, 0, sizeof *l);
    if (B < 1 || T < 1) return DATA_ERR(err, "batch size B >= 1 and sequence length T >= 1", NULL, "B=%d T=%d", B, T);
    if (begin > end || end > file->token_count)
        return DATA_ERR(err, "a token range inside the file", NULL, "[%llu, %llu) of '%s', which has %llu tokens",
                        (unsigned long long)begin, (unsigned long long)end, file->path,
                        (unsigned long long)file->token_count);
    uint64_t n_tokens = end - begin;
    uint64_t n_windows = n_tokens > 0 ? (n_tokens - 1) / (uint64_t)T : 0;
    if (n_windows < (uint64_t)B)
        return DATA_ERR(err, "at least B*T+1 tokens: one batch of B sequences of T tokens, plus the last target",
                        "use a smaller batch (B) or sequence length (T), or a bigger dataset (--size)",
                        "%llu tokens in [%llu, %llu) of '%s'; B=%d, T=%d need %llu",
                        (unsigned long long)n_tokens, (unsigned long long)begin, (unsigned long long)end, file->path,
                        B, T, (unsigned long long)B * (unsigned long long)T + 1);
    l->file = file;
    l->begin = begin;
    l->end = end;
    l->B = B;
    l->T = T;
    l->order = order;
    l->seed = seed;
    l->n_windows = n_windows;
    l->batches_per_epoch = n_windows / (uint64_t)B;
    l->inputs = mem_alloc((size_t)B * T * sizeof(int32_t), MEM_OTHER, "loader inputs");
    l->targets = mem_alloc((size_t)B * T * sizeof(int32_t), MEM_OTHER, "loader targets");
    if (order == LOADER_SHUFFLE) {
        l->window_order = mem_alloc(n_windows * sizeof(uint64_t), MEM_OTHER, "loader window order");
        shuffle_windows(l);
    }
    return true;
}

void loader_next(loader *l) {
    if (l->state.batch == l->batches_per_epoch) { /* this epoch is used up */
        l->state.epoch++;
        l->state.batch = 0;
        if (l->order == LOADER_SHUFFLE) shuffle_windows(l);
    }
    int B = l->B, T = l->T;
    for (int b = 0; b < B; b++) {
        uint64_t slot = l->state.batch * (uint64_t)B + (uint64_t)b;
        uint64_t window = l->order == LOADER_SHUFFLE ? l->window_order[slot] : slot;
        uint64_t start = l->begin + window * (uint64_t)T;
        /* inputs and targets are the same T+1 tokens, offset by one. */
        tokfile_read(l->file, start, (uint64_t)T, l->inputs + (size_t)b * T);
        tokfile_read(l->file, start + 1, (uint64_t)T, l->targets + (size_t)b * T);
    }
    l->state.batch++;
}

bool loader_restore(loader *l, loader_state state, data_err *err) {
    if (state.batch > l->batches_per_epoch)
        return DATA_ERR(err, "a saved loader position inside an epoch", "was the checkpoint made with another B, T or dataset?",
                        "batch %llu of epoch %llu; an epoch here has %llu batches (B=%d, T=%d, %llu windows)",
                        (unsigned long long)state.batch, (unsigned long long)state.epoch,
                        (unsigned long long)l->batches_per_epoch, l->B, l->T, (unsigned long long)l->n_windows);
    l->state = state;
    if (l->order == LOADER_SHUFFLE) shuffle_windows(l);
    return true;
}

void loader_reset(loader *l) { loader_restore(l, (loader_state){0, 0}, NULL); }

void loader_free(loader *l) {
    mem_free(l->inputs);
    mem_free(l->targets);
    mem_free(l->window_order);
    memset(l, 0, sizeof *l);
}
