/* test_lab08_torch.c: lab 08 visible tests, part B: PyTorch's two switches (amp_recipe_from_torch in
 * core/amp/setup.c): an autocast dtype and a GradScaler, valid only as fp16 + scaler, bf16 alone or neither. */
#include "lab08_util.h"

/* autocast(float16) + GradScaler: fp16 AMP with the PyTorch scaler from 2^16; autocast(bfloat16): bf16 AMP, no scaler;
 * no autocast: fp32. */
MPT_TEST(torch_valid_pairs) {
    amp_setup s;
    data_err err;
    bool ok = amp_recipe_from_torch("float16", true, &s, &err);
    if (CHECK_SETUP("amp_recipe_from_torch(\"float16\", GradScaler on)", ok, &s, AMP_RECIPE_FP16, AMP_SCALER_PYTORCH,
                    65536.0, "fp16 autocast with a GradScaler: recipe fp16, amp_scaler_defaults(AMP_SCALER_PYTORCH)"))
        MPT_CHECK_EQ_I64(2000, s.scaler.growth_interval, "the GradScaler's growth_interval");
    ok = amp_recipe_from_torch("bfloat16", false, &s, &err);
    CHECK_SETUP("amp_recipe_from_torch(\"bfloat16\", GradScaler off)", ok, &s, AMP_RECIPE_BF16, AMP_SCALER_NONE, 1.0,
                "bf16 autocast without a scaler: recipe bf16, amp_scaler_defaults(AMP_SCALER_NONE)");
    ok = amp_recipe_from_torch("none", false, &s, &err);
    CHECK_SETUP("amp_recipe_from_torch(\"none\", GradScaler off)", ok, &s, AMP_RECIPE_FP32, AMP_SCALER_NONE, 1.0,
                "no autocast (dtype float32) and no scaler: the fp32 recipe");
}

/* The three mistakes, each with its own reason. */
MPT_TEST(torch_mistakes_are_rejected_with_their_reasons) {
    amp_setup s;
    data_err err;
    bool ok = amp_recipe_from_torch("float16", false, &s, &err);
    if (CHECK_MISTAKE("amp_recipe_from_torch(\"float16\", GradScaler off)", ok, &err, AMP_MISTAKE_FP16_WITHOUT_SCALER,
                      "fp16 autocast needs a GradScaler: reject(err, AMP_MISTAKE_FP16_WITHOUT_SCALER, found)"))
        MPT_CHECK(strstr(err.found, "float16") && strstr(err.found, "no GradScaler"),
                  "the found part names the dtype and the scaler setting: got \"%s\"", err.found);
    ok = amp_recipe_from_torch("bfloat16", true, &s, &err);
    CHECK_MISTAKE("amp_recipe_from_torch(\"bfloat16\", GradScaler on)", ok, &err, AMP_MISTAKE_SCALER_WITH_BF16,
                  "a GradScaler with bf16 autocast: AMP_MISTAKE_SCALER_WITH_BF16 (bf16 has fp32's range)");
    ok = amp_recipe_from_torch("float32", true, &s, &err);
    CHECK_MISTAKE("amp_recipe_from_torch(\"float32\", GradScaler on)", ok, &err, AMP_MISTAKE_SCALER_WITHOUT_AUTOCAST,
                  "a GradScaler with no autocast: AMP_MISTAKE_SCALER_WITHOUT_AUTOCAST, not the bf16 reason");
}
