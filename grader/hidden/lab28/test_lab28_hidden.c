/* test_lab28_hidden.c: lab 28 hidden tests: the tensor-parallel linear pair on 4 ranks (one hidden column a
 * rank), the vocab-parallel cross-entropy on 3 ranks with logits large enough that exp overflows without the row
 * max and a last rank holding only padding, and 1F1B with fewer micro-batches than stages. */
#include "../../../labs/lab28-model-parallel/tests/lab28_run.h"

static const lab28_expect LINEAR[] = {
    {"Y", "g's forward: sum the partial products over tp, then add the bias once"},
    {"dX", "f's backward: sum this rank's share of dX (from a zeroed buffer) over tp, then add it"},
    {"dA", "the column-parallel weight gradient is local"},
    {"dB", "the row-parallel weight gradient is local"},
    {NULL, NULL}};

static const lab28_expect CE[] = {
    {"lse", "subtract the row max of the WHOLE vocabulary (tp_max) before exp: exp(z) of logits near 200 overflows "
            "float; a rank holding only padding columns contributes max -inf and sum 0"},
    {"loss", "the target's logit from its owner only (the others 0), summed over tp"},
    {"dlogits", "softmax with the whole vocabulary's lse, minus one at the target, 0 in padding columns"},
    {NULL, NULL}};

MPT_TEST(hidden_tp_linear_pair_4_ranks) {
    const char *args[] = {"tp_linear", "5", "6", "4", NULL};
    lab28_check_worker("column-parallel A (one row a rank), row-parallel B, 4 ranks", 4, args, LINEAR, 1e-5, 1e-5);
}

MPT_TEST(hidden_vocab_ce_3_ranks_large_logits_padding_rank) {
    /* V 20 of padded 30: rank 2 holds columns 20..29, padding only */
    const char *args[] = {"vocab_ce", "9", "20", "30", "200", NULL};
    lab28_check_worker("vocab-parallel cross-entropy, logits in [-200, 200), 3 ranks", 3, args, CE, 1e-5, 1e-5);
}

MPT_TEST(hidden_one_f_one_b_fewer_micro_batches_than_stages) {
    static const int P[] = {4, 6, 8, 16}, M[] = {1, 2, 3}; /* m < p everywhere */
    for (size_t i = 0; i < sizeof P / sizeof *P; i++)
        for (size_t j = 0; j < sizeof M / sizeof *M; j++) {
            if (!lab28_check_1f1b_order(P[i], M[j])) return;
            int p = P[i], m = M[j], in_flight[16];
            double got = pp_schedule_bubble(PP_1F1B, p, m, 1, 1.0, 1.0, in_flight);
            char what[96];
            snprintf(what, sizeof what, "bubble of 1F1B's order, p = %d, m = %d < p", p, m);
            MPT_CHECK_NEAR(pp_bubble_formula(p, m, 1), got, 1e-9, 1e-9, what);
            MPT_CHECK_EQ_I64(m, in_flight[0], "micro-batches stage 0 holds at most when m < p (all of them)");
        }
}
