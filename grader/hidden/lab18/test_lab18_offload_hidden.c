/* test_lab18_offload_hidden.c: lab 18 hidden tests, part D: the offloaded update under the other optimizers
 * (Nesterov momentum, LAMB's per-tensor trust ratio), gradient accumulation with clipping that bites, LLaMA with a
 * frozen tensor, and the master copy remade after the weights were changed from outside (a checkpoint load). */
#include "../../../labs/lab18-memory-optimisation/tests/lab18_offload.h"

MPT_TEST(hidden_offload_momentum_with_accumulation_and_clipping) {
    lab18_pair p;
    lab18_pair_open(&p, MODEL_GPT2, OPTIM_MOMENTUM, 0.05, 2, NULL); /* a max norm the gradients exceed */
    for (int step = 0; step < 3; step++) {
        train_step_result r = lab18_pair_step(&p, step, 1e-2);
        MPT_CHECK(r.clipped, "step %d: the test expects clipping to bite (norm %g > 0.05)", step, r.grad_norm);
    }
    lab18_pair_close(&p);
}

MPT_TEST(hidden_offload_lamb_trust_ratio_per_span) {
    lab18_pair p;
    lab18_pair_open(&p, MODEL_GPT2, OPTIM_LAMB, 1.0, 1, NULL);
    for (int step = 0; step < 3; step++) lab18_pair_step(&p, step, 1e-2);
    lab18_pair_close(&p);
}

MPT_TEST(hidden_offload_llama_with_a_frozen_embedding) {
    lab18_pair p;
    lab18_pair_open(&p, MODEL_LLAMA, OPTIM_ADAMW, 1.0, 1, "wte");
    size_t n = model_num_params(p.offload_m);
    float *before = malloc(n * sizeof(float));
    MPT_REQUIRE(before, "out of memory");
    memcpy(before, model_params(p.offload_m), n * sizeof(float));
    for (int step = 0; step < 3; step++) lab18_pair_step(&p, step, 3e-3);
    size_t changed = 0;
    for (size_t i = 0; i < n; i++) changed += memcmp(before + i, model_params(p.offload_m) + i, sizeof(float)) != 0;
    MPT_CHECK(changed > 0, "three offloaded steps changed no weight on the device");
    free(before);
    lab18_pair_close(&p);
}

MPT_TEST(hidden_offload_master_follows_weights_loaded_from_outside) {
    lab18_pair p;
    lab18_pair_open(&p, MODEL_GPT2, OPTIM_ADAMW, 1.0, 1, NULL);
    lab18_pair_step(&p, 0, 3e-3);
    /* As a checkpoint load does: new weights in both models, then the step is told. */
    size_t n = model_num_params(p.offload_m);
    for (size_t i = 0; i < n; i++) {
        float w = 0.01f * (float)((int)(mp_hash32(5, i) % 201) - 100);
        model_params(p.device_m)[i] = w;
        model_params(p.offload_m)[i] = w;
    }
    train_step_sync_working_weights(&p.device);
    train_step_sync_working_weights(&p.offload);
    for (int step = 1; step < 3; step++) lab18_pair_step(&p, step, 3e-3);
    lab18_pair_close(&p);
}
