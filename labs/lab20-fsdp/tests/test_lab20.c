/* test_lab20.c: lab 20 visible tests: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD and HYBRID_SHARD train exactly like DDP
 * on real ranks; memory per rank is the planner's; bytes per step follow 3 Psi / 2 Psi; forward prefetch keeps
 * exactly one block ahead; backward prefetch gathers the next block before the current one is reduced. */
#include "lab20_run.h"

enum { STEPS = 6 };

static const char *const DDP[] = {"zero_optimization.stage=0", NULL};
static const char *const FULL[] = {"fsdp.sharding_strategy=FULL_SHARD", NULL};
static const char *const GRAD_OP[] = {"fsdp.sharding_strategy=SHARD_GRAD_OP", NULL};
static const char *const NO_SHARD[] = {"fsdp.sharding_strategy=NO_SHARD", NULL};

MPT_TEST(full_shard_trains_like_ddp_2_ranks) {
    lab19_result ddp, fs;
    lab19_train(&ddp, LAB20, "DDP", 2, STEPS, DDP);
    lab19_train(&fs, LAB20, "FSDP FULL_SHARD", 2, STEPS, FULL);
    lab19_check_same_training(&ddp, &fs, 1e-5);
    /* 2 micro-batches a step: each backward's reduced shard is added to the gradient shard, not written over it */
    static const char *const ddp_acc[] = {"zero_optimization.stage=0", "gradient_accumulation_steps=2", NULL};
    static const char *const fs_acc[] = {"fsdp.sharding_strategy=FULL_SHARD", "gradient_accumulation_steps=2", NULL};
    lab19_result ddp2, fs2;
    lab19_train(&ddp2, LAB20, "DDP, 2 micro-batches a step", 2, 3, ddp_acc);
    lab19_train(&fs2, LAB20, "FSDP FULL_SHARD, 2 micro-batches a step (the reduced shards must add up)", 2, 3, fs_acc);
    lab19_check_same_training(&ddp2, &fs2, 1e-5);
}

MPT_TEST(shard_grad_op_and_no_shard_train_like_ddp_2_ranks) {
    lab19_result ddp, go, ns;
    lab19_train(&ddp, LAB20, "DDP", 2, STEPS, DDP);
    lab19_train(&go, LAB20, "FSDP SHARD_GRAD_OP", 2, STEPS, GRAD_OP);
    lab19_check_same_training(&ddp, &go, 1e-5);
    lab19_train(&ns, LAB20, "FSDP NO_SHARD", 2, STEPS, NO_SHARD);
    lab19_check_same_training(&ddp, &ns, 1e-5);
}

MPT_TEST(full_shard_memory_per_rank_is_the_plans) {
    lab19_result fs;
    lab19_train(&fs, LAB20, "FSDP FULL_SHARD", 2, STEPS, FULL);
    const char *hint = "a rank keeps ceil(n/N) elements of every unit of n: its parameter, gradient and optimizer shards";
    lab19_check_tag_vs_plan(&fs, MEM_PARAM, 0.05, hint);
    lab19_check_tag_vs_plan(&fs, MEM_GRAD, 0.05, hint);
    lab19_check_tag_vs_plan(&fs, MEM_OPTIM, 0.05, hint);
}

/* Bytes each rank sends per step, against the ZeRO paper's volumes (N-1)/N x 4 Psi per all-gather or
 * reduce-scatter; the root unit is gathered once per step (it stays from forward to backward), so FULL_SHARD
 * sends a little under 3 Psi. */
MPT_TEST(comm_bytes_per_strategy_2_ranks) {
    static const struct {
        const char *const *sets;
        const char *name;
        double psis;
    } cases[] = {{FULL, "FULL_SHARD", 3}, {GRAD_OP, "SHARD_GRAD_OP", 2}, {NO_SHARD, "NO_SHARD", 2}};
    for (int c = 0; c < 3; c++) {
        lab19_result run;
        lab19_train(&run, LAB20, cases[c].name, 2, 4, cases[c].sets);
        const lab19_rank *r0 = &run.rank[0];
        double unit = (run.ranks - 1.0) / run.ranks * 4 * r0->params;
        double got = lab19_mean(r0->comm_bytes, r0->steps), want = cases[c].psis * unit;
        MPT_CHECK(fabs(got - want) <= 0.03 * want, "%s: %.0f bytes sent per step and rank, expected about %g x (N-1)/N x "
                  "4 Psi = %.0f (within 3%%)\n      likely: a unit gathered or reduced more (or less) often than the "
                  "strategy says, or reduced with an allreduce inside the shard group", run.what, got, cases[c].psis, want);
    }
}

MPT_TEST(forward_prefetch_keeps_one_block_ahead) {
    lab20_held off, on;
    lab20_forward_held(&off, 2, 4, false, true);
    lab20_forward_held(&on, 2, 4, true, true);
    for (int l = 0; l < 4; l++) {
        MPT_OBSERVE_NEAR(off.held[l], 0, 0); /* what the grader compares with the reference */
        MPT_OBSERVE_NEAR(on.held[l], 0, 0);
        double want_off = lab20_bytes(&off, 1), want_on = lab20_bytes(&on, l < 3 ? 2 : 1);
        MPT_CHECK(off.held[l] == want_off, "%s: block %d starts with %.0f bytes gathered, expected the root and this block "
                  "only (%.0f)\n      likely: under FULL_SHARD the block that just ran is dropped before the next is "
                  "gathered", off.what, l, off.held[l], want_off);
        MPT_CHECK(on.held[l] == want_on, "%s: block %d starts with %.0f bytes gathered, expected the root, this block%s "
                  "(%.0f)\n      likely: when a block starts, ask for the next max_inflight blocks (here 1), never "
                  "past the last block, never the root", on.what, l, on.held[l], l < 3 ? " and the next one" : "",
                  want_on);
    }
}

/* The comm thread runs collectives in the order they were asked for: with BACKWARD_PRE the gather of the block
 * backward needs next is asked for before the block that runs now is reduced. */
MPT_TEST(backward_prefetch_gathers_before_reducing) {
    static const char *const pre[] = {"fsdp.sharding_strategy=FULL_SHARD", "fsdp.backward_prefetch=BACKWARD_PRE",
                                      "fsdp.forward_prefetch=false", "model.layers=3", NULL};
    static const char *const none[] = {"fsdp.sharding_strategy=FULL_SHARD", "fsdp.backward_prefetch=NONE",
                                       "fsdp.forward_prefetch=false", "model.layers=3", NULL};
    lab19_result a, b;
    lab19_train(&a, LAB20, "FULL_SHARD, BACKWARD_PRE", 2, 3, pre);
    lab19_train(&b, LAB20, "FULL_SHARD, backward prefetch NONE", 2, 3, none);
    /* Before the first reduce-scatter of a step: the root and 3 blocks (forward), the last block again
     * (backward), and with BACKWARD_PRE the block before it too. */
    const lab19_result *runs[] = {&a, &b};
    for (int k = 0; k < 2; k++) {
        const lab19_rank *r0 = &runs[k]->rank[0];
        int want = k == 0 ? 6 : 5;
        for (int s = 2; s <= r0->steps; s++) {
            int gathers = 0;
            for (int i = 0; i < r0->ncomm; i++) {
                if (r0->comm[i].step != s) continue;
                if (r0->comm[i].op == LAB19_REDUCE_SCATTER) break;
                gathers += r0->comm[i].op == LAB19_ALLGATHER;
            }
            MPT_CHECK(gathers == want, "%s, step %d: %d all-gathers before the first reduce-scatter, expected %d\n"
                      "      likely: %s", runs[k]->what, s, gathers, want,
                      k == 0 ? "as a block starts backward, ask for the block backward needs next (one below it) "
                               "before its gradients are handed to the reduce"
                             : "without backward prefetch a block is gathered only when backward reaches it");
        }
    }
}

MPT_TEST(hybrid_shard_trains_like_ddp_and_refuses_a_bad_group) {
    static const char *const hybrid[] = {"fsdp.sharding_strategy=HYBRID_SHARD", "fsdp.hybrid_shard_size=2", NULL};
    lab19_result ddp, hy;
    lab19_train(&ddp, LAB20, "DDP", 4, 3, DDP);
    lab19_train(&hy, LAB20, "HYBRID_SHARD (groups of 2)", 4, 3, hybrid);
    lab19_check_same_training(&ddp, &hy, 1e-5);
    MPT_CHECK(hy.rank[0].shard_size == 2, "%s: the run header says shard_size %d, expected 2", hy.what,
              hy.rank[0].shard_size);
    static const char *const bad[] = {"fsdp.sharding_strategy=HYBRID_SHARD", "fsdp.hybrid_shard_size=3", NULL};
    char dir[64], *output = NULL;
    int rc = lab19_launch(LAB20, 4, 2, bad, dir, &output);
    lab19_cleanup(dir);
    MPT_CHECK(rc == 2 && strstr(output, "hybrid_shard_size"), "HYBRID_SHARD with groups of 3 on 4 ranks: exit %d, "
              "expected 2 with a message naming fsdp.hybrid_shard_size; output:\n%s", rc, lab19_tail(output, 600));
    free(output);
}
