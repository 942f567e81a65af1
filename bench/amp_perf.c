/* amp_perf.c: lab 10's measurement: memory by allocator tag and speed (tokens/s, MFU) of the same GPT per
 * precision recipe, beside the perf model's predictions (plan/perf.h) and the sgemm peak measured in the same run. */
#include "amp/setup.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/rng.h"
#include "model/model.h"
#include "model/model_lowp.h"
#include "ops/matmul_lowp.h"
#include "prof/bf16_peak.h"
#include "prof/roofline.h"
#include "optim/optimizer.h"
#include "plan/perf.h"
#include "plan/plan.h"
#include "train/step.h"

#include "bench_util.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_RECIPES = AMP_NRECIPES };

static const char USAGE[] =
    "usage: amp_perf [--model gpt2-124m|tiny] [--batch B] [--seq T] [--steps N] [--recipes fp32,bf16,...]\n"
    "                [--tsv FILE]\n"
    "       amp_perf --flops-table     model FLOPs per token of every planner preset (plan/perf.h), then exit\n"
    "       amp_perf --act-table [--model M]   predicted MEM_ACT per compute mode for growing batches, then exit\n"
    "  the same GPT trained a few AdamW steps per precision recipe: peak bytes by allocator tag, MEM_ACT\n"
    "  against perf_activation_bytes, and tokens/s and MFU against the sgemm peak measured in the same run.\n"
    "  defaults: gpt2-124m, B=4, T=64, 2 timed steps after 1 warm-up step, recipes fp32,bf16,fp16\n"
    "  (tiny: configs/tiny-poetry.json's model, L=4 C=128 NH=4 V=2842)\n";

typedef struct {
    amp_recipe recipe;
    double median, fastest, loss; /* fastest: the least disturbed step, for comparing runs on a busy machine */
    double optimizer;             /* the median of the steps' optimizer spans (clip, unscale, update), seconds */
    double peak_beside;           /* the median of the sgemm peaks measured right after each timed step */
    size_t peak[MEM_NTAGS];
    perf_activations predicted;
} result;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The sgemm peak beside a step: bench_sgemm_peak_gflops's product (1536^3 on all threads, the best of two after a
 * warm-up), on buffers made once and kept outside the allocator's counts, so that a recipe's memory peaks by tag
 * stay its model's (the peak's 27 MiB would otherwise show under MEM_OTHER). */
static double sgemm_peak_beside(void) {
    enum { N = 1536 };
    static float *a, *b, *c;
    if (!a) {
        a = malloc(sizeof(float) * N * N), b = malloc(sizeof(float) * N * N), c = malloc(sizeof(float) * N * N);
        MP_ASSERT(a && b && c, "out of memory");
        for (long i = 0; i < (long)N * N; i++) a[i] = 0.5f + (float)(i % 7), b[i] = 0.25f + (float)(i % 7), c[i] = 0;
    }
    return prof_measure_gemm_flops_on(a, b, c, N, 2) / 1e9;
}

/* A fresh model under one recipe: its compute mode, its AMP step, one warm-up step, then `steps` timed ones.
 * The previous recipe's model is freed and the peaks reset first, so the peaks are this recipe's alone. */
static result run_recipe(const model_config *cfg, amp_recipe recipe, int B, int T, int steps, const int *inputs,
                         const int *targets) {
    result res = {.recipe = recipe};
    mem_reset_peaks();
    model *m = model_create(cfg);
    model_init(m, 1);
    optim_config opt = optim_config_default(OPTIM_ADAMW);
    optim_config_set(&opt, "weight_decay", 0.1);
    train_step ts;
    train_step_init(&ts, m, &opt, 1.0);
    amp_setup setup = {.recipe = recipe, .scaler = amp_scaler_defaults(amp_recipe_get(recipe)->scaler),
                       .fp8_history = 16};
    model_precision mp = amp_model_precision(&setup);
    if (recipe != AMP_RECIPE_FP32) {
        model_set_precision(m, &mp);
        train_step_set_amp(&ts, recipe, &setup.scaler, recipe == AMP_RECIPE_BF16_PURE, 1);
    }
    double *times = malloc(sizeof(double) * (size_t)steps), *peaks = malloc(sizeof(double) * (size_t)steps);
    double *optim = malloc(sizeof(double) * (size_t)steps);
    MP_ASSERT(times && peaks && optim, "out of memory");
    for (int s = -1; s < steps; s++) { /* step -1 warms up: page faults, thread start, the first allocations */
        double t0 = mp_now();
        train_step_result r = train_step_run(&ts, inputs, targets, B, T, 1, 1e-4);
        double t = mp_now() - t0;
        if (s >= 0) times[s] = t, optim[s] = r.t_optimizer, peaks[s] = sgemm_peak_beside(); /* ~0.1 s */
        res.loss = r.loss;
    }
    qsort(times, (size_t)steps, sizeof *times, cmp_double);
    qsort(peaks, (size_t)steps, sizeof *peaks, cmp_double);
    res.median = times[steps / 2];
    res.fastest = times[0];
    res.peak_beside = peaks[steps / 2];
    qsort(optim, (size_t)steps, sizeof *optim, cmp_double);
    res.optimizer = optim[steps / 2];
    free(peaks);
    free(optim);
    for (int tag = 0; tag < MEM_NTAGS; tag++) res.peak[tag] = mem_peak((mem_tag)tag);
    perf_activation_bytes(cfg, B, T, mp.compute, &res.predicted);
    free(times);
    train_step_free(&ts);
    model_free(m);
    return res;
}

static const result *find(const result *res, int n, amp_recipe recipe) {
    for (int k = 0; k < n; k++)
        if (res[k].recipe == recipe) return &res[k];
    return NULL;
}

/* Issue 21's two step goals against what this machine allows, from this run's figures: a step's products (6N FLOPs
 * a token) take at least their FLOPs at the peak of the kernel that runs them, and what is left of the goal's step
 * is all the rest has; the optimizer alone (clip, unscale, AdamW: every parameter's 16-28 bytes read and written) is
 * measured in the same steps. step_flops: the model FLOPs of a step (MFU's numerator); dense_flops: its products'. */
static void print_goals(const result *res, int n, double dense_flops, double step_flops, double sgemm_peak,
                        double bf16_peak) {
    const result *fp32 = find(res, n, AMP_RECIPE_FP32), *bf16 = find(res, n, AMP_RECIPE_BF16);
    if (!fp32) return;
    printf("\nissue 21's step goals against this machine (products: 6N FLOPs a token at the peak measured above):\n");
    const double fp32_goal = step_flops / (0.9 * sgemm_peak * 1e9), fp32_products = dense_flops / (sgemm_peak * 1e9);
    printf("  fp32 at 90%% of the sgemm peak: a step of at most %.3f s (this run: %.3f s). The products alone take "
           "%.3f s at 100%% of the peak, leaving %.3f s for everything else; the optimizer alone took %.3f s.\n",
           fp32_goal, fp32->median, fp32_products, fp32_goal - fp32_products, fp32->optimizer);
    if (!bf16 || bf16_peak <= 0) return;
    const double bf16_goal = 0.45 * fp32->median, bf16_products = dense_flops / (bf16_peak * 1e9);
    printf("  bf16 at 0.45x the fp32 step: at most %.3f s (this run: %.3f s = %.2fx). The products alone take %.3f s "
           "at the bf16 kernel's own peak, leaving %.3f s for everything else; the optimizer alone took %.3f s.\n",
           bf16_goal, bf16->median, bf16->median / fp32->median, bf16_products, bf16_goal - bf16_products,
           bf16->optimizer);
}

/* Model FLOPs per token of every preset, at its context and at s = 64. */
static void flops_table(void) {
    printf("model FLOPs per token of a training step (perf_train_flops_per_token): 6N + 12*L*s*h\n\n");
    printf("%-10s %4s %6s %5s %16s %18s %16s %18s %10s\n", "model", "L", "h", "s", "N (matmul)", "6N", "12*L*s*h",
           "total", "attention");
    for (int i = 0; i < plan_preset_count(); i++) {
        const plan_model *m = plan_preset_at(i);
        uint64_t seqs[2] = {64, m->context};
        for (int k = 0; k < 2; k++) {
            perf_flops f;
            perf_train_flops_per_token(m, seqs[k], &f);
            printf("%-10s %4llu %6llu %5llu %16llu %18llu %16llu %18llu %9.2f%%\n", m->name,
                   (unsigned long long)m->layers, (unsigned long long)m->hidden, (unsigned long long)seqs[k],
                   (unsigned long long)f.matmul_params, (unsigned long long)f.dense, (unsigned long long)f.attention,
                   (unsigned long long)f.total, 100.0 * (double)f.attention / (double)f.total);
        }
    }
}

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* Predicted MEM_ACT (perf_activation_bytes) for batches up to the model's full context, per compute mode: where
 * activations outgrow the model states, and what 2-byte storage saves there. Nothing is allocated. */
static void act_table(const model_config *cfg, const char *name, size_t params) {
    static const int shapes[][2] = {{4, 64}, {16, 64}, {8, 256}, {8, 1024}, {32, 1024}};
    static const model_compute modes[] = {MODEL_COMPUTE_FP32, MODEL_COMPUTE_BF16, MODEL_COMPUTE_TF32};
    printf("predicted activations (perf_activation_bytes), %s; model states with AdamW: 16 B/param = %.0f MiB\n\n",
           name, mib(16 * params));
    printf("%5s %5s %8s %12s %12s %12s %10s\n", "B", "T", "tokens", "fp32 MiB", "bf16 MiB", "tf32 MiB", "bf16/fp32");
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        int B = shapes[i][0], T = shapes[i][1];
        if (T > cfg->maxT) continue;
        double mb[3];
        for (int k = 0; k < 3; k++) {
            perf_activations a;
            perf_activation_bytes(cfg, B, T, modes[k], &a);
            mb[k] = mib(a.total);
        }
        printf("%5d %5d %8d %12.1f %12.1f %12.1f %10.3f\n", B, T, B * T, mb[0], mb[1], mb[2], mb[1] / mb[0]);
    }
}


int main(int argc, char **argv) {
    const char *model_name = "gpt2-124m", *recipes = "fp32,bf16,fp16", *tsv = NULL;
    bool want_act_table = false;
    int64_t B = 4, T = 64, steps = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--flops-table")) {
            flops_table();
            return 0;
        } else if (!strcmp(a, "--act-table")) {
            want_act_table = true;
        } else if (!strcmp(a, "--model") && (!strcmp(v, "gpt2-124m") || !strcmp(v, "tiny"))) model_name = argv[++i];
        else if (!strcmp(a, "--batch") && parse_i64(v, &B) && B >= 1 && B <= 1024) i++;
        else if (!strcmp(a, "--seq") && parse_i64(v, &T) && T >= 1 && T <= 1024) i++;
        else if (!strcmp(a, "--steps") && parse_i64(v, &steps) && steps >= 1 && steps <= 1000) i++;
        else if (!strcmp(a, "--recipes") && *v) recipes = argv[++i];
        else if (!strcmp(a, "--tsv") && *v) tsv = argv[++i];
        else {
            fprintf(stderr, "%s  bad or unknown argument: '%s'\n", USAGE, a);
            return 2;
        }
    }
    amp_recipe list[MAX_RECIPES];
    int nrecipes = 0;
    char names[128];
    snprintf(names, sizeof names, "%s", recipes);
    for (char *save = NULL, *tok = strtok_r(names, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int r = amp_recipe_from_name(tok);
        if (r < 0 || nrecipes == MAX_RECIPES) {
            fprintf(stderr, "%s  --recipes: '%s' is not one of %s\n", USAGE, tok, AMP_RECIPE_NAMES);
            return 2;
        }
        list[nrecipes++] = (amp_recipe)r;
    }

    bool tiny = strcmp(model_name, "tiny") == 0;
    model_config cfg = tiny ? (model_config){.arch = MODEL_GPT2, .V = 2842, .maxT = 64, .L = 4, .C = 128, .NH = 4}
                            : (model_config){.arch = MODEL_GPT2, .V = 50257, .maxT = 1024, .L = 12, .C = 768, .NH = 12};
    cfg.tied = true;
    if (T > cfg.maxT) {
        fprintf(stderr, "%s  --seq %lld is longer than the model's context %d\n", USAGE, (long long)T, cfg.maxT);
        return 2;
    }
    model_config_complete(&cfg);
    plan_model pm = {.arch = PLAN_ARCH_GPT2, .layers = (uint64_t)cfg.L, .hidden = (uint64_t)cfg.C,
                     .heads = (uint64_t)cfg.NH, .kv_heads = (uint64_t)cfg.KVH, .ffn = (uint64_t)cfg.F,
                     .vocab = (uint64_t)cfg.V, .context = (uint64_t)cfg.maxT, .tied_head = true};
    perf_flops flops;
    perf_train_flops_per_token(&pm, (uint64_t)T, &flops);
    size_t params = model_count_params(&cfg);
    if (want_act_table) {
        act_table(&cfg, model_name, params);
        return 0;
    }

    printf("amp_perf: %s (L=%d, C=%d, NH=%d, V=%d padded to %d; %zu parameters), B=%lld, T=%lld, AdamW, "
           "%d threads\n", model_name, cfg.L, cfg.C, cfg.NH, cfg.V, cfg.Vp, params, (long long)B, (long long)T,
           omp_get_max_threads());
    printf("model FLOPs per token: 6N = %llu (N = %llu matmul weights) + attention 12*L*T*C = %llu -> %llu\n",
           (unsigned long long)flops.dense, (unsigned long long)flops.matmul_params,
           (unsigned long long)flops.attention, (unsigned long long)flops.total);
    fflush(stdout);
    double peak_before = bench_sgemm_peak_gflops();

    int *inputs = malloc(sizeof(int) * (size_t)(B * T)), *targets = malloc(sizeof(int) * (size_t)(B * T));
    MP_ASSERT(inputs && targets, "out of memory");
    mp_rng rng;
    mp_rng_seed(&rng, 7);
    for (int i = 0; i < B * T; i++) inputs[i] = (int)(mp_rng_u32(&rng) % (uint32_t)cfg.V);
    for (int i = 0; i < B * T; i++) targets[i] = (int)(mp_rng_u32(&rng) % (uint32_t)cfg.V);

    result res[MAX_RECIPES];
    double t_start = mp_now();
    for (int k = 0; k < nrecipes; k++) {
        res[k] = run_recipe(&cfg, list[k], (int)B, (int)T, (int)steps, inputs, targets);
        printf("  %-9s %lld+1 steps, median %.3f s, fastest %.3f s, loss %.4f\n", amp_recipe_get(list[k])->name,
                (long long)steps, res[k].median, res[k].fastest, res[k].loss);
        fflush(stdout);
    }
    double t_runs = mp_now() - t_start;
    double peak_after = bench_sgemm_peak_gflops();
    double peak = peak_before > peak_after ? peak_before : peak_after;
    printf("sgemm peak: %.1f GFLOP/s (before the runs %.1f, after %.1f; the best is the machine's practical peak)\n",
           peak, peak_before, peak_after);
    /* The bf16 kernel's own peak (1536^3 on the model's path), where bf16's products run on one: after the runs
     * only, the better of two, since the product grows the kernel's packing areas (MEM_OTHER) past a small model's. */
    double bf16_peak = 0;
    if (strcmp(matmul_lowp_path(LOWP_BF16), "decode+sgemm") != 0) {
        double first = prof_measure_bf16_gemm_flops(1536) / 1e9, second = prof_measure_bf16_gemm_flops(1536) / 1e9;
        bf16_peak = first > second ? first : second;
        printf("bf16 kernel's own peak (%s, 1536^3, after the runs): %.1f GFLOP/s (%.1f, %.1f)\n",
               matmul_lowp_path(LOWP_BF16), bf16_peak, first, second);
    }
    bench_print_gemm_kernels();

    printf("\nmemory by allocator tag: peak MiB during the run, and model-state bytes per parameter\n");
    printf("recipe      param    grad  master   optim     act   other   total   states B/param\n");
    for (int k = 0; k < nrecipes; k++) {
        size_t total = 0, states = 0;
        for (int tag = 0; tag < MEM_NTAGS; tag++) total += res[k].peak[tag];
        for (int tag = MEM_PARAM; tag <= MEM_OPTIM; tag++) states += res[k].peak[tag];
        printf("%-9s %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f   %5.1f + other %.1f\n", amp_recipe_get(res[k].recipe)->name,
               mib(res[k].peak[MEM_PARAM]), mib(res[k].peak[MEM_GRAD]), mib(res[k].peak[MEM_MASTER]),
               mib(res[k].peak[MEM_OPTIM]), mib(res[k].peak[MEM_ACT]), mib(res[k].peak[MEM_OTHER]), mib(total),
               (double)states / (double)params, (double)res[k].peak[MEM_OTHER] / (double)params);
    }

    printf("\nactivations (MEM_ACT): predicted by perf_activation_bytes, measured by the allocator\n");
    printf("recipe    bytes/value   kept MiB  stats MiB  working MiB  predicted MiB  measured MiB   error  vs first\n");
    for (int k = 0; k < nrecipes; k++) {
        const perf_activations *a = &res[k].predicted;
        double measured = (double)res[k].peak[MEM_ACT];
        printf("%-9s %11u %10.2f %10.3f %12.2f %14.2f %13.2f %+6.2f%%  %7.3f\n", amp_recipe_get(res[k].recipe)->name,
               a->storage_bytes, mib(a->kept), mib(a->statistics), mib(a->working), mib(a->total), mib(res[k].peak[MEM_ACT]),
               100.0 * ((double)a->total / measured - 1.0), measured / (double)res[0].peak[MEM_ACT]);
    }

    printf("\nspeed: median step of %lld, model FLOPs from perf_train_flops_per_token, MFU against %.1f GFLOP/s\n",
           (long long)steps, peak);
    printf("(MFU beside: against the median of the sgemm peaks measured right after each of the recipe's steps, the\n"
           " same statistic as the step's time; the machine's clock moves with its neighbours' load)\n");
    printf("recipe    step s   tokens/s   model GFLOP/s    MFU   vs first   MFU beside (peak GFLOP/s)\n");
    perf_throughput tp[MAX_RECIPES];
    for (int k = 0; k < nrecipes; k++) {
        tp[k] = perf_throughput_of((uint64_t)(B * T), res[k].median, (double)flops.total, peak * 1e9);
        printf("%-9s %6.3f %10.1f %15.2f %5.1f%%  %7.2fx   %9.1f%% (%.1f)\n", amp_recipe_get(res[k].recipe)->name,
               res[k].median, tp[k].tokens_per_s, tp[k].flops_per_s / 1e9, 100 * tp[k].mfu,
               tp[k].tokens_per_s / tp[0].tokens_per_s, 100 * tp[k].flops_per_s / (res[k].peak_beside * 1e9),
               res[k].peak_beside);
    }
    printf("(%.1f s for the runs)\n", t_runs);
    print_goals(res, nrecipes, (double)flops.dense * (double)(B * T), (double)flops.total * (double)(B * T), peak,
                bf16_peak);

    if (tsv) {
        FILE *f = fopen(tsv, "w");
        if (!f) MP_FAIL("a file amp_perf can write", "--tsv %s", tsv);
        fprintf(f, "# recipe\tstep_s\ttokens_per_s\tgflops\tmfu\tparam\tgrad\tmaster\toptim\tact\tother\t"
                   "act_predicted\tact_kept\n");
        for (int k = 0; k < nrecipes; k++)
            fprintf(f, "%s\t%.6f\t%.3f\t%.4f\t%.6f\t%zu\t%zu\t%zu\t%zu\t%zu\t%zu\t%llu\t%llu\n",
                    amp_recipe_get(res[k].recipe)->name, res[k].median, tp[k].tokens_per_s, tp[k].flops_per_s / 1e9,
                    tp[k].mfu, res[k].peak[MEM_PARAM], res[k].peak[MEM_GRAD], res[k].peak[MEM_MASTER],
                    res[k].peak[MEM_OPTIM], res[k].peak[MEM_ACT], res[k].peak[MEM_OTHER],
                    (unsigned long long)res[k].predicted.total, (unsigned long long)res[k].predicted.kept);
        fclose(f);
    }
    free(inputs);
    free(targets);
    return 0;
}
