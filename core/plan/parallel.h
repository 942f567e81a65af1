/* parallel.h: the memory planner under tensor and pipeline parallelism: bytes per rank of each pipeline stage, in-flight micro-batches and the bubble. */
#ifndef MIXPAR_PLAN_PARALLEL_H
#define MIXPAR_PLAN_PARALLEL_H

#include "plan/plan.h"

/* A dp x tp x pp run (dist/pp.h, train/mp_step.h): the model's blocks are spread over pp stages as evenly
 * as they go (the first L mod pp stages one more), and within a stage each block's matrices are split over
 * tp ranks (Megatron: q/k/v and the MLP's F-wide matrices by columns, the output projections by rows; the
 * norms and the row-parallel biases whole on every tp rank); the vocabulary is split over tp. The first
 * stage holds the embeddings, the last the final norm and the head (with a tied head on pp > 1, its own
 * copy of the embedding). ZeRO (run->zero_stage) shards over the dp = run->world ranks.
 *
 * Activations per block and micro-batch (Korthikanti et al. 2022, table 2, without sequence parallel):
 * the two norm inputs and the inputs of the qkv and fc matmuls (4 sbh) are whole on every tp rank, q, the
 * output projection's input, k, v and the F-wide MLP tensors and the attention scores are split:
 *     elements  4 sbh + (2 sbh + 2 sb*g*d + mlp_matrices * sbF + a s^2 b) / t
 * so 16-bit GPT-2 with dropout keeps sbh (10 + 24/t + 5 as/(ht)). A stage holds the activations of the
 * micro-batches in flight: m under GPipe, min(pp - s, m) on stage s under 1F1B; under interleaved 1F1B
 * min(m v, 2 (pp - s - 1) + (v - 1) pp + 1) chunk-micro-batches of 1/v of the stage's blocks each
 * (Megatron's warm-up plus the one in steady state). The logits (fp32, V/t
 * columns) are the last stage's; its micro-batch is done in one go, so they count once.
 *
 * Sequence parallel (序列并行, the same paper's section 4.2.2; dist/sp.h): the 4 sbh kept whole on every
 * tp rank (the norms' inputs, the qkv and fc inputs, kept as the norms' outputs) and the two dropout masks
 * are split over the sequence too, so everything is divided by t:
 *     16-bit GPT-2 with dropout   sbh (34/t + 5 as/(ht))    instead of   sbh (10 + 24/t + 5 as/(ht))
 * and outside the blocks the final norm's and the head's inputs and the embedding's dropout mask as well.
 *
 * The course's model (course_model: what core/model allocates for one micro-batch, measured by the
 * allocator's MEM_ACT): fp32 activations whatever the recipe, no dropout, each tensor padded to 64 bytes,
 * and per micro-batch (activation slot) beside the blocks the embeddings' output, on the last stage the
 * final norm, logits (Vp/t columns), losses and lse, and backward's scratch; under sequence parallel the
 * residual stream's tensors hold b s/t rows and two scratch tensors are added (the all-gathered (b s, h)
 * and the reduce-scattered (b s/t, h)). Recompute none and no interleaving (else exit 2). */
typedef struct {
    uint64_t tp, pp;           /* sizes; dp is run->world */
    uint64_t micro_batches;    /* m per step (per data-parallel replica) */
    bool gpipe;                /* else 1F1B, interleaved when chunks > 1 */
    uint64_t chunks;           /* v: model chunks per stage (interleaved 1F1B); 0 or 1: none */
    bool sequence_parallel;    /* Megatron's sequence parallel over the tp ranks (nothing to split when tp = 1) */
    bool course_model;         /* core/model's tensors (fp32) rather than the paper's (16-bit, dropout) */
} plan_parallel;

typedef struct {
    uint64_t first_block, blocks;
    uint64_t params;           /* elements one rank of the stage holds */
    uint64_t in_flight;        /* micro-batches whose activations it holds at its peak (interleaved: chunk units) */
    uint64_t act_per_micro;    /* activation bytes of one micro-batch on it */
    uint64_t bytes[MEM_NTAGS]; /* per tag, activations at the peak */
    uint64_t total;
} plan_stage;

/* Fills stages[0 .. pp-1] and returns the bubble (pp-1)/(v m + pp - 1). Exits 2 (expected/found/hint) when tp
 * does not divide the heads, the kv heads or the MLP size, when there are fewer layers than stages, or when
 * interleaving has pp < 2, m not a multiple of pp or layers not divisible by pp v. */
double plan_parallel_stages(const plan_model *m, const plan_run *run, const plan_parallel *par, plan_stage *stages);

#endif
