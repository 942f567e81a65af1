/* test_lab15_hidden.c: lab 15 hidden tests: big datasets, padding that wraps more than once (N < world), the
 * selection following the order it is given, distinct epochs, shuffled coverage on world 1..8, and the
 * length-aware split against the LPT rule on random batches, more ranks than samples, and the measure's edges. */
#include "base/rng.h"
#include "../../../labs/lab15-data-loading/tests/lab15_balance.h"
#include "../../../labs/lab15-data-loading/tests/lab15_util.h"

#include <string.h>

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

/* ---------------------------------------------------------------- D. length-aware sharding */
MPT_TEST(hidden_balance_matches_the_lpt_rule) {
    /* Random batches against the rule written out by selection: owners and totals, position by position. */
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed() ^ 0x15d);
    for (int trial = 0; trial < 200; trial++) {
        size_t g = 1 + (size_t)data_rng_below(&rng, 64);
        int world = 1 + (int)data_rng_below(&rng, 9);
        uint32_t lengths[64];
        int got[64], want[64];
        uint64_t got_t[9], want_t[9];
        for (size_t p = 0; p < g; p++) lengths[p] = (uint32_t)data_rng_below(&rng, trial % 2 ? 8 : 5000); /* many ties */
        balance_assign(lengths, g, world, got, got_t);
        lab15_spec_lpt(lengths, g, world, want, want_t);
        for (size_t p = 0; p < g; p++) MPT_OBSERVE(got[p]);
        for (size_t p = 0; p < g; p++)
            if (got[p] != want[p]) {
                MPT_CHECK(0, "trial %d (g=%zu world=%d): position %zu (%u tokens) expected rank %d, got %d: longest "
                          "first, equal lengths in batch order, each to the first rank with the fewest tokens",
                          trial, g, world, p, lengths[p], want[p], got[p]);
                return;
            }
        for (int r = 0; r < world; r++)
            MPT_CHECK(got_t[r] == want_t[r], "trial %d: rank %d's tokens expected %llu, got %llu", trial, r,
                      (unsigned long long)want_t[r], (unsigned long long)got_t[r]);
    }
}

MPT_TEST(hidden_balance_more_ranks_than_samples) {
    /* 3 samples on 8 ranks: the longest to rank 0, then ranks 1 and 2; five ranks idle with 0 tokens. */
    static const uint32_t lengths[3] = {4, 11, 7};
    int owner[3];
    uint64_t tokens[8];
    memset(tokens, 0xff, sizeof tokens);
    balance_assign(lengths, 3, 8, owner, tokens);
    for (int p = 0; p < 3; p++) MPT_OBSERVE(owner[p]);
    MPT_CHECK(owner[1] == 0 && owner[2] == 1 && owner[0] == 2, "lengths 4 11 7 on 8 ranks: expected owners 2 0 1, got "
              "%d %d %d", owner[0], owner[1], owner[2]);
    for (int r = 3; r < 8; r++)
        MPT_CHECK(tokens[r] == 0, "rank %d gets no sample: its total must be 0 (start every total at 0), got %llu", r,
                  (unsigned long long)tokens[r]);
    memset(tokens, 0xff, sizeof tokens);
    balance_assign(lengths, 0, 4, owner, tokens);
    for (int r = 0; r < 4; r++) MPT_CHECK(tokens[r] == 0, "an empty batch: rank %d's total must be 0", r);
}

MPT_TEST(hidden_imbalance_edges) {
    uint64_t big[3] = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
    double got = balance_imbalance(big, 3);
    MPT_OBSERVE_NEAR(got, 1e-12, 0);
    MPT_CHECK(got > 1 - 1e-12 && got < 1 + 1e-12, "three totals of 2^64 - 1: expected 1, got %.6f (sum in double)", got);
    uint64_t one[6] = {0, 0, 0, 0, 0, 1};
    got = balance_imbalance(one, 6);
    MPT_CHECK(got > 6 - 1e-12 && got < 6 + 1e-12, "0 0 0 0 0 1: expected 6, got %.6f", got);
    uint64_t drawn[5];
    for (int r = 0; r < 5; r++) drawn[r] = mp_hash32(mpt_seed(), (uint64_t)r);
    MPT_OBSERVE_NEAR(balance_imbalance(drawn, 5), 1e-12, 0);
}
