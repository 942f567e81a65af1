/* sampler.c: the distributed sampler: epoch-seeded order, padding or truncation to equal shares, strided selection. */
#include "data/sampler.h"

#include "base/lab.h"
#include "base/mem.h"
#include "base/rng.h"
#include "data/rand.h"

#include <string.h>

bool dist_sampler_init(dist_sampler *s, uint64_t n, int world, int rank, bool shuffle, uint64_t seed, bool drop_last,
                       data_err *err) {
    memset(s, 0, sizeof *s);
    if (n == 0) return DATA_ERR(err, "a dataset of at least one sample", NULL, "N = 0");
    if (world < 1 || rank < 0 || rank >= world)
        return DATA_ERR(err, "world >= 1 and 0 <= rank < world", NULL, "world=%d rank=%d", world, rank);
    s->n = n;
    s->world = world;
    s->rank = rank;
    s->shuffle = shuffle;
    s->drop_last = drop_last;
    s->seed = seed;
    dist_sampler_sizes(n, world, drop_last, &s->num_samples, &s->total_size);
    return true;
}

void dist_sampler_set_epoch(dist_sampler *s, uint64_t epoch) { s->epoch = epoch; }

void dist_sampler_sizes(uint64_t n, int world, bool drop_last, uint64_t *num_samples, uint64_t *total_size) {
    const uint64_t w = (uint64_t)world;
    /* LAB 15 BEGIN equal shares: ceil(N/world) per rank with padding, floor(N/world) with drop_last */
    *num_samples = n / w + (!drop_last && n % w != 0); /* not (n + w - 1) / w: that overflows near 2^64 */
    *total_size = *num_samples * w;
    /* LAB 15 END */
}

void dist_sampler_order(uint64_t n, bool shuffle, uint64_t seed, uint64_t epoch, uint64_t *order) {
    for (uint64_t i = 0; i < n; i++) order[i] = i;
    if (!shuffle) return;
    /* LAB 15 BEGIN epoch shuffle: Fisher-Yates on a generator seeded with seed + epoch */
    /* seed + epoch, as torch does: the same on every rank (no communication), new each epoch. */
    mp_rng rng;
    mp_rng_seed(&rng, seed + epoch);
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = data_rng_below(&rng, i + 1);
        uint64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    /* LAB 15 END */
}

void dist_sampler_select(const dist_sampler *s, const uint64_t *order, uint64_t *out) {
    const uint64_t n = s->n, world = (uint64_t)s->world, rank = (uint64_t)s->rank;
    /* LAB 15 BEGIN rank selection: positions rank, rank+world, ... of the padded or truncated list */
    /* The list is order[0..n) extended to total_size by repeating from its start (padding), or cut to
     * total_size (drop_last). Position p of that list is order[p % n] either way: with drop_last every
     * p < total_size <= n. This rank takes every world-th position, starting at its own. */
    for (uint64_t i = 0; i < s->num_samples; i++) {
        uint64_t p = rank + i * world;
        out[i] = order[p % n];
    }
    /* LAB 15 END */
}

void dist_sampler_indices(const dist_sampler *s, uint64_t *out) {
    uint64_t *order = mem_alloc(s->n * sizeof *order, MEM_OTHER, "sampler order");
    dist_sampler_order(s->n, s->shuffle, s->seed, s->epoch, order);
    dist_sampler_select(s, order, out);
    mem_free(order);
}
