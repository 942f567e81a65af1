/* test_lab05_policy.c: lab 05 visible tests, part C: the autocast policy (amp_policy_default in core/amp/policy.c):
 * which op classes run in the recipe's low format, which stay fp32, which follow their inputs. */
#include "amp/policy.h"
#include "mptest.h"

static const char *op_name(amp_op op) { return amp_op_get(op)->name; }
static const char *recipe_name(amp_recipe r) { return amp_recipe_get(r)->name; }

#define CHECK_PREC(recipe, op, want, mistake) \
    do { \
        amp_precision got_ = amp_policy_default((recipe), (op)); \
        MPT_OBSERVE(got_); \
        MPT_CHECK(got_ == (want), "recipe %s, op class %s\n      expected: %s\n      got:      %s\n" \
                  "      likely mistake: %s", recipe_name(recipe), op_name(op), amp_precision_name(want), \
                  amp_precision_name(got_), (mistake)); \
    } while (0)

/* Matrix products run low in every recipe with a low format. */
MPT_TEST(policy_matmuls_run_low) {
    static const amp_op gemms[] = {AMP_OP_MATMUL, AMP_OP_ATTN_SCORES, AMP_OP_ATTN_PRODUCT};
    static const amp_recipe recipes[] = {AMP_RECIPE_FP16, AMP_RECIPE_BF16, AMP_RECIPE_FP16_O2, AMP_RECIPE_BF16_PURE};
    for (int r = 0; r < 4; r++)
        for (int g = 0; g < 3; g++)
            CHECK_PREC(recipes[r], gemms[g], AMP_PREC_LOW, "ops with info->gemm run in the low format");
    for (int g = 0; g < 3; g++)
        CHECK_PREC(AMP_RECIPE_FP32, gemms[g], AMP_PREC_FP32, "the fp32 recipe has no low format (info->low is NULL)");
    /* fp8: only the linear layers' matmuls (Transformer Engine's te.Linear); attention's products stay 16-bit. */
    CHECK_PREC(AMP_RECIPE_FP8, AMP_OP_MATMUL, AMP_PREC_FP8, "in the fp8 recipe (info->fp8_matmul) a linear layer runs in fp8");
    CHECK_PREC(AMP_RECIPE_FP8, AMP_OP_ATTN_SCORES, AMP_PREC_LOW,
               "fp8 goes to the linear layers only (op == AMP_OP_MATMUL); attention's products stay in the low format");
    CHECK_PREC(AMP_RECIPE_FP8, AMP_OP_ATTN_PRODUCT, AMP_PREC_LOW,
               "fp8 goes to the linear layers only (op == AMP_OP_MATMUL); attention's products stay in the low format");
}

/* tf32 is a matmul mode: fp32 weights, no autocast. The matmuls run in tf32, everything else in fp32. */
MPT_TEST(policy_tf32_is_a_matmul_mode) {
    CHECK_PREC(AMP_RECIPE_TF32, AMP_OP_MATMUL, AMP_PREC_LOW, "tf32's matmuls run in its low format, tf32");
    static const amp_op rest[] = {AMP_OP_NORM, AMP_OP_ACTIVATION, AMP_OP_RESIDUAL, AMP_OP_EMBEDDING};
    for (int o = 0; o < 4; o++)
        CHECK_PREC(AMP_RECIPE_TF32, rest[o], AMP_PREC_FP32,
                   "tf32 has no autocast (info->autocast is false) and fp32 weights: ops other than matmuls stay "
                   "fp32, they do not follow their inputs");
}

/* Softmax, norm statistics, the loss and reductions stay fp32 in every recipe. */
MPT_TEST(policy_statistics_stay_fp32) {
    static const amp_op stats[] = {AMP_OP_SOFTMAX, AMP_OP_NORM_STATS, AMP_OP_LOSS, AMP_OP_REDUCTION};
    for (int r = 0; r < AMP_NRECIPES; r++)
        for (int o = 0; o < 4; o++)
            CHECK_PREC((amp_recipe)r, stats[o], AMP_PREC_FP32,
                       "ops with info->statistic (exp, log, long sums) stay fp32 whatever the recipe");
}

/* Rule 1: a recipe without a low format runs every op class in fp32. */
MPT_TEST(policy_fp32_recipe_runs_everything_fp32) {
    for (int o = 0; o < AMP_NOPS; o++)
        CHECK_PREC(AMP_RECIPE_FP32, (amp_op)o, AMP_PREC_FP32,
                   "rule 1: the fp32 recipe has no low format (info->low is NULL): every op class is fp32, before "
                   "any other rule is asked");
}

/* Under autocast (fp16, bf16 with fp32 weights, and fp8, which is bf16 autocast with fp8 linear layers): the norm is
 * fp32 (PyTorch's fp32 list); activation, residual and embedding follow their inputs. */
MPT_TEST(policy_autocast_follows_inputs) {
    static const amp_recipe recipes[] = {AMP_RECIPE_FP16, AMP_RECIPE_BF16, AMP_RECIPE_FP8};
    for (int r = 0; r < 3; r++) {
        CHECK_PREC(recipes[r], AMP_OP_NORM, AMP_PREC_FP32, "autocast runs layer_norm in fp32 as a whole");
        CHECK_PREC(recipes[r], AMP_OP_ACTIVATION, AMP_PREC_FOLLOW,
                   "autocast does not cast ops on neither list: they follow their inputs");
        CHECK_PREC(recipes[r], AMP_OP_RESIDUAL, AMP_PREC_FOLLOW, "the residual add follows its (widest) input");
        CHECK_PREC(recipes[r], AMP_OP_EMBEDDING, AMP_PREC_FOLLOW, "the embedding follows its fp32 weights");
    }
}

/* fp16-o2 and bf16-pure store the weights low, so everything but the statistics runs low: the norm's output
 * too (its statistics are the separate norm_stats class). */
MPT_TEST(policy_low_weight_recipes) {
    static const amp_recipe recipes[] = {AMP_RECIPE_FP16_O2, AMP_RECIPE_BF16_PURE};
    static const amp_op rest[] = {AMP_OP_NORM, AMP_OP_ACTIVATION, AMP_OP_RESIDUAL, AMP_OP_EMBEDDING};
    for (int r = 0; r < 2; r++) {
        for (int o = 0; o < 4; o++)
            CHECK_PREC(recipes[r], rest[o], AMP_PREC_LOW,
                       "without autocast the model is stored low (info->weights == info->low): it runs low");
        CHECK_PREC(recipes[r], AMP_OP_NORM_STATS, AMP_PREC_FP32, "statistics stay fp32 even here");
    }
}
