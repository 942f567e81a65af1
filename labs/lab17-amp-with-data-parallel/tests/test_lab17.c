/* test_lab17.c: lab 17 visible tests: agreeing on found_inf across ranks (agree_found_inf in core/train/step.c).
 * A real fp16 AMP run under DDP on 2 ranks, with an inf put into one rank's averaged gradients: every rank must
 * skip that step, keep the same loss scale, and stay bit-identical. */
#include "lab17_run.h"

/* Rank 1 finds an inf at step 3, rank 0 does not: both skip step 3, and both scales go from 2048 to 1024
 * (2^10, grown to 2^11 after two clean steps, halved by the overflow). */
MPT_TEST(both_ranks_skip_a_rank_local_overflow) {
    lab17_result res;
    lab17_run(&res, 2, 6, "1:3", NULL);
    if (!lab17_check_agreement(&res)) return;
    const lab17_step *st = &res.rank[0].step[2];
    MPT_CHECK(st->scale == 2048 && st->next_scale == 1024, "step 3 ran at scale %g and left %g; expected 2048 -> 1024 "
              "(grown after steps 1 and 2, halved by the overflow)", st->scale, st->next_scale);
}

/* Rank 0 finds an inf at step 4. With the agreement the replicas are bit-identical after every step. The same run
 * with each rank trusting only its own flag (the worker's "local" mode: found_inf_comm = NULL) is the control: there
 * the replicas part at step 4, which shows the test can tell. */
MPT_TEST(replicas_stay_bit_identical_after_an_overflow) {
    lab17_result res;
    lab17_run(&res, 2, 8, "0:4", NULL);
    if (!lab17_check_agreement(&res) || !lab17_check_replicas(&res)) return;
    lab17_result control;
    lab17_run(&control, 2, 8, "0:4", "local");
    MPT_REQUIRE(lab17_first_divergence(&control) == 4, "test setup: without agreement the replicas should part at step "
                "4, but they part at step %d", lab17_first_divergence(&control));
}

/* The fp16 communication hook (16-bit allreduce of the still-scaled gradients) and two accumulated micro-batches:
 * the overflow on rank 1 at step 2 is still skipped by both, and the replicas stay identical. */
MPT_TEST(agreement_with_a_16_bit_allreduce_and_accumulation) {
    lab17_result res;
    lab17_run(&res, 2, 6, "1:2", "hook=fp16 accum=2");
    if (lab17_check_agreement(&res)) lab17_check_replicas(&res);
}

/* Overflows on rank 1 at step 2 and on rank 0 at step 6, growth after 2 clean steps: both scalers must follow
 *   step   1     2     3    4    5     6     7    8
 *   scale  1024  1024  512  512  1024  1024  512  512    (skipping steps 2 and 6 on both ranks)
 * and no clean step may be skipped anywhere. */
MPT_TEST(both_scalers_follow_the_same_schedule) {
    lab17_result res;
    lab17_run(&res, 2, 8, "1:2,0:6", NULL);
    if (!lab17_check_agreement(&res)) return;
    static const double scales[] = {1024, 1024, 512, 512, 1024, 1024, 512, 512};
    for (int r = 0; r < 2; r++)
        for (int s = 0; s < 8; s++)
            if (res.rank[r].step[s].scale != scales[s]) {
                mpt_fail(__FILE__, __LINE__, "step %d ran at scale %g on rank %d, expected %g", s + 1,
                         res.rank[r].step[s].scale, r, scales[s]);
                return;
            }
    lab17_check_replicas(&res);
}

/* Three ranks: rank 2 alone finds an inf at step 2, ranks 0 and 1 together at step 4. "Some rank found one" must hold
 * for one rank of three (an average rounded to the nearest, 1/3, says no) and for two at once (a sum compared with
 * 1, 2, says no): MAX answers both. */
MPT_TEST(three_ranks_one_then_two_overflow) {
    lab17_result res;
    lab17_run(&res, 3, 5, "2:2,0:4,1:4", NULL);
    if (lab17_check_agreement(&res)) lab17_check_replicas(&res);
}
