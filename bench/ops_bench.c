/* ops_bench.c: time every ops/ kernel, forward and backward, at GPT-2 124M shapes (B=4, T=64), and sum a step;
 * the non-GEMM kernels' achieved GB/s against the triad bandwidth measured in the same run, and the kernels that
 * have copies per instruction set level (ops/isa.h) timed on every level this CPU has. */
#include "base/clock.h"
#include "base/mem.h"
#include "base/rng.h"
#include "ops/attention.h"
#include "ops/crossentropy.h"
#include "ops/encoder.h"
#include "ops/gelu.h"
#include "ops/isa.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"
#include "ops/residual.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"
#include "prof/kernel_costs.h"
#include "prof/roofline.h"

#include "bench_util.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GPT-2 124M, and the batch the project's step-time goal is stated for. */
enum { B = 4, T = 64, N = B * T, C = 768, NH = 12, HS = C / NH, L = 12, V = 50257, VP = 50304, F4 = 4 * C };
/* LLaMA-style extras at the same width: 4 kv heads, SwiGLU hidden size 2048. */
enum { KVH = 4, FS = 2048 };

/* Every op is a closure over this state, so the timing loop is one function. */
typedef struct {
    float *x, *y, *dx, *dy;           /* (N, C) activations and their grads */
    float *mean, *rstd;               /* (N) */
    float *w_c, *b_c, *dw_c, *db_c;   /* (C) layernorm parameters and grads */
    float *big_in, *big_out, *dbig_in, *dbig_out; /* up to (N, 4C) or (N, 2*FS) */
    float *weight, *dweight, *bias, *dbias;       /* up to (VP, C) */
    float *qkv, *dqkv, *att;          /* (N, 3C), (B, NH, T, T) */
    float *logits, *losses, *lse, *dloss;
    int *tokens, *targets;
    int oc, ic;                       /* the matmul being timed: OC outputs, C inputs */
} bench_state;

typedef void (*bench_fn)(bench_state *s);

static double seconds_per_call(bench_fn fn, bench_state *s, int reps) {
    fn(s); /* warm-up: page faults, BLAS buffers, thread start */
    double best = 1e30;
    /* Minimum over reps: the least disturbed run, which is what a kernel can do. */
    for (int r = 0; r < reps; r++) {
        double t0 = mp_now();
        fn(s);
        double t = mp_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

static void f_encoder(bench_state *s) { encoder_forward(s->y, s->tokens, s->weight, s->big_in, B, T, C, V); }
static void b_encoder(bench_state *s) { encoder_backward(s->dweight, s->dbig_in, s->dy, s->tokens, B, T, C, V); }
static void f_layernorm(bench_state *s) { layernorm_forward(s->y, s->mean, s->rstd, s->x, s->w_c, s->b_c, N, C); }
static void b_layernorm(bench_state *s) {
    layernorm_backward(s->dx, s->dw_c, s->db_c, s->dy, s->x, s->w_c, s->mean, s->rstd, N, C);
}
static void f_matmul(bench_state *s) {
    matmul_forward(s->big_out, s->big_in, s->weight, s->oc == VP ? NULL : s->bias, N, s->ic, s->oc);
}
static void b_matmul(bench_state *s) {
    matmul_backward(s->dbig_in, s->dweight, s->oc == VP ? NULL : s->dbias, s->dbig_out, s->big_in, s->weight, N, s->ic,
                    s->oc);
}
static void f_attention(bench_state *s) { attention_forward(s->y, s->att, s->qkv, B, T, NH, NH, HS); }
static void b_attention(bench_state *s) { attention_backward(s->dqkv, s->dy, s->qkv, s->att, B, T, NH, NH, HS); }
static void f_gelu(bench_state *s) { gelu_forward(s->big_out, s->big_in, (long)N * F4); }
static void b_gelu(bench_state *s) { gelu_backward(s->dbig_in, s->big_in, s->dbig_out, (long)N * F4); }
static void f_residual(bench_state *s) { residual_forward(s->y, s->x, s->dx, (long)N * C); }
static void b_residual(bench_state *s) { residual_backward(s->dx, s->db_c == NULL ? NULL : s->dy, s->y, (long)N * C); }
static void f_crossentropy(bench_state *s) { crossentropy_forward(s->losses, s->lse, s->logits, s->targets, N, V, VP); }
static void b_crossentropy(bench_state *s) {
    /* into a separate buffer, so every repetition starts from the same logits */
    crossentropy_backward(s->big_out, s->logits, s->lse, s->targets, s->dloss, N, V, VP);
}
static void f_rmsnorm(bench_state *s) { rmsnorm_forward(s->y, s->rstd, s->x, s->w_c, N, C, 1e-5f); }
static void b_rmsnorm(bench_state *s) { rmsnorm_backward(s->dx, s->dw_c, s->dy, s->x, s->w_c, s->rstd, N, C); }
static void f_swiglu(bench_state *s) { swiglu_forward(s->big_out, s->big_in, N, FS); }
static void b_swiglu(bench_state *s) { swiglu_backward(s->dbig_in, s->dbig_out, s->big_in, N, FS); }
static void f_rope(bench_state *s) { rope_forward(s->qkv, B, T, NH, KVH, HS, 10000.0f); }
static void b_rope(bench_state *s) { rope_backward(s->dqkv, B, T, NH, KVH, HS, 10000.0f); }
static void f_gqa(bench_state *s) { attention_forward(s->y, s->att, s->qkv, B, T, NH, KVH, HS); }
static void b_gqa(bench_state *s) { attention_backward(s->dqkv, s->dy, s->qkv, s->att, B, T, NH, KVH, HS); }

/* The bytes a non-GEMM kernel must move at least (prof/kernel_costs.h, as the profiler counts them), forward
 * (bwd false) or backward: against the triad bandwidth, how near the memory roof it runs. */
typedef prof_cost (*cost_fn)(bool bwd);
static prof_cost c_encoder(bool bwd) { return bwd ? prof_cost_encoder_backward(N, C) : prof_cost_encoder_forward(N, C); }
static prof_cost c_norm(bool bwd) { return bwd ? prof_cost_norm_backward(N, C) : prof_cost_norm_forward(N, C); }
static prof_cost c_attention(bool bwd) {
    return bwd ? prof_cost_attention_backward(B, T, NH, HS) : prof_cost_attention_forward(B, T, NH, HS);
}
static prof_cost c_residual(bool bwd) { /* out = a + b; backward: da += d, db += d */
    return bwd ? prof_cost_elementwise((double)N * C, 2, 3, 2) : prof_cost_elementwise((double)N * C, 1, 2, 1);
}
static prof_cost c_gelu(bool bwd) {
    return bwd ? prof_cost_elementwise((double)N * F4, 14, 2, 2) : prof_cost_elementwise((double)N * F4, 9, 1, 1);
}
static prof_cost c_crossentropy(bool bwd) {
    return bwd ? prof_cost_crossentropy_backward(N, V, VP) : prof_cost_crossentropy_forward(N, V, VP);
}
static prof_cost c_swiglu(bool bwd) { /* per (n, f): reads g, u (and dout), writes out (or dg, du) */
    return bwd ? prof_cost_elementwise((double)N * FS, 12, 5, 2) : prof_cost_elementwise((double)N * FS, 6, 2, 1);
}
static prof_cost c_rope(bool bwd) { /* q and k heads rotated in place */
    (void)bwd;
    return prof_cost_elementwise((double)N * (NH + KVH) * HS, 3, 1, 1);
}
static prof_cost c_gqa(bool bwd) { /* the kv heads are shared: counted as the full attention (an upper bound) */
    return c_attention(bwd);
}

typedef struct {
    const char *name, *shape;
    bench_fn fwd, bwd;
    cost_fn cost; /* non-GEMM kernels: their bytes; NULL for the matmuls */
    int per_step; /* calls per GPT-2 training step (0: not part of GPT-2) */
    int oc, ic;   /* for matmuls: the shape, and their FLOPs are counted */
} bench_op;

static const bench_op ops[] = {
    {"encoder", "B,T,C=4,64,768", f_encoder, b_encoder, c_encoder, 1, 0, 0},
    {"layernorm", "N,C=256,768", f_layernorm, b_layernorm, c_norm, 2 * L + 1, 0, 0},
    {"matmul qkv", "256x768 -> 2304", f_matmul, b_matmul, NULL, L, 3 * C, C},
    {"attention", "NH=12,HS=64", f_attention, b_attention, c_attention, L, 0, 0},
    {"matmul attproj", "256x768 -> 768", f_matmul, b_matmul, NULL, L, C, C},
    {"residual", "N*C=196608", f_residual, b_residual, c_residual, 2 * L, 0, 0},
    {"matmul fc", "256x768 -> 3072", f_matmul, b_matmul, NULL, L, F4, C},
    {"gelu", "N*4C=786432", f_gelu, b_gelu, c_gelu, L, 0, 0},
    {"matmul fcproj", "256x3072 -> 768", f_matmul, b_matmul, NULL, L, C, F4},
    {"matmul lm head", "256x768 -> 50304", f_matmul, b_matmul, NULL, 1, VP, C},
    {"crossentropy", "N,V,Vp=256,50257,50304", f_crossentropy, b_crossentropy, c_crossentropy, 1, 0, 0},
    {"rmsnorm", "N,C=256,768", f_rmsnorm, b_rmsnorm, c_norm, 0, 0, 0},
    {"swiglu", "N,F=256,2048", f_swiglu, b_swiglu, c_swiglu, 0, 0, 0},
    {"rope", "NH=12,KVH=4,HS=64", f_rope, b_rope, c_rope, 0, 0, 0},
    {"attention gqa", "NH=12,KVH=4,HS=64", f_gqa, b_gqa, c_gqa, 0, 0, 0},
};

/* One GPT-2 training step's kernels in the order a step runs them, on the same buffers (the numbers
 * are meaningless; the shapes, the order and the thread hand-offs between BLAS and OpenMP are real). */
static void set_matmul(bench_state *s, int oc, int ic) { s->oc = oc, s->ic = ic; }
static void gpt2_step_in_order(bench_state *s) {
    f_encoder(s);
    for (int l = 0; l < L; l++) {
        f_layernorm(s);
        set_matmul(s, 3 * C, C), f_matmul(s);
        f_attention(s);
        set_matmul(s, C, C), f_matmul(s);
        f_residual(s);
        f_layernorm(s);
        set_matmul(s, F4, C), f_matmul(s);
        f_gelu(s);
        set_matmul(s, C, F4), f_matmul(s);
        f_residual(s);
    }
    f_layernorm(s);
    set_matmul(s, VP, C), f_matmul(s);
    f_crossentropy(s);
    b_crossentropy(s);
    b_matmul(s);
    b_layernorm(s);
    for (int l = 0; l < L; l++) {
        b_residual(s);
        set_matmul(s, C, F4), b_matmul(s);
        b_gelu(s);
        set_matmul(s, F4, C), b_matmul(s);
        b_layernorm(s);
        b_residual(s);
        set_matmul(s, C, C), b_matmul(s);
        b_attention(s);
        set_matmul(s, 3 * C, C), b_matmul(s);
        b_layernorm(s);
    }
    b_encoder(s);
}

/* The kernels compiled once per instruction set level (ops/isa.h): each on every level the CPU has, as
 * GB/s and % of the triad, forward / backward (the backwards of gelu and crossentropy are lab 02's regions,
 * compiled per level by GCC and picked by the CPU when the program loads, OPS_ISA_LAB_CLONES: forcing a level does
 * not narrow them, and their columns show the CPU's widest copy on every level). */
static void per_level_table(bench_state *s, int reps, double triad) {
    static const char *const names[] = {"attention", "gelu", "crossentropy", "attention gqa"};
    const ops_isa chosen = ops_isa_current();
    printf("\nper instruction set level (ops/isa.h; the kernels above ran on %s): GB/s and %% of the triad, "
           "fwd / bwd\n%-16s", ops_isa_name(chosen), "op");
    for (int level = 0; level < OPS_ISA_COUNT; level++)
        if (ops_isa_supported((ops_isa)level)) printf(" %25s", ops_isa_name((ops_isa)level));
    printf("\n");
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const bench_op *op = NULL;
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
            if (strcmp(ops[i].name, names[k]) == 0) op = &ops[i];
        printf("%-16s", op->name);
        for (int level = 0; level < OPS_ISA_COUNT; level++) {
            if (!ops_isa_force((ops_isa)level)) continue;
            const double tf = seconds_per_call(op->fwd, s, reps), tb = seconds_per_call(op->bwd, s, reps);
            const double gbf = op->cost(false).bytes / tf / 1e9, gbb = op->cost(true).bytes / tb / 1e9;
            char cell[40];
            snprintf(cell, sizeof cell, "%.1f %.0f%% / %.1f %.0f%%", gbf, 100 * gbf / triad, gbb, 100 * gbb / triad);
            printf(" %25s", cell);
        }
        printf("\n");
        fflush(stdout);
    }
    ops_isa_force(chosen);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1) {
        fprintf(stderr, "usage: ops_bench [repetitions >= 1]  (default 5; the minimum time is reported)\n");
        return 2;
    }
    bench_state s = {0};
    const long big = (long)N * (F4 > 2 * FS ? F4 : 2 * FS);
    s.x = bench_buffer((long)N * C, "x", 1, 10);
    s.y = bench_buffer((long)N * C, "y", 1, 11);
    s.dx = bench_buffer((long)N * C, "dx", 1, 12);
    s.dy = bench_buffer((long)N * C, "dy", 1, 13);
    s.mean = bench_buffer(N, "mean", 1, 14);
    s.rstd = bench_buffer(N, "rstd", 1, 15);
    s.w_c = bench_buffer(C, "ln w", 1, 16);
    s.b_c = bench_buffer(C, "ln b", 1, 17);
    s.dw_c = bench_buffer(C, "ln dw", 1, 18);
    s.db_c = bench_buffer(C, "ln db", 1, 19);
    s.big_in = bench_buffer(big > (long)T * C ? big : (long)T * C, "big in", 1, 20);
    s.dbig_in = bench_buffer(big, "dbig in", 1, 21);
    s.big_out = bench_buffer((long)N * VP, "big out (also dlogits)", 1, 22);
    s.dbig_out = bench_buffer((long)N * VP, "dbig out", 0.01f, 23);
    s.weight = bench_buffer((long)VP * C, "weight", 0.02f, 24);
    s.dweight = bench_buffer((long)VP * C, "dweight", 0, 25);
    s.bias = bench_buffer(VP, "bias", 0.02f, 26);
    s.dbias = bench_buffer(VP, "dbias", 0, 27);
    s.qkv = bench_buffer((long)N * 3 * C, "qkv", 1, 28);
    s.dqkv = bench_buffer((long)N * 3 * C, "dqkv", 0, 29);
    s.att = bench_buffer((long)B * NH * T * T, "att", 0, 30);
    s.logits = bench_buffer((long)N * VP, "logits", 3, 31);
    s.losses = bench_buffer(N, "losses", 0, 32);
    s.lse = bench_buffer(N, "lse", 0, 33);
    s.dloss = bench_buffer(N, "dloss", 0, 34);
    for (int i = 0; i < N; i++) s.dloss[i] = 1.0f / N;
    s.tokens = mem_alloc(N * sizeof(int), MEM_OTHER, "tokens");
    s.targets = mem_alloc(N * sizeof(int), MEM_OTHER, "targets");
    for (int i = 0; i < N; i++) s.tokens[i] = (int)(mp_hash32(1, i) % V), s.targets[i] = (int)(mp_hash32(2, i) % V);
    /* the encoder reads wpe from big_in (T*C floats) and writes dwpe to dbig_in */

    printf("ops_bench: GPT-2 124M shapes, B=%d T=%d (N=%d) C=%d NH=%d V=%d (padded %d), L=%d\n", B, T, N, C, NH, V, VP, L);
    const double peak_before = bench_sgemm_peak_gflops();
    printf("threads: %d OpenMP, each running %d-thread OpenBLAS (%s)\n", omp_get_max_threads(),
           openblas_get_num_threads(), openblas_get_config());
    int widest = OPS_ISA_BASE;
    for (int level = 0; level < OPS_ISA_COUNT; level++)
        if (ops_isa_supported((ops_isa)level)) widest = level;
    printf("ops kernels' instruction set level: %s (widest on this CPU: %s; MIXPAR_OPS_ISA=base|avx2|avx512 narrows "
           "it)\n", ops_isa_name(ops_isa_current()), ops_isa_name((ops_isa)widest));
    printf("sgemm peak (1536^3, NoTrans x Trans, split over the threads): %.1f GFLOP/s (measured again at the end)\n",
           peak_before);
    bench_print_gemm_kernels();
    const double triad = prof_measure_triad_bandwidth(1L << 24) / 1e9;
    printf("triad bandwidth (a = b + s c, 3 x 64 MB, the same threads): %.1f GB/s\n", triad);
    printf("time = best of %d calls after one warm-up, each kernel alone (caches warm); matmuls: GFLOP/s; the other\n"
           "kernels: GB/s of the bytes they must move (prof/kernel_costs.h) and that as a share of the triad\n\n", reps);
    printf("%-16s %-24s %10s %10s %9s %9s %6s %11s %9s %9s\n", "op", "shape", "fwd ms", "bwd ms", "fwd GF/s", "bwd GF/s",
           "calls", "step ms", "fwd GB/s", "bwd GB/s");

    double step_total = 0, step_matmul = 0, step_flops = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const bench_op *op = &ops[i];
        if (i > 0 && ops[i - 1].per_step && !op->per_step) printf("-- not in a GPT-2 step (LLaMA-style ops):\n");
        s.oc = op->oc;
        s.ic = op->ic;
        const int r = op->oc == VP ? (reps < 3 ? reps : 3) : reps; /* the lm head takes ~0.5 s per pair */
        const double tf = seconds_per_call(op->fwd, &s, r), tb = seconds_per_call(op->bwd, &s, r);
        char gf[16] = "", gb[16] = "";
        if (op->oc) {
            const double flops = 2.0 * N * op->ic * op->oc;
            snprintf(gf, sizeof gf, "%.1f", flops / tf / 1e9);
            snprintf(gb, sizeof gb, "%.1f", 2 * flops / tb / 1e9);
            step_matmul += op->per_step * (tf + tb);
            step_flops += op->per_step * 3 * flops;
        }
        char bf[24] = "", bb[24] = "";
        if (op->cost) { /* achieved bytes/s, and the share of the triad's */
            const double gbf = op->cost(false).bytes / tf / 1e9, gbb = op->cost(true).bytes / tb / 1e9;
            snprintf(bf, sizeof bf, "%.1f %3.0f%%", gbf, 100 * gbf / triad);
            snprintf(bb, sizeof bb, "%.1f %3.0f%%", gbb, 100 * gbb / triad);
        }
        char calls[16] = "", step[16] = "";
        if (op->per_step) {
            snprintf(calls, sizeof calls, "%d", op->per_step);
            snprintf(step, sizeof step, "%.1f", op->per_step * (tf + tb) * 1e3);
            step_total += op->per_step * (tf + tb);
        }
        printf("%-16s %-24s %10.3f %10.3f %9s %9s %6s %11s %9s %9s\n", op->name, op->shape, tf * 1e3, tb * 1e3, gf, gb,
               calls, step, bf, bb);
        fflush(stdout);
    }
    const double in_order = seconds_per_call(gpt2_step_in_order, &s, reps < 3 ? reps : 3);
    per_level_table(&s, reps, triad);
    const double peak_after = bench_sgemm_peak_gflops();
    /* A shared machine (a VM whose host is busy) can be slower for a while; the larger peak is the
     * machine's, and a big gap between the two says the numbers in between are not clean. */
    const double peak = peak_before > peak_after ? peak_before : peak_after;
    printf("\nsgemm peak at the end: %.1f GFLOP/s; using %.1f\n", peak_after, peak);
    if (peak_before < 0.8 * peak || peak_after < 0.8 * peak)
        printf("WARNING: the peak changed by more than 20%% during the run: the machine was busy; run again\n");
    printf("\nGPT-2 124M step estimate (sum of the kernels above, each timed alone; no optimizer, no grad zeroing):\n");
    printf("  total %.0f ms = matmuls %.0f ms (%.1f GFLOP, %.1f GFLOP/s = %.0f%% of sgemm peak) + other ops %.0f ms\n",
           step_total * 1e3, step_matmul * 1e3, step_flops / 1e9, step_flops / step_matmul / 1e9,
           100.0 * step_flops / step_matmul / 1e9 / peak, (step_total - step_matmul) * 1e3);
    printf("  end to end: %.1f GFLOP/s over the whole step = %.0f%% of sgemm peak\n", step_flops / step_total / 1e9,
           100.0 * step_flops / step_total / 1e9 / peak);
    printf("the same kernels run in step order (BLAS and OpenMP handing over as in training): %.0f ms, "
           "%.1f GFLOP/s = %.0f%% of sgemm peak\n",
           in_order * 1e3, step_flops / in_order / 1e9, 100.0 * step_flops / in_order / 1e9 / peak);
    return 0;
}
