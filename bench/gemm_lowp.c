/* gemm_lowp.c: GFLOP/s of the linear layer's three products in fp32 (the core's kernel, OpenBLAS) and bf16 (decode+sgemm, AVX512-BF16, AMX) on GPT-2 shapes. */
#include "base/clock.h"
#include "base/mem.h"
#include "fp/convert.h"
#include "ops/gemm_bf16.h"
#include "ops/gemm_f32.h"
#include "ops/matmul.h"
#include "ops/matmul_lowp.h"
#include "prof/bf16_peak.h"

#include "bench_util.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Usage: gemm_lowp [repetitions (default 5)] [--small]   (--small: N = 64 instead of 256)
 *
 * Each product is timed for every path in turn, repetition after repetition, so a neighbour's load on
 * this shared machine hits all of them alike; a figure is the median of the repetitions after one
 * warm-up round. FLOPs are 2 * N * C * OC per product. The ratios are speeds against the fp32 path the model
 * runs: the core's own kernel (ops/gemm_f32.c) where the CPU has AVX-512. "fp32 openblas" is the same product on
 * OpenBLAS, with the kernel set the environment gives it (OPENBLAS_CORETYPE), side by side.
 *
 * First it measures the ceilings: how many VDPBF16PS, fp32 FMA (512-bit) and AMX TDPBF16PS instructions
 * one core retires per second with plenty of independent accumulators. One VDPBF16PS is 32 multiply-adds,
 * one FMA 16, one TDPBF16PS 8192 (16 x 16 x 32).
 *
 * The bf16 engine's roof is measured twice. Once at the start, one core's best of three, times the threads.
 * And beside every product: after each repetition's paths, all the threads run the instruction loop at once
 * (about a millisecond), and a product's roof is the median of those bursts, the same statistic as its
 * time. On this shared machine the clock moves with the neighbours' load, by up to 10% within a run; the
 * start's best does not move with it, the bursts do. */

/* ------------------------------------------------------------------ instruction rates */

enum { CHAINS = 16, RATE_ITERS = 4000000, ROOF_BURST_ITERS = 400000 };

__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl"), noinline)) static float rate_dpbf16(long iters) {
    __m512 acc[CHAINS]; /* distinct starting values, or the compiler merges identical chains */
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3c00);
    for (long k = 0; k < iters; k++) {
        __asm__ volatile("" : "+v"(a), "+v"(b)); /* the operands "change": nothing can be hoisted */
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    }
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f"), noinline)) static float rate_fma(long iters) {
    __m512 acc[CHAINS];
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    __m512 a = _mm512_set1_ps(1e-7f), b = _mm512_set1_ps(1e-7f);
    for (long k = 0; k < iters; k++) {
        __asm__ volatile("" : "+v"(a), "+v"(b));
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
    }
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
    return _mm512_reduce_add_ps(s);
}

/* 4 independent C tiles (tmm0-3) fed by the same A and B tiles (tmm4, tmm6), as in gemm_bf16's AMX block. */
static double rate_amx_seconds(long iters) {
    struct __attribute__((packed, aligned(64))) {
        uint8_t palette, start_row, reserved[14];
        uint16_t bytes_per_row[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.bytes_per_row[t] = 64, cfg.rows[t] = 16;
    static float zeros[16 * 16] __attribute__((aligned(64)));
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg) : "memory");
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm4" ::"r"(zeros), "r"(64L) : "memory");
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm6" ::"r"(zeros), "r"(64L) : "memory");
    __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" ::);
    double t0 = mp_now();
    for (long k = 0; k < iters; k++)
        __asm__ volatile("tdpbf16ps %%tmm6, %%tmm4, %%tmm0\n\ttdpbf16ps %%tmm6, %%tmm4, %%tmm1\n\t"
                         "tdpbf16ps %%tmm6, %%tmm4, %%tmm2\n\ttdpbf16ps %%tmm6, %%tmm4, %%tmm3" ::);
    double t = mp_now() - t0;
    __asm__ volatile("tilerelease" ::: "memory");
    return t;
}

/* The engine's rate with every thread running its instruction loop at once, in GFLOP/s: each thread runs `iters`
 * rounds of 16 VDPBF16PS (or 4 TDPBF16PS) after a barrier, over the time from the first start to the last end
 * (so waking the threads is not counted, and a straggler counts against the roof, not for it). */
static double engine_rate_all_threads(bool amx, long iters) {
    volatile float sink = 0;
    double first_start = 1e300, last_end = 0;
    int team = 1;
#pragma omp parallel reduction(min : first_start) reduction(max : last_end)
    {
#pragma omp single
        team = omp_get_num_threads(); /* the threads this region got (the implicit barrier follows) */
        first_start = mp_now();
        if (amx) rate_amx_seconds(iters / 16);
        else sink += rate_dpbf16(iters);
        last_end = mp_now();
    }
    const double seconds = last_end - first_start;
    (void)sink;
    const double flop_per_thread = amx ? 4.0 * (iters / 16) * 16384 : (double)CHAINS * iters * 64;
    return team * flop_per_thread / seconds / 1e9;
}

/* Prints the rates; returns the bf16 engine's peak of one core in GFLOP/s (0 without one), and sets *fma_peak to
 * fp32 FMA's (0 when not measured). */
static double report_instruction_rates(double *fma_peak) {
    *fma_peak = 0;
    if (!gemm_bf16_available()) {
        printf("this CPU has no AVX512_BF16: only the fp32 and decode+sgemm paths are measured\n\n");
        return 0;
    }
    double best_dp = 1e30, best_fma = 1e30;
    volatile float sink = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = mp_now();
        sink += rate_dpbf16(RATE_ITERS);
        double t1 = mp_now();
        sink += rate_fma(RATE_ITERS);
        double t2 = mp_now();
        if (t1 - t0 < best_dp) best_dp = t1 - t0;
        if (t2 - t1 < best_fma) best_fma = t2 - t1;
    }
    const double instr = (double)CHAINS * RATE_ITERS;
    const double dp_rate = instr / best_dp / 1e9, fma_rate = instr / best_fma / 1e9;
    printf("one core, 512-bit, %d independent chains:\n", CHAINS);
    printf("  VDPBF16PS    %5.2f G instructions/s x 64 flop = %6.1f GFLOP/s\n", dp_rate, 64 * dp_rate);
    printf("  VFMADD231PS  %5.2f G instructions/s x 32 flop = %6.1f GFLOP/s\n", fma_rate, 32 * fma_rate);
    printf("  VDPBF16PS peak / fp32 FMA peak = %.2f\n", 2.0 * dp_rate / fma_rate);
    *fma_peak = 32 * fma_rate;
    double engine_peak = 64 * dp_rate;
    if (gemm_bf16_best() == GEMM_BF16_AMX) {
        const long amx_iters = RATE_ITERS / 16;
        double best_amx = 1e30;
        for (int r = 0; r < 3; r++) {
            double t = rate_amx_seconds(amx_iters);
            if (t < best_amx) best_amx = t;
        }
        const double amx_rate = 4.0 * amx_iters / best_amx / 1e9;
        printf("  TDPBF16PS    %5.3f G instructions/s x 16384 flop = %6.1f GFLOP/s (%.1fx fp32 FMA)\n", amx_rate,
               16384 * amx_rate, 16384 * amx_rate / (32 * fma_rate));
        engine_peak = 16384 * amx_rate;
    }
    printf("\n");
    (void)sink;
    return engine_peak;
}

/* ------------------------------------------------------------------ the products */

typedef struct {
    int N, C, OC;
    const char *name;
} shape;

/* GPT-2 124M's linear layers at B*T = 256 positions, C = 768 */
static const shape shapes[] = {
    {256, 768, 2304, "attn qkv"}, {256, 768, 768, "attn proj"}, {256, 768, 3072, "mlp fc"},
    {256, 3072, 768, "mlp proj"}, {256, 768, 50304, "lm head"},
};
enum { NSHAPES = sizeof shapes / sizeof shapes[0] };

enum { P_FWD, P_DINP, P_DWEIGHT, NPRODUCTS };
static const char *product_names[NPRODUCTS] = {"out = inp @ W^T", "dinp = dout @ W", "dW += dout^T @ inp"};

enum { PATH_FP32, PATH_OPENBLAS, PATH_DECODE, PATH_AVX512, PATH_AMX, NPATHS };
static const char *path_names[NPATHS] = {"fp32", "fp32 openblas", "decode+sgemm", "avx512-bf16", "amx-bf16"};

typedef struct {
    int N, C, OC;
    float *inp, *weight, *dout, *out, *dinp, *dweight;   /* fp32 */
    uint16_t *inp16, *weight16, *dout16;                 /* bf16 */
} operands;

static void run(operands *o, int product, int path) {
    const int N = o->N, C = o->C, OC = o->OC;
    if (path == PATH_FP32 || path == PATH_OPENBLAS) {
        gemm_f32_use(path == PATH_FP32);
        if (product == P_FWD) matmul_forward(o->out, o->inp, o->weight, NULL, N, C, OC);
        else if (product == P_DINP) matmul_backward(o->dinp, NULL, NULL, o->dout, o->inp, o->weight, N, C, OC);
        else matmul_backward(NULL, o->dweight, NULL, o->dout, o->inp, o->weight, N, C, OC);
        gemm_f32_use(true);
        return;
    }
    matmul_lowp_force_portable(path == PATH_DECODE);
    if (path != PATH_DECODE) gemm_bf16_use(path == PATH_AMX ? GEMM_BF16_AMX : GEMM_BF16_AVX512);
    if (product == P_FWD) matmul_lowp_forward(o->out, o->inp16, o->weight16, NULL, N, C, OC, LOWP_BF16);
    else if (product == P_DINP)
        matmul_lowp_backward(o->dinp, NULL, NULL, o->dout16, o->inp16, o->weight16, N, C, OC, LOWP_BF16);
    else matmul_lowp_backward(NULL, o->dweight, NULL, o->dout16, o->inp16, o->weight16, N, C, OC, LOWP_BF16);
    matmul_lowp_force_portable(false);
    gemm_bf16_use(gemm_bf16_best());
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint16_t *bf16_copy(const float *src, long n, const char *what) {
    uint16_t *dst = mem_alloc((size_t)n * sizeof(uint16_t), MEM_OTHER, what);
    fp_f32_to_bf16(dst, src, (size_t)n);
    return dst;
}

int main(int argc, char **argv) {
    int reps = 5, rows = 256;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--small") == 0) rows = 64;
        else if (strcmp(argv[i], "--peak") == 0) { /* the machine's sgemm peak alone, all threads: for scripts */
            double best = 0;
            for (int r = 0; r < 3; r++) {
                double p = bench_sgemm_peak_gflops();
                if (p > best) best = p;
            }
            printf("%.1f\n", best);
            return 0;
        } else if (strcmp(argv[i], "--kernels") == 0) { /* what runs the fp32 products: for scripts */
            char line[300];
            printf("%s\n", prof_describe_gemm_kernels(line, sizeof line));
            return 0;
        } else if (atoi(argv[i]) > 0) reps = atoi(argv[i]);
        else {
            fprintf(stderr, "usage: gemm_lowp [repetitions] [--small] | gemm_lowp --peak (the sgemm peak in GFLOP/s, "
                            "all threads, best of 3) | gemm_lowp --kernels (what runs the fp32 products)\n");
            return 2;
        }
    }
    /* the paths this machine runs: fp32 (twice) and decode+sgemm always, then each bf16 engine it has */
    const int paths = PATH_DECODE + 1 + (int)gemm_bf16_best();
    printf("gemm_lowp: the linear layer's products, GPT-2 124M shapes, N = %d rows, %d threads, median of %d\n\n",
           rows, omp_get_max_threads(), reps);
    double fma_peak_core;
    const double engine_peak_core = report_instruction_rates(&fma_peak_core);
    double peak = bench_sgemm_peak_gflops();
    printf("sgemm peak (1536^3, this run): %.1f GFLOP/s\n", peak);
    /* the bf16 kernel's own peak, measured the same way (1536^3 on the model's path), at the start and at the end */
    double kernel_peak = paths > PATH_AVX512 ? prof_measure_bf16_gemm_flops(1536) / 1e9 : 0;
    if (kernel_peak > 0)
        printf("%s kernel's own peak (1536^3, at the start): %.1f GFLOP/s\n", path_names[paths - 1], kernel_peak);
    bench_print_gemm_kernels();
    printf("\nGFLOP/s (and speed against fp32)\n");
    printf("%-10s %-19s", "layer", "product");
    for (int path = 0; path < paths; path++) printf(" %20s", path_names[path]);
    if (paths > PATH_AVX512) printf("  of its roof beside it");
    printf("\n");
    double *times = malloc(sizeof(double) * (size_t)reps * NPATHS), *roofs = malloc(sizeof(double) * (size_t)reps);
    const bool amx = gemm_bf16_best() == GEMM_BF16_AMX;
    double log_ratio_sum = 0, log_gflops_sum = 0, log_roof_sum = 0, log_share_sum = 0;
    double log_fp32_sum = 0, log_fp32_against_openblas_sum = 0;
    int ratio_count = 0;
    for (int s = 0; s < NSHAPES; s++) {
        operands o = {.N = rows, .C = shapes[s].C, .OC = shapes[s].OC};
        const long nc = (long)o.N * o.C, oc_c = (long)o.OC * o.C, n_oc = (long)o.N * o.OC;
        o.inp = bench_buffer(nc, "inp", 1, 1);
        o.weight = bench_buffer(oc_c, "weight", 0.05f, 2);
        o.dout = bench_buffer(n_oc, "dout", 0.01f, 3);
        o.out = bench_buffer(n_oc, "out", 0, 4);
        o.dinp = bench_buffer(nc, "dinp", 0, 5);
        o.dweight = bench_buffer(oc_c, "dweight", 0, 6);
        o.inp16 = bf16_copy(o.inp, nc, "inp bf16");
        o.weight16 = bf16_copy(o.weight, oc_c, "weight bf16");
        o.dout16 = bf16_copy(o.dout, n_oc, "dout bf16");
        const double flops = 2.0 * o.N * o.C * o.OC;
        for (int p = 0; p < NPRODUCTS; p++) {
            for (int r = -1; r < reps; r++) /* r = -1 warms up: first touch, packing buffers, threads */
                for (int path = 0; path < paths; path++) {
                    double t0 = mp_now();
                    run(&o, p, path);
                    if (r >= 0) times[path * reps + r] = mp_now() - t0;
                    if (path == paths - 1 && paths > PATH_AVX512 && r >= 0)
                        roofs[r] = engine_rate_all_threads(amx, ROOF_BURST_ITERS); /* beside this repetition */
                }
            double gflops[NPATHS] = {0}, median[NPATHS] = {0};
            for (int path = 0; path < paths; path++) {
                qsort(times + path * reps, (size_t)reps, sizeof(double), cmp_double);
                median[path] = times[path * reps + reps / 2];
                gflops[path] = flops / median[path] / 1e9;
            }
            log_fp32_sum += log(gflops[PATH_FP32]);
            log_fp32_against_openblas_sum += log(median[PATH_OPENBLAS] / median[PATH_FP32]);
            printf("%-10s %-19s", p == 0 ? shapes[s].name : "", product_names[p]);
            for (int path = 0; path < paths; path++) {
                if (path == PATH_FP32) printf(" %20.1f", gflops[path]);
                else printf(" %12.1f (%4.2fx)", gflops[path], median[PATH_FP32] / median[path]);
            }
            if (paths > PATH_AVX512) {
                qsort(roofs, (size_t)reps, sizeof(double), cmp_double);
                const double roof = roofs[reps / 2];
                printf("  %5.1f%% of %.1f", 100 * gflops[paths - 1] / roof, roof);
                log_ratio_sum += log(median[PATH_FP32] / median[paths - 1]);
                log_gflops_sum += log(gflops[paths - 1]);
                log_roof_sum += log(roof);
                log_share_sum += log(gflops[paths - 1] / roof);
                ratio_count++;
            }
            printf("\n");
        }
        mem_free(o.inp), mem_free(o.weight), mem_free(o.dout), mem_free(o.out), mem_free(o.dinp);
        mem_free(o.dweight), mem_free(o.inp16), mem_free(o.weight16), mem_free(o.dout16);
    }
    const int products = NSHAPES * NPRODUCTS;
    printf("\nfp32 against fp32 openblas (the kernel set named above), geometric mean over the %d products: %.2fx\n",
           products, exp(log_fp32_against_openblas_sum / products));
    if (fma_peak_core > 0) {
        const double roof = fma_peak_core * omp_get_max_threads(), mean = exp(log_fp32_sum / products);
        printf("fp32 against the FMA instruction peak (%.1f GFLOP/s: one core's best at the start x %d threads), "
               "geometric mean: %.1f GFLOP/s = %.1f%%\n", roof, omp_get_max_threads(), mean, 100 * mean / roof);
    }
    if (ratio_count) {
        printf("%s against fp32, geometric mean over the %d products: %.2fx (goal: >= 1.0x)\n",
               path_names[paths - 1], ratio_count, exp(log_ratio_sum / ratio_count));
        /* the engine's own roof: one core's instruction rate above, times the threads the products ran on */
        const double roof = engine_peak_core * omp_get_max_threads(), mean = exp(log_gflops_sum / ratio_count);
        printf("%s against its instruction peak (%.1f GFLOP/s: one core's best at the start x %d threads), "
               "geometric mean: %.1f GFLOP/s = %.1f%%\n",
               path_names[paths - 1], roof, omp_get_max_threads(), mean, 100 * mean / roof);
        printf("%s against its peak on all %d threads at once, measured beside each product (geometric mean of the "
               "medians: %.1f GFLOP/s), geometric mean of the products' shares: %.1f%%\n",
               path_names[paths - 1], omp_get_max_threads(), exp(log_roof_sum / ratio_count),
               100 * exp(log_share_sum / ratio_count));
        const double end_peak = prof_measure_bf16_gemm_flops(1536) / 1e9;
        if (end_peak > kernel_peak) kernel_peak = end_peak; /* the better of the two: the closer to the kernel's best */
        printf("%s against its own peak, a 1536^3 product on the same path (the better of the run's start and end: "
               "%.1f GFLOP/s), geometric mean: %.1f%% (issue 21's goal, read as the sgemm peak is read: >= 85%%)\n",
               path_names[paths - 1], kernel_peak, 100 * mean / kernel_peak);
    }
    free(times), free(roofs);
    return 0;
}
