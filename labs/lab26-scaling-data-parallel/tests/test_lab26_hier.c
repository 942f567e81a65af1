/* test_lab26_hier.c: lab 26 visible tests of part A, the hierarchical allreduce (core/comm/algo_hier.c) on real ranks:
 * whole nodes, a smaller last node, fewer elements than ranks; every element checked against the exact answer (the
 * inputs are small integers, so any correct order of the sums gives the same bits, which therefore equal the flat
 * ring's), every rank's result the same, and the bytes each rank sends counted. */
#include "lab26_util.h"

MPT_TEST(hier_allreduce_4_ranks_as_2_nodes_of_2) {
    size_t counts[] = {1, 2, 7, 1000, 65537};
    lab26_check(4, 2, "fp32", "sum", 2601, counts, 5, HINT_HIER);
}

MPT_TEST(hier_allreduce_6_ranks_as_2_nodes_of_3_int32_max) {
    size_t counts[] = {3, 10, 4099};
    lab26_check(6, 3, "int32", "max", 2602, counts, 3, HINT_HIER);
}

MPT_TEST(hier_allreduce_5_ranks_smaller_last_node_folds_in) {
    /* nodes {0,1} {2,3} {4}: rank 4 folds into rank 0 */
    size_t counts[] = {1, 5, 1000};
    lab26_check(5, 2, "fp32", "sum", 2603, counts, 3, HINT_FOLD);
}

MPT_TEST(hier_allreduce_fewer_elements_than_ranks) {
    /* 6 ranks as 2 nodes of 3: with 1 or 2 elements some chunks, and some chunks of chunks, are empty */
    size_t counts[] = {1, 2, 4};
    lab26_check(6, 3, "fp32", "sum", 2604, counts, 3,
                "empty chunks (0 elements) are sent and received like any other; the helpers skip empty messages");
}
