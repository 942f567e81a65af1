/* test_lab28.c: lab 28 visible tests: Megatron's column/row-parallel linear pair and the vocab-parallel
 * cross-entropy on 2 real ranks against the unsharded computation (forward and gradients), the 1F1B order of
 * every stage against an independent model of it, whose bubble is (p-1)/(m+p-1), and 3D training on 4 ranks
 * (tp 2 x pp 2, 1F1B) with one rank's losses. */
#include "../../lab19-zero-data-parallel/tests/lab19_run.h"
#include "lab28_run.h"

static const lab28_expect LINEAR[] = {
    {"Y", "g's forward: the row-parallel output is each rank's partial product X_t B_t^T summed over tp "
          "(tp_reduce_from_region_forward), and the bias added once, after the sum (added before it counts it P times)"},
    {"dX", "f's backward: dX gets dZ_t A_t summed over tp; sum a zeroed buffer and then add it to dX (summing dX "
           "itself counts what it already held P times; not summing leaves one rank's share)"},
    {"dA", "the column-parallel weight gradient dZ_t^T X is local: no communication"},
    {"dB", "the row-parallel weight gradient dY^T Z_t is local: no communication"},
    {"db", "the row-parallel bias gradient: the column sums of dY, whole on every rank"},
    {NULL, NULL}};

static const lab28_expect CE[] = {
    {"lse", "lse = max + log(sum of exp(z - max)) over the WHOLE vocabulary: the row max reduced with tp_max and the "
            "sum of exp with tp_sum, both over the tp group; padding columns (at or past V) are not in the softmax"},
    {"loss", "loss = lse - z_target: the target's logit comes from the one rank whose columns hold it (the others give "
             "0) through tp_sum; rows with target -1 have loss 0"},
    {"dlogits", "the backward uses the lse of the whole vocabulary: a wrong lse makes every softmax probability wrong"},
    {NULL, NULL}};

MPT_TEST(tp_linear_pair_matches_unsharded_2_ranks) {
    const char *args[] = {"tp_linear", "6", "8", "16", NULL};
    lab28_check_worker("column-parallel A (16 -> 8 rows a rank), row-parallel B, 2 ranks", 2, args, LINEAR, 1e-5, 1e-5);
}

MPT_TEST(vocab_parallel_ce_matches_unsharded_2_ranks) {
    /* V 50 of padded 64: rank 1 holds 18 real columns and 14 of padding */
    const char *args[] = {"vocab_ce", "12", "50", "64", "4", NULL};
    lab28_check_worker("vocab-parallel cross-entropy, 32 columns a rank, 2 ranks", 2, args, CE, 1e-5, 1e-6);
}

MPT_TEST(one_f_one_b_order_matches_the_model) {
    static const int P[] = {1, 2, 3, 4, 5, 8}, M[] = {1, 2, 3, 4, 7, 8, 16};
    for (size_t i = 0; i < sizeof P / sizeof *P; i++)
        for (size_t j = 0; j < sizeof M / sizeof *M; j++)
            if (!lab28_check_1f1b_order(P[i], M[j])) return;
}

MPT_TEST(one_f_one_b_bubble_is_the_formula_and_holds_at_most_p) {
    /* Forward 1, backward 2 (a backward costs about twice a forward): the order alone decides the bubble. */
    static const int P[] = {2, 4, 8}, M[] = {4, 8, 16, 32};
    for (size_t i = 0; i < sizeof P / sizeof *P; i++)
        for (size_t j = 0; j < sizeof M / sizeof *M; j++) {
            int p = P[i], m = M[j], in_flight[8];
            double got = pp_schedule_bubble(PP_1F1B, p, m, 1, 1.0, 2.0, in_flight), want = pp_bubble_formula(p, m, 1);
            char what[160];
            snprintf(what, sizeof what, "bubble of 1F1B's order, p = %d, m = %d (formula (p-1)/(m+p-1)); likely: the "
                     "warm-up is not p-s-1 forwards, or a backward runs before its forward", p, m);
            MPT_CHECK_NEAR(want, got, 1e-9, 1e-9, what);
            for (int s = 0; s < p; s++) {
                int limit = p - s < m ? p - s : m;
                MPT_CHECK(in_flight[s] == limit, "1F1B, p = %d, m = %d, stage %d holds %d micro-batches at most, "
                          "expected min(p-s, m) = %d\n      likely: the warm-up (p-s-1 forwards) is too long or too "
                          "short", p, m, s, in_flight[s], limit);
            }
        }
}

MPT_TEST(tp2_pp2_trains_like_one_rank_4_ranks) {
    enum { STEPS = 4 };
    /* the test model (GPT-2, 2 blocks, C 64) with 4 micro-batches of 8 sequences a step on both; its 14 tokens padded
     * to 16, so each tp rank holds real tokens (0-7 and 8-13): with 64 rank 1 would hold only padding */
    static const char *const ONE[] = {"gradient_accumulation_steps=4", "model.padded_vocab=16", NULL};
    static const char *const MESH[] = {"gradient_accumulation_steps=4", "model.padded_vocab=16",
                                       "tensor_model_parallel_size=2", "pipeline_model_parallel_size=2",
                                       "pipeline_schedule=1f1b", NULL};
    static lab19_result one, mesh;
    lab19_train(&one, 28, "one rank", 1, STEPS, ONE);
    lab19_train(&mesh, 28, "dp 1 x tp 2 x pp 2, 1F1B", 4, STEPS, MESH);
    for (int s = 0; s < STEPS; s++) {
        char what[240];
        snprintf(what, sizeof what, "step %d's loss on tp 2 x pp 2 against one rank's (likely: the vocab-parallel loss "
                 "(part B) or the 1F1B order (part C); parts A-C's tests say which)", s + 1);
        MPT_CHECK_NEAR(one.rank[0].loss[s], mesh.rank[0].loss[s], 1e-5, 0, what);
        snprintf(what, sizeof what, "step %d's gradient norm on tp 2 x pp 2 against one rank's", s + 1);
        MPT_CHECK_NEAR(one.rank[0].grad_norm[s], mesh.rank[0].grad_norm[s], 1e-5, 0, what);
    }
}
