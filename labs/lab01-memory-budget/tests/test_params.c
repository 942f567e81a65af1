/* test_params.c: lab 01 part A: exact parameter counts of a block and of whole models, against hand-derived sums. */
#include "lab01_models.h"
#include "mptest.h"

MPT_TEST(params_gpt2_block) {
    plan_model m = lab01_gpt2_124m();
    /* GPT-2 block, h = 768, F = 4h = 3072:
     *   attention weights  W_qkv 768 x 2304 + W_o 768 x 768     = 4h^2 = 2,359,296
     *   attention biases   2304 + 768                           = 4h   =     3,072
     *   MLP weights        W_fc 768 x 3072 + W_proj 3072 x 768  = 8h^2 = 4,718,592
     *   MLP biases         3072 + 768                           = 5h   =     3,840
     *   two LayerNorms     (weight + bias) x 2                  = 4h   =     3,072
     *   total              12h^2 + 13h = 7,077,888 + 9,984      =        7,087,872 */
    MPT_CHECK_EQ_U64(7087872, plan_block_params(&m),
                     "plan_block_params(GPT-2, h = 768) = 12h^2 + 13h. Too low by 9,984 (13h): the biases or the "
                     "LayerNorm vectors are missing; by 3,072: the LayerNorm biases (LayerNorm has weight AND bias)");
}

MPT_TEST(params_gpt2_124m_exact) {
    plan_model m = lab01_gpt2_124m();
    /* token embedding   V*h = 50257 * 768      =  38,597,376
     * positions         T*h = 1024 * 768       =     786,432
     * 12 blocks         12 * 7,087,872         =  85,054,464
     * final LayerNorm   2h                     =       1,536
     * head              tied to the embedding  =           0
     * total                                    = 124,439,808 (the "124M" of GPT-2 small) */
    uint64_t got = plan_model_params(&m);
    MPT_CHECK_EQ_U64(124439808, got, "plan_model_params(gpt2-124m)");
    if (got == 124439808ULL + 38597376ULL)
        MPT_CHECK(0, "  you added a V x h head, but GPT-2's head is tied: it IS the token embedding");
    if (got == 124439808ULL - 786432ULL)
        MPT_CHECK(0, "  the learned position table (T x h = 786,432) is missing");
    if (got == 124439808ULL - 1536ULL) MPT_CHECK(0, "  the final LayerNorm (2h = 1,536) is missing");
}

MPT_TEST(params_llama_7b_exact) {
    plan_model m = lab01_llama_7b();
    /* LLaMA block, h = 4096, F = 11008, no biases, RMSNorm has a weight only:
     *   attention  W_q, W_k, W_v, W_o: 4h^2              =  67,108,864
     *   SwiGLU     gate, up, down: 3hF = 3*4096*11008     = 135,266,304
     *   two RMSNorms 2h                                   =       8,192
     *   block                                             = 202,383,360
     * model: embedding V*h = 32000*4096 = 131,072,000 (rotary positions: no table)
     *        + 32 blocks = 6,476,267,520 + final RMSNorm h = 4,096 + untied head V*h = 131,072,000
     *        = 6,738,415,616 (the published LLaMA-7B count) */
    MPT_CHECK_EQ_U64(202383360, plan_block_params(&m),
                     "plan_block_params(LLaMA-7B) = 4h^2 + 3hF + 2h: no biases, RMSNorm has no bias, SwiGLU has "
                     "three matrices (mlp_matrices)");
    MPT_CHECK_EQ_U64(6738415616ULL, plan_model_params(&m),
                     "plan_model_params(LLaMA-7B): embedding + 32 blocks + final RMSNorm + untied head; no position "
                     "table (rotary positions have no weights)");
}
