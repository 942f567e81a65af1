/* model_lowp.h: the model's mixed-precision mode: 16-bit activations, bf16/fp16/tf32/fp8 matmuls, underflow counters. */
#ifndef MIXPAR_MODEL_MODEL_LOWP_H
#define MIXPAR_MODEL_MODEL_LOWP_H

/* A model runs in fp32 until model_set_precision gives it a low-precision compute mode. The weights
 * and their gradients stay fp32 buffers in every mode (the trainer decides what they mean: fp32 weights
 * under autocast, an fp32 master copy for fp16-o2, bf16 values for bf16-pure, amp/recipe.h); what
 * changes is how forward and backward compute and what they keep:
 *
 *   compute  saved activations  matmul operands                      matmul output
 *   fp32     fp32               fp32                                 fp32
 *   tf32     fp32               rounded to tf32 (10 mantissa bits)   fp32
 *   bf16     bf16 (2 bytes)     bf16, fp32 accumulation              rounded to bf16
 *   fp16     fp16 (2 bytes)     fp16, fp32 accumulation              rounded to fp16
 *   fp8      bf16 (2 bytes)     e4m3 forward, e5m2 gradients, per-   rounded to bf16
 *                               tensor delayed scaling (amp/fp8.h)
 *
 * This is torch.autocast's policy (amp/policy.h): matmuls and attention's products read low-precision
 * operands; norms, softmax, the loss and their statistics compute in fp32 and their results are rounded
 * where they are stored; the residual stream is carried in fp32 through the forward pass and stored in
 * the low format for backward (as llm.c stores it). Every tensor backward reads is stored in 2 bytes, so
 * activation memory (MEM_ACT) really halves, apart from fp32 scratch for one layer at a time.
 *
 * In backward, the gradient flowing into each matmul is rounded to the low format first (autocast casts
 * the gradient of a low-precision output to that precision): this is where fp16 gradients underflow
 * without a loss scale and overflow with too large a one, and it is counted per layer (below). Weight
 * gradients are accumulated in fp32 directly (ops/matmul_lowp.h).
 *
 * The weights are cast to the low format at the start of every forward pass into a cast cache (MEM_OTHER,
 * 2 bytes per parameter; 4 for tf32 and fp8, which keep the rounded values in fp32), as autocast caches
 * the casts of the weights within one forward.
 *
 * A tensor- or pipeline-parallel shard (model_create_shard) takes bf16 and fp16 (tf32 and fp8: exit 2):
 * the same roundings at the same places, on the fp32 path that knows the shard's tp reductions and
 * pipeline hand-offs, with the activations' rounded values kept in fp32 buffers (model_lowp.c, "autocast
 * on a shard"): the numbers of autocast, not its activation memory. */

#include <stdbool.h>
#include <stdint.h>

typedef struct model model;

typedef enum {
    MODEL_COMPUTE_FP32,
    MODEL_COMPUTE_TF32,
    MODEL_COMPUTE_BF16,
    MODEL_COMPUTE_FP16,
    MODEL_COMPUTE_FP8,
    MODEL_NCOMPUTE
} model_compute;

typedef struct {
    model_compute compute;
    int fp8_history;          /* amax history length of each fp8 tensor [0: amp/fp8.h's default, 16] */
    int fp8_margin;           /* binades of headroom in the fp8 scales [0] */
    bool fp8_unscaled;        /* fp8 casts with scale 1 always (no delayed scaling): what fp8 does without it */
    bool fp8_mx;              /* fp8 casts in MXFP8 blocks instead (fp/mx.h, lab 30): every 32 values along a
                               * row share an E8M0 scale (e4m3 forward operands, e5m2 gradients); rows are the
                               * forward GEMM's reduction dimension for inputs and weights, the output channels
                               * for gradients; backward reuses forward's blocks (hardware re-blocks the
                               * transposed copies). The rounding counters stay 0 in this mode. */
} model_precision;

const char *model_compute_name(model_compute c); /* "fp32", "tf32", "bf16", "fp16", "fp8" */

/* Bytes per parameter of the cast cache (MEM_OTHER) a whole model keeps under compute c: 0 in fp32; 2 on the
 * bf16 kernel path; 4 where rounded values are kept in fp32; 0 for sharded weights (reserved: ZeRO-3, FSDP) with
 * an untied head off the kernel path, which are rounded where they are gathered. Sharded weights are cached only
 * while gathered. The planner uses it (trainer_plan). */
unsigned model_cast_cache_bytes(model_compute c, bool reserved, bool tied);

/* Switches the compute mode; the activations of a previous mode are freed (call between steps). */
void model_set_precision(model *m, const model_precision *p);
model_compute model_get_compute(const model *m);
/* The 16-bit kernel this model's products run on ("avx512-bf16", "amx-bf16": matmul_lowp_path), or NULL where they
 * run on the fp32 sgemm (fp32, and 16-bit or fp8 values held in fp32). The profiler measures that kernel's peak. */
const char *model_products_kernel16(const model *m);
bool model_get_fp8_mx(const model *m); /* fp8 compute in MXFP8 blocks (model_precision.fp8_mx) */

/* While the weights are held, the caller promises that the parameters do not change (a step's micro-batches,
 * between two updates): the first forward casts the weights for the low-precision matmuls, and the forwards after
 * it read that cast again instead of making it anew (GPT-2 bf16: 500 MB read and 250 MB written, about 17 ms, per
 * micro-batch). Releasing them (held false) forgets the cast: the next forward makes one. Nothing changes for fp32
 * models, for fp8 compute (its cast depends on scales that move at every forward) or for sharded weights (they
 * are cast range by range as they are gathered). */
void model_hold_weights(model *m, bool held);

/* Values rounded into a low format, and what happened to them. */
typedef struct {
    uint64_t values;      /* values rounded */
    uint64_t nonzero;     /* of them, not zero before rounding */
    uint64_t flushed;     /* nonzero before, zero after: underflow */
    uint64_t overflowed;  /* finite before, inf after (fp16: |x| >= 65520) */
    uint64_t saturated;   /* fp8: clamped to the format's largest value */
} model_round_count;

/* Per layer: index layer + 1, so 0 is the embeddings, 1..L the blocks, L+1 the final norm and head. */
typedef struct {
    model_round_count grads; /* gradients rounded into the matmuls' low format in backward */
    model_round_count acts;  /* activations rounded for storage in forward */
} model_layer_rounding;

/* Counting costs one extra pass over each rounded tensor; off by default. Counts add up across steps
 * until model_rounding_reset. Returns the array of L + 2 entries; *n receives L + 2. */
void model_rounding_enable(model *m, bool on);
const model_layer_rounding *model_rounding(const model *m, int *n);
void model_rounding_reset(model *m);

#endif
