/* test_lab17_hidden.c: lab 17 hidden tests: found_inf agreement on 3 and 4 ranks with the inf on the last rank,
 * two ranks overflowing at once, and overflows on different ranks at different steps. */
#include "../../../labs/lab17-amp-with-data-parallel/tests/lab17_run.h"

/* An average over 3 ranks (or a comparison with the rank count) misses one rank's inf. */
MPT_TEST(three_ranks_inf_on_the_last) {
    lab17_result res;
    lab17_run(&res, 3, 6, "2:3", NULL);
    if (lab17_check_agreement(&res)) lab17_check_replicas(&res);
}

/* Four ranks, the inf on rank 3, bf16 communication hook. */
MPT_TEST(four_ranks_inf_on_the_last) {
    lab17_result res;
    lab17_run(&res, 4, 6, "3:2", "hook=bf16");
    if (lab17_check_agreement(&res)) lab17_check_replicas(&res);
}

/* Ranks 1 and 3 overflow at the same step: a SUM of the flags is 2 there, not 1. */
MPT_TEST(two_of_four_ranks_overflow_at_once) {
    lab17_result res;
    lab17_run(&res, 4, 5, "1:3,3:3", NULL);
    if (lab17_check_agreement(&res)) lab17_check_replicas(&res);
}

/* Three overflows on three ranks at steps 2, 5 and 7: each is skipped everywhere, and nothing else is. */
MPT_TEST(overflows_on_different_ranks_at_different_steps) {
    lab17_result res;
    lab17_run(&res, 3, 8, "0:2,1:5,2:7", NULL);
    if (lab17_check_agreement(&res)) lab17_check_replicas(&res);
}
