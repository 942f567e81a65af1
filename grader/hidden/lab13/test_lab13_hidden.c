/* test_lab13_hidden.c: lab 13 hidden tests: 4 ranks, every layer its own bucket, no overlap (buckets reduced on
 * the main thread), odd micro-batches, different seeds on 3 and 4 ranks, and the overlap with five buckets on 3
 * ranks (launch order on the thread, the first started before backward ends, the wait for all). */
#include "../../../labs/lab13-ddp/tests/lab13_run.h"

MPT_TEST(hidden_buckets_per_layer_4_ranks) {
    lab13_result res;
    lab13_run(&res, 4, 1, true, false, 2, 1); /* 1 element: every layer (5 of them) closes a bucket */
    lab13_check_buckets(&res, 5);
    lab13_check_gradients(&res);
}

MPT_TEST(hidden_three_buckets_without_overlap) {
    lab13_result res;
    lab13_run(&res, 2, 3500, false, false, 2, 3);
    lab13_check_buckets(&res, 3);
    lab13_check_gradients(&res);
}

MPT_TEST(hidden_broadcast_4_ranks) {
    lab13_result res;
    lab13_run(&res, 4, 0, false, true, 0, 1);
    lab13_check_broadcast(&res);
}

MPT_TEST(hidden_replicas_3_ranks_different_seeds) {
    lab13_result res;
    lab13_run(&res, 3, 3824, true, true, 4, 2); /* exactly the head and the last block: a bucket full at equality */
    lab13_check_buckets(&res, 3);
    lab13_check_gradients(&res);
    lab13_check_replicas(&res);
}

MPT_TEST(hidden_overlap_one_bucket_per_layer_3_ranks) {
    static lab13_overlap_result res;
    lab13_run_overlap(&res, 3, 1, true, 1); /* 1 element: five buckets, four of them queued behind the first */
    lab13_check_reduce_order(&res);
    lab13_check_overlap_happens(&res);
    lab13_check_finish_waits(&res);
}
