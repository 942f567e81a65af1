/* perf.c: model FLOPs per token, throughput and MFU, and the activation memory of mixpar's model (perf.h). */
#include "plan/perf.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/lab.h"

/* ------------------------------------------------------------------ FLOPs */

void perf_train_flops_per_token(const plan_model *m, uint64_t seq, perf_flops *out) {
    const plan_arch_info *arch = plan_arch_get(m->arch);
    uint64_t L = m->layers, h = m->hidden, F = m->ffn, V = m->vocab, s = seq;
    uint64_t kv = m->kv_heads * (m->hidden / m->heads); /* g*d: the width of K and of V */
    memset(out, 0, sizeof *out);
    /* LAB 10 BEGIN model FLOPs per token: 6 per matmul weight, plus attention's 12 L s h */
    /* The weights a token is multiplied by, per block: Q (h x h), K and V (h x g*d each), the attention
     * output (h x h), the MLP's matrices (h x F each); then the output head (V x h), once. */
    uint64_t block = h * h + 2 * h * kv + h * h + arch->mlp_matrices * h * F;
    out->matmul_params = L * block + V * h;
    /* A weight costs one multiply-add (2 FLOPs) per token forward; backward computes the input's gradient
     * and the weight's gradient, each a product of the same size: 4 more. */
    out->dense = 6 * out->matmul_params;
    /* Per layer and token, Q K^T takes s dot products of length h (2 s h FLOPs) and P V as many again:
     * 4 s h forward, 12 s h with backward. */
    out->attention = 12 * L * s * h;
    out->total = out->dense + out->attention;
    /* LAB 10 END */
}

/* ------------------------------------------------------------------ throughput */

perf_throughput perf_throughput_of(uint64_t tokens, double seconds, double flops_per_token, double peak_flops_per_s) {
    if (!(seconds > 0) || !isfinite(seconds))
        MP_FAIL("a step time > 0 seconds", "%g seconds for %llu tokens", seconds, (unsigned long long)tokens);
    if (!(peak_flops_per_s > 0) || !isfinite(peak_flops_per_s))
        MP_FAIL_HINT("a peak > 0 FLOP/s", "measure it in the same run (bench/bench_util.h: bench_sgemm_peak_gflops)",
                     "peak %g FLOP/s", peak_flops_per_s);
    perf_throughput r = {0};
    /* LAB 10 BEGIN throughput: tokens per second, model FLOPs per second, MFU against the peak */
    r.tokens_per_s = (double)tokens / seconds;
    r.flops_per_s = flops_per_token * r.tokens_per_s;
    r.mfu = r.flops_per_s / peak_flops_per_s;
    /* LAB 10 END */
    return r;
}

/* ------------------------------------------------------------------ activation memory */

static uint64_t umax(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* model_dim_size's QKV and FC, from the config's fields. */
static uint64_t qkv_width(const model_config *c) { return (uint64_t)(c->NH + 2 * c->KVH) * (uint64_t)(c->C / c->NH); }
static uint64_t fc_width(const model_config *c) { return c->arch == MODEL_LLAMA ? 2 * (uint64_t)c->F : (uint64_t)c->F; }

uint64_t perf_working_bytes(const model_config *c, int B, int T, model_compute compute) {
    uint64_t N = (uint64_t)B * (uint64_t)T, C = (uint64_t)c->C, QKV = qkv_width(c), FC = fc_width(c), F = (uint64_t)c->F;
    if (compute == MODEL_COMPUTE_FP32) /* proj, dres, dln, datty (C each), dqkv, dfch, dfch_act */
        return N * (4 * C + QKV + FC + F) * 4;
    /* model_lowp.c: the pool holds one layer's widest phase (attention's backward, or the MLP's forward), the
     * activation's backward decodes 16 rows at a time, the head works on blocks of about 2^19 logits (and
     * at least 8 full rows), and one gradient is rounded to 16 bits for a matmul. */
    uint64_t NHT = (uint64_t)c->NH * (uint64_t)T, Vp = (uint64_t)c->Vp;
    uint64_t pool = N * umax(umax(3 * C + QKV + NHT + C, 3 * C + FC + F), 4 * C + 2 * QKV + NHT) * 4;
    uint64_t rows = 16 * FC * 4;
    uint64_t head_cols = (UINT64_C(1) << 19) / N / 64 * 64;
    head_cols = head_cols < 64 ? 64 : head_cols > Vp ? Vp : head_cols;
    uint64_t head = umax(8 * Vp, N * head_cols) * 4;
    uint64_t grad16 = N * umax(umax(QKV, FC), C) * 2;
    return pool + rows + head + grad16;
}

void perf_activation_bytes(const model_config *c, int B, int T, model_compute compute, perf_activations *out) {
    MP_ASSERT(compute >= 0 && compute < MODEL_NCOMPUTE, "compute mode %d", (int)compute);
    memset(out, 0, sizeof *out);
    uint64_t N = (uint64_t)B * (uint64_t)T, C = (uint64_t)c->C, QKV = qkv_width(c), FC = fc_width(c), F = (uint64_t)c->F;
    uint64_t L = (uint64_t)c->L, NH = (uint64_t)c->NH, Vp = (uint64_t)c->Vp, Tt = (uint64_t)T;
    bool layernorm = c->arch == MODEL_GPT2; /* LayerNorm keeps a mean and 1/std per position; RMSNorm 1/std only */
    /* LAB 10 BEGIN activation bytes: the tensors backward reads, in the storage format, and their fp32 statistics */
    /* 16-bit compute modes store every activation in 2 bytes; fp32 and tf32 (a matmul mode) in 4. */
    out->storage_bytes = compute == MODEL_COMPUTE_FP32 || compute == MODEL_COMPUTE_TF32 ? 4 : 2;
    /* Per block: ln1, atty, res2, ln2, res3 are (B,T,C); qkv (B,T,QKV); fch (B,T,FC); fch_act (B,T,F); and
     * the attention probabilities, one T x T map per head and sequence. */
    uint64_t block = N * (5 * C + QKV + FC + F) + (uint64_t)B * NH * Tt * Tt;
    /* Outside the blocks: the embedding's output and the final norm's output (B,T,C), and the logits (B,T,Vp). */
    uint64_t outside = N * (2 * C + Vp);
    out->kept = (L * block + outside) * out->storage_bytes;
    /* fp32 per position: two norms per block and the final norm, each 1/std and (LayerNorm) a mean; then the
     * loss, the log-sum-exp and the loss's gradient. */
    uint64_t per_norm = layernorm ? 2 : 1;
    out->statistics = N * ((2 * L + 1) * per_norm + 3) * 4;
    /* LAB 10 END */
    out->working = perf_working_bytes(c, B, T, compute);
    out->total = out->kept + out->statistics + out->working;
}
