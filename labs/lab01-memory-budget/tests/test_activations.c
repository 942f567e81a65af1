/* test_activations.c: lab 01 part C: activation bytes of a block (Korthikanti et al. 2022) and of the model. */
#include "lab01_models.h"
#include "mptest.h"

/* GPT-2 124M at s = 1024, b = 1: sbh = 1024 * 768 = 786,432 and a s^2 b = 12 * 1024^2 = 12,582,912. */

MPT_TEST(activations_block_korthikanti) {
    plan_model m = lab01_gpt2_124m();
    plan_run run = lab01_run(PLAN_RECIPE_BF16_MIXED, PLAN_OPT_ADAMW, 0, 1, 1, 1024, PLAN_RECOMPUTE_NONE, true);
    /* sbh(34 + 5as/h) = 34 sbh + 5 a s^2 b = 26,738,688 + 62,914,560 = 89,653,248 bytes.
     * From elements: 16 sbh + 2 as^2b = 12,582,912 + 25,165,824 = 37,748,736 elements x 2 bytes = 75,497,472,
     * plus 1-byte masks 2 sbh + as^2b = 1,572,864 + 12,582,912 = 14,155,776: 89,653,248. */
    uint64_t got = plan_block_activation_bytes(&m, &run, true);
    MPT_CHECK_EQ_U64(89653248, got, "one GPT-2 124M block, bf16, dropout on: sbh(34 + 5as/h)");
    if (got == 75497472) MPT_CHECK(0, "  that is without the 1-byte dropout masks (2sbh + as^2b)");
    if (got == 89653248ULL + 14155776ULL) MPT_CHECK(0, "  the masks were counted at 2 bytes; a mask is 1 byte");
    /* Selective recompute drops every a s^2 b term: 34 sbh = 26,738,688. */
    got = plan_block_activation_bytes(&m, &run, false);
    MPT_CHECK_EQ_U64(26738688, got,
                     "one block without the attention scores (keep_scores = false): 34 sbh; drop the softmax "
                     "output, its dropped-out copy and its mask, keep everything else");
    /* Twice the batch: every term is linear in b. */
    run.batch = 2;
    MPT_CHECK_EQ_U64(2 * 89653248ULL, plan_block_activation_bytes(&m, &run, true),
                     "b = 2 doubles every term (each tensor has a factor b)");
    /* Half the sequence: sbh halves, a s^2 b quarters: 34 * 393,216 + 5 * 12 * 512^2 = 13,369,344 + 15,728,640. */
    run.batch = 1;
    run.seq = 512;
    MPT_CHECK_EQ_U64(29097984, plan_block_activation_bytes(&m, &run, true),
                     "s = 512: 34 sbh halves, 5 as^2b quarters (the scores grow with s squared)");
}

MPT_TEST(activations_model_gpt2_124m) {
    plan_model m = lab01_gpt2_124m();
    plan_run run = lab01_run(PLAN_RECIPE_BF16_MIXED, PLAN_OPT_ADAMW, 0, 1, 1, 1024, PLAN_RECOMPUTE_NONE, true);
    /* Outside the blocks: final-norm input + head input 2 sbh elements x 2 bytes = 3,145,728, the embedding
     * dropout mask sbh = 786,432, and fp32 logits 4 sbV = 4 * 1024 * 50257 = 205,852,672: 209,784,832. */
    const uint64_t outside = 209784832ULL;
    plan_activations act;
    plan_activation_bytes(&m, &run, &act);
    MPT_CHECK_EQ_U64(outside, act.outside,
                     "outside the blocks: 2sbh x 2 bytes + sbh embedding-dropout mask + 4sbV fp32 logits");
    /* No recompute: 12 x 89,653,248 + 209,784,832 = 1,075,838,976 + 209,784,832 = 1,285,623,808. */
    MPT_CHECK_EQ_U64(89653248, act.block_kept, "recompute none: each block keeps its full set");
    MPT_CHECK_EQ_U64(0, act.working_set, "recompute none: no working set");
    MPT_CHECK_EQ_U64(1285623808ULL, act.total, "recompute none: L x block + outside");

    /* Selective: 12 x 34 sbh = 12 x 26,738,688 = 320,864,256, + 209,784,832 = 530,649,088. */
    run.recompute = PLAN_RECOMPUTE_SELECTIVE;
    plan_activation_bytes(&m, &run, &act);
    MPT_CHECK_EQ_U64(26738688, act.block_kept, "recompute selective: a block keeps 34 sbh");
    MPT_CHECK_EQ_U64(530649088ULL, act.total, "recompute selective: L x 34sbh + outside");

    /* Full: each block keeps only its input, sbh elements x 2 bytes = 1,572,864; one block's full set
     * (89,653,248) is rebuilt at a time: 12 x 1,572,864 + 89,653,248 + 209,784,832 = 318,312,448. */
    run.recompute = PLAN_RECOMPUTE_FULL;
    plan_activation_bytes(&m, &run, &act);
    MPT_CHECK_EQ_U64(1572864, act.block_kept, "recompute full: a block keeps its input only (sbh x 2 bytes)");
    MPT_CHECK_EQ_U64(89653248, act.working_set, "recompute full: one block's full set while it is recomputed");
    MPT_CHECK_EQ_U64(318312448ULL, act.total, "recompute full: L x 2sbh + one block + outside");
}

MPT_TEST(plan_llama_1b_does_not_fit_24gb) {
    /* The capstone model, bf16-mixed + AdamW on one rank, b = 1, s = 2048, no dropout.
     * Psi = 1,100,048,384 (block 2h^2 + 2h*g*d + 3hF + 2h = 8,388,608 + 1,048,576 + 34,603,008 + 4,096
     * = 44,044,288; model 32000*2048 + 22 x 44,044,288 + 2048 + 32000*2048).
     * Model states 16 Psi = 17,600,774,144 bytes.
     * Block, sb = 2048, g*d = 4 * 64 = 256: 6sbh + 2sb*256 + 3sbF + as^2b
     *   = 25,165,824 + 1,048,576 + 34,603,008 + 134,217,728 = 195,035,136 elements x 2 = 390,070,272 bytes.
     * Outside: 2sbh x 2 = 16,777,216 + 4sbV = 262,144,000: 278,921,216.
     * Activations 22 x 390,070,272 + 278,921,216 = 8,860,467,200. Total 26,461,241,344 > 24e9. */
    plan_model m = {.name = "llama-1b", .arch = PLAN_ARCH_LLAMA, .layers = 22, .hidden = 2048, .heads = 32,
                    .kv_heads = 4, .ffn = 5632, .vocab = 32000, .context = 2048, .tied_head = false};
    plan_run run = lab01_run(PLAN_RECIPE_BF16_MIXED, PLAN_OPT_ADAMW, 0, 1, 1, 2048, PLAN_RECOMPUTE_NONE, false);
    plan_result r;
    plan_compute(&m, &run, &r);
    MPT_CHECK_EQ_U64(17600774144ULL, r.model_state_bytes, "llama-1b model states: 16 bytes x 1,100,048,384");
    MPT_CHECK_EQ_U64(8860467200ULL, r.bytes[MEM_ACT], "llama-1b activations, b = 1, s = 2048");
    MPT_CHECK_EQ_U64(26461241344ULL, r.total_bytes, "llama-1b total on one rank");
    MPT_CHECK(r.total_bytes > 24000000000ULL, "llama-1b with plain AdamW should not fit in 24 GB");
    /* ZeRO-3 over 8 ranks: model states 16 x ceil(Psi/8) = 16 x 137,506,048 = 2,200,096,768; the
     * activations do not shrink: 2,200,096,768 + 8,860,467,200 = 11,060,563,968. */
    run.zero_stage = 3;
    run.world = 8;
    plan_compute(&m, &run, &r);
    MPT_CHECK_EQ_U64(11060563968ULL, r.total_bytes, "llama-1b, ZeRO-3 over 8 ranks: states / 8, activations as is");
}
