/* lab15_balance.h: helpers the part D tests share: the LPT rule written out independently, and long-tailed lengths. */
#ifndef MIXPAR_LAB15_BALANCE_H
#define MIXPAR_LAB15_BALANCE_H

#include "base/rng.h"
#include "data/balance.h"
#include "data/rand.h"
#include "mptest.h"

#include <stdlib.h>

/* The rule balance.h documents, by selection instead of sorting: repeatedly take the longest sample not yet
 * placed (the first such position on ties) and give it to the first rank with the fewest tokens. O(g^2). */
static inline void lab15_spec_lpt(const uint32_t *lengths, size_t g, int world, int *owner, uint64_t *tokens) {
    char *placed = calloc(g + 1, 1);
    for (int r = 0; r < world; r++) tokens[r] = 0;
    for (size_t k = 0; k < g; k++) {
        size_t best = g;
        for (size_t p = 0; p < g; p++)
            if (!placed[p] && (best == g || lengths[p] > lengths[best])) best = p;
        int least = 0;
        for (int r = 1; r < world; r++)
            if (tokens[r] < tokens[least]) least = r;
        placed[best] = 1;
        owner[best] = least;
        tokens[least] += lengths[best];
    }
    free(placed);
}

/* Long-tailed lengths, like the poetry corpus's poems: most short (12-40 tokens), some medium (60-150), a
 * few long (200-300). The same for a given seed on every machine. */
static inline void lab15_long_tailed(uint32_t *lengths, size_t n, uint64_t seed) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) {
        uint64_t kind = data_rng_below(&rng, 100);
        lengths[i] = kind < 80   ? 12 + (uint32_t)data_rng_below(&rng, 29)
                     : kind < 96 ? 60 + (uint32_t)data_rng_below(&rng, 91)
                                 : 200 + (uint32_t)data_rng_below(&rng, 101);
    }
}

/* Checks balance_assign's outputs for one batch against what its owners imply: every position has a rank in
 * [0, world), and tokens[r] is the sum of the lengths owner gives rank r. Returns false (after MPT_CHECK) if not. */
static inline bool lab15_check_partition(const uint32_t *lengths, size_t g, int world, const int *owner,
                                         const uint64_t *tokens, const char *what) {
    uint64_t *sum = calloc((size_t)world + 1, sizeof *sum);
    bool ok = true;
    for (size_t p = 0; p < g && ok; p++) {
        if (owner[p] < 0 || owner[p] >= world) {
            MPT_CHECK(0, "%s: position %zu has owner %d, expected a rank in [0, %d): every sample goes to exactly one "
                      "rank (write owner[p] for the sample's position p in the batch, not for its place in the "
                      "longest-first order)", what, p, owner[p], world);
            ok = false;
            break;
        }
        sum[owner[p]] += lengths[p];
    }
    for (int r = 0; r < world && ok; r++)
        if (sum[r] != tokens[r]) {
            MPT_CHECK(0, "%s: rank %d: tokens[%d] = %llu, but the samples owner gives it hold %llu tokens (start every "
                      "total at 0 and add the sample's length, not 1)", what, r, r, (unsigned long long)tokens[r],
                      (unsigned long long)sum[r]);
            ok = false;
        }
    free(sum);
    return ok;
}

#endif
