/* rng.h: seeded random numbers: a sequential generator and a counter-based hash for stochastic rounding. */
#ifndef MIXPAR_BASE_RNG_H
#define MIXPAR_BASE_RNG_H

#include <stdint.h>

/* xoshiro256** seeded through splitmix64: fast, 2^256 period, and the same stream on every machine. */
typedef struct {
    uint64_t s[4];
} mp_rng;

void mp_rng_seed(mp_rng *rng, uint64_t seed);
uint64_t mp_rng_u64(mp_rng *rng);
uint32_t mp_rng_u32(mp_rng *rng);
float mp_rng_uniform(mp_rng *rng);          /* [0, 1), 24 random bits */
float mp_rng_normal(mp_rng *rng);           /* standard normal (Box-Muller) */

/* A stateless hash of (seed, index) to 32 random bits. Stochastic rounding uses it so element i of a
 * tensor gets the same random bits whatever the thread count or SIMD width: runs stay reproducible. */
static inline uint32_t mp_hash32(uint64_t seed, uint64_t index) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (uint32_t)(z >> 32);
}

#endif
