/* tables.c: the planner's data: model presets, architectures, number formats, precision recipes, optimizers. */
#include "plan/plan.h"

#include <string.h>

#include "base/error.h"

/* ------------------------------------------------------------------ architectures */

static const plan_arch_info arch_table[PLAN_NARCHS] = {
    [PLAN_ARCH_GPT2] = {.name = "gpt2", .norm = "LayerNorm", .norm_vectors = 2, .linear_bias = true,
                        .mlp_matrices = 2, .mlp = "GELU", .learned_positions = true, .tied_head = true,
                        .dropout = true, .vocab = 50257, .context = 1024},
    [PLAN_ARCH_LLAMA] = {.name = "llama", .norm = "RMSNorm", .norm_vectors = 1, .linear_bias = false,
                         .mlp_matrices = 3, .mlp = "SwiGLU", .learned_positions = false, .tied_head = false,
                         .dropout = false, .vocab = 32000, .context = 2048},
};

const plan_arch_info *plan_arch_get(plan_arch a) {
    MP_ASSERT((unsigned)a < PLAN_NARCHS, "architecture %d is not in the table", (int)a);
    return &arch_table[a];
}

int plan_arch_from_name(const char *name) {
    for (int i = 0; i < PLAN_NARCHS; i++)
        if (strcmp(name, arch_table[i].name) == 0) return i;
    return -1;
}

uint64_t plan_default_ffn(plan_arch arch, uint64_t hidden) {
    if (arch == PLAN_ARCH_GPT2) return 4 * hidden;
    /* SwiGLU has three matrices instead of two, so LLaMA shrinks F to 2/3 of 4h to keep the MLP's
     * parameter count, then rounds up to a multiple of 256 for fast matrix shapes. */
    uint64_t two_thirds = (8 * hidden + 2) / 3;
    return (two_thirds + 255) / 256 * 256;
}

/* ------------------------------------------------------------------ presets */

static const struct {
    plan_model model;
    const char *about;
} presets[] = {
    {{"gpt2-124m", PLAN_ARCH_GPT2, 12, 768, 12, 12, 3072, 50257, 1024, true},
     "GPT-2 small (Radford et al. 2019)"},
    {{"gpt2-350m", PLAN_ARCH_GPT2, 24, 1024, 16, 16, 4096, 50257, 1024, true}, "GPT-2 medium"},
    {{"gpt2-774m", PLAN_ARCH_GPT2, 36, 1280, 20, 20, 5120, 50257, 1024, true}, "GPT-2 large"},
    {{"gpt2-1.5b", PLAN_ARCH_GPT2, 48, 1600, 25, 25, 6400, 50257, 1024, true}, "GPT-2 XL"},
    {{"llama-1b", PLAN_ARCH_LLAMA, 22, 2048, 32, 4, 5632, 32000, 2048, false},
     "LLaMA-style 1.1B, grouped-query attention (TinyLlama's shape); the course's capstone model"},
    {{"llama-7b", PLAN_ARCH_LLAMA, 32, 4096, 32, 32, 11008, 32000, 2048, false},
     "LLaMA-7B (Touvron et al. 2023)"},
    {{"gpt3-175b", PLAN_ARCH_GPT2, 96, 12288, 96, 96, 49152, 50257, 2048, true},
     "GPT-3 175B (Brown et al. 2020)"},
};
enum { NPRESETS = sizeof presets / sizeof presets[0] };

int plan_preset_count(void) { return NPRESETS; }

const plan_model *plan_preset_at(int index) {
    MP_ASSERT(index >= 0 && index < NPRESETS, "preset index %d of %d", index, NPRESETS);
    return &presets[index].model;
}

const char *plan_preset_about(int index) {
    MP_ASSERT(index >= 0 && index < NPRESETS, "preset index %d of %d", index, NPRESETS);
    return presets[index].about;
}

bool plan_preset_find(const char *name, plan_model *out) {
    for (int i = 0; i < NPRESETS; i++)
        if (strcmp(name, presets[i].model.name) == 0) {
            *out = presets[i].model;
            return true;
        }
    return false;
}

/* ------------------------------------------------------------------ formats, recipes, optimizers */

static const struct {
    const char *name;
    unsigned bytes;
} dtype_table[PLAN_NDTYPES] = {
    [PLAN_FP32] = {"fp32", 4},
    [PLAN_FP16] = {"fp16", 2},
    [PLAN_BF16] = {"bf16", 2},
};

unsigned plan_dtype_bytes(plan_dtype t) {
    MP_ASSERT((unsigned)t < PLAN_NDTYPES, "number format %d is not in the table", (int)t);
    return dtype_table[t].bytes;
}

const char *plan_dtype_name(plan_dtype t) {
    MP_ASSERT((unsigned)t < PLAN_NDTYPES, "number format %d is not in the table", (int)t);
    return dtype_table[t].name;
}

static const plan_recipe_info recipe_table[PLAN_NRECIPES] = {
    [PLAN_RECIPE_FP32] = {"fp32", "fp32 weights, gradients, optimizer states and activations; no master copy",
                          PLAN_FP32, PLAN_FP32, false, PLAN_FP32, PLAN_FP32},
    [PLAN_RECIPE_FP16_MIXED] = {"fp16-mixed",
                                "fp16 weights, gradients and activations; fp32 master weights and optimizer "
                                "states (the ZeRO paper's 2+2+K; needs loss scaling)",
                                PLAN_FP16, PLAN_FP16, true, PLAN_FP32, PLAN_FP16},
    [PLAN_RECIPE_BF16_MIXED] = {"bf16-mixed",
                                "bf16 weights, gradients and activations; fp32 master weights and optimizer "
                                "states (same bytes as fp16-mixed, no loss scaling)",
                                PLAN_BF16, PLAN_BF16, true, PLAN_FP32, PLAN_BF16},
    [PLAN_RECIPE_BF16_PURE] = {"bf16-pure",
                               "bf16 everywhere, optimizer states too, no master copy (small updates need "
                               "stochastic rounding or Kahan summation)",
                               PLAN_BF16, PLAN_BF16, false, PLAN_BF16, PLAN_BF16},
};

const plan_recipe_info *plan_recipe_get(plan_recipe r) {
    MP_ASSERT((unsigned)r < PLAN_NRECIPES, "recipe %d is not in the table", (int)r);
    return &recipe_table[r];
}

int plan_recipe_from_name(const char *name) {
    for (int i = 0; i < PLAN_NRECIPES; i++)
        if (strcmp(name, recipe_table[i].name) == 0) return i;
    return -1;
}

static const plan_optimizer_info optimizer_table[PLAN_NOPTIMIZERS] = {
    [PLAN_OPT_SGD] = {"sgd", "plain SGD: no state", 0},
    [PLAN_OPT_MOMENTUM] = {"momentum", "SGD with momentum: one momentum buffer", 1},
    [PLAN_OPT_ADAM] = {"adam", "Adam: first and second moments m, v", 2},
    [PLAN_OPT_ADAMW] = {"adamw", "AdamW: m, v (decoupled weight decay adds no state)", 2},
    [PLAN_OPT_LAMB] = {"lamb", "LAMB: m, v (the layer-wise trust ratio is recomputed each step)", 2},
};

const plan_optimizer_info *plan_optimizer_get(plan_optimizer o) {
    MP_ASSERT((unsigned)o < PLAN_NOPTIMIZERS, "optimizer %d is not in the table", (int)o);
    return &optimizer_table[o];
}

int plan_optimizer_from_name(const char *name) {
    for (int i = 0; i < PLAN_NOPTIMIZERS; i++)
        if (strcmp(name, optimizer_table[i].name) == 0) return i;
    return -1;
}

static const char *const recompute_names[PLAN_NRECOMPUTES] = {
    [PLAN_RECOMPUTE_NONE] = "none",
    [PLAN_RECOMPUTE_SELECTIVE] = "selective",
    [PLAN_RECOMPUTE_FULL] = "full",
};

const char *plan_recompute_name(plan_recompute r) {
    MP_ASSERT((unsigned)r < PLAN_NRECOMPUTES, "recompute policy %d is not in the table", (int)r);
    return recompute_names[r];
}

int plan_recompute_from_name(const char *name) {
    for (int i = 0; i < PLAN_NRECOMPUTES; i++)
        if (strcmp(name, recompute_names[i]) == 0) return i;
    return -1;
}

plan_run plan_run_defaults(const plan_model *m) {
    return (plan_run){
        .recipe = PLAN_RECIPE_BF16_MIXED,
        .optimizer = PLAN_OPT_ADAMW,
        .zero_stage = 0,
        .world = 1,
        .batch = 1,
        .seq = m ? m->context : 1024,
        .recompute = PLAN_RECOMPUTE_NONE,
        .dropout = m ? plan_arch_get(m->arch)->dropout : false,
    };
}
