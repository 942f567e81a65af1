/* model.h: GPT-2 and LLaMA-style decoders on the CPU (fp32): config, parameter registry, forward, backward. */
#ifndef MIXPAR_MODEL_MODEL_H
#define MIXPAR_MODEL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp/hist.h"

/* Dimension letters (STYLE.md): B batch, T sequence, C channels, V vocabulary (Vp padded), L layers,
 * NH query heads, KVH key/value heads, HS = C/NH head size, F feed-forward hidden size. */

typedef enum {
    MODEL_GPT2,  /* LayerNorm, GELU MLP, learned positions, biases, tied head */
    MODEL_LLAMA, /* RMSNorm, SwiGLU MLP, rotary positions, no biases, optional grouped-query attention */
} model_arch;

typedef struct {
    model_arch arch;
    int V;            /* vocabulary size */
    int Vp;           /* padded vocabulary: rows of the embedding and of the logits (>= V) */
    int maxT;         /* context length: positions the model can see */
    int L, C, NH, KVH, F;
    bool tied;        /* output head shares the token embedding */
    float norm_eps;   /* 1e-5 */
    float rope_theta; /* LLaMA only: 10000 */
} model_config;

/* Fills in the derived and default fields (Vp, KVH, F, tied, eps, theta) of a config given arch, V,
 * maxT, L, C, NH (and optionally KVH, F, Vp when non-zero), and checks it; a bad config stops with a
 * message naming the field (exit 2). */
void model_config_complete(model_config *cfg);
const char *model_arch_name(model_arch arch);          /* "gpt2", "llama" */
int model_arch_from_name(const char *name);            /* -1 when unknown */

/* One named tensor in the flat parameter buffer. Layout is layer-major: embeddings, then each block's
 * tensors together, then the final norm and the head, so one layer's parameters (and gradients) are
 * one contiguous span: what DDP buckets, ZeRO shards and FSDP units slice. */
typedef struct {
    char name[48];       /* "wte", "h.3.qkvw" (block 3), "lnfw" */
    int ndim;
    int shape[2];        /* (rows, cols) for matrices, (n) for vectors */
    size_t offset;       /* in floats, into the parameter (and gradient) buffer */
    size_t size;         /* in floats */
    int layer;           /* -1 embeddings, 0..L-1 blocks, L final norm and head */
    bool decay;          /* weight decay applies (tensors of 2 or more dimensions) */
    bool frozen;         /* no gradient (PyTorch's requires_grad=False): model_freeze */
} model_tensor;

/* Called by forward and backward around each layer, so a parallel strategy can gather parameters
 * before a layer runs and hand its gradients to communication as soon as they are final. `layer` is
 * -1 (embeddings), 0..L-1 (blocks) or L (final norm and head). Any callback may be NULL. */
typedef struct {
    void (*before_forward)(void *ctx, int layer);
    void (*before_backward)(void *ctx, int layer);
    void (*grads_ready)(void *ctx, int layer);
    void *ctx;
} model_hooks;

typedef struct model model;

/* Floats a model of this (completed) config holds, without allocating it (for memory checks). */
size_t model_count_params(const model_config *cfg);
model *model_create(const model_config *cfg);          /* parameters (MEM_PARAM) and gradients (MEM_GRAD) */
void model_free(model *m);
const model_config *model_get_config(const model *m);

/* The registry. model_tensor_find returns NULL when no tensor has that name. */
const model_tensor *model_tensors(const model *m, int *count);
const model_tensor *model_tensor_find(const model *m, const char *name);
size_t model_num_params(const model *m);               /* floats in the buffer (padded vocabulary rows included) */
size_t model_num_params_unpadded(const model *m);      /* what papers count: V, not Vp, rows */
void model_layer_span(const model *m, int layer, size_t *offset, size_t *size); /* floats of one layer */
float *model_params(model *m);
float *model_grads(model *m);

/* Sharded parameters (ZeRO-3 and FSDP, dist/fsdp.h). model_create_reserved lays the parameter and gradient
 * buffers out as usual but only reserves their address space (base/mem.h mem_reserve, tag MEM_COMM): no
 * layer has memory until a strategy commits its span, gathers its weights there and later decommits it.
 * Every piece of code that indexes the flat buffers keeps working; reading a layer that is not gathered
 * gives zeros. On a reserved model model_zero_grad does nothing (a decommitted range is zero) and the
 * low-precision weight cache is made per range: model_weights_arrived after a span's weights were
 * written, model_weights_leaving before it is decommitted. fp8 compute is not available on it. */
model *model_create_reserved(const model_config *cfg);
bool model_is_reserved(const model *m);
/* ZeRO-2 (dist/zero.h): whole parameters, but the gradient buffer reserved (MEM_GRAD): the strategy commits
 * a bucket before backward writes into it and decommits what is not this rank's shard once it is reduced,
 * and all of it after the step. model_zero_grad does nothing on it. */
model *model_create_sharded_grads(const model_config *cfg);
bool model_grads_are_reserved(const model *m); /* sharded grads, or a reserved model */
void model_weights_arrived(model *m, size_t offset, size_t n);
void model_weights_leaving(model *m, size_t offset, size_t n);
/* The 16-bit weight cache of a reserved model whose matmuls run on the 16-bit kernel (bf16 or fp16 compute), or
 * NULL: a sharding strategy may all-gather weights already in 16 bits straight into it (FSDP's param_dtype)
 * instead of gathering fp32 and casting. model_weights16_encode rounds n fp32 values to the cache's format
 * exactly as the cast does. model_weights16_commit commits [offset, offset + n) of the cache for a caller that
 * writes all of it; the range then stands for a cast one, and model_weights_leaving gives it back. */
uint16_t *model_weights16(model *m);
bool model_weights16_are_bf16(const model *m);
void model_weights16_encode(const model *m, uint16_t *dst, const float *src, size_t n);
void model_weights16_commit(model *m, size_t offset, size_t n);
/* A sharding strategy that commits a layer's gradient span afresh for every backward can leave its matrices
 * unzeroed (mem_commit_to_overwrite) when the weight-gradient products write them instead of adding to them:
 * with this on, the 16-bit kernel's products do (each matrix has one product a backward, and the first
 * contribution to a tied table is its product). The gradients of everything else (norm gains, biases, the
 * embeddings' lookup) are still added, so their memory must start at zero. */
void model_set_matrix_grads_written(model *m, bool on);

/* GPT-2 initialisation: weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0, norm
 * gains 1, padded vocabulary rows 0. Same seed, same weights on every machine. */
void model_init(model *m, uint64_t seed);
/* The same values, layer by layer: before(ctx, layer) runs before a layer's tensors are written (a reserved
 * model commits the span there), after(ctx, layer) once they are (a strategy keeps its shard and decommits
 * it), so the whole model never needs to be in memory at once. Either may be NULL. */
void model_init_layerwise(model *m, uint64_t seed, void (*before)(void *, int), void (*after)(void *, int), void *ctx);

void model_set_hooks(model *m, const model_hooks *hooks);
/* The hooks set now (a probe can wrap a strategy's hooks with its own and pass each call on). */
model_hooks model_get_hooks(const model *m);

/* Freezes the tensors matching pattern: a full name ("wpe", "h.0.ln1w") or a prefix ending in '*'
 * ("h.0.*"). A frozen tensor's gradient is zero when its layer's grads_ready hook runs (so data parallel
 * averages zeros) and the optimizer leaves it alone (train/step.h), weight decay included. Backward still
 * computes through it: the inputs' gradients need it. Returns the number of tensors matched. */
int model_freeze(model *m, const char *pattern);
int model_count_frozen(const model *m);
/* Sets whether weight decay applies to tensor i of the registry (before the optimizer's spans are laid out;
 * optim/decay.h chooses by group). model_create sets it for tensors of 2 or more dimensions. */
void model_set_decay(model *m, int i, bool decay);
/* What backward calls when a layer's gradients are final: zeroes the frozen ones, then the hook. */
void model_grads_ready(model *m, int layer);

/* Forward over a (B,T) batch of tokens. With targets (B,T) (-1 = ignored) returns the mean loss over
 * counted positions and keeps what backward needs; without (targets NULL) returns 0 and leaves the
 * logits for sampling. Activations are allocated (MEM_ACT) at the first call and grown when B*T grows. */
float model_forward(model *m, const int *inputs, const int *targets, int B, int T);
/* Gradients of the mean loss of the last forward, ADDED to the gradient buffer (so micro-batches
 * accumulate; call model_zero_grad first). `loss_scale` multiplies the loss before backward (1 for
 * plain training; the loss scaler's value under mixed precision). */
void model_backward(model *m, float loss_scale);
/* Gradients to zero, as backward sees them. On the bf16 kernel (model_lowp.c) the blocks' matrices and the head
 * (tied or not) are left as they are and the next backward's weight-gradient products write them instead of
 * adding, so until that backward they hold whatever was there; everything else is zero at once.
 * model_set_precision zeroes what is left if it comes first. */
void model_zero_grad(model *m);
/* Logits of position t of sequence b from the last forward: Vp floats, the first V meaningful. */
const float *model_logits(model *m, int b, int t);
/* Mixed precision (storage of activations in 2 bytes, 16-bit or fp8 matmuls): model/model_lowp.h. */

/* Exponent histograms of the activations forward keeps, per layer (hists[layer + 1], L + 2 of them, -1
 * the embeddings' output, L the final norm and the logits), taken in fp32 before any rounding to a low
 * format, so they show what each format would flush. Forward adds to them while set; NULL stops. */
void model_collect_act_hist(model *m, fp_hist *hists);

/* Forward's report of each activation as soon as it is computed, before anything reads it, in forward
 * order: layer (-1 embeddings, 0..L-1 blocks, L final norm and head), its name and its fp32 values (before
 * any rounding to a storage format). The names: "encoded" (layer -1: the embeddings' output); in every
 * block "ln1", "qkv", "att", "atty", "res2", "ln2", "fch", "fch_act", "res3" (the block's output); "lnf"
 * and "logits" (layer L; the 16-bit path reports the logits a row at a time). A probe may change the
 * values: forward goes on with what it leaves (fault injection). A recompute in backward reports nothing.
 * It is how a non-finite loss is traced to the first activation that went bad (amp/detect.h). */
typedef void (*model_act_probe)(void *ctx, int layer, const char *name, float *x, size_t n);
void model_set_act_probe(model *m, model_act_probe probe, void *ctx); /* NULL stops */
model_act_probe model_get_act_probe(const model *m, void **ctx);      /* the probe set now (a scan chains it) */
extern const char *const model_block_act_names[]; /* a block's activations, in forward order; NULL-ended */
/* "h.3.fch", "encoded", "logits": the full name of activation `name` of `layer`. */
void model_act_full_name(const model *m, int layer, const char *name, char *out, size_t len);

/* ------------------------------------------------------------------ model parallelism (模型并行)
 * A model can be one rank's shard of a bigger one (DESIGN.md: the model sees shapes, never communicators).
 *
 * Tensor parallel (张量并行, Megatron-LM, Shoeybi et al. 2019), tp ranks: rank t holds
 *   attention  query heads t*NH/tp .. and key/value heads t*KVH/tp .. (tp divides KVH: a GQA group stays
 *              on one rank): qkvw's rows of those heads (column-parallel), attprojw's input columns of
 *              them (row-parallel, (C, C/tp));
 *   MLP        fcw's rows t*F/tp .. of the hidden size (llama: those rows of the gate and of the up
 *              projection, stacked (2F/tp, C)), fcprojw's matching input columns (C, F/tp);
 *   vocabulary wte's (and an untied head's) rows t*Vp/tp .. (vocab-parallel embedding and loss);
 *   the rest   norm gains and biases, row-parallel biases, wpe: whole, the same on every tp rank. Their
 *              gradients are identical on every tp rank by construction (each is computed from tensors
 *              that are whole on every rank after g's and f's sums), so they need no allreduce (under
 *              sequence parallel, below, the norms' are partial and are summed once a step).
 * The model calls the shard's tp_sum at Megatron's conjugate points: g after each row-parallel matmul
 * (forward), f's backward after each column-parallel matmul's input gradient, the partial embeddings; and
 * tp_max / tp_sum for the vocab-parallel cross-entropy (row max, sum of exp, target logit), so the
 * logits (B,T,Vp/tp) are never gathered. tp_rank 0 of 1 needs neither.
 *
 * Pipeline parallel (流水线并行): a stage holds blocks [first, last). The first stage (first == 0) also
 * holds the embeddings and reads tokens; the others read the previous stage's hidden state (B,T,C).
 * The last stage (last == L) also holds the final norm and the head and computes the loss; the others
 * hand their output (B,T,C) on. Tied embeddings on pp > 1: the last stage holds its own copy of wte
 * (named "wte", layer L, as Megatron does), initialised to the same values; the pp strategy sums the two
 * copies' gradients over the embedding group so they stay equal (dist/pp.h). Layer numbers and tensor
 * names stay the whole model's ("h.5.qkvw" on the stage that runs block 5). */
typedef struct {
    int tp_rank, tp_size;                        /* [0, 1] */
    int first, last;                             /* blocks of this stage [0, L] */
    void (*tp_sum)(void *ctx, float *x, size_t n); /* x = sum over the tp ranks, in place */
    void (*tp_max)(void *ctx, float *x, size_t n); /* x = max over the tp ranks, in place */
    void *tp_ctx;
    /* Sequence parallel (序列并行, Korthikanti et al. 2022; Megatron's --sequence-parallel), tp > 1 only:
     * the norms, the residual adds and the embedding's output work on this tp rank's slice of the sequence,
     * positions [tp_rank T/tp, (tp_rank + 1) T/tp) of every sequence, so the residual stream and the norms'
     * tensors are (B, T/tp, C) on each rank. Megatron's conjugate pair becomes:
     *   before a column-parallel matmul (qkv, fc, the head): seq_gather, the all-gather of the slices into
     *     the whole (B,T,C) (its backward: the input gradient, partial per rank, reduce-scattered);
     *   after a row-parallel matmul (attproj, fcproj) and the partial embeddings: seq_reduce_scatter, the
     *     sum over tp of a partial (B,T,C) of which each rank keeps its slice (its backward: the all-gather
     *     of the output gradient), in place of g's allreduce.
     * The norms' gains and biases see only the rank's tokens, so their gradients are partial sums: the
     * strategy sums them over tp once per step (model_tensor_seq_partial; Megatron's allreduce of the
     * sequence-parallel parameters' gradients). Row-parallel biases and wpe take their gradients from the
     * all-gathered output gradient: whole on every rank. T must be divisible by tp_size (exit 2). */
    bool sequence_parallel;
    /* full (B,T,C) = the (B, T/tp, C) slices of every tp rank, each in its place in the sequence */
    void (*seq_gather)(void *ctx, const float *slice, float *full, int B, int T, int C);
    /* slice (B, T/tp, C) = this rank's positions of the sum over the tp ranks of full (B,T,C) */
    void (*seq_reduce_scatter)(void *ctx, const float *full, float *slice, int B, int T, int C);
} model_shard;

/* Megatron's vocab-parallel cross-entropy (词表并行交叉熵) on this tp rank's vocabulary columns: logits
 * (N, Vl) are columns v0 .. v0+Vl-1 of the whole (N, Vp) logits, columns at or past V are padding (not in
 * the softmax); targets (N) in [-1, V), -1 not counted. Writes each row's lse = log sum_v exp(z_v) over
 * the whole vocabulary and loss = lse - z_target (0 where not counted), the same on every tp rank,
 * without gathering the logits: the row max is reduced with sh->tp_max, the sum of exp(z - max) and the
 * target's logit (the rank whose columns hold the target gives it, the others 0) with sh->tp_sum. One tp
 * rank (tp_size 1) needs no reduction. sums: N floats of scratch. */
void model_vocab_parallel_loss(const model_shard *sh, float *lse, float *losses, float *sums, const float *logits,
                               const int *targets, int N, int Vl, int v0, int V);
/* Its backward on this rank's columns, no communication: dlogits (N, Vl) = (exp(z - lse) - onehot(target))
 * x dloss (N), 0 in padding columns and in rows not counted. dlogits may be logits (in place). */
void model_vocab_parallel_loss_backward(float *dlogits, const float *logits, const float *lse, const int *targets,
                                        const float *dloss, int N, int Vl, int v0, int V);

/* The whole model as a shard (tp 1 of 1, blocks [0, L)). cfg completed. */
model_shard model_shard_whole(const model_config *cfg);
/* Checks a shard against a completed config: exits 2 naming what does not divide (heads, kv heads, the
 * MLP's hidden size or the padded vocabulary by tp) or a bad block range. */
void model_shard_check(const model_config *cfg, const model_shard *sh);
/* A model holding only this shard's tensors (MEM_PARAM, MEM_GRAD); model_init gives each tensor the
 * values of its slice of the whole model's model_init (same seed), so a sharded run starts exactly where
 * one rank starts. Compute fp32, or bf16 / fp16 autocast (model_lowp.h: model_set_precision on a shard). */
model *model_create_shard(const model_config *cfg, const model_shard *sh);
const model_shard *model_get_shard(const model *m);
bool model_is_shard(const model *m);                  /* tp > 1 or not all blocks */
bool model_has_embedding(const model *m);             /* the first stage */
bool model_has_head(const model *m);                  /* the last stage */
/* A tensor every tp rank holds whole (norms, biases of row-parallel layers, wpe): counted once in a norm
 * over the tp ranks. */
bool model_tensor_tp_replicated(const model *m, const model_tensor *t);
/* Under sequence parallel: a tensor whose gradient each tp rank computes from its slice of the sequence
 * only (the norms' gains and biases), to be summed over the tp ranks once per step. False otherwise. */
bool model_tensor_seq_partial(const model *m, const model_tensor *t);
/* The last stage's copy of the tied embedding (pp > 1): counted once in a norm over the stages. */
bool model_tensor_is_tied_copy(const model *m, const model_tensor *t);

/* Checkpoints across meshes (train/mp_checkpoint.h). The whole model's registry for a config, without
 * buffers (malloc'd: free() it; *count tensors): the layout every mesh's checkpoint is written in. */
model_tensor *model_whole_registry(const model_config *cfg, int *count);
/* How tp splits a tensor: "replicated", "qkv_head_rows" (q, k, v rows of the rank's heads), "ffn_rows"
 * (the rank's hidden rows; llama: of the gate and of the up part), "cols" (input columns: row-parallel),
 * "vocab_rows". */
const char *model_tensor_split_name(const model_tensor *t);
/* Where the elements of this shard's tensor t lie in the whole tensor: runs [start[k], start[k] + len[k])
 * of the whole tensor's row-major elements, in the order the shard lays them out (so the shard's tensor
 * is the runs concatenated). Returns the number of runs; start and len NULL: only count them. */
size_t model_tensor_whole_runs(const model *m, const model_tensor *t, size_t *start, size_t *len);

/* Activation slots: a pipeline stage holds several micro-batches' activations at once (GPipe all m,
 * 1F1B at most p). Each slot has its own activations (MEM_ACT, allocated at the slot's first forward,
 * kept for reuse); forward and backward work on the slot selected. Slot 0 is where a model starts. */
void model_use_act_slot(model *m, int slot);
int model_act_slots(const model *m);                  /* slots made so far (at least 1) */

/* A pipeline stage's forward on one micro-batch: inputs (B,T) on the first stage, else hidden_in (B,T,C)
 * (the previous stage's output); targets (B,T) on the last stage (NULL elsewhere). Returns the mean loss
 * over counted positions on the last stage, 0 elsewhere. On a whole model it is model_forward. */
float model_forward_stage(model *m, const int *inputs, const float *hidden_in, const int *targets, int B, int T);
/* Floats of a stage's hidden state for a (B,T) micro-batch, what pipeline stages hand on: B T C, or under
 * sequence parallel this rank's slice B (T/tp) C (Megatron sends the sequence-parallel slice). */
size_t model_stage_floats(const model *m, int B, int T);
/* The stage's output of the last forward (B,T,C), on a stage that is not the last. */
const float *model_stage_output(const model *m);
/* Backward of the last forward on the selected slot: on the last stage from the loss (x loss_scale),
 * elsewhere from dhidden_out (B,T,C), the gradient of this stage's output. Gradients ADD to the buffer.
 * On a stage that is not the first, dhidden_in (B,T,C) receives the gradient of its input. */
void model_backward_stage(model *m, float loss_scale, const float *dhidden_out, float *dhidden_in);

/* Bytes of activations the model holds for a (B,T) batch (what forward would allocate), fp32, no recompute. */
size_t model_activation_bytes(const model_config *cfg, int B, int T);

/* ------------------------------------------------------------------ activation checkpointing (重计算)
 * Backward reads what forward computed inside every block (lab 02): norm outputs, q/k/v, the attention
 * probabilities, the MLP's inner tensors. Keeping them all is most of the activation memory; a policy
 * keeps less and recomputes the rest during backward, trading compute for memory:
 *
 *   policy     a block keeps                                  rerun in backward         memory per block
 *   none       everything backward reads                      nothing                   all of it
 *   every      only its input (the residual stream entering   the block's forward       its input
 *              it); Megatron's full recompute, DeepSpeed's    (one extra forward pass
 *              checkpoint() around every block                 in all)
 *   every_k    blocks 0, k, 2k, ... as `every`, the others    1/k of a forward          between the two
 *              everything (k = 1 is `every`)
 *   selective  everything except the attention probabilities  softmax(q k^T) (and att   all but (B,NH,T,T)
 *              att (B,NH,T,T), rebuilt from the stored q, k    @ v) per block
 *              (Korthikanti et al. 2022, "selective")
 *
 * every_k's k: of every k consecutive blocks the first is checkpointed, so ceil(L/k) blocks recompute.
 * This is Megatron-LM's "block" recompute method (--recompute-method block --recompute-num-layers n
 * checkpoints n of a stage's blocks and keeps the rest) with the n blocks spread evenly instead of
 * taken first; it is not Megatron's "uniform" method, which checkpoints chunks of k blocks and then
 * holds a whole chunk's activations while it recomputes. Here at most one block is ever rebuilt at a
 * time, so the extra memory is one block's worth whatever the policy.
 *
 * The residual stream at the block boundaries (the embeddings' output and every block's output, L+1
 * tensors (B,T,C)) is kept under every policy: each is a checkpointed block's input or the final
 * norm's. A checkpointed block's tensors are not allocated: they live in one shared block of recompute
 * buffers, which forward passes through and backward refills, block by block, right after the
 * before_backward(l) hook (so a ZeRO-3 gather there has the weights in place for the recompute) and
 * before block l's backward. The recompute runs the same code on the same inputs, so the gradients and
 * the loss are bit-for-bit those of `none` (in every compute mode of model_lowp.h too). */
typedef enum {
    MODEL_RECOMPUTE_NONE,
    MODEL_RECOMPUTE_EVERY,
    MODEL_RECOMPUTE_EVERY_K,
    MODEL_RECOMPUTE_SELECTIVE,
    MODEL_NRECOMPUTES
} model_recompute;

/* What one block keeps for backward under a policy. */
typedef enum {
    MODEL_KEEP_ALL,       /* every tensor its backward reads */
    MODEL_KEEP_NO_SCORES, /* all but the attention probabilities (selective) */
    MODEL_KEEP_INPUT,     /* only its input: the block is checkpointed and rerun in backward */
} model_keep;

extern const char *const model_recompute_names[]; /* "none", "every", "every_k", "selective", NULL */
const char *model_recompute_name(model_recompute r);
int model_recompute_from_name(const char *name);   /* -1 when unknown */

/* What block `layer` (0..L-1) keeps under `policy` (k: every_k's k, ignored by the others). */
model_keep model_block_keeps(model_recompute policy, int k, int layer);

/* Sets the model's policy (k >= 1 for every_k; a bad policy or k stops with a message, exit 2). The
 * activations of the previous policy are freed, so call it between steps, not between forward and
 * backward; the next forward lays them out again. */
void model_set_recompute(model *m, model_recompute policy, int k);
model_recompute model_get_recompute(const model *m, int *k); /* k may be NULL */

/* Where the activation bytes go, split as the planner splits them (plan_activations in plan/plan.h). */
typedef struct {
    size_t blocks;    /* what the L blocks keep for backward, their outputs on the residual stream included */
    size_t recompute; /* the shared recompute buffers: one block's worth at most (selective: one att) */
    size_t outside;   /* the embeddings' output, the final norm, the logits and loss, and backward's
                       * gradient scratch for one block (no policy changes these) */
    size_t total;
} model_activation_split;

/* model_activation_bytes under a policy: what the fp32 forward allocates (MEM_ACT, one block, so this is
 * the measured peak) for a (B,T) batch; *split (may be NULL) receives where the bytes go. */
size_t model_activation_bytes_policy(const model_config *cfg, int B, int T, model_recompute policy, int k,
                                     model_activation_split *split);

#endif
