/* lab20_worker.c: the program lab 20's tests and experiment start on N ranks (build/labs/lab20_worker), built from
 * this tree's regions. Modes:
 *
 *   lab20_worker CONFIG RUN_DIR [key.path=value ...]
 *     (under mpirun) one training run of the core's trainer, quietly; events in RUN_DIR/events.rank<R>.jsonl
 *     (like lab 19's worker: the fsdp section of the config picks the strategy and the prefetch).
 *
 *   lab20_worker --forward-held LAYERS PREFETCH LIMIT
 *     (under mpirun) FULL_SHARD over a model of LAYERS blocks (C 64, 4 heads, T 16, tied head: the root unit
 *     holds the embeddings and the head and stays gathered through the step), forward prefetch on or
 *     off (1|0), limit_all_gathers on or off (1|0), communication on its own thread; one forward pass of a
 *     batch of 2. Rank 0 prints one line:
 *       root=FLOATS block=FLOATS held=BYTES,BYTES,...
 *     root and block: the floats of the root unit and of one block; held: for each block, the MEM_COMM bytes
 *     (gathered units) held as it starts, once the communication thread has finished what it was asked. */
#include "base/mem.h"
#include "base/rng.h"
#include "comm/comm.h"
#include "dist/fsdp.h"
#include "model/model.h"
#include "train/config.h"
#include "train/trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PEAK_B = 2, PEAK_T = 16, SETTLE_NS = 30 * 1000 * 1000 };

/* The probe: FSDP's own hooks run first; then, as a block starts, the communication thread gets time to finish
 * what was asked of it, and the bytes held (gathered units) are read. So the numbers do not depend on how fast
 * the gathers are next to the blocks' compute. */
static model_hooks fsdp_hooks;
static int probe_layers;
static size_t held_at_block[64];

static void probe_before_forward(void *ctx, int layer) {
    fsdp_hooks.before_forward(ctx, layer);
    if (layer < 0 || layer >= probe_layers) return;
    nanosleep(&(struct timespec){.tv_nsec = SETTLE_NS}, NULL);
    held_at_block[layer] = mem_current(MEM_COMM);
}

static int forward_held(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: lab20_worker --forward-held LAYERS PREFETCH(0|1) LIMIT(0|1)\n");
        return 2;
    }
    int layers = atoi(argv[2]);
    bool prefetch = atoi(argv[3]) != 0, limit = atoi(argv[4]) != 0;
    if (layers < 1 || layers > 64) {
        fprintf(stderr, "lab20_worker: LAYERS 1..64, not %s\n", argv[2]);
        return 2;
    }
    comm_t *world = comm_init(&argc, &argv);
    model_config c = {.arch = MODEL_GPT2, .V = 32, .maxT = PEAK_T, .L = layers, .C = 64, .NH = 4, .tied = true};
    model_config_complete(&c);
    model *m = model_create_reserved(&c);
    fsdp_options o = {.strategy = FSDP_FULL_SHARD, .forward_prefetch = prefetch, .backward_prefetch = false,
                      .max_inflight = limit ? 1 : layers, .overlap = true};
    fsdp *f = fsdp_create(m, world, &o, 20, 1);
    fsdp_hooks = model_get_hooks(m);
    probe_layers = layers;
    model_hooks probe = fsdp_hooks;
    probe.before_forward = probe_before_forward;
    model_set_hooks(m, &probe);
    int inputs[PEAK_B * PEAK_T], targets[PEAK_B * PEAK_T];
    for (int i = 0; i < PEAK_B * PEAK_T; i++) {
        inputs[i] = (int)(mp_hash32(7, (uint64_t)i) % (uint32_t)c.V);
        targets[i] = (int)(mp_hash32(8, (uint64_t)i) % (uint32_t)c.V);
    }
    model_forward(m, inputs, targets, PEAK_B, PEAK_T);
    size_t off, root_a, root_b, block;
    model_layer_span(m, -1, &off, &root_a);
    model_layer_span(m, layers, &off, &root_b);
    model_layer_span(m, 0, &off, &block);
    if (comm_rank(world) == 0) {
        printf("root=%zu block=%zu held=", root_a + root_b, block);
        for (int l = 0; l < layers; l++) printf("%s%zu", l ? "," : "", held_at_block[l]);
        printf("\n");
        fflush(stdout);
    }
    model_set_hooks(m, &fsdp_hooks);
    fsdp_free(f);
    model_free(m);
    comm_finalize(world);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--forward-held") == 0) return forward_held(argc, argv);
    return trainer_rank_worker("lab20_worker", argc, argv);
}
