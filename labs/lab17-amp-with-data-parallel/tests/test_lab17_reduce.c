/* test_lab17_reduce.c: lab 17 visible tests, part A: the 16-bit reduction of the fp16 and bf16 DDP hooks
 * (amp_reduce_mean16 in core/dist/amp_reduce.c): the ranks' 16-bit values widened, added in fp32 in rank order,
 * divided by p once and rounded once; directly, and on three real ranks through the hook. */
#include "lab17_reduce.h"
#include "lab17_run.h"

#include "dist/hooks.h"

/* Three ranks' scaled fp16 gradients of 20000 to 60000: every sum passes fp16's largest value, 65504, every average
 * stays below it. A sum kept in fp16 (or rounded to fp16 before the division) is inf, and the step would be skipped
 * for an overflow that the average does not have. */
MPT_TEST(fp16_sum_of_three_ranks_does_not_overflow) {
    enum { P = 3, N = 6 };
    static const float v[P][N] = {{30000, 60000, -40000, 21000, 65504, 1.5f},
                                  {30000, 50000, -50000, 22000, 65504, 2.5f},
                                  {30016, 40000, -40000, 23000, 1, 3.5f}};
    uint16_t in[P * N];
    for (int j = 0; j < P; j++)
        for (int i = 0; i < N; i++) in[j * N + i] = lab17_narrow(v[j][i], COMM_FP16);
    lab17_mean16(in, P, N, COMM_FP16, "fp16, 3 ranks, sums above 65504");
}

/* bf16 keeps 8 significant bits: 1 + 2^-9 rounds back to 1, so a sum kept in bf16 loses what a sum in fp32 keeps.
 * By hand first (1, then 2^-9 from each of three more ranks: fp32 sum 1 + 3 x 2^-9, average rounded once), then 3
 * ranks x 4096 seeded values over 2^-10 .. 2^10 (3: x/3 is inexact, so a rounded pre-divide shows), every one bit
 * for bit. */
MPT_TEST(bf16_average_is_rounded_once) {
    uint16_t small[4 * 2];
    const float by_hand[4][2] = {{1, -3}, {0x1p-9f, 0x1p-8f}, {0x1p-9f, 0x1p-8f}, {0x1p-9f, 0x1p-8f}};
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 2; i++) small[j * 2 + i] = lab17_narrow(by_hand[j][i], COMM_BF16);
    if (!lab17_mean16(small, 4, 2, COMM_BF16, "bf16, 4 ranks: 1 and three times 2^-9")) return;
    enum { P = 3, N = 4096 };
    uint16_t *in = malloc(P * N * sizeof *in);
    MPT_REQUIRE(in, "out of memory");
    lab17_fill(in, P, N, COMM_BF16, 1700 + mpt_seed() % 1000, -10, 10);
    lab17_mean16(in, P, N, COMM_BF16, "bf16, 3 ranks x 4096 seeded values");
    free(in);
}

/* The average divides by p exactly once, for p = 1, 2, 3 and 5 (values whose average is exact, 1.5 and -0.75, so a
 * missing or doubled division shows at once), and fp16 seeded values on 5 ranks bit for bit. */
MPT_TEST(the_average_divides_by_p_once) {
    static const size_t ps[] = {1, 2, 3, 5};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        size_t p = ps[k];
        uint16_t in[5 * 2];
        for (size_t j = 0; j < p; j++) {
            in[j * 2] = lab17_narrow(1.5f, COMM_FP16);
            in[j * 2 + 1] = lab17_narrow(-0.75f, COMM_FP16);
        }
        char what[64];
        snprintf(what, sizeof what, "fp16, %zu rank(s), every one 1.5 and -0.75", p);
        if (!lab17_mean16(in, p, 2, COMM_FP16, what)) return;
    }
    enum { P = 5, N = 1000 };
    uint16_t in[P * N];
    lab17_fill(in, P, N, COMM_FP16, 1750 + mpt_seed() % 1000, -12, 12);
    lab17_mean16(in, P, N, COMM_FP16, "fp16, 5 ranks x 1000 seeded values");
}

/* The hook itself on three real ranks (build/labs/lab17_worker reduce): each rank averages its own seeded 16-bit
 * scaled gradients, 1001 of them (so the three chunks are 334, 334 and 333 long), with hooks_lowp_allreduce, in fp16
 * and in bf16. Every rank must end with the same values, each the contract's average of the three ranks'. */
MPT_TEST(sixteen_bit_hook_on_three_ranks_gives_every_rank_the_average) {
    enum { P = 3, N = 1001 };
    static const comm_dtype dts[] = {COMM_FP16, COMM_BF16};
    for (size_t d = 0; d < 2; d++) {
        uint16_t got[P][N];
        uint64_t seed = 1790 + mpt_seed() % 1000;
        lab17_reduce_run(P, N, dts[d], seed, &got[0][0]);
        uint16_t in[P * N];
        for (int r = 0; r < P; r++) lab17_worker_values(in + r * N, N, dts[d], seed, r);
        char what[96];
        for (int r = 0; r < P; r++) {
            snprintf(what, sizeof what, "%s hook on 3 ranks, rank %d's result", dts[d] == COMM_FP16 ? "fp16" : "bf16", r);
            if (!lab17_check_average(got[r], in, P, N, dts[d], what)) return;
        }
    }
}
