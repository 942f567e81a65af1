/* test_dataparallel.c: the single-process DataParallel baseline: K replicas on pieces of a batch give one model's
 * gradients on the whole batch, the broadcast makes the replicas equal, and the bytes counted are what it copies. */
#include "dist/dataparallel.h"

#include "base/rng.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static model_config small(void) {
    model_config c = {.arch = MODEL_GPT2, .V = 24, .maxT = 8, .L = 2, .C = 16, .NH = 2};
    model_config_complete(&c);
    return c;
}

static void batch(int rows, int T, int V, int *inputs, int *targets, uint64_t seed) {
    for (int i = 0; i < rows * T; i++) {
        inputs[i] = (int)(mp_hash32(seed, (uint64_t)i) % (uint32_t)V);
        targets[i] = (int)(mp_hash32(seed + 1, (uint64_t)i) % (uint32_t)V);
    }
}

static void check_against_one_model(int K, int b) {
    model_config cfg = small();
    const int T = 8, rows = K * b;
    int inputs[64 * 8], targets[64 * 8];
    batch(rows, T, cfg.V, inputs, targets, 7);
    dataparallel *dp = dataparallel_create(&cfg, K, 3);
    float loss = dataparallel_forward_backward(dp, inputs, targets, rows, T);

    model *one = model_create(&cfg);
    model_init(one, 3);
    model_zero_grad(one);
    float want_loss = model_forward(one, inputs, targets, rows, T);
    model_backward(one, 1.0f);

    cr_expect(fabsf(loss - want_loss) <= 1e-5f * fabsf(want_loss), "K=%d: loss %g, one model %g", K, loss, want_loss);
    const float *got = model_grads(dataparallel_master(dp)), *want = model_grads(one);
    double maxdiff = 0, scale = 0;
    for (size_t i = 0, P = model_num_params(one); i < P; i++) {
        maxdiff = fmax(maxdiff, fabs((double)got[i] - want[i]));
        scale = fmax(scale, fabs((double)want[i]));
    }
    cr_expect(scale > 0);
    cr_expect(maxdiff <= 1e-5 * scale, "K=%d b=%d: master gradients differ from one model's by %g (scale %g)", K, b,
              maxdiff, scale);
    model_free(one);
    dataparallel_free(dp);
}

Test(dataparallel, replicas_give_the_whole_batch_gradient) {
    check_against_one_model(1, 4);
    check_against_one_model(2, 3);
    check_against_one_model(4, 2);
}

Test(dataparallel, broadcast_copies_the_master_and_counts_bytes) {
    model_config cfg = small();
    const int K = 3, T = 8, rows = 6;
    int inputs[6 * 8], targets[6 * 8];
    batch(rows, T, cfg.V, inputs, targets, 11);
    dataparallel *dp = dataparallel_create(&cfg, K, 5);
    dataparallel_forward_backward(dp, inputs, targets, rows, T);
    model *master = dataparallel_master(dp);
    const size_t P = model_num_params(master);
    float *p = model_params(master), *g = model_grads(master);
    for (size_t i = 0; i < P; i++) p[i] -= 0.1f * g[i];
    cr_expect(memcmp(model_params(dataparallel_replica(dp, 1)), p, P * sizeof(float)) != 0);
    dataparallel_broadcast(dp);
    for (int k = 1; k < K; k++)
        cr_expect(memcmp(model_params(dataparallel_replica(dp, k)), p, P * sizeof(float)) == 0, "replica %d", k);
    dataparallel_stats st;
    dataparallel_get_stats(dp, &st);
    cr_expect_eq(st.steps, 1);
    cr_expect_eq(st.scatter_bytes, 2ull * rows * T * sizeof(int));
    cr_expect_eq(st.gather_bytes, (uint64_t)(K - 1) * P * sizeof(float));
    cr_expect_eq(st.broadcast_bytes, (uint64_t)(K - 1) * P * sizeof(float));
    cr_expect(st.compute_s > 0);
    dataparallel_free(dp);
}
