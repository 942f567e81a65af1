/* test_lab16_accum.c: lab 16 visible tests, part C: gradient accumulation under DDP (accumulate_no_sync in
 * core/train/step.c): the micro-batches' gradients add up to one batch's, each loss divided by the count, and DDP
 * reduces once per step, after the last micro-batch. */
#include "lab16_accum.h"

/* 4 micro-batches of 2 rows against one batch of the same 8 rows (fp32): the step's gradients must be the same
 * within 1e-6 of the largest (only the order of the sums differs), and so must the loss. */
MPT_TEST(accumulating_4_micro_batches_equals_one_batch_of_4B) {
    enum { B = 2, ACCUM = 4 };
    int inputs[LAB16_ROWS_MAX * LAB16_T], targets[LAB16_ROWS_MAX * LAB16_T];
    lab16_batch(1600 + mpt_seed() % 1000, B * ACCUM, inputs, targets);
    lab16_ddp_run run;
    lab16_ddp_open(&run, 0);
    size_t n = model_num_params(run.m);
    float *partial = malloc((size_t)ACCUM * n * sizeof(float)), *one = malloc(n * sizeof(float));
    MPT_REQUIRE(partial && one, "out of memory");
    lab16_reference(inputs, targets, B, ACCUM, partial);
    model *big = lab16_model(); /* one batch of B * ACCUM rows, loss times 1 */
    model_zero_grad(big);
    float big_loss = model_forward(big, inputs, targets, B * ACCUM, LAB16_T);
    model_backward(big, 1.0f);
    memcpy(one, model_grads(big), n * sizeof(float));
    model_free(big);

    train_step_result r = lab16_ddp_step(&run, inputs, targets, B, ACCUM);
    const float *got = model_grads(run.m);
    MPT_OBSERVE_NEAR_F32(got, one, (long)n, 1e-5, 1e-7);
    MPT_OBSERVE_NEAR(r.loss, 1e-6, 0);
    double largest, diff;
    lab16_compare(got, one, n, &largest, &diff);
    if (!(diff <= 1e-6 * largest)) {
        char why[400];
        lab16_explain(got, partial, n, ACCUM, why, sizeof why);
        mpt_fail(__FILE__, __LINE__, "%d micro-batches of %d rows, DDP on one rank, fp32: the step's gradients differ "
                 "from one batch of %d rows by up to %.3g (largest gradient %.3g; allowed 1e-6 of it)\n      likely "
                 "mistake: %s", ACCUM, B, ACCUM * B, diff, largest, why);
    }
    MPT_CHECK(fabs(r.loss - big_loss) <= 1e-5 * fabs(big_loss), "the step's loss is %.7g, one batch of the same rows "
              "gives %.7g: the result's loss is the mean of the micro-batches' mean losses", (double)r.loss,
              (double)big_loss);
    free(partial);
    free(one);
    lab16_ddp_close(&run);
}

/* DDP with one bucket: a step of 4 micro-batches reduces exactly once, and the buffer it reduces already holds
 * all four micro-batches' gradients (the sum, complete). With 3 buckets per backward: 3 reductions per step. */
MPT_TEST(ddp_reduces_once_per_step_after_the_last_micro_batch) {
    enum { B = 2, ACCUM = 4 };
    int inputs[LAB16_ROWS_MAX * LAB16_T], targets[LAB16_ROWS_MAX * LAB16_T];
    lab16_batch(1700 + mpt_seed() % 1000, B * ACCUM, inputs, targets);
    for (int buckets = 1; buckets <= 2; buckets++) {
        lab16_ddp_run run;
        model *probe = lab16_model();
        size_t n = model_num_params(probe);
        model_free(probe);
        lab16_ddp_open(&run, buckets == 1 ? 0 : n / 3 + 1);
        /* one plain step first: how many buckets one backward launches */
        lab16_ddp_step(&run, inputs, targets, B * ACCUM, 1);
        int per_backward = run.watch.calls;
        float *partial = malloc((size_t)ACCUM * n * sizeof(float));
        MPT_REQUIRE(partial, "out of memory");
        lab16_reference(inputs, targets, B, ACCUM, partial);
        lab16_ddp_step(&run, inputs, targets, B, ACCUM);
        MPT_OBSERVE(run.watch.calls);
        MPT_CHECK_EQ_U64((uint64_t)per_backward, (uint64_t)run.watch.calls,
                         per_backward == 1 ? "reductions in a step of 4 micro-batches, one bucket (4 means DDP synced "
                                             "in every backward: set ddp_set_sync(s->ddp, false) before all but the "
                                             "last; 0 means it never synced)"
                                           : "reductions in a step of 4 micro-batches, 3 buckets per backward (one "
                                             "synced backward launches them all)");
        if (run.watch.calls >= 1 && run.watch.calls <= LAB16_REDUCES_MAX) {
            /* the first bucket reduced: which partial sum its span held then */
            const size_t lo = run.watch.lo[0], span = run.watch.hi[0] - lo;
            const float *first_seen = run.watch.seen[0] + lo;
            int after = 0;
            double largest, diff;
            for (int k = 0; k < ACCUM && !after; k++) {
                lab16_compare(first_seen, partial + (size_t)k * n + lo, span, &largest, &diff);
                if (diff <= 1e-6 * largest) after = k + 1;
            }
            MPT_OBSERVE(after);
            MPT_CHECK(after == ACCUM, "the first reduction of the step saw the gradients of %d of the %d micro-batches"
                      " (0: of no partial sum)\n      expected: all %d (DDP reduces during the last backward, when the "
                      "sum is complete)\n      likely mistake: %s", after, ACCUM, ACCUM, after == 1 ? "sync on the first micro-batch (k == 0) instead of the last "
                                                 "(k == accum - 1)"
                                               : "the sync flag: true exactly when k == accum - 1");
        }
        free(partial);
        lab16_ddp_close(&run);
    }
}

/* 3 and 5 micro-batches (odd counts, so 1/(accum - 1) and 1/(accum + 1) are far from 1/accum): the step's
 * gradients are the mean of the micro-batches' gradients, which the test builds itself micro-batch by micro-batch. */
MPT_TEST(each_micro_batch_loss_is_divided_by_the_count) {
    static const int counts[] = {3, 5};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        const int accum = counts[c], B = 2;
        int inputs[LAB16_ROWS_MAX * LAB16_T], targets[LAB16_ROWS_MAX * LAB16_T];
        lab16_batch(1800 + 10 * (uint64_t)accum + mpt_seed() % 1000, B * accum, inputs, targets);
        lab16_ddp_run run;
        lab16_ddp_open(&run, 0);
        size_t n = model_num_params(run.m);
        float *partial = malloc((size_t)accum * n * sizeof(float));
        MPT_REQUIRE(partial, "out of memory");
        double want_loss = lab16_reference(inputs, targets, B, accum, partial);
        train_step_result r = lab16_ddp_step(&run, inputs, targets, B, accum);
        const float *got = model_grads(run.m), *full = partial + (size_t)(accum - 1) * n;
        MPT_OBSERVE_NEAR_F32(got, full, (long)n, 1e-5, 1e-7);
        double largest, diff;
        lab16_compare(got, full, n, &largest, &diff);
        if (!(diff <= 1e-6 * largest)) {
            char why[400];
            lab16_explain(got, partial, n, accum, why, sizeof why);
            mpt_fail(__FILE__, __LINE__, "%d micro-batches of %d rows: the step's gradients differ from the mean of "
                     "the micro-batches' gradients by up to %.3g (largest %.3g)\n      likely mistake: %s", accum, B,
                     diff, largest, why);
        }
        MPT_CHECK(fabs(r.loss - want_loss) <= 1e-5 * fabs(want_loss), "%d micro-batches: the step's loss is %.7g, the "
                  "mean of the micro-batches' losses is %.7g (sum them, divide by accum once)", accum, (double)r.loss,
                  want_loss);
        free(partial);
        lab16_ddp_close(&run);
    }
}

/* ---------------------------------------------------------------- on two real ranks */

/* Two ranks, each with 2 micro-batches of 2 rows, against the same two ranks with 1 micro-batch of 4 rows (the same
 * rows): the same losses step after step (within 1e-5), the same bytes sent per step (one reduction), and replicas
 * that stay bit-identical (both ranks reduced the complete sums). */
MPT_TEST(two_ranks_accumulate_like_one_batch_and_send_once) {
    lab16_mpi_run acc, one;
    lab16_mpi_accum(2, 2, 2, &acc);
    lab16_mpi_accum(2, 1, 4, &one);
    for (int s = 0; s < LAB16_MPI_STEPS; s++) {
        MPT_OBSERVE_NEAR(acc.loss[0][s], 1e-5, 0);
        MPT_OBSERVE(acc.bytes[0][s]);
        MPT_CHECK(acc.params[0][s] == acc.params[1][s], "step %d: the two ranks' weights differ after a step of 2 "
                  "micro-batches (they are identical with 1)\n      likely mistake: DDP reduced before the sum was "
                  "complete (sync on the first micro-batch): the ranks averaged micro-batch 1 and then each added its "
                  "own micro-batch 2", s + 1);
        MPT_CHECK(acc.bytes[0][s] == one.bytes[0][s], "step %d: rank 0 sent %llu bytes with 2 micro-batches, %llu with "
                  "1\n      expected: the same (one reduction of the gradients per optimizer step)\n      likely "
                  "mistake: %s", s + 1, acc.bytes[0][s], one.bytes[0][s],
                  acc.bytes[0][s] > one.bytes[0][s] ? "DDP synced in every backward: no_sync (ddp_set_sync false) "
                                                      "before all but the last micro-batch"
                                                    : "DDP never synced: the last micro-batch's backward must reduce");
        for (int k = 0; k < 2; k++)
            MPT_CHECK(fabs(acc.loss[k][s] - one.loss[k][s]) <= 1e-5 * fabs(one.loss[k][s]), "step %d, rank %d: loss "
                      "%.7g with 2 micro-batches of 2 rows, %.7g with 1 of 4 rows (the same rows): accumulation must "
                      "give the step one batch gives", s + 1, k, acc.loss[k][s], one.loss[k][s]);
        if (mpt_failures()) return;
    }
}
