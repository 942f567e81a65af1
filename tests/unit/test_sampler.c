/* test_sampler.c: Criterion tests of the distributed sampler: counts, coverage, padding, drop_last, epochs. */
#include "data/rand.h"
#include "data/sampler.h"

#include <criterion/criterion.h>
#include <stdlib.h>

/* Every rank's samples of one epoch, rank-major: out[r * num_samples + i]. Returns num_samples. */
static uint64_t all_ranks(uint64_t n, int world, bool shuffle, bool drop_last, uint64_t seed, uint64_t epoch,
                          uint64_t **out) {
    dist_sampler s;
    cr_assert(dist_sampler_init(&s, n, world, 0, shuffle, seed, drop_last, NULL));
    uint64_t per = s.num_samples;
    *out = calloc((size_t)(per * (uint64_t)world + 1), sizeof(uint64_t));
    for (int r = 0; r < world; r++) {
        dist_sampler rs;
        cr_assert(dist_sampler_init(&rs, n, world, r, shuffle, seed, drop_last, NULL));
        cr_assert_eq(rs.num_samples, per, "every rank takes the same number of samples");
        dist_sampler_set_epoch(&rs, epoch);
        dist_sampler_indices(&rs, *out + (size_t)r * per);
    }
    return per;
}

Test(sampler, counts_padding_and_drop_last) {
    for (int world = 1; world <= 8; world++)
        for (uint64_t n = 1; n <= 40; n++) {
            uint64_t per, total;
            dist_sampler_sizes(n, world, false, &per, &total);
            cr_assert_eq(per, (n + (uint64_t)world - 1) / (uint64_t)world, "N=%llu world=%d: ceil", (unsigned long long)n, world);
            cr_assert_eq(total, per * (uint64_t)world);
            cr_assert(total >= n && total - n < (uint64_t)world, "padding adds fewer than world samples");
            dist_sampler_sizes(n, world, true, &per, &total);
            cr_assert_eq(per, n / (uint64_t)world, "N=%llu world=%d: floor", (unsigned long long)n, world);
            cr_assert(total <= n && n - total < (uint64_t)world, "drop_last drops fewer than world samples");
        }
    uint64_t per, total;
    dist_sampler_sizes(10, 3, false, &per, &total);
    cr_assert(per == 4 && total == 12);
    dist_sampler_sizes(10, 3, true, &per, &total);
    cr_assert(per == 3 && total == 9);
}

/* Over world 1..8 and N divisible or not, shuffled or not: how often each index appears in the epoch. */
Test(sampler, coverage_disjoint_and_complete) {
    for (int world = 1; world <= 8; world++)
        for (uint64_t n = 1; n <= 27; n++)
            for (int mode = 0; mode < 4; mode++) {
                bool shuffle = mode & 1, drop_last = mode & 2;
                uint64_t *got;
                uint64_t per = all_ranks(n, world, shuffle, drop_last, 7, 3, &got);
                int *count = calloc(n, sizeof(int));
                for (uint64_t i = 0; i < per * (uint64_t)world; i++) {
                    cr_assert_lt(got[i], n, "an index outside 0..N-1");
                    count[got[i]]++;
                }
                uint64_t twice = 0, missing = 0; /* twice: repeats beyond the first */
                for (uint64_t i = 0; i < n; i++) {
                    /* Padding cycles through the list: with N >= world an index comes back at most once. */
                    if (n >= (uint64_t)world) cr_assert_leq(count[i], 2, "an index taken more than twice");
                    twice += count[i] > 1 ? (uint64_t)count[i] - 1 : 0;
                    missing += count[i] == 0;
                }
                if (n % (uint64_t)world == 0) {
                    cr_assert(twice == 0 && missing == 0, "world=%d N=%llu divisible: each index exactly once", world,
                              (unsigned long long)n);
                } else if (drop_last) {
                    cr_assert(twice == 0 && missing == n % (uint64_t)world, "drop_last: N mod world left out");
                } else {
                    cr_assert_eq(twice, per * (uint64_t)world - n, "padding: total - N repeated");
                    cr_assert_eq(missing, 0);
                }
                free(count);
                free(got);
            }
}

Test(sampler, torch_rules_unshuffled) {
    /* N=10, world=3, no shuffle. Padded list 0..9,0,1: rank r takes r, r+3, r+6, r+9. */
    uint64_t *got;
    uint64_t per = all_ranks(10, 3, false, false, 0, 0, &got);
    const uint64_t padded[3][4] = {{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
    cr_assert_eq(per, 4);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 4; i++) cr_assert_eq(got[r * 4 + i], padded[r][i], "rank %d sample %d", r, i);
    free(got);
    per = all_ranks(10, 3, false, true, 0, 0, &got);
    const uint64_t dropped[3][3] = {{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
    cr_assert_eq(per, 3);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 3; i++) cr_assert_eq(got[r * 3 + i], dropped[r][i], "rank %d sample %d", r, i);
    free(got);
}

Test(sampler, set_epoch_changes_order_same_epoch_same_order) {
    uint64_t *a, *b, *c;
    uint64_t per = all_ranks(100, 4, true, false, 1234, 5, &a);
    all_ranks(100, 4, true, false, 1234, 5, &b);
    all_ranks(100, 4, true, false, 1234, 6, &c);
    uint64_t same_ab = 0, same_ac = 0;
    for (uint64_t i = 0; i < per * 4; i++) {
        same_ab += a[i] == b[i];
        same_ac += a[i] == c[i];
    }
    cr_assert_eq(same_ab, per * 4, "the same seed and epoch give the same order");
    cr_assert_lt(same_ac, per * 4 / 4, "another epoch gives another order (%llu of %llu positions agree)",
                 (unsigned long long)same_ac, (unsigned long long)(per * 4));
    free(a);
    free(b);
    free(c);
}

Test(sampler, permutation_is_documented_fisher_yates_on_seed_plus_epoch) {
    const uint64_t n = 50, seed = 42, epoch = 3;
    uint64_t order[50], want[50];
    dist_sampler_order(n, true, seed, epoch, order);
    for (uint64_t i = 0; i < n; i++) want[i] = i;
    mp_rng rng;
    mp_rng_seed(&rng, seed + epoch);
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = data_rng_below(&rng, i + 1), t = want[i];
        want[i] = want[j];
        want[j] = t;
    }
    for (uint64_t i = 0; i < n; i++) cr_assert_eq(order[i], want[i], "position %llu", (unsigned long long)i);
    /* seed 41 at epoch 4 is the same generator seed: the same order, as torch's seed + epoch gives. */
    dist_sampler_order(n, true, seed - 1, epoch + 1, want);
    for (uint64_t i = 0; i < n; i++) cr_assert_eq(order[i], want[i]);
    dist_sampler_order(n, false, seed, epoch, order);
    for (uint64_t i = 0; i < n; i++) cr_assert_eq(order[i], i, "no shuffle: the identity");
}

Test(sampler, rejects_bad_arguments) {
    dist_sampler s;
    data_err err;
    cr_assert_not(dist_sampler_init(&s, 0, 1, 0, false, 0, false, &err));
    cr_assert_not(dist_sampler_init(&s, 10, 0, 0, false, 0, false, &err));
    cr_assert_not(dist_sampler_init(&s, 10, 3, 3, false, 0, false, &err));
    cr_assert_not(dist_sampler_init(&s, 10, 3, -1, false, 0, false, &err));
    cr_assert(dist_sampler_init(&s, 2, 3, 2, false, 0, true, &err));
    cr_assert_eq(s.num_samples, 0, "drop_last with N < world: nothing per rank, as with torch");
}
