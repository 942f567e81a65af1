/* loader.h: the train/validation split and a batch loader of (inputs, targets), B x T, from a token file. */
#ifndef MIXPAR_DATA_LOADER_H
#define MIXPAR_DATA_LOADER_H

#include "data/data_err.h"
#include "data/tokens.h"

#include <stdbool.h>
#include <stdint.h>

/* ---------------------------------------------------------------- split */

/* The last val_fraction of N tokens is held out for validation, the rest trains:
 *     n_val = floor(N * val_fraction),  n_train = N - n_val;  train = [0, n_train), val = [n_train, N).
 * val_fraction must be in [0, 1). Deterministic: no randomness, so every tool agrees on the split. */
typedef struct {
    uint64_t n_train, n_val;
} data_split;

bool data_split_tokens(uint64_t n_tokens, double val_fraction, data_split *out, data_err *err);

/* ---------------------------------------------------------------- loader */

/* The token range [begin, end) is cut into windows of T + 1 tokens that overlap by one:
 *     window k = tokens [begin + k*T, begin + k*T + T + 1),   k = 0 .. W-1,   W = (end - begin - 1) / T
 * A window gives one row of a batch: inputs = its first T tokens, targets = its last T (the next token
 * of each input). A batch is B windows; an epoch takes them in an order and stops when fewer than B
 * are left (the last partial batch is dropped), so there are W / B batches per epoch.
 *   LOADER_SEQUENTIAL: windows in file order: batch c holds windows c*B .. c*B+B-1, i.e. the B*T+1
 *                      tokens from begin + c*B*T, as llm.c's loader reads them.
 *   LOADER_SHUFFLE:    each epoch e takes the windows in a random order drawn from the seed and e
 *                      (Fisher-Yates on an rng seeded by both), so the order differs per epoch but is
 *                      the same on every run and after a restore. */
typedef enum { LOADER_SEQUENTIAL, LOADER_SHUFFLE } loader_order;

/* Where the loader is; all it needs to resume bit-identically (store it in a checkpoint). */
typedef struct {
    uint64_t epoch;  /* epochs completed */
    uint64_t batch;  /* batches taken in the current epoch, < batches_per_epoch */
} loader_state;

typedef struct {
    const tokfile *file;
    uint64_t begin, end;        /* the token range read */
    int B, T;                   /* batch size, sequence length */
    loader_order order;
    uint64_t seed;
    uint64_t n_windows;         /* W */
    uint64_t batches_per_epoch; /* W / B */
    uint64_t *window_order;     /* (W) shuffle: the window of each slot this epoch; NULL for sequential */
    loader_state state;
    int32_t *inputs;            /* (B, T) token ids of the last batch */
    int32_t *targets;           /* (B, T) inputs shifted by one: targets[b][t] = the token after inputs[b][t] */
} loader;

/* Usage:
 *     loader l;
 *     loader_init(&l, file, split.n_train, file->token_count, B, T, LOADER_SHUFFLE, seed, NULL);
 *     for (step...) { loader_next(&l); forward(l.inputs, l.targets); }
 *     loader_state s = l.state;            // saved with the checkpoint ...
 *     loader_restore(&l, s, NULL);         // ... and the next batch is the one that would have come
 * Fails (range too short for one batch of B windows, bad B or T) with *err filled, or exits 2 when
 * err is NULL. The buffers are allocated under MEM_OTHER. */
bool loader_init(loader *l, const tokfile *file, uint64_t begin, uint64_t end, int B, int T, loader_order order,
                 uint64_t seed, data_err *err);
/* Fills inputs and targets with the next batch, moving to the next epoch when this one is used up. */
void loader_next(loader *l);
/* Continues from a saved state: the next loader_next gives the batch that followed when it was saved. */
bool loader_restore(loader *l, loader_state state, data_err *err);
/* Back to the first batch of epoch 0. */
void loader_reset(loader *l);
void loader_free(loader *l);

const char *loader_order_name(loader_order order); /* "sequential", "shuffle" */

#endif
