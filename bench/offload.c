/* offload.c: ZeRO-Offload side by side with the optimizer on the device, in one run: GPT-2 124M, B=4, T=64,
 * fp32, AdamW. For each: the device memory peak (every tag but host), the host pool's peak, the median step
 * time, and the seconds of the offload's copies and host update; then the ratios, and whether the two runs'
 * losses are the same bits. On this CPU-only build the copies are memcpys within one RAM: the ratio to watch on
 * a GPU is copy bytes over PCIe bandwidth, printed beside them. */
#include "base/clock.h"
#include "base/mem.h"
#include "base/rng.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "train/step.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 4, T = 64 };

typedef struct {
    const char *name;
    bool offload;
    double step_s, copy_s, update_s, optimizer_s; /* median step; means of the rest over the timed steps */
    size_t device_peak, host_peak, optim_peak, copied; /* bytes; copied: down + up per step */
    float losses[64];
} bench_run;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A fresh model, the step with or without offload, a warm-up step and `steps` timed ones; the peaks are of
 * this run alone (the previous run freed everything, and the peaks start from what is held now). */
static void run(bench_run *r, int steps, const int *inputs, const int *targets) {
    model_config cfg = {.arch = MODEL_GPT2, .V = 50257, .maxT = 1024, .L = 12, .C = 768, .NH = 12, .tied = true};
    mem_reset_peaks();
    size_t device_before = mem_current_total(), host_before = mem_current(MEM_HOST);
    model *m = model_create(&cfg);
    model_init(m, 1);
    optim_config opt = optim_config_default(optim_kind_from_name("adamw"));
    optim_config_set(&opt, "lr", 6e-4);
    optim_config_set(&opt, "weight_decay", 0.1);
    train_step ts;
    if (r->offload) train_step_init_offload(&ts, m, &opt, 1.0, NULL);
    else train_step_init(&ts, m, &opt, 1.0);
    double times[64];
    for (int s = -1; s < steps; s++) { /* step -1 warms up: page faults, thread start */
        double t0 = mp_now();
        train_step_result res = train_step_run(&ts, inputs, targets, B, T, 1, 6e-4);
        double t = mp_now() - t0;
        if (s < 0) continue;
        times[s] = t;
        r->losses[s] = res.loss;
        r->copy_s += res.offload.copy_s / steps;
        r->update_s += res.offload.update_s / steps;
        r->optimizer_s += res.t_optimizer / steps;
        r->copied = res.offload.d2h_bytes + res.offload.h2d_bytes;
        printf("  %-8s step %d  loss %.5f  %.3f s  (optimizer %.3f: copies %.4f, host update %.3f)\n", r->name, s,
               res.loss, t, res.t_optimizer, res.offload.copy_s, res.offload.update_s);
    }
    qsort(times, (size_t)steps, sizeof *times, cmp_double);
    r->step_s = times[steps / 2];
    r->device_peak = mem_peak_total() - device_before;
    r->host_peak = mem_peak(MEM_HOST) - host_before;
    r->optim_peak = mem_peak(MEM_OPTIM);
    train_step_free(&ts);
    model_free(m);
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 4;
    if (steps < 2) steps = 2;
    if (steps > 64) steps = 64;
    printf("offload: GPT-2 124M (L=12, C=768, NH=12), B=%d, T=%d, fp32, AdamW, %d threads; the optimizer on the "
           "device, then ZeRO-Offload (state and fp32 master in the host pool, the update on the host)\n",
           B, T, omp_get_max_threads());
    int *inputs = malloc(sizeof(int) * B * T), *targets = malloc(sizeof(int) * B * T);
    if (!inputs || !targets) return 1;
    mp_rng rng;
    mp_rng_seed(&rng, 7);
    for (int i = 0; i < B * T; i++) inputs[i] = (int)(mp_rng_u32(&rng) % 50257u);
    for (int i = 0; i < B * T; i++) targets[i] = (int)(mp_rng_u32(&rng) % 50257u);

    bench_run runs[2] = {{.name = "device"}, {.name = "offload", .offload = true}};
    for (int i = 0; i < 2; i++) run(&runs[i], steps, inputs, targets);
    bench_run *d = &runs[0], *o = &runs[1];

    printf("\n%-8s %14s %14s %14s %9s %9s %9s %8s\n", "optimizer", "device_peak_MB", "optim_peak_MB", "host_peak_MB",
           "step_s", "copy_s", "update_s", "copy%");
    for (int i = 0; i < 2; i++) {
        bench_run *r = &runs[i];
        printf("%-8s %14.1f %14.1f %14.1f %9.3f %9.4f %9.3f %7.2f%%\n", r->name, r->device_peak / 1e6,
               r->optim_peak / 1e6, r->host_peak / 1e6, r->step_s, r->copy_s, r->update_s, 100 * r->copy_s / r->step_s);
    }
    bool same = memcmp(d->losses, o->losses, sizeof(float) * (size_t)steps) == 0;
    printf("\nratios (offload / device): device peak %.3f, step time %.3f; copies %.2f%% of the offloaded step, "
           "host update %.1f%%\n", (double)o->device_peak / (double)d->device_peak, o->step_s / d->step_s,
           100 * o->copy_s / o->step_s, 100 * o->update_s / o->step_s);
    printf("copies: %.1f MB per step (gradients down + weights up); at 25 GB/s (PCIe 4.0 x16) that would be %.3f s, "
           "%.1f%% of this step\n", o->copied / 1e6, o->copied / 25e9, 100 * (o->copied / 25e9) / o->step_s);
    printf("losses of the two runs: %s\n", same ? "identical, bit for bit" : "DIFFERENT");
    free(inputs);
    free(targets);
    return same ? 0 : 1;
}
