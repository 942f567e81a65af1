/* test_plan.c: Criterion tests of the memory planner (plan/): the ZeRO paper's table, published parameter counts,
 * the Korthikanti activation formula over many shapes, presets, name tables and input checks. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan.h"

static plan_model preset(const char *name) {
    plan_model m;
    cr_assert(plan_preset_find(name, &m), "preset %s should exist", name);
    return m;
}

Test(plan, zero_paper_table) {
    /* Rajbhandari et al. 2020, Figure 1: Psi = 7.5B, N = 64, mixed-precision Adam:
     * 16 Psi = 120 GB, 4 Psi + 12 Psi/N = 31.4 GB, 2 Psi + 14 Psi/N = 16.6 GB, 16 Psi/N = 1.9 GB. */
    const uint64_t expected[4] = {120000000000ULL, 31406250000ULL, 16640625000ULL, 1875000000ULL};
    const char *const printed[4] = {"120.0", "31.4", "16.6", "1.9"};
    for (int stage = 0; stage < 4; stage++) {
        plan_run run = plan_run_defaults(NULL);
        run.recipe = PLAN_RECIPE_FP16_MIXED;
        run.optimizer = PLAN_OPT_ADAM;
        run.zero_stage = stage;
        run.world = 64;
        plan_result r;
        plan_compute_params(7500000000ULL, &run, &r);
        cr_expect_eq(r.model_state_bytes, expected[stage], "stage %d: %llu", stage,
                     (unsigned long long)r.model_state_bytes);
        cr_expect_eq(r.total_bytes, r.model_state_bytes, "a bare parameter count has no activations");
        cr_expect_not(r.has_activations);
        char text[16];
        snprintf(text, sizeof text, "%.1f", (double)r.total_bytes / 1e9);
        cr_expect_str_eq(text, printed[stage], "stage %d prints as the paper's %s GB", stage, printed[stage]);
        cr_expect_eq(r.shard_elements, 117187500ULL);
    }
}

Test(plan, offload_moves_master_and_states_to_the_host) {
    /* ZeRO-Offload (Ren et al. 2021): mixed-precision Adam keeps 2 + 2 bytes per parameter on the device; the
     * partition's fp32 master (4), an fp32 gradient buffer (4) and m, v (8) go to the host: 16 per element. */
    const uint64_t psi = 7500000000ULL;
    for (int stage = 0; stage <= 2; stage++) {
        plan_run run = plan_run_defaults(NULL);
        run.recipe = PLAN_RECIPE_FP16_MIXED;
        run.optimizer = PLAN_OPT_ADAM;
        run.zero_stage = stage;
        run.world = 64;
        run.offload = true;
        plan_result r;
        plan_compute_params(psi, &run, &r);
        uint64_t partition = stage >= 1 ? (psi + 63) / 64 : psi;
        cr_expect_eq(r.bytes[MEM_MASTER] + r.bytes[MEM_OPTIM], 0, "stage %d: nothing of the optimizer on the device",
                     stage);
        cr_expect_eq(r.bytes[MEM_HOST], 16 * partition, "stage %d: host %llu", stage,
                     (unsigned long long)r.bytes[MEM_HOST]);
        cr_expect_eq(r.model_state_bytes, r.bytes[MEM_PARAM] + r.bytes[MEM_GRAD], "the device total leaves the host out");
    }
    /* fp32 weights (mixpar's fp32 recipe): the host's update needs a master of its own all the same. */
    plan_run run = plan_run_defaults(NULL);
    run.recipe = PLAN_RECIPE_FP32;
    run.offload = true;
    plan_result r;
    plan_compute_params(1000, &run, &r);
    cr_expect_eq(r.bytes[MEM_HOST], 16000);
    cr_expect_eq(r.model_state_bytes, 8000);
}

Test(plan, published_parameter_counts) {
    /* GPT-2 with V = 50257, T = 1024: the counts Hugging Face reports for gpt2, gpt2-medium, -large, -xl.
     * LLaMA-7B's published count, TinyLlama-1.1B's (the llama-1b shape). GPT-3 175B from the formula:
     * 96 (12 h^2 + 13 h) + (V + T) h + 2h with h = 12288: 173,961,510,912 + 642,723,840 + 24,576. */
    const struct {
        const char *name;
        uint64_t params;
    } known[] = {{"gpt2-124m", 124439808ULL},     {"gpt2-350m", 354823168ULL},   {"gpt2-774m", 774030080ULL},
                 {"gpt2-1.5b", 1557611200ULL},    {"llama-1b", 1100048384ULL},   {"llama-7b", 6738415616ULL},
                 {"gpt3-175b", 174604259328ULL}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        plan_model m = preset(known[i].name);
        cr_expect_eq(plan_model_params(&m), known[i].params, "%s: got %llu, expected %llu", known[i].name,
                     (unsigned long long)plan_model_params(&m), (unsigned long long)known[i].params);
    }
}

Test(plan, every_preset_is_valid_and_named_uniquely) {
    cr_assert_eq(plan_preset_count(), 7);
    for (int i = 0; i < plan_preset_count(); i++) {
        const plan_model *m = plan_preset_at(i);
        plan_problem why;
        cr_expect(plan_model_check(m, &why), "%s: %s (%s)", m->name, why.expected, why.found);
        plan_run run = plan_run_defaults(m);
        cr_expect(plan_run_check(m, &run, &why), "%s defaults: %s (%s)", m->name, why.expected, why.found);
        cr_expect_eq(run.seq, m->context, "the default sequence is the model's context");
        cr_expect_eq(m->ffn, plan_default_ffn(m->arch, m->hidden), "%s: ffn follows the architecture's rule",
                     m->name);
        cr_expect(strlen(plan_preset_about(i)) > 0);
        for (int j = 0; j < i; j++) cr_expect_str_neq(m->name, plan_preset_at(j)->name);
    }
    plan_model m;
    cr_expect_not(plan_preset_find("gpt5", &m));
}

Test(plan, default_ffn_rules) {
    cr_expect_eq(plan_default_ffn(PLAN_ARCH_GPT2, 768), 3072);
    cr_expect_eq(plan_default_ffn(PLAN_ARCH_LLAMA, 4096), 11008); /* ceil(8*4096/3) = 10923 -> 43 * 256 */
    cr_expect_eq(plan_default_ffn(PLAN_ARCH_LLAMA, 2048), 5632);  /* ceil(8*2048/3) = 5462 -> 22 * 256 */
    cr_expect_eq(plan_default_ffn(PLAN_ARCH_LLAMA, 768), 2048);   /* exactly 2048 = 8 * 256 */
}

Test(plan, korthikanti_formula_over_shapes) {
    /* For GPT-2-shaped blocks with 16-bit activations and dropout, bytes = 34 sbh + 5 a s^2 b for any shape. */
    const uint64_t hs[] = {64, 768, 1600, 12288}, as[] = {1, 12, 25, 96}, ss[] = {1, 7, 128, 2048}, bs[] = {1, 3, 8};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 4; j++)
            for (size_t k = 0; k < 3; k++) {
                uint64_t h = hs[i], a = as[i], s = ss[j], b = bs[k];
                plan_model m = {.name = "shape", .arch = PLAN_ARCH_GPT2, .layers = 2, .hidden = h, .heads = a,
                                .kv_heads = a, .ffn = 4 * h, .vocab = 100, .context = 4096, .tied_head = true};
                plan_run run = plan_run_defaults(&m);
                run.seq = s;
                run.batch = b;
                run.recipe = PLAN_RECIPE_FP16_MIXED;
                run.dropout = true;
                uint64_t want = 34 * s * b * h + 5 * a * s * s * b;
                cr_expect_eq(plan_block_activation_bytes(&m, &run, true), want, "h %llu a %llu s %llu b %llu",
                             (unsigned long long)h, (unsigned long long)a, (unsigned long long)s,
                             (unsigned long long)b);
                cr_expect_eq(plan_block_activation_bytes(&m, &run, false), 34 * s * b * h);
            }
}

Test(plan, activation_parts_add_up) {
    for (int i = 0; i < plan_preset_count(); i++)
        for (int rc = 0; rc < PLAN_NRECOMPUTES; rc++) {
            plan_model m = *plan_preset_at(i);
            plan_run run = plan_run_defaults(&m);
            run.recompute = (plan_recompute)rc;
            plan_result r;
            plan_compute(&m, &run, &r);
            cr_expect_eq(r.act.total, m.layers * r.act.block_kept + r.act.working_set + r.act.outside);
            cr_expect_eq(r.bytes[MEM_ACT], r.act.total);
            cr_expect_eq(r.total_bytes, r.model_state_bytes + r.act.total);
            cr_expect_eq(r.bytes[MEM_COMM] + r.bytes[MEM_OTHER], 0);
            cr_expect_leq(r.act.block_kept, r.act.block_full, "%s: recompute never keeps more", m.name);
        }
}

Test(plan, sharding_never_grows_and_matches_formulas) {
    /* For every preset and N in 1..9, per-rank model states fall (weakly) with each stage, and equal the
     * ZeRO paper's closed forms with Psi/N rounded up. */
    for (int i = 0; i < plan_preset_count(); i++)
        for (uint64_t n = 1; n <= 9; n++) {
            plan_model m = *plan_preset_at(i);
            uint64_t psi = plan_model_params(&m), shard = (psi + n - 1) / n, previous = UINT64_MAX;
            const uint64_t closed[4] = {16 * psi, 4 * psi + 12 * shard, 2 * psi + 14 * shard, 16 * shard};
            for (int stage = 0; stage < 4; stage++) {
                plan_run run = plan_run_defaults(&m);
                run.zero_stage = stage;
                run.world = n;
                plan_result r;
                plan_compute(&m, &run, &r);
                cr_expect_eq(r.model_state_bytes, closed[stage], "%s N=%llu stage %d", m.name, (unsigned long long)n,
                             stage);
                cr_expect_leq(r.model_state_bytes, previous);
                previous = r.model_state_bytes;
                cr_expect_eq(r.zero3_gather_bytes, stage == 3 ? 2 * plan_block_params(&m) : 0);
            }
        }
}

Test(plan, recipes_and_optimizers_by_name) {
    for (int r = 0; r < PLAN_NRECIPES; r++)
        cr_expect_eq(plan_recipe_from_name(plan_recipe_get((plan_recipe)r)->name), r);
    for (int o = 0; o < PLAN_NOPTIMIZERS; o++)
        cr_expect_eq(plan_optimizer_from_name(plan_optimizer_get((plan_optimizer)o)->name), o);
    for (int c = 0; c < PLAN_NRECOMPUTES; c++) cr_expect_eq(plan_recompute_from_name(plan_recompute_name(c)), c);
    for (int a = 0; a < PLAN_NARCHS; a++) cr_expect_eq(plan_arch_from_name(plan_arch_get((plan_arch)a)->name), a);
    cr_expect_eq(plan_recipe_from_name("bf16"), -1);
    cr_expect_eq(plan_optimizer_from_name("Adam"), -1);
    cr_expect_eq(plan_recompute_from_name(""), -1);
    cr_expect_eq(plan_arch_from_name("bert"), -1);
    /* The ZeRO paper's K = 12 for the mixed recipes with Adam; 16 bytes a parameter in fp32 + Adam too. */
    uint64_t per[MEM_NTAGS];
    plan_bytes_per_param(PLAN_RECIPE_BF16_MIXED, PLAN_OPT_ADAMW, per);
    cr_expect_eq(per[MEM_MASTER] + per[MEM_OPTIM], 12);
    plan_bytes_per_param(PLAN_RECIPE_FP32, PLAN_OPT_ADAM, per);
    cr_expect_eq(per[MEM_PARAM] + per[MEM_GRAD] + per[MEM_MASTER] + per[MEM_OPTIM], 16);
}

Test(plan, model_checks_say_what_is_wrong) {
    plan_problem why;
    plan_model m = preset("gpt2-124m");
    m.hidden = 1000;
    cr_expect_not(plan_model_check(&m, &why));
    cr_expect(strstr(why.expected, "divide") != NULL, "%s", why.expected);
    cr_expect(strstr(why.hint, "--heads 10 or 20") != NULL, "%s", why.hint);
    m = preset("llama-1b");
    m.kv_heads = 5;
    cr_expect_not(plan_model_check(&m, &why));
    cr_expect(strstr(why.found, "kv-heads 5") != NULL, "%s", why.found);
    m = preset("gpt2-124m");
    m.layers = 0;
    cr_expect_not(plan_model_check(&m, &why));
    cr_expect(strstr(why.found, "--layers 0") != NULL, "%s", why.found);
    m = preset("gpt2-124m");
    m.layers = 100000000;
    m.hidden = 1000000;
    m.heads = 1;
    m.kv_heads = 1;
    cr_expect_not(plan_model_check(&m, &why), "sizes whose bytes pass 2^62 are refused, not wrapped");
}

Test(plan, run_checks_say_what_is_wrong) {
    plan_problem why;
    plan_model m = preset("gpt2-124m");
    plan_run run = plan_run_defaults(&m);
    run.zero_stage = 5;
    cr_expect_not(plan_run_check(&m, &run, &why));
    cr_expect(strstr(why.found, "stage 5") != NULL);
    run = plan_run_defaults(&m);
    run.world = 0;
    cr_expect_not(plan_run_check(&m, &run, &why));
    run = plan_run_defaults(&m);
    run.seq = 2048;
    cr_expect_not(plan_run_check(&m, &run, &why), "GPT-2's learned positions stop at T = 1024");
    cr_expect(strstr(why.hint, "--seq 1024") != NULL, "%s", why.hint);
    m = preset("llama-1b");
    run = plan_run_defaults(&m);
    run.seq = 8192;
    cr_expect(plan_run_check(&m, &run, &why), "rotary positions have no table: longer sequences are plannable");
    run.seq = 100000000;
    run.batch = 100000;
    cr_expect_not(plan_run_check(&m, &run, &why));
    run = plan_run_defaults(NULL);
    cr_expect(plan_run_check(NULL, &run, &why), "a bare parameter count needs no model");
}

Test(plan, compute_stops_with_exit_2_on_bad_input, .exit_code = 2) {
    plan_model m = preset("gpt2-124m");
    plan_run run = plan_run_defaults(&m);
    run.world = 0;
    plan_result r;
    plan_compute(&m, &run, &r);
}

Test(plan, compute_params_stops_with_exit_2_on_zero, .exit_code = 2) {
    plan_run run = plan_run_defaults(NULL);
    plan_result r;
    plan_compute_params(0, &run, &r);
}
