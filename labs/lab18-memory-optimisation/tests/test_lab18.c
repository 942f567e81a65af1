/* test_lab18.c: lab 18 visible tests: which blocks keep what under a recompute policy (model_block_keeps), the
 * activation layout that keeps only that (layout_acts: bytes and the measured MEM_ACT peak), and the recompute that
 * rebuilds a checkpointed block's activations bit for bit before its backward (model_recompute_block). */
#include "lab18_util.h"

/* ---------------------------------------------------------------- A. the policy */

MPT_TEST(policy_every_and_selective_apply_to_every_block) {
    for (int l = 0; l < 24; l++) {
        MPT_OBSERVE((uint64_t)model_block_keeps(MODEL_RECOMPUTE_EVERY, 1, l) << 8 |
                    (uint64_t)model_block_keeps(MODEL_RECOMPUTE_SELECTIVE, 1, l));
        MPT_CHECK(model_block_keeps(MODEL_RECOMPUTE_EVERY, 1, l) == MODEL_KEEP_INPUT,
                  "every: block %d should keep only its input (MODEL_KEEP_INPUT), got %d", l,
                  (int)model_block_keeps(MODEL_RECOMPUTE_EVERY, 1, l));
        MPT_CHECK(model_block_keeps(MODEL_RECOMPUTE_SELECTIVE, 1, l) == MODEL_KEEP_NO_SCORES,
                  "selective: block %d should keep all but the attention probabilities (MODEL_KEEP_NO_SCORES), got %d",
                  l, (int)model_block_keeps(MODEL_RECOMPUTE_SELECTIVE, 1, l));
    }
}

MPT_TEST(policy_every_k_checkpoints_blocks_0_k_2k) {
    const int ks[] = {1, 2, 3, 5, 40};
    for (int j = 0; j < 5; j++)
        for (int l = 0; l < 24; l++) {
            model_keep want = l % ks[j] == 0 ? MODEL_KEEP_INPUT : MODEL_KEEP_ALL;
            model_keep got = model_block_keeps(MODEL_RECOMPUTE_EVERY_K, ks[j], l);
            MPT_OBSERVE(got);
            MPT_CHECK(got == want, "every_k with k = %d, block %d: expected %s, got %d (the first of every k blocks is "
                      "checkpointed: blocks 0, k, 2k, ...)", ks[j], l,
                      want == MODEL_KEEP_INPUT ? "MODEL_KEEP_INPUT" : "MODEL_KEEP_ALL", (int)got);
        }
}

/* ---------------------------------------------------------------- B. the layout */

static const struct {
    model_recompute policy;
    int k;
    const char *name;
} lab18_policies[] = {
    {MODEL_RECOMPUTE_NONE, 1, "none"}, {MODEL_RECOMPUTE_EVERY, 1, "every"}, {MODEL_RECOMPUTE_EVERY_K, 2, "every_k=2"},
    {MODEL_RECOMPUTE_EVERY_K, 3, "every_k=3"}, {MODEL_RECOMPUTE_SELECTIVE, 1, "selective"},
};
enum { LAB18_NPOLICIES = sizeof lab18_policies / sizeof lab18_policies[0] };

MPT_TEST(layout_bytes_fall_as_the_policy_keeps_less) {
    model_config c = lab18_config(MODEL_GPT2, 6);
    const int B = 2, T = 16;
    size_t none = model_activation_bytes(&c, B, T);
    MPT_OBSERVE(none);
    for (int p = 1; p < LAB18_NPOLICIES; p++) {
        size_t want = lab18_expected_bytes(&c, lab18_policies[p].policy, lab18_policies[p].k, B, T);
        size_t got = model_activation_bytes_policy(&c, B, T, lab18_policies[p].policy, lab18_policies[p].k, NULL);
        MPT_OBSERVE(got);
        MPT_CHECK(got == want, "%s: expected %zu bytes of activations (none: %zu), got %zu%s", lab18_policies[p].name,
                  want, none, got,
                  got == none ? ": nothing was saved; a tensor a block does not keep must point at the shared "
                                "recompute buffer, not get floats of its own"
                  : got > want ? ": more than expected; is the shared buffer taken once per tensor, or once per block?"
                               : ": less than expected; does every block keep its res3, and own what it keeps?");
    }
}

MPT_TEST(forward_peak_is_the_layout) {
    model_config c = lab18_config(MODEL_GPT2, 6);
    const int B = 2, T = 16;
    for (int p = 0; p < LAB18_NPOLICIES; p++) {
        size_t before = mem_current(MEM_ACT);
        mem_reset_peaks();
        model *m = lab18_forward(&c, lab18_policies[p].policy, lab18_policies[p].k, B, T, 5, NULL);
        MPT_OBSERVE(mem_peak(MEM_ACT) - before);
        size_t peak = mem_peak(MEM_ACT) - before, want = lab18_expected_bytes(&c, lab18_policies[p].policy,
                                                                          lab18_policies[p].k, B, T);
        MPT_CHECK(peak == want, "%s: MEM_ACT peak of a forward pass %zu bytes, expected %zu", lab18_policies[p].name,
                  peak, want);
        model_free(m);
    }
}

MPT_TEST(checkpointed_blocks_share_one_set_of_buffers) {
    model_config c = lab18_config(MODEL_GPT2, 4);
    const int B = 2, T = 16;
    model *m = lab18_forward(&c, MODEL_RECOMPUTE_EVERY_K, 2, B, T, 5, NULL); /* blocks 0 and 2 checkpointed */
    MPT_OBSERVE(model_activation_bytes_policy(&c, B, T, MODEL_RECOMPUTE_EVERY_K, 2, NULL));
    for (int l = 0; l < 4; l++) MPT_OBSERVE(model_keep_of(m, l));
    for (int i = 0; i < LAB18_NTENSORS; i++) {
        if (lab18_floats(&c, B, T, lab18_tensors[i].kind) == 0) continue;
        float *b0 = lab18_tensor_of(m, 0, i), *b1 = lab18_tensor_of(m, 1, i), *b2 = lab18_tensor_of(m, 2, i),
              *b3 = lab18_tensor_of(m, 3, i);
        if (i == LAB18_RES3) {
            MPT_CHECK(b0 != b2, "every_k=2: blocks 0 and 2 must each keep their own res3 (the next block's input)");
        } else {
            MPT_CHECK(b0 == b2, "every_k=2: checkpointed blocks 0 and 2 should share one %s buffer (one block's worth "
                      "of recompute buffers), got two", lab18_tensors[i].name);
            MPT_CHECK(b0 != b1 && b0 != b3 && b1 != b3, "every_k=2: blocks 1 and 3 keep everything: their %s must be "
                      "their own, not the shared buffer", lab18_tensors[i].name);
        }
    }
    model_free(m);
    m = lab18_forward(&c, MODEL_RECOMPUTE_SELECTIVE, 1, B, T, 5, NULL);
    MPT_CHECK(lab18_tensor_of(m, 0, LAB18_ATT) == lab18_tensor_of(m, 3, LAB18_ATT), "selective: every block's att should be the one "
              "shared buffer");
    MPT_CHECK(lab18_tensor_of(m, 0, LAB18_QKV) != lab18_tensor_of(m, 3, LAB18_QKV), "selective: each block keeps its own qkv (att is "
              "recomputed from it)");
    model_free(m);
}

MPT_TEST(forward_is_unchanged_by_the_policy) {
    model_config c = lab18_config(MODEL_GPT2, 5);
    const int B = 2, T = 16;
    float base_loss;
    model *base = lab18_forward(&c, MODEL_RECOMPUTE_NONE, 1, B, T, 9, &base_loss);
    for (int p = 1; p < LAB18_NPOLICIES; p++) {
        float loss;
        model *m = lab18_forward(&c, lab18_policies[p].policy, lab18_policies[p].k, B, T, 9, &loss);
        MPT_CHECK_FLOAT_BITS(base_loss, loss, lab18_policies[p].name);
        for (int l = 0; l < c.L; l++) lab18_same_tensor(base, m, l, LAB18_RES3, B, T, lab18_policies[p].name);
        model_free(m);
    }
    model_free(base);
}

/* ---------------------------------------------------------------- C. the recompute */

MPT_TEST(recompute_every_rebuilds_the_forward_bit_for_bit) {
    lab18_check_recompute(MODEL_GPT2, 4, MODEL_RECOMPUTE_EVERY, 1, 2, 16, "every");
}

MPT_TEST(recompute_every_k_rebuilds_checkpointed_blocks) {
    lab18_check_recompute(MODEL_GPT2, 5, MODEL_RECOMPUTE_EVERY_K, 2, 2, 16, "every_k=2");
}

MPT_TEST(recompute_selective_rebuilds_the_attention_probabilities) {
    lab18_check_recompute(MODEL_GPT2, 3, MODEL_RECOMPUTE_SELECTIVE, 1, 2, 16, "selective");
    /* Selective recompute reruns the attention alone: what the block keeps (everything but att) is left as it is.
     * A marker in the kept tensors shows a recompute that reruns the whole block. */
    model_config c = lab18_config(MODEL_GPT2, 2);
    model *m = lab18_forward(&c, MODEL_RECOMPUTE_SELECTIVE, 1, 2, 16, 17, NULL);
    static const int kept[] = {0, 3, 6, 10, LAB18_RES3}; /* ln1, qkv, res2, fch, res3 */
    for (size_t j = 0; j < sizeof kept / sizeof *kept; j++) lab18_tensor_of(m, 1, kept[j])[0] = 12345.0f;
    model_recompute_block(m, 1);
    for (size_t j = 0; j < sizeof kept / sizeof *kept; j++) {
        float got = lab18_tensor_of(m, 1, kept[j])[0];
        MPT_CHECK(got == 12345.0f, "selective, block 1: the kept tensor %s was written by the recompute (a marker "
                  "12345 became %g)\n      likely mistake: under MODEL_KEEP_NO_SCORES rerun only attention_forward from "
                  "the stored qkv (its output into the scratch m->ga.proj), not the whole block_forward",
                  lab18_tensors[kept[j]].name, (double)got);
    }
    model_free(m);
}
