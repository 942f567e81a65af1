/* train_data.h: the trainer's training batches: this rank's rows by the global or the distributed sampler. */
#ifndef MIXPAR_TRAIN_TRAIN_DATA_H
#define MIXPAR_TRAIN_TRAIN_DATA_H

#include "comm/comm.h"
#include "data/loader.h"
#include "data/tokens.h"
#include "train/config.h"

#include <stdint.h>

/* cfg->data.sampler says which rows of the training tokens each rank takes (train/config.h):
 *   global:      batch s of the run is batch s of a loader over B x world windows (data/loader.h); rank r
 *                keeps rows r*B .. r*B+B-1. Needs nothing from lab 15, so the early labs train with it.
 *   distributed: a prefetching loader (data/prefetch.h) over this rank's share of a DistributedSampler
 *                (data/sampler.h): seed + epoch shuffle, padding or drop_last, data.workers threads ahead.
 * Both count batches the same way for checkpoints: (epoch, batch within the epoch) of this run's loader. */
typedef struct train_data train_data;

/* Opens the batches of tokens [0, file->token_count) for this rank, B rows of T tokens each, and checks
 * with the other ranks (comm may be NULL on one rank) that every rank has the same amount of data: with
 * less, a rank would run out of data early and the others would wait for it in the gradient allreduce,
 * so a difference stops every rank with exit 2 and the ranks' figures. Bad sizes also exit 2. */
train_data *train_data_open(const train_config *cfg, const tokfile *file, int B, int T, comm_t *comm);
/* Copies this rank's next batch into inputs and targets, (B, T) each. */
void train_data_next(train_data *d, int32_t *inputs, int32_t *targets);
/* Where the data stand: the next batch is batch `batch` of epoch `epoch`. */
loader_state train_data_position(const train_data *d);
/* Continues from a saved position (of this run or of one on another world size: a batch past this run's
 * epoch starts the next epoch). */
void train_data_restore(train_data *d, loader_state position);
uint64_t train_data_batches_per_epoch(const train_data *d);
/* One line for the run header: "global, 169 batches an epoch of 64 rows (32 a rank), shuffle" and the like. */
void train_data_describe(const train_data *d, char *out, int out_len);
void train_data_free(train_data *d); /* NULL is fine */

#endif
