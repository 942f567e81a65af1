/* test_lab10_flops.c: lab 10 visible tests, part A: model FLOPs per token of a training step
 * (perf_train_flops_per_token in core/plan/perf.c), against the numbers worked out by hand in the handout. */
#include "lab10_util.h"

static plan_model preset(const char *name) {
    plan_model m;
    MPT_REQUIRE(plan_preset_find(name, &m), "preset %s is missing from plan/tables.c", name);
    return m;
}

/* GPT-2 124M (L=12, h=768, F=3072, V=50257). Per block: Q, K, V, output 4 h^2 = 2,359,296, MLP 2 h F = 4,718,592:
 * 7,077,888; 12 blocks 84,934,656; the head V h = 38,597,376; N = 123,532,032, 6N = 741,192,192. Attention at
 * s = 1024: 12 * 12 * 1024 * 768 = 113,246,208; total 854,438,400 FLOPs per token. At s = 64 the attention term is
 * 7,077,888 and the total 748,270,080. */
MPT_TEST(flops_gpt2_124m_by_hand) {
    plan_model m = preset("gpt2-124m");
    perf_flops f;
    LAB10_OBSERVE_FLOPS(&m);
    perf_train_flops_per_token(&m, 1024, &f);
    CHECK_FLOPS(&f, 123532032, 741192192, 113246208, 854438400, "GPT-2 124M at s = 1024",
                "N counts Q, K, V and the output projection (4 h^2 without GQA), the MLP's 2 h F per block and the head "
                "V h once; no embeddings, biases or norms. Attention is 12 L s h");
    perf_train_flops_per_token(&m, 64, &f);
    CHECK_FLOPS(&f, 123532032, 741192192, 7077888, 748270080, "GPT-2 124M at s = 64 (make lab10's batch)",
                "the attention term uses the run's sequence length s, not the model's context");
}

/* LLaMA 1.1B (TinyLlama's shape: L=22, h=2048, 32 query heads, 4 key/value heads of 64, F=5632, V=32000, untied).
 * K and V are h x (4 * 64 = 256) each: per block h^2 (Q) + 2 * 2048 * 256 (K, V) + h^2 (output) + 3 h F (SwiGLU's
 * gate, up, down) = 44,040,192; 22 blocks 968,884,224; the head 65,536,000; N = 1,034,420,224. At s = 2048 the
 * attention term is 12 * 22 * 2048 * 2048 = 1,107,296,256. */
MPT_TEST(flops_llama_1b_three_mlp_matrices_and_gqa) {
    plan_model m = preset("llama-1b");
    perf_flops f;
    LAB10_OBSERVE_FLOPS(&m);
    perf_train_flops_per_token(&m, 2048, &f);
    CHECK_FLOPS(&f, 1034420224, 6206521344, 1107296256, 7313817600, "LLaMA 1.1B at s = 2048",
                "K and V are h x (kv_heads * h/heads) with grouped-query attention; the MLP has arch->mlp_matrices "
                "(3 for SwiGLU) matrices of h x F; an untied head is still one V x h product, the input embedding "
                "is a lookup");
}

/* The dense term does not depend on s; attention grows linearly with it. */
MPT_TEST(flops_attention_grows_with_the_sequence) {
    plan_model m = preset("gpt2-350m");
    perf_flops a, b;
    perf_train_flops_per_token(&m, 256, &a);
    perf_train_flops_per_token(&m, 1024, &b);
    MPT_CHECK(a.dense == b.dense && a.matmul_params == b.matmul_params,
              "6N at s = 256 (%llu) and s = 1024 (%llu) must be the same: the weights do not depend on s",
              (unsigned long long)a.dense, (unsigned long long)b.dense);
    MPT_CHECK_EQ_U64(4 * a.attention, b.attention, "attention FLOPs at s = 1024 vs 4x those at s = 256");
    MPT_CHECK_EQ_U64(12ull * 24 * 1024 * 1024, b.attention, "GPT-2 350M (L=24, h=1024) attention at s = 1024");
    MPT_CHECK_EQ_U64(b.dense + b.attention, b.total, "total = dense + attention");
}
