/* rand.h: unbiased bounded draws from the project rng, shared by the loader's shuffle and the generators. */
#ifndef MIXPAR_DATA_RAND_H
#define MIXPAR_DATA_RAND_H

#include "base/rng.h"

#include <stdint.h>

/* A uniform integer in [0, n), n >= 1. Plain `x % n` would favour small values slightly; draws that fall
 * in the short last interval of 2^64 are rejected instead, so every value is equally likely. */
static inline uint64_t data_rng_below(mp_rng *rng, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = mp_rng_u64(rng);
    while (x >= limit);
    return x % n;
}

#endif
