/* test_ops_matmul_lowp.c: 16-bit-input matmuls: every path (AMX, AVX512-BF16, decode+sgemm) against the definition, edge shapes, subnormals. */
#include "ops/gemm_bf16.h"
#include "ops/matmul_lowp.h"
#include "ops_testutil.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* What is checked, and how close is close enough.
 *
 * Every product of two bf16 (8-bit significands) or two fp16 (11-bit) numbers is exact in fp32, so the
 * paths differ from the definition (matmul_lowp_*_ref: the same products summed in double) only by the
 * rounding of fp32 additions. A sum of K terms in fp32, in any order, is off by at most about K * u *
 * sum_k |term_k| (u = 2^-24, the unit roundoff), plus one rounding for the bias or the accumulated base
 * and one for the reference's own rounding to float. So element i must satisfy
 *     |got - ref| <= (K + 3) * 2^-24 * scale[i],   scale = the same product on |inputs| (+ |bias|, |base|)
 * This is a worst-case bound: it never fails by bad luck, and it still catches a dropped or doubled term
 * (one term of K is about scale / K, far above K * u * scale for the K used here).
 *
 * Paths: decode+sgemm (forced with matmul_lowp_force_portable), then each bf16 engine of gemm_bf16 this
 * machine has (chosen with gemm_bf16_use): avx512-bf16 (VDPBF16PS) and amx-bf16 (TDPBF16PS). fp16 takes
 * decode+sgemm whatever the engine, so for fp16 the engine paths check that path again. On a CPU
 * without AVX512_BF16 only decode+sgemm runs, and the kernel-only tests are skipped. */

static const lowp_format formats[] = {LOWP_BF16, LOWP_FP16};
static const char *format_names[] = {"bf16", "fp16"};

/* N, C, OC. Sizes that are not multiples of the kernels' blocks (8 x 48 VDPBF16PS tiles, 32 x 32 AMX
 * blocks, 16-pair packing blocks), odd C (the last bf16 pair is half padding), C and N past one 768-deep
 * k block (9 x 1001, 800 x 13), products big enough (N*C*OC > 2^18) to run on several threads, split by
 * columns (61x70x211 forward) and by rows (300x47x29 forward, every tall dweight), and GPT-2's width at
 * a small batch. */
static const int shapes[][3] = {{1, 1, 1},     {1, 7, 5},    {3, 5, 7},     {17, 33, 19},   {64, 48, 80},
                                {37, 100, 65}, {5, 1, 9},    {61, 70, 211}, {300, 47, 29}, {9, 1001, 50},
                                {800, 13, 20}, {8, 768, 96}, {49, 96, 97}};
enum { NSHAPES = sizeof shapes / sizeof shapes[0] };

static uint16_t *lowp_uniform(long n, lowp_format fmt, uint64_t seed) {
    float *f = tu_uniform(n, -1, 1, seed);
    uint16_t *h = calloc((size_t)(n > 0 ? n : 1), sizeof(uint16_t));
    cr_assert(h, "out of memory");
    lowp_encode(h, f, (size_t)n, fmt);
    free(f);
    return h;
}

/* The same tensor with every sign bit cleared: |x| in either format. */
static uint16_t *lowp_abs(const uint16_t *x, long n) {
    uint16_t *a = calloc((size_t)(n > 0 ? n : 1), sizeof(uint16_t));
    cr_assert(a, "out of memory");
    for (long i = 0; i < n; i++) a[i] = x[i] & 0x7FFF;
    return a;
}

static float *float_abs(const float *x, long n) {
    float *a = tu_zeros(n);
    for (long i = 0; i < n; i++) a[i] = fabsf(x[i]);
    return a;
}

/* |got - ref| <= rel * scale elementwise; prints the worst element as a fraction of its bound. */
static bool within_bound(const char *what, const float *ref, const float *got, const float *scale, long n, double rel) {
    long outside = 0, worst = -1;
    double worst_frac = -1;
    for (long i = 0; i < n; i++) {
        const double bound = rel * scale[i] + 1e-37; /* + a hair so that 0 == 0 passes */
        const double diff = fabs((double)got[i] - ref[i]);
        const double frac = isnan(diff) ? INFINITY : diff / bound;
        if (!(frac <= 1.0)) outside++;
        if (frac > worst_frac) worst_frac = frac, worst = i;
    }
    if (worst >= 0 && (outside || worst_frac > 0.5))
        printf("%s: %ld of %ld outside the bound; worst [%ld] ref %.9g got %.9g (%.2f of the bound)\n", what, outside,
               n, worst, ref[worst], got[worst], worst_frac);
    return outside == 0;
}

/* |got - ref| <= tol everywhere (for unit-sized data where the sums are at most K in magnitude). */
static bool close_abs(const char *what, const float *ref, const float *got, long n, double tol) {
    for (long i = 0; i < n; i++)
        if (!(fabs((double)got[i] - ref[i]) <= tol)) {
            printf("%s: [%ld] ref %.9g got %.9g, more than %g apart\n", what, i, ref[i], got[i], tol);
            return false;
        }
    return true;
}

static double sum_tol(int K) { return (K + 3) * 0x1p-24; }

typedef struct {
    bool portable;           /* decode+sgemm */
    gemm_bf16_engine engine; /* otherwise this engine */
} lowp_path;

/* The paths this machine can run, decode+sgemm first; returns how many. */
static int paths_here(lowp_path paths[3]) {
    int n = 0;
    paths[n++] = (lowp_path){true, GEMM_BF16_NONE};
    for (gemm_bf16_engine e = GEMM_BF16_AVX512; e <= gemm_bf16_best(); e++) paths[n++] = (lowp_path){false, e};
    return n;
}

static void use_path(lowp_path p) {
    matmul_lowp_force_portable(p.portable);
    gemm_bf16_use(p.portable ? gemm_bf16_best() : p.engine);
}

static void use_default_path(void) {
    matmul_lowp_force_portable(false);
    gemm_bf16_use(gemm_bf16_best());
}

Test(matmul_lowp, path_names_say_what_runs) {
    const char *bf16_auto = gemm_bf16_engine_name(gemm_bf16_best());
    if (gemm_bf16_best() == GEMM_BF16_NONE) bf16_auto = "decode+sgemm";
    cr_expect_str_eq(matmul_lowp_path(LOWP_BF16), bf16_auto, "bf16 on this CPU takes the best engine");
    cr_expect_str_eq(matmul_lowp_path(LOWP_FP16), "decode+sgemm", "fp16 always widens to fp32 (no fp32-accumulating fp16 dot product)");
    matmul_lowp_force_portable(true);
    cr_expect_str_eq(matmul_lowp_path(LOWP_BF16), "decode+sgemm", "forced portable");
    matmul_lowp_force_portable(false);
    cr_expect_str_eq(matmul_lowp_path(LOWP_BF16), bf16_auto, "force_portable(false) restores the automatic choice");
    static const char *names[] = {[GEMM_BF16_AVX512] = "avx512-bf16", [GEMM_BF16_AMX] = "amx-bf16"};
    for (gemm_bf16_engine e = GEMM_BF16_AVX512; e <= gemm_bf16_best(); e++) {
        gemm_bf16_use(e);
        cr_expect_str_eq(matmul_lowp_path(LOWP_BF16), names[e], "with engine %d in use", e);
        cr_expect_str_eq(matmul_lowp_path(LOWP_FP16), "decode+sgemm", "fp16 with engine %d in use", e);
    }
    use_default_path();
}

Test(matmul_lowp, forward_every_path_matches_reference) {
    lowp_path paths[3];
    const int npaths = paths_here(paths);
    for (int f = 0; f < 2; f++)
        for (int pi = 0; pi < npaths; pi++)
            for (int s = 0; s < NSHAPES; s++) {
                const int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
                const lowp_format fmt = formats[f];
                uint16_t *inp = lowp_uniform((long)N * C, fmt, 10 + s), *weight = lowp_uniform((long)OC * C, fmt, 20 + s);
                uint16_t *inp_abs = lowp_abs(inp, (long)N * C), *weight_abs = lowp_abs(weight, (long)OC * C);
                float *bias = tu_uniform(OC, -1, 1, 30 + s), *bias_abs = float_abs(bias, OC);
                float *out = tu_zeros((long)N * OC), *ref = tu_zeros((long)N * OC), *scale = tu_zeros((long)N * OC);
                for (int with_bias = 0; with_bias < 2; with_bias++) {
                    const float *b = with_bias ? bias : NULL;
                    for (long i = 0; i < (long)N * OC; i++) out[i] = NAN; /* forward overwrites: no NaN may survive */
                    use_path(paths[pi]);
                    matmul_lowp_forward(out, inp, weight, b, N, C, OC, fmt);
                    const char *path = matmul_lowp_path(fmt);
                    use_default_path();
                    matmul_lowp_forward_ref(ref, inp, weight, b, N, C, OC, fmt);
                    matmul_lowp_forward_ref(scale, inp_abs, weight_abs, with_bias ? bias_abs : NULL, N, C, OC, fmt);
                    char what[128];
                    snprintf(what, sizeof what, "forward %s %s N=%d C=%d OC=%d bias=%d", format_names[f], path, N, C, OC,
                             with_bias);
                    cr_expect(within_bound(what, ref, out, scale, (long)N * OC, sum_tol(C)),
                              "%s: differs from matmul_lowp_forward_ref by more than fp32 summation allows", what);
                }
                free(inp), free(weight), free(inp_abs), free(weight_abs), free(bias), free(bias_abs);
                free(out), free(ref), free(scale);
            }
}

/* Runs check(format index, path, shape index) for both formats, every path this machine can run and every shape. */
static void on_every_format_path_shape(void (*check)(int f, lowp_path path, int s)) {
    lowp_path paths[3];
    const int npaths = paths_here(paths);
    for (int f = 0; f < 2; f++)
        for (int pi = 0; pi < npaths; pi++)
            for (int s = 0; s < NSHAPES; s++) check(f, paths[pi], s);
}

static void check_backward_against_reference(int f, lowp_path path_to_use, int s) {
    const int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
    const long nc = (long)N * C, oc_c = (long)OC * C, n_oc = (long)N * OC;
    const lowp_format fmt = formats[f];
    uint16_t *inp = lowp_uniform(nc, fmt, 40 + s), *weight = lowp_uniform(oc_c, fmt, 50 + s);
    uint16_t *dout = lowp_uniform(n_oc, fmt, 60 + s);
    uint16_t *inp_abs = lowp_abs(inp, nc), *weight_abs = lowp_abs(weight, oc_c), *dout_abs = lowp_abs(dout, n_oc);
    /* dinp starts as garbage (it must be overwritten); dweight and dbias start non-zero (they must
     * be added to), as they are after an earlier micro-batch of gradient accumulation. */
    float *dinp = tu_uniform(nc, -100, 100, 70 + s), *dweight = tu_uniform(oc_c, -1, 1, 80 + s);
    float *dbias = tu_uniform(OC, -1, 1, 90 + s);
    float *dinp_ref = tu_copy(dinp, nc), *dweight_ref = tu_copy(dweight, oc_c), *dbias_ref = tu_copy(dbias, OC);
    float *dinp_scale = tu_zeros(nc), *dweight_scale = float_abs(dweight, oc_c), *dbias_scale = float_abs(dbias, OC);
    use_path(path_to_use);
    matmul_lowp_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, fmt);
    const char *path = matmul_lowp_path(fmt);
    use_default_path();
    matmul_lowp_backward_ref(dinp_ref, dweight_ref, dbias_ref, dout, inp, weight, N, C, OC, fmt);
    matmul_lowp_backward_ref(dinp_scale, dweight_scale, dbias_scale, dout_abs, inp_abs, weight_abs, N, C, OC, fmt);
    char what[128];
    snprintf(what, sizeof what, "%s %s N=%d C=%d OC=%d", format_names[f], path, N, C, OC);
    cr_expect(within_bound("dinp", dinp_ref, dinp, dinp_scale, nc, sum_tol(OC)),
              "%s: dinp differs from the reference (is it overwritten, not added to?)", what);
    cr_expect(within_bound("dweight", dweight_ref, dweight, dweight_scale, oc_c, sum_tol(N)),
              "%s: dweight differs from the reference (is it accumulated?)", what);
    cr_expect(within_bound("dbias", dbias_ref, dbias, dbias_scale, OC, sum_tol(N)),
              "%s: dbias differs from the reference (is it accumulated?)", what);
    free(inp), free(weight), free(dout), free(inp_abs), free(weight_abs), free(dout_abs);
    free(dinp), free(dweight), free(dbias), free(dinp_ref), free(dweight_ref), free(dbias_ref);
    free(dinp_scale), free(dweight_scale), free(dbias_scale);
}

Test(matmul_lowp, backward_every_path_matches_reference) { on_every_format_path_shape(check_backward_against_reference); }

/* matmul_lowp_backward_writing_dweight over a dweight of NaNs (memory committed without zeroing) gives the bits
 * matmul_lowp_backward gives over zeros, on every path; dbias is still added to. */
static void check_writing_dweight(int f, lowp_path path_to_use, int s) {
    const int N = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
    const long nc = (long)N * C, oc_c = (long)OC * C, n_oc = (long)N * OC;
    const lowp_format fmt = formats[f];
    uint16_t *inp = lowp_uniform(nc, fmt, 41 + s), *weight = lowp_uniform(oc_c, fmt, 51 + s);
    uint16_t *dout = lowp_uniform(n_oc, fmt, 61 + s);
    float *dinp = tu_zeros(nc), *dinp_added = tu_zeros(nc), *dweight = tu_zeros(oc_c);
    float *dweight_added = tu_zeros(oc_c), *dbias = tu_uniform(OC, -1, 1, 91 + s);
    float *dbias_added = tu_copy(dbias, OC);
    for (long i = 0; i < oc_c; i++) dweight[i] = NAN;
    use_path(path_to_use);
    matmul_lowp_backward_writing_dweight(dinp, dweight, dbias, dout, inp, weight, N, C, OC, fmt);
    matmul_lowp_backward(dinp_added, dweight_added, dbias_added, dout, inp, weight, N, C, OC, fmt);
    const char *path = matmul_lowp_path(fmt);
    use_default_path();
    cr_expect(memcmp(dweight, dweight_added, (size_t)oc_c * sizeof(float)) == 0,
              "%s %s N=%d C=%d OC=%d: the written dweight differs from the one added to zeros",
              format_names[f], path, N, C, OC);
    cr_expect(memcmp(dinp, dinp_added, (size_t)nc * sizeof(float)) == 0 &&
                  memcmp(dbias, dbias_added, (size_t)OC * sizeof(float)) == 0,
              "%s %s N=%d C=%d OC=%d: dinp or dbias differ", format_names[f], path, N, C, OC);
    free(inp), free(weight), free(dout), free(dinp), free(dinp_added), free(dweight);
    free(dweight_added), free(dbias), free(dbias_added);
}

Test(matmul_lowp, backward_writing_dweight_equals_adding_to_zeros) { on_every_format_path_shape(check_writing_dweight); }

Test(matmul_lowp, null_outputs_leave_the_others_right) {
    lowp_path paths[3];
    const int npaths = paths_here(paths);
    /* Each gradient alone, on both paths: asking for one must not skip or disturb another. */
    const int N = 37, C = 70, OC = 53;
    for (int f = 0; f < 2; f++)
        for (int pi = 0; pi < npaths; pi++)
            for (int want = 0; want < 3; want++) {
                const lowp_format fmt = formats[f];
                uint16_t *inp = lowp_uniform(N * C, fmt, 1), *weight = lowp_uniform(OC * C, fmt, 2), *dout = lowp_uniform(N * OC, fmt, 3);
                float *dinp = tu_zeros(N * C), *dweight = tu_zeros(OC * C), *dbias = tu_zeros(OC);
                float *dinp_ref = tu_zeros(N * C), *dweight_ref = tu_zeros(OC * C), *dbias_ref = tu_zeros(OC);
                use_path(paths[pi]);
                matmul_lowp_backward(want == 0 ? dinp : NULL, want == 1 ? dweight : NULL, want == 2 ? dbias : NULL, dout, inp,
                                     weight, N, C, OC, fmt);
                use_default_path();
                matmul_lowp_backward_ref(want == 0 ? dinp_ref : NULL, want == 1 ? dweight_ref : NULL,
                                         want == 2 ? dbias_ref : NULL, dout, inp, weight, N, C, OC, fmt);
                /* unit-sized inputs: the sums are at most K in magnitude; 1e-5 relative to K is ample */
                const char *names[] = {"dinp alone", "dweight alone", "dbias alone"};
                cr_expect(close_abs(names[want], dinp_ref, dinp, N * C, OC * 1e-6), "%s %s path %d", names[want],
                          format_names[f], pi);
                cr_expect(close_abs(names[want], dweight_ref, dweight, OC * C, N * 1e-6), "%s %s path %d", names[want],
                          format_names[f], pi);
                cr_expect(close_abs(names[want], dbias_ref, dbias, OC, N * 1e-6), "%s %s path %d", names[want],
                          format_names[f], pi);
                free(inp), free(weight), free(dout), free(dinp), free(dweight), free(dbias);
                free(dinp_ref), free(dweight_ref), free(dbias_ref);
            }
}

Test(matmul_lowp, zero_sizes_follow_the_conventions) {
    lowp_path paths[3];
    const int npaths = paths_here(paths);
    /* C = 0: out is the bias (or 0) and dbias still sums dout; OC = 0: dinp is zeros; N = 0: dweight and dbias
     * keep their values. Outputs start as 7s so that "untouched" and "overwritten" can be told apart. */
    for (int f = 0; f < 2; f++)
        for (int pi = 0; pi < npaths; pi++) {
            const lowp_format fmt = formats[f];
            uint16_t *x = lowp_uniform(64, fmt, 1), *w = lowp_uniform(64, fmt, 2), *g = lowp_uniform(64, fmt, 3);
            const float bias[3] = {1, -2, 0.5f};
            float out[12], dinp[12], dweight[12], dbias[3];
            use_path(paths[pi]);
            const char *path = matmul_lowp_path(fmt);
            for (int i = 0; i < 12; i++) out[i] = 7;
            matmul_lowp_forward(out, x, w, bias, 4, 0, 3, fmt);
            for (int i = 0; i < 12; i++)
                cr_expect_eq(out[i], bias[i % 3], "%s %s C=0 with a bias: out[%d] should be the bias %g, got %g",
                             format_names[f], path, i, bias[i % 3], out[i]);
            matmul_lowp_forward(out, x, w, NULL, 4, 0, 3, fmt);
            for (int i = 0; i < 12; i++) cr_expect_eq(out[i], 0.0f, "%s %s C=0 without a bias: out[%d] = %g", format_names[f], path, i, out[i]);
            matmul_lowp_forward(NULL, NULL, w, bias, 0, 4, 3, fmt); /* N = 0 and OC = 0: nothing to do */
            matmul_lowp_forward(NULL, x, w, NULL, 4, 3, 0, fmt);

            /* OC = 0: dinp (4 x 3) = 0, nothing else */
            for (int i = 0; i < 12; i++) dinp[i] = 7;
            matmul_lowp_backward(dinp, NULL, NULL, g, x, w, 4, 3, 0, fmt);
            for (int i = 0; i < 12; i++) cr_expect_eq(dinp[i], 0.0f, "%s %s OC=0: dinp[%d] should be 0 (overwritten), got %g", format_names[f], path, i, dinp[i]);
            /* C = 0: dbias (3) += column sums of dout (4 x 3) */
            float dbias_ref[3] = {7, 7, 7};
            for (int o = 0; o < 3; o++) dbias[o] = 7;
            matmul_lowp_backward(NULL, NULL, dbias, g, x, w, 4, 0, 3, fmt);
            matmul_lowp_backward_ref(NULL, NULL, dbias_ref, g, x, w, 4, 0, 3, fmt);
            cr_expect(close_abs("dbias with C=0", dbias_ref, dbias, 3, 1e-5), "%s %s C=0: dbias must still sum dout", format_names[f], path);
            /* N = 0: dweight (3 x 4) and dbias keep their values */
            for (int i = 0; i < 12; i++) dweight[i] = 7;
            matmul_lowp_backward(NULL, dweight, dbias, NULL, NULL, w, 0, 4, 3, fmt);
            for (int i = 0; i < 12; i++) cr_expect_eq(dweight[i], 7.0f, "%s %s N=0: dweight[%d] must be unchanged, got %g", format_names[f], path, i, dweight[i]);
            cr_expect(close_abs("dbias with N=0", dbias_ref, dbias, 3, 1e-5), "%s %s N=0: dbias must be unchanged", format_names[f], path);
            use_default_path();
            free(x), free(w), free(g);
        }
}

/* with the engine in use (gemm_bf16_use) */
static void check_thread_count_independence(const char *engine) {
    /* forward splits columns (OC > N) here and rows (N > OC) in the second shape; dweight the other way */
    const int sizes[][3] = {{61, 70, 211}, {300, 47, 29}};
    for (int s = 0; s < 2; s++) {
        const int N = sizes[s][0], C = sizes[s][1], OC = sizes[s][2];
        uint16_t *x = lowp_uniform(N * C, LOWP_BF16, 1), *w = lowp_uniform(OC * C, LOWP_BF16, 2), *g = lowp_uniform(N * OC, LOWP_BF16, 3);
        float *out[2], *dinp[2], *dweight[2], *dbias[2];
        for (int t = 0; t < 2; t++) {
            out[t] = tu_zeros(N * OC), dinp[t] = tu_zeros(N * C), dweight[t] = tu_zeros(OC * C), dbias[t] = tu_zeros(OC);
            omp_set_num_threads(t + 1);
            matmul_lowp_forward(out[t], x, w, NULL, N, C, OC, LOWP_BF16);
            matmul_lowp_backward(dinp[t], dweight[t], dbias[t], g, x, w, N, C, OC, LOWP_BF16);
        }
        cr_expect(tu_bits_equal(out[0], out[1], N * OC), "%s N=%d C=%d OC=%d: forward with 1 and 2 threads should be bit-identical", engine, N, C, OC);
        cr_expect(tu_bits_equal(dinp[0], dinp[1], N * C), "%s N=%d C=%d OC=%d: dinp with 1 and 2 threads", engine, N, C, OC);
        cr_expect(tu_bits_equal(dweight[0], dweight[1], OC * C), "%s N=%d C=%d OC=%d: dweight with 1 and 2 threads", engine, N, C, OC);
        cr_expect(tu_bits_equal(dbias[0], dbias[1], OC), "%s N=%d C=%d OC=%d: dbias with 1 and 2 threads", engine, N, C, OC);
        for (int t = 0; t < 2; t++) free(out[t]), free(dinp[t]), free(dweight[t]), free(dbias[t]);
        free(x), free(w), free(g);
    }
}

/* Runs check(engine name) with each bf16 engine this CPU has in use, then puts the best one back. */
static void on_every_bf16_engine(void (*check)(const char *engine)) {
    for (gemm_bf16_engine e = GEMM_BF16_AVX512; e <= gemm_bf16_best(); e++) {
        gemm_bf16_use(e);
        check(gemm_bf16_engine_name(e));
    }
    gemm_bf16_use(gemm_bf16_best());
}

Test(matmul_lowp, bf16_kernel_does_not_depend_on_thread_count) {
    if (!gemm_bf16_available()) cr_skip_test("no AVX512_BF16 on this CPU");
    on_every_bf16_engine(check_thread_count_independence);
}

static float bf16_value(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* with the engine in use (gemm_bf16_use) */
static void check_gemm_bf16_transposes(const char *engine) {
    /* The kernel's own interface, including the one combination matmul_lowp does not use (both
     * transposed), padded leading dimensions (the padding of C must stay untouched), bias with and without
     * accumulation. M, N, K: column split, row split, k past one block, and tiny; each with an odd K and an
     * even one (a k-contiguous A of even K is read in place, here with odd leading dimensions). */
    const int sizes[][3] = {{40, 700, 13}, {700, 40, 13}, {33, 57, 801}, {3, 2, 5},
                            {41, 650, 16}, {650, 41, 18}, {35, 55, 800}, {3, 2, 6}};
    for (int s = 0; s < 8; s++)
        for (int combo = 0; combo < 16; combo++) {
            const bool ta = combo & 1, tb = combo & 2, acc = combo & 4, use_bias = combo & 8;
            const int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
            const int a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
            const int lda = a_cols + 3, ldb = b_cols + 5, ldc = N + 2;
            uint16_t *A = lowp_uniform((long)a_rows * lda, LOWP_BF16, 100 + s), *B = lowp_uniform((long)b_rows * ldb, LOWP_BF16, 200 + s);
            float *bias = tu_uniform(N, -1, 1, 400 + s);
            float *Cm = tu_uniform((long)M * ldc, -1, 1, 300 + s), *ref = tu_copy(Cm, (long)M * ldc), *scale = tu_zeros((long)M * ldc);
            gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, use_bias ? bias : NULL, acc, Cm, ldc);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < ldc; j++) {
                    double sum = 0, mag = 0;
                    if (j < N) {
                        for (int k = 0; k < K; k++) {
                            const double p = (double)bf16_value(ta ? A[k * lda + i] : A[i * lda + k]) *
                                             bf16_value(tb ? B[j * ldb + k] : B[k * ldb + j]);
                            sum += p, mag += fabs(p);
                        }
                        const double base = acc ? ref[i * ldc + j] : 0, b = use_bias ? bias[j] : 0;
                        sum += base + b, mag += fabs(base) + fabs(b);
                    } else sum = ref[i * ldc + j]; /* padding: unchanged */
                    ref[i * ldc + j] = (float)sum, scale[i * ldc + j] = (float)mag;
                }
            cr_expect(within_bound("gemm_bf16", ref, Cm, scale, (long)M * ldc, sum_tol(K)),
                      "%s M=%d N=%d K=%d trans_a=%d trans_b=%d accumulate=%d bias=%d (the padding columns of C must stay "
                      "untouched too)", engine, M, N, K, ta, tb, acc, use_bias);
            free(A), free(B), free(bias), free(Cm), free(ref), free(scale);
        }
}

Test(matmul_lowp, gemm_bf16_every_transpose_with_leading_dimensions) {
    if (!gemm_bf16_available()) cr_skip_test("no AVX512_BF16 on this CPU");
    on_every_bf16_engine(check_gemm_bf16_transposes);
}

/* Where A is packed per column block, a k shorter than one block (KC2 = 384 pairs) lets a B block hold more
 * columns than NC = 384 (a weight gradient over 256 tokens packs its 768 columns as one block), up to the block's
 * fixed size. The shapes: k just under a block (350 pairs) with more columns than a full k's block holds, the row
 * split (520 columns; odd K, so A is packed in every layout) and the column split (about 550 columns a thread on 2:
 * more than one block, so A is packed once for all threads, or read in place); and a short k on the column split
 * (50 pairs), where each thread packs A itself and its 550 columns make one block. A block sized past its buffer
 * would write over the next thread's. Every 13th row is checked against the double-precision sum, in all four
 * layouts. */
static void check_short_k_wide_blocks(const char *engine) {
    const int sizes[][3] = {{40, 1100, 700}, {600, 520, 699}, {40, 1100, 100}};
    for (int s = 0; s < 3; s++)
        for (int combo = 0; combo < 4; combo++) {
            const bool ta = combo & 1, tb = combo & 2;
            const int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
            const int lda = ta ? M : K, ldb = tb ? K : N;
            uint16_t *A = lowp_uniform((long)M * K, LOWP_BF16, 900 + s), *B = lowp_uniform((long)N * K, LOWP_BF16, 910 + s);
            float *Cm = tu_zeros((long)M * N);
            gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, NULL, false, Cm, N);
            long checked = 0, bad = 0, first_bad = -1;
            for (int i = 0; i < M; i += 13)
                for (int j = 0; j < N; j++, checked++) {
                    double sum = 0, mag = 0;
                    for (int k = 0; k < K; k++) {
                        const double p = (double)bf16_value(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                                         bf16_value(tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                        sum += p, mag += fabs(p);
                    }
                    if (fabs(Cm[(size_t)i * N + j] - sum) > sum_tol(K) * mag + 1e-30)
                        if (bad++ == 0) first_bad = (long)i * N + j;
                }
            cr_expect(bad == 0, "%s M=%d N=%d K=%d trans_a=%d trans_b=%d: %ld of %ld checked entries off, the first at "
                      "[%ld]", engine, M, N, K, ta, tb, bad, checked, first_bad);
            free(A), free(B), free(Cm);
        }
}

Test(matmul_lowp, gemm_bf16_short_k_fills_wider_blocks) {
    if (!gemm_bf16_available()) cr_skip_test("no AVX512_BF16 on this CPU");
    on_every_bf16_engine(check_short_k_wide_blocks);
}

/* Every layout of the same operands gives the same bits: the engine packs (or, for a k-contiguous A of even K,
 * reads in place) whatever it is given into the same pairs of k and sums them in the same order. So a
 * transposed copy of A or B must not change a single bit of C; a packing that put one pair in the wrong
 * place, or dropped an odd K's last element, would. Shapes: both splits, odd and even K, ragged edges,
 * k past one block. */
static void check_layouts_agree_bitwise(const char *engine) {
    const int sizes[][3] = {{37, 101, 18}, {101, 37, 17}, {16, 96, 770}, {70, 50, 801}, {9, 49, 64}};
    for (int s = 0; s < 5; s++)
        for (int flags = 0; flags < 4; flags++) {
            const bool acc = flags & 1, use_bias = flags & 2;
            const int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
            uint16_t *A = lowp_uniform((long)M * K, LOWP_BF16, 500 + s), *B = lowp_uniform((long)N * K, LOWP_BF16, 600 + s);
            uint16_t *At = malloc((size_t)M * K * 2), *Bt = malloc((size_t)N * K * 2);
            for (int m = 0; m < M; m++) /* A is M x K row-major, At its K x M transpose */
                for (int k = 0; k < K; k++) At[(size_t)k * M + m] = A[(size_t)m * K + k];
            for (int n = 0; n < N; n++) /* B is N x K row-major (trans_b), Bt the K x N layout */
                for (int k = 0; k < K; k++) Bt[(size_t)k * N + n] = B[(size_t)n * K + k];
            float *bias = tu_uniform(N, -1, 1, 700 + s), *base = tu_uniform((long)M * N, -1, 1, 800 + s);
            float *C[4];
            for (int combo = 0; combo < 4; combo++) {
                const bool ta = combo & 1, tb = combo & 2;
                C[combo] = tu_copy(base, (long)M * N);
                gemm_bf16(ta, tb, M, N, K, ta ? At : A, ta ? M : K, tb ? B : Bt, tb ? K : N, use_bias ? bias : NULL, acc,
                          C[combo], N);
            }
            for (int combo = 1; combo < 4; combo++) {
                long first_diff = -1;
                for (long i = 0; i < (long)M * N && first_diff < 0; i++)
                    if (memcmp(&C[combo][i], &C[0][i], sizeof(float)) != 0) first_diff = i;
                cr_expect(first_diff < 0,
                          "%s M=%d N=%d K=%d accumulate=%d bias=%d: trans_a=%d trans_b=%d differs from trans_a=0 "
                          "trans_b=0 at [%ld]: %.9g against %.9g (the same operands in another layout must give "
                          "the same bits)",
                          engine, M, N, K, acc, use_bias, combo & 1, (combo & 2) != 0, first_diff,
                          first_diff < 0 ? 0.0 : (double)C[combo][first_diff], first_diff < 0 ? 0.0 : (double)C[0][first_diff]);
            }
            for (int combo = 0; combo < 4; combo++) free(C[combo]);
            free(A), free(B), free(At), free(Bt), free(bias), free(base);
        }
}

Test(matmul_lowp, gemm_bf16_layouts_agree_bit_for_bit) {
    if (!gemm_bf16_available()) cr_skip_test("no AVX512_BF16 on this CPU");
    on_every_bf16_engine(check_layouts_agree_bitwise);
}

static void check_no_reads_past_the_operands(const char *engine) {
    /* odd sizes, every transpose: the last row of each operand is short of a 64-byte piece; an even K too,
     * where the AVX512-BF16 tile reads a k-contiguous A in place, pair by pair up to its last element */
    const int sizes[][3] = {{33, 47, 29}, {47, 33, 31}, {5, 3, 801}, {70, 9, 3}, {37, 45, 34}, {9, 50, 770}};
    for (int s = 0; s < 6; s++)
        for (int combo = 0; combo < 4; combo++) {
            const bool ta = combo & 1, tb = combo & 2;
            const int M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
            const size_t a_bytes = (size_t)M * K * 2, b_bytes = (size_t)N * K * 2, c_bytes = (size_t)M * N * 4;
            uint16_t *A = guarded_alloc(a_bytes), *B = guarded_alloc(b_bytes);
            float *Cm = guarded_alloc(c_bytes), *bias = guarded_alloc((size_t)N * 4);
            uint16_t *a_src = lowp_uniform((long)M * K, LOWP_BF16, 1), *b_src = lowp_uniform((long)N * K, LOWP_BF16, 2);
            memcpy(A, a_src, a_bytes), memcpy(B, b_src, b_bytes);
            for (int j = 0; j < N; j++) bias[j] = 1.0f;
            gemm_bf16(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, bias, false, Cm, N);
            gemm_bf16(ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, NULL, true, Cm, N);
            cr_expect(isfinite(Cm[(size_t)M * N - 1]), "%s M=%d N=%d K=%d trans_a=%d trans_b=%d", engine, M, N, K, ta, tb);
            guarded_free(A, a_bytes), guarded_free(B, b_bytes), guarded_free(Cm, c_bytes), guarded_free(bias, (size_t)N * 4);
            free(a_src), free(b_src);
        }
}

Test(matmul_lowp, gemm_bf16_reads_nothing_past_its_operands) {
    if (!gemm_bf16_available()) cr_skip_test("no AVX512_BF16 on this CPU");
    on_every_bf16_engine(check_no_reads_past_the_operands);
}

static void check_stale_buffers(const char *engine) {
    /* A product whose operands are all +inf leaves infinities in the packing buffers; the next, shallower
     * product pads its k blocks to whole tiles. If the padding were left as it was, 0 * inf = NaN. */
    const int M = 64, N = 64, K = 64, K_small = 3;
    uint16_t *inf = calloc((size_t)M * K, 2), *ones = calloc((size_t)M * K, 2);
    for (int i = 0; i < M * K; i++) inf[i] = 0x7F80, ones[i] = 0x3F80; /* bf16 +inf and 1.0 */
    float *Cm = tu_zeros(M * N);
    gemm_bf16(false, true, M, N, K, inf, K, inf, K, NULL, false, Cm, N);
    gemm_bf16(false, true, M, N, K_small, ones, K_small, ones, K_small, NULL, false, Cm, N);
    for (int i = 0; i < M * N; i++)
        if (Cm[i] != (float)K_small) {
            cr_expect_eq(Cm[i], (float)K_small, "%s: [%d] should be %d (3 ones times ones), got %g: stale packed data",
                         engine, i, K_small, Cm[i]);
            break;
        }
    free(inf), free(ones), free(Cm);
}

Test(matmul_lowp, gemm_bf16_padding_does_not_see_stale_buffers) {
    if (!gemm_bf16_available()) cr_skip_test("no AVX512_BF16 on this CPU");
    on_every_bf16_engine(check_stale_buffers);
}

/* ---- subnormals
 *
 * VDPBF16PS and TDPBF16PS treat subnormal bf16 inputs (exponent field 0: magnitudes below 2^-126 ~ 1.2e-38)
 * as zero, whatever the MXCSR says, as GPUs' bf16 tensor-core paths do. So the kernels drop every product that
 * has a subnormal factor: at most 2^-126 * |other factor| per term. Next to normal-sized terms that is far
 * below fp32 resolution; it only shows when a result is made of such products alone. The portable path
 * widens exactly (a subnormal bf16 is a subnormal fp32, which sgemm multiplies like any other number). */

static uint16_t random_subnormal(mp_rng *rng) {
    uint32_t r = mp_rng_u32(rng);
    return (uint16_t)(((r >> 16) & 0x8000) | (1 + r % 127)); /* sign, exponent 0, mantissa 1..127 */
}

Test(matmul_lowp, bf16_subnormal_inputs_are_flushed_by_the_kernel_and_kept_by_decode) {
    const int N = 5, C = 40, OC = 7;
    mp_rng rng;
    mp_rng_seed(&rng, 99);
    /* inputs made only of subnormals, weights near 2^64 (bf16 0x5F80 = 2^64): the exact products are about
     * 2^-126 * 2^64 = 2^-62, ordinary fp32 numbers, so the exact result is far from zero */
    uint16_t *inp = calloc((size_t)N * C, 2), *weight = calloc((size_t)OC * C, 2);
    for (int i = 0; i < N * C; i++) inp[i] = random_subnormal(&rng);
    for (int i = 0; i < OC * C; i++) weight[i] = (uint16_t)(0x5F80 + (mp_rng_u32(&rng) % 64) + (i % 3 == 0 ? 0x8000 : 0));
    float *ref = tu_zeros(N * OC), *out = tu_zeros(N * OC), *scale = tu_zeros(N * OC);
    uint16_t *inp_abs = lowp_abs(inp, N * C), *weight_abs = lowp_abs(weight, OC * C);
    matmul_lowp_forward_ref(ref, inp, weight, NULL, N, C, OC, LOWP_BF16);
    matmul_lowp_forward_ref(scale, inp_abs, weight_abs, NULL, N, C, OC, LOWP_BF16);
    cr_assert(scale[0] > 1e-20f, "the test needs a visible exact result, got scale %g", scale[0]);

    matmul_lowp_force_portable(true);
    matmul_lowp_forward(out, inp, weight, NULL, N, C, OC, LOWP_BF16);
    matmul_lowp_force_portable(false);
    cr_expect(within_bound("decode+sgemm, subnormal inputs", ref, out, scale, N * OC, sum_tol(C)),
              "decode+sgemm must keep subnormal bf16 inputs (exact widening, fp32 sgemm)");

    for (gemm_bf16_engine e = GEMM_BF16_AVX512; e <= gemm_bf16_best(); e++) {
        gemm_bf16_use(e);
        matmul_lowp_forward(out, inp, weight, NULL, N, C, OC, LOWP_BF16);
        for (int i = 0; i < N * OC; i++)
            cr_expect_eq(out[i], 0.0f, "%s flushes subnormal inputs, so out[%d] should be 0 (the exact value is %g)",
                         gemm_bf16_engine_name(e), i, ref[i]);
    }
    gemm_bf16_use(gemm_bf16_best());
    free(inp), free(weight), free(inp_abs), free(weight_abs), free(ref), free(out), free(scale);
}

/* with the engine in use (gemm_bf16_use) */
static void check_subnormals_act_as_zeros(const char *engine) {
    /* A quarter of the inputs, weights and output gradients subnormal: the kernel's results are bit for bit
     * those with the subnormals replaced by (signed) zeros, and within the summation bound plus the
     * dropped products (sum over subnormal factors of |a| |b|) of the exact result. */
    const int N = 33, C = 71, OC = 50;
    const long nc = (long)N * C, oc_c = (long)OC * C, n_oc = (long)N * OC;
    uint16_t *inp = lowp_uniform(nc, LOWP_BF16, 1), *weight = lowp_uniform(oc_c, LOWP_BF16, 2), *dout = lowp_uniform(n_oc, LOWP_BF16, 3);
    uint16_t *inp0 = calloc((size_t)nc, 2), *weight0 = calloc((size_t)oc_c, 2), *dout0 = calloc((size_t)n_oc, 2);
    uint16_t *inp_sub = calloc((size_t)nc, 2), *weight_sub = calloc((size_t)oc_c, 2); /* |subnormal part|, zeros elsewhere */
    mp_rng rng;
    mp_rng_seed(&rng, 5);
    struct { uint16_t *x, *zeroed, *sub; long n; } t[3] = {{inp, inp0, inp_sub, nc}, {weight, weight0, weight_sub, oc_c}, {dout, dout0, NULL, n_oc}};
    for (int k = 0; k < 3; k++)
        for (long i = 0; i < t[k].n; i++) {
            if (mp_rng_u32(&rng) % 4 == 0) t[k].x[i] = random_subnormal(&rng);
            const bool sub = (t[k].x[i] & 0x7F80) == 0 && (t[k].x[i] & 0x7F) != 0;
            t[k].zeroed[i] = sub ? t[k].x[i] & 0x8000 : t[k].x[i];
            if (t[k].sub) t[k].sub[i] = sub ? t[k].x[i] & 0x7FFF : 0;
        }
    float *out = tu_zeros(n_oc), *out0 = tu_zeros(n_oc), *ref = tu_zeros(n_oc), *scale = tu_zeros(n_oc), *dropped = tu_zeros(n_oc);
    matmul_lowp_forward(out, inp, weight, NULL, N, C, OC, LOWP_BF16);
    matmul_lowp_forward(out0, inp0, weight0, NULL, N, C, OC, LOWP_BF16);
    cr_expect(tu_bits_equal(out, out0, n_oc), "%s forward: subnormal inputs should act exactly as zeros in the kernel", engine);
    /* the bound against the exact result: fp32 summation plus the dropped products */
    uint16_t *inp_abs = lowp_abs(inp, nc), *weight_abs = lowp_abs(weight, oc_c);
    matmul_lowp_forward_ref(ref, inp, weight, NULL, N, C, OC, LOWP_BF16);
    matmul_lowp_forward_ref(scale, inp_abs, weight_abs, NULL, N, C, OC, LOWP_BF16);
    float *part = tu_zeros(n_oc);
    matmul_lowp_forward_ref(dropped, inp_sub, weight_abs, NULL, N, C, OC, LOWP_BF16);
    matmul_lowp_forward_ref(part, inp_abs, weight_sub, NULL, N, C, OC, LOWP_BF16);
    for (long i = 0; i < n_oc; i++) scale[i] += (dropped[i] + part[i]) / (float)sum_tol(C);
    cr_expect(within_bound("forward with subnormals vs exact", ref, out, scale, n_oc, sum_tol(C)),
              "%s forward: further from the exact result than summation and flushing explain", engine);

    float *dinp = tu_zeros(nc), *dinp0 = tu_zeros(nc), *dw = tu_zeros(oc_c), *dw0 = tu_zeros(oc_c);
    matmul_lowp_backward(dinp, dw, NULL, dout, inp, weight, N, C, OC, LOWP_BF16);
    matmul_lowp_backward(dinp0, dw0, NULL, dout0, inp0, weight0, N, C, OC, LOWP_BF16);
    cr_expect(tu_bits_equal(dinp, dinp0, nc), "%s dinp: subnormal dout and weight should act exactly as zeros", engine);
    cr_expect(tu_bits_equal(dw, dw0, oc_c), "%s dweight: subnormal dout and inp should act exactly as zeros", engine);
    free(inp), free(weight), free(dout), free(inp0), free(weight0), free(dout0), free(inp_sub), free(weight_sub);
    free(inp_abs), free(weight_abs), free(out), free(out0), free(ref), free(scale), free(dropped), free(part);
    free(dinp), free(dinp0), free(dw), free(dw0);
}

Test(matmul_lowp, bf16_kernel_with_some_subnormals_equals_the_kernel_on_zeros) {
    if (!gemm_bf16_available()) cr_skip_test("no AVX512_BF16 on this CPU");
    on_every_bf16_engine(check_subnormals_act_as_zeros);
}
