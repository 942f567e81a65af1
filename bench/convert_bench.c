/* convert_bench.c: throughput of fp32 <-> fp16/bf16/e4m3/e5m2 array conversion, scalar reference vs each SIMD level. */
#include "base/clock.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/parse.h"
#include "base/rng.h"
#include "fp/convert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Throughput is bytes read + bytes written per second (GB/s, 1e9): an fp32 -> fp16 pass over n elements
 * moves 6n bytes. Each figure is the median of several timed passes after one warm-up pass, on arrays
 * far larger than the caches, so it measures what a training step would see. */

typedef struct {
    const char *name;
    size_t in_bytes, out_bytes; /* per element */
    int is_16bit_goal;          /* part of the goal "fp32 -> fp16/bf16: SIMD >= 4x scalar" (the encoders;
                                 * the decoders are a shift or a table walk and run into the memory roof) */
} conversion;

enum { C_F32_F16, C_F16_F32, C_F32_BF16, C_BF16_F32, C_F32_BF16_SR, C_F32_E4M3, C_E4M3_F32, C_F32_E5M2, C_E5M2_F32, NCONV };

static const conversion conversions[NCONV] = {
    [C_F32_F16] = {"fp32 -> fp16", 4, 2, 1},
    [C_F16_F32] = {"fp16 -> fp32", 2, 4, 0},
    [C_F32_BF16] = {"fp32 -> bf16", 4, 2, 1},
    [C_BF16_F32] = {"bf16 -> fp32", 2, 4, 0},
    [C_F32_BF16_SR] = {"fp32 -> bf16 (stochastic)", 4, 2, 0},
    [C_F32_E4M3] = {"fp32 -> e4m3 (saturating)", 4, 1, 0},
    [C_E4M3_F32] = {"e4m3 -> fp32", 1, 4, 0},
    [C_F32_E5M2] = {"fp32 -> e5m2 (saturating)", 4, 1, 0},
    [C_E5M2_F32] = {"e5m2 -> fp32", 1, 4, 0},
};

typedef struct {
    float *f32, *f32_out;
    uint16_t *h16;
    uint8_t *b8;
    size_t n;
} buffers;

static void run_once(int c, buffers *b) {
    switch (c) {
    case C_F32_F16: fp_f32_to_f16(b->h16, b->f32, b->n); break;
    case C_F16_F32: fp_f16_to_f32(b->f32_out, b->h16, b->n); break;
    case C_F32_BF16: fp_f32_to_bf16(b->h16, b->f32, b->n); break;
    case C_BF16_F32: fp_bf16_to_f32(b->f32_out, b->h16, b->n); break;
    case C_F32_BF16_SR: fp_f32_to_bf16_stochastic(b->h16, b->f32, b->n, 1234); break;
    case C_F32_E4M3: fp_f32_to_e4m3(b->b8, b->f32, b->n, 1); break;
    case C_E4M3_F32: fp_e4m3_to_f32(b->f32_out, b->b8, b->n); break;
    case C_F32_E5M2: fp_f32_to_e5m2(b->b8, b->f32, b->n, 1); break;
    case C_E5M2_F32: fp_e5m2_to_f32(b->f32_out, b->b8, b->n); break;
    }
}

/* The decoders read what the matching encoder wrote, so they see realistic patterns. */
static void prepare_input(int c, buffers *b) {
    if (c == C_F16_F32) fp_f32_to_f16(b->h16, b->f32, b->n);
    if (c == C_BF16_F32) fp_f32_to_bf16(b->h16, b->f32, b->n);
    if (c == C_E4M3_F32) fp_f32_to_e4m3(b->b8, b->f32, b->n, 1);
    if (c == C_E5M2_F32) fp_f32_to_e5m2(b->b8, b->f32, b->n, 1);
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_seconds(int c, buffers *b, int reps) {
    double t[64];
    run_once(c, b); /* warm-up: page faults, caches, frequency */
    for (int r = 0; r < reps; r++) {
        double t0 = mp_now();
        run_once(c, b);
        t[r] = mp_now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], compare_double);
    return reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
}

static void usage(FILE *out) {
    fprintf(out, "usage: convert_bench [--mb MB] [--reps N]\n"
                 "  --mb MB    size of the fp32 array in MB (default 64, i.e. 16M elements; 1..1024)\n"
                 "  --reps N   timed passes per figure, the median is reported (default 7; 1..63)\n"
                 "MIXPAR_SIMD does not apply: every level the CPU has is measured.\n");
}

int main(int argc, char **argv) {
    double mb = 64;
    int reps = 7;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc) {
            if (!parse_double(argv[++i], &mb) || !(mb >= 1 && mb <= 1024))
                MP_FAIL("--mb between 1 and 1024", "--mb '%s'", argv[i]);
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            int64_t r;
            if (!parse_i64(argv[++i], &r) || r < 1 || r > 63) MP_FAIL("--reps between 1 and 63", "--reps '%s'", argv[i]);
            reps = (int)r;
        } else {
            usage(stderr);
            return 2;
        }
    }

    buffers b;
    b.n = (size_t)(mb * 1e6 / sizeof(float));
    b.f32 = mem_alloc(b.n * sizeof(float), MEM_OTHER, "benchmark input");
    b.f32_out = mem_alloc(b.n * sizeof(float), MEM_OTHER, "benchmark output");
    b.h16 = mem_alloc(b.n * sizeof(uint16_t), MEM_OTHER, "benchmark 16-bit array");
    b.b8 = mem_alloc(b.n, MEM_OTHER, "benchmark 8-bit array");
    /* Activation-like data: normal values with magnitudes spread over 2^-12 .. 2^12, so every path
     * (normal, subnormal, overflow in fp8) is taken, as in a real tensor. */
    mp_rng rng;
    mp_rng_seed(&rng, 1);
    for (size_t i = 0; i < b.n; i++) b.f32[i] = mp_rng_normal(&rng) * ldexpf(1.0f, (int)(mp_rng_u32(&rng) % 25) - 12);

    fp_simd best = fp_simd_max_level();
    int nlevels = (int)best + 1;
    printf("convert_bench: %zu elements (%.0f MB of fp32), median of %d passes, GB/s = (bytes read + written) / s\n",
           b.n, b.n * 4 / 1e6, reps);
    printf("SIMD levels on this CPU: ");
    for (int l = 0; l < nlevels; l++) printf("%s%s", l ? ", " : "", fp_simd_name((fp_simd)l));
    printf("\n\n%-27s", "conversion");
    for (int l = 0; l < nlevels; l++) printf(" %9s", fp_simd_name((fp_simd)l));
    printf(" %14s\n", "best/scalar");

    /* The roof: memcpy of the fp32 array, bytes read + written, as the conversions count them. */
    double copy_gbps;
    {
        double t[64];
        memcpy(b.f32_out, b.f32, b.n * sizeof(float));
        for (int r = 0; r < reps; r++) {
            double t0 = mp_now();
            memcpy(b.f32_out, b.f32, b.n * sizeof(float));
            t[r] = mp_now() - t0;
        }
        qsort(t, (size_t)reps, sizeof t[0], compare_double);
        copy_gbps = 2.0 * (double)b.n * sizeof(float) / t[reps / 2] / 1e9;
    }

    int goal_met = 1;
    double worst_goal_ratio = 1e9;
    const char *missed[NCONV];
    double missed_simd[NCONV], missed_scalar[NCONV];
    int nmissed = 0;
    for (int c = 0; c < NCONV; c++) {
        double gbps[FP_SIMD_NLEVELS] = {0};
        double bytes = (double)b.n * (double)(conversions[c].in_bytes + conversions[c].out_bytes);
        for (int l = 0; l < nlevels; l++) {
            fp_set_simd_level((fp_simd)l);
            prepare_input(c, &b);
            gbps[l] = bytes / median_seconds(c, &b, reps) / 1e9;
        }
        double best_simd = 0;
        for (int l = 1; l < nlevels; l++)
            if (gbps[l] > best_simd) best_simd = gbps[l];
        double ratio = nlevels > 1 ? best_simd / gbps[0] : 1.0;
        printf("%-27s", conversions[c].name);
        for (int l = 0; l < nlevels; l++) printf(" %9.2f", gbps[l]);
        printf(" %13.1fx\n", ratio);
        if (conversions[c].is_16bit_goal) {
            if (ratio < 4.0) {
                goal_met = 0;
                missed[nmissed] = conversions[c].name;
                missed_simd[nmissed] = best_simd;
                missed_scalar[nmissed++] = gbps[0];
            }
            if (ratio < worst_goal_ratio) worst_goal_ratio = ratio;
        }
    }
    printf("%-27s %9.2f   (the memory roof: bytes read + written by memcpy of the fp32 array)\n", "memcpy", copy_gbps);
    fp_set_simd_level(best);
    if (nlevels > 1) {
        printf("\ngoal fp32 -> fp16 and fp32 -> bf16, SIMD >= 4x scalar: %s (lowest ratio %.1fx)\n", goal_met ? "met" : "NOT met",
               worst_goal_ratio);
        for (int k = 0; k < nmissed; k++)
            printf("  %s: SIMD runs at %.0f%% of memcpy bandwidth; with the scalar loop at %.2f GB/s the memory "
                   "roof allows at most %.1fx\n",
                   missed[k], 100 * missed_simd[k] / copy_gbps, missed_scalar[k], copy_gbps / missed_scalar[k]);
    }
    else
        printf("\nno SIMD level on this CPU: only the scalar reference was measured\n");
    mem_free(b.f32);
    mem_free(b.f32_out);
    mem_free(b.h16);
    mem_free(b.b8);
    return 0;
}
