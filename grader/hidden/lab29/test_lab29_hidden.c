/* test_lab29_hidden.c: lab 29 hidden tests: token counts of random batch shapes (and ones that need 64 bits), run
 * rates of random steps against total tokens over total time, and random plans checked tag by tag against a model of
 * the rule. */
#include "../../../labs/lab29-capstone/tests/lab29_util.h"

static int draw(mp_rng *rng, int lo, int hi) { return lo + (int)(mp_rng_u32(rng) % (uint32_t)(hi - lo + 1)); }

MPT_TEST(run_tokens_random_shapes) {
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed() ^ 0x29a);
    for (int k = 0; k < 200; k++) {
        long steps = draw(&rng, 0, 100000);
        int B = draw(&rng, 1, 64), T = draw(&rng, 1, 4096), accum = draw(&rng, 1, 16), world = draw(&rng, 1, 256);
        uint64_t want = (uint64_t)steps * (uint64_t)B * (uint64_t)T * (uint64_t)accum * (uint64_t)world;
        if (!CHECK_TOKENS(steps, B, T, accum, world, want, "steps * B * T * accumulation * dp world")) return;
    }
}

MPT_TEST(run_tokens_past_32_bits) {
    CHECK_TOKENS(2147483647L, 1, 1, 1, 2, 4294967294ull, "2^31 - 1 steps on 2 ranks: just under 2^32");
    CHECK_TOKENS(1L << 20, 1 << 10, 1 << 12, 1, 1 << 8, 1ull << 50, "2^20 * 2^10 * 2^12 * 2^8 = 2^50");
    CHECK_TOKENS(3, 65535, 65535, 7, 1, 3ull * 65535 * 65535 * 7, "B * T alone passes 2^31");
}

MPT_TEST(run_rate_random_steps_against_total_time) {
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed() ^ 0x29b);
    double rates[64];
    for (int k = 0; k < 100; k++) {
        long n = draw(&rng, 1, 64), skip = draw(&rng, 0, 3);
        for (long i = 0; i < n; i++) rates[i] = 1.0 + 999.0 * mp_rng_uniform(&rng);
        double seconds = 0;
        long counted = 0;
        for (long i = skip; i < n; i++) seconds += 1.0 / rates[i], counted++;
        double want = counted ? (double)counted / seconds : NAN;
        if (!CHECK_RATE(rates, n, skip, want, "steps left / the sum of their 1 / rate")) return;
    }
}

MPT_TEST(plan_check_random_tags_against_the_rule) {
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed() ^ 0x29c);
    for (int k = 0; k < 300; k++) {
        uint64_t plan = mp_rng_uniform(&rng) < 0.15 ? 0 : (uint64_t)draw(&rng, 1000, 1 << 30);
        double tol = 0.01 * draw(&rng, 1, 20);
        /* a ratio at least 0.001 away from either edge, so no rounding decides */
        double r = 1 + (mp_rng_uniform(&rng) * 2 - 1) * 2 * tol;
        if (fabs(fabs(r - 1) - tol) < 1e-3) r += 3e-3;
        uint64_t measured = plan ? (uint64_t)llround((double)plan * r) : (uint64_t)draw(&rng, 0, 1 << 20);
        bool off = plan > 0 && fabs((double)measured / (double)plan - 1) > tol;
        if (!CHECK_TAG(plan, measured, tol, off, "off when |measured / plan - 1| > tolerance; a tag planned at 0 is not checked"))
            return;
    }
}

MPT_TEST(plan_check_returns_the_count_over_many_tags) {
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed() ^ 0x29d);
    enum { N = 40 };
    uint64_t plan[N], measured[N];
    report_tag_check checks[N];
    int want = 0;
    for (int t = 0; t < N; t++) {
        plan[t] = t % 7 == 3 ? 0 : (uint64_t)draw(&rng, 1 << 10, 1 << 28);
        bool make_off = mp_rng_uniform(&rng) < 0.4;
        double r = make_off ? (mp_rng_uniform(&rng) < 0.5 ? 0.8 : 1.2) : 1.01;
        measured[t] = (uint64_t)llround((double)plan[t] * r) + (plan[t] ? 0 : 4096);
        want += plan[t] > 0 && make_off;
    }
    int got = report_check_plan(plan, measured, N, 0.05, checks);
    MPT_CHECK_EQ_I64(want, got, "tags off among 40 (a fifth of them at 0.8 or 1.2, every seventh not planned)");
    for (int t = 0; t < N; t++) MPT_CHECK_EQ_I64(plan[t] > 0 && fabs((double)measured[t] / (double)plan[t] - 1) > 0.05,
                                                 checks[t].off, "each tag's verdict");
}
