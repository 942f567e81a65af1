/* plan.h: the memory planner: bytes per rank of training a transformer, by allocator tag (lab 01). */
#ifndef MIXPAR_PLAN_PLAN_H
#define MIXPAR_PLAN_PLAN_H

/* What one rank holds while it trains a decoder-only transformer: the model states (weights, gradients,
 * fp32 master weights, optimizer states; Rajbhandari et al. 2020, "ZeRO") and the activations kept for the
 * backward pass (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models").
 * The result is split by the allocator's tags (base/mem.h), so a measured peak can be set beside the plan
 * tag by tag (labs 10, 19 and 29):
 *
 *     plan_model m;
 *     plan_preset_find("llama-1b", &m);
 *     plan_run run = plan_run_defaults(&m);
 *     run.zero_stage = 3;
 *     run.world = 4;
 *     plan_result r;
 *     plan_compute(&m, &run, &r);          // r.bytes[MEM_PARAM] ... r.bytes[MEM_ACT], r.total_bytes
 *
 * Dimension letters, as in the Korthikanti paper and used in every comment of plan/:
 *     L layers   h hidden size (C)   a attention heads   g key/value heads   d = h/a head size
 *     F feed-forward size   V vocabulary   T context (learned-position rows)   s sequence length
 *     b micro-batch per rank   N data-parallel ranks (world)   Psi parameter count
 * Everything is counted exactly in 64-bit integers: elements or bytes, never rounded. */

#include <stdbool.h>
#include <stdint.h>

#include "base/mem.h"

/* ------------------------------------------------------------------ the model */

typedef enum {
    PLAN_ARCH_GPT2,  /* LayerNorm (weight+bias), biased linears, GELU MLP, learned positions (T x h) */
    PLAN_ARCH_LLAMA, /* RMSNorm (weight only), no biases, SwiGLU MLP (gate, up, down), rotary positions */
    PLAN_NARCHS
} plan_arch;

/* What an architecture changes in the counts: a table, so the formulas need no branches on the name. */
typedef struct {
    const char *name;        /* "gpt2" */
    const char *norm;        /* "LayerNorm" */
    unsigned norm_vectors;   /* per norm and channel: LayerNorm weight + bias = 2, RMSNorm weight = 1 */
    bool linear_bias;        /* every linear layer carries a bias vector */
    unsigned mlp_matrices;   /* GELU MLP: up, down = 2; SwiGLU: gate, up, down = 3 */
    const char *mlp;         /* "GELU" */
    bool learned_positions;  /* a T x h position table (GPT-2); rotary positions have no parameters */
    bool tied_head;          /* default: the head reuses the token embedding */
    bool dropout;            /* default: trained with dropout */
    uint64_t vocab;          /* default vocabulary of a custom model */
    uint64_t context;        /* default context of a custom model */
} plan_arch_info;

const plan_arch_info *plan_arch_get(plan_arch a);

typedef struct {
    char name[40];     /* preset name, or "custom" */
    plan_arch arch;
    uint64_t layers;   /* L */
    uint64_t hidden;   /* h: model width; a multiple of heads */
    uint64_t heads;    /* a: query heads */
    uint64_t kv_heads; /* g: key/value heads; == heads unless grouped-query attention; divides heads */
    uint64_t ffn;      /* F: MLP inner size (4h for GPT-2; the SwiGLU size for LLaMA) */
    uint64_t vocab;    /* V */
    uint64_t context;  /* T: the longest sequence the model is built for (GPT-2: rows of the position table) */
    bool tied_head;    /* the output head reuses the token embedding (no extra V x h matrix) */
} plan_model;

/* The built-in models. plan_preset_find copies one into *out; false when the name is unknown. */
int plan_preset_count(void);
const plan_model *plan_preset_at(int index);
bool plan_preset_find(const char *name, plan_model *out);
const char *plan_preset_about(int index); /* "GPT-2 small (Radford et al. 2019)" */

/* The default MLP size of an architecture: 4h for GPT-2; for LLaMA 2/3 of 4h rounded up to a multiple of
 * 256 (LLaMA's rule: 11008 for h = 4096, 5632 for h = 2048). */
uint64_t plan_default_ffn(plan_arch arch, uint64_t hidden);

/* ------------------------------------------------------------------ the run */

/* Number formats a tensor can be kept in. */
typedef enum { PLAN_FP32, PLAN_FP16, PLAN_BF16, PLAN_NDTYPES } plan_dtype;

/* A precision recipe says which format each kind of tensor is kept in. */
typedef enum {
    PLAN_RECIPE_FP32,       /* everything fp32 */
    PLAN_RECIPE_FP16_MIXED, /* fp16 weights, grads, activations; fp32 master weights and optimizer states */
    PLAN_RECIPE_BF16_MIXED, /* the same with bf16 (no loss scaling needed) */
    PLAN_RECIPE_BF16_PURE,  /* bf16 everywhere, no master copy (needs stochastic rounding or Kahan, lab 09) */
    PLAN_NRECIPES
} plan_recipe;

typedef struct {
    const char *name;    /* "bf16-mixed" */
    const char *summary; /* one line for --help */
    plan_dtype weights;  /* the working weights the forward pass reads (MEM_PARAM) */
    plan_dtype grads;    /* gradients of the working weights (MEM_GRAD) */
    bool master;         /* an fp32 master copy of the weights (MEM_MASTER) */
    plan_dtype states;   /* each optimizer state tensor (MEM_OPTIM) */
    plan_dtype acts;     /* activations kept for backward (MEM_ACT); dropout masks are 1 byte regardless */
} plan_recipe_info;

typedef enum {
    PLAN_OPT_SGD,      /* no state */
    PLAN_OPT_MOMENTUM, /* SGD with momentum: one buffer */
    PLAN_OPT_ADAM,     /* m and v */
    PLAN_OPT_ADAMW,    /* m and v (decoupled weight decay needs no state) */
    PLAN_OPT_LAMB,     /* m and v (the trust ratio is computed per step) */
    PLAN_NOPTIMIZERS
} plan_optimizer;

typedef struct {
    const char *name;    /* "adamw" */
    const char *summary;
    unsigned states;     /* state tensors per parameter, each of the parameter's shape */
} plan_optimizer_info;

typedef enum {
    PLAN_RECOMPUTE_NONE,      /* keep every activation backward needs */
    PLAN_RECOMPUTE_SELECTIVE, /* drop the attention score tensors (the a*s*s*b terms), recompute them */
    PLAN_RECOMPUTE_FULL,      /* keep only each block's input; rerun the block's forward during backward */
    PLAN_NRECOMPUTES
} plan_recompute;

typedef struct {
    plan_recipe recipe;
    plan_optimizer optimizer;
    int zero_stage;           /* 0 (plain data parallel), 1 (optimizer+master), 2 (+grads), 3 (+weights) */
    uint64_t world;           /* N: data-parallel ranks the sharded states are split over */
    uint64_t batch;           /* b: micro-batch per rank (sequences) */
    uint64_t seq;             /* s: tokens per sequence */
    plan_recompute recompute;
    bool dropout;             /* dropout layers present: their 1-byte masks are kept */
    bool offload;             /* ZeRO-Offload: the rank's partition of the fp32 master weights and optimizer
                               * states, with an fp32 buffer for its gradients, in host memory (MEM_HOST) */
} plan_run;

/* bf16-mixed, AdamW, ZeRO-0, N = 1, b = 1, s = T, no recompute, dropout on for GPT-2 (it was trained
 * with dropout 0.1) and off for LLaMA (trained without). */
plan_run plan_run_defaults(const plan_model *m);

/* Name tables. The *_from_name functions return -1 for an unknown name. */
unsigned plan_dtype_bytes(plan_dtype t);
const char *plan_dtype_name(plan_dtype t);
const plan_recipe_info *plan_recipe_get(plan_recipe r);
int plan_recipe_from_name(const char *name);
const plan_optimizer_info *plan_optimizer_get(plan_optimizer o);
int plan_optimizer_from_name(const char *name);
const char *plan_recompute_name(plan_recompute r);
int plan_recompute_from_name(const char *name);
int plan_arch_from_name(const char *name);

/* Why a model or a run cannot be planned, in the three parts of the project's error messages. */
typedef struct {
    char expected[200];
    char found[200];
    char hint[240];
} plan_problem;

/* True when the model / run can be planned: every size at least 1, h a multiple of a, a a multiple of g,
 * GPT-2's s <= T (its learned positions stop at T), ZeRO stage 0..3, and no total beyond 2^62 bytes.
 * Otherwise false with *why filled. m may be NULL in plan_run_check (a plan from a bare parameter count). */
bool plan_model_check(const plan_model *m, plan_problem *why);
bool plan_run_check(const plan_model *m, const plan_run *run, plan_problem *why);

/* ------------------------------------------------------------------ the plan (lab 01) */

/* Parameters of one transformer block (attention, MLP, two norms) and of the whole model (embeddings,
 * L blocks, final norm, output head). */
uint64_t plan_block_params(const plan_model *m);
uint64_t plan_model_params(const plan_model *m);

/* Bytes each parameter costs under each model-state tag, before any sharding:
 * per_param[MEM_PARAM], [MEM_GRAD], [MEM_MASTER], [MEM_OPTIM]; the other tags are set to 0.
 * The ZeRO paper's mixed-precision Adam: 2 + 2 + K with K = 4 (master) + 8 (m, v) = 12. */
void plan_bytes_per_param(plan_recipe recipe, plan_optimizer optimizer, uint64_t per_param[MEM_NTAGS]);

/* Model-state bytes one rank holds for `params` parameters under run->zero_stage over run->world ranks,
 * into bytes[MEM_PARAM..MEM_OPTIM] (other tags set to 0). A sharded state is one flat buffer padded to a
 * multiple of N, so each rank holds ceil(Psi / N) of its elements. */
void plan_model_state_bytes(uint64_t params, const plan_run *run, uint64_t bytes[MEM_NTAGS]);

/* Activation bytes one block keeps for backward with no recompute (keep_scores = true) or without the
 * attention score tensors (keep_scores = false: selective recompute). */
uint64_t plan_block_activation_bytes(const plan_model *m, const plan_run *run, bool keep_scores);

typedef struct {
    uint64_t block_full;  /* one block, nothing recomputed */
    uint64_t block_kept;  /* one block under the run's recompute policy */
    uint64_t working_set; /* full recompute: one block's full set, rebuilt during its backward; else 0 */
    uint64_t outside;     /* outside the blocks: embedding dropout mask, final norm input, head input,
                           * and the fp32 logits the softmax cross-entropy keeps (4sbV) */
    uint64_t total;       /* L * block_kept + working_set + outside */
} plan_activations;

/* Activation bytes of the whole model on one rank under the run's recompute policy. */
void plan_activation_bytes(const plan_model *m, const plan_run *run, plan_activations *out);

/* ------------------------------------------------------------------ the compute budget (lab 01) */

/* How long training takes, from the FLOPs it needs (Kaplan et al. 2020; Hoffmann et al. 2022, "Chinchilla"):
 *
 *     dense      = 6 N D          every parameter, per token: 2 FLOPs (multiply, add) forward, 4 backward
 *     attention  = 12 L s h D     Q K^T and P V: 2 * 2 * s * h per token and layer forward, x3 with backward
 *     seconds    = (dense + attention) / (G * peak * MFU)
 *
 * N = plan_model_params (every parameter, embeddings included: Chinchilla's convention; lab 10 counts only the
 * matrices a token is multiplied by), D = training tokens, s = sequence length, G GPUs of `peak` dense FLOP/s
 * each, at a model FLOPs utilisation MFU (0.3 to 0.5 for well-tuned large runs). Without a token count, D is
 * Chinchilla's compute-optimal 20 tokens per parameter. */
typedef struct {
    double tokens;     /* D; 0: Chinchilla-optimal, 20 per parameter */
    double gpus;       /* G >= 1 */
    double peak_flops; /* dense FLOP/s of one GPU in the training format (A100 bf16: 312e12) */
    double mfu;        /* 0 < MFU <= 1 */
} plan_budget_in;

typedef struct {
    uint64_t params;        /* N */
    double tokens;          /* D as used: the given count, or 20 N */
    double dense_flops;     /* 6 N D */
    double attention_flops; /* 12 L s h D */
    double total_flops;     /* their sum */
    double seconds;         /* total / (G * peak * MFU) */
    double gpu_hours;       /* seconds * G / 3600 */
    double days;            /* seconds / 86400 */
} plan_budget;

enum { PLAN_CHINCHILLA_TOKENS_PER_PARAM = 20 };

/* The budget of training model m on sequences of `seq` tokens (>= 1); in's fields as above. */
void plan_training_budget(const plan_model *m, uint64_t seq, const plan_budget_in *in, plan_budget *out);

/* ------------------------------------------------------------------ everything at once */

typedef struct {
    uint64_t params;              /* Psi */
    uint64_t shard_elements;      /* ceil(Psi / N): elements of a sharded state on one rank */
    uint64_t per_param[MEM_NTAGS];/* bytes per parameter by tag, before sharding */
    uint64_t bytes[MEM_NTAGS];    /* per rank by allocator tag: param, grad, master, optim, act (comm, other: 0);
                                   * host: what offload keeps in host memory (outside the totals below) */
    uint64_t model_state_bytes;   /* param + grad + master + optim, on the device */
    uint64_t total_bytes;         /* model states + activations, on the device */
    bool has_activations;         /* false for a plan from a bare parameter count */
    plan_activations act;
    uint64_t zero3_gather_bytes;  /* ZeRO-3 only: one block's full working weights, gathered while it runs
                                   * (a transient, not in the totals) */
} plan_result;

/* ZeRO-Offload (run->offload) moves the rank's fp32 master weights and optimizer states from the device's tags
 * (bytes[MEM_MASTER], bytes[MEM_OPTIM] become 0) to bytes[MEM_HOST], which also holds an fp32 gradient buffer of
 * the same partition; a recipe without a master copy (fp32) gets one on the host, since the host's update
 * needs weights of its own to write. The partition is the optimizer's: ceil(Psi/N) elements from stage 1 on,
 * all Psi at stage 0 (one rank, or a plan of what one rank would hold). So for Adam: 4 + 4 + 8 = 16 bytes per
 * partition element on the host, and the device keeps only the working weights and their gradients. */

/* Validates (plan_model_problem / plan_run_problem) and stops with a message and exit 2 on a problem. */
void plan_compute(const plan_model *m, const plan_run *run, plan_result *out);
/* Model states only, for a bare parameter count: the ZeRO paper's table is plan_compute_params(7.5e9, ...). */
void plan_compute_params(uint64_t params, const plan_run *run, plan_result *out);

#endif
