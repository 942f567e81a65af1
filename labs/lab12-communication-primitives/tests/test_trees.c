/* test_trees.c: lab 12 visible tests of the binomial broadcast and reduce (every root) and of recursive
 * halving-doubling allreduce, on power-of-two and other rank counts. */
#include "lab12_expect.h"

MPT_TEST(binomial_broadcast_4_ranks_root_0) {
    lab12_case k = {"broadcast", "tree", "fp32", "sum", 0, 11, HINT_BCAST};
    size_t counts[] = {1, 1000};
    lab12_check(4, &k, counts, 2, true, bytes_binomial_broadcast_4);
}

MPT_TEST(binomial_broadcast_every_root_5_ranks) {
    lab12_case k = {"broadcast", "tree", "fp32", "sum", -1, 12, HINT_BCAST};
    size_t counts[] = {3, 1000};
    lab12_check(5, &k, counts, 2, true, bytes_binomial_broadcast_4);
}

MPT_TEST(binomial_reduce_every_root_6_ranks) {
    lab12_case k = {"reduce", "tree", "fp32", "sum", -1, 13, HINT_REDUCE};
    size_t counts[] = {1, 7, 1000};
    lab12_check(6, &k, counts, 3, false, bytes_binomial_reduce_4);
}

MPT_TEST(rhd_allreduce_4_ranks) {
    lab12_case k = {"allreduce", "rhd", "fp32", "sum", 0, 14, HINT_RHD};
    size_t counts[] = {1, 7, 1000, 65537};
    lab12_check(4, &k, counts, 4, true, NULL);
}

MPT_TEST(rhd_allreduce_3_and_6_ranks) {
    lab12_case k = {"allreduce", "rhd", "fp32", "sum", 0, 15,
                    HINT_RHD "; with 3 or 6 ranks the exchange runs on 2 or 4 of them (vreal maps them)"};
    size_t counts[] = {1, 7, 1000};
    lab12_check(3, &k, counts, 3, true, NULL);
    lab12_check(6, &k, counts, 3, true, NULL);
}
