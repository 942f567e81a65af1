/* test_lab15_hidden.c: lab 15 hidden tests: big datasets, padding that wraps more than once (N < world), the
 * selection following the order it is given, distinct epochs, and shuffled coverage on world 1..8. */
#include "base/rng.h"
#include "../../../labs/lab15-data-loading/tests/lab15_util.h"

MPT_TEST(hidden_shares_large_datasets) {
    /* 2^40 + 5 samples on 8 ranks: the arithmetic must be 64-bit; ceil must not overflow near 2^64 either. */
    uint64_t per, total, n = (1ULL << 40) + 5;
    dist_sampler_sizes(n, 8, false, &per, &total);
    MPT_CHECK_EQ_U64((1ULL << 37) + 1, per, "N = 2^40 + 5, world 8, padded: ceil(N/8) = 2^37 + 1");
    dist_sampler_sizes(n, 8, true, &per, &total);
    MPT_CHECK_EQ_U64(1ULL << 37, per, "N = 2^40 + 5, world 8, drop_last: floor(N/8) = 2^37");
    n = UINT64_MAX - 2; /* 2^64 - 3 = 3 * 6148914691236517204 + 1 */
    dist_sampler_sizes(n, 3, false, &per, &total);
    MPT_CHECK_EQ_U64(6148914691236517205ULL, per, "N = 2^64 - 3, world 3: ceil(N/3) = 6148914691236517205");
    n = UINT64_MAX - 3; /* 2^64 - 4 = 5 * 3689348814741910322 + 2: N + 4 wraps */
    dist_sampler_sizes(n, 5, false, &per, &total);
    MPT_CHECK_EQ_U64(3689348814741910323ULL, per,
                     "N = 2^64 - 4, world 5: ceil(N/5) = 3689348814741910323; (N + world - 1) / world overflows "
                     "here, N / world + (N % world != 0) does not");
}

MPT_TEST(hidden_select_padding_wraps_more_than_once) {
    /* N=2 on world=5: the list 0,1 is padded to 0,1,0,1,0 (cycling as many times as needed). */
    uint64_t *got;
    uint64_t per = lab15_all_ranks(2, 5, false, false, 0, 0, &got);
    MPT_REQUIRE(per == 1, "N=2 world=5: 1 sample per rank, got %llu", (unsigned long long)per);
    static const uint64_t want[5] = {0, 1, 0, 1, 0};
    for (int r = 0; r < 5; r++)
        MPT_CHECK(got[r] == want[r], "N=2 world=5: rank %d: expected %llu, got %llu (padding repeats the list from "
                  "its start as often as needed: position p is order[p %% N])",
                  r, (unsigned long long)want[r], (unsigned long long)got[r]);
    free(got);
}

MPT_TEST(hidden_select_follows_the_given_order) {
    /* dist_sampler_select on an arbitrary order: positions of that order, not indices 0..N-1. */
    uint64_t order[7] = {60, 50, 40, 30, 20, 10, 0};
    dist_sampler s;
    MPT_REQUIRE(dist_sampler_init(&s, 7, 3, 2, false, 0, false, NULL), "init");
    uint64_t out[3] = {0};
    dist_sampler_select(&s, order, out);
    for (int i = 0; i < 3; i++) MPT_OBSERVE(out[i]);
    /* padded order: 60 50 40 30 20 10 0 60 50; rank 2 takes positions 2, 5, 8. */
    static const uint64_t want[3] = {40, 10, 50};
    for (int i = 0; i < 3; i++)
        MPT_CHECK(out[i] == want[i], "N=7 world=3 rank 2, order 60,50,...,0: sample %d expected %llu, got %llu "
                  "(take order[position], not the position itself)",
                  i, (unsigned long long)want[i], (unsigned long long)out[i]);
    MPT_REQUIRE(dist_sampler_init(&s, 7, 3, 0, false, 0, true, NULL), "init");
    dist_sampler_select(&s, order, out);
    MPT_OBSERVE(out[0] << 32 | out[1]);
    {   /* an order drawn from this grade's seed */
        uint64_t drawn[11], picked[4] = {0};
        for (int i = 0; i < 11; i++) drawn[i] = mp_hash32(mpt_seed(), (uint64_t)i);
        dist_sampler d;
        MPT_REQUIRE(dist_sampler_init(&d, 11, 4, 3, false, 0, false, NULL), "init");
        dist_sampler_select(&d, drawn, picked);
        for (int i = 0; i < 3; i++) MPT_OBSERVE(picked[i]);
    }
    MPT_CHECK(out[0] == 60 && out[1] == 30, "drop_last rank 0: expected 60, 30; got %llu, %llu",
              (unsigned long long)out[0], (unsigned long long)out[1]);
}

MPT_TEST(hidden_shuffle_epochs_differ) {
    enum { N = 1000 };
    uint64_t *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *want = malloc(N * sizeof *want);
    dist_sampler_order(N, true, 5, 0, a);
    dist_sampler_order(N, true, 5, 1, b);
    for (int i = 0; i < N; i++) MPT_OBSERVE(a[i] << 32 | b[i]);
    dist_sampler_order(N, true, mpt_seed(), 2, want); /* a seed drawn for this grade */
    for (int i = 0; i < N; i++) MPT_OBSERVE(want[i]);
    int same = 0;
    for (int i = 0; i < N; i++) same += a[i] == b[i];
    MPT_CHECK(same < N / 10, "epochs 0 and 1 agree on %d of %d positions: set_epoch must change the order", same, N);
    lab15_spec_shuffle(N, 5, 1, want);
    int wrong = 0;
    for (int i = 0; i < N; i++) wrong += b[i] != want[i];
    MPT_CHECK(wrong == 0, "seed 5 epoch 1: %d of %d positions differ from Fisher-Yates on mp_rng(seed + epoch)",
              wrong, N);
    dist_sampler_order(N, false, 5, 1, a);
    int moved = 0;
    for (int i = 0; i < N; i++) moved += a[i] != (uint64_t)i;
    MPT_CHECK(moved == 0, "shuffle off: the identity order (%d positions moved)", moved);
    free(a);
    free(b);
    free(want);
}

MPT_TEST(hidden_coverage_shuffled_world_1_to_8) {
    for (int world = 1; world <= 8; world++)
        for (uint64_t n = (uint64_t)world; n <= 41; n += 3) {
            lab15_check_coverage(n, world, true, false, 11, n);
            lab15_check_coverage(n, world, true, true, 11, n);
        }
}
