/* test_lab08_keras.c: lab 08 visible tests, part A: Keras policies (amp_recipe_from_dtypes in core/amp/setup.c): a
 * policy is a compute dtype and a variable dtype; fp32 variables mean autocast, 16-bit variables mean the model
 * is stored low. */
#include "lab08_util.h"

/* mixed_float16 = compute float16, variables float32: fp16 AMP with Keras's LossScaleOptimizer (from 2^15, x2 after
 * 2000 clean steps). mixed_bfloat16 = compute bfloat16, variables float32: bf16 AMP, no loss scale. */
MPT_TEST(keras_mixed_policies_are_autocast) {
    amp_setup s;
    data_err err;
    bool ok = amp_recipe_from_keras("mixed_float16", &s, &err);
    if (CHECK_SETUP("amp_recipe_from_keras(\"mixed_float16\")", ok, &s, AMP_RECIPE_FP16, AMP_SCALER_KERAS, 32768.0,
                    "fp32 variables with float16 compute is the fp16 autocast recipe, and fp16 compute needs "
                    "amp_scaler_defaults(AMP_SCALER_KERAS)"))
        MPT_CHECK_EQ_I64(2000, s.scaler.growth_interval, "mixed_float16: Keras's dynamic_growth_steps");
    ok = amp_recipe_from_keras("mixed_bfloat16", &s, &err);
    CHECK_SETUP("amp_recipe_from_keras(\"mixed_bfloat16\")", ok, &s, AMP_RECIPE_BF16, AMP_SCALER_NONE, 1.0,
                "fp32 variables with bfloat16 compute is the bf16 autocast recipe; bf16 has fp32's range, so no scaler");
}

/* float32 = both dtypes float32: the fp32 recipe. bfloat16 = both bfloat16: the model itself is bf16 (bf16-pure). */
MPT_TEST(keras_float32_and_bfloat16) {
    amp_setup s;
    data_err err;
    bool ok = amp_recipe_from_keras("float32", &s, &err);
    CHECK_SETUP("amp_recipe_from_keras(\"float32\")", ok, &s, AMP_RECIPE_FP32, AMP_SCALER_NONE, 1.0,
                "fp32 variables and fp32 compute: nothing is low, nothing to scale");
    ok = amp_recipe_from_keras("bfloat16", &s, &err);
    CHECK_SETUP("amp_recipe_from_keras(\"bfloat16\")", ok, &s, AMP_RECIPE_BF16_PURE, AMP_SCALER_NONE, 1.0,
                "bfloat16 variables computed in bfloat16 are stored low with no fp32 copy: bf16-pure");
}

/* float16 = both float16: fp16 weights with no fp32 master copy and no loss scale. Rejected, with the reason. */
MPT_TEST(keras_float16_is_rejected_with_the_reason) {
    amp_setup s;
    data_err err;
    bool ok = amp_recipe_from_keras("float16", &s, &err);
    if (CHECK_MISTAKE("amp_recipe_from_keras(\"float16\")", ok, &err, AMP_MISTAKE_FP16_VARIABLES,
                      "16-bit variables equal to the compute dtype: bfloat16 is bf16-pure, float16 is "
                      "reject(err, AMP_MISTAKE_FP16_VARIABLES, found)"))
        MPT_CHECK(strstr(err.found, "float16") != NULL, "the message's found part names the policy: got \"%s\"",
                  err.found);
}

/* Every (compute, variable) pair, including the ones Keras gives no name. */
MPT_TEST(keras_every_dtype_pair) {
    static const struct {
        amp_dtype compute, variable;
        int recipe;             /* -1: rejected */
        amp_scaler_kind scaler;
        amp_setup_mistake mistake;
    } want[] = {
        {AMP_DTYPE_FLOAT32, AMP_DTYPE_FLOAT32, AMP_RECIPE_FP32, AMP_SCALER_NONE, 0},
        {AMP_DTYPE_FLOAT16, AMP_DTYPE_FLOAT32, AMP_RECIPE_FP16, AMP_SCALER_KERAS, 0},
        {AMP_DTYPE_BFLOAT16, AMP_DTYPE_FLOAT32, AMP_RECIPE_BF16, AMP_SCALER_NONE, 0},
        {AMP_DTYPE_BFLOAT16, AMP_DTYPE_BFLOAT16, AMP_RECIPE_BF16_PURE, AMP_SCALER_NONE, 0},
        {AMP_DTYPE_FLOAT16, AMP_DTYPE_FLOAT16, -1, 0, AMP_MISTAKE_FP16_VARIABLES},
        {AMP_DTYPE_FLOAT32, AMP_DTYPE_FLOAT16, -1, 0, AMP_MISTAKE_FOREIGN_VARIABLES},
        {AMP_DTYPE_FLOAT32, AMP_DTYPE_BFLOAT16, -1, 0, AMP_MISTAKE_FOREIGN_VARIABLES},
        {AMP_DTYPE_FLOAT16, AMP_DTYPE_BFLOAT16, -1, 0, AMP_MISTAKE_FOREIGN_VARIABLES},
        {AMP_DTYPE_BFLOAT16, AMP_DTYPE_FLOAT16, -1, 0, AMP_MISTAKE_FOREIGN_VARIABLES},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        amp_setup s;
        data_err err;
        char call[128];
        snprintf(call, sizeof call, "amp_recipe_from_dtypes(compute %s, variables %s)", amp_dtype_name(want[i].compute),
                 amp_dtype_name(want[i].variable));
        bool ok = amp_recipe_from_dtypes(want[i].compute, want[i].variable, &s, &err);
        if (want[i].recipe >= 0)
            CHECK_SETUP(call, ok, &s, (amp_recipe)want[i].recipe, want[i].scaler,
                        want[i].scaler == AMP_SCALER_KERAS ? 32768.0 : 1.0,
                        "fp32 variables: the autocast recipe of the compute dtype (a scaler only for float16); "
                        "bfloat16 variables and compute: bf16-pure");
        else
            CHECK_MISTAKE(call, ok, &err, want[i].mistake,
                          "check 'variables differ from compute' (foreign_variables) before 'both float16' "
                          "(fp16_variables); fp32 variables are never a mistake");
    }
}
