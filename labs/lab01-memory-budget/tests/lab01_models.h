/* lab01_models.h: the models and runs the lab 01 tests plan, written out in full so each test shows its inputs. */
#ifndef LAB01_MODELS_H
#define LAB01_MODELS_H

#include "plan/plan.h"

/* GPT-2 small: L = 12, h = 768, a = 12, F = 4h = 3072, V = 50257, T = 1024, head tied to the embedding. */
static inline plan_model lab01_gpt2_124m(void) {
    return (plan_model){.name = "gpt2-124m", .arch = PLAN_ARCH_GPT2, .layers = 12, .hidden = 768, .heads = 12,
                        .kv_heads = 12, .ffn = 3072, .vocab = 50257, .context = 1024, .tied_head = true};
}

/* LLaMA-7B: L = 32, h = 4096, a = g = 32, F = 11008 (SwiGLU), V = 32000, T = 2048, untied head. */
static inline plan_model lab01_llama_7b(void) {
    return (plan_model){.name = "llama-7b", .arch = PLAN_ARCH_LLAMA, .layers = 32, .hidden = 4096, .heads = 32,
                        .kv_heads = 32, .ffn = 11008, .vocab = 32000, .context = 2048, .tied_head = false};
}

/* A run with every field spelled out. */
static inline plan_run lab01_run(plan_recipe recipe, plan_optimizer optimizer, int zero_stage, uint64_t world,
                                 uint64_t batch, uint64_t seq, plan_recompute recompute, bool dropout) {
    return (plan_run){.recipe = recipe, .optimizer = optimizer, .zero_stage = zero_stage, .world = world,
                      .batch = batch, .seq = seq, .recompute = recompute, .dropout = dropout};
}

#endif
