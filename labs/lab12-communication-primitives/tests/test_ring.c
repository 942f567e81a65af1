/* test_ring.c: lab 12 visible tests of the ring: reduce-scatter, allgather and allreduce on 3 to 5 ranks,
 * even and uneven chunks, results checked element by element and bytes sent counted. */
#include "lab12_expect.h"

MPT_TEST(ring_reduce_scatter_4_ranks) {
    lab12_case k = {"reduce_scatter", "ring", "fp32", "sum", 0, 1, HINT_RING_RS};
    size_t counts[] = {1, 5, 1000};
    lab12_check(4, &k, counts, 3, false, bytes_ring_blocks_4);
}

MPT_TEST(ring_reduce_scatter_3_ranks_int32_max) {
    lab12_case k = {"reduce_scatter", "ring", "int32", "max", 0, 2, HINT_RING_RS};
    size_t counts[] = {2, 7};
    lab12_check(3, &k, counts, 2, false, bytes_ring_blocks_4);
}

MPT_TEST(ring_allgather_4_ranks) {
    lab12_case k = {"allgather", "ring", "fp32", "sum", 0, 3, HINT_RING_AG};
    size_t counts[] = {1, 3, 1000};
    lab12_check(4, &k, counts, 3, true, bytes_ring_blocks_4);
}

MPT_TEST(ring_allgather_3_ranks_bf16) {
    lab12_case k = {"allgather", "ring", "bf16", "sum", 0, 4, HINT_RING_AG};
    size_t counts[] = {2, 1001};
    lab12_check(3, &k, counts, 2, true, bytes_ring_blocks_2);
}

MPT_TEST(ring_allreduce_divisible_counts) {
    lab12_case k = {"allreduce", "ring", "fp32", "sum", 0, 5, HINT_RING_AR};
    size_t counts[] = {4, 1000, 4096};
    lab12_check(4, &k, counts, 3, true, bytes_ring_allreduce);
}

MPT_TEST(ring_allreduce_uneven_counts) {
    lab12_case k = {"allreduce", "ring", "fp32", "sum", 0, 6, HINT_RING_AR};
    size_t counts[] = {1, 2, 7, 1000, 65537};
    lab12_check(3, &k, counts, 5, true, bytes_ring_allreduce);
}

MPT_TEST(ring_allreduce_fewer_elements_than_ranks) {
    lab12_case k = {"allreduce", "ring", "fp32", "sum", 0, 7,
                    "with fewer elements than ranks some chunks are empty (0 elements): send and receive them "
                    "like any other, the helpers skip empty messages"};
    size_t counts[] = {1, 2, 3, 4};
    lab12_check(5, &k, counts, 4, true, bytes_ring_allreduce);
}
