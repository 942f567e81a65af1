/* test_lab27.c: lab 27 visible tests: Horovod's fusion plan at the threshold's edges, pack/unpack, fused training
 * equal to DDP's on 2 real ranks; Megatron-LM's arguments through the translator. */
#include "lab27_util.h"

enum { STEPS = 5 };

/* Threshold 10: 4 + 6 = 10 is an exact fit (joins); 3 more would pass it (flush). */
MPT_TEST(fusion_exact_fit_joins_and_overflow_flushes) {
    const size_t sizes[] = {4, 6, 3, 3, 4, 1};
    const int want[] = {0, 0, 1, 1, 1, 2};
    CHECK_PLAN(sizes, 6, 10, want, "4+6 = 10 fits exactly; 3 opens buffer 1; 3+3+4 = 10 fits; 1 opens buffer 2");
    const size_t one[] = {7};
    const int want_one[] = {0};
    CHECK_PLAN(one, 1, 10, want_one, "one tensor, one buffer");
}

MPT_TEST(fusion_tensor_larger_than_threshold_goes_alone) {
    const size_t sizes[] = {2, 25, 3, 4, 30, 40, 1};
    const int want[] = {0, 1, 2, 2, 3, 4, 5};
    CHECK_PLAN(sizes, 7, 10, want, "25, 30 and 40 are each larger than 10: each goes alone; 3+4 share");
    const size_t first_big[] = {11, 1};
    const int want_big[] = {0, 1};
    CHECK_PLAN(first_big, 2, 10, want_big, "the first tensor is too large: it is buffer 0, alone; 1 opens buffer 1");
}

MPT_TEST(fusion_pack_unpack_round_trip) {
    float grads[40], buffer[40];
    for (int i = 0; i < 40; i++) grads[i] = (float)i + 0.5f;
    /* Ready order: the last tensors first (offsets 30, 22, 5). */
    fusion_entry e[3] = {{.offset = 30, .count = 10}, {.offset = 22, .count = 8}, {.offset = 5, .count = 3}};
    memset(buffer, 0, sizeof buffer);
    size_t packed = fusion_pack(grads, e, 3, buffer);
    MPT_CHECK_EQ_I64(21, (int64_t)packed, "fusion_pack returns the elements packed: 10 + 8 + 3");
    const size_t want_at[] = {0, 10, 18};
    for (int k = 0; k < 3; k++)
        MPT_CHECK(e[k].at == want_at[k], "entry %d (offset %zu) packed at %zu, expected %zu: one after another in entry "
                  "order", k, e[k].offset, e[k].at, want_at[k]);
    MPT_CHECK(buffer[0] == 30.5f && buffer[10] == 22.5f && buffer[18] == 5.5f && buffer[20] == 7.5f,
              "buffer {[0] %g, [10] %g, [18] %g, [20] %g}, expected {30.5, 22.5, 5.5, 7.5}: grads[offset..] copied to "
              "buffer[at..]", (double)buffer[0], (double)buffer[10], (double)buffer[18], (double)buffer[20]);
    for (int i = 0; i < 21; i++) buffer[i] *= 2; /* "the allreduce" */
    fusion_unpack(grads, e, 3, buffer);
    for (int i = 0; i < 40; i++) {
        bool packed_here = (i >= 30) || (i >= 22 && i < 30) || (i >= 5 && i < 8);
        float want = ((float)i + 0.5f) * (packed_here ? 2.0f : 1.0f);
        MPT_CHECK(grads[i] == want, "after unpack grads[%d] = %g, expected %g: buffer[at..] back to grads[offset..], "
                  "nothing else touched", i, (double)grads[i], (double)want);
        if (grads[i] != want) break;
    }
}

/* Fused on 2 ranks: the same losses as DDP bit for bit (a + b is the same whichever buffer holds it). */
MPT_TEST(fusion_trains_like_ddp_2_ranks) {
    static const char *const DDP[] = {NULL};
    static const char *const FUSED[] = {"communication.fusion=true", "communication.fusion_threshold=16KiB", NULL};
    static const char *const ONE[] = {"communication.fusion=true", "communication.fusion_threshold=1GiB", NULL};
    lab19_result ddp, fused, one;
    lab19_train(&ddp, LAB27, "DDP", 2, STEPS, DDP);
    lab19_train(&fused, LAB27, "Horovod fusion, 16 KiB buffers", 2, STEPS, FUSED);
    lab19_check_same_training(&ddp, &fused, 0);
    lab19_check_replicas(&fused);
    /* DDP's default bucket (5e8 elements) holds the whole model: one gradient allreduce per step, plus the step's
     * other allreduces (the loss), which fusion leaves as they are. */
    int ddp_calls = lab27_allreduces_per_step(&ddp), buffers = lab27_allreduces_per_step(&fused) - ddp_calls + 1;
    MPT_CHECK(buffers > 2, "16 KiB buffers on a model of %.0f parameters: %d gradient allreduce calls per step, expected "
              "several (the model's tensors packed into buffers of 4096 floats)", fused.rank[0].params, buffers);
    lab19_train(&one, LAB27, "Horovod fusion, 1 GiB buffers", 2, STEPS, ONE);
    MPT_CHECK_EQ_I64(ddp_calls, lab27_allreduces_per_step(&one), "allreduce calls per step with a threshold larger "
                     "than the model (every tensor in one buffer), expected as many as DDP's one bucket makes");
    lab19_check_same_training(&ddp, &one, 0);
}

/* Megatron-LM's GPT-2 arguments: values, flags, and the launcher's words reported. */
MPT_TEST(megatron_gpt2_arguments_translate) {
    static const char *const args[] = {"torchrun", "pretrain_gpt.py", "--num-layers", "24", "--hidden-size", "1024",
                                       "--num-attention-heads", "16", "--seq-length", "1024", "--micro-batch-size", "4",
                                       "--global-batch-size", "8", "--lr", "0.00015", "--fp16", "--clip-grad", "1.0",
                                       "--data-path", "my-gpt2_text_document", "--my-own-option", "42",
                                       "--train-iters", "500", NULL};
    tr_result r;
    lab27_megatron(&r, args);
    static const struct {
        const char *key;
        double want;
    } expect[] = {{"model.layers", 24}, {"model.channels", 1024}, {"model.heads", 16}, {"data.seq_len", 1024},
                  {"train_micro_batch_size_per_gpu", 4}, {"train_batch_size", 8}, {"optimizer.params.lr", 0.00015},
                  {"fp16.enabled", 1}, {"gradient_clipping", 1.0}, {"train.steps", 500}};
    for (int i = 0; i < (int)(sizeof expect / sizeof *expect); i++) {
        double got = lab27_number(&r, expect[i].key);
        MPT_OBSERVE(isnan(got) ? 0 : (uint64_t)(got * 1e6));
        MPT_CHECK(got == expect[i].want, "%s: expected %g, got %g\n      likely mistake: each --argument's rule "
                  "(tr_find_rule) applied to the token after it (tr_apply); a flag (rule->flag) takes no value",
                  expect[i].key, expect[i].want, got);
    }
    MPT_CHECK(lab27_noted(&r, "torchrun") && lab27_noted(&r, "pretrain_gpt.py"),
              "the launcher's words (torchrun, pretrain_gpt.py) are reported as not mapped (tr_add_note), then skipped");
    MPT_CHECK(lab27_noted(&r, "--data-path") && !lab27_noted(&r, "my-gpt2_text_document"),
              "--data-path has no mixpar setting: reported once; its value is consumed with it, not reported as a word");
    MPT_CHECK(lab27_noted(&r, "--my-own-option") && !lab27_noted(&r, "42"),
              "--my-own-option is in no table: reported once (tr_add_note); its value 42 is skipped with it, not "
              "reported as a launcher word");
    MPT_CHECK(r.mapped == 10, "settings mapped: expected 10, got %d", r.mapped);
    tr_result_free(&r);
}

MPT_TEST(megatron_missing_value_is_an_error) {
    char a0[] = "--num-layers", a1[] = "--lr";
    char *tokens[] = {a0, a1};
    tr_result r = {.framework = TR_MEGATRON, .config = cJSON_CreateObject()};
    data_err err = {0};
    bool ok = tr_megatron_args(&r, tokens, 2, &err);
    MPT_CHECK(!ok, "--num-layers followed by --lr (no value) must fail with err naming the argument; it returned true");
    if (!ok) MPT_CHECK(strstr(err.found, "--num-layers") != NULL, "the error names the argument: got \"%s\"", err.found);
    tr_result_free(&r);
}
