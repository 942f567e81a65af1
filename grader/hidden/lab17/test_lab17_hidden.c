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

/* ---------------------------------------------------------------- A. the 16-bit reduction */

#include "../../../labs/lab17-amp-with-data-parallel/tests/lab17_reduce.h"

/* fp16 subnormals (2^-24 and its multiples), zeros of both signs, an inf on one rank (the average is inf: the step
 * will find it and skip), inf and -inf (NaN), and one element (n = 1) on 2 to 4 ranks, bit for bit. */
MPT_TEST(reduce_of_subnormals_zeros_and_infinities) {
    enum { N = 7 };
    static const float v[4][N] = {{0x1p-24f, 0x3p-24f, 0.0f, -0.0f, INFINITY, INFINITY, 6e-5f},
                                  {0x1p-24f, 0x1p-24f, 0.0f, -0.0f, 1.0f, -INFINITY, -6e-5f},
                                  {0x1p-24f, 0x2p-24f, -0.0f, -0.0f, 2.0f, 1.0f, 6.1e-5f},
                                  {0.0f, 0x1p-24f, 0.0f, -0.0f, 3.0f, 2.0f, 1e-7f}};
    for (size_t p = 2; p <= 4; p++) {
        uint16_t in[4 * N];
        for (size_t j = 0; j < p; j++)
            for (int i = 0; i < N; i++) in[j * N + i] = lab17_narrow(v[j][i], COMM_FP16);
        char what[64];
        snprintf(what, sizeof what, "fp16, %zu ranks: subnormals, zeros, infinities", p);
        if (!lab17_mean16(in, p, N, COMM_FP16, what)) return;
    }
    uint16_t one[3] = {lab17_narrow(1, COMM_BF16), lab17_narrow(2, COMM_BF16), lab17_narrow(4, COMM_BF16)};
    lab17_mean16(one, 3, 1, COMM_BF16, "bf16, 3 ranks, one element");
}

/* The bf16 and fp16 hooks on four real ranks, 999 values each (chunks of 250, 250, 250 and 249). */
MPT_TEST(sixteen_bit_hook_on_four_ranks) {
    enum { P = 4, N = 999 };
    static const comm_dtype dts[] = {COMM_BF16, COMM_FP16};
    for (size_t d = 0; d < 2; d++) {
        static uint16_t got[P][N], in[P * N];
        uint64_t seed = 2790 + mpt_seed() % 1000;
        lab17_reduce_run(P, N, dts[d], seed, &got[0][0]);
        for (int r = 0; r < P; r++) lab17_worker_values(in + r * N, N, dts[d], seed, r);
        for (int r = 0; r < P; r++)
            if (!lab17_check_average(got[r], in, P, N, dts[d], dts[d] == COMM_FP16 ? "fp16 hook, 4 ranks" : "bf16 hook, 4 ranks"))
                return;
    }
}
