/* test_lab16.c: lab 16 visible tests: top-k with error feedback (hooks_topk_compress) and PowerSGD's P/Q step
 * (hooks_powersgd_step) in core/dist/hooks.c, on one rank, against what the math says each must give. */
#include "lab16_util.h"

/* ---------------------------------------------------------------- A. top-k with error feedback */

MPT_TEST(topk_sends_the_k_largest_magnitudes) {
    enum { N = 1000 };
    float g[N], e[N] = {0};
    lab16_normal(g, N, 1, 1.0f);
    lab16_check_topk(g, e, N, 10, "top-10 of 1000 normal values, empty residual");
    float g2[N], e2[N] = {0};
    for (int i = 0; i < N; i++) g2[i] = (i % 2 ? -1.0f : 1.0f) * (float)((i * 7919) % N) / N; /* signs matter */
    lab16_check_topk(g2, e2, N, 37, "top-37 of 1000 values of both signs");
}

MPT_TEST(topk_error_feedback_conserves_mass) {
    enum { N = 500, STEPS = 30 };
    float g[N], e[N] = {0};
    int problems = 0;
    for (int s = 0; s < STEPS && !problems; s++) {
        lab16_normal(g, N, 100 + (uint64_t)s, 1e-2f);
        char what[64];
        snprintf(what, sizeof what, "step %d of %d (k = 5 of 500)", s + 1, STEPS);
        problems = lab16_check_topk(g, e, N, 5, what);
    }
    /* Entry by entry, every step, lab16_check_topk checked sent + residual_new == grad + residual_old. */
    double waiting = 0;
    for (int i = 0; i < N; i++) waiting += fabs(e[i]);
    MPT_CHECK(waiting > 0, "after %d steps of 5 of 500 entries, the residual holds nothing: error feedback keeps "
              "the entries not sent (it must hold about 475 of them)", STEPS);
}

MPT_TEST(topk_ties_go_to_the_lowest_index) {
    float g[10] = {2, -5, 5, 1, 5, -5, 0, 3, 4, 5}, e[10] = {0}, value[3];
    int32_t index[3] = {-1, -1, -1};
    hooks_topk_compress(g, e, 10, 3, index, value);
    int want[3] = {1, 2, 4};
    bool ok = true;
    for (int j = 0; j < 3; j++) {
        bool found = false;
        for (int q = 0; q < 3; q++) found |= index[q] == want[j];
        ok &= found;
    }
    MPT_CHECK(ok, "five entries share |acc| = 5 (indices 1, 2, 4, 5, 9) and k = 3\n      expected: indices 1, 2, 4 "
              "(lowest index first, so every rank agrees on the rule)\n      got:      %d, %d, %d",
              index[0], index[1], index[2]);
    lab16_check_topk(g, (float[10]){0}, 10, 3, "ties at the threshold");
}

MPT_TEST(topk_hook_over_steps_sends_the_accumulated_residual) {
    /* One rank, the topk hook on a 200-entry bucket with ratio 0.05 (k = 10): a small entry that is never in
     * the top 10 on its own must be sent once its residual has grown larger than the others. */
    model_tensor t = {.name = "w", .ndim = 1, .shape = {200}, .offset = 0, .size = 200};
    ddp_hook *h = ddp_hook_create(&(ddp_hook_options){.kind = DDP_HOOK_TOPK, .topk_ratio = 0.05}, &t, 1, 200);
    comm_t *c = lab16_world();
    int sent_at = -1;
    for (int s = 0; s < 40 && sent_at < 0; s++) {
        float g[200];
        for (int i = 0; i < 200; i++) g[i] = i < 20 ? (s % 2 ? 1.0f : 0.9f) * (float)(1 + i % 10) : 0.0f;
        g[150] = 0.5f; /* never top-10 alone; after a few steps its residual is */
        float before[200];
        memcpy(before, ddp_hook_residual(h), sizeof before);
        ddp_hook_reduce(h, c, g, 0, 200, COMM_ALGO_DEFAULT);
        const float *e = ddp_hook_residual(h);
        MPT_OBSERVE_NEAR_F32(g, g, 200, 0, 0); /* what was sent and what waits, for the grader */
        MPT_OBSERVE_NEAR_F32(e, e, 200, 0, 0);
        int nonzero = 0;
        for (int i = 0; i < 200; i++) nonzero += g[i] != 0;
        MPT_CHECK(nonzero <= 10, "step %d: %d entries nonzero after the hook; top-k with k = 10 sends at most 10",
                  s + 1, nonzero);
        MPT_CHECK(g[150] + e[150] == before[150] + 0.5f, "step %d, entry 150: sent %.9g + residual %.9g must equal "
                  "old residual %.9g + gradient 0.5", s + 1, g[150], e[150], before[150]);
        if (g[150] != 0) sent_at = s + 1;
    }
    MPT_CHECK(sent_at > 1, "entry 150 (gradient 0.5 per step, smaller than the 20 large ones) was %s\n      likely "
              "mistake: %s", sent_at < 0 ? "never sent in 40 steps" : "sent on the first step",
              sent_at < 0 ? "the residual is not added to the gradient before choosing (no error feedback)"
                          : "choosing the wrong entries");
    ddp_hook_free(h);
    comm_finalize(c);
}

/* ---------------------------------------------------------------- B. PowerSGD */

MPT_TEST(powersgd_rank1_reconstructs_a_rank1_matrix) {
    enum { M = 24, N = 16 };
    float mat[M * N];
    lab16_low_rank(mat, M, N, 1, 7);
    double err;
    lab16_powersgd(mat, M, N, 1, 8, &err);
    MPT_CHECK(err < 1e-4, "M = a b^T (24 x 16) is exactly rank 1, so P Q^T must give it back\n      expected: max "
              "|P Q^T - M| / max |M| < 1e-4\n      got:      %.3g\n      likely mistake: M = P Q^T not written back, "
              "or Q not recomputed from the new P", err);
}

MPT_TEST(powersgd_rank2_reconstructs_a_rank2_matrix) {
    enum { M = 40, N = 30 };
    float mat[M * N];
    lab16_low_rank(mat, M, N, 2, 17);
    double err;
    lab16_powersgd(mat, M, N, 2, 18, &err);
    MPT_CHECK(err < 1e-4, "a rank-2 (40 x 30) matrix through rank-2 PowerSGD\n      expected: relative error < 1e-4\n"
              "      got:      %.3g\n      likely mistake: P's columns not orthogonal to each other (Gram-Schmidt), so "
              "P Q^T counts a direction twice", err);
}

MPT_TEST(powersgd_is_the_best_rank_r_direction_for_a_full_matrix) {
    /* A full-rank matrix cannot come back exactly; but P Q^T = P P^T M is a projection, so what is left,
     * M - P Q^T, must be orthogonal to P's columns: P^T (M - P Q^T) = 0. */
    enum { M = 20, N = 12, R = 2 };
    float mat[M * N], in[M * N];
    lab16_normal(mat, M * N, 27, 1.0f);
    memcpy(in, mat, sizeof mat);
    comm_t *c = lab16_world();
    float P[M * R], Q[N * R];
    lab16_normal(Q, N * R, 28, 1.0f);
    hooks_powersgd_step(c, mat, M, N, R, P, Q, COMM_ALGO_DEFAULT);
    MPT_OBSERVE_NEAR_F32(mat, mat, M * N, 1e-3, 1e-5); /* what the grader compares with the reference */
    double worst = 0, approx = 0;
    for (int j = 0; j < R; j++)
        for (int k = 0; k < N; k++) {
            double s = 0;
            for (int i = 0; i < M; i++) s += (double)P[i * R + j] * (in[i * N + k] - mat[i * N + k]);
            worst = fmax(worst, fabs(s));
        }
    for (int i = 0; i < M * N; i++) approx = fmax(approx, fabs(mat[i]));
    MPT_CHECK(approx > 0.1, "P Q^T of a random 20 x 12 matrix is all (near) zero: max %.3g\n      likely mistake: M "
              "not overwritten with P Q^T", approx);
    MPT_CHECK(worst < 1e-4, "what PowerSGD leaves out, M - P Q^T, must be orthogonal to P: max |P^T (M - P Q^T)| = "
              "%.3g, expected < 1e-4\n      likely mistake: Q computed from the P before orthonormalising", worst);
    comm_finalize(c);
}

/* Two ranks, each with its own matrix (the worker, through mpirun): P and Q are averaged over the ranks, so
 * every rank must end with the same P Q^T, the rank-r approximation of the ranks' average. Worked out here in
 * double from the same seeds: P = avg_k(M_k Q0), orthonormalised; Q = avg_k(M_k^T P); M = P Q^T. */
MPT_TEST(powersgd_two_ranks_average_p_and_q) {
    enum { RANKS = 2, M = 12, N = 10, R = 2 };
    char dir[64], a_m[16], a_n[16], a_r[16];
    snprintf(a_m, sizeof a_m, "%d", M);
    snprintf(a_n, sizeof a_n, "%d", N);
    snprintf(a_r, sizeof a_r, "%d", R);
    char *args[] = {"powersgd", "DIR", a_m, a_n, a_r, NULL};
    lab16_launch(RANKS, args, dir, sizeof dir, "PowerSGD");
    /* the expected result, in double */
    static float in[RANKS][M * N];
    float q0[N * R];
    for (int k = 0; k < RANKS; k++) lab16_normal(in[k], M * N, 1600 + (uint64_t)k, 1.0f);
    lab16_normal(q0, N * R, 1699, 1.0f);
    double P[M * R] = {0}, Q[N * R] = {0}, want[M * N];
    for (int k = 0; k < RANKS; k++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < R; j++)
                for (int l = 0; l < N; l++) P[i * R + j] += (double)in[k][i * N + l] * q0[l * R + j] / RANKS;
    for (int j = 0; j < R; j++) { /* Gram-Schmidt on P's columns */
        for (int q = 0; q < j; q++) {
            double dot = 0;
            for (int i = 0; i < M; i++) dot += P[i * R + j] * P[i * R + q];
            for (int i = 0; i < M; i++) P[i * R + j] -= dot * P[i * R + q];
        }
        double norm = 0;
        for (int i = 0; i < M; i++) norm += P[i * R + j] * P[i * R + j];
        for (int i = 0; i < M; i++) P[i * R + j] /= sqrt(norm);
    }
    for (int k = 0; k < RANKS; k++)
        for (int l = 0; l < N; l++)
            for (int j = 0; j < R; j++)
                for (int i = 0; i < M; i++) Q[l * R + j] += (double)in[k][i * N + l] * P[i * R + j] / RANKS;
    double scale = 0;
    for (int i = 0; i < M; i++)
        for (int l = 0; l < N; l++) {
            double s = 0;
            for (int j = 0; j < R; j++) s += P[i * R + j] * Q[l * R + j];
            want[i * N + l] = s;
            scale = fmax(scale, fabs(s));
        }
    for (int k = 0; k < RANKS; k++) {
        char path[512], head[64];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, k);
        FILE *f = fopen(path, "r");
        MPT_CHECK(f != NULL, "rank %d wrote no report", k);
        if (!f) continue;
        int world = 0;
        bool ok = fscanf(f, " world=%d m=%*d n=%*d r=%*d M=", &world) == 1 && world == RANKS;
        float got[M * N];
        for (int i = 0; ok && i < M * N; i++) ok = fscanf(f, i ? ",%f" : "%f", &got[i]) == 1;
        fclose(f);
        unlink(path);
        snprintf(head, sizeof head, "rank %d's report", k);
        MPT_CHECK(ok, "%s: unreadable", head);
        if (!ok) continue;
        MPT_OBSERVE_NEAR_F32(got, got, M * N, 1e-3, 1e-5);
        double worst = 0;
        int at = 0;
        for (int i = 0; i < M * N; i++)
            if (fabs(got[i] - want[i]) > worst) worst = fabs(got[i] - want[i]), at = i;
        MPT_CHECK(worst <= 1e-4 * scale, "2 ranks with different 12 x 10 matrices, rank %d: M[%d][%d] after the step\n"
                  "      expected: %.6g (P Q^T with P = avg(M_k Q), orthonormalised, and Q = avg(M_k^T P))\n"
                  "      got:      %.6g (%.3gx)\n      likely mistake: Q not averaged over the ranks (allreduce with "
                  "COMM_AVG after Q = M^T P), or summed instead of averaged", k, at / N, at % N, want[at], got[at],
                  want[at] != 0 ? got[at] / want[at] : 0.0);
    }
    rmdir(dir);
}
