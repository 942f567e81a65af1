/* lab15_util.h: helpers the lab 15 tests share: every rank's samples of an epoch, and the spec's shuffle. */
#ifndef MIXPAR_LAB15_UTIL_H
#define MIXPAR_LAB15_UTIL_H

#include "data/rand.h"
#include "data/sampler.h"
#include "mptest.h"

#include <stdio.h>
#include <stdlib.h>

/* Every rank's samples of one epoch, rank-major: (*out)[r * num_samples + i]. Returns num_samples, which
 * must be the same on every rank. The caller frees *out. */
static inline uint64_t lab15_all_ranks(uint64_t n, int world, bool shuffle, bool drop_last, uint64_t seed,
                                       uint64_t epoch, uint64_t **out) {
    uint64_t per = 0;
    *out = NULL;
    for (int r = 0; r < world; r++) {
        dist_sampler s;
        MPT_REQUIRE(dist_sampler_init(&s, n, world, r, shuffle, seed, drop_last, NULL), "dist_sampler_init");
        if (r == 0) {
            per = s.num_samples;
            *out = calloc((size_t)(per * (uint64_t)world + 1), sizeof(uint64_t));
        }
        MPT_REQUIRE(s.num_samples == per, "N=%llu world=%d: rank %d has %llu samples, rank 0 has %llu; every rank "
                    "must take the same number (num_samples comes from N and world only)",
                    (unsigned long long)n, world, r, (unsigned long long)s.num_samples, (unsigned long long)per);
        dist_sampler_set_epoch(&s, epoch);
        dist_sampler_indices(&s, *out + (size_t)r * per);
    }
    /* what the grader compares with the reference: every index, and a shuffle drawn from this grade's seed */
    for (uint64_t i = 0; i < per * (uint64_t)world; i++) MPT_OBSERVE((*out)[i]);
    dist_sampler d;
    uint64_t dn = 5 + mpt_seed() % 200;
    int dworld = 1 + (int)((mpt_seed() >> 20) % 5);
    if (dist_sampler_init(&d, dn, dworld, dworld - 1, true, mpt_seed(), (mpt_seed() >> 30) & 1, NULL)) {
        uint64_t *drawn = calloc((size_t)d.num_samples + 1, sizeof *drawn);
        dist_sampler_set_epoch(&d, mpt_seed() >> 40 & 7);
        dist_sampler_indices(&d, drawn);
        for (uint64_t i = 0; i < d.num_samples; i++) MPT_OBSERVE(drawn[i]);
        free(drawn);
    }
    return per;
}

/* The permutation sampler.h documents, written out independently: Fisher-Yates from the top on an mp_rng
 * seeded with seed + epoch, drawing j in [0, i] with data_rng_below. */
static inline void lab15_spec_shuffle(uint64_t n, uint64_t seed, uint64_t epoch, uint64_t *order) {
    for (uint64_t i = 0; i < n; i++) order[i] = i;
    mp_rng rng;
    mp_rng_seed(&rng, seed + epoch);
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = data_rng_below(&rng, i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* Checks the coverage rules for one (N, world, mode): every index in range; without drop_last each index
 * appears, total - N of them once more (N >= world); with drop_last N mod world are left out, none twice. */
static inline void lab15_check_coverage(uint64_t n, int world, bool shuffle, bool drop_last, uint64_t seed,
                                        uint64_t epoch) {
    uint64_t *got;
    uint64_t per = lab15_all_ranks(n, world, shuffle, drop_last, seed, epoch, &got);
    uint64_t w = (uint64_t)world, total = per * w;
    uint64_t want_per = drop_last ? n / w : (n + w - 1) / w;
    MPT_CHECK_EQ_U64(want_per, per, drop_last ? "samples per rank with drop_last: floor(N / world)"
                                              : "samples per rank with padding: ceil(N / world)");
    unsigned *count = calloc(n, sizeof *count);
    for (uint64_t i = 0; i < total; i++) {
        if (got[i] >= n) {
            MPT_CHECK(0, "N=%llu world=%d: rank %llu sample %llu is %llu, outside 0..N-1", (unsigned long long)n, world,
                      (unsigned long long)(i / per), (unsigned long long)(i % per), (unsigned long long)got[i]);
            break;
        }
        count[got[i]]++;
    }
    uint64_t missing = 0, extra = 0;
    for (uint64_t i = 0; i < n; i++) {
        missing += count[i] == 0;
        extra += count[i] > 1 ? count[i] - 1 : 0;
    }
    char what[200];
    snprintf(what, sizeof what, "N=%llu world=%d %s%s: indices nobody takes", (unsigned long long)n, world,
             shuffle ? "shuffled " : "", drop_last ? "drop_last" : "padded");
    MPT_CHECK_EQ_U64(drop_last ? n - total : 0, missing, what);
    snprintf(what, sizeof what, "N=%llu world=%d %s%s: repeated samples (padding takes total - N again)",
             (unsigned long long)n, world, shuffle ? "shuffled " : "", drop_last ? "drop_last" : "padded");
    MPT_CHECK_EQ_U64(drop_last ? 0 : total - n, extra, what);
    free(count);
    free(got);
}

#endif
