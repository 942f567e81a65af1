/* test_lab08_hidden.c: lab 08 hidden tests: every Keras name and PyTorch spelling, the recipes agreeing with the
 * recipe table, the three vocabularies through a real config, and the LossScaleOptimizer's edge cases and a long
 * trace against the Keras rule written out here. */
#include "../../../labs/lab08-framework-policies/tests/lab08_util.h"

#include "train/config.h"

#include <float.h>
#include <math.h>

/* ------------------------------------------------------------------ A. Keras */

MPT_TEST(keras_known_and_unknown_names) {
    static const struct {
        const char *name;
        int recipe; /* -1: rejected as fp16_variables */
        amp_scaler_kind scaler;
    } known[] = {{"float32", AMP_RECIPE_FP32, AMP_SCALER_NONE},
                 {"mixed_float16", AMP_RECIPE_FP16, AMP_SCALER_KERAS},
                 {"mixed_bfloat16", AMP_RECIPE_BF16, AMP_SCALER_NONE},
                 {"bfloat16", AMP_RECIPE_BF16_PURE, AMP_SCALER_NONE},
                 {"float16", -1, AMP_SCALER_NONE}};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        amp_setup s;
        data_err err;
        char call[96];
        snprintf(call, sizeof call, "amp_recipe_from_keras(\"%s\")", known[i].name);
        bool ok = amp_recipe_from_keras(known[i].name, &s, &err);
        if (known[i].recipe >= 0) {
            if (CHECK_SETUP(call, ok, &s, (amp_recipe)known[i].recipe, known[i].scaler,
                            known[i].scaler == AMP_SCALER_KERAS ? 32768.0 : 1.0, "see the policy table in setup.h"))
                MPT_CHECK(strstr(s.source, known[i].name) != NULL, "%s: the source names the policy, got \"%s\"", call,
                          s.source);
        } else if (CHECK_MISTAKE(call, ok, &err, AMP_MISTAKE_FP16_VARIABLES, "float16 variables and compute")) {
            MPT_CHECK(strstr(err.found, "policy 'float16'") && strstr(err.found, "compute float16"),
                      "%s: found should name the policy and its dtypes, got \"%s\"", call, err.found);
        }
    }
    static const char *const unknown[] = {"mixed_float8", "Mixed_Float16", "", "float64", "mixed_float16 "};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        amp_setup s;
        data_err err;
        MPT_CHECK(!amp_recipe_from_keras(unknown[i], &s, &err), "amp_recipe_from_keras(\"%s\") should be rejected",
                  unknown[i]);
    }
}

/* What a Keras policy says about storage must agree with the recipe table (amp/policy.h): variables are the weights
 * the optimizer updates, compute is the recipe's low format. */
MPT_TEST(keras_accepted_pairs_agree_with_the_recipe_table) {
    static const fp_format *const format_of[AMP_NDTYPES] = {&FP_FP32, &FP_FP16, &FP_BF16};
    int accepted = 0;
    for (int c = 0; c < AMP_NDTYPES; c++)
        for (int v = 0; v < AMP_NDTYPES; v++) {
            amp_setup s;
            data_err err;
            if (!amp_recipe_from_dtypes((amp_dtype)c, (amp_dtype)v, &s, &err)) continue;
            accepted++;
            const amp_recipe_info *r = amp_recipe_get(s.recipe);
            const fp_format *low = c == AMP_DTYPE_FLOAT32 ? NULL : format_of[c];
            bool need_scale = c == AMP_DTYPE_FLOAT16;
            MPT_CHECK(r->weights == format_of[v] && r->low == low && r->autocast == (v == AMP_DTYPE_FLOAT32 && low),
                      "compute %s, variables %s -> recipe %s, whose weights are %s and low format %s\n"
                      "      expected: weights %s, low format %s", amp_dtype_name(c), amp_dtype_name(v), r->name,
                      r->weights->name, r->low ? r->low->name : "none", format_of[v]->name, low ? low->name : "none");
            MPT_CHECK((s.scaler.kind != AMP_SCALER_NONE) == need_scale,
                      "compute %s, variables %s: loss scaler %s; a scaler exactly when the compute dtype is float16",
                      amp_dtype_name(c), amp_dtype_name(v), amp_scaler_kind_get(s.scaler.kind)->name);
        }
    MPT_CHECK_EQ_I64(4, accepted, "(compute, variable) pairs accepted of the 9");
}

/* ------------------------------------------------------------------ B. PyTorch */

MPT_TEST(torch_every_spelling) {
    static const struct {
        const char *dtype;
        int off, on; /* recipe with the GradScaler off / on; -1 rejected */
        amp_setup_mistake off_why, on_why;
    } want[] = {
        {"float32", AMP_RECIPE_FP32, -1, 0, AMP_MISTAKE_SCALER_WITHOUT_AUTOCAST},
        {"torch.float32", AMP_RECIPE_FP32, -1, 0, AMP_MISTAKE_SCALER_WITHOUT_AUTOCAST},
        {"float", AMP_RECIPE_FP32, -1, 0, AMP_MISTAKE_SCALER_WITHOUT_AUTOCAST},
        {"off", AMP_RECIPE_FP32, -1, 0, AMP_MISTAKE_SCALER_WITHOUT_AUTOCAST},
        {"float16", -1, AMP_RECIPE_FP16, AMP_MISTAKE_FP16_WITHOUT_SCALER, 0},
        {"torch.float16", -1, AMP_RECIPE_FP16, AMP_MISTAKE_FP16_WITHOUT_SCALER, 0},
        {"half", -1, AMP_RECIPE_FP16, AMP_MISTAKE_FP16_WITHOUT_SCALER, 0},
        {"torch.half", -1, AMP_RECIPE_FP16, AMP_MISTAKE_FP16_WITHOUT_SCALER, 0},
        {"bfloat16", AMP_RECIPE_BF16, -1, 0, AMP_MISTAKE_SCALER_WITH_BF16},
        {"torch.bfloat16", AMP_RECIPE_BF16, -1, 0, AMP_MISTAKE_SCALER_WITH_BF16},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        for (int scaler = 0; scaler < 2; scaler++) {
            amp_setup s;
            data_err err;
            char call[96];
            snprintf(call, sizeof call, "amp_recipe_from_torch(\"%s\", GradScaler %s)", want[i].dtype,
                     scaler ? "on" : "off");
            bool ok = amp_recipe_from_torch(want[i].dtype, scaler, &s, &err);
            int recipe = scaler ? want[i].on : want[i].off;
            if (recipe >= 0)
                CHECK_SETUP(call, ok, &s, (amp_recipe)recipe, scaler ? AMP_SCALER_PYTORCH : AMP_SCALER_NONE,
                            scaler ? 65536.0 : 1.0, "see the table above amp_recipe_from_torch in setup.h");
            else
                CHECK_MISTAKE(call, ok, &err, scaler ? want[i].on_why : want[i].off_why,
                              "see the table above amp_recipe_from_torch in setup.h");
        }
    amp_setup s;
    data_err err;
    MPT_CHECK(!amp_recipe_from_torch("float64", false, &s, &err), "float64 is no autocast dtype");
}

/* ------------------------------------------------------------------ the three vocabularies, through a config */

/* configs/tiny-poetry.json with up to two --set assignments (the tests run from the repository root). Loading the
 * config already checks its precision settings (amp_recipe_from_config), so a mistake fails the load. */
static bool setup_from_config(const char *set1, const char *set2, amp_setup *s, data_err *err) {
    const char *sets[2] = {set1, set2};
    train_config cfg;
    if (!config_load("configs/tiny-poetry.json", sets, set2 ? 2 : 1, 1, &cfg, err)) return false;
    return amp_recipe_from_config(&cfg, s, err);
}

MPT_TEST(three_vocabularies_agree_through_the_config) {
    static const struct {
        const char *set1, *set2;
        amp_recipe recipe;
        amp_scaler_kind kind;
        double scale;
    } want[] = {
        {"precision.torch_autocast=bfloat16", NULL, AMP_RECIPE_BF16, AMP_SCALER_NONE, 1},
        {"precision.keras_policy=mixed_bfloat16", NULL, AMP_RECIPE_BF16, AMP_SCALER_NONE, 1},
        {"bf16.enabled=true", NULL, AMP_RECIPE_BF16, AMP_SCALER_NONE, 1},
        {"precision.torch_autocast=float16", "precision.torch_grad_scaler=true", AMP_RECIPE_FP16, AMP_SCALER_PYTORCH,
         65536},
        {"precision.keras_policy=mixed_float16", NULL, AMP_RECIPE_FP16, AMP_SCALER_KERAS, 32768},
        {"fp16.enabled=true", NULL, AMP_RECIPE_FP16, AMP_SCALER_DEEPSPEED, 65536},
        {"precision.keras_policy=mixed_float16", "precision.init_scale=1024", AMP_RECIPE_FP16, AMP_SCALER_KERAS, 1024},
        {"precision.torch_autocast=none", NULL, AMP_RECIPE_FP32, AMP_SCALER_NONE, 1},
        {"precision.keras_policy=bfloat16", NULL, AMP_RECIPE_BF16_PURE, AMP_SCALER_NONE, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        amp_setup s;
        data_err err;
        char call[160];
        snprintf(call, sizeof call, "configs/tiny-poetry.json --set %s%s%s", want[i].set1,
                 want[i].set2 ? " --set " : "", want[i].set2 ? want[i].set2 : "");
        bool ok = setup_from_config(want[i].set1, want[i].set2, &s, &err);
        CHECK_SETUP(call, ok, &s, want[i].recipe, want[i].kind, want[i].scale,
                    "the config reaches amp_recipe_from_keras / amp_recipe_from_torch: check those two regions");
    }
    amp_setup s;
    data_err err;
    bool ok = setup_from_config("precision.torch_autocast=float16", NULL, &s, &err);
    CHECK_MISTAKE("configs/tiny-poetry.json --set precision.torch_autocast=float16", ok, &err,
                  AMP_MISTAKE_FP16_WITHOUT_SCALER, "the config's torch switches go through amp_recipe_from_torch");
    ok = setup_from_config("precision.keras_policy=float16", NULL, &s, &err);
    CHECK_MISTAKE("configs/tiny-poetry.json --set precision.keras_policy=float16", ok, &err,
                  AMP_MISTAKE_FP16_VARIABLES, "the config's Keras policy goes through amp_recipe_from_dtypes");
}

/* ------------------------------------------------------------------ C. the LossScaleOptimizer */

/* NaN or an infinity in any position of any span skips; huge finite gradients and subnormals do not. */
MPT_TEST(lso_nan_or_inf_anywhere_skips) {
    enum { N = 9 };
    static const struct {
        int at;
        float value;
        bool skip;
    } cases[] = {{0, NAN, true}, {8, -INFINITY, true}, {4, INFINITY, true}, {5, -NAN, true},
                 {4, FLT_MAX, false}, {8, -FLT_MAX, false}, {3, 1e-40f, false}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        float p[N], g[N];
        for (int i = 0; i < N; i++) p[i] = (float)i, g[i] = 0.5f;
        g[cases[c].at] = cases[c].value;
        /* spans of 4, 0, 1 and 4 values */
        optim_span pairs[4] = {{p, g, 4, true}, {p + 4, g + 4, 0, false}, {p + 4, g + 4, 1, false},
                               {p + 5, g + 5, 4, true}};
        optim_config o = lab08_sgd(0);
        amp_scaler_config sc = lab08_static_scale(2);
        amp_loss_scale_optimizer opt;
        amp_lso_init(&opt, &o, N, &sc);
        amp_update u = amp_lso_apply_gradients(&opt, pairs, 4, 1e-30);
        MPT_CHECK(u.skipped == cases[c].skip, "gradient %d = %g (spans of 4, 0, 1, 4 values): expected skipped=%s, "
                  "got %s\n      likely mistake: every value of every span (isfinite catches inf and NaN only)",
                  cases[c].at, (double)cases[c].value, cases[c].skip ? "yes" : "no", u.skipped ? "yes" : "no");
        MPT_CHECK_EQ_I64(cases[c].skip ? 0 : 1, opt.state.step, "inner optimizer steps");
        amp_lso_free(&opt);
    }
}

/* TF 2 Keras's dynamic=False: a fixed scale. An overflow still skips, and the scale cannot move. */
MPT_TEST(lso_static_scale_never_moves) {
    float p[3] = {1, 2, 3}, g[3] = {0.1f, INFINITY, 0.3f};
    optim_span pairs[1] = {{p, g, 3, false}};
    amp_scaler_config c = lab08_static_scale(128);
    optim_config o = lab08_sgd(0);
    amp_loss_scale_optimizer opt;
    amp_lso_init(&opt, &o, 3, &c);
    amp_update u = amp_lso_apply_gradients(&opt, pairs, 1, 0.5);
    MPT_OBSERVE((uint64_t)u.status << 1 | u.skipped);
    MPT_OBSERVE_NEAR(u.next_scale, 0, 0);
    MPT_CHECK(u.skipped && u.next_scale == 128.0f && u.status == AMP_SCALER_SKIPPED_FIXED,
              "static scale 128, an inf: expected skipped, scale 128, status skipped_fixed; got skipped=%s, %g, %s",
              u.skipped ? "yes" : "no", (double)u.next_scale, amp_scaler_status_name(u.status));
    MPT_CHECK(p[0] == 1 && p[1] == 2 && p[2] == 3, "a skipped step moved the weights");
    g[1] = 0.2f;
    u = amp_lso_apply_gradients(&opt, pairs, 1, 0.5);
    MPT_OBSERVE((uint64_t)u.status << 1 | u.skipped);
    MPT_OBSERVE_NEAR(u.next_scale, 0, 0);
    MPT_OBSERVE_NEAR_F32(p, p, 3, 1e-6, 0);
    MPT_CHECK(!u.skipped && u.next_scale == 128.0f, "clean step: expected taken at 128, got skipped=%s, %g",
              u.skipped ? "yes" : "no", (double)u.next_scale);
    MPT_CHECK(p[0] == 0.95f && p[1] == 1.9f && p[2] == 2.85f, "SGD lr 0.5 from (1,2,3) with g (0.1,0.2,0.3): got "
              "(%.9g, %.9g, %.9g)", (double)p[0], (double)p[1], (double)p[2]);
    amp_lso_free(&opt);
}

/* 3,000 steps with random overflows (1 in 9) on two spans: the skips are exactly the overflowing steps, the
 * weights are SGD applied on the clean steps only (computed here), and the scaler counted every call. */
MPT_TEST(lso_long_trace_against_sgd) {
    float p[3] = {0.5f, -0.5f, 2.0f}, g[3], want[3] = {0.5f, -0.5f, 2.0f};
    optim_span pairs[2] = {{p, g, 2, true}, {p + 2, g + 2, 1, false}};
    amp_scaler_config c = lab08_static_scale(64);
    optim_config o = lab08_sgd(0.01);
    amp_loss_scale_optimizer opt;
    amp_lso_init(&opt, &o, 3, &c);
    long taken = 0;
    uint32_t x = 12345;
    for (int k = 0; k < 3000; k++) {
        x = x * 1664525u + 1013904223u;
        bool overflow = (x >> 8) % 9 == 0;
        for (int i = 0; i < 3; i++) g[i] = 1e-3f * (float)((int)((x >> (4 * i)) & 15u) - 7);
        if (overflow) g[(x >> 20) % 3] = (x >> 23) & 1 ? INFINITY : NAN;
        amp_update u = amp_lso_apply_gradients(&opt, pairs, 2, 0.05);
        if (!overflow) {
            taken++;
            for (int i = 0; i < 3; i++) want[i] -= 0.05f * (g[i] + (i < 2 ? 0.01f : 0.0f) * want[i]);
        }
        if (u.skipped != overflow) {
            mpt_fail(__FILE__, __LINE__, "step %d (%s): expected skipped=%s, got %s", k + 1,
                     overflow ? "inf/NaN" : "clean", overflow ? "yes" : "no", u.skipped ? "yes" : "no");
            break;
        }
    }
    for (int i = 0; i < 3; i++)
        MPT_CHECK_NEAR(want[i], p[i], 1e-5, 1e-6, "weight after 3,000 steps: SGD on the clean steps only");
    MPT_CHECK_EQ_I64(taken, opt.state.step, "inner optimizer steps over the trace");
    MPT_CHECK_EQ_I64(3000, opt.scaler.iter, "scaler updates over the trace");
    MPT_CHECK_EQ_I64(3000 - taken, opt.scaler.skipped, "skips the scaler counted");
    amp_lso_free(&opt);
}
