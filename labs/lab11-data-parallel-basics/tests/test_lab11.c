/* test_lab11.c: lab 11 visible tests: N ranks with batch b take the step 1 rank takes with batch N*b
 * (2 and 4 ranks), the parameter server's staleness for scripted arrival orders, and an asynchronous run
 * that converges on the regression problem. */
#include "lab11_run.h"

MPT_TEST(sync_2_ranks_equal_1_rank_with_twice_the_batch) {
    lab11_check_sync_equivalence(2, 4, 6);
}

MPT_TEST(sync_4_ranks_equal_1_rank_with_4x_the_batch) {
    lab11_check_sync_equivalence(4, 2, 6);
}

/* Two workers taking turns: each pulls, then the other pulls before either pushes, so every push after the
 * first is one update stale. */
MPT_TEST(staleness_two_workers_interleaved) {
    static const int schedule[] = {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2};
    lab11_check_schedule(3, 3, 4, schedule, sizeof schedule / sizeof schedule[0]);
}

/* A straggler: worker 1 pulls, then workers 2 and 3 make eight round trips each before worker 1 pushes (16
 * updates stale: past the histogram's exact bins, so it lands in the last, bin 15); then everyone catches up,
 * worker 1's next pull going stale by 2. */
MPT_TEST(staleness_straggler_three_workers) {
    static const int schedule[] = {1, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3,
                                   2, 2, 3, 3, 1, 1, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    lab11_check_schedule(4, 9, 4, schedule, sizeof schedule / sizeof schedule[0]);
}

MPT_TEST(async_converges_3_workers) {
    lab11_check_converges(4, 60, 8, 0.02);
}
