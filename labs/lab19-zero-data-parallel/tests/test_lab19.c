/* test_lab19.c: lab 19 visible tests: ZeRO-1 and ZeRO-2 on 2 real ranks train exactly like DDP (losses, gradient
 * norms, bit-identical replicas), keep the planner's share of the optimizer state, and send 2 Psi per step. */
#include "lab19_run.h"

enum { LAB = 19, STEPS = 6 };

static const char *const DDP[] = {"zero_optimization.stage=0", NULL};
static const char *const ZERO1[] = {"zero_optimization.stage=1", NULL};
/* Buckets of 20000 elements: the test model (103040 parameters) makes 3 of them (the head with the last block, the first block, the embeddings), reduce-scattered as backward fills them. */
static const char *const ZERO2[] = {"zero_optimization.stage=2", "zero_optimization.reduce_bucket_size=20000",
                                    "zero_optimization.overlap_comm=true", NULL};

MPT_TEST(zero1_trains_like_ddp_2_ranks) {
    lab19_result ddp, z1;
    lab19_train(&ddp, LAB, "DDP", 2, STEPS, DDP);
    lab19_train(&z1, LAB, "ZeRO-1", 2, STEPS, ZERO1);
    lab19_check_same_training(&ddp, &z1, 1e-5);
    lab19_check_replicas(&z1);
}

MPT_TEST(zero2_buckets_train_like_ddp_2_ranks) {
    lab19_result ddp, z2;
    lab19_train(&ddp, LAB, "DDP", 2, STEPS, DDP);
    lab19_train(&z2, LAB, "ZeRO-2 (buckets of 20000)", 2, STEPS, ZERO2);
    lab19_check_same_training(&ddp, &z2, 1e-5);
    lab19_check_replicas(&z2);
}

/* 3 ranks: the test model's 103040 parameters, and its buckets, do not divide by 3. A rank owns floor(b/3) elements
 * of a bucket of b, the left-over b mod 3 are averaged whole (allreduce) and gathered back after the update. */
MPT_TEST(zero2_uneven_shards_3_ranks) {
    static const char *const z2[] = {"zero_optimization.stage=2", "zero_optimization.reduce_bucket_size=20000", NULL};
    lab19_result ddp, z;
    lab19_train(&ddp, LAB, "DDP", 3, 3, DDP);
    MPT_REQUIRE((long long)ddp.rank[0].params % 3 != 0, "the test model's %.0f parameters should not divide by 3",
                ddp.rank[0].params);
    lab19_train(&z, LAB, "ZeRO-2 on 3 ranks (uneven shards: the left-over elements of each bucket)", 3, 3, z2);
    lab19_check_same_training(&ddp, &z, 1e-5);
    lab19_check_replicas(&z);
}

MPT_TEST(zero1_memory_per_rank_is_the_plans) {
    lab19_result z1;
    lab19_train(&z1, LAB, "ZeRO-1", 2, STEPS, ZERO1);
    lab19_check_tag_vs_plan(&z1, MEM_OPTIM, 0.05, "AdamW's m and v for this rank's shard only: about Psi/N elements each");
    lab19_check_tag_vs_plan(&z1, MEM_PARAM, 0.05, NULL);
    lab19_check_tag_vs_plan(&z1, MEM_GRAD, 0.05, NULL);
}

MPT_TEST(zero2_sends_2_psi_per_step) {
    lab19_result z2;
    lab19_train(&z2, LAB, "ZeRO-2 (buckets of 20000)", 2, STEPS, ZERO2);
    const lab19_rank *r0 = &z2.rank[0];
    /* Bytes each rank sends: reduce-scatter (N-1)/N x 4 Psi + all-gather (N-1)/N x 4 Psi, the paper's 2 Psi. */
    double n = z2.ranks, want = 2 * (n - 1) / n * 4 * r0->params, got = lab19_mean(r0->comm_bytes, r0->steps);
    MPT_CHECK(fabs(got - want) <= 0.02 * want, "%s: %.0f bytes sent per step and rank, expected 2 (N-1)/N x 4 Psi = %.0f "
              "within 2%%\n      likely: a bucket reduced with an allreduce (twice the bytes), or gathered more than once",
              z2.what, got, want);
    for (int s = 2; s <= r0->steps; s++) {
        int rs = lab19_count_ops(r0, LAB19_REDUCE_SCATTER, s);
        MPT_CHECK(rs == 3, "%s, step %d: %d reduce-scatters, expected one per bucket (3)\n      likely: each bucket is "
                  "reduce-scattered once, in place, and nothing else is", z2.what, s, rs);
    }
}
