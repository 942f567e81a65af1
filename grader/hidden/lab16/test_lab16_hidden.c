/* test_lab16_hidden.c: lab 16 hidden tests: top-k edge cases (k = n, k = 1, zeros, large buckets, long runs)
 * and PowerSGD edge cases (rank above the matrix's, tall and wide shapes, the hook's error feedback). */
#include "../../../labs/lab16-accumulation-and-compression/tests/lab16_util.h"

MPT_TEST(topk_k_equals_n_sends_everything) {
    enum { N = 64 };
    float g[N], e[N];
    lab16_normal(g, N, 201, 1.0f);
    lab16_normal(e, N, 202, 0.1f);
    lab16_check_topk(g, e, N, N, "k = n = 64, nonzero old residual");
    for (int i = 0; i < N; i++) MPT_CHECK(e[i] == 0, "k = n: everything is sent, residual[%d] = %.9g", i, e[i]);
}

MPT_TEST(topk_k1_and_zero_gradients) {
    float g[6] = {0, 0, -0.25f, 0, 0, 0}, e[6] = {0, 0.125f, 0, 0, -0.5f, 0};
    lab16_check_topk(g, e, 6, 1, "k = 1: the largest |grad + residual| is index 4 (-0.5, all residual)");
    float z[5] = {0}, ez[5] = {0};
    lab16_check_topk(z, ez, 5, 3, "all zeros, k = 3: three zero entries are sent, the residual stays zero");
}

MPT_TEST(topk_large_bucket_long_run) {
    enum { N = 20000, K = 200, STEPS = 12 };
    float *g = malloc(N * sizeof *g), *e = calloc(N, sizeof *e);
    MPT_REQUIRE(g && e, "out of memory");
    int problems = 0;
    for (int s = 0; s < STEPS && !problems; s++) {
        lab16_normal(g, N, 300 + (uint64_t)s, (float)(s + 1));
        char what[64];
        snprintf(what, sizeof what, "step %d, k = 200 of 20000", s + 1);
        problems = lab16_check_topk(g, e, N, K, what);
    }
    free(g), free(e);
}

MPT_TEST(powersgd_rank_above_the_matrix_rank) {
    enum { M = 32, N = 24 };
    float mat[M * N];
    lab16_low_rank(mat, M, N, 1, 401);
    double err;
    lab16_powersgd(mat, M, N, 3, 402, &err);
    MPT_CHECK(err < 1e-4, "a rank-1 (32 x 24) matrix through rank-3 PowerSGD must come back\n      got relative error "
              "%.3g\n      likely mistake: P's extra columns are rounding noise; hooks_orthonormalize zeroes them, "
              "so call it rather than normalising by hand", err);
}

MPT_TEST(powersgd_tall_and_wide) {
    double err;
    float tall[96 * 8], wide[6 * 80];
    lab16_low_rank(tall, 96, 8, 2, 501);
    lab16_powersgd(tall, 96, 8, 2, 502, &err);
    MPT_CHECK(err < 1e-4, "rank-2 tall matrix (96 x 8): relative error %.3g, expected < 1e-4\n      likely mistake: "
              "row and column sizes swapped in an index (M is m rows of n)", err);
    lab16_low_rank(wide, 6, 80, 2, 503);
    lab16_powersgd(wide, 6, 80, 2, 504, &err);
    MPT_CHECK(err < 1e-4, "rank-2 wide matrix (6 x 80): relative error %.3g, expected < 1e-4", err);
}

MPT_TEST(powersgd_hook_error_feedback_and_warm_start) {
    /* The hook around the step: M = G + E, G' = P Q^T, E' = M - G'. A fixed gradient G of rank 2 through a
     * rank-1 hook: the second direction is not sent at first, waits in E, and the sum of what was sent over
     * the steps approaches the sum of the gradients. */
    enum { M = 16, N = 12, STEPS = 30 };
    model_tensor t[2] = {{.name = "w", .ndim = 2, .shape = {M, N}, .offset = 0, .size = M * N},
                         {.name = "b", .ndim = 1, .shape = {4}, .offset = M * N, .size = 4}};
    ddp_hook *h = ddp_hook_create(&(ddp_hook_options){.kind = DDP_HOOK_POWERSGD, .powersgd_rank = 1, .seed = 9}, t,
                                  2, M * N + 4);
    comm_t *c = lab16_world();
    float G[M * N + 4], g[M * N + 4];
    lab16_low_rank(G, M, N, 2, 601);
    for (int i = 0; i < 4; i++) G[M * N + i] = (float)i;
    double sent_total[M * N] = {0};
    for (int s = 0; s < STEPS; s++) {
        memcpy(g, G, sizeof G);
        ddp_hook_reduce(h, c, g, 0, M * N + 4, COMM_ALGO_DEFAULT);
        const float *e = ddp_hook_residual(h);
        MPT_OBSERVE_NEAR_F32(g, g, M * N + 4, 1e-3, 1e-5); /* what the grader compares with the reference */
        double drift = 0;
        for (int i = 0; i < M * N; i++) {
            sent_total[i] += g[i];
            drift = fmax(drift, fabs(sent_total[i] + e[i] - (double)(s + 1) * G[i]));
        }
        MPT_CHECK(drift < 1e-3 * (s + 1) * 10, "step %d: sent so far + residual must equal the gradients so far "
                  "(error feedback); off by %.3g", s + 1, drift);
        for (int i = 0; i < 4; i++) MPT_CHECK(g[M * N + i] == G[M * N + i], "the vector b goes uncompressed");
    }
    double worst = 0, scale = 0;
    for (int i = 0; i < M * N; i++) {
        worst = fmax(worst, fabs(sent_total[i] / STEPS - G[i]));
        scale = fmax(scale, fabs(G[i]));
    }
    MPT_CHECK(worst < 0.25 * scale, "after %d steps the average sent should approach the (rank-2) gradient through a "
              "rank-1 hook: max error %.3g of max %.3g\n      likely mistake: the step does not send P Q^T of M "
              "(M = gradient + residual)", STEPS, worst, scale);
    ddp_hook_free(h);
    comm_finalize(c);
}

/* ---------------------------------------------------------------- C. gradient accumulation */

#include "../../../labs/lab16-accumulation-and-compression/tests/lab16_accum.h"

/* 8 micro-batches of one row, 3 buckets per backward, two steps in a row and then a step of one micro-batch: every
 * accumulated step reduces each bucket once, with the complete sum; the plain step after them still reduces. */
MPT_TEST(accumulation_of_8_with_three_buckets_then_a_plain_step) {
    enum { B = 1, ACCUM = 8 };
    int inputs[LAB16_ROWS_MAX * LAB16_T], targets[LAB16_ROWS_MAX * LAB16_T];
    lab16_batch(2600 + mpt_seed() % 1000, B * ACCUM, inputs, targets);
    model *probe = lab16_model();
    size_t n = model_num_params(probe);
    model_free(probe);
    lab16_ddp_run run;
    lab16_ddp_open(&run, n / 3 + 1);
    float *partial = malloc((size_t)ACCUM * n * sizeof(float));
    MPT_REQUIRE(partial, "out of memory");
    lab16_reference(inputs, targets, B, ACCUM, partial);
    const float *full = partial + (size_t)(ACCUM - 1) * n;
    for (int step = 1; step <= 2; step++) {
        lab16_ddp_step(&run, inputs, targets, B, ACCUM);
        MPT_OBSERVE(run.watch.calls);
        MPT_CHECK_EQ_U64(3, (uint64_t)run.watch.calls, "reductions in a step of 8 micro-batches with 3 buckets");
        double largest, diff;
        lab16_compare(model_grads(run.m), full, n, &largest, &diff);
        MPT_OBSERVE_NEAR_F32(model_grads(run.m), full, (long)n, 1e-5, 1e-7);
        if (!(diff <= 1e-6 * largest)) {
            char why[400];
            lab16_explain(model_grads(run.m), partial, n, ACCUM, why, sizeof why);
            mpt_fail(__FILE__, __LINE__, "step %d of 8 micro-batches of 1 row: gradients off by up to %.3g (largest "
                     "%.3g)\n      likely mistake: %s", step, diff, largest, why);
            break;
        }
    }
    lab16_ddp_step(&run, inputs, targets, B * ACCUM, 1);
    MPT_OBSERVE(run.watch.calls);
    MPT_CHECK_EQ_U64(3, (uint64_t)run.watch.calls, "reductions in a plain step (one micro-batch) after accumulated "
                     "ones: DDP must be left syncing after the last micro-batch");
    free(partial);
    lab16_ddp_close(&run);
}

/* Three real ranks, 3 micro-batches of 1 row against 1 micro-batch of 3 rows: the same losses, the same bytes, and
 * replicas identical. */
MPT_TEST(three_ranks_accumulate_3_micro_batches_of_one_row) {
    lab16_mpi_run acc, one;
    lab16_mpi_accum(3, 3, 1, &acc);
    lab16_mpi_accum(3, 1, 3, &one);
    for (int s = 0; s < LAB16_MPI_STEPS; s++)
        for (int k = 0; k < 3; k++) {
            MPT_OBSERVE_NEAR(acc.loss[k][s], 1e-5, 0);
            MPT_CHECK(acc.params[k][s] == acc.params[0][s], "step %d: rank %d's weights differ from rank 0's", s + 1, k);
            MPT_CHECK(acc.bytes[k][s] == one.bytes[k][s], "step %d, rank %d: %llu bytes sent with 3 micro-batches, %llu "
                      "with 1", s + 1, k, acc.bytes[k][s], one.bytes[k][s]);
            MPT_CHECK(fabs(acc.loss[k][s] - one.loss[k][s]) <= 1e-5 * fabs(one.loss[k][s]), "step %d, rank %d: loss "
                      "%.7g accumulated, %.7g in one batch", s + 1, k, acc.loss[k][s], one.loss[k][s]);
        }
}
