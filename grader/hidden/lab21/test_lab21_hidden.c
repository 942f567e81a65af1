/* test_lab21_hidden.c: lab 21 hidden tests: odd shapes, grouped-query heads, long positions, edge steps of the
 * schedule, decay groups of more models, perplexity's edge cases. */
#include "../../../labs/lab21-transformers/tests/lab21_util.h"

/* A single row, an odd channel count, one channel. */
MPT_TEST(hidden_rmsnorm_odd_shapes) {
    lab21_check_rmsnorm(1, 13, 0.5f, 101);
    lab21_check_rmsnorm(7, 1, 0.0f, 102);
    lab21_check_rmsnorm(3, 257, -2.0f, 103);
}

/* Grouped-query attention (6 query heads sharing 3 and 1 key/value heads) and odd batch and sequence sizes. */
MPT_TEST(hidden_rope_gqa_and_odd_shapes) {
    lab21_check_rope(3, 5, 6, 3, 4, 10000.0f, 111);
    lab21_check_rope(1, 11, 6, 1, 2, 500000.0f, 112);
}

/* Long positions: T = 4096, head size 64. At t = 4095 pair 0's angle is 4095 radians: an angle or frequency computed
 * in float is off by about 1e-4 rad there, which the double reference sees. */
MPT_TEST(hidden_rope_long_positions) {
    lab21_check_rope(1, 4096, 1, 1, 64, 10000.0f, 121);
}

MPT_TEST(hidden_swiglu_odd_shapes_and_saturated_gates) {
    lab21_check_swiglu(1, 1, 1.0f, 131);
    lab21_check_swiglu(9, 7, 8.0f, 132); /* gates to about +-25: sigmoid saturates to 0 and 1 */
}

/* No warmup (W = 0), a one-step warmup, a decay of one step, t < 0, far past T. */
MPT_TEST(hidden_schedule_edge_steps) {
    CHECK_LR(0, 0, 100, 0, 1e-3, 1e-4, "W = 0: the peak at t = 0");
    CHECK_LR(50, 0, 100, 0, 1e-3, 1e-4, "W = 0: the cosine's middle at t = 50");
    CHECK_LR(0, 1, 10, 2e-4, 1e-3, 0, "W = 1: t = 0 is the start");
    CHECK_LR(1, 1, 10, 2e-4, 1e-3, 0, "W = 1: t = 1 is the peak");
    CHECK_LR(5, 5, 6, 0, 1e-3, 1e-4, "T = W + 1: the peak at t = W");
    CHECK_LR(6, 5, 6, 0, 1e-3, 1e-4, "T = W + 1: the end one step later");
    CHECK_LR(-3, 10, 100, 1e-5, 1e-3, 1e-4, "t < 0 counts as 0");
    CHECK_LR(1000000000L, 10, 100, 0, 1e-3, 1e-4, "far beyond T: end");
    CHECK_LR(7, 10, 100, 5e-4, 5e-4, 1e-4, "start = peak: flat warmup");
    for (int k = 0; k < 30; k++) {
        long W = (long)(mp_hash32(mpt_seed(), (uint64_t)k) % 50), T = W + 1 + (long)(mp_hash32(mpt_seed(), k + 99u) % 500);
        long t = (long)(mp_hash32(mpt_seed(), k + 999u) % (uint64_t)(T + 60)) - 5;
        CHECK_LR(t, W, T, 1e-6, 2e-3, 2e-5, "W, T and t drawn from the seed");
    }
}

/* Models with more blocks than ten (names "h.10.ln1w"), one block, untied GPT-2 and tied LLaMA-style heads. */
MPT_TEST(hidden_decay_groups_more_models) {
    model_config deep = {.arch = MODEL_LLAMA, .V = 33, .maxT = 8, .L = 12, .C = 16, .NH = 2, .tied = true};
    lab21_check_decay_groups(&deep, "LLaMA-style, L=12, tied");
    model_config one = {.arch = MODEL_GPT2, .V = 33, .maxT = 8, .L = 1, .C = 16, .NH = 2, .tied = false};
    lab21_check_decay_groups(&one, "GPT-2, L=1, untied head");
    MPT_CHECK_EQ_I64(DECAY_GROUP_WEIGHT, decay_group_of("head", 2), "an untied output head is a weight matrix");
    MPT_CHECK_EQ_I64(DECAY_GROUP_NORM, decay_group_of("h.123.ln2b", 1), "a LayerNorm's bias belongs to the norm group");
    MPT_CHECK_EQ_I64(DECAY_GROUP_BIAS, decay_group_of("h.7.fcprojb", 1), "a linear layer's bias");
}

/* Nothing counted, every position counted with the same loss, and real losses from the cross-entropy with masking. */
MPT_TEST(hidden_perplexity_edges_and_real_losses) {
    const float z[3] = {0, 0, 0};
    const int none[3] = {-1, -1, -1};
    lab21_check_perplexity(z, none, 3, "every position masked");
    eval_totals empty = {0};
    MPT_CHECK(isnan(eval_perplexity(&empty)), "no token at all: perplexity NAN, got %g", eval_perplexity(&empty));
    enum { V = 37, M = 40 };
    float logits[M * V], loss[M], lse[M];
    int tg[M];
    lab21_fill(logits, M * V, 0.0f, 2.0f, 141);
    for (int i = 0; i < M; i++) tg[i] = mp_hash32(mpt_seed(), (uint64_t)i) % 3 == 0 ? -1 : (int)(mp_hash32(mpt_seed(), i + 500u) % V);
    crossentropy_forward(loss, lse, logits, tg, M, V, V);
    lab21_check_perplexity(loss, tg, M, "cross-entropy losses of random logits, a third masked");
}
