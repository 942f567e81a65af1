/* test_lab18_hidden.c: lab 18 hidden tests: the same contract on LLaMA (RMSNorm, SwiGLU, RoPE, grouped-query
 * attention), shapes that need padding, k larger than the model, a remainder under every_k, and a layout reused by
 * a second batch of the same shape and by a smaller one. */
#include "../../../labs/lab18-memory-optimisation/tests/lab18_util.h"

MPT_TEST(hidden_llama_gqa_recompute_every) {
    lab18_check_recompute(MODEL_LLAMA, 3, MODEL_RECOMPUTE_EVERY, 1, 2, 16, "every");
}

MPT_TEST(hidden_llama_selective_and_every_k_with_a_remainder) {
    lab18_check_recompute(MODEL_LLAMA, 4, MODEL_RECOMPUTE_SELECTIVE, 1, 2, 16, "selective");
    lab18_check_recompute(MODEL_LLAMA, 5, MODEL_RECOMPUTE_EVERY_K, 3, 2, 16, "every_k=3 (blocks 0 and 3)");
}

MPT_TEST(hidden_odd_shapes_bytes_and_peak) {
    /* B=3, T=7: 21 positions, so tensors need padding to 16 floats; llama has no LayerNorm means */
    const model_arch archs[] = {MODEL_GPT2, MODEL_LLAMA};
    const struct { model_recompute policy; int k; const char *name; } ps[] = {
        {MODEL_RECOMPUTE_EVERY, 1, "every"}, {MODEL_RECOMPUTE_EVERY_K, 2, "every_k=2"},
        {MODEL_RECOMPUTE_SELECTIVE, 1, "selective"}};
    for (int a = 0; a < 2; a++) {
        model_config c = lab18_config(archs[a], 3);
        for (int p = 0; p < 3; p++) {
            size_t want = lab18_expected_bytes(&c, ps[p].policy, ps[p].k, 3, 7);
            size_t got = model_activation_bytes_policy(&c, 3, 7, ps[p].policy, ps[p].k, NULL);
            MPT_OBSERVE(got);
            MPT_CHECK(got == want, "%s %s, B=3 T=7: expected %zu bytes, got %zu", model_arch_name(archs[a]),
                      ps[p].name, want, got);
            size_t before = mem_current(MEM_ACT);
            mem_reset_peaks();
            model *m = lab18_forward(&c, ps[p].policy, ps[p].k, 3, 7, 2, NULL);
            MPT_CHECK(mem_peak(MEM_ACT) - before == want, "%s %s, B=3 T=7: MEM_ACT peak %zu, expected %zu",
                      model_arch_name(archs[a]), ps[p].name, mem_peak(MEM_ACT) - before, want);
            model_free(m);
        }
        lab18_check_recompute(archs[a], 3, MODEL_RECOMPUTE_EVERY, 1, 3, 7, "every, B=3 T=7");
    }
}

MPT_TEST(hidden_every_k_larger_than_the_model) {
    model_config c = lab18_config(MODEL_GPT2, 4);
    for (int l = 0; l < 4; l++)
        MPT_CHECK(model_block_keeps(MODEL_RECOMPUTE_EVERY_K, 10, l) == (l == 0 ? MODEL_KEEP_INPUT : MODEL_KEEP_ALL),
                  "every_k = 10 on 4 blocks: only block 0 is checkpointed; block %d got %d", l,
                  (int)model_block_keeps(MODEL_RECOMPUTE_EVERY_K, 10, l));
    size_t want = lab18_expected_bytes(&c, MODEL_RECOMPUTE_EVERY_K, 10, 2, 16);
    size_t got = model_activation_bytes_policy(&c, 2, 16, MODEL_RECOMPUTE_EVERY_K, 10, NULL);
    MPT_OBSERVE(got);
    MPT_CHECK(got == want, "every_k = 10 on 4 blocks: expected %zu bytes, got %zu", want, got);
    lab18_check_recompute(MODEL_GPT2, 4, MODEL_RECOMPUTE_EVERY_K, 10, 2, 16, "every_k=10");
}

MPT_TEST(hidden_layout_reused_by_later_batches) {
    /* A second batch of the same shape reuses the layout; a smaller one lays it out again inside the same block.
     * Recompute must rebuild what the latest forward computed. */
    model_config c = lab18_config(MODEL_LLAMA, 4);
    const int shapes[][2] = {{2, 16}, {2, 16}, {1, 12}};
    model *m = model_create(&c), *base = model_create(&c);
    model_init(m, 1234);
    model_init(base, 1234);
    model_set_recompute(m, MODEL_RECOMPUTE_EVERY_K, 2);
    for (int s = 0; s < 3; s++) {
        int B = shapes[s][0], T = shapes[s][1], in[32], tg[32];
        lab18_batch(in, tg, B * T, c.V, 40 + (uint64_t)s);
        float lb = model_forward(base, in, tg, B, T), lm = model_forward(m, in, tg, B, T);
        MPT_CHECK_FLOAT_BITS(lb, lm, "the loss of a later batch, every_k=2");
        lab18_spoil_recompute_buffers(m, B, T);
        for (int l = c.L - 1; l >= 0; l--) {
            model_recompute_block(m, l);
            char when[96];
            snprintf(when, sizeof when, "batch %d (B=%d, T=%d), block %d", s + 1, B, T, l);
            for (int i = 0; i < LAB18_NTENSORS; i++) lab18_same_tensor(base, m, l, i, B, T, when);
        }
    }
    model_free(m);
    model_free(base);
}
