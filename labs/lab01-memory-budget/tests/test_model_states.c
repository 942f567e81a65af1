/* test_model_states.c: lab 01 part B: bytes per parameter for each recipe, and ZeRO sharding per rank. */
#include <stdio.h>

#include "lab01_models.h"
#include "mptest.h"

static const char *const tag_names[MEM_NTAGS] = {"param", "grad", "master", "optim", "act", "comm", "other"};

/* Compare a whole per-tag array, naming the tag that differs. */
static void check_tags(const uint64_t expected[MEM_NTAGS], const uint64_t got[MEM_NTAGS], const char *what,
                       const char *hint) {
    for (int tag = 0; tag < MEM_NTAGS; tag++) {
        char label[320];
        snprintf(label, sizeof label, "%s: %s bytes%s%s", what, tag_names[tag], hint ? " -- " : "", hint ? hint : "");
        MPT_CHECK_EQ_U64(expected[tag], got[tag], label);
    }
}

MPT_TEST(bytes_per_param_by_recipe) {
    uint64_t got[MEM_NTAGS];
    /* fp16-mixed + Adam, the ZeRO paper's accounting: fp16 weights 2 + fp16 grads 2 + K, where
     * K = fp32 master 4 + fp32 m 4 + fp32 v 4 = 12; 16 bytes in all. */
    plan_bytes_per_param(PLAN_RECIPE_FP16_MIXED, PLAN_OPT_ADAM, got);
    check_tags((uint64_t[MEM_NTAGS]){2, 2, 4, 8, 0, 0, 0}, got, "fp16-mixed + adam",
               "2 + 2 + K with K = 12 (master 4 + m 4 + v 4)");
    /* fp32 + Adam: weights 4 + grads 4, no master copy (the weights are fp32 already), m and v 4 + 4. */
    plan_bytes_per_param(PLAN_RECIPE_FP32, PLAN_OPT_ADAM, got);
    check_tags((uint64_t[MEM_NTAGS]){4, 4, 0, 8, 0, 0, 0}, got, "fp32 + adam",
               "a recipe with master = false keeps no master copy");
    /* bf16-mixed + plain SGD: 2 + 2 + master 4; SGD has no state. */
    plan_bytes_per_param(PLAN_RECIPE_BF16_MIXED, PLAN_OPT_SGD, got);
    check_tags((uint64_t[MEM_NTAGS]){2, 2, 4, 0, 0, 0, 0}, got, "bf16-mixed + sgd", "plain SGD has 0 states");
    /* fp32 + SGD with momentum: 4 + 4 + one fp32 momentum buffer 4. */
    plan_bytes_per_param(PLAN_RECIPE_FP32, PLAN_OPT_MOMENTUM, got);
    check_tags((uint64_t[MEM_NTAGS]){4, 4, 0, 4, 0, 0, 0}, got, "fp32 + momentum", "momentum keeps 1 state");
}

MPT_TEST(zero_paper_table_7_5b) {
    /* Rajbhandari et al. 2020, Figure 1: Psi = 7.5e9, N = 64, mixed precision Adam (K = 12).
     * Each rank's shard: Psi / N = 7,500,000,000 / 64 = 117,187,500 elements (it divides exactly). */
    const uint64_t psi = 7500000000ULL;
    const uint64_t expected[4][MEM_NTAGS] = {
        /* stage 0: 2Psi, 2Psi, 4Psi, 8Psi                             = 16Psi = 120 GB */
        {15000000000ULL, 15000000000ULL, 30000000000ULL, 60000000000ULL},
        /* stage 1: 2Psi, 2Psi, then 4 and 8 bytes x 117,187,500     = 4Psi + 12Psi/N = 31.4 GB */
        {15000000000ULL, 15000000000ULL, 468750000ULL, 937500000ULL},
        /* stage 2: 2Psi, then 2, 4 and 8 bytes x 117,187,500        = 2Psi + 14Psi/N = 16.6 GB */
        {15000000000ULL, 234375000ULL, 468750000ULL, 937500000ULL},
        /* stage 3: 2 + 2 + 4 + 8 bytes x 117,187,500                = 16Psi/N = 1.9 GB */
        {234375000ULL, 234375000ULL, 468750000ULL, 937500000ULL},
    };
    const uint64_t totals[4] = {120000000000ULL, 31406250000ULL, 16640625000ULL, 1875000000ULL};
    for (int stage = 0; stage < 4; stage++) {
        plan_run run = lab01_run(PLAN_RECIPE_FP16_MIXED, PLAN_OPT_ADAM, stage, 64, 1, 1, PLAN_RECOMPUTE_NONE, false);
        uint64_t got[MEM_NTAGS];
        plan_model_state_bytes(psi, &run, got);
        char what[80];
        snprintf(what, sizeof what, "ZeRO-%d, Psi = 7.5B, N = 64", stage);
        check_tags(expected[stage], got, what,
                   "stage 1 shards optim + master, stage 2 also grad, stage 3 also param");
        uint64_t sum = got[MEM_PARAM] + got[MEM_GRAD] + got[MEM_MASTER] + got[MEM_OPTIM];
        snprintf(what, sizeof what, "ZeRO-%d model-state total (the paper: 120 / 31.4 / 16.6 / 1.9 GB)", stage);
        MPT_CHECK_EQ_U64(totals[stage], sum, what);
    }
}

MPT_TEST(zero_stages_shard_tags_in_order) {
    /* GPT-2 124M, bf16-mixed + AdamW over N = 4: Psi = 124,439,808 splits exactly into 31,109,952 per rank.
     *   unsharded: param 2 Psi = 248,879,616   grad 2 Psi = 248,879,616
     *              master 4 Psi = 497,759,232  optim 8 Psi = 995,518,464
     *   sharded:   param 2 x 31,109,952 = 62,219,904    grad 62,219,904
     *              master 4 x 31,109,952 = 124,439,808  optim 8 x 31,109,952 = 248,879,616 */
    const uint64_t psi = 124439808ULL;
    const uint64_t expected[4][MEM_NTAGS] = {
        {248879616ULL, 248879616ULL, 497759232ULL, 995518464ULL},
        {248879616ULL, 248879616ULL, 124439808ULL, 248879616ULL},
        {248879616ULL, 62219904ULL, 124439808ULL, 248879616ULL},
        {62219904ULL, 62219904ULL, 124439808ULL, 248879616ULL},
    };
    for (int stage = 0; stage < 4; stage++) {
        plan_run run = lab01_run(PLAN_RECIPE_BF16_MIXED, PLAN_OPT_ADAMW, stage, 4, 1, 1024, PLAN_RECOMPUTE_NONE, true);
        uint64_t got[MEM_NTAGS];
        plan_model_state_bytes(psi, &run, got);
        char what[80];
        snprintf(what, sizeof what, "ZeRO-%d, gpt2-124m, N = 4", stage);
        check_tags(expected[stage], got, what, "a tag, once sharded, stays sharded at every higher stage");
    }
    /* One rank is plain data parallel whatever the stage: every shard is the whole. */
    plan_run alone = lab01_run(PLAN_RECIPE_BF16_MIXED, PLAN_OPT_ADAMW, 3, 1, 1, 1024, PLAN_RECOMPUTE_NONE, true);
    uint64_t got[MEM_NTAGS];
    plan_model_state_bytes(psi, &alone, got);
    check_tags(expected[0], got, "ZeRO-3 with N = 1", "with one rank ceil(Psi/1) = Psi");
    /* N that does not divide Psi: Psi = 124,439,810 over N = 4 is 31,109,952.5, so every rank holds
     * ceil = 31,109,953 (the flat buffer is padded to 124,439,812). ZeRO-3, bf16-mixed + AdamW:
     * param 2 x 31,109,953 = 62,219,906, grad the same, master 124,439,812, optim 248,879,624. */
    plan_run odd = lab01_run(PLAN_RECIPE_BF16_MIXED, PLAN_OPT_ADAMW, 3, 4, 1, 1024, PLAN_RECOMPUTE_NONE, true);
    plan_model_state_bytes(psi + 2, &odd, got);
    check_tags((uint64_t[MEM_NTAGS]){62219906ULL, 62219906ULL, 124439812ULL, 248879624ULL, 0, 0, 0}, got,
               "ZeRO-3, Psi = 124,439,810, N = 4",
               "each rank holds ceil(Psi/N), not floor: the flat buffer is padded up to a multiple of N");
}
