/* test_lab12_hidden.c: lab 12 hidden tests: more rank counts (2, 5, 7, 8), odd sizes, every root, other
 * types and reductions (int32 min/max, bf16, avg), and the same byte counts. */
#include "../../../labs/lab12-communication-primitives/tests/lab12_expect.h"

MPT_TEST(ring_reduce_scatter_7_ranks_min) {
    lab12_case k = {"reduce_scatter", "ring", "int32", "min", 0, 101, HINT_RING_RS};
    size_t counts[] = {1, 3, 999};
    lab12_check(7, &k, counts, 3, false, bytes_ring_blocks_4);
}

MPT_TEST(ring_allgather_8_ranks_int32) {
    lab12_case k = {"allgather", "ring", "int32", "sum", 0, 102, HINT_RING_AG};
    size_t counts[] = {1, 2, 513};
    lab12_check(8, &k, counts, 3, true, bytes_ring_blocks_4);
}

MPT_TEST(ring_allreduce_8_ranks_odd_sizes) {
    lab12_case k = {"allreduce", "ring", "fp32", "sum", 0, 103, HINT_RING_AR};
    size_t counts[] = {0, 1, 2, 3, 7, 64, 1000, 65537};
    lab12_check(8, &k, counts, 8, true, bytes_ring_allreduce);
}

MPT_TEST(ring_allreduce_2_ranks) {
    lab12_case k = {"allreduce", "ring", "fp32", "max", 0, 104, HINT_RING_AR};
    size_t counts[] = {1, 1001};
    lab12_check(2, &k, counts, 2, true, bytes_ring_allreduce);
}

MPT_TEST(ring_allreduce_avg_and_bf16) {
    lab12_case avg = {"allreduce", "ring", "fp32", "avg", 0, 105, HINT_RING_AR};
    size_t counts[] = {5, 1000};
    lab12_check(3, &avg, counts, 2, true, bytes_ring_allreduce);
    lab12_case bf16 = {"allreduce", "ring", "bf16", "sum", 0, 106, HINT_RING_AR};
    lab12_check(6, &bf16, counts, 2, true, bytes_ring_allreduce);
}

MPT_TEST(binomial_broadcast_every_root_8_ranks) {
    lab12_case k = {"broadcast", "tree", "fp32", "sum", -1, 107, HINT_BCAST};
    size_t counts[] = {1, 100};
    lab12_check(8, &k, counts, 2, true, bytes_binomial_broadcast_4);
}

MPT_TEST(binomial_broadcast_7_ranks_bf16) {
    lab12_case k = {"broadcast", "tree", "bf16", "sum", 3, 108, HINT_BCAST};
    size_t counts[] = {2, 4097};
    lab12_check(7, &k, counts, 2, true, bytes_binomial_broadcast_2);
}

MPT_TEST(binomial_reduce_every_root_7_ranks_max_min) {
    lab12_case max = {"reduce", "tree", "int32", "max", -1, 109, HINT_REDUCE};
    size_t counts[] = {1, 300};
    lab12_check(7, &max, counts, 2, false, bytes_binomial_reduce_4);
    lab12_case min = {"reduce", "tree", "fp32", "min", 2, 110, HINT_REDUCE};
    lab12_check(5, &min, counts, 2, false, bytes_binomial_reduce_4);
}

MPT_TEST(rhd_allreduce_5_and_7_ranks) {
    lab12_case k = {"allreduce", "rhd", "fp32", "sum", 0, 111, HINT_RHD};
    size_t counts[] = {1, 3, 7, 1000};
    lab12_check(5, &k, counts, 4, true, NULL);
    lab12_check(7, &k, counts, 4, true, NULL);
}

MPT_TEST(rhd_allreduce_8_ranks_sizes) {
    lab12_case k = {"allreduce", "rhd", "int32", "sum", 0, 112, HINT_RHD};
    size_t counts[] = {1, 2, 3, 7, 64, 1000, 65537};
    lab12_check(8, &k, counts, 7, true, NULL);
}
