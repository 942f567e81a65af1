/* test_model_shard.c: Criterion tests of pipeline stages in one process (model.h): stages chained by hand give the whole model's loss and gradients bit for bit (a tied wte's to rounding), their weights are the whole model's slices, activation slots keep micro-batches apart; the schedules' order (dist/pp.h). */
#include "base/mem.h"
#include "base/rng.h"
#include "dist/pp.h"
#include "model/model.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, T = 8 };

static model_config small(model_arch arch) {
    model_config c = {.arch = arch, .V = 70, .Vp = 80, .maxT = T, .L = 5, .C = 32, .NH = 4, .tied = arch == MODEL_GPT2};
    if (arch == MODEL_LLAMA) c.KVH = 2;
    model_config_complete(&c);
    return c;
}

static void batch(int *inputs, int *targets, int V, uint64_t seed) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (int i = 0; i < B * T; i++) {
        inputs[i] = (int)(mp_rng_u32(&rng) % (unsigned)V);
        targets[i] = (int)(mp_rng_u32(&rng) % (unsigned)V);
    }
    targets[5] = -1;
}

static model *stage(const model_config *c, int first, int last) {
    model_shard sh = model_shard_whole(c);
    sh.first = first, sh.last = last;
    model *m = model_create_shard(c, &sh);
    model_init(m, 7);
    return m;
}

/* Every tensor of the stage has the whole model's values and (after backward) gradients, bit for bit; the
 * last stage's tied copy of wte is compared with wte. */
static void expect_same_tensors(model *whole, model *part, bool grads) {
    int n;
    const model_tensor *t = model_tensors(part, &n);
    for (int i = 0; i < n; i++) {
        const model_tensor *w = model_tensor_find(whole, t[i].name);
        cr_assert(w && w->size == t[i].size, "stage tensor %s has no same-sized tensor in the whole model", t[i].name);
        const float *a = (grads ? model_grads(whole) : model_params(whole)) + w->offset;
        const float *b = (grads ? model_grads(part) : model_params(part)) + t[i].offset;
        /* Tied wte's gradient is the head's part plus the embedding's: one rank adds the token rows onto
         * the head's, the stages add the two sums (pp_sum_tied_grads), so only the rounding may differ. */
        if (grads && strcmp(t[i].name, "wte") == 0 && model_get_config(part)->tied) {
            for (size_t j = 0; j < t[i].size; j++)
                cr_assert(fabsf(a[j] - b[j]) <= 1e-6f * fabsf(a[j]) + 1e-12f, "tied wte gradient [%zu]: %g vs %g", j,
                          b[j], a[j]);
            continue;
        }
        cr_assert(memcmp(a, b, t[i].size * sizeof(float)) == 0, "%s of %s differs from the whole model's",
                  grads ? "gradient" : "value", t[i].name);
    }
}

static void chained_stages_are_the_whole_model(model_arch arch) {
    model_config c = small(arch);
    int inputs[B * T], targets[B * T];
    batch(inputs, targets, c.V, 3);
    model *whole = model_create(&c);
    model_init(whole, 7);
    model_zero_grad(whole);
    float want = model_forward(whole, inputs, targets, B, T);
    model_backward(whole, 1.0f);

    /* blocks [0, 2), [2, 3), [3, 5): first, middle, last */
    int cut[] = {0, 2, 3, 5};
    model *s[3];
    for (int k = 0; k < 3; k++) {
        s[k] = stage(&c, cut[k], cut[k + 1]);
        model_zero_grad(s[k]);
        expect_same_tensors(whole, s[k], false);
    }
    cr_assert(model_has_embedding(s[0]) && !model_has_head(s[0]) && !model_has_embedding(s[2]) && model_has_head(s[2]));
    size_t NC = (size_t)B * T * c.C;
    float *h1 = malloc(NC * sizeof(float)), *h2 = malloc(NC * sizeof(float));
    float *d1 = malloc(NC * sizeof(float)), *d2 = malloc(NC * sizeof(float));
    cr_assert_eq(model_forward_stage(s[0], inputs, NULL, NULL, B, T), 0.0f);
    memcpy(h1, model_stage_output(s[0]), NC * sizeof(float));
    model_forward_stage(s[1], NULL, h1, NULL, B, T);
    memcpy(h2, model_stage_output(s[1]), NC * sizeof(float));
    float got = model_forward_stage(s[2], NULL, h2, targets, B, T);
    cr_assert(memcmp(&got, &want, sizeof got) == 0, "chained stages' loss %.9g, the whole model's %.9g", got, want);
    model_backward_stage(s[2], 1.0f, NULL, d2);
    model_backward_stage(s[1], 1.0f, d2, d1);
    model_backward_stage(s[0], 1.0f, d1, NULL);
    if (c.tied) { /* what pp_sum_tied_grads does over the embed group: both copies get the sum */
        const model_tensor *a = model_tensor_find(s[0], "wte"), *b = model_tensor_find(s[2], "wte");
        cr_assert(a && b && model_tensor_is_tied_copy(s[2], b) && !model_tensor_is_tied_copy(s[0], a));
        float *ga = model_grads(s[0]) + a->offset, *gb = model_grads(s[2]) + b->offset;
        for (size_t i = 0; i < a->size; i++) ga[i] = gb[i] = ga[i] + gb[i];
    }
    for (int k = 0; k < 3; k++) expect_same_tensors(whole, s[k], true);
    free(h1), free(h2), free(d1), free(d2);
    for (int k = 0; k < 3; k++) model_free(s[k]);
    model_free(whole);
}

Test(model_shard, gpt2_stages_chained_give_the_whole_models_loss_and_gradients_bit_for_bit) {
    chained_stages_are_the_whole_model(MODEL_GPT2);
}
Test(model_shard, llama_stages_chained_give_the_whole_models_loss_and_gradients_bit_for_bit) {
    chained_stages_are_the_whole_model(MODEL_LLAMA);
}

/* Two micro-batches forward into two slots, then both backwards (GPipe's order), give the gradients of
 * forward-backward one after the other; the second slot is MEM_ACT of its own. */
Test(model_shard, activation_slots_keep_micro_batches_apart) {
    model_config c = small(MODEL_LLAMA);
    int in[2][B * T], tg[2][B * T];
    batch(in[0], tg[0], c.V, 11);
    batch(in[1], tg[1], c.V, 12);
    model *a = model_create(&c), *b = model_create(&c);
    model_init(a, 7), model_init(b, 7);
    model_zero_grad(a), model_zero_grad(b);
    for (int k = 0; k < 2; k++) {
        model_forward(a, in[k], tg[k], B, T);
        model_backward(a, 0.5f);
    }
    size_t before = mem_current(MEM_ACT);
    model_forward(b, in[0], tg[0], B, T);
    size_t one_slot = mem_current(MEM_ACT) - before;
    model_use_act_slot(b, 1);
    model_forward(b, in[1], tg[1], B, T);
    cr_assert_eq(mem_current(MEM_ACT) - before, 2 * one_slot, "two slots hold two micro-batches' activations");
    cr_assert_eq(model_act_slots(b), 2);
    model_use_act_slot(b, 0);
    model_backward(b, 0.5f);
    model_use_act_slot(b, 1);
    model_backward(b, 0.5f);
    cr_assert(memcmp(model_grads(a), model_grads(b), model_num_params(a) * sizeof(float)) == 0,
              "F0 F1 B0 B1 through slots must give the gradients of F0 B0 F1 B1");
    model_free(b);
    model_free(a);
    cr_assert_eq(mem_current(MEM_ACT), before - one_slot, "freeing the model frees every slot");
}

/* The schedules' orders: GPipe all F then all B; 1F1B warms up with p - s - 1 forwards. */
Test(model_shard, schedules_order_forwards_and_backwards_as_gpipe_and_1f1b_do) {
    pp_action a[8];
    pp_schedule_actions(PP_GPIPE, 3, 0, 4, 1, a);
    const char *gpipe = "F0F1F2F3B0B1B2B3", *one_f_one_b_stage0 = "F0F1F2B0F3B1B2B3", *last = "F0B0F1B1F2B2F3B3";
    char got[32];
    for (int i = 0; i < 8; i++) snprintf(got + 2 * i, 3, "%c%d", a[i].kind, a[i].micro);
    cr_assert_str_eq(got, gpipe);
    pp_schedule_actions(PP_1F1B, 3, 0, 4, 1, a);
    for (int i = 0; i < 8; i++) snprintf(got + 2 * i, 3, "%c%d", a[i].kind, a[i].micro);
    cr_assert_str_eq(got, one_f_one_b_stage0);
    pp_schedule_actions(PP_1F1B, 3, 2, 4, 1, a);
    for (int i = 0; i < 8; i++) snprintf(got + 2 * i, 3, "%c%d", a[i].kind, a[i].micro);
    cr_assert_str_eq(got, last);
}

/* Stages balanced by parameters: with a large vocabulary the end stages, which hold the embeddings and the
 * head, get fewer blocks; an explicit list is taken as given and checked. */
Test(model_shard, stages_balance_blocks_by_parameters_and_take_an_explicit_list) {
    model_config c = {.arch = MODEL_LLAMA, .V = 4096, .maxT = 16, .L = 8, .C = 64, .NH = 4, .tied = false};
    model_config_complete(&c);
    int first[5];
    pp_balance_stages(&c, 4, first);
    cr_assert_eq(first[0], 0);
    cr_assert_eq(first[4], 8);
    int end_blocks = (first[1] - first[0]) + (first[4] - first[3]), middle = (first[3] - first[1]);
    cr_assert(end_blocks < middle, "the embedding and head stages take fewer blocks (%d+%d vs %d)", first[1] - first[0],
              first[4] - first[3], middle);
    pp_stages_from_list(&c, 4, "1,3,3,1", first);
    cr_assert(first[1] == 1 && first[2] == 4 && first[3] == 7 && first[4] == 8);
}
