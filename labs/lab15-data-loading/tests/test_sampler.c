/* test_sampler.c: lab 15 visible tests: equal shares (padding, drop_last), the rank's strided selection on
 * PyTorch's N=10, world=3 example, coverage over world 1..8, and the seed + epoch shuffle. */
#include "lab15_util.h"

/* ---------------------------------------------------------------- A. equal shares */

MPT_TEST(shares_padding_ceil) {
    static const struct { uint64_t n; int world; uint64_t per; } cases[] = {
        {10, 3, 4}, {9, 3, 3}, {1, 4, 1}, {7, 1, 7}, {8, 8, 1}, {17, 8, 3}, {1000, 7, 143},
        /* 2^64 - 2 = 3 * 6148914691236517204 + 2: (N + world - 1) / world wraps to 0 here */
        {UINT64_MAX - 1, 3, 6148914691236517205ULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t per = 0, total = 0;
        dist_sampler_sizes(cases[i].n, cases[i].world, false, &per, &total);
        char what[160];
        snprintf(what, sizeof what, "N=%llu world=%d without drop_last: ceil(N/world) per rank (the short rank is padded)%s",
                 (unsigned long long)cases[i].n, cases[i].world,
                 cases[i].n > UINT64_MAX / 2 ? "; (N + world - 1) / world overflows near 2^64, "
                                               "N / world + (N % world != 0) does not" : "");
        MPT_CHECK_EQ_U64(cases[i].per, per, what);
        MPT_CHECK_EQ_U64(cases[i].per * (uint64_t)cases[i].world, total, "total_size = num_samples * world");
    }
}

MPT_TEST(shares_drop_last_floor) {
    static const struct { uint64_t n; int world; uint64_t per; } cases[] = {
        {10, 3, 3}, {9, 3, 3}, {7, 1, 7}, {8, 8, 1}, {17, 8, 2}, {1000, 7, 142}, {3, 4, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t per = 99, total = 99;
        dist_sampler_sizes(cases[i].n, cases[i].world, true, &per, &total);
        char what[160];
        snprintf(what, sizeof what, "N=%llu world=%d with drop_last: floor(N/world) per rank (the tail is dropped)",
                 (unsigned long long)cases[i].n, cases[i].world);
        MPT_CHECK_EQ_U64(cases[i].per, per, what);
        MPT_CHECK_EQ_U64(cases[i].per * (uint64_t)cases[i].world, total, "total_size = num_samples * world");
    }
}

/* ---------------------------------------------------------------- B. the rank's selection */

static void check_table(uint64_t n, int world, bool drop_last, const uint64_t *want, uint64_t want_per,
                        const char *hint) {
    uint64_t *got;
    uint64_t per = lab15_all_ranks(n, world, false, drop_last, 0, 0, &got);
    MPT_REQUIRE(per == want_per, "N=%llu world=%d: %llu samples per rank, expected %llu", (unsigned long long)n, world,
                (unsigned long long)per, (unsigned long long)want_per);
    for (int r = 0; r < world; r++)
        for (uint64_t i = 0; i < per; i++) {
            uint64_t e = want[(uint64_t)r * per + i], g = got[(uint64_t)r * per + i];
            MPT_CHECK(e == g, "N=%llu world=%d%s, no shuffle: rank %d sample %llu: expected index %llu, got %llu (%s)",
                      (unsigned long long)n, world, drop_last ? " drop_last" : "", r, (unsigned long long)i,
                      (unsigned long long)e, (unsigned long long)g, hint);
        }
    free(got);
}

MPT_TEST(select_torch_example_padding) {
    /* The list 0..9 padded to 12 with 0, 1; rank r takes positions r, r+3, r+6, r+9. */
    static const uint64_t want[] = {0, 3, 6, 9, /**/ 1, 4, 7, 0, /**/ 2, 5, 8, 1};
    check_table(10, 3, false, want, 4,
                "rank r takes positions r, r + world, ... of the list padded by repeating its start; blocks "
                "(rank 0 gets 0,1,2,3) are not the rule");
}

MPT_TEST(select_torch_example_drop_last) {
    static const uint64_t want[] = {0, 3, 6, /**/ 1, 4, 7, /**/ 2, 5, 8};
    check_table(10, 3, true, want, 3, "with drop_last the list is cut to 9 before the strided selection");
}

MPT_TEST(select_padding_wraps_n_below_world) {
    /* N=3 on world=8: the list is padded to 8 by cycling through it as often as needed, a,b,c,a,b,c,a,b.
     * The order given has sentinels past its N entries: a rank must never read order[p] with p >= N. */
    uint64_t order[16];
    uint64_t base = 100 + (mpt_seed() & 0xff); /* drawn for this grade */
    for (int i = 0; i < 16; i++) order[i] = i < 3 ? base + (uint64_t)i : 999;
    for (int r = 0; r < 8; r++) {
        dist_sampler s;
        uint64_t out[2] = {12345, 12345};
        MPT_REQUIRE(dist_sampler_init(&s, 3, 8, r, false, 0, false, NULL), "dist_sampler_init");
        MPT_REQUIRE(s.num_samples == 1, "N=3 world=8: 1 sample per rank, got %llu", (unsigned long long)s.num_samples);
        dist_sampler_select(&s, order, out);
        MPT_OBSERVE(out[0]);
        MPT_CHECK(out[0] == base + (uint64_t)(r % 3),
                  "N=3 world=8, order %llu,%llu,%llu: rank %d expected %llu (position %d = order[%d %% 3]), got %llu "
                  "(padding cycles through the list as many times as needed when N < world: order[p %% N], not "
                  "order[p - N])",
                  (unsigned long long)base, (unsigned long long)base + 1, (unsigned long long)base + 2, r,
                  (unsigned long long)(base + (uint64_t)(r % 3)), r, r, (unsigned long long)out[0]);
        MPT_CHECK(out[1] == 12345, "N=3 world=8 rank %d: wrote past num_samples (out[1] = %llu)", r,
                  (unsigned long long)out[1]);
    }
}

MPT_TEST(coverage_world_1_to_8) {
    for (int world = 1; world <= 8; world++)
        for (uint64_t n = (uint64_t)world; n <= 30; n += 1 + (uint64_t)world / 3) {
            lab15_check_coverage(n, world, false, false, 0, 0);
            lab15_check_coverage(n, world, false, true, 0, 0);
        }
}

/* ---------------------------------------------------------------- C. the epoch shuffle */

MPT_TEST(shuffle_is_fisher_yates_on_seed_plus_epoch) {
    enum { N = 64 };
    uint64_t got[N], want[N];
    for (uint64_t epoch = 0; epoch < 3; epoch++) {
        uint64_t seed = 2024 ^ (mpt_seed() & 0xffff); /* drawn for this grade */
        dist_sampler_order(N, true, seed, epoch, got);
        for (int i = 0; i < N; i++) MPT_OBSERVE(got[i]);
        lab15_spec_shuffle(N, seed, epoch, want);
        for (int i = 0; i < N; i++)
            if (got[i] != want[i]) {
                MPT_CHECK(0, "epoch %llu position %d: expected %llu, got %llu: seed the rng with seed + epoch, then "
                          "for i = N-1 down to 1 swap order[i] with order[data_rng_below(&rng, i + 1)]",
                          (unsigned long long)epoch, i, (unsigned long long)want[i], (unsigned long long)got[i]);
                break;
            }
    }
}

MPT_TEST(set_epoch_every_rank_agrees) {
    /* Ranks never talk about the order: they agree because they seed the same generator. Together the 4
     * ranks must cover the shuffled list exactly (N = 100 is divisible), and rank r's i-th sample is position
     * r + 4i of that permutation. */
    uint64_t *got, perm[100];
    uint64_t per = lab15_all_ranks(100, 4, true, false, 77, 5, &got);
    lab15_spec_shuffle(100, 77, 5, perm);
    MPT_REQUIRE(per == 25, "N=100 world=4: 25 per rank, got %llu", (unsigned long long)per);
    int wrong = 0;
    for (int r = 0; r < 4 && !wrong; r++)
        for (uint64_t i = 0; i < per && !wrong; i++)
            if (got[(uint64_t)r * per + i] != perm[(uint64_t)r + 4 * i]) {
                MPT_CHECK(0, "epoch 5, rank %d sample %llu: expected %llu (position %llu of the shuffled list), got %llu",
                          r, (unsigned long long)i, (unsigned long long)perm[(uint64_t)r + 4 * i],
                          (unsigned long long)(r + 4 * i), (unsigned long long)got[(uint64_t)r * per + i]);
                wrong = 1;
            }
    free(got);
    lab15_check_coverage(100, 4, true, false, 77, 5);
}
