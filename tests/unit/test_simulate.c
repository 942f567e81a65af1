/* test_simulate.c: Criterion tests of the scaling simulator (plan/simulate.h): presets and models, the ZeRO states per
 * GPU against the paper's formulas, the 3D bubble and feasibility, and the limits where communication vanishes. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "plan/simulate.h"

static sim_cluster cluster(const char *name) {
    sim_cluster c;
    cr_assert(sim_cluster_find(name, &c), "cluster %s should exist", name);
    return c;
}

static plan_model model(const char *name) {
    plan_model m;
    cr_assert(sim_model_find(name, &m), "model %s should exist", name);
    return m;
}

Test(simulate, presets_carry_their_datasheet_figures) {
    sim_cluster ib = cluster("dgx-h100-ib"), eth = cluster("eth-100g");
    cr_expect_eq(ib.gpus_per_node, 8);
    cr_expect_float_eq(ib.intra_bw, 450e9, 1, "NVLink 4: 900 GB/s both ways");
    cr_expect_float_eq(ib.inter_bw, 50e9, 1, "400 Gb/s NDR per GPU");
    cr_expect_float_eq(eth.inter_bw, 12.5e9 / 8, 1, "100 Gb/s per node, 8 GPUs");
    cr_expect_float_eq(ib.peak_flops, 989e12, 1);
    for (int i = 0; i < sim_cluster_count(); i++) cr_expect(strlen(sim_cluster_at(i)->about) > 20);
    sim_cluster none;
    cr_expect(!sim_cluster_find("dgx-b300", &none));
}

Test(simulate, models_include_the_planner_presets_and_llama_70b) {
    plan_model m = model("llama-70b");
    cr_expect_eq(plan_model_params(&m), 68976648192ULL, "Llama-2-70B: 68,976,648,192 parameters");
    m = model("gpt2-1.5b");
    cr_expect_eq(plan_model_params(&m), 1557611200ULL);
    cr_expect(strstr(sim_model_names(), "llama-70b") && strstr(sim_model_names(), "gpt2-124m"));
    plan_model none;
    cr_expect(!sim_model_find("gpt5", &none));
    for (int s = 0; s < SIM_NSTRATEGIES; s++)
        cr_expect_eq(sim_strategy_from_name(sim_strategy_name((sim_strategy)s)), s);
    cr_expect_eq(sim_strategy_from_name("zero4"), -1);
}

Test(simulate, zero_states_per_gpu_follow_the_paper) {
    /* Rajbhandari et al. 2020: Psi = 7.5B, N = 64: 120, 31.4, 16.6, 1.9 GB. */
    sim_cluster c = cluster("dgx-h100-ib");
    plan_model m = model("llama-7b");
    sim_job j = sim_job_defaults();
    j.params = 7.5e9, j.gpus = 64;
    const double want[4] = {120e9, 31.40625e9, 16.640625e9, 1.875e9};
    for (int s = SIM_DP; s <= SIM_ZERO3; s++) {
        j.strategy = (sim_strategy)s;
        sim_result r;
        sim_step(&c, &m, &j, &r);
        cr_expect(fabs(r.state_bytes - want[s]) < 1, "%s: %g bytes, expected %g", sim_strategy_name((sim_strategy)s),
                  r.state_bytes, want[s]);
    }
}

Test(simulate, three_d_bubble_and_feasibility) {
    sim_cluster c = cluster("dgx-h100-ib");
    plan_model m = model("llama-70b");
    sim_job j = sim_job_defaults();
    j.params = (double)plan_model_params(&m), j.strategy = SIM_3D, j.gpus = 16; /* tp 8 x pp 4 = 32 > 16 */
    sim_result r;
    sim_step(&c, &m, &j, &r);
    cr_expect(!r.feasible);
    j.gpus = 64;
    sim_step(&c, &m, &j, &r);
    cr_assert(r.feasible);
    cr_expect_float_eq(r.bubble_s, r.compute_s * 3 / 16, 1e-9, "pp 4, 16 micro-batches: (p-1)/m of the compute");
    cr_expect_float_eq(r.state_bytes, 16.0 * j.params / 32, 1, "states sharded by tp x pp");
}

Test(simulate, one_gpu_and_infinite_network_leave_only_compute) {
    sim_cluster c = cluster("eth-100g");
    plan_model m = model("gpt2-1.5b");
    sim_job j = sim_job_defaults();
    j.params = (double)plan_model_params(&m), j.gpus = 1;
    sim_result r;
    sim_step(&c, &m, &j, &r);
    cr_expect_float_eq(r.comm_s, 0, 1e-15, "one GPU sends nothing");
    cr_expect_float_eq(r.efficiency, 1, 1e-12);
    cr_expect_float_eq(r.compute_s, 6 * j.params * j.tokens_per_gpu / (989e12 * 0.4), 1e-9);
    cr_expect_float_eq(sim_ring_half_s(4, 4e6, 1e-6, 1e9) * 2, sim_ring_allreduce_s(4, 4e6, 1e-6, 1e9), 1e-15,
                       "reduce-scatter + allgather = allreduce");
}
