/* test_lab29.c: lab 29 visible tests: the arithmetic of a run's report (core/plan/report_math.c): the tokens a run
 * trained on (its compute budget), its throughput over steps, and the memory plan checked against measured peaks. */
#include "lab29_util.h"

/* ------------------------------------------------------------------ A. the token budget */

MPT_TEST(run_tokens_count_every_step_micro_batch_and_rank) {
    CHECK_TOKENS(400, 8, 64, 1, 1, 204800, "the reference capstone: 400 steps of 8 rows of 64 tokens on one rank");
    CHECK_TOKENS(3, 1, 64, 1, 4, 768, "the 1B run of bench/capstone_1b.sh: 3 steps, 1 row of 64 tokens on each of 4 ranks");
    CHECK_TOKENS(100, 4, 64, 2, 1, 51200, "2 accumulated micro-batches a step: 100 * 4 * 64 * 2");
    CHECK_TOKENS(10, 2, 32, 3, 2, 3840, "3 micro-batches on each of 2 ranks: 10 * 2 * 32 * 3 * 2");
    CHECK_TOKENS(0, 16, 64, 1, 1, 0, "no step, no token");
}

/* A large run: 1,000,000 steps of 512 rows of 4096 tokens, 8 micro-batches on 256 ranks: 2^32 tokens a step,
 * 4.3e15 in all, far past 32 bits. */
MPT_TEST(run_tokens_of_a_large_run_in_64_bits) {
    CHECK_TOKENS(1000000, 512, 4096, 8, 256, 4294967296000000ull, "10^6 * 2^9 * 2^12 * 2^3 * 2^8 = 10^6 * 2^32");
    CHECK_TOKENS(70000, 1024, 2048, 1, 1, 146800640000ull, "7e4 * 2^21: over 2^32 even on one rank");
}

/* ------------------------------------------------------------------ B. throughput over steps */

MPT_TEST(run_rate_is_total_tokens_over_total_time) {
    const double two[] = {100, 300};
    CHECK_RATE(two, 2, 0, 150, "two steps of the same tokens at 100 and 300 tokens/s: 2 / (1/100 + 1/300) = 150, "
                               "not the mean 200");
    const double same[] = {250, 250, 250};
    CHECK_RATE(same, 3, 0, 250, "every step at 250 tokens/s");
    const double warm[] = {10, 400, 400, 200};
    CHECK_RATE(warm, 4, 1, 300, "the first step (10: warming up) left out: 3 / (1/400 + 1/400 + 1/200) = 300");
}

MPT_TEST(run_rate_with_nothing_left_is_nan) {
    const double one[] = {123.0};
    CHECK_RATE(one, 1, 1, NAN, "one step, and it is the warm-up one: no rate to give");
    CHECK_RATE(one, 0, 0, NAN, "no step at all");
    CHECK_RATE(one, 1, 0, 123.0, "one step counted: its own rate");
}

/* ------------------------------------------------------------------ C. the plan against the measurement */

MPT_TEST(plan_check_ratio_per_tag_within_5_percent) {
    CHECK_TAG(1000000, 1000000, 0.05, false, "measured exactly as planned");
    CHECK_TAG(1000000, 1049000, 0.05, false, "4.9% over: within 5%");
    CHECK_TAG(1000000, 1051000, 0.05, true, "5.1% over: off");
    CHECK_TAG(1000000, 951000, 0.05, false, "4.9% under: within");
    CHECK_TAG(1000000, 949000, 0.05, true, "5.1% under: off as well, the plan overestimates");
    CHECK_TAG(2193664, 2213120, 0.05, false, "a 2-rank ZeRO-3 run's parameter shard: 2213120 / 2193664 = 1.0089");
    CHECK_TAG(1923584, 2008576, 0.05, false, "the same run's activations: 1.044");
    CHECK_TAG(1000, 1200, 0.25, false, "a tolerance of 25%: 1.2 is within");
}

MPT_TEST(plan_check_counts_the_tags_off_and_skips_unplanned_ones) {
    /* rank 0 of a 2-rank ZeRO-3 + bf16 + checkpointing run (param grad master optim act comm other host) */
    const uint64_t plan[MEM_NTAGS] = {2193664, 2193664, 0, 4387328, 1923584, 0, 0, 0};
    const uint64_t measured[MEM_NTAGS] = {2213120, 2213120, 0, 4426240, 2608576, 5162752, 2492472, 0};
    report_tag_check checks[MEM_NTAGS];
    int off = report_check_plan(plan, measured, MEM_NTAGS, 0.05, checks);
    MPT_CHECK_EQ_I64(1, off, "tags off: only act (2608576 / 1923584 = 1.356); comm and other are not planned");
    for (int t = 0; t < MEM_NTAGS; t++) {
        MPT_CHECK_EQ_I64(plan[t] > 0, checks[t].planned, mem_tag_name((mem_tag)t));
        MPT_CHECK_EQ_U64(plan[t], checks[t].plan, "the check carries the planned bytes");
        MPT_CHECK_EQ_U64(measured[t], checks[t].measured, "the check carries the measured bytes");
        MPT_CHECK_EQ_I64(t == MEM_ACT, checks[t].off, mem_tag_name((mem_tag)t));
    }
    CHECK_TAG(0, 5162752, 0.05, false, "comm: the planner has no row for the gathered units");
    CHECK_TAG(0, 0, 0.05, false, "an unused tag");
}
