/* test_lab26_model.c: lab 26 visible tests of part B, the cost model (core/plan/simulate.c): the ring allreduce time
 * and the exposed communication on hand-computed cases, the hierarchical cost built from them, and two properties of
 * the whole simulator: more bandwidth never makes a step slower, and no configuration scales better than linearly. */
#include "lab26_util.h"

#define CHECK_TIME(want, got, what) MPT_CHECK_NEAR((want), (got), 1e-9, 1e-15, (what))

MPT_TEST(ring_allreduce_time_hand_computed) {
    /* 2 (p-1) (alpha + n / (p B)) */
    CHECK_TIME(1.8e-4, sim_ring_allreduce_s(4, 1e6, 5e-6, 10e9),
               "p = 4, 1 MB, alpha 5 us, 10 GB/s: 6 steps of (5 us + 1e6 / 4e10 s = 25 us) = 180 us");
    CHECK_TIME(14.0, sim_ring_allreduce_s(8, 8e9, 0, 1e9),
               "p = 8, 8 GB, no latency, 1 GB/s: 14 steps of 1 GB each = 14 s (2(p-1)/p x n / B)");
    CHECK_TIME(4e-6, sim_ring_allreduce_s(2, 0, 2e-6, 1e9),
               "p = 2, 0 bytes: 2 steps of pure latency, 2 x 2 us (a message costs alpha even when empty)");
    CHECK_TIME(0.0, sim_ring_allreduce_s(1, 1e9, 5e-6, 1e9), "p = 1: nothing to send, 0 s");
    CHECK_TIME(2 * 99 * (1e-6 + 1e8 / (100 * 25e9)), sim_ring_allreduce_s(100, 1e8, 1e-6, 25e9),
               "p = 100, 100 MB, 1 us, 25 GB/s: 198 steps of 1 us + 40 us");
}

MPT_TEST(exposed_comm_with_overlap_hand_computed) {
    /* max(0, comm - last - overlap) + last */
    CHECK_TIME(5.0, sim_exposed_comm_s(10, 2, 5),
               "10 s of comm, last bucket 2 s, 5 s of backward: 8 s of the other buckets, 5 hidden, 3 + 2 = 5 s show");
    CHECK_TIME(2.0, sim_exposed_comm_s(10, 2, 20),
               "backward (20 s) hides all but the last bucket (2 s), which starts only when backward ends");
    CHECK_TIME(10.0, sim_exposed_comm_s(10, 0, 0), "no backward to hide behind: all 10 s show");
    CHECK_TIME(3.0, sim_exposed_comm_s(3, 3, 100), "one bucket (it is the last): all of it shows, whatever backward");
    CHECK_TIME(0.0, sim_exposed_comm_s(0, 0, 1), "no communication: nothing shows (never negative)");
}

MPT_TEST(hierarchical_cost_is_ring_in_node_plus_ring_across) {
    sim_cluster c = lab26_round_cluster();
    /* 16 GPUs = 4 nodes of 4, 400 MB: in the node 2 x 3 x (1 us + 4e8 / 4e11 s) = 6.006 ms; across 4 nodes, 1e8 bytes
     * (a quarter each): 2 x 3 x (10 us + 1e8 / 4e10 s) = 15.06 ms; 21.066 ms in all. */
    CHECK_TIME(6.006e-3 + 15.06e-3, sim_allreduce_s(&c, 16, 4e8), "16 GPUs as 4 nodes of 4, 400 MB");
    CHECK_TIME(6.006e-3, sim_allreduce_s(&c, 4, 4e8), "4 GPUs: one node, NVLink only");
    CHECK_TIME(2 * (1e-6 + 4e8 / 2e11), sim_allreduce_s(&c, 2, 4e8), "2 GPUs in one node: 2 x (1 us + 2 ms)");
}

/* Every strategy, model and GPU count of the course's study, each link's bandwidth doubled step by step: the step
 * time may only fall or stay. */
MPT_TEST(simulator_more_bandwidth_is_never_slower) {
    int worse = 0;
    for (int mi = 0; mi < LAB26_NMODELS; mi++) {
        plan_model m;
        MPT_REQUIRE(sim_model_find(LAB26_MODELS[mi].name, &m), "model %s", LAB26_MODELS[mi].name);
        for (int s = 0; s < SIM_NSTRATEGIES; s++)
            for (int g = 8; g <= 1024; g *= 4)
                for (int link = 0; link < 2; link++) {
                    sim_cluster c = lab26_round_cluster();
                    sim_job j = sim_job_defaults();
                    j.params = LAB26_MODELS[mi].params, j.strategy = (sim_strategy)s, j.gpus = g, j.tp = 4;
                    j.pp = 2;
                    double prev = INFINITY;
                    for (double bw = 0.5e9; bw <= 1e12; bw *= 2) {
                        *(link ? &c.intra_bw : &c.inter_bw) = bw;
                        sim_result r;
                        sim_step(&c, &m, &j, &r);
                        if (!r.feasible) continue;
                        if (r.step_s > prev * (1 + 1e-12) && worse++ < 3)
                            mpt_fail(__FILE__, __LINE__, "%s %s on %d GPUs: %s bandwidth %.3g -> %.3g GB/s made the step "
                                     "slower (%.6g -> %.6g s): check that time only ever divides bytes by bandwidth",
                                     m.name, sim_strategy_name((sim_strategy)s), g, link ? "intra-node" : "inter-node",
                                     bw / 2e9, bw / 1e9, prev, r.step_s);
                        prev = r.step_s;
                    }
                    MPT_OBSERVE_NEAR(prev, 1e-9, 1e-12);
                }
    }
}

MPT_TEST(simulator_efficiency_at_most_one) {
    static const char *const CLUSTERS[] = {"dgx-h100-ib", "eth-100g"};
    int bad = 0;
    for (int mi = 0; mi < LAB26_NMODELS; mi++)
        for (int ci = 0; ci < 2; ci++)
            for (int s = 0; s < SIM_NSTRATEGIES; s++)
                for (int g = 8; g <= 1024; g *= 2)
                    for (int overlap = 0; overlap < 2; overlap++) {
                        plan_model m;
                        sim_cluster c;
                        MPT_REQUIRE(sim_model_find(LAB26_MODELS[mi].name, &m) && sim_cluster_find(CLUSTERS[ci], &c),
                                    "presets");
                        sim_job j = sim_job_defaults();
                        j.params = LAB26_MODELS[mi].params, j.strategy = (sim_strategy)s, j.gpus = g;
                        j.overlap = overlap;
                        sim_result r;
                        sim_step(&c, &m, &j, &r);
                        if (!r.feasible) continue;
                        bool ok = r.efficiency > 0 && r.efficiency <= 1 && r.exposed_s >= 0 && r.exposed_s <= r.comm_s * (1 + 1e-12);
                        if (!ok && bad++ < 3)
                            mpt_fail(__FILE__, __LINE__, "%s %s on %d GPUs of %s (overlap %d): efficiency %.6g, exposed "
                                     "%.6g s of %.6g s of communication; expected 0 < efficiency <= 1 and 0 <= exposed "
                                     "<= comm: exposed can never be negative nor more than the communication itself",
                                     m.name, sim_strategy_name((sim_strategy)s), g, c.name, overlap, r.efficiency,
                                     r.exposed_s, r.comm_s);
                        if (g == 1024) MPT_OBSERVE_NEAR(r.efficiency, 1e-9, 1e-12);
                    }
}
