/* test_ops_isa.c: the AVX2 and AVX-512 copies of the ops/ kernels (ops/isa.h) against the baseline and a double reference, on every level this CPU has; the lab functions' copies against their plain loops. */
#include "ops/attention.h"
#include "ops/crossentropy.h"
#include "ops/fastmath.h"
#include "ops/gelu.h"
#include "ops/gradcheck.h"
#include "ops/isa.h"
#include "ops/matmul_lowp.h"
#include "ops/swiglu.h"
#include "ops_testutil.h"
#include "optim/optimizer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Each Criterion test runs in its own process, so forcing a level here changes no other test. */

Test(ops_isa, levels_are_named_and_the_baseline_always_runs) {
    cr_expect(ops_isa_supported(OPS_ISA_BASE), "the baseline level runs on every CPU");
    cr_expect(ops_isa_force(OPS_ISA_BASE) && ops_isa_current() == OPS_ISA_BASE, "forcing the baseline sticks");
    cr_expect_str_eq(ops_isa_name(OPS_ISA_AVX512), "avx512");
    cr_expect(!ops_isa_force(OPS_ISA_COUNT), "a level that does not exist is refused");
}

Test(ops_isa, environment_can_only_narrow_the_level) {
    setenv("MIXPAR_OPS_ISA", "base", 1);
    cr_expect_eq(ops_isa_current(), OPS_ISA_BASE, "MIXPAR_OPS_ISA=base: got level %s", ops_isa_name(ops_isa_current()));
}

Test(ops_isa, environment_with_an_unknown_level_is_bad_input, .exit_code = 2) {
    setenv("MIXPAR_OPS_ISA", "sse9", 1);
    ops_isa_current();
}

/* GELU is elementwise and no copy contracts a*b+c into an FMA: every level gives the baseline's bits,
 * over a length that is no multiple of any vector width or of the kernel's chunk. */
Test(ops_isa, gelu_forward_gives_the_same_bits_on_every_level) {
    const long N = 3 * 16384 + 1237;
    float *x = tu_uniform(N, -9, 9, 501), *base = tu_zeros(N), *got = tu_zeros(N);
    ops_isa_force(OPS_ISA_BASE);
    gelu_forward(base, x, N);
    for (int level = OPS_ISA_AVX2; level < OPS_ISA_COUNT; level++) {
        if (!ops_isa_force((ops_isa)level)) continue;
        gelu_forward(got, x, N);
        long first = -1;
        for (long i = 0; i < N && first < 0; i++)
            if (memcmp(&base[i], &got[i], sizeof(float)) != 0) first = i;
        cr_expect(first < 0, "%s: gelu(%.9g) = %.9g, the baseline gives %.9g (bit for bit expected: an FMA contracted?)",
                  ops_isa_name((ops_isa)level), first < 0 ? 0 : x[first], first < 0 ? 0 : got[first],
                  first < 0 ? 0 : base[first]);
    }
    free(x), free(base), free(got);
}

/* Rows several 2048-float blocks long: the running max rises block after block (an upward ramp), sits in
 * the first block, or in the ragged last one; one row is shifted by 1e4 (exp of unshifted logits would
 * overflow). On every level: lse and loss against double. */
Test(ops_isa, crossentropy_forward_online_max_matches_double_on_every_level) {
    enum { N = 5, V = 3 * 2048 + 301, VP = V + 11 };
    const int targets[N] = {0, V - 1, 4097, -1, 2048};
    float *logits = tu_uniform((long)N * VP, -4, 4, 502);
    for (int v = 0; v < V; v++) logits[0 * VP + v] += 12.0f * v / V; /* ramp: max in the last block */
    logits[1 * VP + 3] = 40.0f;                                        /* max in the first block */
    logits[2 * VP + V - 5] = 25.0f;                                    /* max in the ragged last block */
    for (int v = 0; v < V; v++) logits[4 * VP + v] += 1e4f;            /* large logits */
    for (int n = 0; n < N; n++)
        for (int v = V; v < VP; v++) logits[(long)n * VP + v] = 1e30f; /* padding: outside the softmax */
    for (int level = OPS_ISA_BASE; level < OPS_ISA_COUNT; level++) {
        if (!ops_isa_force((ops_isa)level)) continue;
        float losses[N], lse[N];
        crossentropy_forward(losses, lse, logits, targets, N, V, VP);
        for (int n = 0; n < N; n++) {
            const float *z = logits + (long)n * VP;
            double max = -INFINITY, sum = 0;
            for (int v = 0; v < V; v++) max = fmax(max, z[v]);
            for (int v = 0; v < V; v++) sum += exp((double)z[v] - max);
            const double want_lse = max + log(sum), want_loss = targets[n] < 0 ? 0 : want_lse - z[targets[n]];
            cr_expect(fabs(lse[n] - want_lse) <= 2e-6 * fmax(1, fabs(want_lse)),
                      "%s, row %d: lse expected %.9g, got %.9g (likely: the sum not rescaled when a block raises the max)",
                      ops_isa_name((ops_isa)level), n, want_lse, lse[n]);
            cr_expect(fabs(losses[n] - want_loss) <= 2e-6 * fmax(1, fabs(want_lse)),
                      "%s, row %d: loss expected %.9g, got %.9g", ops_isa_name((ops_isa)level), n, want_loss, losses[n]);
        }
    }
    free(logits);
}

/* Attention's tiles are 16, 32 or 64 floats wide by level; shapes whose T and HS are no multiple of any
 * tile, grouped heads. Every score and output is summed in the same order on every level, so the outputs
 * agree to the softmax denominator's rounding; the gradients likewise. */
Test(ops_isa, attention_agrees_across_levels_on_ragged_shapes) {
    const int cases[][5] = {{2, 37, 4, 2, 24}, {1, 70, 3, 3, 72}, {2, 5, 2, 1, 3}, {1, 64, 2, 2, 64}};
    for (int c = 0; c < 4; c++) {
        const int B = cases[c][0], T = cases[c][1], NH = cases[c][2], KVH = cases[c][3], HS = cases[c][4];
        const long nqkv = (long)B * T * (NH + 2 * KVH) * HS, nout = (long)B * T * NH * HS, natt = (long)B * NH * T * T;
        float *qkv = tu_uniform(nqkv, -2, 2, 600 + c), *dout = tu_uniform(nout, -1, 1, 610 + c);
        float *out[OPS_ISA_COUNT], *att[OPS_ISA_COUNT], *dqkv[OPS_ISA_COUNT];
        for (int level = OPS_ISA_BASE; level < OPS_ISA_COUNT; level++) {
            out[level] = tu_zeros(nout), att[level] = tu_zeros(natt), dqkv[level] = tu_zeros(nqkv);
            if (!ops_isa_force((ops_isa)level)) continue;
            attention_forward(out[level], att[level], qkv, B, T, NH, KVH, HS);
            attention_backward(dqkv[level], dout, qkv, att[level], B, T, NH, KVH, HS);
            if (level == OPS_ISA_BASE) continue;
            char what[96];
            snprintf(what, sizeof what, "case %d, %s vs base: attention out", c, ops_isa_name((ops_isa)level));
            cr_expect(ops_compare(what, out[0], out[level], nout, 1e-6), "%s", what);
            snprintf(what, sizeof what, "case %d, %s vs base: probabilities", c, ops_isa_name((ops_isa)level));
            cr_expect(ops_compare(what, att[0], att[level], natt, 1e-6), "%s", what);
            snprintf(what, sizeof what, "case %d, %s vs base: dqkv", c, ops_isa_name((ops_isa)level));
            cr_expect(ops_compare(what, dqkv[0], dqkv[level], nqkv, 1e-5), "%s", what);
        }
        for (int level = OPS_ISA_BASE; level < OPS_ISA_COUNT; level++)
            free(out[level]), free(att[level]), free(dqkv[level]);
        free(qkv), free(dout);
    }
}

/* The bias gradient of a bf16 linear layer sums each column of dout down the rows; the lanes of a vector are
 * different columns, so every level must give the same bits, and the sums must be those of a double loop
 * (the inputs are small integers times powers of two: every partial sum is exact in fp32). Ragged widths:
 * no multiple of 16, and more columns than one 256-column chunk. */
Test(ops_isa, bf16_bias_sums_are_the_same_bits_on_every_level) {
    const int shapes[][2] = {{5, 37}, {64, 300}, {33, 1000}, {256, 2304}};
    for (int c = 0; c < 4; c++) {
        const int N = shapes[c][0], OC = shapes[c][1];
        uint16_t *dout = malloc((size_t)N * OC * sizeof *dout);
        double *want = calloc((size_t)OC, sizeof *want);
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++) {
                const int k = (n * 7 + o * 3) % 17 - 8;          /* -8 .. 8 */
                const float v = (float)k * 0.125f;               /* exact in bf16 */
                uint32_t bits;
                memcpy(&bits, &v, sizeof bits);
                dout[(size_t)n * OC + o] = (uint16_t)(bits >> 16);
                want[o] += v;
            }
        float *first = NULL;
        for (int level = OPS_ISA_BASE; level < OPS_ISA_COUNT; level++) {
            if (!ops_isa_force((ops_isa)level)) continue;
            float *dbias = malloc((size_t)OC * sizeof *dbias);
            for (int o = 0; o < OC; o++) dbias[o] = 0.5f; /* accumulated into */
            matmul_lowp_backward(NULL, NULL, dbias, dout, NULL, NULL, N, 16, OC, LOWP_BF16);
            int wrong = -1;
            for (int o = 0; o < OC && wrong < 0; o++)
                if (dbias[o] != (float)(want[o] + 0.5)) wrong = o;
            cr_expect(wrong < 0, "%s, N=%d OC=%d: column %d sums to %g, expected %g", ops_isa_name((ops_isa)level), N,
                      OC, wrong, wrong < 0 ? 0.0 : dbias[wrong], wrong < 0 ? 0.0 : want[wrong] + 0.5);
            if (!first) first = dbias;
            else {
                cr_expect(memcmp(first, dbias, (size_t)OC * sizeof *dbias) == 0, "%s differs from the baseline, N=%d OC=%d",
                          ops_isa_name((ops_isa)level), N, OC);
                free(dbias);
            }
        }
        free(first);
        free(dout);
        free(want);
    }
}

/* Lab 02's GELU and cross-entropy backward and AdamW, and lab 21's SwiGLU backward, are compiled once per level
 * (OPS_ISA_LAB_CLONES) and the CPU's widest copy runs whatever level is forced. They are elementwise, so that copy
 * must give the bits of the plain loop, written out here as the labs' handouts state it and compiled for the
 * baseline (no FMA instruction there): a copy that contracted a*b+c into an FMA would differ. Lengths are no
 * multiple of any vector width, and long enough for the threads to split them. */
static long first_difference(const float *a, const float *b, long n) {
    for (long i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
    return -1;
}

Test(ops_isa, lab_functions_at_the_cpus_width_give_the_plain_loops_bits) {
    /* GELU backward: dinp += gelu'(x) * dout */
    const long N = 5 * 16384 + 1237;
    float *x = tu_uniform(N, -9, 9, 511), *dout = tu_uniform(N, -2, 2, 512);
    float *got = tu_uniform(N, -1, 1, 513), *want = malloc((size_t)N * sizeof *want);
    memcpy(want, got, (size_t)N * sizeof *want);
    gelu_backward(got, x, dout, N);
    const float s2p = 0.7978845608028654f, cubic = 0.044715f;
    for (long i = 0; i < N; i++) {
        const float xi = x[i];
        const float u = s2p * (xi + cubic * xi * xi * xi), du = s2p * (1.0f + 3.0f * cubic * xi * xi);
        const float th = ops_tanhf(u);
        const float local = 0.5f * (1.0f + th) + 0.5f * xi * (1.0f - th * th) * du;
        want[i] += local * dout[i];
    }
    long at = first_difference(got, want, N);
    cr_expect(at < 0, "gelu_backward at x = %.9g: %.9g, the plain loop gives %.9g", at < 0 ? 0 : x[at],
              at < 0 ? 0 : got[at], at < 0 ? 0 : want[at]);
    free(x), free(dout), free(got), free(want);

    /* cross-entropy backward: (exp(z - lse) - onehot) * dloss, zero in the padding and for ignored rows */
    enum { ROWS = 7, V = 3 * 2048 + 301, VP = V + 11 };
    const int targets[ROWS] = {0, V - 1, 4097, -1, 2048, 17, 5000};
    float *logits = tu_uniform((long)ROWS * VP, -6, 6, 514), *lse = tu_uniform(ROWS, 8, 10, 515);
    float *dloss = tu_uniform(ROWS, 0.01f, 0.2f, 516), *dz_want = tu_zeros((long)ROWS * VP);
    float *dz = tu_uniform((long)ROWS * VP, -1, 1, 524); /* every value, the padding's too, must be written */
    crossentropy_backward(dz, logits, lse, targets, dloss, ROWS, V, VP);
    for (int n = 0; n < ROWS; n++) {
        if (targets[n] < 0) continue; /* all zeros */
        for (int v = 0; v < V; v++)
            dz_want[(size_t)n * VP + v] = ops_expf(logits[(size_t)n * VP + v] - lse[n]) * dloss[n];
        dz_want[(size_t)n * VP + targets[n]] -= dloss[n];
    }
    at = first_difference(dz, dz_want, (long)ROWS * VP);
    cr_expect(at < 0, "crossentropy_backward at row %ld column %ld: %.9g, the plain loop gives %.9g", at / VP, at % VP,
              at < 0 ? 0 : dz[at], at < 0 ? 0 : dz_want[at]);
    free(logits), free(lse), free(dloss), free(dz), free(dz_want);

    /* SwiGLU backward (lab 21): rows [gate | up], through silu(gate) = gate * sigmoid(gate) */
    enum { SROWS = 3, F = 2 * 1024 + 77 };
    float *inp = tu_uniform(2L * SROWS * F, -8, 8, 521), *dy = tu_uniform((long)SROWS * F, -1, 1, 522);
    float *dinp = tu_uniform(2L * SROWS * F, -1, 1, 523), *dinp_want = malloc(2L * SROWS * F * sizeof *dinp_want);
    memcpy(dinp_want, dinp, 2L * SROWS * F * sizeof *dinp);
    swiglu_backward(dinp, dy, inp, SROWS, F);
    for (long n = 0; n < SROWS; n++)
        for (long f = 0; f < F; f++) {
            const float g = inp[n * 2 * F + f], up = inp[n * 2 * F + F + f], d = dy[n * F + f], s = ops_sigmoidf(g);
            dinp_want[n * 2 * F + f] += d * up * s * (1.0f + g * (1.0f - s));
            dinp_want[n * 2 * F + F + f] += d * g * s;
        }
    at = first_difference(dinp, dinp_want, 2L * SROWS * F);
    cr_expect(at < 0, "swiglu_backward at %ld: %.9g, the plain loop gives %.9g", at, at < 0 ? 0 : dinp[at],
              at < 0 ? 0 : dinp_want[at]);
    free(inp), free(dy), free(dinp), free(dinp_want);

    /* AdamW, step 3: the constants as optimizer.c rounds them (double, then float once) */
    const long P = 3 * 65536 + 999;
    float *p = tu_uniform(P, -1, 1, 517), *g = tu_uniform(P, -0.1f, 0.1f, 518), *m = tu_uniform(P, -0.01f, 0.01f, 519);
    float *v = tu_uniform(P, 0, 1e-4f, 520);
    float *p_want = malloc((size_t)P * sizeof *p_want), *m_want = malloc((size_t)P * sizeof *m_want);
    float *v_want = malloc((size_t)P * sizeof *v_want);
    memcpy(p_want, p, (size_t)P * sizeof *p), memcpy(m_want, m, (size_t)P * sizeof *m);
    memcpy(v_want, v, (size_t)P * sizeof *v);
    const optim_hparams h = {.lr = 6e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    const long step = 3;
    optim_adamw_update(p, g, m, v, (size_t)P, &h, step);
    const float lr = (float)h.lr, wd = (float)h.weight_decay, b1 = (float)h.beta1, b2 = (float)h.beta2;
    const float omb1 = (float)(1.0 - h.beta1), omb2 = (float)(1.0 - h.beta2), eps = (float)h.eps;
    const float step_size = (float)(h.lr / (1.0 - pow(h.beta1, step)));
    const float inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(h.beta2, step)));
    for (long i = 0; i < P; i++) {
        const float pi = p_want[i] - lr * wd * p_want[i];
        m_want[i] = b1 * m_want[i] + omb1 * g[i];
        v_want[i] = b2 * v_want[i] + omb2 * g[i] * g[i];
        p_want[i] = pi - step_size * m_want[i] / (sqrtf(v_want[i]) * inv_sqrt_bc2 + eps);
    }
    at = first_difference(p, p_want, P);
    cr_expect(at < 0, "optim_adamw_update at %ld: p = %.9g, the plain loop gives %.9g", at, at < 0 ? 0 : p[at],
              at < 0 ? 0 : p_want[at]);
    cr_expect(first_difference(m, m_want, P) < 0 && first_difference(v, v_want, P) < 0,
              "optim_adamw_update: the moments differ from the plain loop's");
    free(p), free(g), free(m), free(v), free(p_want), free(m_want), free(v_want);
}
