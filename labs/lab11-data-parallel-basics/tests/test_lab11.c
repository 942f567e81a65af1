/* test_lab11.c: lab 11 visible tests: N ranks with batch b take the step 1 rank takes with batch N*b
 * (2 and 4 ranks), the parameter server's staleness for scripted arrival orders, an asynchronous run that
 * converges on the regression problem, and the worker loop with a staleness bound: withdrawals where a
 * scripted order makes offers too stale, the bound kept in arrival order, and bound 0 as plain SGD. */
#include "lab11_run.h"

MPT_TEST(sync_2_ranks_equal_1_rank_with_twice_the_batch) {
    lab11_check_sync_equivalence(2, 4, 6);
}

MPT_TEST(sync_4_ranks_equal_1_rank_with_4x_the_batch) {
    lab11_check_sync_equivalence(4, 2, 6);
}

/* Two workers taking turns: each pulls, then the other pulls before either offers, so every push after the
 * first is one update stale. */
MPT_TEST(staleness_two_workers_interleaved) {
    static const int schedule[] = {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2};
    lab11_check_schedule(3, 3, 4, schedule, sizeof schedule / sizeof schedule[0], LAB11_UNBOUNDED);
}

/* A straggler: worker 1 pulls, then workers 2 and 3 make eight round trips each before worker 1 pushes (16
 * updates stale: past the histogram's exact bins, so it lands in the last, bin 15); then everyone catches up,
 * worker 1's next pull going stale by 2. */
MPT_TEST(staleness_straggler_three_workers) {
    static const int schedule[] = {1, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3, 2, 2, 3, 3,
                                   2, 2, 3, 3, 1, 1, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    lab11_check_schedule(4, 9, 4, schedule, sizeof schedule / sizeof schedule[0], LAB11_UNBOUNDED);
}

MPT_TEST(async_converges_3_workers) {
    lab11_check_converges(4, 60, 8, 0.02);
}

/* Bound K = 1, three workers, two gradients each. All pull at v0; worker 1 commits (staleness 0, v1), worker 2
 * commits at staleness 1 (= K: allowed), worker 3's offer is 2 stale: withdrawn; it pulls again (v2) and commits.
 * Later worker 1's second offer is 2 stale: withdrawn, pulled again, committed. */
MPT_TEST(bound_1_withdraws_offers_2_stale_scripted) {
    static const int schedule[] = {1, 2, 3, 1, 2, 3, 3, 3, 1, 2, 2, 3, 3, 1, 1, 1};
    lab11_check_schedule(4, 2, 4, schedule, sizeof schedule / sizeof schedule[0], 1);
}

/* Bound K = 2 as the requests arrive, worker 1 sleeping 1 ms per gradient so that its offers go stale. */
MPT_TEST(bound_2_respected_in_arrival_order_with_a_straggler) {
    lab11_check_bound_respected(4, 30, 4, 2, 1000);
}

/* Bound K = 0: only gradients of the current weights are committed, so the run is plain SGD. */
MPT_TEST(bound_0_equals_sequential_sgd) {
    lab11_check_bound0_is_sequential_sgd(4, 20, 4);
}
