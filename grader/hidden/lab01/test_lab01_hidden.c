/* test_lab01_hidden.c: lab 01 hidden tests: GQA, untied heads, world sizes that do not divide, other recipes,
 * dropout off, fp32 activations, full recompute of a LLaMA model, the compute budget of random models. Expected
 * values are derived in comments. */
#include <math.h>
#include <stdio.h>

#include "mptest.h"
#include "base/rng.h"
#include "plan/plan.h"

static plan_model hidden_gpt2_124m(void) {
    return (plan_model){.name = "gpt2-124m", .arch = PLAN_ARCH_GPT2, .layers = 12, .hidden = 768, .heads = 12,
                        .kv_heads = 12, .ffn = 3072, .vocab = 50257, .context = 1024, .tied_head = true};
}

static plan_model hidden_llama_1b(void) {
    return (plan_model){.name = "llama-1b", .arch = PLAN_ARCH_LLAMA, .layers = 22, .hidden = 2048, .heads = 32,
                        .kv_heads = 4, .ffn = 5632, .vocab = 32000, .context = 2048, .tied_head = false};
}

static plan_run hidden_run(plan_recipe recipe, plan_optimizer optimizer, int zero_stage, uint64_t world,
                           uint64_t batch, uint64_t seq, plan_recompute recompute, bool dropout) {
    return (plan_run){.recipe = recipe, .optimizer = optimizer, .zero_stage = zero_stage, .world = world,
                      .batch = batch, .seq = seq, .recompute = recompute, .dropout = dropout};
}

MPT_TEST(hidden_params_llama_1b_gqa) {
    plan_model m = hidden_llama_1b();
    /* h = 2048, a = 32 so d = 64; g = 4 KV heads, so W_k and W_v are 2048 x 256 each.
     *   W_q + W_o 2h^2 = 8,388,608;  W_k + W_v 2 * 2048 * 256 = 1,048,576
     *   SwiGLU 3hF = 3 * 2048 * 5632 = 34,603,008;  two RMSNorms 2h = 4,096
     *   block = 44,044,288 (with K, V at full width h it would be 51,384,320: GQA saves 7,340,032)
     * model = 32000*2048 + 22 * 44,044,288 + 2048 + 32000*2048
     *       = 65,536,000 + 968,974,336 + 2,048 + 65,536,000 = 1,100,048,384 */
    uint64_t block = plan_block_params(&m);
    MPT_CHECK_EQ_U64(44044288, block, "llama-1b block with grouped-query attention (W_k, W_v are h x g*d)");
    if (block == 51384320)
        MPT_CHECK(0, "  K and V were counted at full width h; with g = 4 KV heads they are g*d = 256 wide");
    MPT_CHECK_EQ_U64(1100048384ULL, plan_model_params(&m), "llama-1b model (untied head, no position table)");
}

MPT_TEST(hidden_params_gpt2_gqa_biases) {
    /* A small GPT-2-style model with grouped-query attention: L = 2, h = 256, a = 8 (d = 32), g = 2 (g*d = 64),
     * F = 1024, V = 1000, T = 128, tied head.
     *   weights: 2h^2 = 131,072; 2h*g*d = 32,768; 2hF = 524,288     -> 688,128
     *   biases:  q,k,v 256 + 2*64 = 384; attention out 256; fc 1024; proj 256 -> 1,920
     *   LayerNorms 4h = 1,024
     *   block = 691,072
     * model = V*h 256,000 + T*h 32,768 + 2 * 691,072 + final LayerNorm 512 = 1,671,424 */
    plan_model m = {.name = "tiny-gqa", .arch = PLAN_ARCH_GPT2, .layers = 2, .hidden = 256, .heads = 8,
                    .kv_heads = 2, .ffn = 1024, .vocab = 1000, .context = 128, .tied_head = true};
    MPT_CHECK_EQ_U64(691072, plan_block_params(&m),
                     "GPT-2 block with GQA: the qkv bias is h + 2*g*d wide, like the qkv weight's output");
    MPT_CHECK_EQ_U64(1671424, plan_model_params(&m), "tiny GPT-2 with GQA, whole model");
}

MPT_TEST(hidden_params_untied_head) {
    plan_model m = hidden_gpt2_124m();
    m.tied_head = false;
    /* An untied head adds its own V x h matrix: 124,439,808 + 50257 * 768 = 124,439,808 + 38,597,376. */
    MPT_CHECK_EQ_U64(163037184ULL, plan_model_params(&m), "gpt2-124m with an untied head: + V*h");
    plan_model l = hidden_llama_1b();
    l.tied_head = true;
    /* Tying LLaMA-1B's head removes 32000 * 2048 = 65,536,000: 1,034,512,384. */
    MPT_CHECK_EQ_U64(1034512384ULL, plan_model_params(&l), "llama-1b with a tied head: - V*h");
}

MPT_TEST(hidden_zero_world_not_dividing) {
    /* Psi = 124,439,808 over N = 7: 124,439,808 / 7 = 17,777,115.43, so each rank holds
     * ceil = 17,777,116 elements (the flat buffer is padded to 7 x 17,777,116 = 124,439,812).
     * bf16-mixed + AdamW: 2, 2, 4, 8 bytes per parameter. */
    const uint64_t psi = 124439808ULL, shard = 17777116ULL;
    const uint64_t expected[4][4] = {
        {2 * psi, 2 * psi, 4 * psi, 8 * psi},
        {2 * psi, 2 * psi, 4 * shard, 8 * shard},
        {2 * psi, 2 * shard, 4 * shard, 8 * shard},
        {2 * shard, 2 * shard, 4 * shard, 8 * shard},
    };
    for (int stage = 0; stage < 4; stage++) {
        plan_run run = hidden_run(PLAN_RECIPE_BF16_MIXED, PLAN_OPT_ADAMW, stage, 7, 1, 1024, PLAN_RECOMPUTE_NONE, true);
        uint64_t got[MEM_NTAGS];
        plan_model_state_bytes(psi, &run, got);
        for (int tag = MEM_PARAM; tag <= MEM_OPTIM; tag++) {
            char what[200];
            snprintf(what, sizeof what, "ZeRO-%d over N = 7, tag %s: a rank holds ceil(Psi/N) = 17,777,116 "
                     "elements of a sharded state (round up: floor would lose 4 parameters)", stage,
                     mem_tag_name((mem_tag)tag));
            MPT_CHECK_EQ_U64(expected[stage][tag], got[tag], what);
        }
    }
    /* N larger than Psi: 5 parameters over 8 ranks still cost each rank ceil(5/8) = 1 element. */
    plan_run run = hidden_run(PLAN_RECIPE_FP32, PLAN_OPT_SGD, 3, 8, 1, 1, PLAN_RECOMPUTE_NONE, false);
    uint64_t got[MEM_NTAGS];
    plan_model_state_bytes(5, &run, got);
    MPT_CHECK_EQ_U64(4, got[MEM_PARAM], "5 fp32 parameters over 8 ranks at ZeRO-3: 1 element = 4 bytes per rank");
}

MPT_TEST(hidden_bytes_bf16_pure_and_lamb) {
    /* bf16-pure keeps everything in bf16 and has no master copy: LAMB's m and v at 2 bytes each.
     * bytes per parameter 2 + 2 + 0 + 2*2 = 8. */
    uint64_t per[MEM_NTAGS];
    plan_bytes_per_param(PLAN_RECIPE_BF16_PURE, PLAN_OPT_LAMB, per);
    MPT_CHECK_EQ_U64(2, per[MEM_PARAM], "bf16-pure weights");
    MPT_CHECK_EQ_U64(2, per[MEM_GRAD], "bf16-pure gradients");
    MPT_CHECK_EQ_U64(0, per[MEM_MASTER], "bf16-pure has no master copy");
    MPT_CHECK_EQ_U64(4, per[MEM_OPTIM], "bf16-pure LAMB: two states in bf16");
    /* fp16-mixed + momentum at ZeRO-2 over N = 3, Psi = 1,000,000: shard ceil(1,000,000/3) = 333,334.
     *   param 2 Psi = 2,000,000; grad 2 x 333,334 = 666,668; master 4 x 333,334 = 1,333,336;
     *   optim 4 x 333,334 = 1,333,336 (one fp32 momentum buffer) */
    plan_run run = hidden_run(PLAN_RECIPE_FP16_MIXED, PLAN_OPT_MOMENTUM, 2, 3, 1, 1, PLAN_RECOMPUTE_NONE, false);
    uint64_t got[MEM_NTAGS];
    plan_model_state_bytes(1000000, &run, got);
    MPT_CHECK_EQ_U64(2000000, got[MEM_PARAM], "ZeRO-2 keeps whole fp16 weights");
    MPT_CHECK_EQ_U64(666668, got[MEM_GRAD], "ZeRO-2 shards gradients: 2 x ceil(1e6/3)");
    MPT_CHECK_EQ_U64(1333336, got[MEM_MASTER], "ZeRO-2 shards the master copy: 4 x 333,334");
    MPT_CHECK_EQ_U64(1333336, got[MEM_OPTIM], "ZeRO-2 shards momentum: 4 x 333,334");
}

MPT_TEST(hidden_activations_dropout_off) {
    plan_model m = hidden_gpt2_124m();
    plan_run run = hidden_run(PLAN_RECIPE_BF16_MIXED, PLAN_OPT_ADAMW, 0, 1, 1, 1024, PLAN_RECOMPUTE_NONE, false);
    /* Without dropout there are no masks, and the softmax output itself multiplies V, so one a s^2 b tensor:
     * (16 sbh + as^2b) x 2 bytes = (12,582,912 + 12,582,912) x 2 = 50,331,648. */
    uint64_t got = plan_block_activation_bytes(&m, &run, true);
    MPT_CHECK_EQ_U64(50331648, got, "one GPT-2 124M block, bf16, dropout off: (16sbh + as^2b) x 2");
    if (got == 75497472)
        MPT_CHECK(0, "  with dropout off the dropped-out copy of the scores does not exist: one a s^2 b tensor, "
                     "not two");
    if (got == 89653248) MPT_CHECK(0, "  dropout is off: no masks and no dropped-out copy");
    /* Selective: 16 sbh x 2 = 25,165,824; no masks. */
    MPT_CHECK_EQ_U64(25165824, plan_block_activation_bytes(&m, &run, false), "dropout off, no scores: 16sbh x 2");
    /* Outside: 2sbh x 2 + 4sbV, no embedding mask = 3,145,728 + 205,852,672 = 208,998,400. */
    plan_activations act;
    plan_activation_bytes(&m, &run, &act);
    MPT_CHECK_EQ_U64(208998400, act.outside, "outside the blocks with dropout off: no embedding-dropout mask");
}

MPT_TEST(hidden_activations_fp32) {
    plan_model m = hidden_gpt2_124m();
    plan_run run = hidden_run(PLAN_RECIPE_FP32, PLAN_OPT_ADAM, 0, 1, 1, 1024, PLAN_RECOMPUTE_NONE, true);
    /* fp32 activations: 4 bytes an element, masks still 1 byte:
     * 4 x (16 sbh + 2 as^2b) + 2 sbh + as^2b = 4 x 37,748,736 + 14,155,776 = 165,150,720. */
    uint64_t got = plan_block_activation_bytes(&m, &run, true);
    MPT_CHECK_EQ_U64(165150720, got, "one GPT-2 124M block with fp32 activations (masks stay 1 byte)");
    if (got == 179306496) MPT_CHECK(0, "  the masks were counted at 2 bytes");
    if (got == 89653248) MPT_CHECK(0, "  that is the 16-bit number: take the element size from the recipe's acts");
    /* Outside: 2 sbh x 4 = 6,291,456 + sbh mask 786,432 + 4sbV 205,852,672 = 212,930,560. */
    plan_activations act;
    plan_activation_bytes(&m, &run, &act);
    MPT_CHECK_EQ_U64(212930560, act.outside, "outside the blocks with fp32 activations");
    /* Whole model: 12 x 165,150,720 + 212,930,560 = 1,981,808,640 + 212,930,560 = 2,194,739,200. */
    MPT_CHECK_EQ_U64(2194739200ULL, act.total, "gpt2-124m fp32 activations, no recompute");
}

MPT_TEST(hidden_activations_llama_full_recompute) {
    plan_model m = hidden_llama_1b();
    plan_run run = hidden_run(PLAN_RECIPE_BF16_MIXED, PLAN_OPT_ADAMW, 0, 1, 2, 1024, PLAN_RECOMPUTE_FULL, false);
    /* b = 2, s = 1024: sb = 2048, sbh = 2048 * 2048 = 4,194,304.
     * One block: 6sbh 25,165,824 + 2sb*g*d 2 * 2048 * 256 = 1,048,576 + 3sbF 3 * 2048 * 5632 = 34,603,008
     *            + a s^2 b 32 * 1024^2 * 2 = 67,108,864 -> 127,926,272 elements x 2 = 255,852,544 bytes.
     * Full recompute keeps each block's input: sbh x 2 = 8,388,608 bytes a block.
     * Outside: 2 sbh x 2 = 16,777,216 + 4 sbV 4 * 2048 * 32000 = 262,144,000 -> 278,921,216.
     * Total: 22 x 8,388,608 + 255,852,544 + 278,921,216 = 184,549,376 + 534,773,760 = 719,323,136. */
    plan_activations act;
    plan_activation_bytes(&m, &run, &act);
    MPT_CHECK_EQ_U64(255852544, act.block_full, "llama-1b block, b = 2, s = 1024, no dropout");
    MPT_CHECK_EQ_U64(8388608, act.block_kept, "full recompute keeps only the block input: sbh x 2 bytes");
    MPT_CHECK_EQ_U64(255852544, act.working_set, "full recompute: one block's full set while it is rebuilt");
    MPT_CHECK_EQ_U64(278921216, act.outside, "llama-1b outside the blocks: no dropout mask, fp32 logits");
    MPT_CHECK_EQ_U64(719323136ULL, act.total, "llama-1b, full recompute: L x block input + one block + outside");
}

/* ------------------------------------------------------------------ part D: the compute budget */

/* Random models and runs (from this grade's seed) against the formulas: 6 N D + 12 L s h D over G * peak * MFU. */
MPT_TEST(hidden_budget_random_models) {
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed() ^ 0x0b0d);
    for (int t = 0; t < 20; t++) {
        uint64_t heads = 1 + mp_rng_u32(&rng) % 16;
        plan_model m = {.name = "random", .arch = (plan_arch)(mp_rng_u32(&rng) % 2), .layers = 1 + mp_rng_u32(&rng) % 48,
                        .hidden = heads * 64 * (1 + mp_rng_u32(&rng) % 8), .heads = heads, .kv_heads = heads,
                        .vocab = 1000 + mp_rng_u32(&rng) % 60000, .context = 4096, .tied_head = mp_rng_u32(&rng) % 2};
        m.ffn = plan_default_ffn(m.arch, m.hidden);
        uint64_t seq = 1 + mp_rng_u32(&rng) % 4096;
        plan_budget_in in = {.tokens = t % 3 ? 1e9 * (1 + mp_rng_u32(&rng) % 5000) : 0,
                             .gpus = 1 + mp_rng_u32(&rng) % 4096, .peak_flops = 1e14 * (1 + mp_rng_u32(&rng) % 20),
                             .mfu = 0.05 + 0.9 * mp_rng_uniform(&rng)};
        plan_budget b;
        plan_training_budget(&m, seq, &in, &b);
        double N = (double)plan_model_params(&m), D = in.tokens > 0 ? in.tokens : 20 * N;
        double total = 6 * N * D + 12.0 * (double)m.layers * (double)seq * (double)m.hidden * D;
        MPT_CHECK_NEAR(total, b.total_flops, 1e-9, 0, "total FLOPs of a random model");
        MPT_CHECK_NEAR(total / (in.gpus * in.peak_flops * in.mfu), b.seconds, 1e-9, 0, "seconds of a random run");
        MPT_CHECK_NEAR(b.seconds * in.gpus / 3600, b.gpu_hours, 1e-9, 0, "GPU-hours of a random run");
    }
}
