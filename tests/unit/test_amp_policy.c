/* test_amp_policy.c: Criterion tests of the autocast policy (amp/policy.c) and of the three ways to ask for a recipe
 * (amp/setup.c): DeepSpeed config sections, Keras policy names, PyTorch flags; conflicts are rejected by key. */
#include <criterion/criterion.h>
#include <string.h>

#include "amp/policy.h"
#include "amp/setup.h"

static amp_precision prec(amp_recipe r, amp_op op) {
    amp_policy p;
    amp_policy_init(&p, r);
    return amp_policy_lookup(&p, op);
}

Test(amp_policy, fp32_runs_everything_in_fp32) {
    for (int o = 0; o < AMP_NOPS; o++) cr_expect_eq(prec(AMP_RECIPE_FP32, (amp_op)o), AMP_PREC_FP32);
}

/* PyTorch autocast (fp16): matmuls and attention products low; softmax, norms, loss, sums fp32; the rest follows. */
Test(amp_policy, fp16_amp_is_pytorch_autocast) {
    static const amp_precision expect[AMP_NOPS] = {
        [AMP_OP_MATMUL] = AMP_PREC_LOW,     [AMP_OP_ATTN_SCORES] = AMP_PREC_LOW, [AMP_OP_ATTN_PRODUCT] = AMP_PREC_LOW,
        [AMP_OP_SOFTMAX] = AMP_PREC_FP32,   [AMP_OP_NORM] = AMP_PREC_FP32,       [AMP_OP_NORM_STATS] = AMP_PREC_FP32,
        [AMP_OP_LOSS] = AMP_PREC_FP32,      [AMP_OP_REDUCTION] = AMP_PREC_FP32,  [AMP_OP_ACTIVATION] = AMP_PREC_FOLLOW,
        [AMP_OP_RESIDUAL] = AMP_PREC_FOLLOW, [AMP_OP_EMBEDDING] = AMP_PREC_FOLLOW,
    };
    for (int o = 0; o < AMP_NOPS; o++) {
        cr_expect_eq(prec(AMP_RECIPE_FP16, (amp_op)o), expect[o], "fp16 %s", amp_op_get((amp_op)o)->name);
        cr_expect_eq(prec(AMP_RECIPE_BF16, (amp_op)o), expect[o], "bf16 %s: same table", amp_op_get((amp_op)o)->name);
    }
    amp_policy p;
    amp_policy_init(&p, AMP_RECIPE_FP16);
    cr_expect_eq(amp_policy_format(&p, AMP_OP_MATMUL, false), &FP_FP16);
    cr_expect_eq(amp_policy_format(&p, AMP_OP_SOFTMAX, false), &FP_FP32);
    cr_expect_null(amp_policy_format(&p, AMP_OP_ACTIVATION, false), "follow: the inputs decide");
}

/* Low weights: everything runs low except the statistics. */
Test(amp_policy, o2_and_pure_bf16_run_low_but_keep_statistics_fp32) {
    amp_recipe rs[2] = {AMP_RECIPE_FP16_O2, AMP_RECIPE_BF16_PURE};
    for (int i = 0; i < 2; i++) {
        for (int o = 0; o < AMP_NOPS; o++) {
            bool stat = amp_op_get((amp_op)o)->statistic;
            cr_expect_eq(prec(rs[i], (amp_op)o), stat ? AMP_PREC_FP32 : AMP_PREC_LOW, "%s %s",
                         amp_recipe_get(rs[i])->name, amp_op_get((amp_op)o)->name);
        }
    }
    cr_expect_eq(prec(AMP_RECIPE_FP16_O2, AMP_OP_NORM), AMP_PREC_LOW, "the norm's output is low");
    cr_expect_eq(prec(AMP_RECIPE_FP16_O2, AMP_OP_NORM_STATS), AMP_PREC_FP32, "its statistics are not");
}

Test(amp_policy, tf32_rounds_only_the_matmul_inputs) {
    amp_policy p;
    amp_policy_init(&p, AMP_RECIPE_TF32);
    for (int o = 0; o < AMP_NOPS; o++) {
        bool gemm = amp_op_get((amp_op)o)->gemm;
        cr_expect_eq(amp_policy_lookup(&p, (amp_op)o), gemm ? AMP_PREC_LOW : AMP_PREC_FP32);
        cr_expect_eq(amp_policy_format(&p, (amp_op)o, false), gemm ? &FP_TF32 : &FP_FP32);
    }
}

Test(amp_policy, fp8_only_for_the_linear_layers) {
    amp_policy p;
    amp_policy_init(&p, AMP_RECIPE_FP8);
    cr_expect_eq(amp_policy_lookup(&p, AMP_OP_MATMUL), AMP_PREC_FP8);
    cr_expect_eq(amp_policy_format(&p, AMP_OP_MATMUL, false), &FP_E4M3, "forward: e4m3");
    cr_expect_eq(amp_policy_format(&p, AMP_OP_MATMUL, true), &FP_E5M2, "gradients: e5m2");
    cr_expect_eq(amp_policy_lookup(&p, AMP_OP_ATTN_SCORES), AMP_PREC_LOW);
    cr_expect_eq(amp_policy_format(&p, AMP_OP_ATTN_SCORES, false), &FP_BF16, "attention stays bf16");
    cr_expect_eq(amp_policy_lookup(&p, AMP_OP_SOFTMAX), AMP_PREC_FP32);
}

Test(amp_policy, statistics_stay_fp32_in_every_recipe) {
    for (int r = 0; r < AMP_NRECIPES; r++)
        for (int o = 0; o < AMP_NOPS; o++)
            if (amp_op_get((amp_op)o)->statistic)
                cr_expect_eq(prec((amp_recipe)r, (amp_op)o), AMP_PREC_FP32, "%s %s", amp_recipe_get((amp_recipe)r)->name,
                             amp_op_get((amp_op)o)->name);
}

Test(amp_policy, names_round_trip) {
    for (int r = 0; r < AMP_NRECIPES; r++) cr_expect_eq(amp_recipe_from_name(amp_recipe_get((amp_recipe)r)->name), r);
    for (int o = 0; o < AMP_NOPS; o++) cr_expect_eq(amp_op_from_name(amp_op_get((amp_op)o)->name), o);
    for (int p = 0; p < AMP_NPRECS; p++) cr_expect_eq(amp_precision_from_name(amp_precision_name((amp_precision)p)), p);
    cr_expect_eq(amp_recipe_from_name("fp64"), -1);
    cr_expect_eq(amp_op_from_name("conv"), -1);
}

Test(amp_policy, overrides_and_their_conflicts) {
    amp_policy p;
    data_err err;
    amp_policy_init(&p, AMP_RECIPE_FP16);
    cr_expect(amp_policy_override(&p, "softmax=low", &err), "running softmax in fp16 is allowed (lab 25 shows why not)");
    cr_expect_eq(amp_policy_lookup(&p, AMP_OP_SOFTMAX), AMP_PREC_LOW);
    cr_expect(p.overridden[AMP_OP_SOFTMAX]);
    cr_expect(amp_policy_override(&p, "matmul=fp32", &err));
    cr_expect_not(amp_policy_override(&p, "matmul=fp8", &err), "fp8 outside the fp8 recipe");
    cr_expect(strstr(err.found, "matmul=fp8") && strstr(err.found, "fp16"), "%s", err.found);
    cr_expect_not(amp_policy_override(&p, "conv=low", &err));
    cr_expect(strstr(err.found, "conv") != NULL);
    cr_expect_not(amp_policy_override(&p, "softmax=fp64", &err));
    cr_expect_not(amp_policy_override(&p, "softmax", &err));
    amp_policy_init(&p, AMP_RECIPE_FP8);
    cr_expect_not(amp_policy_override(&p, "softmax=fp8", &err), "only matmul runs in fp8");
    cr_expect(strstr(err.found, "softmax=fp8") != NULL, "%s", err.found);
    cr_expect(strstr(err.expected, "matmul") != NULL, "%s", err.expected);
    cr_expect(amp_policy_override(&p, "matmul=low", &err), "fp8 recipe, matmul back to bf16");
    cr_expect_eq(amp_policy_format(&p, AMP_OP_MATMUL, false), &FP_BF16);
    amp_policy_init(&p, AMP_RECIPE_FP32);
    cr_expect_not(amp_policy_override(&p, "matmul=low", &err), "fp32 has no low format");
    cr_expect(strstr(err.found, "fp32") != NULL);
}

/* ------------------------------------------------------------------ the three spellings */

static train_config base_config(void) {
    train_config c;
    memset(&c, 0, sizeof c);
    c.fp16 = (config_fp16){.loss_scale = 0, .initial_scale_power = 16, .loss_scale_window = 1000, .hysteresis = 2,
                           .min_loss_scale = 1};
    return c;
}

Test(amp_setup, three_spellings_of_fp16_agree) {
    train_config c = base_config();
    c.fp16.enabled = true;
    amp_setup ds, keras, torch;
    cr_assert(amp_recipe_from_config(&c, &ds, NULL));
    cr_assert(amp_recipe_from_keras("mixed_float16", &keras, NULL));
    cr_assert(amp_recipe_from_torch("torch.float16", true, &torch, NULL));
    cr_expect_eq(ds.recipe, AMP_RECIPE_FP16);
    cr_expect_eq(keras.recipe, AMP_RECIPE_FP16);
    cr_expect_eq(torch.recipe, AMP_RECIPE_FP16);
    /* The same recipe, each framework's own dynamic scaler. */
    cr_expect_eq(ds.scaler.kind, AMP_SCALER_DEEPSPEED);
    cr_expect_eq(ds.scaler.init_scale, 65536.0);
    cr_expect_eq(ds.scaler.growth_interval, 1000);
    cr_expect_eq(ds.scaler.hysteresis, 2);
    cr_expect_eq(keras.scaler.kind, AMP_SCALER_KERAS);
    cr_expect_eq(keras.scaler.init_scale, 32768.0);
    cr_expect_eq(torch.scaler.kind, AMP_SCALER_PYTORCH);
    cr_expect_eq(torch.scaler.init_scale, 65536.0);
    amp_setup half;
    cr_expect(amp_recipe_from_torch("half", true, &half, NULL));
    cr_expect_eq(half.recipe, AMP_RECIPE_FP16);
}

Test(amp_setup, three_spellings_of_bf16_and_fp32_agree) {
    train_config c = base_config();
    c.bf16.enabled = true;
    amp_setup a, b, t;
    cr_assert(amp_recipe_from_config(&c, &a, NULL));
    cr_assert(amp_recipe_from_keras("mixed_bfloat16", &b, NULL));
    cr_assert(amp_recipe_from_torch("bfloat16", false, &t, NULL));
    cr_expect(a.recipe == AMP_RECIPE_BF16 && b.recipe == AMP_RECIPE_BF16 && t.recipe == AMP_RECIPE_BF16);
    cr_expect(a.scaler.kind == AMP_SCALER_NONE && b.scaler.kind == AMP_SCALER_NONE && t.scaler.kind == AMP_SCALER_NONE);
    c = base_config();
    cr_assert(amp_recipe_from_config(&c, &a, NULL));
    cr_assert(amp_recipe_from_keras("float32", &b, NULL));
    cr_assert(amp_recipe_from_torch("none", false, &t, NULL));
    cr_expect(a.recipe == AMP_RECIPE_FP32 && b.recipe == AMP_RECIPE_FP32 && t.recipe == AMP_RECIPE_FP32);
    cr_assert(amp_recipe_from_keras("bfloat16", &b, NULL));
    cr_expect_eq(b.recipe, AMP_RECIPE_BF16_PURE);
}

/* The ready config, with fp16 switched on the way a user would. */
Test(amp_setup, from_a_config_file) {
    const char *sets[] = {"fp16.enabled=true", "fp16.hysteresis=3", "fp16.loss_scale_window=500"};
    train_config c;
    cr_assert(config_load("configs/tiny-poetry.json", sets, 3, 1, &c, NULL), "run from the repository root");
    amp_setup s;
    cr_assert(amp_recipe_from_config(&c, &s, NULL));
    cr_expect_eq(s.recipe, AMP_RECIPE_FP16);
    cr_expect_eq(s.scaler.kind, AMP_SCALER_DEEPSPEED);
    cr_expect_eq(s.scaler.hysteresis, 3);
    cr_expect_eq(s.scaler.growth_interval, 500);
    amp_scaler sc;
    cr_assert(amp_scaler_init_from_config(&sc, &c.fp16, NULL));
    cr_expect_eq(sc.scale, 65536.0f);
    cr_expect_eq(sc.hysteresis_left, 3);
}

Test(amp_setup, static_loss_scale_from_the_config) {
    train_config c = base_config();
    c.fp16.enabled = true;
    c.fp16.loss_scale = 128;
    amp_setup s;
    cr_assert(amp_recipe_from_config(&c, &s, NULL));
    cr_expect_eq(s.scaler.kind, AMP_SCALER_STATIC);
    cr_expect_eq(s.scaler.init_scale, 128.0);
}

Test(amp_setup, conflicts_are_rejected_by_key) {
    data_err err;
    amp_setup s;
    train_config c = base_config();
    c.fp16.enabled = c.bf16.enabled = true;
    cr_expect_not(amp_recipe_from_config(&c, &s, &err));
    cr_expect(strstr(err.found, "fp16.enabled") && strstr(err.found, "bf16.enabled"), "%s", err.found);
    c = base_config();
    c.fp16.enabled = true;
    c.fp16.loss_scale = -1;
    cr_expect_not(amp_recipe_from_config(&c, &s, &err));
    cr_expect(strstr(err.found, "fp16.loss_scale") != NULL, "%s", err.found);
    c.fp16.loss_scale = 0;
    c.fp16.min_loss_scale = 1e9;
    cr_expect_not(amp_recipe_from_config(&c, &s, &err), "floor above 2^16");
    cr_expect(strstr(err.found, "fp16.min_loss_scale") != NULL, "%s", err.found);

    cr_expect_not(amp_recipe_from_torch("float16", false, &s, &err), "fp16 autocast without a GradScaler");
    cr_expect(strstr(err.hint, "GradScaler") != NULL, "%s", err.hint);
    cr_expect_not(amp_recipe_from_torch("bfloat16", true, &s, &err), "a GradScaler with bf16");
    cr_expect_not(amp_recipe_from_torch("float32", true, &s, &err), "a GradScaler without autocast");
    cr_expect_not(amp_recipe_from_torch("float64", false, &s, &err));
    cr_expect_not(amp_recipe_from_keras("float16", &s, &err), "fp16 variables, no master copy, no scaling");
    cr_expect(strstr(err.hint, "mixed_float16") != NULL, "%s", err.hint);
    cr_expect_not(amp_recipe_from_keras("mixed_float8", &s, &err));
}
