/* test_lab10_hidden.c: lab 10 hidden tests: FLOPs of every preset against a count written differently, tied and
 * untied heads, MFU's proportions, LLaMA's activations (GQA, SwiGLU, RMSNorm), every compute mode against the
 * allocator, how activations grow with B and T, and fp32's prediction against the model's own layout. */
#include "../../../labs/lab10-amp-performance/tests/lab10_util.h"

/* ------------------------------------------------------------------ A. FLOPs */

/* N as a list of the products a token goes through, each (inputs x outputs): the same count written another way. */
static uint64_t matmul_weights_listed(const plan_model *m) {
    uint64_t h = m->hidden, d = m->hidden / m->heads, F = m->ffn;
    uint64_t mats = m->arch == PLAN_ARCH_LLAMA ? 3 : 2;
    uint64_t q = h * (m->heads * d), k = h * (m->kv_heads * d), v = k, o = (m->heads * d) * h;
    uint64_t per_layer = q + k + v + o + mats * h * F;
    return m->layers * per_layer + h * m->vocab;
}

MPT_TEST(flops_every_preset_against_an_independent_count) {
    for (int i = 0; i < plan_preset_count(); i++) {
        const plan_model *m = plan_preset_at(i);
        perf_flops f;
        perf_train_flops_per_token(m, m->context, &f);
        uint64_t n = matmul_weights_listed(m), att = 12 * m->layers * m->context * m->hidden;
        char what[96];
        snprintf(what, sizeof what, "%s at s = %llu", m->name, (unsigned long long)m->context);
        CHECK_FLOPS(&f, n, 6 * n, att, 6 * n + att, what, "see the handout's per-matrix list");
    }
    /* GPT-3 175B (L=96, h=12288, F=4h, V=50257): per block 4 h^2 + 2 h F = 1,811,939,328; N = 96 blocks + the head
     * 617,558,016 = 174,563,733,504; 6N = 1,047,382,401,024 (about 1.05e12); attention at s = 2048:
     * 12 * 96 * 2048 * 12288 = 28,991,029,248 (under 3% of the total). */
    plan_model g;
    MPT_REQUIRE(plan_preset_find("gpt3-175b", &g), "preset gpt3-175b");
    perf_flops f;
    perf_train_flops_per_token(&g, 2048, &f);
    MPT_CHECK_EQ_U64(1047382401024ull, f.dense, "GPT-3 175B: 6N");
    MPT_CHECK_EQ_U64(28991029248ull, f.attention, "GPT-3 175B: attention at s = 2048");
}

/* Tying the head to the token embedding changes the parameter count, not the FLOPs: the head's product happens either
 * way, and the input embedding is a lookup. */
MPT_TEST(flops_untied_head_counts_once) {
    plan_model m;
    MPT_REQUIRE(plan_preset_find("gpt2-124m", &m), "preset gpt2-124m");
    perf_flops tied, untied;
    perf_train_flops_per_token(&m, 512, &tied);
    m.tied_head = false;
    perf_train_flops_per_token(&m, 512, &untied);
    MPT_CHECK_EQ_U64(tied.total, untied.total, "FLOPs per token, tied vs untied head");
    MPT_CHECK_EQ_U64(123532032, untied.matmul_params, "N of GPT-2 124M with an untied head");
}

/* ------------------------------------------------------------------ B. MFU */

MPT_TEST(mfu_proportions) {
    perf_throughput a = perf_throughput_of(1000, 2.0, 3e8, 5e11);
    perf_throughput b = perf_throughput_of(2000, 2.0, 3e8, 5e11);
    perf_throughput c = perf_throughput_of(1000, 2.0, 3e8, 1e12);
    perf_throughput z = perf_throughput_of(0, 1.0, 3e8, 5e11);
    MPT_CHECK_NEAR(500.0, a.tokens_per_s, 1e-12, 0, "1000 tokens in 2 s");
    MPT_CHECK_NEAR(1.5e11, a.flops_per_s, 1e-12, 0, "500 tokens/s at 3e8 FLOPs per token");
    MPT_CHECK_NEAR(0.3, a.mfu, 1e-12, 0, "1.5e11 of a 5e11 peak");
    MPT_CHECK_NEAR(2 * a.mfu, b.mfu, 1e-12, 0, "twice the tokens in the same time: twice the MFU");
    MPT_CHECK_NEAR(a.mfu / 2, c.mfu, 1e-12, 0, "twice the peak: half the MFU");
    MPT_CHECK(z.tokens_per_s == 0 && z.mfu == 0, "no tokens: 0 tokens/s and MFU 0, got %g and %g", z.tokens_per_s,
              z.mfu);
}

/* ------------------------------------------------------------------ C. activations */

/* LLaMA-style: RMSNorm (1/std only), SwiGLU (fch holds gate and up: 2F), grouped-query attention (QKV = (NH + 2 KVH)
 * * HS). L=2, C=64, NH=4, KVH=2 (HS 16: QKV = 128), F = 192 given, V=300 (not padded below 1024), B=2, T=16:
 * N = 32 positions. Per position per block: 5 C + QKV + FC + F = 320 + 128 + 384 + 192 = 1024; attention maps
 * 2 * 4 * 16 * 16 = 2048. Kept in fp16: (2 * (32 * 1024 + 2048) + 32 * (2 * 64 + 300)) * 2 = (69,632 + 13,696) * 2
 * = 166,656. Statistics: (5 norms * 1 + 3) * 32 * 4 = 1,024. */
MPT_TEST(activations_llama_gqa_swiglu_rmsnorm) {
    model_config c = {.arch = MODEL_LLAMA, .V = 300, .maxT = 16, .L = 2, .C = 64, .NH = 4, .KVH = 2, .F = 192};
    model_config_complete(&c);
    MPT_REQUIRE(c.Vp == 300 && c.F == 192 && c.KVH == 2, "config completed to Vp %d, F %d, KVH %d", c.Vp, c.F, c.KVH);
    perf_activations a;
    perf_activation_bytes(&c, 2, 16, MODEL_COMPUTE_FP16, &a);
    MPT_CHECK_EQ_U64(166656, a.kept, "kept bytes, LLaMA-style, fp16 (worked in the comment above)");
    MPT_CHECK_EQ_U64(1024, a.statistics, "statistics bytes: RMSNorm keeps only 1/std");
    CHECK_ACT_MEASURED(&c, 2, 16, MODEL_COMPUTE_FP16, 0.02, "LLaMA-style");
    CHECK_ACT_MEASURED(&c, 2, 16, MODEL_COMPUTE_FP32, 0.02, "LLaMA-style");
}

/* Every compute mode but fp8 (its casts are lab 25's code, a later lab; its activations are stored as bf16's),
 * at a shape with odd sizes (the allocator rounds each buffer up to 64 bytes). */
MPT_TEST(activations_every_mode_matches_the_allocator) {
    static const model_compute modes[] = {MODEL_COMPUTE_FP32, MODEL_COMPUTE_TF32, MODEL_COMPUTE_BF16,
                                          MODEL_COMPUTE_FP16};
    model_config a = lab10_gpt2(3, 48, 6, 97, 13), b = lab10_gpt2(2, 64, 4, 1100, 32);
    for (int i = 0; i < 4; i++) {
        CHECK_ACT_MEASURED(&a, 3, 13, modes[i], 0.01, "L=3 C=48 NH=6 V=97");
        CHECK_ACT_MEASURED(&b, 5, 32, modes[i], 0.01, "L=2 C=64 NH=4 V=1100 (padded to 1152)");
    }
}

/* Doubling B doubles every kept tensor; doubling T doubles the per-position ones and quadruples the attention maps. */
MPT_TEST(activations_grow_with_batch_and_t_squared) {
    model_config c = lab10_gpt2(2, 64, 4, 300, 64);
    perf_activations a, b2, t2;
    perf_activation_bytes(&c, 2, 16, MODEL_COMPUTE_BF16, &a);
    perf_activation_bytes(&c, 4, 16, MODEL_COMPUTE_BF16, &b2);
    perf_activation_bytes(&c, 2, 32, MODEL_COMPUTE_BF16, &t2);
    MPT_CHECK_EQ_U64(2 * a.kept, b2.kept, "kept bytes at B=4 vs 2x those at B=2");
    MPT_CHECK_EQ_U64(2 * a.statistics, b2.statistics, "statistics at B=4 vs 2x those at B=2");
    uint64_t maps = 2ull * 2 * 4 * 16 * 16 * 2; /* L * B * NH * T * T * 2 bytes at T=16 */
    MPT_CHECK_EQ_U64(2 * (a.kept - maps) + 4 * maps, t2.kept, "kept bytes at T=32: per-position tensors x2, maps x4");
}

/* fp32 keeps exactly the model's fp32 layout (model_activation_bytes) when no buffer needs rounding up. */
MPT_TEST(activations_fp32_equals_the_models_layout) {
    model_config c = lab10_gpt2(4, 128, 4, 2842, 64);
    perf_activations a;
    perf_activation_bytes(&c, 8, 64, MODEL_COMPUTE_FP32, &a);
    MPT_CHECK_EQ_U64(model_activation_bytes(&c, 8, 64), a.total, "fp32 MEM_ACT: perf vs model_activation_bytes");
}
