/* recompute.c: activation checkpointing on GPT-2 124M (fp32, B=4): per recompute policy, the MEM_ACT peak and the
 * forward+backward time (wall and process CPU, median of a few), as ratios of no recompute, beside the planner's
 * prediction; and whether the gradients are bit-identical to no recompute's.
 *
 *     build/bench/recompute [REPS [T ...]]        default: 3 repetitions, T = 64 (T = 256 takes ~4x as long)
 *     OMP_NUM_THREADS=1 build/bench/recompute 3 64 256     what solutions/lab18-memory-optimisation.md shows */
#include "base/clock.h"
#include "base/mem.h"
#include "base/rng.h"
#include "model/model.h"
#include "plan/plan.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { B = 4, MAX_REPS = 20 };

typedef struct {
    model_recompute policy;
    int k;
    const char *name;
} policy_case;

static const policy_case cases[] = {
    {MODEL_RECOMPUTE_NONE, 1, "none"},
    {MODEL_RECOMPUTE_SELECTIVE, 1, "selective"},
    {MODEL_RECOMPUTE_EVERY_K, 3, "every_k=3"},
    {MODEL_RECOMPUTE_EVERY_K, 2, "every_k=2"},
    {MODEL_RECOMPUTE_EVERY, 1, "every"},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

/* CPU seconds of the whole process (all threads): on a machine shared with other work, wall time counts the
 * time other programs ran; CPU time counts only ours (threads spinning at a barrier count too). */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* FNV-1a over the gradient buffer's bytes: equal hashes, bit-identical gradients. */
static uint64_t hash_floats(const float *x, size_t n) {
    const unsigned char *p = (const unsigned char *)x;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The planner's activation bytes (fp32, no dropout); every_k composed from its per-block figures. */
static uint64_t planned_bytes(const plan_model *pm, int T, const policy_case *pc, int L) {
    plan_run run = plan_run_defaults(pm);
    run.recipe = PLAN_RECIPE_FP32;
    run.batch = B;
    run.seq = (uint64_t)T;
    run.dropout = false;
    run.recompute = pc->policy == MODEL_RECOMPUTE_NONE        ? PLAN_RECOMPUTE_NONE
                    : pc->policy == MODEL_RECOMPUTE_SELECTIVE ? PLAN_RECOMPUTE_SELECTIVE
                                                              : PLAN_RECOMPUTE_FULL;
    plan_activations act;
    plan_activation_bytes(pm, &run, &act);
    if (pc->policy != MODEL_RECOMPUTE_EVERY_K) return act.total;
    uint64_t ck = 0;
    for (int l = 0; l < L; l++) ck += model_block_keeps(pc->policy, pc->k, l) == MODEL_KEEP_INPUT;
    return ck * act.block_kept + ((uint64_t)L - ck) * act.block_full + act.working_set + act.outside;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 3;
    if (reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "recompute: REPS from 1 to %d\nusage: recompute [REPS [T ...]]\n", MAX_REPS);
        return 2;
    }
    int Ts[8] = {64}, nT = 1;
    if (argc > 2) {
        nT = 0;
        for (int i = 2; i < argc && nT < 8; i++) {
            Ts[nT] = atoi(argv[i]);
            if (Ts[nT] < 1 || Ts[nT] > 1024) {
                fprintf(stderr, "recompute: T from 1 to 1024, not '%s'\n", argv[i]);
                return 2;
            }
            nT++;
        }
    }
    model_config cfg = {.arch = MODEL_GPT2, .V = 50257, .maxT = 1024, .L = 12, .C = 768, .NH = 12, .tied = true};
    model_config_complete(&cfg);
    plan_model pm;
    if (!plan_preset_find("gpt2-124m", &pm)) return 1;
    /* One model per policy, same weights: the timed runs go round the policies in turn, so a machine shared
     * with other work slows them alike, and no run pays for laying out another policy's activations.
     * On a busy machine, OMP_NUM_THREADS=1 gives steadier figures: threads waiting for each other at every
     * barrier are otherwise most of what gets measured. */
    model *models[NCASES];
    for (int ci = 0; ci < NCASES; ci++) {
        models[ci] = model_create(&cfg);
        model_init(models[ci], 1);
        model_set_recompute(models[ci], cases[ci].policy, cases[ci].k);
    }
    size_t nparams = model_num_params(models[0]), held[NCASES] = {0}; /* MEM_ACT bytes each model holds */
    printf("recompute: GPT-2 124M (L=12, C=768, NH=12, V=50257 padded to 50304), fp32, B=%d, %d threads; median of "
           "%d forward+backward per policy, taken in turns, after one warm-up each\n", B, omp_get_max_threads(), reps);

    for (int ti = 0; ti < nT; ti++) {
        int T = Ts[ti];
        int *inputs = malloc(sizeof(int) * B * T), *targets = malloc(sizeof(int) * B * T);
        mp_rng rng;
        mp_rng_seed(&rng, 7);
        for (int i = 0; i < B * T; i++) inputs[i] = (int)(mp_rng_u32(&rng) % 50257u);
        for (int i = 0; i < B * T; i++) targets[i] = (int)(mp_rng_u32(&rng) % 50257u);
        double fwd[NCASES][MAX_REPS], bwd[NCASES][MAX_REPS], both[NCASES][MAX_REPS], cpu[NCASES][MAX_REPS];
        uint64_t hash[NCASES];
        for (int r = -1; r < reps; r++) /* r = -1 warms up (page faults, threads) and measures the peak */
            for (int j = 0; j < NCASES; j++) {
                int ci = (j + r + 1) % NCASES; /* each round starts one policy later: none is not always first */
                model *m = models[ci];
                size_t act_before = mem_current(MEM_ACT);
                mem_reset_peaks();
                model_zero_grad(m);
                double c0 = cpu_now(), t0 = mp_now();
                model_forward(m, inputs, targets, B, T);
                double t1 = mp_now();
                model_backward(m, 1.0f);
                double t2 = mp_now(), c2 = cpu_now();
                if (r < 0) {
                    /* the tag's peak less what the other models hold (this one's block of the last T is freed
                     * when a longer T grows it) */
                    held[ci] = mem_peak(MEM_ACT) - (act_before - held[ci]);
                    hash[ci] = hash_floats(model_grads(m), nparams);
                    continue;
                }
                fwd[ci][r] = t1 - t0;
                bwd[ci][r] = t2 - t1;
                both[ci][r] = t2 - t0;
                cpu[ci][r] = c2 - c0;
            }
        printf("\nT=%d\n%-10s %5s %9s %6s %9s %6s %7s %7s %7s %6s %7s %6s  %s\n", T, "policy", "ckpt", "act MiB",
               "ratio", "plan MiB", "m/plan", "fwd s", "bwd s", "f+b s", "ratio", "cpu s", "ratio", "gradients");
        double base_time = 0, base_cpu = 0;
        for (int ci = 0; ci < NCASES; ci++) {
            const policy_case *pc = &cases[ci];
            qsort(fwd[ci], (size_t)reps, sizeof(double), cmp_double);
            qsort(bwd[ci], (size_t)reps, sizeof(double), cmp_double);
            qsort(both[ci], (size_t)reps, sizeof(double), cmp_double);
            qsort(cpu[ci], (size_t)reps, sizeof(double), cmp_double);
            double t = both[ci][reps / 2], tc = cpu[ci][reps / 2];
            if (ci == 0) base_time = t, base_cpu = tc;
            int ck = 0;
            for (int l = 0; l < cfg.L; l++) ck += model_block_keeps(pc->policy, pc->k, l) == MODEL_KEEP_INPUT;
            double plan = (double)planned_bytes(&pm, T, pc, cfg.L);
            printf("%-10s %5d %9.1f %6.3f %9.1f %6.3f %7.3f %7.3f %7.3f %6.3f %7.3f %6.3f  %s\n", pc->name, ck,
                   held[ci] / 1048576.0, (double)held[ci] / (double)held[0], plan / 1048576.0, held[ci] / plan,
                   fwd[ci][reps / 2], bwd[ci][reps / 2], t, t / base_time, tc, tc / base_cpu,
                   hash[ci] == hash[0] ? "identical" : "DIFFERENT");
        }
        model_activation_split s;
        model_activation_bytes_policy(&cfg, B, T, MODEL_RECOMPUTE_NONE, 1, &s);
        printf("ckpt: blocks that rerun their forward in backward. act: the MEM_ACT peak (one block, laid out by the "
               "policy).\ncpu: process CPU seconds of forward+backward, the steadier figure on a shared machine.\n"
               "No policy touches what lies outside the blocks: %.1f of none's %.1f MiB (the logits, %.1f MiB, and "
               "backward's\ngradient scratch). m/plan: the model's extras over the planner's tensors, itemised in "
               "tests/unit/test_model_recompute.c.\n",
               s.outside / 1048576.0, s.total / 1048576.0, (double)B * T * cfg.Vp * 4 / 1048576.0);
        free(inputs);
        free(targets);
    }
    for (int ci = 0; ci < NCASES; ci++) model_free(models[ci]);
    return 0;
}
