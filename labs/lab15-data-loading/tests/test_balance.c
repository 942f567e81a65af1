/* test_balance.c: lab 15 visible tests, part D: length-aware sharding (longest first to the least-loaded rank) and
 * the max/mean imbalance measure (core/data/balance.c). */
#include "lab15_balance.h"
#include "lab15_util.h"

#include <string.h>

/* ---------------------------------------------------------------- D. length-aware sharding */

MPT_TEST(balance_lpt_handout_example) {
    /* The handout's batch: 8 samples on 3 ranks. Longest first: 9 (pos 1), 9 (pos 3), 7, 5, 4, 3, 2, 1. */
    static const uint32_t lengths[8] = {5, 9, 2, 9, 4, 7, 1, 3};
    static const int want[8] = {2, 0, 1, 1, 0, 2, 2, 1};
    static const uint64_t want_tokens[3] = {13, 14, 13};
    int owner[8];
    uint64_t tokens[3] = {99, 99, 99};
    memset(owner, 0xff, sizeof owner);
    balance_assign(lengths, 8, 3, owner, tokens);
    for (int p = 0; p < 8; p++) MPT_OBSERVE(owner[p]);
    for (int p = 0; p < 8; p++)
        MPT_CHECK(owner[p] == want[p],
                  "lengths 5 9 2 9 4 7 1 3 on 3 ranks: the sample at position %d (%u tokens)\n"
                  "      expected: rank %d\n      got:      rank %d\n"
                  "      likely mistake: take the samples longest first (balance_longest_first; equal lengths keep "
                  "their batch order), give each to the rank with the FEWEST tokens so far, the lowest rank on a tie, "
                  "and record owner[position in the batch]", p, lengths[p], want[p], owner[p]);
    for (int r = 0; r < 3; r++)
        MPT_CHECK(tokens[r] == want_tokens[r], "rank %d's total: expected %llu tokens, got %llu (tokens[r] starts at 0 "
                  "and grows by each sample's length)", r, (unsigned long long)want_tokens[r],
                  (unsigned long long)tokens[r]);
}

MPT_TEST(balance_every_sample_once_per_epoch) {
    /* Whole epochs of random lengths: every position of the order goes to one rank, and each global batch's
     * totals are its owners' sums. Bad input is refused with a message, not a crash. */
    mp_rng rng;
    mp_rng_seed(&rng, 15 ^ mpt_seed());
    for (int world = 1; world <= 8; world++) {
        uint64_t n = 20 + data_rng_below(&rng, 80), batch = 1 + data_rng_below(&rng, 24);
        uint32_t *lengths = malloc(n * sizeof *lengths);
        uint64_t *order = malloc(n * sizeof *order), tokens[8];
        int *owner = malloc(n * sizeof *owner);
        for (uint64_t i = 0; i < n; i++) lengths[i] = 1 + (uint32_t)data_rng_below(&rng, 300);
        lab15_spec_shuffle(n, 3, (uint64_t)world, order);
        for (uint64_t i = 0; i < n; i++) owner[i] = -1;
        MPT_REQUIRE(balance_epoch(lengths, order, n, world, batch, true, owner, NULL), "balance_epoch");
        for (uint64_t first = 0; first < n; first += batch) {
            size_t g = (size_t)(n - first < batch ? n - first : batch);
            uint32_t batch_len[24];
            for (size_t p = 0; p < g; p++) batch_len[p] = lengths[order[first + p]];
            char what[120];
            snprintf(what, sizeof what, "N=%llu world=%d global batch %llu, step %llu", (unsigned long long)n, world,
                     (unsigned long long)batch, (unsigned long long)(first / batch));
            int again[24];
            balance_assign(batch_len, g, world, again, tokens);
            if (!lab15_check_partition(batch_len, g, world, again, tokens, what)) break;
            MPT_CHECK(memcmp(again, owner + first, g * sizeof *again) == 0,
                      "%s: balance_epoch and balance_assign on the same batch disagree", what);
        }
        free(lengths);
        free(order);
        free(owner);
    }
    static const uint32_t len[3] = {4, 5, 6};
    static const uint64_t bad_order[3] = {0, 3, 1};
    int own[3];
    data_err err;
    MPT_CHECK(!balance_epoch(len, bad_order, 3, 2, 2, true, own, &err) && strstr(err.found, "order[1] = 3"),
              "an order entry >= N must be refused with a message naming it");
    MPT_CHECK(!balance_epoch(len, bad_order, 3, 0, 2, true, own, &err), "world = 0 must be refused");
    MPT_CHECK(!balance_epoch(len, bad_order, 3, 2, 0, true, own, &err), "a global batch of 0 must be refused");
}

MPT_TEST(balance_is_deterministic_ties_by_position) {
    /* Equal lengths: every choice is a tie, so the rule alone decides: positions in batch order, each to the
     * lowest of the least-loaded ranks. That is the strided split. */
    uint32_t same[7] = {10, 10, 10, 10, 10, 10, 10};
    int owner[7];
    uint64_t tokens[3];
    balance_assign(same, 7, 3, owner, tokens);
    for (int p = 0; p < 7; p++) {
        MPT_OBSERVE(owner[p]);
        MPT_CHECK(owner[p] == p % 3, "7 samples of 10 tokens on 3 ranks: position %d expected rank %d, got %d (equal "
                  "lengths keep their batch order, and a tie between ranks goes to the lowest rank: use <, not <=)",
                  p, p % 3, owner[p]);
    }
    /* The same input gives the same split, call after call: every rank computes it alone. */
    uint32_t lengths[40];
    lab15_long_tailed(lengths, 40, mpt_seed());
    int first[40], second[40];
    uint64_t t4[4];
    balance_assign(lengths, 40, 4, first, t4);
    balance_assign(lengths, 40, 4, second, t4);
    MPT_CHECK(memcmp(first, second, sizeof first) == 0, "two calls on the same batch gave different owners");
    /* Two samples of the same length swapped in the batch: their owners swap with them, nothing else changes. */
    uint32_t pair[5] = {8, 3, 8, 6, 2};
    balance_assign(pair, 5, 2, owner, tokens);
    MPT_CHECK(owner[0] == 0 && owner[2] == 1, "lengths 8 3 8 6 2 on 2 ranks: the first 8 (position 0) goes to rank 0, "
              "the second (position 2) to rank 1; got ranks %d and %d", owner[0], owner[2]);
}

MPT_TEST(balance_beats_strided_on_long_tailed_lengths) {
    /* 50 global batches of 32 long-tailed lengths (80% short, 16% medium, 4% long; strided
     * averages about 1.46 here, the length-aware split about 1.01) on 4 ranks. */
    enum { G = 32, W = 4, BATCHES = 50 };
    double strided_sum = 0, balanced_sum = 0;
    for (int b = 0; b < BATCHES; b++) {
        uint32_t lengths[G], longest = 0;
        int owner[G];
        uint64_t tokens[W], sum = 0;
        lab15_long_tailed(lengths, G, 1000 + (uint64_t)b);
        for (int p = 0; p < G; p++) {
            sum += lengths[p];
            if (lengths[p] > longest) longest = lengths[p];
        }
        balance_assign_strided(G, W, owner);
        balance_rank_tokens(lengths, owner, G, W, tokens);
        strided_sum += balance_imbalance(tokens, W);
        balance_assign(lengths, G, W, owner, tokens);
        if (!lab15_check_partition(lengths, G, W, owner, tokens, "long-tailed batch")) return;
        balanced_sum += balance_imbalance(tokens, W);
        uint64_t most = 0;
        for (int r = 0; r < W; r++) most = tokens[r] > most ? tokens[r] : most;
        /* Any greedy list schedule: the last sample placed on the largest rank went to the least-loaded one,
         * which then held at most the mean. */
        double bound = (double)sum / W + (1.0 - 1.0 / W) * longest;
        MPT_CHECK((double)most <= bound + 1e-9, "batch %d: the largest rank holds %llu tokens, more than mean + "
                  "(1 - 1/world) x longest = %.1f: each sample must go to the rank with the fewest tokens so far", b,
                  (unsigned long long)most, bound);
    }
    double strided = strided_sum / BATCHES, balanced = balanced_sum / BATCHES;
    MPT_OBSERVE_NEAR(balanced, 1e-9, 1e-12);
    MPT_CHECK(strided > 1.3, "strided split: mean max/mean imbalance %.3f, expected above 1.3 on these lengths "
              "(balance_imbalance must be max over mean)", strided);
    MPT_CHECK(balanced < 1.05, "length-aware split: mean max/mean imbalance %.3f over %d batches, expected below 1.05 "
              "(strided gives %.3f): longest first, each to the least-loaded rank", balanced, BATCHES, strided);
}

MPT_TEST(imbalance_is_max_over_mean) {
    static const struct { uint64_t tokens[4]; int world; double want; const char *why; } cases[] = {
        {{10, 20, 30}, 3, 1.5, "30 over the mean 20"},
        {{7, 7, 8}, 3, 8.0 / (22.0 / 3.0), "the mean of 7, 7, 8 is 22/3, not 7: divide in floating point"},
        {{0, 0, 0, 12}, 4, 4.0, "one rank does all the work: 12 over the mean 3"},
        {{5}, 1, 1.0, "one rank is always balanced"},
        {{0, 0, 0, 0}, 4, 1.0, "no tokens at all: 1 (nobody waits), not 0/0"},
        {{1ULL << 62, 1ULL << 62, 1ULL << 62, 1ULL << 62}, 4, 1.0,
         "four totals of 2^62: their sum passes 2^64, so add them in double"},
        {{3, 9, 0, 0}, 4, 3.0, "the mean is over every rank, idle ones too: 9 over 3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got = balance_imbalance(cases[i].tokens, cases[i].world);
        MPT_OBSERVE_NEAR(got, 1e-12, 0);
        MPT_CHECK(got > cases[i].want - 1e-12 && got < cases[i].want + 1e-12,
                  "balance_imbalance of %llu %llu %llu %llu (world %d)\n      expected: %.6f\n      got:      %.6f\n"
                  "      likely mistake: %s", (unsigned long long)cases[i].tokens[0],
                  (unsigned long long)cases[i].tokens[1], (unsigned long long)cases[i].tokens[2],
                  (unsigned long long)cases[i].tokens[3], cases[i].world, cases[i].want, got, cases[i].why);
    }
}
