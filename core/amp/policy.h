/* policy.h: precision recipes and the autocast policy: which class of op runs in which precision. */
#ifndef MIXPAR_AMP_POLICY_H
#define MIXPAR_AMP_POLICY_H

/* A precision recipe (精度方案) says where the weights live, what the optimizer updates, and how each
 * operation of the model computes. The last part is the autocast policy (自动混合精度策略): a table from
 * op classes to a precision. `mixpar amp policy` prints it.
 *
 *   recipe     weights  grads  optimizer updates     low format  loss scaling        also known as
 *   fp32       fp32     fp32   the weights           -           none                the baseline
 *   tf32       fp32     fp32   the weights           tf32        none                allow_tf32: matmul inputs
 *                                                                                    rounded to 10 mantissa bits
 *   fp16       fp32     fp32   the weights           fp16        dynamic (pytorch)   torch.autocast(float16) +
 *                                                                                    GradScaler; apex O1; Keras
 *                                                                                    mixed_float16; DeepSpeed fp16
 *   fp16-o2    fp16     fp16   an fp32 master copy   fp16        dynamic (pytorch)   apex O2, Megatron fp16
 *   bf16       fp32     fp32   the weights           bf16        none                torch.autocast(bfloat16);
 *                                                                                    Keras mixed_bfloat16;
 *                                                                                    DeepSpeed bf16
 *   bf16-pure  bf16     bf16   the bf16 weights,     bf16        none                Keras "bfloat16"; llm.c
 *                              rounded stochastically                                without master weights
 *   fp8        fp32     fp32   the weights           bf16 (fp8   none (per-tensor    Transformer Engine's
 *                                                    matmuls)    delayed scaling)    DelayedScaling, HYBRID
 *
 * fp8: matmul inputs are e4m3 in the forward pass and e5m2 (more range, less precision) for the
 * gradients in backward, each tensor with its own scale (amp/fp8.h); everything else runs as bf16 AMP.
 *
 * DeepSpeed's "fp16" and "bf16" sections are mapped to the fp16 and bf16 recipes (amp/setup.h), so that
 * a run spelled the DeepSpeed, Keras or PyTorch way is the same run (lab 08). DeepSpeed itself goes one
 * step further in storage: its engine calls module.half() (or bfloat16()) and keeps fp32 master weights
 * in the optimizer, which is the fp16-o2 layout; the matmuls compute the same, the norms and softmax do
 * not (they run in fp16 unless the model's code casts them up).
 *
 * The op classes, and what each precision means:
 *   low     inputs cast to the recipe's low format; products accumulate in fp32 as tensor cores do;
 *           the output is stored in the low format
 *   fp32    inputs cast up to fp32 and the op runs in fp32 (autocast's "fp32 list")
 *   follow  no cast: the op runs in the format of its inputs (the widest, if they differ): what autocast
 *           does for ops on neither list, and the residual add of fp32 + fp16 is then fp32
 *   fp8     e4m3 forward, e5m2 backward, per-tensor scaled (fp8 recipe, matmul only)
 *
 * Why the table looks as it does (this is the rule the lab 05 region writes):
 *   - matrix products (linear layers, attention's QK^T and PV) are where the FLOPs are and where tensor
 *     cores give 2-16x: they run low;
 *   - ops that sum or exponentiate many values (softmax, norm statistics, the loss, reductions such as
 *     the gradient norm) need fp32's range and precision: exp overflows fp16 past 11, a sum of 10^4 fp16
 *     values loses the small ones. They stay fp32 in every recipe;
 *   - under autocast (fp32 weights) everything else follows its inputs, except the norms, which
 *     autocast runs in fp32 as a whole (layer_norm is on PyTorch's fp32 list);
 *   - when the weights themselves are low (fp16-o2, bf16-pure) the remaining ops simply run low, and
 *     only the statistics inside the norms stay fp32 (fused norm kernels accumulate mean and variance in
 *     fp32 and write a low-precision output).
 */

#include <stdbool.h>

#include "amp/scaler.h"
#include "data/data_err.h"
#include "fp/format.h"

typedef enum {
    AMP_RECIPE_FP32,
    AMP_RECIPE_TF32,
    AMP_RECIPE_FP16,
    AMP_RECIPE_FP16_O2,
    AMP_RECIPE_BF16,
    AMP_RECIPE_BF16_PURE,
    AMP_RECIPE_FP8,
    AMP_NRECIPES
} amp_recipe;

typedef struct {
    const char *name;          /* "fp16-o2": what --recipe takes */
    const char *title;         /* one line */
    const fp_format *low;      /* the low-precision compute format; NULL for fp32 */
    const fp_format *weights;  /* storage of the working weights the forward pass reads */
    const fp_format *grads;    /* storage of their gradients */
    bool master_fp32;          /* the optimizer updates a separate fp32 master copy */
    bool autocast;             /* fp32 weights, ops cast per the policy (AMP); false: the model is stored low */
    bool fp8_matmul;           /* matmuls in fp8 with per-tensor delayed scaling */
    bool stochastic_rounding;  /* the update is rounded stochastically into low-precision weights */
    amp_scaler_kind scaler;    /* the loss scaler the recipe runs with by default */
} amp_recipe_info;

const amp_recipe_info *amp_recipe_get(amp_recipe r);
int amp_recipe_from_name(const char *name); /* -1 when unknown */
extern const char AMP_RECIPE_NAMES[];       /* "fp32, tf32, fp16, fp16-o2, bf16, bf16-pure, fp8" */

typedef enum {
    AMP_OP_MATMUL,        /* linear layers: qkv, attention output, MLP up/down, the LM head */
    AMP_OP_ATTN_SCORES,   /* attention scores Q K^T / sqrt(HS) */
    AMP_OP_ATTN_PRODUCT,  /* attention output P V */
    AMP_OP_SOFTMAX,       /* attention softmax (max, exp, sum, divide) */
    AMP_OP_NORM,          /* layernorm / rmsnorm: normalise, then gain and bias */
    AMP_OP_NORM_STATS,    /* their statistics: mean, variance, 1/sqrt(var + eps) */
    AMP_OP_LOSS,          /* softmax cross-entropy over the vocabulary */
    AMP_OP_REDUCTION,     /* sums over many values: gradient norms, means, loss averages */
    AMP_OP_ACTIVATION,    /* gelu / swiglu */
    AMP_OP_RESIDUAL,      /* residual add x + f(x) */
    AMP_OP_EMBEDDING,     /* token and position embedding lookup */
    AMP_NOPS
} amp_op;

typedef struct {
    const char *name;      /* "attn_scores": what --op takes */
    const char *kernels;   /* the mixpar kernels in the class */
    bool gemm;             /* a matrix product: low precision pays (tensor cores) */
    bool statistic;        /* sums or exponentiates many values: needs fp32's range and precision */
    bool norm;             /* the normalisation op itself (autocast's fp32 list) */
    const char *follows;   /* what "follow" resolves to for this op in the GPT-2 graph */
} amp_op_info;

const amp_op_info *amp_op_get(amp_op op);
int amp_op_from_name(const char *name); /* -1 when unknown */

typedef enum { AMP_PREC_FP32, AMP_PREC_LOW, AMP_PREC_FOLLOW, AMP_PREC_FP8, AMP_NPRECS } amp_precision;
const char *amp_precision_name(amp_precision p); /* "fp32", "low", "follow", "fp8" */
int amp_precision_from_name(const char *name);   /* -1 when unknown */

/* The default precision of op class `op` under `recipe`: the rule above (lab 05). */
amp_precision amp_policy_default(amp_recipe recipe, amp_op op);

/* A policy: a recipe's table, possibly with some classes overridden. */
typedef struct {
    amp_recipe recipe;
    amp_precision prec[AMP_NOPS];
    bool overridden[AMP_NOPS];
} amp_policy;

void amp_policy_init(amp_policy *p, amp_recipe recipe);
/* What op class `op` runs in. */
amp_precision amp_policy_lookup(const amp_policy *p, amp_op op);
/* The format that precision means for this op: fp32, the recipe's low format, e4m3 (forward) or e5m2
 * (backward) for fp8; NULL for "follow" (the inputs decide). */
const fp_format *amp_policy_format(const amp_policy *p, amp_op op, bool backward);
/* Overrides one class: "softmax=low", "matmul=fp32". Rejected, with a message naming the op and the
 * recipe: an unknown op or precision; fp8 on anything but matmul or outside the fp8 recipe (Transformer
 * Engine runs only the linear layers' GEMMs in fp8; the others have no delayed-scaling state); low in
 * the fp32 recipe (it has no low format). */
bool amp_policy_override(amp_policy *p, const char *assignment, data_err *err);

#endif
