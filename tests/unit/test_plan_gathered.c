/* test_plan_gathered.c: Criterion tests of the planner's ZeRO-3 / FSDP term (plan/gathered.h) against the worst
 * moments worked out by hand from core/dist/fsdp.c's schedule. */
#include <criterion/criterion.h>
#include <string.h>

#include "plan/gathered.h"
#include "plan/plan.h"

static plan_model preset(const char *name) {
    plan_model m;
    cr_assert(plan_preset_find(name, &m), "preset %s should exist", name);
    return m;
}

/* The capstone's shape (untied LLaMA 1.1B, 4 ranks, one unit gathered ahead, a communication thread). With the
 * slowest thread the worst moment is the end of backward: the embeddings' gradients are committed at once (a
 * lookup gathers nothing, so nothing makes the compute wait), while blocks 1 and 0 still hold their weights and
 * gradients and block 1's reduce is running with its reduced shard and the MPI backend's receive segments (2 in
 * flight x 4 ranks x 512 KiB). Under bf16 the blocks were gathered in 16 bits into the cache (MEM_OTHER): of
 * their fp32 weights only the two RMSNorm gains are held. Measured on 4 ranks: 662,769,664 bytes (it was
 * 1,015,091,200 with fp32 gathers). */
Test(plan_gathered, capstone_worst_moment_is_the_end_of_backward) {
    plan_model m = preset("llama-1b");
    m.vocab = 32000;
    plan_gather_run run = {.shard_group = 4, .max_inflight = 1, .forward_prefetch = true, .backward_prefetch = true,
                           .overlap = true, .cache_bytes = 2};
    uint64_t B = plan_block_params(&m), E = m.vocab * m.hidden, gains = 2 * m.hidden;
    uint64_t want = 4 * (E + 2 * B + 2 * gains + (B + 3) / 4) + 2 * 4 * (512 << 10);
    for (uint64_t layers = 4; layers <= 22; layers += 18) {
        m.layers = layers;
        plan_gathered g;
        plan_gathered_bytes(&m, &run, &g);
        cr_expect_eq(g.comm, want, "L=%llu: %llu bytes, want %llu", (unsigned long long)layers,
                     (unsigned long long)g.comm, (unsigned long long)want);
        cr_expect_eq(g.comm, 662769664ULL, "the 4-rank run measured 662,769,664");
        cr_expect_eq(g.other, 2 * 2 * B, "the 16-bit cache of the two gathered blocks");
        cr_expect_str_eq(g.where, "backward, at the embeddings");
        cr_expect_eq(g.units, layers + 2);
    }
    /* Without the 16-bit kernel (the cache holds fp32 or nothing) the blocks are gathered in fp32. */
    run.cache_bytes = 0;
    m.layers = 22;
    plan_gathered g;
    plan_gathered_bytes(&m, &run, &g);
    cr_expect_eq(g.comm, 4 * (E + 2 * 2 * B + (B + 3) / 4) + 2 * 4 * (512 << 10), "fp32 gathers: %llu",
                 (unsigned long long)g.comm);
}

/* No thread: every gather and reduce runs in line, so only the running unit is there; the largest is the head,
 * with its weights and gradients (final norm included). */
Test(plan_gathered, in_line_holds_one_unit) {
    plan_model m = preset("llama-1b");
    plan_gather_run run = {.shard_group = 4, .max_inflight = 1, .forward_prefetch = true, .backward_prefetch = true,
                           .overlap = false, .cache_bytes = 0};
    plan_gathered g;
    plan_gathered_bytes(&m, &run, &g);
    uint64_t head = m.vocab * m.hidden + m.hidden;
    cr_expect_eq(g.comm, 4 * 2 * head, "%llu", (unsigned long long)g.comm);
    cr_expect_str_eq(g.where, "backward, at the head");
}

/* A tied GPT-2 in line: the root (embeddings, positions, final norm) stays gathered for the whole step and its
 * gradients live from the head's backward to the end, beside one block's weights and gradients. */
Test(plan_gathered, tied_root_stays_for_the_step) {
    plan_model m = preset("gpt2-124m");
    plan_gather_run run = {.shard_group = 2, .max_inflight = 1, .overlap = false};
    plan_gathered g;
    plan_gathered_bytes(&m, &run, &g);
    uint64_t root = m.vocab * m.hidden + m.context * m.hidden + 2 * m.hidden, B = plan_block_params(&m);
    cr_expect_eq(g.comm, 4 * (2 * root + 2 * B), "%llu", (unsigned long long)g.comm);
    cr_expect_str_eq(g.where, "backward, in the blocks");
}

/* More units in flight never hold less, and a faster schedule is bounded by the slowest. */
Test(plan_gathered, more_in_flight_holds_more) {
    plan_model m = preset("llama-1b");
    plan_gather_run run = {.shard_group = 8, .max_inflight = 1, .forward_prefetch = true, .backward_prefetch = true,
                           .overlap = true};
    uint64_t before = 0;
    for (int d = 1; d <= 4; d++) {
        run.max_inflight = d;
        plan_gathered g;
        plan_gathered_bytes(&m, &run, &g);
        cr_expect_geq(g.comm, before, "max_inflight %d: %llu < %llu", d, (unsigned long long)g.comm,
                      (unsigned long long)before);
        before = g.comm;
    }
}
