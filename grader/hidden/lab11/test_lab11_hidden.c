/* test_lab11_hidden.c: lab 11 hidden tests: a rank count that is not a power of two, staleness that falls in
 * the histogram's last bin, an asynchronous run with more workers, and a bound of 3 met exactly and passed. */
#include "../../../labs/lab11-data-parallel-basics/tests/lab11_run.h"

MPT_TEST(hidden_sync_3_ranks_equal_1_rank_with_3x_the_batch) {
    lab11_check_sync_equivalence(3, 3, 5);
}

/* Worker 1 pulls, worker 2 makes 17 round trips, then worker 1 pushes: staleness 17 lands in the last
 * histogram bin (>= 15); then worker 1 makes its remaining 16 round trips. */
MPT_TEST(hidden_staleness_past_the_last_bin) {
    enum { TRIPS = 17 };
    int schedule[4 * TRIPS], n = 0;
    schedule[n++] = 1;
    for (int t = 0; t < TRIPS; t++) schedule[n++] = 2, schedule[n++] = 2;
    schedule[n++] = 1;
    for (int t = 1; t < TRIPS; t++) schedule[n++] = 1, schedule[n++] = 1;
    lab11_check_schedule(3, TRIPS, 2, schedule, (size_t)n, LAB11_UNBOUNDED);
}

/* Every worker pulls before anyone pushes: the k-th push is k-1 updates stale. */
MPT_TEST(hidden_staleness_all_pull_then_all_push) {
    static const int schedule[] = {1, 2, 3, 4, 1, 2, 3, 4, 4, 3, 2, 1, 4, 3, 2, 1};
    lab11_check_schedule(5, 2, 3, schedule, sizeof schedule / sizeof schedule[0], LAB11_UNBOUNDED);
}

MPT_TEST(hidden_async_converges_2_workers) {
    lab11_check_converges(3, 80, 4, 0.02);
}

/* Bound K = 3, three workers: worker 1 pulls, three round trips of workers 2 and 3 land (worker 1's offer is
 * then 3 stale: committed), worker 1 pulls again, four more round trips land (its offer is 4 stale:
 * withdrawn), it pulls again and commits, and everyone finishes. */
MPT_TEST(hidden_bound_3_met_exactly_then_passed) {
    static const int schedule[] = {1, 2, 2, 3, 3, 2, 2, 1, 1, 3, 3, 2, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 3, 3};
    lab11_check_schedule(4, 4, 3, schedule, sizeof schedule / sizeof schedule[0], 3);
}
