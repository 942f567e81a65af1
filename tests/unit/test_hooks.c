/* test_hooks.c: Criterion tests of the DDP communication hooks on one rank (self backend): top-k selection and
 * error feedback, PowerSGD's reconstruction of low-rank matrices, 16-bit round trips, the hook dispatch over a
 * tensor layout, and the config's "communication" section. */
#include "base/rng.h"
#include "comm/comm.h"
#include "data/data_err.h"
#include "dist/hooks.h"
#include "fp/half.h"
#include "train/config.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static comm_t *self_world(void) {
    static const char *const VARS[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MIXPAR_COMM", "MIXPAR_ALLREDUCE",
                                       "WORLD_SIZE", "RANK"};
    for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) unsetenv(VARS[i]);
    return comm_init(NULL, NULL);
}

static void fill_normal(float *x, size_t n, uint64_t seed, float scale) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) x[i] = scale * mp_rng_normal(&rng);
}

static int by_magnitude_desc(const void *a, const void *b) {
    float x = fabsf(*(const float *)a), y = fabsf(*(const float *)b);
    return (x < y) - (x > y);
}

/* ---------------------------------------------------------------- top-k */

Test(hooks_topk, count_is_ceil_of_ratio_clamped_to_1_and_n) {
    cr_expect_eq(hooks_topk_count(0, 0.01), 0);
    cr_expect_eq(hooks_topk_count(1000, 0.01), 10);
    cr_expect_eq(hooks_topk_count(1001, 0.01), 11, "ceil(10.01)");
    cr_expect_eq(hooks_topk_count(5, 0.01), 1, "at least one entry");
    cr_expect_eq(hooks_topk_count(5, 1.0), 5);
}

Test(hooks_topk, kth_magnitude_matches_a_sort) {
    enum { N = 997 };
    float x[N], sorted[N];
    fill_normal(x, N, 7, 1.0f);
    memcpy(sorted, x, sizeof x);
    qsort(sorted, N, sizeof *sorted, by_magnitude_desc);
    size_t ks[] = {1, 2, 10, 500, N};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        cr_expect_eq(hooks_kth_magnitude(x, N, ks[i]), fabsf(sorted[ks[i] - 1]), "k = %zu", ks[i]);
    cr_expect(isinf(hooks_kth_magnitude(x, N, 0)));
}

Test(hooks_topk, keeps_the_k_largest_magnitudes) {
    enum { N = 2000, K = 20 };
    float g[N], res[N] = {0}, sorted[N], value[K];
    int32_t index[K];
    fill_normal(g, N, 3, 1.0f);
    memcpy(sorted, g, sizeof g);
    qsort(sorted, N, sizeof *sorted, by_magnitude_desc);
    hooks_topk_compress(g, res, N, K, index, value);
    float smallest_sent = INFINITY;
    for (int i = 0; i < K; i++) {
        cr_assert(index[i] >= 0 && index[i] < N);
        cr_expect_eq(value[i], g[index[i]], "the value sent is the entry itself");
        cr_expect_eq(res[index[i]], 0.0f, "a sent entry leaves no residual");
        for (int j = 0; j < i; j++) cr_expect_neq(index[i], index[j], "index %d sent twice", index[i]);
        if (fabsf(value[i]) < smallest_sent) smallest_sent = fabsf(value[i]);
    }
    cr_expect_eq(smallest_sent, fabsf(sorted[K - 1]), "the smallest entry sent is the K-th largest");
    for (int i = 0; i < N; i++) cr_expect(fabsf(res[i]) <= fabsf(sorted[K - 1]));
}

Test(hooks_topk, ties_go_to_the_lower_index_and_zeros_are_sent_when_needed) {
    float g[8] = {1, -3, 3, 0, 3, 2, 0, 0}, res[8] = {0}, value[3];
    int32_t index[3];
    hooks_topk_compress(g, res, 8, 3, index, value);
    cr_expect(index[0] == 1 && index[1] == 2 && index[2] == 4, "got %d %d %d", index[0], index[1], index[2]);
    float z[4] = {0, 5, 0, 0}, rz[4] = {0};
    hooks_topk_compress(z, rz, 4, 3, index, value);
    cr_expect(index[0] == 1 && value[0] == 5 && value[1] == 0 && value[2] == 0);
    cr_expect(index[1] == 0 && index[2] == 2, "zeros by index: got %d %d", index[1], index[2]);
}

Test(hooks_topk, error_feedback_conserves_mass_exactly) {
    enum { N = 1500, K = 15, STEPS = 25 };
    float g[N], res[N] = {0}, old[N], value[K], sent[N];
    int32_t index[K];
    double total_in[N] = {0}, total_out[N] = {0};
    for (int s = 0; s < STEPS; s++) {
        fill_normal(g, N, 100 + (uint64_t)s, 1e-3f);
        memcpy(old, res, sizeof res);
        hooks_topk_compress(g, res, N, K, index, value);
        memset(sent, 0, sizeof sent);
        for (int i = 0; i < K; i++) sent[index[i]] = value[i];
        for (int i = 0; i < N; i++) {
            float acc = g[i] + old[i];
            cr_assert_eq(sent[i] + res[i], acc, "step %d entry %d: sent %a + residual %a != g + old residual %a", s,
                         i, sent[i], res[i], acc);
            cr_assert(sent[i] == 0 || res[i] == 0, "an entry is either sent or kept");
            total_in[i] += g[i];
            total_out[i] += sent[i];
        }
    }
    /* Over the run: everything that came in was sent or still waits in the residual. */
    for (int i = 0; i < N; i++) cr_expect(fabs(total_in[i] - total_out[i] - res[i]) < 1e-6, "entry %d", i);
}

/* ---------------------------------------------------------------- PowerSGD */

Test(hooks_powersgd, orthonormalize_gives_orthonormal_columns) {
    enum { M = 40, R = 3 };
    float P[M * R];
    fill_normal(P, M * R, 9, 2.0f);
    hooks_orthonormalize(P, M, R);
    for (int a = 0; a < R; a++)
        for (int b = 0; b < R; b++) {
            double dot = 0;
            for (int i = 0; i < M; i++) dot += (double)P[i * R + a] * P[i * R + b];
            cr_expect(fabs(dot - (a == b)) < 1e-5, "column %d . column %d = %g", a, b, dot);
        }
}

/* M = A B^T of rank r: one PowerSGD step of rank r reconstructs it (P spans A's columns). */
static void check_reconstructs(size_t m, size_t n, size_t rank_true, size_t r) {
    comm_t *c = self_world();
    float *A = malloc(m * rank_true * sizeof *A), *B = malloc(n * rank_true * sizeof *B);
    float *M = malloc(m * n * sizeof *M), *want = malloc(m * n * sizeof *M);
    float *P = malloc(m * r * sizeof *P), *Q = malloc(n * r * sizeof *Q);
    fill_normal(A, m * rank_true, 11, 1.0f);
    fill_normal(B, n * rank_true, 12, 1.0f);
    fill_normal(Q, n * r, 13, 1.0f);
    double norm = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t k = 0; k < n; k++) {
            double s = 0;
            for (size_t j = 0; j < rank_true; j++) s += (double)A[i * rank_true + j] * B[k * rank_true + j];
            M[i * n + k] = want[i * n + k] = (float)s;
            norm = fmax(norm, fabs(s));
        }
    hooks_powersgd_step(c, M, m, n, r, P, Q, COMM_ALGO_DEFAULT);
    double worst = 0;
    for (size_t i = 0; i < m * n; i++) worst = fmax(worst, fabs(M[i] - want[i]));
    cr_expect(worst <= 1e-4 * norm, "(%zu x %zu) of rank %zu, PowerSGD rank %zu: max error %g of max %g", m, n,
              rank_true, r, worst, norm);
    free(A), free(B), free(M), free(want), free(P), free(Q);
    comm_finalize(c);
}

Test(hooks_powersgd, reconstructs_an_exactly_rank_r_matrix) {
    check_reconstructs(30, 20, 1, 1);
    check_reconstructs(30, 20, 2, 2);
    check_reconstructs(64, 48, 2, 4);
}

Test(hooks_powersgd, error_feedback_keeps_what_the_approximation_missed) {
    /* A layout of one matrix (8 x 6) and one vector (5): the vector passes exactly, the matrix is rank 1. */
    model_tensor t[2] = {{.name = "w", .ndim = 2, .shape = {8, 6}, .offset = 0, .size = 48},
                         {.name = "b", .ndim = 1, .shape = {5}, .offset = 48, .size = 5}};
    ddp_hook *h = ddp_hook_create(&(ddp_hook_options){.kind = DDP_HOOK_POWERSGD, .powersgd_rank = 1, .seed = 4}, t, 2, 53);
    comm_t *c = self_world();
    float g[53], orig[53];
    fill_normal(g, 53, 21, 1.0f);
    memcpy(orig, g, sizeof g);
    ddp_hook_reduce(h, c, g, 0, 53, COMM_ALGO_DEFAULT);
    const float *e = ddp_hook_residual(h);
    for (int i = 0; i < 48; i++) cr_expect(fabsf(g[i] + e[i] - orig[i]) < 1e-5f, "entry %d: approx + residual", i);
    for (int i = 48; i < 53; i++) cr_expect_eq(g[i], orig[i], "vectors go uncompressed");
    double err = 0;
    for (int i = 0; i < 48; i++) err += fabsf(e[i]);
    cr_expect(err > 1e-3, "a random 8 x 6 matrix is not rank 1: something must stay in the residual");
    ddp_hook_free(h);
    comm_finalize(c);
}

/* ---------------------------------------------------------------- 16-bit hooks */

static void check_lowp_round_trip(comm_dtype dt) {
    comm_t *c = self_world();
    enum { N = 4099 };
    float x[N], orig[N];
    fill_normal(x, N, 31, 0.01f);
    memcpy(orig, x, sizeof x);
    hooks_lowp_allreduce(c, x, N, dt);
    for (int i = 0; i < N; i++) {
        /* One ulp of the result: the gap to the next representable magnitude in that format. */
        uint16_t bits = dt == COMM_FP16 ? fp16_from_float(fabsf(x[i])) : bf16_from_float(fabsf(x[i]));
        float next = dt == COMM_FP16 ? fp16_to_float((uint16_t)(bits + 1)) : bf16_to_float((uint16_t)(bits + 1));
        float ulp = next - fabsf(x[i]);
        cr_assert(fabsf(x[i] - orig[i]) <= ulp, "%s: %a came back as %a (one ulp %a)", comm_dtype_name(dt), orig[i],
                  x[i], ulp);
    }
    comm_finalize(c);
}

Test(hooks_lowp, fp16_round_trip_within_one_ulp) { check_lowp_round_trip(COMM_FP16); }
Test(hooks_lowp, bf16_round_trip_within_one_ulp) { check_lowp_round_trip(COMM_BF16); }

/* ---------------------------------------------------------------- dispatch, names, config */

Test(hooks, one_rank_average_is_the_gradient_for_exact_hooks_and_the_sent_part_for_topk) {
    model_tensor t = {.name = "w", .ndim = 1, .shape = {300}, .offset = 0, .size = 300};
    comm_t *c = self_world();
    float g[300], orig[300];
    fill_normal(g, 300, 41, 1.0f);
    memcpy(orig, g, sizeof g);
    ddp_hook *plain = ddp_hook_create(&(ddp_hook_options){.kind = DDP_HOOK_ALLREDUCE}, &t, 1, 300);
    ddp_hook_reduce(plain, c, g, 100, 300, COMM_ALGO_DEFAULT);
    cr_expect(memcmp(g, orig, sizeof g) == 0, "averaging over one rank changes nothing");
    cr_expect_null(ddp_hook_residual(plain));
    ddp_hook_free(plain);
    ddp_hook *topk = ddp_hook_create(&(ddp_hook_options){.kind = DDP_HOOK_TOPK, .topk_ratio = 0.05}, &t, 1, 300);
    ddp_hook_reduce(topk, c, g, 100, 300, COMM_ALGO_DEFAULT); /* 200 entries: k = 10 */
    const float *e = ddp_hook_residual(topk);
    int nonzero = 0;
    for (int i = 100; i < 300; i++) {
        cr_expect_eq(g[i] + e[i], orig[i]);
        nonzero += g[i] != 0;
    }
    cr_expect_eq(nonzero, 10);
    for (int i = 0; i < 100; i++) cr_expect(g[i] == orig[i] && e[i] == 0, "outside the bucket nothing moves");
    ddp_hook_free(topk);
    comm_finalize(c);
}

Test(hooks, names_round_trip) {
    for (int k = 0; k < DDP_NHOOKS; k++) cr_expect_eq(ddp_hook_from_name(ddp_hook_names[k]), k);
    cr_expect_eq(ddp_hook_from_name("top-k"), -1);
    cr_expect_null(ddp_hook_names[DDP_NHOOKS]);
}

static const char *config_json =
    "{\"train_micro_batch_size_per_gpu\": 4, \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}},"
    " \"model\": {\"arch\": \"gpt2\", \"layers\": 2, \"channels\": 32, \"heads\": 4, \"context\": 16},"
    " \"data\": {\"dataset\": \"addition\"}, \"train\": {\"steps\": 10}}";

static bool parse_set(const char *set, train_config *cfg, data_err *err) {
    cJSON *root = cJSON_Parse(config_json);
    bool ok = (!set || config_set(root, set, err)) && config_parse(root, 1, cfg, err);
    cJSON_Delete(root);
    return ok;
}

Test(hooks_config, defaults_and_overrides) {
    train_config cfg;
    cr_assert(parse_set(NULL, &cfg, NULL));
    cr_expect_eq(cfg.comm.hook, DDP_HOOK_ALLREDUCE);
    cr_expect_eq(cfg.comm.topk_ratio, 0.01);
    cr_expect_eq(cfg.comm.powersgd_rank, 1);
    cr_assert(parse_set("communication.hook=powersgd", &cfg, NULL));
    cr_expect_eq(cfg.comm.hook, DDP_HOOK_POWERSGD);
    char *dump = config_dump(&cfg);
    cr_expect(strstr(dump, "\"communication\"") && strstr(dump, "\"powersgd\""), "dump: %s", dump);
    free(dump);
}

Test(hooks_config, unknown_hook_and_bad_values_name_the_key) {
    const char *bad[][2] = {{"communication.hook=top-k", "communication.hook"},
                            {"communication.topk_ratio=0", "communication.topk_ratio"},
                            {"communication.topk_ratio=1.5", "communication.topk_ratio"},
                            {"communication.powersgd_rank=0", "communication.powersgd_rank"},
                            {"communication.hok=fp16", "did you mean communication.hook"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        train_config cfg;
        data_err err;
        memset(&err, 0, sizeof err);
        cr_expect(!parse_set(bad[i][0], &cfg, &err), "%s parsed", bad[i][0]);
        char line[2048];
        data_err_line(&err, line, sizeof line);
        cr_expect(strstr(line, bad[i][1]), "%s: message lacks '%s': %s", bad[i][0], bad[i][1], line);
    }
}
