/* gathered.h: the planner's ZeRO-3 / FSDP term: the most gathered weights, unreduced gradients and reduce buffers a
 * rank holds at once, from a replay of one step's unit schedule (core/dist/fsdp.c). */
#ifndef MIXPAR_PLAN_GATHERED_H
#define MIXPAR_PLAN_GATHERED_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/plan.h"

typedef struct {
    uint64_t shard_group;   /* G: ranks a unit is sharded over (>= 1) */
    int max_inflight;       /* units gathered ahead of the running one (fsdp.limit_all_gathers: 1) */
    bool forward_prefetch;  /* gather the next units during forward */
    bool backward_prefetch; /* ... and during backward (BACKWARD_PRE) */
    bool overlap;           /* a communication thread runs the gathers and reduces; false: they run in line */
    uint64_t cache_bytes;   /* bytes per gathered weight of the autocast cache (bf16/fp16 kernel path: 2; fp32: 0) */
} plan_gather_run;

typedef struct {
    uint64_t comm;          /* MEM_COMM at the worst moment: gathered fp32 weights, fp32 gradients not yet reduced,
                             * the reduce's own shard and any staging buffer. With a 16-bit cache (cache_bytes 2)
                             * the blocks and an untied head are gathered in 16 bits into the cache: of their
                             * fp32 weights only the norm gains and biases are held */
    uint64_t other;         /* MEM_OTHER at that moment: the autocast cache of the gathered weights */
    uint64_t units;         /* units: the embeddings, each block, the head (untied) */
    const char *where;      /* when it happens, e.g. "backward, at the embeddings" */
} plan_gathered;

/* The worst moment of a step when the communication thread is as slow as the compute lets it be: every gather
 * finishes just when its unit is needed, and each reduce runs only when a later gather must wait behind it
 * (one queue, first in first out). A faster network holds less; the plan is what a rank must have room for. */
void plan_gathered_bytes(const plan_model *m, const plan_gather_run *run, plan_gathered *out);

#endif
