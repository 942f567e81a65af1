/* train_step.c: the training-core benchmark: GPT-2 124M, B=4, T=64, fp32, AdamW, on this machine's threads.
 * Reports the median step time, tokens/s, achieved GFLOP/s against the sgemm peak measured in the same run,
 * and peak memory by tag against `mixpar plan`'s prediction for the same run. */
#include "base/clock.h"
#include "base/mem.h"
#include "base/rng.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "plan/plan.h"
#include "train/step.h"

#include "bench_util.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 6;
    if (steps < 2) steps = 2;
    const int B = 4, T = 64;
    model_config cfg = {.arch = MODEL_GPT2, .V = 50257, .maxT = 1024, .L = 12, .C = 768, .NH = 12, .tied = true};
    printf("train_step: GPT-2 124M (L=12, C=768, NH=12, V=50257 padded to 50304), B=%d, T=%d, fp32, AdamW, "
           "%d threads\n", B, T, omp_get_max_threads());
    double peak_before = bench_sgemm_peak_gflops();

    model *m = model_create(&cfg);
    model_init(m, 1);
    optim_config opt = optim_config_default(optim_kind_from_name("adamw"));
    optim_config_set(&opt, "lr", 6e-4);
    optim_config_set(&opt, "weight_decay", 0.1);
    train_step ts;
    train_step_init(&ts, m, &opt, 1.0);

    int *inputs = malloc(sizeof(int) * B * T), *targets = malloc(sizeof(int) * B * T);
    mp_rng rng;
    mp_rng_seed(&rng, 7);
    for (int i = 0; i < B * T; i++) inputs[i] = (int)(mp_rng_u32(&rng) % 50257u);
    for (int i = 0; i < B * T; i++) targets[i] = (int)(mp_rng_u32(&rng) % 50257u);

    double *times = malloc(sizeof(double) * steps), fwd = 0, bwd = 0, upd = 0;
    printf("\nstep  loss      seconds  (forward, backward, optimizer)\n");
    for (int s = -1; s < steps; s++) { /* step -1 warms up: page faults, thread start */
        double t0 = mp_now();
        train_step_result r = train_step_run(&ts, inputs, targets, B, T, 1, 6e-4);
        double t = mp_now() - t0;
        if (s < 0) continue;
        times[s] = t;
        fwd += r.t_forward, bwd += r.t_backward, upd += r.t_optimizer;
        printf("%4d  %.5f  %.3f    (%.3f, %.3f, %.3f)\n", s, r.loss, t, r.t_forward, r.t_backward, r.t_optimizer);
    }
    qsort(times, (size_t)steps, sizeof *times, cmp_double);
    double median = times[steps / 2];
    double peak_after = bench_sgemm_peak_gflops();
    double peak = peak_before > peak_after ? peak_before : peak_after;

    /* FLOPs: 6 per parameter per token (forward 2, backward 4) with the head counted once (tied), plus
     * attention's QK^T and AV: 2 * 2 * T * T * C per layer per sequence forward, times 3 with backward. */
    double params = (double)model_num_params_unpadded(m);
    double tokens = (double)B * T;
    double flops = 6.0 * params * tokens + 3.0 * 2.0 * 2.0 * B * (double)T * T * cfg.C * cfg.L;
    double gflops = flops / median / 1e9;
    printf("\nmedian step %.3f s (min %.3f, max %.3f) over %d steps; forward %.0f%%, backward %.0f%%, optimizer %.0f%%\n",
           median, times[0], times[steps - 1], steps, 100 * fwd / (fwd + bwd + upd), 100 * bwd / (fwd + bwd + upd),
           100 * upd / (fwd + bwd + upd));
    printf("tokens/s %.0f; %.1f GFLOP/s achieved; sgemm peak %.1f GFLOP/s (before %.1f, after %.1f): %.0f%% of peak\n",
           tokens / median, gflops, peak, peak_before, peak_after, 100 * gflops / peak);
    bench_print_gemm_kernels();
    printf("anchors on a 2-core machine: llm.c's CPU trainer 3.84 s (built with its own flags, -march=native), PyTorch "
           "1.13 ~5.6 s; goal (issue 21): at most 0.25x llm.c (0.96 s) and 90%% of the sgemm peak\n");

    /* Memory: the allocator's peaks against the planner for the same run (fp32, AdamW, no dropout). */
    plan_model pm;
    if (!plan_preset_find("gpt2-124m", &pm)) return 1;
    plan_run pr = plan_run_defaults(&pm);
    pr.recipe = PLAN_RECIPE_FP32;
    pr.optimizer = PLAN_OPT_ADAMW;
    pr.batch = B;
    pr.seq = T;
    pr.dropout = false;
    plan_result plan;
    plan_compute(&pm, &pr, &plan);
    printf("\nmemory by tag   measured peak (bytes)   planned (bytes)   measured/planned\n");
    for (int tag = MEM_PARAM; tag <= MEM_ACT; tag++) {
        double got = (double)mem_peak(tag), want = (double)plan.bytes[tag];
        if (want == 0 && got == 0) continue;
        printf("%-14s  %21.0f   %15.0f   %.3f\n", mem_tag_name(tag), got, want, want ? got / want : 0.0);
    }
    printf("(params/grads/optim differ by the 47 padded vocabulary rows; activations by the scratch buffers the\n"
           " backward pass reuses and the fp32 logits, which the planner also counts)\n");
    train_step_free(&ts);
    model_free(m);
    free(inputs);
    free(targets);
    free(times);
    return 0;
}
