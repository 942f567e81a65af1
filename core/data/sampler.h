/* sampler.h: the distributed sampler: which dataset samples each data-parallel rank takes in an epoch. */
#ifndef MIXPAR_DATA_SAMPLER_H
#define MIXPAR_DATA_SAMPLER_H

#include "data/data_err.h"

#include <stdbool.h>
#include <stdint.h>

/* The rules are PyTorch's DistributedSampler's (torch/utils/data/distributed.py):
 *
 *   1. order:    the indices 0..N-1, or (shuffle) a permutation of them drawn from a generator seeded
 *                with seed + epoch, so every rank draws the same permutation without talking to the others
 *                and each epoch has its own (call dist_sampler_set_epoch before each epoch, as with torch).
 *   2. size:     every rank takes the same number of samples, num_samples, so no rank waits at the
 *                gradient allreduce for a step the others never take:
 *                    without drop_last: num_samples = ceil(N / world), total = num_samples * world >= N,
 *                                       the list is padded by repeating indices from its start;
 *                    with drop_last:    num_samples = floor(N / world), total = num_samples * world <= N,
 *                                       the tail of the list is dropped.
 *   3. select:   rank r takes positions r, r + world, r + 2*world, ... of the padded or truncated list.
 *
 * So the ranks' sets are disjoint and cover the dataset exactly once when world divides N; otherwise
 * padding makes (total - N) samples appear twice in the epoch, or drop_last leaves (N - total) out.
 *
 * The permutation is mixpar's own (Fisher-Yates on mp_rng, base/rng.h), not bit-identical to torch's
 * randperm on a torch.Generator: the same seed gives the same order on every machine that runs mixpar,
 * not the order PyTorch would give. Every rule other than the generator is the same. */
typedef struct {
    uint64_t n;           /* N: samples in the dataset (windows of a token file, for the loader) */
    int world, rank;      /* data-parallel ranks and this one, 0 <= rank < world */
    bool shuffle, drop_last;
    uint64_t seed, epoch; /* the permutation of an epoch comes from seed + epoch */
    uint64_t num_samples; /* this rank's samples per epoch (the same on every rank) */
    uint64_t total_size;  /* num_samples * world: the length of the padded or truncated list */
} dist_sampler;

/* Usage, as with torch:
 *     dist_sampler s;
 *     dist_sampler_init(&s, n_windows, world, rank, true, seed, false, NULL);
 *     uint64_t *mine = malloc(s.num_samples * sizeof *mine);
 *     for (epoch...) { dist_sampler_set_epoch(&s, epoch); dist_sampler_indices(&s, mine); ... }
 * Fails (N = 0, world < 1, rank outside [0, world)) with *err filled, or exits 2 when err is NULL.
 * With drop_last and N < world every rank gets 0 samples (as with torch); the caller decides if that is an error. */
bool dist_sampler_init(dist_sampler *s, uint64_t n, int world, int rank, bool shuffle, uint64_t seed, bool drop_last,
                       data_err *err);
void dist_sampler_set_epoch(dist_sampler *s, uint64_t epoch);

/* Rule 2: the samples per rank and the list length for N samples on world ranks. */
void dist_sampler_sizes(uint64_t n, int world, bool drop_last, uint64_t *num_samples, uint64_t *total_size);

/* Rule 1: order[0..n) = the epoch's order: the identity, or with shuffle the permutation made by
 *     rng = mp_rng_seed(seed + epoch);  order = 0..n-1;
 *     for i = n-1 down to 1: j = data_rng_below(&rng, i + 1); swap(order[i], order[j])        */
void dist_sampler_order(uint64_t n, bool shuffle, uint64_t seed, uint64_t epoch, uint64_t *order);

/* Rules 2 and 3 on a given order[0..n): out[0..num_samples) = this rank's samples, in the order taken. */
void dist_sampler_select(const dist_sampler *s, const uint64_t *order, uint64_t *out);

/* All three: out[0..num_samples) = this rank's samples of the current epoch. Allocates a scratch order of N. */
void dist_sampler_indices(const dist_sampler *s, uint64_t *out);

#endif
