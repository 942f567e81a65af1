/* test_lab26_hidden.c: lab 26 hidden tests: the hierarchical allreduce on 7 ranks (nodes of 3 and a folded 7th, in
 * bf16) and on 8 ranks each its own node (avg); more ring and overlap cases; a whole data-parallel step computed by
 * hand, with one bucket and with four. */
#include "../../../labs/lab26-scaling-data-parallel/tests/lab26_util.h"

#define CHECK_TIME(want, got, what) MPT_CHECK_NEAR((want), (got), 1e-9, 1e-15, (what))

MPT_TEST(hier_allreduce_7_ranks_nodes_of_3_bf16) {
    /* nodes {0,1,2} {3,4,5} {6}: rank 6 folds into rank 0; bf16 is reduced in fp32 and rounded once */
    size_t counts[] = {1, 2, 9, 2000};
    lab26_check(7, 3, "bf16", "sum", 2651, counts, 4, HINT_FOLD);
}

MPT_TEST(hier_allreduce_8_ranks_one_per_node_avg) {
    /* k = 1: every node a single rank, so phases 1 and 3 are empty and phase 2 is the whole ring */
    size_t counts[] = {1, 8, 1001};
    lab26_check(8, 1, "fp32", "avg", 2652, counts, 3,
                "with one rank per node comm_size(h.intra) is 1: the chunk is the whole buffer and the rings inside the "
                "node send nothing");
}

MPT_TEST(ring_allreduce_time_more_cases) {
    CHECK_TIME(2 * 1023 * (3e-6 + 1e9 / (1024 * 50e9)), sim_ring_allreduce_s(1024, 1e9, 3e-6, 50e9),
               "p = 1024, 1 GB, 3 us, 50 GB/s: 2046 steps; the latency term (6.1 ms) is as large as the bandwidth's");
    CHECK_TIME(2 * 2 * (1e-3 + 3.0 / 3), sim_ring_allreduce_s(3, 9, 1e-3, 3),
               "p = 3, 9 bytes at 3 B/s, alpha 1 ms: 4 steps of 1 ms + 1 s");
}

MPT_TEST(exposed_comm_more_cases) {
    CHECK_TIME(2.0, sim_exposed_comm_s(4, 0.5, 2), "4 s, last bucket 0.5 s, 2 s of backward: 3.5 - 2 = 1.5 s + 0.5 s show");
    CHECK_TIME(0.5, sim_exposed_comm_s(4, 0.5, 3.5), "backward exactly as long as the other buckets: only the last shows");
    CHECK_TIME(1e-3, sim_exposed_comm_s(1e-3, 0, 0), "no last bucket, no backward: all shows");
}

/* 1e9 parameters, bf16 gradients (2 GB), 8 GPUs = 2 nodes of 4 of the round cluster, 1000 tokens per GPU at MFU 0.5:
 * compute 6e9 x 1000 / 5e13 = 0.12 s, backward 0.08 s.
 * One bucket: in the node 6 x (1 us + 2e9 / 4e11) = 0.030006 s, across 2 nodes on 5e8 bytes 2 x (10 us + 5e8 / 2e10)
 * = 0.05002 s; the one bucket is the last: all 0.080026 s show; step 0.200026 s.
 * Four buckets of 5e8 bytes: each 6 x (1 us + 1.25e-3) + 2 x (10 us + 6.25e-3) = 0.020026 s, 0.080104 s in all;
 * max(0, 0.080104 - 0.020026 - 0.08) + 0.020026 = 0.020026 s show; step 0.140026 s. */
MPT_TEST(dp_step_hand_computed_one_bucket_and_four) {
    sim_cluster c = lab26_round_cluster();
    plan_model m;
    MPT_REQUIRE(sim_model_find("gpt2-1.5b", &m), "model gpt2-1.5b"); /* only its layer count matters for dp */
    sim_job j = sim_job_defaults();
    j.params = 1e9, j.gpus = 8, j.tokens_per_gpu = 1000, j.mfu = 0.5, j.bucket_bytes = 0;
    sim_result r;
    sim_step(&c, &m, &j, &r);
    CHECK_TIME(0.12, r.compute_s, "compute: 6 x 1e9 x 1000 / (100 TFLOP/s x 0.5)");
    CHECK_TIME(0.080026, r.comm_s, "one bucket: ring in the node + ring across the 2 nodes");
    CHECK_TIME(0.080026, r.exposed_s, "one bucket is the last bucket: none of it hides behind backward");
    CHECK_TIME(0.200026, r.step_s, "step = compute + exposed");
    j.bucket_bytes = 5e8;
    sim_step(&c, &m, &j, &r);
    CHECK_TIME(0.080104, r.comm_s, "four buckets: each pays the latencies again");
    CHECK_TIME(0.020026, r.exposed_s, "four buckets: backward (0.08 s) hides the first three, the last shows");
    CHECK_TIME(0.12 / 0.140026, r.efficiency, "efficiency = compute / step");
}
