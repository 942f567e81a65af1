/* test_mp_checkpoint.c: Criterion tests of the map train/mp_checkpoint.c saves and loads through (model.h): each tp shard's tensor is the whole tensor's elements at model_tensor_whole_runs, bit for bit, and the tp ranks' runs cover every whole tensor exactly once. */
#include "model/model.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static model_config small(model_arch arch) {
    model_config c = {.arch = arch, .V = 70, .Vp = 80, .maxT = 8, .L = 5, .C = 32, .NH = 4, .tied = arch == MODEL_GPT2};
    if (arch == MODEL_LLAMA) c.KVH = 2;
    model_config_complete(&c);
    return c;
}

/* For every tp rank of a tp x (stage [first, last)) split: each shard tensor equals the whole model's values at
 * its runs, and over the tp ranks every element of each whole tensor the stage holds is in exactly one run
 * (tp-replicated tensors: counted on tp rank 0 only, as a checkpoint writes them). */
static void check_runs(model_arch arch, int tp, int first, int last) {
    model_config c = small(arch);
    model *whole = model_create(&c);
    model_init(whole, 7);
    int nwhole;
    model_tensor *reg = model_whole_registry(&c, &nwhole);
    const model_tensor *own;
    int nown;
    own = model_tensors(whole, &nown);
    cr_assert_eq(nwhole, nown, "the registry from the config has %d tensors, model_create's %d", nwhole, nown);
    for (int i = 0; i < nwhole; i++)
        cr_assert(strcmp(reg[i].name, own[i].name) == 0 && reg[i].offset == own[i].offset && reg[i].size == own[i].size,
                  "registry tensor %d: %s at %zu (%zu) vs model_create's %s at %zu (%zu)", i, reg[i].name, reg[i].offset,
                  reg[i].size, own[i].name, own[i].offset, own[i].size);
    unsigned char *seen = calloc(model_num_params(whole), 1);
    for (int r = 0; r < tp; r++) {
        model_shard sh = model_shard_whole(&c);
        sh.tp_rank = r, sh.tp_size = tp, sh.first = first, sh.last = last;
        model *part = model_create_shard(&c, &sh);
        model_init(part, 7);
        int n;
        const model_tensor *t = model_tensors(part, &n);
        for (int i = 0; i < n; i++) {
            const model_tensor *w = model_tensor_find(whole, t[i].name);
            size_t nruns = model_tensor_whole_runs(part, &t[i], NULL, NULL);
            size_t *start = malloc(nruns * sizeof *start), *len = malloc(nruns * sizeof *len);
            model_tensor_whole_runs(part, &t[i], start, len);
            size_t at = 0;
            bool counted = (!model_tensor_tp_replicated(part, &t[i]) || r == 0) && !model_tensor_is_tied_copy(part, &t[i]);
            for (size_t k = 0; k < nruns; at += len[k], k++) {
                cr_assert(start[k] + len[k] <= w->size, "%s run %zu [%zu, +%zu) past the whole tensor's %zu", t[i].name,
                          k, start[k], len[k], w->size);
                cr_assert(memcmp(model_params(part) + t[i].offset + at, model_params(whole) + w->offset + start[k],
                                 len[k] * sizeof(float)) == 0,
                          "%s (%s) tp rank %d of %d: run %zu is not the whole tensor's elements [%zu, +%zu)", t[i].name,
                          model_tensor_split_name(w), r, tp, k, start[k], len[k]);
                for (size_t j = 0; counted && j < len[k]; j++) seen[w->offset + start[k] + j]++;
            }
            cr_assert_eq(at, t[i].size, "%s: runs of %zu floats, the shard's tensor has %zu", t[i].name, at, t[i].size);
            free(start);
            free(len);
        }
        model_free(part);
    }
    /* Every element of the tensors of blocks [first, last) (and of the embeddings / the head on the end
     * stages) exactly once. */
    for (int i = 0; i < nwhole; i++) {
        int layer = reg[i].layer;
        bool held = (layer >= first && layer < last) || (layer < 0 && first == 0) || (layer >= c.L && last == c.L);
        for (size_t j = 0; j < reg[i].size; j++)
            cr_assert_eq(seen[reg[i].offset + j], held ? 1 : 0, "%s element %zu is in %d runs over %d tp ranks, want %d",
                         reg[i].name, j, seen[reg[i].offset + j], tp, held ? 1 : 0);
    }
    free(seen);
    free(reg);
    model_free(whole);
}

Test(mp_checkpoint, gpt2_tp2_shards_are_the_whole_tensors_at_their_runs_and_cover_them_once) {
    check_runs(MODEL_GPT2, 2, 0, 5);
}
Test(mp_checkpoint, gpt2_tp4_stage_of_blocks_2_to_5_is_the_whole_tensors_at_its_runs) { check_runs(MODEL_GPT2, 4, 2, 5); }
Test(mp_checkpoint, llama_tp2_gqa_swiglu_untied_head_shards_are_the_whole_tensors_at_their_runs) {
    check_runs(MODEL_LLAMA, 2, 0, 5);
}
Test(mp_checkpoint, llama_first_stage_tp2_is_the_whole_tensors_at_its_runs) { check_runs(MODEL_LLAMA, 2, 0, 3); }
Test(mp_checkpoint, whole_model_has_one_run_per_tensor) {
    model_config c = small(MODEL_GPT2);
    model *m = model_create(&c);
    const model_tensor *t = model_tensor_find(m, "h.0.qkvw");
    size_t start, len;
    cr_assert_eq(model_tensor_whole_runs(m, t, &start, &len), 1);
    cr_assert(start == 0 && len == t->size, "one run [0, %zu), got [%zu, +%zu)", t->size, start, len);
    model_free(m);
}
