/* lab10_util.h: helpers for the lab 10 tests: checked FLOP counts, and MEM_ACT measured on a real model's first
 * forward pass (where the model allocates all its activation memory; no backward, so no other lab's code runs). */
#ifndef LAB10_UTIL_H
#define LAB10_UTIL_H

#include "base/mem.h"
#include "model/model.h"
#include "model/model_lowp.h"
#include "mptest.h"
#include "plan/perf.h"

#include <stdio.h>
#include <stdlib.h>

/* Every field of perf_train_flops_per_token against hand-derived numbers. */
#define CHECK_FLOPS(got, n, dense, attention, total, what, mistake) \
    lab10_check_flops(__FILE__, __LINE__, (got), (n), (dense), (attention), (total), (what), (mistake))
static inline void lab10_check_flops(const char *file, int line, const perf_flops *f, uint64_t n, uint64_t dense,
                                     uint64_t attention, uint64_t total, const char *what, const char *mistake) {
    mpt_observe(file, line, f->matmul_params); /* what the grader compares with the reference */
    mpt_observe(file, line, f->dense);
    mpt_observe(file, line, f->attention);
    mpt_observe(file, line, f->total);
    if (f->matmul_params == n && f->dense == dense && f->attention == attention && f->total == total) return;
    mpt_fail(file, line,
             "%s\n      expected: N %llu, 6N %llu, attention %llu, total %llu\n"
             "      got:      N %llu, 6N %llu, attention %llu, total %llu\n      likely mistake: %s",
             what, (unsigned long long)n, (unsigned long long)dense, (unsigned long long)attention,
             (unsigned long long)total, (unsigned long long)f->matmul_params, (unsigned long long)f->dense,
             (unsigned long long)f->attention, (unsigned long long)f->total, mistake);
}

/* FLOPs per token at a sequence length drawn from this grade's seed, recorded for the grader. */
static inline void lab10_observe_flops_at_a_drawn_length(const char *file, int line, const plan_model *m) {
    perf_flops f;
    perf_train_flops_per_token(m, 1 + (int)(mpt_seed() % 4096), &f);
    mpt_observe(file, line, f.matmul_params);
    mpt_observe(file, line, f.attention);
    mpt_observe(file, line, f.total);
}
#define LAB10_OBSERVE_FLOPS(m) lab10_observe_flops_at_a_drawn_length(__FILE__, __LINE__, (m))

static inline model_config lab10_gpt2(int L, int C, int NH, int V, int maxT) {
    model_config c = {.arch = MODEL_GPT2, .V = V, .maxT = maxT, .L = L, .C = C, .NH = NH, .tied = true};
    model_config_complete(&c);
    return c;
}

/* The bytes the allocator counts under MEM_ACT at its peak during the model's first forward pass over a (B,T)
 * batch in compute mode `compute`: every activation buffer is allocated there. */
static inline size_t lab10_measure_act(const model_config *cfg, int B, int T, model_compute compute) {
    size_t before = mem_current(MEM_ACT);
    mem_reset_peaks();
    model *m = model_create(cfg);
    model_init(m, 1);
    if (compute != MODEL_COMPUTE_FP32) {
        model_precision p = {.compute = compute};
        model_set_precision(m, &p);
    }
    int *in = malloc(sizeof(int) * (size_t)(B * T)), *tg = malloc(sizeof(int) * (size_t)(B * T));
    MPT_REQUIRE(in && tg, "out of memory");
    for (int i = 0; i < B * T; i++) in[i] = (i * 7 + 3) % cfg->V, tg[i] = (i * 5 + 1) % cfg->V;
    model_forward(m, in, tg, B, T);
    size_t peak = mem_peak(MEM_ACT) - before;
    free(in);
    free(tg);
    model_free(m);
    return peak;
}

/* perf_activation_bytes against the allocator: |predicted / measured - 1| <= tol. */
#define CHECK_ACT_MEASURED(cfg, B, T, compute, tol, what) \
    lab10_check_act_measured(__FILE__, __LINE__, (cfg), (B), (T), (compute), (tol), (what))
static inline void lab10_check_act_measured(const char *file, int line, const model_config *cfg, int B, int T,
                                            model_compute compute, double tol, const char *what) {
    perf_activations a;
    perf_activation_bytes(cfg, B, T, compute, &a);
    mpt_observe(file, line, a.total); /* what the grader compares with the reference */
    mpt_observe(file, line, a.kept);
    mpt_observe(file, line, a.statistics);
    mpt_observe(file, line, a.working);
    size_t measured = lab10_measure_act(cfg, B, T, compute);
    double err = (double)a.total / (double)measured - 1.0;
    if (err <= tol && err >= -tol) return;
    mpt_fail(file, line,
             "%s, %s, B=%d T=%d: predicted MEM_ACT %llu bytes (kept %llu + statistics %llu + working %llu), measured "
             "%zu: %+.2f%% (allowed %.0f%%)\n      likely mistake: %s",
             what, model_compute_name(compute), B, T, (unsigned long long)a.total, (unsigned long long)a.kept,
             (unsigned long long)a.statistics, (unsigned long long)a.working, measured, 100 * err, 100 * tol,
             err < 0 ? "a kept tensor is missing (the attention map? the logits? the outside tensors?) or the storage "
                       "bytes are too small"
                     : "a tensor counted twice, or 4 bytes where the mode stores 2");
}

#endif
