/* test_lab20_hidden.c: lab 20 hidden tests: FULL_SHARD on 3 ranks (units not a multiple of 3), gradient
 * accumulation over micro-batches, HYBRID_SHARD's bytes, and how often each strategy gathers a block. */
#include "../../../labs/lab20-fsdp/tests/lab20_run.h"

MPT_TEST(hidden_full_shard_3_ranks_uneven_units) {
    static const char *const ddp_sets[] = {"zero_optimization.stage=0", NULL};
    static const char *const fs_sets[] = {"zero_optimization.stage=3", NULL};
    lab19_result ddp, fs;
    lab19_train(&ddp, LAB20, "DDP", 3, 4, ddp_sets);
    lab19_train(&fs, LAB20, "ZeRO-3 (FULL_SHARD)", 3, 4, fs_sets);
    lab19_check_same_training(&ddp, &fs, 1e-5);
    lab19_check_tag_vs_plan(&fs, MEM_OPTIM, 0.05, "a unit of n elements is cut in shards of ceil(n/3), the last padded");
}

MPT_TEST(hidden_accumulation_adds_micro_batches) {
    static const char *const ddp_sets[] = {"zero_optimization.stage=0", "gradient_accumulation_steps=2", NULL};
    static const char *const fs_sets[] = {"fsdp.sharding_strategy=FULL_SHARD", "gradient_accumulation_steps=2", NULL};
    lab19_result ddp, fs;
    lab19_train(&ddp, LAB20, "DDP, 2 micro-batches", 2, 4, ddp_sets);
    lab19_train(&fs, LAB20, "FULL_SHARD, 2 micro-batches", 2, 4, fs_sets);
    lab19_check_same_training(&ddp, &fs, 1e-5);
}

MPT_TEST(hidden_hybrid_shard_bytes_4_ranks) {
    static const char *const sets[] = {"fsdp.sharding_strategy=HYBRID_SHARD", "fsdp.hybrid_shard_size=2", NULL};
    lab19_result hy;
    lab19_train(&hy, LAB20, "HYBRID_SHARD (groups of 2)", 4, 3, sets);
    const lab19_rank *r0 = &hy.rank[0];
    /* Reduce: a reduce-scatter in the group of 2 (1/2 x 4 Psi) and an allreduce of the Psi/2 shard across the 2
     * groups (2 x 1/2 x 4 Psi/2): 4 Psi bytes in all. Gathers stay in the group: about 2 x 1/2 x 4 Psi. */
    double psi4 = 4 * r0->params, red = lab19_mean(r0->reduce_bytes, r0->steps), gat = lab19_mean(r0->gather_bytes, r0->steps);
    MPT_CHECK(fabs(red - psi4) <= 0.02 * psi4, "%s: %.0f reduce bytes per step, expected 4 Psi = %.0f\n      likely: "
              "reduce-scatter inside the shard group, then average the shard across the groups", hy.what, red, psi4);
    MPT_CHECK(fabs(gat - psi4) <= 0.03 * psi4, "%s: %.0f gather bytes per step, expected about 2 x 1/2 x 4 Psi = %.0f",
              hy.what, gat, psi4);
}

MPT_TEST(hidden_gathers_per_step_by_strategy) {
    static const char *const full[] = {"fsdp.sharding_strategy=FULL_SHARD", "model.layers=3", NULL};
    static const char *const grad_op[] = {"fsdp.sharding_strategy=SHARD_GRAD_OP", "model.layers=3", NULL};
    lab19_result a, b;
    lab19_train(&a, LAB20, "FULL_SHARD, 3 blocks", 2, 3, full);
    lab19_train(&b, LAB20, "SHARD_GRAD_OP, 3 blocks", 2, 3, grad_op);
    /* Unit gathers (the norm's one small all-gather of doubles aside): the root once, each block twice under
     * FULL_SHARD (forward, then backward) and once under SHARD_GRAD_OP (kept from forward to backward). */
    const lab19_result *runs[] = {&a, &b};
    for (int k = 0; k < 2; k++)
        for (int s = 2; s <= 3; s++) {
            int got = lab19_count_ops(&runs[k]->rank[0], LAB19_ALLGATHER, s) - 1, want = k == 0 ? 7 : 4;
            MPT_CHECK(got == want, "%s, step %d: %d unit all-gathers, expected %d", runs[k]->what, s, got, want);
        }
}
