/* test_prof.c: Criterion tests of the profiler (prof/): exposed time of overlapping intervals, the model's ops
 * recorded as kernels with their shapes' FLOPs, the same loss with the profiler on and off, and misuse stopping. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "ops/gemm_f32.h"
#include "prof/gemm_kernels.h"
#include "prof/kernel_costs.h"
#include "prof/prof.h"
#include "prof/roofline.h"

static double exposed(prof_interval *busy, size_t nb, prof_interval *cover, size_t nc) {
    return prof_exposed_seconds(busy, nb, cover, nc);
}

Test(prof, exposed_time_of_intervals) {
    prof_interval b1[] = {{0, 10}}, c1[] = {{2, 3}, {5, 7}};
    cr_expect_float_eq(exposed(b1, 1, c1, 2), 7.0, 1e-12, "10 s of comm, 3 s covered");
    prof_interval b2[] = {{4, 6}, {0, 1}, {5, 8}}, c2[] = {{0, 10}};
    cr_expect_float_eq(exposed(b2, 3, c2, 1), 0.0, 1e-12, "all covered");
    prof_interval b3[] = {{0, 2}, {1, 3}}, c3[] = {{2.5, 9}};
    cr_expect_float_eq(exposed(b3, 2, c3, 1), 2.5, 1e-12, "overlapping comm counted once: [0, 3] less [2.5, 3]");
    prof_interval b4[] = {{3, 3}, {5, 4}};
    cr_expect_float_eq(exposed(b4, 2, NULL, 0), 0.0, 1e-12, "empty intervals count nothing");
    prof_interval b5[] = {{0, 4}}, c5[] = {{1, 2}, {1.5, 3}, {-1, 0.5}};
    cr_expect_float_eq(exposed(b5, 1, c5, 3), 1.5, 1e-12, "cover [-1, 0.5] and [1, 3]: exposed [0.5, 1] and [3, 4]");
}

Test(prof, model_ops_are_kernels_with_their_shapes_cost) {
    model_config c = {.arch = MODEL_GPT2, .V = 64, .maxT = 8, .L = 2, .C = 16, .NH = 2};
    model_config_complete(&c);
    model *m = model_create(&c);
    model_init(m, 3);
    enum { B = 2, T = 8 };
    int in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) in[i] = i % 64, tg[i] = (i * 7) % 64;
    float off = model_forward(m, in, tg, B, T);
    model_backward(m, 1.0f);
    prof *p = prof_create(0, NULL, NULL);
    prof_activate(p);
    float on = model_forward(m, in, tg, B, T);
    model_backward(m, 1.0f);
    prof_activate(NULL);
    cr_expect(memcmp(&on, &off, sizeof on) == 0, "the same loss with the profiler on (%.9g) and off (%.9g)", on, off);
    const prof_stat *qkv = prof_stat_find(p, "matmul_fwd:qkv"), *blk = prof_stat_find(p, "block_fwd");
    cr_assert(qkv && blk, "matmul_fwd:qkv and block_fwd recorded");
    cr_expect_eq(qkv->calls, 2, "one qkv matmul per layer");
    cr_expect_eq(qkv->kind, PROF_KIND_KERNEL);
    prof_cost one = prof_cost_matmul_forward(B * T, 16, 48);
    cr_expect_float_eq(qkv->cost.flops, 2 * one.flops, 1e-9, "FLOPs from the shapes, summed over the layers");
    cr_expect_eq(blk->calls, 2);
    cr_expect(blk->self >= 0 && blk->self <= blk->total);
    size_t n;
    const prof_stat *st = prof_stats(p, &n);
    for (size_t i = 0; i < n; i++)
        if (st[i].kind == PROF_KIND_KERNEL) cr_expect(st[i].cost.bytes > 0, "%s moves bytes", st[i].name);
    prof_free(p);
    model_free(m);
}

Test(prof, mismatched_end_stops_with_exit_2, .exit_code = 2) {
    prof *p = prof_create(0, NULL, NULL);
    prof_begin(p, "outer");
    prof_begin(p, "inner");
    prof_end(p, "outer");
}

Test(prof, roof_measurements_are_positive) {
    double bw = prof_measure_triad_bandwidth(1 << 16), flops = prof_measure_gemm_flops(64);
    cr_expect(bw > 0 && isfinite(bw), "triad bandwidth %g", bw);
    cr_expect(flops > 0 && isfinite(flops), "gemm FLOP/s %g", flops);
}

char *openblas_get_corename(void); /* OpenBLAS's own API */

/* The line beside every sgemm peak says what runs the fp32 products. Where the core's AVX-512 kernel does, it says
 * so, and a pin of OpenBLAS's kernels is named but costs nothing. With OpenBLAS, it names the kernel set and how it
 * was chosen; a pin of a 256-bit set is called out only on a CPU with AVX-512, whatever the environment of the
 * machine running the test. */
Test(prof, gemm_kernels_line_names_the_set_and_how_it_was_chosen) {
    char line[400], expect[128];
    const char *saved = getenv("OPENBLAS_CORETYPE");
    char *saved_copy = saved ? strdup(saved) : NULL;
    if (gemm_f32_use(true)) {
        setenv("OPENBLAS_CORETYPE", "Haswell", 1);
        prof_describe_gemm_kernels(line, sizeof line);
        cr_expect(strstr(line, "fp32 products: mixpar's AVX-512 kernel") == line, "the core's kernel is named: %s", line);
        cr_expect(strstr(line, "OPENBLAS_CORETYPE=Haswell") != NULL, "the pin is named: %s", line);
        cr_expect(!prof_gemm_kernels_pinned_narrow(), "a pin of OpenBLAS's kernels does not narrow the core's");
        gemm_f32_use(false); /* from here on, the line for OpenBLAS */
    }
    snprintf(expect, sizeof expect, "OpenBLAS kernels: %s", openblas_get_corename());

    unsetenv("OPENBLAS_CORETYPE");
    prof_describe_gemm_kernels(line, sizeof line);
    cr_expect(strncmp(line, expect, strlen(expect)) == 0, "names the running set: %s", line);
    cr_expect(strstr(line, "OpenBLAS's choice") != NULL, "no pin: OpenBLAS chose: %s", line);
    cr_expect(!prof_gemm_kernels_pinned_narrow(), "nothing is pinned");

    setenv("OPENBLAS_CORETYPE", "SomeSet", 1);
    prof_describe_gemm_kernels(line, sizeof line);
    cr_expect(strstr(line, "OPENBLAS_CORETYPE=SomeSet") != NULL, "the pin is named: %s", line);
    const bool pinned_narrow = prof_gemm_kernels_pinned_narrow();
    cr_expect(pinned_narrow == (strstr(line, "unset OPENBLAS_CORETYPE") != NULL), "the advice matches: %s", line);
    if (pinned_narrow) cr_expect(__builtin_cpu_supports("avx512f"), "a narrow pin is only called out with AVX-512");

    char tiny[8]; /* a short buffer is cut, and terminated */
    prof_describe_gemm_kernels(tiny, sizeof tiny);
    cr_expect(strlen(tiny) == sizeof tiny - 1);

    if (saved_copy) setenv("OPENBLAS_CORETYPE", saved_copy, 1);
    else unsetenv("OPENBLAS_CORETYPE");
    free(saved_copy);
    gemm_f32_use(true);
}
