/* perf.h: the speed and memory model of a training step: FLOPs per token, MFU, activation bytes per recipe (lab 10). */
#ifndef MIXPAR_PLAN_PERF_H
#define MIXPAR_PLAN_PERF_H

/* Two questions every mixed-precision run is tuned by (性能调优):
 *
 * How fast, against what the machine could do? Model FLOPs utilisation (MFU, 模型算力利用率; Chowdhery et al.
 * 2022, "PaLM", appendix B) divides the FLOPs the model needs per second at the measured throughput by the
 * hardware's peak. The model's FLOPs are counted from its shapes, not from what the implementation runs:
 * recomputed activations, padded vocabulary rows and casts do not count, so MFU compares implementations
 * and machines fairly. Per token of a training step (forward + backward):
 *
 *     6 N          every weight a token is multiplied by: 2 FLOPs (multiply, add) forward, 4 backward (the
 *                  gradient of the input and of the weight: two products of the same size)
 *     12 L s h     attention's two products per layer, Q K^T and P V: 2 * 2 * s * h forward per token, x3
 *                  with backward (PaLM's 12 L H Q T with H heads of size Q = h / H)
 *
 * N here is the weights of the matrix products: in each block the Q, K, V and output projections and the MLP's
 * matrices, plus the output head (V x h). The token and position embeddings are looked up, not multiplied,
 * so they cost no FLOPs (a tied head is counted once, as the head); biases and norm gains cost a few FLOPs per
 * value, far below 1%. The attention term counts the full s x s score matrix, as PaLM and Megatron count it,
 * although a causal kernel needs only half of it.
 *
 *     tokens/s = B * T * (micro-batches) * (ranks) / (step seconds)
 *     MFU      = flops_per_token * tokens/s / peak FLOP/s
 *
 * Where does the memory go? By allocator tag (base/mem.h): the model states (lab 01's planner) and the
 * activations (MEM_ACT), which is what a 16-bit recipe halves: perf_activation_bytes predicts MEM_ACT for
 * mixpar's own model, tensor by tensor, so a measured peak can be checked against it (make lab10).
 *
 * Letters as in plan.h (L h a g F V s b) and model.h (B T C NH KVH Vp). */

#include <stdint.h>

#include "model/model.h"
#include "model/model_lowp.h"
#include "plan/plan.h"

/* ------------------------------------------------------------------ FLOPs (lab 10) */

typedef struct {
    uint64_t matmul_params; /* N: weights of the matrix products (linear layers and the head) */
    uint64_t dense;         /* 6 N */
    uint64_t attention;     /* 12 L s h */
    uint64_t total;         /* dense + attention: model FLOPs per token of a training step */
} perf_flops;

/* Model FLOPs per token of one training step (forward and backward) of model m on sequences of s tokens. */
void perf_train_flops_per_token(const plan_model *m, uint64_t seq, perf_flops *out);

/* ------------------------------------------------------------------ throughput and MFU (lab 10) */

typedef struct {
    double tokens_per_s;    /* tokens processed per second */
    double flops_per_s;     /* model FLOPs per second: flops_per_token * tokens_per_s */
    double mfu;             /* flops_per_s / peak_flops_per_s: a fraction, 0.5 = 50% */
} perf_throughput;

/* From `tokens` processed in `seconds` by a model that needs flops_per_token per token, on a machine whose
 * peak is peak_flops_per_s. seconds and the peak must be > 0 and finite (exit 2 otherwise). */
perf_throughput perf_throughput_of(uint64_t tokens, double seconds, double flops_per_token, double peak_flops_per_s);

/* ------------------------------------------------------------------ activation memory (lab 10) */

typedef struct {
    unsigned storage_bytes; /* bytes per stored activation value: 4 (fp32, tf32) or 2 (bf16, fp16, fp8) */
    uint64_t kept;          /* the tensors backward reads, in the storage format: L blocks and the rest */
    uint64_t statistics;    /* fp32 values per position kept beside them: norm means and 1/std, loss values */
    uint64_t working;       /* the implementation's fp32 working buffers (perf_working_bytes) */
    uint64_t total;         /* kept + statistics + working: MEM_ACT after the first forward pass */
} perf_activations;

/* MEM_ACT of mixpar's model (model/model.h, a completed config) for a (B,T) batch in compute mode `compute`.
 * What is kept, per block, in the storage format (model_lowp.h; fp32 and tf32 keep 4 bytes):
 *   ln1 (B,T,C)  qkv (B,T,QKV)  atty (B,T,C)  att (B,NH,T,T)  res2 (B,T,C)  ln2 (B,T,C)  fch (B,T,FC)
 *   fch_act (B,T,F)  res3 (B,T,C)       QKV = (NH + 2 KVH) * C/NH, FC = F (GPT-2) or 2F (LLaMA: gate, up)
 * and outside the blocks: encoded (B,T,C), lnf (B,T,C), logits (B,T,Vp). In fp32 beside them, per position:
 * each norm's mean (LayerNorm only) and 1/std (2 norms per block and the final norm), and the loss, the
 * log-sum-exp and the loss's gradient. */
void perf_activation_bytes(const model_config *cfg, int B, int T, model_compute compute, perf_activations *out);

/* The working buffers (given, not a lab region): fp32 keeps the gradients of one layer's activations for
 * backward, (B,T) x (4C + QKV + FC + F) floats (model.c, layout_acts); the low-precision modes keep one layer's
 * forward and backward tensors in fp32, a head block of the logits and a 16-bit copy of one gradient
 * (model_lowp.c, layout: the scratch arena). */
uint64_t perf_working_bytes(const model_config *cfg, int B, int T, model_compute compute);

#endif
