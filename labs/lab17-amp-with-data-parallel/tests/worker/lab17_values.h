/* lab17_values.h: the 16-bit values each rank averages in lab 17's hook test, made the same way by the worker
 * (which averages them) and by the test (which works out what the average must be). */
#ifndef LAB17_VALUES_H
#define LAB17_VALUES_H

#include "base/rng.h"
#include "dist/amp_reduce.h"

#include <math.h>

/* Rank `rank`'s n values in dt: scaled gradients, normal values times 2^e for e in [-8, 12], and every 16th one
 * between 20000 and 60000, so that some sums over three ranks pass fp16's 65504 while their averages do not. */
static inline void lab17_worker_values(uint16_t *dst, size_t n, comm_dtype dt, uint64_t seed, int rank) {
    mp_rng rng;
    mp_rng_seed(&rng, seed * 31u + (uint64_t)rank);
    for (size_t i = 0; i < n; i++) {
        float v = i % 16 == 5 ? 20000.0f + 40000.0f * mp_rng_uniform(&rng)
                              : ldexpf(mp_rng_normal(&rng), -8 + (int)(mp_rng_u32(&rng) % 21u));
        amp_reduce_narrow16(dst + i, &v, 1, dt);
    }
}

#endif
