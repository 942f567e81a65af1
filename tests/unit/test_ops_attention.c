/* test_ops_attention.c: causal attention: double references, gradient check, grouped-query heads, the causal mask. */
#include "ops/attention.h"
#include "ops/gradcheck.h"
#include "ops/isa.h"
#include "ops_testutil.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>

/* The definition, in double, one (b, h, t) at a time. */
static void attention_forward_double(float *out, const float *qkv, int B, int T, int NH, int KVH, int HS) {
    const int row = (NH + 2 * KVH) * HS, group = NH / KVH;
    double score[128];
    cr_assert(T <= 128);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + (b * T + t) * row + h * HS;
                double max = -INFINITY, sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *k = qkv + (b * T + t2) * row + (NH + h / group) * HS;
                    double dot = 0;
                    for (int i = 0; i < HS; i++) dot += (double)q[i] * k[i];
                    score[t2] = dot / sqrt(HS);
                    max = fmax(max, score[t2]);
                }
                for (int t2 = 0; t2 <= t; t2++) sum += exp(score[t2] - max);
                for (int i = 0; i < HS; i++) {
                    double o = 0;
                    for (int t2 = 0; t2 <= t; t2++)
                        o += exp(score[t2] - max) / sum * qkv[(b * T + t2) * row + (NH + KVH + h / group) * HS + i];
                    out[(b * T + t) * NH * HS + h * HS + i] = (float)o;
                }
            }
}

typedef struct {
    float *qkv, *out, *att, *w;
    int B, T, NH, KVH, HS;
} att_ctx;

static long qkv_size(const att_ctx *a) { return (long)a->B * a->T * (a->NH + 2 * a->KVH) * a->HS; }
static long out_size(const att_ctx *a) { return (long)a->B * a->T * a->NH * a->HS; }
static long att_size(const att_ctx *a) { return (long)a->B * a->NH * a->T * a->T; }

static void att_setup(att_ctx *a, int B, int T, int NH, int KVH, int HS, float range, uint64_t seed) {
    *a = (att_ctx){.B = B, .T = T, .NH = NH, .KVH = KVH, .HS = HS};
    a->qkv = tu_uniform(qkv_size(a), -range, range, seed);
    a->out = tu_zeros(out_size(a));
    a->att = tu_zeros(att_size(a));
    a->w = tu_uniform(out_size(a), -1, 1, seed + 1);
}

static void att_free(att_ctx *a) { free(a->qkv), free(a->out), free(a->att), free(a->w); }

static double att_loss(void *p) {
    att_ctx *a = p;
    attention_forward(a->out, a->att, a->qkv, a->B, a->T, a->NH, a->KVH, a->HS);
    return tu_weighted_sum(a->w, a->out, out_size(a));
}

Test(ops_attention, forward_matches_double_reference) {
    const int cases[][5] = {{2, 7, 4, 4, 8}, {1, 13, 6, 2, 5}, {3, 5, 3, 1, 16}, {1, 1, 2, 2, 4}};
    for (int c = 0; c < 4; c++) {
        att_ctx a;
        att_setup(&a, cases[c][0], cases[c][1], cases[c][2], cases[c][3], cases[c][4], 2.0f, 100 + c);
        float *ref = tu_zeros(out_size(&a));
        attention_forward(a.out, a.att, a.qkv, a.B, a.T, a.NH, a.KVH, a.HS);
        attention_forward_double(ref, a.qkv, a.B, a.T, a.NH, a.KVH, a.HS);
        /* float dot products and softmax against double: a few ulp of values around 1 */
        cr_expect(ops_compare("attention out", ref, a.out, out_size(&a), 2e-6), "case %d", c);
        free(ref);
        att_free(&a);
    }
}

Test(ops_attention, probabilities_are_causal_and_sum_to_one) {
    att_ctx a;
    att_setup(&a, 2, 9, 3, 3, 4, 3.0f, 7);
    attention_forward(a.out, a.att, a.qkv, a.B, a.T, a.NH, a.KVH, a.HS);
    for (long r = 0; r < (long)a.B * a.NH * a.T; r++) {
        int t = (int)(r % a.T);
        double sum = 0;
        for (int t2 = 0; t2 < a.T; t2++) {
            float p = a.att[r * a.T + t2];
            if (t2 > t) cr_assert(p == 0.0f, "att[%ld][%d] above the diagonal should be 0, got %g", r, t2, p);
            else cr_assert(p > 0 && p <= 1, "att[%ld][%d] = %g is not a probability", r, t2, p);
            sum += p;
        }
        cr_assert(fabs(sum - 1) < 1e-6, "row %ld of att sums to %.9g, not 1", r, sum);
    }
    att_free(&a);
}

Test(ops_attention, future_positions_do_not_change_the_past) {
    att_ctx a;
    att_setup(&a, 2, 8, 4, 2, 6, 1.0f, 11);
    const int row = (a.NH + 2 * a.KVH) * a.HS;
    attention_forward(a.out, a.att, a.qkv, a.B, a.T, a.NH, a.KVH, a.HS);
    float *before = tu_copy(a.out, out_size(&a));
    /* Change everything (q, k and v) at positions 5, 6, 7 of both sequences. */
    for (int b = 0; b < a.B; b++)
        for (int t = 5; t < a.T; t++)
            for (int i = 0; i < row; i++) a.qkv[(b * a.T + t) * row + i] += 3.0f;
    attention_forward(a.out, a.att, a.qkv, a.B, a.T, a.NH, a.KVH, a.HS);
    const int C = a.NH * a.HS;
    for (int b = 0; b < a.B; b++) {
        cr_expect(tu_bits_equal(before + b * a.T * C, a.out + b * a.T * C, 5 * C),
                  "batch %d: outputs at t < 5 changed when only t >= 5 changed: the causal mask leaks", b);
        cr_expect(!tu_bits_equal(before + (b * a.T + 5) * C, a.out + (b * a.T + 5) * C, C), "t = 5 should change");
    }
    /* And backward: a loss on positions < 5 only gives zero gradient at positions >= 5. */
    float *dout = tu_zeros(out_size(&a)), *dqkv = tu_zeros(qkv_size(&a));
    for (int b = 0; b < a.B; b++)
        for (int i = 0; i < 5 * C; i++) dout[b * a.T * C + i] = a.w[b * a.T * C + i];
    attention_backward(dqkv, dout, a.qkv, a.att, a.B, a.T, a.NH, a.KVH, a.HS);
    for (int b = 0; b < a.B; b++)
        for (int t = 5; t < a.T; t++)
            for (int i = 0; i < row; i++)
                cr_assert(dqkv[(b * a.T + t) * row + i] == 0.0f, "dqkv at future position %d (b=%d, i=%d) is %g", t,
                          b, i, dqkv[(b * a.T + t) * row + i]);
    free(before), free(dout), free(dqkv);
    att_free(&a);
}

static void gradcheck_attention(int B, int T, int NH, int KVH, int HS, uint64_t seed) {
    att_ctx a;
    att_setup(&a, B, T, NH, KVH, HS, 1.0f, seed);
    float *dqkv = tu_zeros(qkv_size(&a));
    attention_forward(a.out, a.att, a.qkv, B, T, NH, KVH, HS);
    attention_backward(dqkv, a.w, a.qkv, a.att, B, T, NH, KVH, HS);
    /* Smooth in qkv (softmax of dot products); third derivatives are O(1) for unit inputs, so the
     * central difference with h = 1e-2 is good to ~1e-5; float noise in a loss of ~sqrt(B*T*C) terms
     * adds ~1e-5. Tolerance 2e-4 absolute + 1e-2 relative. */
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS;
    opt.abs_tol = 2e-4;
    char name[64];
    snprintf(name, sizeof name, "attention dqkv NH=%d KVH=%d", NH, KVH);
    cr_expect_eq(ops_gradcheck(name, att_loss, &a, a.qkv, dqkv, qkv_size(&a), &opt).failed, 0);
    free(dqkv);
    att_free(&a);
}

/* The gradients by the definition, in double, one (b, h, t) at a time, added into dqkv (zero on entry):
 *   dp[t2] = dy[t] . v[t2],  ds[t2] = p[t2] (dp[t2] - sum_j p[j] dp[j]) / sqrt(HS),
 *   dq[t] += sum_t2 ds[t2] k[t2],  dk[t2] += ds[t2] q[t],  dv[t2] += p[t2] dy[t]. */
static void attention_backward_double(float *dqkv, const float *dout, const float *qkv, int B, int T, int NH, int KVH,
                                      int HS) {
    const int row = (NH + 2 * KVH) * HS, group = NH / KVH, C = NH * HS;
    const long n = (long)B * T * row;
    double *acc = calloc((size_t)n, sizeof(double)), p[128], dp[128];
    cr_assert(acc && T <= 128);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const long q = (long)(b * T + t) * row + h * HS, k0 = NH * HS + h / group * HS, v0 = k0 + KVH * HS;
                const float *dy = dout + (long)(b * T + t) * C + h * HS;
                double max = -INFINITY, sum = 0, p_dp = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const long k = (long)(b * T + t2) * row + k0;
                    double dot = 0;
                    for (int i = 0; i < HS; i++) dot += (double)qkv[q + i] * qkv[k + i];
                    p[t2] = dot / sqrt(HS);
                    max = fmax(max, p[t2]);
                }
                for (int t2 = 0; t2 <= t; t2++) sum += (p[t2] = exp(p[t2] - max));
                for (int t2 = 0; t2 <= t; t2++) {
                    const long v = (long)(b * T + t2) * row + v0;
                    p[t2] /= sum;
                    dp[t2] = 0;
                    for (int i = 0; i < HS; i++) dp[t2] += (double)dy[i] * qkv[v + i];
                    p_dp += p[t2] * dp[t2];
                }
                for (int t2 = 0; t2 <= t; t2++) {
                    const long k = (long)(b * T + t2) * row + k0, v = (long)(b * T + t2) * row + v0;
                    const double ds = p[t2] * (dp[t2] - p_dp) / sqrt(HS);
                    for (int i = 0; i < HS; i++) {
                        acc[q + i] += ds * qkv[k + i];
                        acc[k + i] += ds * qkv[q + i];
                        acc[v + i] += p[t2] * dy[i];
                    }
                }
            }
    for (long i = 0; i < n; i++) dqkv[i] = (float)acc[i];
    free(acc);
}

/* Shapes past the register tiles' edges on every level (tiles 16, 32 or 64 floats wide): T = 67 is an odd
 * number of rows (the rows and columns go in pairs, the last one alone) and more than one tile of keys; HS = 72
 * is whole tiles and a ragged rest. Forward and backward against the double definitions, at every level. */
Test(ops_attention, full_tiles_and_odd_rows_match_double_references) {
    const int cases[][5] = {{1, 67, 4, 2, 72}, {2, 66, 2, 2, 64}, {1, 9, 3, 1, 128}};
    for (int c = 0; c < 3; c++) {
        att_ctx a;
        att_setup(&a, cases[c][0], cases[c][1], cases[c][2], cases[c][3], cases[c][4], 1.5f, 300 + c);
        float *out_ref = tu_zeros(out_size(&a)), *dqkv_ref = tu_zeros(qkv_size(&a)), *dqkv = tu_zeros(qkv_size(&a));
        attention_forward_double(out_ref, a.qkv, a.B, a.T, a.NH, a.KVH, a.HS);
        attention_backward_double(dqkv_ref, a.w, a.qkv, a.B, a.T, a.NH, a.KVH, a.HS);
        for (int level = OPS_ISA_BASE; level < OPS_ISA_COUNT; level++) {
            if (!ops_isa_force((ops_isa)level)) continue;
            attention_forward(a.out, a.att, a.qkv, a.B, a.T, a.NH, a.KVH, a.HS);
            for (long i = 0; i < qkv_size(&a); i++) dqkv[i] = 0.0f;
            attention_backward(dqkv, a.w, a.qkv, a.att, a.B, a.T, a.NH, a.KVH, a.HS);
            char what[96];
            snprintf(what, sizeof what, "case %d, %s: attention out", c, ops_isa_name((ops_isa)level));
            cr_expect(ops_compare(what, out_ref, a.out, out_size(&a), 2e-6), "%s", what);
            snprintf(what, sizeof what, "case %d, %s: attention dqkv", c, ops_isa_name((ops_isa)level));
            cr_expect(ops_compare(what, dqkv_ref, dqkv, qkv_size(&a), 1e-5), "%s", what);
        }
        free(out_ref), free(dqkv_ref), free(dqkv);
        att_free(&a);
    }
}

Test(ops_attention, backward_matches_finite_differences_mha) { gradcheck_attention(2, 5, 3, 3, 4, 21); }
Test(ops_attention, backward_matches_finite_differences_gqa) { gradcheck_attention(1, 6, 4, 2, 6, 22); }
Test(ops_attention, backward_matches_finite_differences_mqa) { gradcheck_attention(2, 4, 3, 1, 5, 23); }

Test(ops_attention, grouped_query_equals_repeated_kv_heads) {
    /* GQA with KVH kv heads must equal plain MHA where every query head gets its own copy of the kv head
     * it shares: forward outputs bit for bit, and the GQA dk/dv equal the sum of the copies' dk/dv. */
    const int B = 2, T = 7, NH = 6, KVH = 2, HS = 5, group = NH / KVH;
    att_ctx g, m;
    att_setup(&g, B, T, NH, KVH, HS, 1.5f, 31);
    att_setup(&m, B, T, NH, NH, HS, 1.5f, 31);
    const int grow = (NH + 2 * KVH) * HS, mrow = 3 * NH * HS;
    for (int bt = 0; bt < B * T; bt++) {
        const float *src = g.qkv + bt * grow;
        float *dst = m.qkv + bt * mrow;
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < HS; i++) {
                dst[h * HS + i] = src[h * HS + i];                                       /* q */
                dst[(NH + h) * HS + i] = src[(NH + h / group) * HS + i];                 /* k copy */
                dst[(2 * NH + h) * HS + i] = src[(NH + KVH + h / group) * HS + i];       /* v copy */
            }
    }
    attention_forward(g.out, g.att, g.qkv, B, T, NH, KVH, HS);
    attention_forward(m.out, m.att, m.qkv, B, T, NH, NH, HS);
    cr_expect(tu_bits_equal(g.out, m.out, out_size(&g)), "GQA forward differs from MHA with repeated kv heads");
    cr_expect(tu_bits_equal(g.att, m.att, att_size(&g)), "GQA probabilities differ from MHA with repeated kv heads");

    float *gd = tu_zeros(qkv_size(&g)), *md = tu_zeros(qkv_size(&m));
    attention_backward(gd, g.w, g.qkv, g.att, B, T, NH, KVH, HS);
    attention_backward(md, g.w, m.qkv, m.att, B, T, NH, NH, HS);
    float *summed = tu_zeros(qkv_size(&g));
    for (int bt = 0; bt < B * T; bt++) {
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < HS; i++) {
                summed[bt * grow + h * HS + i] = md[bt * mrow + h * HS + i];
                summed[bt * grow + (NH + h / group) * HS + i] += md[bt * mrow + (NH + h) * HS + i];
                summed[bt * grow + (NH + KVH + h / group) * HS + i] += md[bt * mrow + (2 * NH + h) * HS + i];
            }
    }
    /* Same products, summed over the group in a different order: a few ulp. */
    cr_expect(ops_compare("GQA dqkv vs summed MHA dqkv", summed, gd, qkv_size(&g), 1e-6));
    free(gd), free(md), free(summed);
    att_free(&g);
    att_free(&m);
}

Test(ops_attention, large_scores_stay_finite) {
    /* Scores of several thousand: a softmax without the max subtraction would overflow exp. */
    att_ctx a;
    att_setup(&a, 1, 6, 2, 2, 8, 40.0f, 41);
    float *dqkv = tu_zeros(qkv_size(&a));
    attention_forward(a.out, a.att, a.qkv, a.B, a.T, a.NH, a.KVH, a.HS);
    attention_backward(dqkv, a.w, a.qkv, a.att, a.B, a.T, a.NH, a.KVH, a.HS);
    for (long i = 0; i < out_size(&a); i++) cr_assert(isfinite(a.out[i]), "out[%ld] = %g", i, a.out[i]);
    for (long i = 0; i < qkv_size(&a); i++) cr_assert(isfinite(dqkv[i]), "dqkv[%ld] = %g", i, dqkv[i]);
    free(dqkv);
    att_free(&a);
}

Test(ops_attention, backward_does_not_depend_on_thread_count) {
    att_ctx a;
    att_setup(&a, 2, 32, 4, 2, 16, 1.0f, 51); /* big enough to run multi-threaded */
    float *one = tu_zeros(qkv_size(&a)), *two = tu_zeros(qkv_size(&a));
    omp_set_num_threads(1);
    attention_forward(a.out, a.att, a.qkv, a.B, a.T, a.NH, a.KVH, a.HS);
    attention_backward(one, a.w, a.qkv, a.att, a.B, a.T, a.NH, a.KVH, a.HS);
    omp_set_num_threads(2);
    attention_forward(a.out, a.att, a.qkv, a.B, a.T, a.NH, a.KVH, a.HS);
    attention_backward(two, a.w, a.qkv, a.att, a.B, a.T, a.NH, a.KVH, a.HS);
    cr_expect(tu_bits_equal(one, two, qkv_size(&a)), "dqkv with 1 and 2 threads should be bit-identical");
    free(one), free(two);
    att_free(&a);
}
