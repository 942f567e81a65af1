/* test_ddp.c: lab 13 visible tests: the broadcast, bucket boundaries (1, 2 and 3 buckets), averaged gradients
 * equal to one model's on the concatenated batch, bit-identical replicas, and the overlap on the communication
 * thread (the same gradients as reducing in backward, buckets reduced in launch order on the thread, the first
 * one started before backward ends, ddp_finish waiting for all), on 2 and 3 real ranks. */
#include "lab13_run.h"

/* Bucket sizes for the test model (embeddings 640, blocks 3280 each, final norm and head 544 floats). */
enum { ONE_BUCKET = 0, TWO_BUCKETS = 7000, THREE_BUCKETS = 3500 };
/* Exactly the head and the last block (544 + 3280): the first bucket is full at equality (>=, not >). */
enum { THREE_BUCKETS_AT_EQUALITY = 3824 };

MPT_TEST(broadcast_makes_different_seeds_agree) {
    lab13_result res;
    lab13_run(&res, 2, ONE_BUCKET, false, true, 0, 2);
    lab13_check_broadcast(&res);
}

MPT_TEST(one_bucket_covers_the_whole_buffer) {
    lab13_result res;
    lab13_run(&res, 2, ONE_BUCKET, false, false, 2, 2);
    lab13_check_buckets(&res, 1);
}

MPT_TEST(two_buckets_in_reverse_layer_order) {
    lab13_result res;
    lab13_run(&res, 2, TWO_BUCKETS, true, false, 2, 2);
    lab13_check_buckets(&res, 2);
}

MPT_TEST(three_buckets_3_ranks) {
    lab13_result res;
    lab13_run(&res, 3, THREE_BUCKETS_AT_EQUALITY, true, false, 2, 2);
    lab13_check_buckets(&res, 3);
}

MPT_TEST(averaged_gradients_equal_whole_batch_2_ranks) {
    lab13_result res;
    lab13_run(&res, 2, THREE_BUCKETS, true, false, 3, 2);
    lab13_check_gradients(&res);
}

MPT_TEST(replicas_bit_identical_after_steps) {
    lab13_result res;
    lab13_run(&res, 2, TWO_BUCKETS, true, true, 5, 2);
    lab13_check_broadcast(&res);
    lab13_check_replicas(&res);
}

MPT_TEST(overlap_gradients_bit_identical_to_reducing_in_backward) {
    lab13_check_overlap_bit_identical(2, THREE_BUCKETS, 2);
}

MPT_TEST(buckets_reduced_on_the_comm_thread_in_launch_order) {
    static lab13_overlap_result res;
    lab13_run_overlap(&res, 3, THREE_BUCKETS, true, 1);
    lab13_check_reduce_order(&res);
}

MPT_TEST(first_reduction_starts_before_backward_ends) {
    static lab13_overlap_result res;
    lab13_run_overlap(&res, 2, TWO_BUCKETS, true, 1);
    lab13_check_overlap_happens(&res);
}

MPT_TEST(finish_waits_for_every_bucket) {
    static lab13_overlap_result res;
    lab13_run_overlap(&res, 2, THREE_BUCKETS, true, 1);
    lab13_check_finish_waits(&res);
}
