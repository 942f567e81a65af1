/* policy.c: the tables of recipes and op classes, the autocast rule, and per-op overrides. */
#include "amp/policy.h"

#include "base/error.h"
#include "base/lab.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ recipes */

static const amp_recipe_info RECIPES[AMP_NRECIPES] = {
    [AMP_RECIPE_FP32] = {"fp32", "fp32 everywhere: the baseline every other recipe is compared with", NULL, &FP_FP32,
                         &FP_FP32, false, false, false, false, AMP_SCALER_NONE},
    [AMP_RECIPE_TF32] = {"tf32", "fp32 storage; matmul inputs rounded to tf32 (10 mantissa bits), fp32 accumulation",
                         &FP_TF32, &FP_FP32, &FP_FP32, false, false, false, false, AMP_SCALER_NONE},
    [AMP_RECIPE_FP16] = {"fp16", "fp16 AMP: fp32 weights, autocast to fp16, dynamic loss scaling", &FP_FP16, &FP_FP32,
                         &FP_FP32, false, true, false, false, AMP_SCALER_PYTORCH},
    [AMP_RECIPE_FP16_O2] = {"fp16-o2", "fp16 weights and gradients, fp32 master weights, dynamic loss scaling",
                            &FP_FP16, &FP_FP16, &FP_FP16, true, false, false, false, AMP_SCALER_PYTORCH},
    [AMP_RECIPE_BF16] = {"bf16", "bf16 AMP: fp32 weights, autocast to bf16, no loss scaling", &FP_BF16, &FP_FP32,
                         &FP_FP32, false, true, false, false, AMP_SCALER_NONE},
    [AMP_RECIPE_BF16_PURE] = {"bf16-pure", "bf16 weights and gradients, no master copy, stochastic rounding of updates",
                              &FP_BF16, &FP_BF16, &FP_BF16, false, false, false, true, AMP_SCALER_NONE},
    [AMP_RECIPE_FP8] = {"fp8", "bf16 AMP with fp8 matmuls (e4m3 forward, e5m2 gradients), per-tensor delayed scaling",
                        &FP_BF16, &FP_FP32, &FP_FP32, false, true, true, false, AMP_SCALER_NONE},
};

const char AMP_RECIPE_NAMES[] = "fp32, tf32, fp16, fp16-o2, bf16, bf16-pure, fp8";

const amp_recipe_info *amp_recipe_get(amp_recipe r) {
    MP_ASSERT(r >= 0 && r < AMP_NRECIPES, "recipe %d", (int)r);
    return &RECIPES[r];
}

int amp_recipe_from_name(const char *name) {
    for (int r = 0; r < AMP_NRECIPES; r++)
        if (strcmp(name, RECIPES[r].name) == 0) return r;
    return -1;
}

/* ------------------------------------------------------------------ op classes */

static const amp_op_info OPS[AMP_NOPS] = {
    [AMP_OP_MATMUL] = {"matmul", "matmul_forward/backward: qkv, attproj, fc, fcproj, LM head", true, false, false, ""},
    [AMP_OP_ATTN_SCORES] = {"attn_scores", "attention_forward: Q K^T / sqrt(HS)", true, false, false, ""},
    [AMP_OP_ATTN_PRODUCT] = {"attn_product", "attention_forward: P V", true, false, false, ""},
    [AMP_OP_SOFTMAX] = {"softmax", "attention_forward: causal softmax of the scores", false, true, false, ""},
    [AMP_OP_NORM] = {"norm", "layernorm/rmsnorm_forward: (x - mean) * rstd * w + b", false, false, true, ""},
    [AMP_OP_NORM_STATS] = {"norm_stats", "layernorm/rmsnorm_forward: mean, variance, rstd", false, true, false, ""},
    [AMP_OP_LOSS] = {"loss", "crossentropy_forward/backward: log-sum-exp over V", false, true, false, ""},
    [AMP_OP_REDUCTION] = {"reduction", "clip_global_norm, loss means: sums of many values", false, true, false, ""},
    [AMP_OP_ACTIVATION] = {"activation", "gelu/swiglu_forward", false, false, false,
                           "its input, the fc matmul's output (low)"},
    [AMP_OP_RESIDUAL] = {"residual", "residual_forward: x + f(x)", false, false, false,
                         "the wider input: the residual stream (fp32 with fp32 weights)"},
    [AMP_OP_EMBEDDING] = {"embedding", "encoder_forward: wte[token] + wpe[position]", false, false, false,
                          "its weights (fp32 with fp32 weights)"},
};

const amp_op_info *amp_op_get(amp_op op) {
    MP_ASSERT(op >= 0 && op < AMP_NOPS, "op class %d", (int)op);
    return &OPS[op];
}

int amp_op_from_name(const char *name) {
    for (int o = 0; o < AMP_NOPS; o++)
        if (strcmp(name, OPS[o].name) == 0) return o;
    return -1;
}

static const char *const PREC_NAMES[AMP_NPRECS] = {"fp32", "low", "follow", "fp8"};

const char *amp_precision_name(amp_precision p) { return p >= 0 && p < AMP_NPRECS ? PREC_NAMES[p] : "?"; }

int amp_precision_from_name(const char *name) {
    for (int p = 0; p < AMP_NPRECS; p++)
        if (strcmp(name, PREC_NAMES[p]) == 0) return p;
    return -1;
}

/* ------------------------------------------------------------------ the rule */

amp_precision amp_policy_default(amp_recipe recipe, amp_op op) {
    const amp_recipe_info *r = amp_recipe_get(recipe);
    const amp_op_info *o = amp_op_get(op);
    /* LAB 05 BEGIN autocast policy: which op classes run in low precision, which stay fp32 */
    if (!r->low) return AMP_PREC_FP32; /* the fp32 recipe has no low format */
    /* Matrix products hold nearly all the FLOPs and tensor cores run them 2-16x faster in low precision,
     * with fp32 accumulation. In the fp8 recipe only the linear layers go to fp8 (as Transformer Engine's
     * te.Linear); attention's products stay in bf16. */
    if (o->gemm) return r->fp8_matmul && op == AMP_OP_MATMUL ? AMP_PREC_FP8 : AMP_PREC_LOW;
    /* exp and long sums: fp16 overflows at 65504 (exp(11.1)), and adding 10^4 values in a 10-bit mantissa
     * loses the small ones. These stay fp32 in every recipe. */
    if (o->statistic) return AMP_PREC_FP32;
    /* Autocast (fp32 weights): ops on neither list run in their inputs' format; layer_norm is on PyTorch's
     * fp32 list as a whole. */
    if (r->autocast) return o->norm ? AMP_PREC_FP32 : AMP_PREC_FOLLOW;
    /* No autocast: with low weights (fp16-o2, bf16-pure) the whole model runs low; with fp32 weights (tf32)
     * only the matmuls were ever low. */
    return r->weights == r->low ? AMP_PREC_LOW : AMP_PREC_FP32;
    /* LAB 05 END */
}

/* ------------------------------------------------------------------ policies */

void amp_policy_init(amp_policy *p, amp_recipe recipe) {
    memset(p, 0, sizeof *p);
    p->recipe = recipe;
    for (int o = 0; o < AMP_NOPS; o++) p->prec[o] = amp_policy_default(recipe, (amp_op)o);
}

amp_precision amp_policy_lookup(const amp_policy *p, amp_op op) {
    MP_ASSERT(op >= 0 && op < AMP_NOPS, "op class %d", (int)op);
    return p->prec[op];
}

const fp_format *amp_policy_format(const amp_policy *p, amp_op op, bool backward) {
    switch (amp_policy_lookup(p, op)) {
    case AMP_PREC_FP32: return &FP_FP32;
    case AMP_PREC_LOW: return RECIPES[p->recipe].low ? RECIPES[p->recipe].low : &FP_FP32;
    case AMP_PREC_FP8: return backward ? &FP_E5M2 : &FP_E4M3;
    default: return NULL;
    }
}

static const char OP_NAMES_HELP[] =
    "matmul, attn_scores, attn_product, softmax, norm, norm_stats, loss, reduction, activation, residual, embedding";

bool amp_policy_override(amp_policy *p, const char *assignment, data_err *err) {
    const char *eq = strchr(assignment, '=');
    char op_name[64];
    if (!eq || eq == assignment || (size_t)(eq - assignment) >= sizeof op_name)
        return DATA_ERR(err, "OP=PRECISION, such as softmax=fp32", NULL, "'%s'", assignment);
    snprintf(op_name, sizeof op_name, "%.*s", (int)(eq - assignment), assignment);
    const char *prec_name = eq + 1;
    int op = amp_op_from_name(op_name);
    if (op < 0) return DATA_ERR(err, "an op class", OP_NAMES_HELP, "op '%s' in '%s'", op_name, assignment);
    int prec = amp_precision_from_name(prec_name);
    if (prec < 0)
        return DATA_ERR(err, "a precision: fp32, low, follow or fp8", NULL, "precision '%s' in '%s'", prec_name,
                        assignment);
    const amp_recipe_info *r = &RECIPES[p->recipe];
    if (prec == AMP_PREC_FP8 && op != AMP_OP_MATMUL)
        return DATA_ERR(err, "fp8 only on matmul (the linear layers' GEMMs)",
                        "fp8 needs a per-tensor scale kept from step to step (amp/fp8.h); Transformer Engine keeps one "
                        "for each linear layer's inputs, weights and gradients, and nothing else runs in fp8",
                        "op %s=fp8 under recipe %s", op_name, r->name);
    if (prec == AMP_PREC_FP8 && !r->fp8_matmul)
        return DATA_ERR(err, "fp8 only under the fp8 recipe", "use --recipe fp8: it carries the delayed-scaling state",
                        "op %s=fp8 under recipe %s", op_name, r->name);
    if (prec == AMP_PREC_LOW && !r->low)
        return DATA_ERR(err, "a recipe with a low-precision format for 'low'",
                        "choose the format through the recipe: --recipe fp16, bf16, ...",
                        "op %s=low under recipe %s, which has none", op_name, r->name);
    p->prec[op] = (amp_precision)prec;
    p->overridden[op] = prec != (int)amp_policy_default(p->recipe, (amp_op)op);
    return true;
}
