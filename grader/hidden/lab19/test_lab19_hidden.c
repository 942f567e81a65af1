/* test_lab19_hidden.c: lab 19 hidden tests: uneven shards on 3 ranks (Psi not a multiple of 3), 4 ranks' memory
 * and bytes, and clipping by the norm assembled from the shards. */
#include "../../../labs/lab19-zero-data-parallel/tests/lab19_run.h"

enum { LAB = 19, STEPS = 5 };

MPT_TEST(hidden_uneven_shards_3_ranks) {
    static const char *const ddp_sets[] = {"zero_optimization.stage=0", NULL};
    static const char *const z1_sets[] = {"zero_optimization.stage=1", NULL};
    static const char *const z2_sets[] = {"zero_optimization.stage=2", "zero_optimization.reduce_bucket_size=20000", NULL};
    lab19_result ddp, z1, z2;
    lab19_train(&ddp, LAB, "DDP", 3, STEPS, ddp_sets);
    MPT_REQUIRE((long long)ddp.rank[0].params % 3 != 0, "the test model's %.0f parameters should not divide by 3",
                ddp.rank[0].params);
    lab19_train(&z1, LAB, "ZeRO-1", 3, STEPS, z1_sets);
    lab19_check_same_training(&ddp, &z1, 1e-5);
    lab19_check_replicas(&z1);
    lab19_train(&z2, LAB, "ZeRO-2 (buckets of 20000)", 3, STEPS, z2_sets);
    lab19_check_same_training(&ddp, &z2, 1e-5);
    lab19_check_replicas(&z2);
    lab19_check_tag_vs_plan(&z2, MEM_OPTIM, 0.05, "a rank owns floor(b/N) elements of a bucket of b, plus at most one left-over");
}

MPT_TEST(hidden_zero2_4_ranks_memory_and_bytes) {
    static const char *const sets[] = {"zero_optimization.stage=2", "zero_optimization.reduce_bucket_size=20000",
                                       "zero_optimization.overlap_comm=true", NULL};
    lab19_result z2;
    lab19_train(&z2, LAB, "ZeRO-2", 4, 3, sets);
    lab19_check_tag_vs_plan(&z2, MEM_OPTIM, 0.05, NULL);
    lab19_check_replicas(&z2);
    const lab19_rank *r0 = &z2.rank[0];
    double want = 2 * 3.0 / 4 * 4 * r0->params, got = lab19_mean(r0->comm_bytes, r0->steps);
    MPT_CHECK(fabs(got - want) <= 0.02 * want, "%s: %.0f bytes sent per step and rank, expected 2 (N-1)/N x 4 Psi = %.0f",
              z2.what, got, want);
}

MPT_TEST(hidden_clipping_uses_the_global_norm) {
    /* A small max norm: every step clips, so a norm taken from one shard only (or summed twice) changes the weights. */
    static const char *const ddp_sets[] = {"zero_optimization.stage=0", "gradient_clipping=0.05", NULL};
    static const char *const z1_sets[] = {"zero_optimization.stage=1", "gradient_clipping=0.05", NULL};
    lab19_result ddp, z1;
    lab19_train(&ddp, LAB, "DDP, clip at 0.05", 2, STEPS, ddp_sets);
    lab19_train(&z1, LAB, "ZeRO-1, clip at 0.05", 2, STEPS, z1_sets);
    lab19_check_same_training(&ddp, &z1, 1e-5);
}
