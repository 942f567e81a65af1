/* rng.c: xoshiro256** with splitmix64 seeding, uniform and normal draws. */
#include "base/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void mp_rng_seed(mp_rng *rng, uint64_t seed) {
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t mp_rng_u64(mp_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint32_t mp_rng_u32(mp_rng *rng) { return (uint32_t)(mp_rng_u64(rng) >> 32); }

float mp_rng_uniform(mp_rng *rng) { return (float)(mp_rng_u64(rng) >> 40) * (1.0f / 16777216.0f); }

float mp_rng_normal(mp_rng *rng) {
    /* Box-Muller on (0,1] so log never sees 0. */
    double u1 = ((double)(mp_rng_u64(rng) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(mp_rng_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}
