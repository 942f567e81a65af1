/* model_lowp.c: forward and backward of the model in a low-precision compute mode (model_lowp.h). */
#include "model/model_internal.h"

#include "amp/fp8.h"
#include "base/error.h"
#include "base/mem.h"
#include "fp/convert.h"
#include "fp/format.h"
#include "fp/mx.h"
#include "ops/attention.h"
#include "ops/crossentropy.h"
#include "ops/encoder.h"
#include "ops/gelu.h"
#include "ops/matmul.h"
#include "ops/matmul_lowp.h"
#include "ops/residual.h"
#include "ops/rope.h"
#include "ops/swiglu.h"
#include "prof/kernel_costs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The matmul sites of a block, in forward order; the LM head is one more site after the last block. */
enum { SITE_QKV, SITE_ATTPROJ, SITE_FC, SITE_FCPROJ, SITES_PER_LAYER };
/* Each fp8 site scales three tensors separately: its input, its weight and the gradient of its output. */
enum { FP8_X, FP8_W, FP8_G, FP8_PER_SITE };
/* The head's logits (N, Vp) are computed, rounded and turned into the loss HEAD_ROWS rows at a time, so
 * the only fp32 copy of them is a (HEAD_ROWS, Vp) block: at GPT-2's vocabulary the full fp32 logits would
 * be the largest activation of all. */
enum { HEAD_ROWS = 8 };
/* The MLP activation's backward decodes its stored input ACT_ROWS rows at a time. */
enum { ACT_ROWS = 16 };

/* What a block keeps for backward, in the storage format (esz bytes per value), and its fp32 statistics.
 * Under a recompute policy (model.h) a checkpointed block's tensors point at one shared block of storage
 * that its forward and its recompute fill, and the block keeps its input in fp32 (in32) instead: forward
 * carries the residual stream in fp32, and a recompute from the rounded copy would not be the same
 * forward. Selective recompute stores no att (backward rebuilds it in the pool). res3 is the block's
 * output in the storage format (the next block's input, or the final norm's): NULL when the next block
 * keeps it in fp32. */
typedef struct {
    void *ln1, *qkv, *atty, *att, *res2, *ln2, *fch, *fch_act, *res3;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
    float *in32;                /* (B,T,C) checkpointed blocks only: the residual stream entering the block */
} lowp_layer;

struct model_lowp {
    model_precision prec;
    size_t esz;                 /* bytes per stored activation: 2 (bf16, fp16, fp8's bf16) or 4 (tf32) */
    lowp_format fmt;            /* the 16-bit format of storage (and of the matmuls for bf16 / fp16) */
    bool kernel;                /* matmuls through the 16-bit kernel; otherwise "wide" (see mm_forward) */
    bool in_place;              /* w32 is the model's own (reserved) parameter buffer: model_lowp_cast_range */
    /* stored for backward (MEM_ACT) */
    char *store;
    size_t store_bytes;
    int B, T;
    lowp_layer *layers;         /* (L) */
    void *encoded, *lnf, *logits; /* encoded: NULL when block 0 keeps its input in fp32 */
    float *lnf_mean, *lnf_rstd, *losses, *lse, *dloss;
    /* fp32 scratch for one layer at a time (MEM_ACT): the pool holds forward's working tensors, then
     * backward's gradients, laid out per phase (see "the pool" below) */
    float *scratch;
    size_t scratch_bytes;
    float *pool, *rowtmp, *head_rows;
    uint16_t *grad16;           /* a gradient rounded for a 16-bit matmul */
    float *fq_in, *fq_grad;     /* wide matmuls: rounded or fake-quantised operands (MEM_OTHER) */
    char *operands;
    size_t operand_bytes;
    uint8_t *q8;                /* fp8 codes */
    size_t q8_bytes;
    /* the weights cast for this forward (MEM_OTHER) */
    uint16_t *w16;
    float *w32;
    bool weights_held;          /* model_hold_weights: the parameters do not change until released */
    bool cast_is_current;       /* held, and w16 / w32 are already the cast of the parameters */
    amp_fp8_meta *fp8;          /* (nsites * FP8_PER_SITE) */
    int nsites;
    bool recomputing;           /* a checkpointed block's forward is being rerun: record and count nothing */
    /* counters */
    bool counting;
    model_layer_rounding *rounding; /* (L + 2) */
    float *logit_row;           /* (Vp) model_logits' decoded row */
    model *owner;               /* for the activation reports (model_act_computed) */
};

static const char *const compute_names[MODEL_NCOMPUTE] = {"fp32", "tf32", "bf16", "fp16", "fp8"};

const char *model_compute_name(model_compute c) {
    return c >= 0 && c < MODEL_NCOMPUTE ? compute_names[c] : "?";
}

model_compute model_get_compute(const model *m) { return m->lowp ? m->lowp->prec.compute : MODEL_COMPUTE_FP32; }
const char *model_products_kernel16(const model *m) {
    return m->lowp && m->lowp->kernel ? matmul_lowp_path(m->lowp->fmt) : NULL;
}
bool model_get_fp8_mx(const model *m) { return m->lowp && m->lowp->prec.fp8_mx; }

/* ------------------------------------------------------------------ rounding */

/* Round to nearest even at tf32's 10 mantissa bits, in fp32 storage (what a tf32 tensor core reads). */
static float tf32_round(float x) {
    uint32_t b;
    memcpy(&b, &x, 4);
    if ((b & 0x7F800000u) == 0x7F800000u) return x; /* inf and NaN stay */
    b += 0xFFFu + ((b >> 13) & 1u);
    b &= ~0x1FFFu;
    memcpy(&x, &b, 4);
    return x;
}

static void tf32_round_array(float *dst, const float *src, size_t n) {
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
    for (size_t i = 0; i < n; i++) dst[i] = tf32_round(src[i]);
}

/* The conversions are single-threaded loops; big tensors (the weights, the head's rows) are split into
 * blocks over the OpenMP threads. */
enum { CONVERT_BLOCK = 1 << 15 };

static void encode_par(uint16_t *dst, const float *src, size_t n, lowp_format fmt) {
    long blocks = (long)((n + CONVERT_BLOCK - 1) / CONVERT_BLOCK);
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (long k = 0; k < blocks; k++) {
        size_t i = (size_t)k * CONVERT_BLOCK, len = n - i < CONVERT_BLOCK ? n - i : CONVERT_BLOCK;
        lowp_encode(dst + i, src + i, len, fmt);
    }
}

static void decode_par(float *dst, const uint16_t *src, size_t n, lowp_format fmt) {
    long blocks = (long)((n + CONVERT_BLOCK - 1) / CONVERT_BLOCK);
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (long k = 0; k < blocks; k++) {
        size_t i = (size_t)k * CONVERT_BLOCK, len = n - i < CONVERT_BLOCK ? n - i : CONVERT_BLOCK;
        lowp_decode(dst + i, src + i, len, fmt);
    }
}

/* Adds what rounding src (fp32) into dst (16-bit) did to the counter. */
static void count_rounding(model_round_count *c, const float *src, const uint16_t *dst, size_t n, lowp_format fmt) {
    uint16_t inf = fmt == LOWP_FP16 ? 0x7C00 : 0x7F80;
    uint64_t nonzero = 0, flushed = 0, overflowed = 0;
#pragma omp parallel for schedule(static) reduction(+ : nonzero, flushed, overflowed) if (n >= (1 << 16))
    for (size_t i = 0; i < n; i++) {
        if (src[i] == 0.0f) continue;
        nonzero++;
        uint16_t mag = dst[i] & 0x7FFF;
        if (mag == 0) flushed++;
        else if (mag == inf && isfinite(src[i])) overflowed++;
    }
    c->values += n;
    c->nonzero += nonzero;
    c->flushed += flushed;
    c->overflowed += overflowed;
}

static uint64_t count_nonzero(const float *x, size_t n) {
    uint64_t k = 0;
#pragma omp parallel for schedule(static) reduction(+ : k) if (n >= (1 << 16))
    for (size_t i = 0; i < n; i++) k += x[i] != 0.0f;
    return k;
}

static model_round_count *act_counter(model_lowp *lp, int layer) {
    return lp->counting && !lp->recomputing ? &lp->rounding[layer + 1].acts : NULL;
}

/* Stores src (fp32, n values) for backward and rounds src to the stored value, so what forward goes on
 * computing with is exactly what backward will read. A matmul input in tf32 mode is rounded to tf32 (the
 * format the product reads) before it is stored. */
static void store_values(model_lowp *lp, int layer, const char *name, void *dst, float *src, size_t n,
                         bool matmul_input) {
    if (!lp->recomputing) model_act_computed(lp->owner, layer, name, src, n); /* before rounding: what formats make of it */
    if (lp->esz == 4) {
        if (matmul_input && lp->prec.compute == MODEL_COMPUTE_TF32) tf32_round_array(src, src, n);
        memcpy(dst, src, n * 4);
        return;
    }
    encode_par(dst, src, n, lp->fmt);
    model_round_count *c = act_counter(lp, layer);
    if (c) count_rounding(c, src, dst, n, lp->fmt);
    decode_par(src, dst, n, lp->fmt);
}

/* The conversions between fp32 and the storage format, timed by the profiler (lab 23) as "convert" kernels: they
 * only move data (prof_cost_convert), and on a 16-bit run they are a visible part of the step. Nothing that calls
 * them is itself a kernel, so no kernel's time holds another's. store: src read, dst written, src rewritten as the
 * stored values. */
static void store(model_lowp *lp, int layer, const char *name, void *dst, float *src, size_t n, bool matmul_input) {
    PROF_KERNEL("convert", prof_cost_convert((double)n, 4, lp->esz == 2 ? 2 + 4 : 4),
                store_values(lp, layer, name, dst, src, n, matmul_input));
}

/* Stores a copy without touching src: the residual stream stays fp32 in forward. */
static void store_copy(model_lowp *lp, int layer, const char *name, void *dst, float *src, size_t n) {
    if (!lp->recomputing) model_act_computed(lp->owner, layer, name, src, n);
    if (lp->esz == 4) PROF_KERNEL("convert", prof_cost_convert((double)n, 4, 4), memcpy(dst, src, n * 4));
    else PROF_KERNEL("convert", prof_cost_convert((double)n, 4, 2), encode_par(dst, src, n, lp->fmt));
}

static void load(const model_lowp *lp, float *dst, const void *src, size_t n) {
    if (lp->esz == 4) PROF_KERNEL("convert", prof_cost_convert((double)n, 4, 4), memcpy(dst, src, n * 4));
    else PROF_KERNEL("convert", prof_cost_convert((double)n, 2, 4), decode_par(dst, src, n, lp->fmt));
}

/* Rounds x in place to the storage format (a low-precision op's output that is not stored); the weights' cast
 * calls it untimed, inside its own kernel. */
static void round_in_place_untimed(model_lowp *lp, float *x, size_t n) {
    if (lp->esz == 4) return;
    enum { BLOCK = 4096 };
    long blocks = (long)((n + BLOCK - 1) / BLOCK);
#pragma omp parallel for schedule(static) if (blocks > 8)
    for (long k = 0; k < blocks; k++) {
        uint16_t tmp[BLOCK];
        size_t i = (size_t)k * BLOCK, len = n - i < BLOCK ? n - i : BLOCK;
        lowp_encode(tmp, x + i, len, lp->fmt);
        lowp_decode(x + i, tmp, len, lp->fmt);
    }
}

static void round_in_place(model_lowp *lp, float *x, size_t n) {
    if (lp->esz == 4) return;
    PROF_KERNEL("convert", prof_cost_convert((double)n, 4, 4), round_in_place_untimed(lp, x, n));
}

static void *stored_at(const model_lowp *lp, const void *base, size_t index) {
    return (char *)base + index * lp->esz;
}

/* ------------------------------------------------------------------ fp8 */

static amp_fp8_meta *fp8_meta(model_lowp *lp, int site, int which) {
    return &lp->fp8[site * FP8_PER_SITE + which];
}

/* dst = dequantize(quantize(src)) with the meta's current scale: the values an fp8 matmul multiplies,
 * in fp32 (a product of two fp8 values is exact in fp32, and the scales are powers of two, so an fp32
 * product of these values is the fp8 tensor-core product). record: also record src's amax into the
 * history (once per tensor per step; backward re-reads forward's input without recording it again). */
static void fake_quant(model_lowp *lp, amp_fp8_meta *meta, const float *src, float *dst, size_t n, bool record) {
    MP_ASSERT(n <= lp->q8_bytes, "fp8 scratch too small: %zu > %zu", n, lp->q8_bytes);
    bool e4m3 = meta->format == &FP_E4M3;
    if (lp->prec.fp8_mx) { /* every row length is a multiple of 32 (model_set_precision), so flat blocks are row blocks */
        const mx_format *f = mx_format_by_name(e4m3 ? "mxfp8-e4m3" : "mxfp8-e5m2");
        long chunks = (long)((n + CONVERT_BLOCK - 1) / CONVERT_BLOCK);
#pragma omp parallel for schedule(static) if (chunks > 1)
        for (long k = 0; k < chunks; k++) {
            size_t i = (size_t)k * CONVERT_BLOCK, len = n - i < CONVERT_BLOCK ? n - i : CONVERT_BLOCK;
            mx_round_trip(f, src + i, dst + i, len, 0);
        }
        return;
    }
    if (record) {
        amp_fp8_quantize(meta, src, lp->q8, n);
    } else {
        for (size_t i = 0; i < n; i++) dst[i] = src[i] * meta->scale;
        if (e4m3) fp_f32_to_e4m3(lp->q8, dst, n, 1);
        else fp_f32_to_e5m2(lp->q8, dst, n, 1);
    }
    amp_fp8_dequantize(meta->format, lp->q8, dst, n, meta->scale_inv);
}

/* ------------------------------------------------------------------ matmuls */

static int site_of(int layer, int k) { return layer * SITES_PER_LAYER + k; }

/* A site's products as the profiler names them: the same names as the fp32 path's (model.c), so that the two
 * tables compare row by row. */
static const char *site_kernel(const model_lowp *lp, int site, bool forward) {
    static const char *const fwd[SITES_PER_LAYER] = {"matmul_fwd:qkv", "matmul_fwd:attproj", "matmul_fwd:fc",
                                                     "matmul_fwd:fcproj"};
    static const char *const bwd[SITES_PER_LAYER] = {"matmul_bwd:qkv", "matmul_bwd:attproj", "matmul_bwd:fc",
                                                     "matmul_bwd:fcproj"};
    if (site == lp->nsites - 1) return forward ? "matmul_fwd:head" : "matmul_bwd:head";
    return (forward ? fwd : bwd)[site % SITES_PER_LAYER];
}

static size_t offset_of(const model *m, const float *param) { return (size_t)(param - m->params); }

/* Two ways to run a low-precision matmul (chosen once, in model_set_precision):
 *   kernel  bf16 operands in 16 bits straight into the bf16 kernel (ops/matmul_lowp.h), when the CPU
 *           has one: the weights are cast to 16 bits (w16) and backward rounds dout to 16 bits;
 *   wide    the operands' rounded values held in fp32 and multiplied by the fp32 sgemm: exactly the
 *           same products (a product of two 16-bit or fp8 values is exact in fp32), no 16-bit kernel
 *           needed. tf32 and fp8 always take this way, bf16 without the instructions and fp16 too. */

/* out (N,OC) = x (N,C) @ W^T + bias in the mode's precision. x is the fp32 working copy (already rounded
 * to what was stored), xs the stored copy, woff the weight's offset in the parameter buffer. */
static void mm_forward(model *m, int site, float *out, const float *x, const void *xs, size_t woff, const float *bias,
                       int N, int C, int OC) {
    model_lowp *lp = m->lowp;
    const char *name = site_kernel(lp, site, true);
    if (lp->kernel) {
        PROF_KERNEL(name, prof_cost_matmul_forward_narrow(N, C, OC, 2),
                    matmul_lowp_forward(out, xs, lp->w16 + woff, bias, N, C, OC, lp->fmt));
        return;
    }
    if (lp->prec.compute == MODEL_COMPUTE_FP8) { /* a recompute must not record the amax a second time */
        PROF_KERNEL("convert", prof_cost_convert((double)N * C, 4, 4),
                    fake_quant(lp, fp8_meta(lp, site, FP8_X), x, lp->fq_in, (size_t)N * C, !lp->recomputing));
        x = lp->fq_in;
    }
    PROF_KERNEL(name, prof_cost_matmul_forward(N, C, OC), matmul_forward(out, x, lp->w32 + woff, bias, N, C, OC));
}

/* dout rounded to the format the matmul's gradient operand has, into lp->fq_grad (wide) or lp->grad16. */
static void round_grad(model_lowp *lp, int site, int layer, const float *dout, size_t n) {
    model_round_count *c = lp->counting ? &lp->rounding[layer + 1].grads : NULL;
    switch (lp->prec.compute) {
    case MODEL_COMPUTE_TF32: tf32_round_array(lp->fq_grad, dout, n); break;
    case MODEL_COMPUTE_FP8: {
        amp_fp8_meta *g = fp8_meta(lp, site, FP8_G);
        fake_quant(lp, g, dout, lp->fq_grad, n, true);
        if (c) {
            c->nonzero += count_nonzero(dout, n);
            c->values += n;
            c->flushed += g->underflowed;
            c->saturated += g->saturated;
        }
        break;
    }
    default:
        encode_par(lp->grad16, dout, n, lp->fmt);
        if (c) count_rounding(c, dout, lp->grad16, n, lp->fmt);
        if (!lp->kernel) decode_par(lp->fq_grad, lp->grad16, n, lp->fmt);
    }
}

/* Whether this backward's weight-gradient products write their matrices instead of adding to them: always under
 * a strategy that commits the spans afresh (model_set_matrix_grads_written), and in the first backward after
 * model_zero_grad, which left the matrices to it. */
static bool writes_matrix_grads(const model *m) { return m->matrix_grads_written || m->matrix_grads_stale; }

/* dinp (N,C) = dout @ W (overwritten, then rounded to the storage format), dW and dbias += in fp32.
 * dout (N,OC) fp32 is rounded to the matmul's gradient format first: the underflow point of fp16. */
static void mm_backward(model *m, int site, int layer, float *dinp, size_t woff, float *dbias, const float *dout,
                        const void *xs, int N, int C, int OC) {
    model_lowp *lp = m->lowp;
    float *dweight = m->grads + woff;
    const char *name = site_kernel(lp, site, false);
    PROF_KERNEL("convert", prof_cost_convert((double)N * OC, 4, lp->kernel ? 2 : 4),
                round_grad(lp, site, layer, dout, (size_t)N * OC));
    if (lp->kernel) {
        PROF_KERNEL(name, prof_cost_matmul_backward_narrow(N, C, OC, 2, writes_matrix_grads(m)),
                    (writes_matrix_grads(m) ? matmul_lowp_backward_writing_dweight : matmul_lowp_backward)(
                        dinp, dweight, dbias, lp->grad16, xs, lp->w16 + woff, N, C, OC, lp->fmt));
    } else {
        const float *x = xs;
        if (lp->esz == 2) { /* the stored input, widened (fp8: and fake-quantised again with forward's scale) */
            load(lp, lp->fq_in, xs, (size_t)N * C);
            if (lp->prec.compute == MODEL_COMPUTE_FP8)
                PROF_KERNEL("convert", prof_cost_convert((double)N * C, 4, 4),
                            fake_quant(lp, fp8_meta(lp, site, FP8_X), lp->fq_in, lp->fq_in, (size_t)N * C, false));
            x = lp->fq_in;
        }
        memset(dinp, 0, (size_t)N * C * sizeof(float));
        PROF_KERNEL(name, prof_cost_matmul_backward(N, C, OC),
                    matmul_backward(dinp, dweight, dbias, lp->fq_grad, x, lp->w32 + woff, N, C, OC));
    }
    round_in_place(lp, dinp, (size_t)N * C);
}

/* The 16-bit (or rounded fp32) copy of params[offset, offset + n) for the bf16, fp16 and tf32 matmuls. */
static void cast_range_untimed(model_lowp *lp, const float *params, size_t offset, size_t n) {
    switch (lp->prec.compute) {
    case MODEL_COMPUTE_BF16:
    case MODEL_COMPUTE_FP16:
        if (lp->kernel) {
            encode_par(lp->w16 + offset, params + offset, n, lp->fmt);
        } else {
            if (lp->w32 != params) memcpy(lp->w32 + offset, params + offset, n * sizeof(float));
            round_in_place_untimed(lp, lp->w32 + offset, n);
        }
        break;
    case MODEL_COMPUTE_TF32: tf32_round_array(lp->w32 + offset, params + offset, n); break;
    default: MP_ASSERT(false, "cast_range in compute mode %d", (int)lp->prec.compute);
    }
}

static void cast_range(model_lowp *lp, const float *params, size_t offset, size_t n) {
    PROF_KERNEL("cast_weights", prof_cost_convert((double)n, 4, lp->kernel ? 2 : 4),
                cast_range_untimed(lp, params, offset, n));
}

void model_lowp_cast_range(model *m, size_t offset, size_t n) {
    model_lowp *lp = m->lowp;
    if (lp->in_place) { /* only the matmul weights (2-D tensors of the blocks and the head) are rounded */
        for (int i = 0; i < m->ntensors; i++) {
            const model_tensor *t = &m->tensors[i];
            if (t->ndim != 2 || t->layer < 0 || t->offset < offset || t->offset + t->size > offset + n) continue;
            cast_range(lp, m->params, t->offset, t->size);
        }
        return;
    }
    /* cast_range writes every element of the range */
    if (lp->w16) mem_commit_to_overwrite(lp->w16, offset * 2, n * 2);
    else mem_commit_to_overwrite(lp->w32, offset * 4, n * 4);
    cast_range(lp, m->params, offset, n);
}

void model_lowp_drop_range(model *m, size_t offset, size_t n) {
    model_lowp *lp = m->lowp;
    if (lp->in_place) return; /* the gathered copy itself goes */
    if (lp->w16) mem_decommit(lp->w16, offset * 2, n * 2);
    else mem_decommit(lp->w32, offset * 4, n * 4);
}

void model_set_matrix_grads_written(model *m, bool on) { m->matrix_grads_written = on; }

bool model_lowp_can_write_matrix_grads(const model *m) { return m->lowp && m->lowp->kernel; }

uint16_t *model_weights16(model *m) { return m->reserved && m->lowp && m->lowp->kernel ? m->lowp->w16 : NULL; }
bool model_weights16_are_bf16(const model *m) { return m->lowp && m->lowp->fmt == LOWP_BF16; }

void model_weights16_encode(const model *m, uint16_t *dst, const float *src, size_t n) {
    MP_ASSERT(m->lowp && m->lowp->kernel, "model_weights16_encode without a 16-bit weight cache");
    PROF_KERNEL("cast_weights", prof_cost_convert((double)n, 4, 2), encode_par(dst, src, n, m->lowp->fmt));
}

void model_weights16_commit(model *m, size_t offset, size_t n) {
    MP_ASSERT(model_weights16(m), "model_weights16_commit without a reserved 16-bit weight cache");
    mem_commit_to_overwrite(m->lowp->w16, offset * 2, n * 2);
}

void model_hold_weights(model *m, bool held) {
    if (!m->lowp) return;
    m->lowp->weights_held = held;
    m->lowp->cast_is_current = false;
}

/* The weights as this forward's matmuls read them (a reserved model casts each range as it is gathered). Held
 * weights (model_hold_weights) are cast by the first forward only; fp8's cast also moves with its scales. */
static void cast_weights(model *m) {
    model_lowp *lp = m->lowp;
    if (m->reserved) return;
    const bool reusable = lp->prec.compute != MODEL_COMPUTE_FP8;
    if (lp->weights_held && lp->cast_is_current && reusable) return;
    lp->cast_is_current = lp->weights_held;
    switch (lp->prec.compute) {
    case MODEL_COMPUTE_BF16:
    case MODEL_COMPUTE_FP16:
    case MODEL_COMPUTE_TF32: cast_range(lp, m->params, 0, m->nparams); break;
    case MODEL_COMPUTE_FP8:
        for (int l = 0; l < m->cfg.L; l++) {
            const layer_params *w = &m->layer_w[l];
            const float *mats[SITES_PER_LAYER] = {w->qkvw, w->attprojw, w->fcw, w->fcprojw};
            for (int k = 0; k < SITES_PER_LAYER; k++) {
                const model_tensor *t = NULL;
                size_t off = offset_of(m, mats[k]);
                for (int i = 0; i < m->ntensors && !t; i++)
                    if (m->tensors[i].offset == off) t = &m->tensors[i];
                PROF_KERNEL("cast_weights", prof_cost_convert((double)t->size, 4, 4),
                            fake_quant(lp, fp8_meta(lp, site_of(l, k), FP8_W), mats[k], lp->w32 + off, t->size, true));
            }
        }
        PROF_KERNEL("cast_weights", prof_cost_convert((double)m->cfg.Vp * m->cfg.C, 4, 4),
                    fake_quant(lp, fp8_meta(lp, lp->nsites - 1, FP8_W), m->w.head, lp->w32 + offset_of(m, m->w.head),
                               (size_t)m->cfg.Vp * m->cfg.C, true));
        break;
    default: break;
    }
}

/* ------------------------------------------------------------------ memory */

typedef struct {
    char *base;   /* NULL while counting */
    size_t used;  /* bytes */
} arena;

static void *arena_take(arena *a, size_t bytes) {
    void *p = a->base && bytes ? a->base + a->used : NULL;
    a->used += (bytes + 63) / 64 * 64;
    return p;
}

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

/* A block's tensors in the storage arena (a is written only when the arena is real). */
static void take_block(arena *st, lowp_layer *a, size_t N, size_t C, size_t QKV, size_t FC, size_t F, size_t att,
                       size_t stats, size_t e) {
    a->ln1 = arena_take(st, N * C * e);
    a->ln1_mean = arena_take(st, stats * 4);
    a->ln1_rstd = arena_take(st, N * 4);
    a->qkv = arena_take(st, N * QKV * e);
    a->atty = arena_take(st, N * C * e);
    a->att = arena_take(st, att * e);
    a->res2 = arena_take(st, N * C * e);
    a->ln2 = arena_take(st, N * C * e);
    a->ln2_mean = arena_take(st, stats * 4);
    a->ln2_rstd = arena_take(st, N * 4);
    a->fch = arena_take(st, N * FC * e);
    a->fch_act = arena_take(st, N * F * e);
}

/* Block l's input is kept in fp32 (in32) when the block is checkpointed; l = L is the final norm. */
static bool input_in_fp32(const model *m, int l) {
    return l < m->cfg.L && model_keep_of(m, l) == MODEL_KEEP_INPUT;
}

/* Lays out storage and scratch for a (B,T) batch in two arenas (or only counts them), under the model's
 * recompute policy: blocks that keep everything as before; selective without att; checkpointed blocks
 * only their fp32 input, with one shared block of storage for their forward and recompute. */
static void layout(model *m, int B, int T, arena *st, arena *sc, arena *op) {
    model_lowp *lp = m->lowp;
    const model_config *c = &m->cfg;
    size_t N = (size_t)B * T, C = c->C, QKV = model_dim_size(c, DIM_QKV), FC = model_dim_size(c, DIM_FC_IN),
           F = c->F, att = (size_t)B * c->NH * T * T, stats = c->arch == MODEL_GPT2 ? N : 0, e = lp->esz;
    lowp_layer shared = {0};
    bool have_shared = false, any_checkpointed = false;
    for (int l = 0; l < c->L; l++) {
        lowp_layer dummy, *a = st->base ? &lp->layers[l] : &dummy;
        model_keep keep = model_keep_of(m, l);
        if (keep == MODEL_KEEP_INPUT) {
            if (!have_shared) take_block(st, &shared, N, C, QKV, FC, F, att, stats, e);
            have_shared = any_checkpointed = true;
            *a = shared;
            a->in32 = arena_take(st, N * C * 4);
        } else {
            take_block(st, a, N, C, QKV, FC, F, keep == MODEL_KEEP_ALL ? att : 0, stats, e);
            a->in32 = NULL;
        }
        a->res3 = input_in_fp32(m, l + 1) ? NULL : arena_take(st, N * C * e);
    }
    model_lowp tmp, *g = st->base ? lp : &tmp;
    g->encoded = input_in_fp32(m, 0) ? NULL : arena_take(st, N * C * e);
    g->lnf = arena_take(st, N * C * e);
    g->lnf_mean = arena_take(st, stats * 4);
    g->lnf_rstd = arena_take(st, N * 4);
    g->logits = arena_take(st, N * c->Vp * e);
    g->losses = arena_take(st, N * 4);
    g->lse = arena_take(st, N * 4);
    g->dloss = arena_take(st, N * 4);

    model_lowp *s = sc->base ? lp : &tmp;
    size_t widest = zmax(zmax(QKV, FC), C), head = (size_t)HEAD_ROWS * c->Vp, NHT = (size_t)c->NH * T;
    size_t head_cols = (size_t)(1 << 19) / N / 64 * 64; /* head_block_cols */
    head_cols = head_cols < 64 ? 64 : head_cols > (size_t)c->Vp ? (size_t)c->Vp : head_cols;
    size_t pool = zmax(zmax(3 * C + QKV + NHT + C, 3 * C + FC + F), 4 * C + 2 * QKV + NHT);
    if (any_checkpointed) pool = zmax(pool, zmax(4 * C + QKV + NHT + C, 4 * C + FC + F)); /* recompute_view */
    s->pool = arena_take(sc, N * pool * 4);
    s->rowtmp = arena_take(sc, (size_t)ACT_ROWS * FC * 4);
    s->head_rows = arena_take(sc, zmax(head, N * head_cols) * 4);
    s->grad16 = arena_take(sc, N * widest * 2);
    /* The wide matmuls' operands (rounded copies in fp32): what a 16-bit kernel would read in place, so
     * they are counted as matmul staging (MEM_OTHER), like the kernel path's packing buffers. */
    bool fq = !lp->kernel;
    model_lowp *o = op->base ? lp : &tmp;
    o->fq_in = arena_take(op, fq ? N * zmax(C, F) * 4 : 0);
    o->fq_grad = arena_take(op, fq ? N * widest * 4 : 0);
}

/* The pool. Only one layer's fp32 tensors are alive at a time, and forward's attention tensors are dead
 * once its MLP starts (and the other way round in backward), so each phase lays its tensors over the
 * same floats. Offsets in floats per position (multiply by N); QKV, FC, F and NH*T as in the layout.
 *
 *   forward    [0,C) residual in | [C,2C) branch output, then residual after attention | [2C,3C) norm out
 *              attention: [3C..) qkv, att (NH*T), attention out     MLP: [3C..) fc out, activation
 *              the MLP's projection lands in [0,C) (the residual in is dead by then) and the residual
 *              after the block is summed there too: it is the next layer's residual in.
 *   backward   [0,C) gradient of the residual | [C,2C) a decoded norm input | [2C,3C) gradient of a norm out
 *              MLP: [3C..) d activation, d fc out       attention: [3C..) d attention out, dqkv, qkv, att
 *   recompute  a checkpointed block's forward at the start of its backward, shifted up by C so that the
 *              gradient of the residual in [0,C) survives: [C,2C) residual in | [2C,3C) branch output |
 *              [3C,4C) norm out | [4C..) qkv, att, attention out, or fc out, activation (recompute_view) */
typedef struct {
    float *res, *branch, *ln, *qkv, *att, *atty, *fch, *fch_act;                         /* forward */
    float *dres, *dec, *dln, *dfch_act, *dfch, *datty, *dqkv, *dec_qkv, *dec_att;      /* backward */
} pool_view;

static pool_view pool_of(const model *m) {
    const model_lowp *lp = m->lowp;
    const model_config *c = &m->cfg;
    size_t N = (size_t)lp->B * lp->T, C = c->C, QKV = model_dim_size(c, DIM_QKV), FC = model_dim_size(c, DIM_FC_IN),
           F = c->F, NHT = (size_t)c->NH * lp->T;
    float *p = lp->pool;
    pool_view v;
    v.res = v.dres = p;
    v.branch = v.dec = p + N * C;
    v.ln = v.dln = p + 2 * N * C;
    v.qkv = p + 3 * N * C;
    v.att = v.qkv + N * QKV;
    v.atty = v.att + N * NHT;
    v.fch = p + 3 * N * C;
    v.fch_act = v.fch + N * FC;
    v.dfch_act = p + 3 * N * C;
    v.dfch = v.dfch_act + N * F;
    v.datty = p + 3 * N * C;
    v.dqkv = v.datty + N * C;
    v.dec_qkv = v.dqkv + N * QKV;
    v.dec_att = v.dec_qkv + N * QKV;
    return v;
}

/* The forward's views of the pool for a recompute, C floats per position up (see "the pool"). */
static pool_view recompute_view(const model *m) {
    const model_lowp *lp = m->lowp;
    const model_config *c = &m->cfg;
    size_t N = (size_t)lp->B * lp->T, C = c->C, QKV = model_dim_size(c, DIM_QKV), FC = model_dim_size(c, DIM_FC_IN),
           NHT = (size_t)c->NH * lp->T;
    float *p = lp->pool;
    pool_view v = {0};
    v.res = p + N * C;
    v.branch = p + 2 * N * C;
    v.ln = p + 3 * N * C;
    v.qkv = p + 4 * N * C;
    v.att = v.qkv + N * QKV;
    v.atty = v.att + N * NHT;
    v.fch = p + 4 * N * C;
    v.fch_act = v.fch + N * FC;
    return v;
}

static void ensure_store(model *m, int B, int T) {
    model_lowp *lp = m->lowp;
    if (lp->store && lp->B == B && lp->T == T) return;
    arena st = {0}, sc = {0}, op = {0};
    layout(m, B, T, &st, &sc, &op);
    if (st.used > lp->store_bytes) {
        mem_free(lp->store);
        lp->store = mem_alloc(st.used, MEM_ACT, "activations (low precision)");
        lp->store_bytes = st.used;
    }
    if (sc.used > lp->scratch_bytes) {
        mem_free(lp->scratch);
        lp->scratch = mem_alloc(sc.used, MEM_ACT, "activation scratch: one layer in fp32");
        lp->scratch_bytes = sc.used;
    }
    if (op.used > lp->operand_bytes) {
        mem_free(lp->operands);
        lp->operands = mem_alloc(op.used, MEM_OTHER, "wide matmul operands (rounded, in fp32)");
        lp->operand_bytes = op.used;
    }
    op.base = lp->operands;
    op.used = 0;
    st.base = lp->store;
    st.used = 0;
    sc.base = (char *)lp->scratch;
    sc.used = 0;
    layout(m, B, T, &st, &sc, &op);
    lp->B = B;
    lp->T = T;
}

void model_lowp_drop_activations(model *m) {
    model_lowp *lp = m->lowp;
    mem_free(lp->store);
    mem_free(lp->scratch);
    mem_free(lp->operands);
    lp->store = lp->operands = NULL;
    lp->scratch = NULL;
    lp->store_bytes = lp->scratch_bytes = lp->operand_bytes = 0;
    lp->B = lp->T = 0;
}

void model_lowp_free(model_lowp *lp) {
    if (!lp) return;
    mem_free(lp->store);
    mem_free(lp->scratch);
    mem_free(lp->operands);
    mem_free(lp->w16);
    if (!lp->in_place) mem_free(lp->w32);
    mem_free(lp->q8);
    for (int i = 0; lp->fp8 && i < lp->nsites * FP8_PER_SITE; i++) amp_fp8_free(&lp->fp8[i]);
    free(lp->fp8);
    free(lp->layers);
    free(lp->rounding);
    free(lp->logit_row);
    free(lp);
}

/* ------------------------------------------------------------------ autocast on a shard
 * A tensor- or pipeline-parallel shard (model_is_shard) runs model.c's fp32 path, which knows the shard's
 * sizes, its tp reductions, its stage's hand-offs and its activation slots, with autocast's roundings at
 * the same places as this file's path: the matmuls read weights rounded into a cast cache at each forward
 * and inputs rounded to the format, their outputs are rounded, norms, softmax statistics and the loss
 * compute in fp32 on rounded inputs, the residual stream is carried in fp32; in backward the gradient
 * entering each matmul is rounded first (where fp16 overflows or underflows) and the input gradients it
 * makes are rounded too. Weight gradients accumulate in fp32. What differs from the path above: the
 * activations are kept in fp32 buffers holding the rounded values (the same numbers, 4 bytes each, so
 * MEM_ACT does not halve), and a row-parallel output is summed over tp in fp32 before it is rounded. */
static void set_shard_autocast(model *m, const model_precision *p) {
    if (p->compute != MODEL_COMPUTE_BF16 && p->compute != MODEL_COMPUTE_FP16)
        MP_FAIL_HINT("compute fp32, bf16 or fp16 on a tensor- or pipeline-parallel shard",
                     "tf32 and fp8 run on the whole model only (tensor_model_parallel_size = "
                     "pipeline_model_parallel_size = 1); use recipe bf16 or fp16", "compute %s on a shard",
                     model_compute_name(p->compute));
    model_lowp *lp = calloc(1, sizeof *lp);
    MP_ASSERT(lp, "out of memory");
    lp->prec = *p;
    lp->owner = m;
    lp->esz = 2;
    lp->fmt = p->compute == MODEL_COMPUTE_FP16 ? LOWP_FP16 : LOWP_BF16;
    lp->rounding = calloc((size_t)m->cfg.L + 2, sizeof *lp->rounding);
    MP_ASSERT(lp->rounding, "out of memory");
    lp->w32 = mem_alloc(m->nparams * sizeof(float), MEM_OTHER, "autocast weight cache of a shard (rounded, in fp32)");
    m->lowp = lp;
}

void model_lowp_shard_cast(model *m) {
    model_lowp *lp = m->lowp;
    if (lp->weights_held && lp->cast_is_current) return; /* held weights: the first forward's cast still holds */
    lp->cast_is_current = lp->weights_held;
    memcpy(lp->w32, m->params, m->nparams * sizeof(float));
    round_in_place(lp, lp->w32, m->nparams);
}

const float *model_lowp_shard_weight(const model *m, const float *param) {
    return param ? m->lowp->w32 + (param - m->params) : NULL;
}

void model_lowp_round(const model *m, float *x, size_t n) {
    if (m->lowp) round_in_place(m->lowp, x, n);
}

/* bf16 matmuls on a kernel that reads 16-bit operands (not decoded into fp32 for sgemm). */
static bool bf16_kernel_path(model_compute c) {
    return c == MODEL_COMPUTE_BF16 && strcmp(matmul_lowp_path(LOWP_BF16), "decode+sgemm") != 0;
}

unsigned model_cast_cache_bytes(model_compute c, bool reserved, bool tied) {
    if (c == MODEL_COMPUTE_FP32) return 0;
    if (bf16_kernel_path(c)) return 2;
    return reserved && !tied ? 0 : 4;
}

void model_set_precision(model *m, const model_precision *p) {
    if (p->compute < 0 || p->compute >= MODEL_NCOMPUTE) MP_FAIL("a compute mode", "mode %d", (int)p->compute);
    if (m->matrix_grads_stale) { /* no backward since model_zero_grad: the new mode's may add to the matrices */
        memset(m->grads, 0, m->nparams * sizeof(float));
        m->matrix_grads_stale = false;
    }
    model_lowp_free(m->lowp);
    m->lowp = NULL;
    m->have_targets = false;
    if (p->compute == MODEL_COMPUTE_FP32) return;
    if (m->is_shard) {
        set_shard_autocast(m, p);
        return;
    }
    /* The fp32 activations are not used in a low-precision mode: give their memory back. */
    mem_free(m->act_memory);
    m->act_memory = NULL;
    m->act_floats = 0;
    model_lowp *lp = calloc(1, sizeof *lp);
    MP_ASSERT(lp, "out of memory");
    lp->prec = *p;
    lp->owner = m;
    lp->esz = p->compute == MODEL_COMPUTE_TF32 ? 4 : 2;
    lp->fmt = p->compute == MODEL_COMPUTE_FP16 ? LOWP_FP16 : LOWP_BF16;
    lp->layers = calloc((size_t)m->cfg.L, sizeof *lp->layers);
    lp->rounding = calloc((size_t)m->cfg.L + 2, sizeof *lp->rounding);
    lp->logit_row = malloc((size_t)m->cfg.Vp * sizeof(float));
    MP_ASSERT(lp->layers && lp->rounding && lp->logit_row, "out of memory");
    lp->nsites = m->cfg.L * SITES_PER_LAYER + 1;
    lp->kernel = bf16_kernel_path(p->compute);
    if (m->reserved && p->compute == MODEL_COMPUTE_FP8)
        MP_FAIL_HINT("a compute mode of bf16, fp16 or tf32 with sharded parameters (ZeRO-3, FSDP)",
                     "fp8's delayed scaling takes every weight's amax at each forward; with sharded weights use bf16",
                     "compute fp8 on a reserved model");
    /* A reserved model (sharded weights) caches only the ranges that are gathered: model_lowp_cast_range. Its
     * gathered weights are a copy (the fp32 master is the shard), so in the wide path with an untied head the
     * matmul weights are rounded where they are, and no cache is needed: only matmuls read them. A tied
     * head is also the embedding table, which the lookup reads unrounded: it keeps a cache. */
    unsigned cache_bytes = model_cast_cache_bytes(p->compute, m->reserved, m->cfg.tied);
    lp->in_place = cache_bytes == 0;
    void *(*get)(size_t, mem_tag, const char *) = m->reserved ? mem_reserve : mem_alloc;
    if (cache_bytes == 2)
        lp->w16 = get(m->nparams * 2, MEM_OTHER, "autocast weight cache (16-bit)");
    else if (lp->in_place)
        lp->w32 = m->params;
    else
        lp->w32 = get(m->nparams * 4, MEM_OTHER, "autocast weight cache (rounded values in fp32)");
    if (p->fp8_mx) {
        const model_config *c = &m->cfg;
        if (p->compute != MODEL_COMPUTE_FP8 || c->C % 32 || model_dim_size(c, DIM_QKV) % 32 ||
            model_dim_size(c, DIM_FC_IN) % 32 || c->F % 32 || c->Vp % 32)
            MP_FAIL_HINT("compute fp8 and channels, heads' width, MLP width and padded vocabulary all multiples of 32",
                         "MXFP8 blocks of 32 run along each matmul operand's rows", "fp8_mx with compute %s, C %d, "
                         "F %d, Vp %d", model_compute_name(p->compute), c->C, c->F, c->Vp);
    }
    if (p->compute == MODEL_COMPUTE_FP8) {
        lp->fp8 = calloc((size_t)lp->nsites * FP8_PER_SITE, sizeof *lp->fp8);
        MP_ASSERT(lp->fp8, "out of memory");
        for (int s = 0; s < lp->nsites; s++) {
            amp_fp8_init(fp8_meta(lp, s, FP8_X), &FP_E4M3, p->fp8_history, p->fp8_margin, AMP_AMAX_MAX);
            amp_fp8_init(fp8_meta(lp, s, FP8_W), &FP_E4M3, p->fp8_history, p->fp8_margin, AMP_AMAX_MAX);
            amp_fp8_init(fp8_meta(lp, s, FP8_G), &FP_E5M2, p->fp8_history, p->fp8_margin, AMP_AMAX_MAX);
        }
    }
    m->lowp = lp;
}

static void ensure_q8(model *m, size_t bytes) {
    model_lowp *lp = m->lowp;
    if (lp->q8_bytes >= bytes) return;
    mem_free(lp->q8);
    lp->q8 = mem_alloc(bytes, MEM_OTHER, "fp8 codes");
    lp->q8_bytes = bytes;
}

/* ------------------------------------------------------------------ the LM head
 * At GPT-2's vocabulary the logits (N, Vp) are the largest activation of all, so no fp32 copy of them is
 * kept: the product runs over blocks of vocabulary columns (each block a full-height product that reads
 * its slice of the weight once), each block rounded into the stored logits; the loss then reads the
 * stored logits HEAD_ROWS rows at a time. Backward writes the gradient of the logits over the stored
 * logits (same shape, same format: they are not needed again) and multiplies by blocks again. */

static int head_block_cols(const model *m) {
    int N = m->lowp->B * m->lowp->T, vb = (1 << 19) / N / 64 * 64;
    if (vb < 64) vb = 64;
    return vb < m->cfg.Vp ? vb : m->cfg.Vp;
}

/* Block [v0, v0+vb) of the stored (N, Vp) logits <-> a contiguous (N, vb) fp32 block. A row of a block (2048
 * values for GPT-2's N = 256) is far shorter than one conversion block, so the threads split the rows: converted
 * one row at a time, the whole block ran on one thread while the others waited. */
static void head_block_load(model_lowp *lp, float *blk, int N, int Vp, int v0, int vb) {
#pragma omp parallel for schedule(static) if ((size_t)N * vb >= CONVERT_BLOCK)
    for (int n = 0; n < N; n++) {
        const void *row = stored_at(lp, lp->logits, (size_t)n * Vp + v0);
        if (lp->esz == 4) memcpy(blk + (size_t)n * vb, row, (size_t)vb * 4);
        else lowp_decode(blk + (size_t)n * vb, row, (size_t)vb, lp->fmt);
    }
}

/* store() of each row of the block, as `head_block_load` reads it back, except that the fp32 block is not rounded
 * in place: nothing reads it again (the loss and backward read the stored logits). When the rounding is counted
 * (or nothing is rounded) each row goes through store() itself. */
static void head_block_store(model_lowp *lp, float *blk, int N, int Vp, int v0, int vb) {
    const int layer = lp->owner->cfg.L;
    if (lp->esz == 4 || act_counter(lp, layer)) {
        for (int n = 0; n < N; n++)
            store_values(lp, layer, "logits", stored_at(lp, lp->logits, (size_t)n * Vp + v0), blk + (size_t)n * vb, vb,
                         false);
        return;
    }
    if (!lp->recomputing) /* what formats make of each row, before it is rounded, as store() reports it */
        for (int n = 0; n < N; n++) model_act_computed(lp->owner, layer, "logits", blk + (size_t)n * vb, vb);
#pragma omp parallel for schedule(static) if ((size_t)N * vb >= CONVERT_BLOCK)
    for (int n = 0; n < N; n++)
        lowp_encode(stored_at(lp, lp->logits, (size_t)n * Vp + v0), blk + (size_t)n * vb, (size_t)vb, lp->fmt);
}

static void head_forward(model *m, float *x, const int *targets) {
    model_lowp *lp = m->lowp;
    const model_config *c = &m->cfg;
    int N = lp->B * lp->T, C = c->C, Vp = c->Vp, vb = head_block_cols(m), site = lp->nsites - 1;
    size_t head_off = offset_of(m, m->w.head);
    const float *xq = x;
    if (!lp->kernel && lp->prec.compute == MODEL_COMPUTE_FP8) {
        PROF_KERNEL("convert", prof_cost_convert((double)N * C, 4, 4),
                    fake_quant(lp, fp8_meta(lp, site, FP8_X), x, lp->fq_in, (size_t)N * C, true));
        xq = lp->fq_in;
    }
    for (int v0 = 0; v0 < Vp; v0 += vb) {
        int w = Vp - v0 < vb ? Vp - v0 : vb;
        size_t woff = head_off + (size_t)v0 * C;
        if (lp->kernel)
            PROF_KERNEL("matmul_fwd:head", prof_cost_matmul_forward_narrow(N, C, w, 2),
                        matmul_lowp_forward(lp->head_rows, lp->lnf, lp->w16 + woff, NULL, N, C, w, lp->fmt));
        else
            PROF_KERNEL("matmul_fwd:head", prof_cost_matmul_forward(N, C, w),
                        matmul_forward(lp->head_rows, xq, lp->w32 + woff, NULL, N, C, w));
        PROF_KERNEL("convert", prof_cost_convert((double)N * w, 4, lp->esz),
                    head_block_store(lp, lp->head_rows, N, Vp, v0, w));
    }
    if (!targets) return;
    /* The loss reads the rounded logits and computes in fp32 (cross-entropy is on autocast's fp32 list). */
    for (int r = 0; r < N; r += HEAD_ROWS) {
        int rows = N - r < HEAD_ROWS ? N - r : HEAD_ROWS;
        load(lp, lp->head_rows, stored_at(lp, lp->logits, (size_t)r * Vp), (size_t)rows * Vp);
        PROF_KERNEL("crossentropy_fwd", prof_cost_crossentropy_forward(rows, c->V, Vp),
                    crossentropy_forward(lp->losses + r, lp->lse + r, lp->head_rows, targets + r, rows, c->V, Vp));
    }
}

static void head_backward(model *m, float *dinp) {
    model_lowp *lp = m->lowp;
    const model_config *c = &m->cfg;
    int N = lp->B * lp->T, C = c->C, Vp = c->Vp, vb = head_block_cols(m), site = lp->nsites - 1;
    size_t head_off = offset_of(m, m->w.head);
    model_round_count *count = lp->counting ? &lp->rounding[c->L + 1].grads : NULL;
    /* 1. dlogits over the stored logits, rounded to the gradient's storage format. */
    float amax = 0.0f;
    for (int r = 0; r < N; r += HEAD_ROWS) {
        int rows = N - r < HEAD_ROWS ? N - r : HEAD_ROWS;
        size_t n = (size_t)rows * Vp;
        void *at = stored_at(lp, lp->logits, (size_t)r * Vp);
        load(lp, lp->head_rows, at, n);
        PROF_KERNEL("crossentropy_bwd", prof_cost_crossentropy_backward(rows, c->V, Vp),
                    crossentropy_backward(lp->head_rows, lp->head_rows, lp->lse + r, m->targets + r, lp->dloss + r,
                                          rows, c->V, Vp));
        if (lp->prec.compute == MODEL_COMPUTE_FP8) {
            float a = amp_fp8_amax(lp->head_rows, n);
            if (!(a <= amax)) amax = a; /* NaN wins */
        }
        if (lp->esz == 4) {
            PROF_KERNEL("convert", prof_cost_convert((double)n, 4, 4), memcpy(at, lp->head_rows, n * 4));
        } else {
            PROF_KERNEL("convert", prof_cost_convert((double)n, 4, 2), encode_par(at, lp->head_rows, n, lp->fmt));
            if (count && lp->prec.compute != MODEL_COMPUTE_FP8) count_rounding(count, lp->head_rows, at, n, lp->fmt);
        }
    }
    /* 2. dinp = dlogits @ W, dW += dlogits^T @ x. */
    if (lp->kernel) {
        PROF_KERNEL("matmul_bwd:head", prof_cost_matmul_backward_narrow(N, C, Vp, 2, writes_matrix_grads(m)),
                    (writes_matrix_grads(m) ? matmul_lowp_backward_writing_dweight : matmul_lowp_backward)(
                        dinp, m->grads + head_off, NULL, lp->logits, lp->lnf, lp->w16 + head_off, N, C, Vp, lp->fmt));
        round_in_place(lp, dinp, (size_t)N * C);
        return;
    }
    const float *x = lp->lnf;
    amp_fp8_meta *g = lp->prec.compute == MODEL_COMPUTE_FP8 ? fp8_meta(lp, site, FP8_G) : NULL;
    if (lp->esz == 2) {
        load(lp, lp->fq_in, lp->lnf, (size_t)N * C);
        if (g)
            PROF_KERNEL("convert", prof_cost_convert((double)N * C, 4, 4),
                        fake_quant(lp, fp8_meta(lp, site, FP8_X), lp->fq_in, lp->fq_in, (size_t)N * C, false));
        x = lp->fq_in;
    }
    if (g && !lp->prec.fp8_mx) { /* MX blocks keep no amax history */
        amp_fp8_record_amax(g, amax);
        g->saturated = g->underflowed = 0;
    }
    memset(dinp, 0, (size_t)N * C * sizeof(float));
    for (int v0 = 0; v0 < Vp; v0 += vb) {
        int w = Vp - v0 < vb ? Vp - v0 : vb;
        size_t woff = head_off + (size_t)v0 * C, n = (size_t)N * w;
        PROF_KERNEL("convert", prof_cost_convert((double)n, lp->esz, 4),
                    head_block_load(lp, lp->head_rows, N, Vp, v0, w));
        if (lp->prec.compute == MODEL_COMPUTE_TF32)
            PROF_KERNEL("convert", prof_cost_convert((double)n, 4, 4),
                        tf32_round_array(lp->head_rows, lp->head_rows, n));
        if (g) {
            uint64_t sat = g->saturated, under = g->underflowed;
            PROF_KERNEL("convert", prof_cost_convert((double)n, 4, 4),
                        fake_quant(lp, g, lp->head_rows, lp->head_rows, n, false));
            if (count) {
                count->nonzero += count_nonzero(lp->head_rows, n);
                count->values += n;
                count->flushed += g->underflowed;
                count->saturated += g->saturated;
            }
            g->saturated = sat;
            g->underflowed = under;
        }
        PROF_KERNEL("matmul_bwd:head", prof_cost_matmul_backward(N, C, w),
                    matmul_backward(dinp, m->grads + woff, NULL, lp->head_rows, x, lp->w32 + woff, N, C, w));
    }
    round_in_place(lp, dinp, (size_t)N * C);
}

/* ------------------------------------------------------------------ forward */

/* Keeps x (B,T,C), the residual stream entering block l (l = L: the final norm), for backward. */
static void keep_input(model *m, int l, float *x) {
    model_lowp *lp = m->lowp;
    size_t NC = (size_t)lp->B * lp->T * m->cfg.C;
    if (input_in_fp32(m, l)) {
        memcpy(lp->layers[l].in32, x, NC * sizeof(float));
        if (!lp->recomputing) model_act_computed(m, l - 1, l ? "res3" : "encoded", x, NC);
    } else {
        store_copy(lp, l - 1, l ? "res3" : "encoded", l ? lp->layers[l - 1].res3 : lp->encoded, x, NC);
    }
}

/* The stored input of block l (l = L: the final norm) as backward reads it, in the storage format's values:
 * from an fp32 copy it is rounded here exactly as store_copy would have rounded it. */
static void load_input(model *m, int l, float *dst) {
    model_lowp *lp = m->lowp;
    size_t NC = (size_t)lp->B * lp->T * m->cfg.C;
    if (input_in_fp32(m, l)) {
        memcpy(dst, lp->layers[l].in32, NC * sizeof(float));
        round_in_place(lp, dst, NC);
    } else {
        load(lp, dst, l ? lp->layers[l - 1].res3 : lp->encoded, NC);
    }
}

/* Block l's forward from v->res (its input, fp32), storing what backward reads in lp->layers[l]. With
 * to_output false (a recompute) it stops after the MLP activation: the projection after it only makes
 * the block's output, which is kept. */
static void block_forward(model *m, int l, const pool_view *v, bool to_output) {
    model_lowp *lp = m->lowp;
    const model_config *c = &m->cfg;
    int B = lp->B, T = lp->T, N = B * T, C = c->C, HS = C / c->NH, QKV = model_dim_size(c, DIM_QKV),
        FC = model_dim_size(c, DIM_FC_IN), F = c->F;
    size_t NC = (size_t)N * C, natt = (size_t)B * c->NH * T * T;
    const layer_params *w = &m->layer_w[l];
    lowp_layer *a = &lp->layers[l];
    /* attention branch: norm (fp32), qkv (low), attention (fp32 softmax on low q, k, v), projection (low) */
    PROF_KERNEL("norm_fwd", prof_cost_norm_forward(N, C),
                model_norm_forward(m, v->ln, a->ln1_mean, a->ln1_rstd, v->res, w->ln1w, w->ln1b, N));
    store(lp, l, "ln1", a->ln1, v->ln, NC, true);
    mm_forward(m, site_of(l, SITE_QKV), v->qkv, v->ln, a->ln1, offset_of(m, w->qkvw), w->qkvb, N, C, QKV);
    if (c->arch == MODEL_LLAMA) rope_forward(v->qkv, B, T, c->NH, c->KVH, HS, c->rope_theta);
    store(lp, l, "qkv", a->qkv, v->qkv, (size_t)N * QKV, false);
    PROF_KERNEL("attention_fwd", prof_cost_attention_forward(B, T, c->NH, HS),
                attention_forward(v->atty, v->att, v->qkv, B, T, c->NH, c->KVH, HS));
    if (a->att) store(lp, l, "att", a->att, v->att, natt, false); /* selective: rebuilt in backward instead */
    store(lp, l, "atty", a->atty, v->atty, NC, true);
    mm_forward(m, site_of(l, SITE_ATTPROJ), v->branch, v->atty, a->atty, offset_of(m, w->attprojw), w->attprojb, N,
               C, C);
    round_in_place(lp, v->branch, NC);
    PROF_KERNEL("residual_fwd", prof_cost_elementwise((double)NC, 1, 2, 1), /* fp32 + low -> fp32: stays fp32 */
                residual_forward(v->branch, v->res, v->branch, (long)NC));
    store_copy(lp, l, "res2", a->res2, v->branch, NC);
    /* MLP branch */
    PROF_KERNEL("norm_fwd", prof_cost_norm_forward(N, C),
                model_norm_forward(m, v->ln, a->ln2_mean, a->ln2_rstd, v->branch, w->ln2w, w->ln2b, N));
    store(lp, l, "ln2", a->ln2, v->ln, NC, true);
    mm_forward(m, site_of(l, SITE_FC), v->fch, v->ln, a->ln2, offset_of(m, w->fcw), w->fcb, N, C, FC);
    store(lp, l, "fch", a->fch, v->fch, (size_t)N * FC, false);
    if (c->arch == MODEL_GPT2)
        PROF_KERNEL("gelu_fwd", prof_cost_elementwise((double)N * F, 9, 1, 1),
                    gelu_forward(v->fch_act, v->fch, (long)N * F));
    else PROF_KERNEL("swiglu_fwd", prof_cost_swiglu_forward(N, F), swiglu_forward(v->fch_act, v->fch, N, F));
    store(lp, l, "fch_act", a->fch_act, v->fch_act, (size_t)N * F, true);
    if (!to_output) return;
    mm_forward(m, site_of(l, SITE_FCPROJ), v->res, v->fch_act, a->fch_act, offset_of(m, w->fcprojw), w->fcprojb, N,
               F, C);
    round_in_place(lp, v->res, NC);
    PROF_KERNEL("residual_fwd", prof_cost_elementwise((double)NC, 1, 2, 1),
                residual_forward(v->res, v->branch, v->res, (long)NC));
    keep_input(m, l + 1, v->res);
}

float model_lowp_forward(model *m, const int *inputs, const int *targets, int B, int T) {
    model_lowp *lp = m->lowp;
    ensure_store(m, B, T);
    const model_config *c = &m->cfg;
    int N = B * T, C = c->C, QKV = model_dim_size(c, DIM_QKV), FC = model_dim_size(c, DIM_FC_IN);
    size_t NC = (size_t)N * C;
    if (lp->prec.compute == MODEL_COMPUTE_FP8) { /* codes for the largest tensor fake-quantised at once */
        size_t widest = zmax(zmax((size_t)QKV, (size_t)FC), (size_t)C), weights = (size_t)c->Vp * C;
        weights = zmax(weights, zmax((size_t)QKV * C, (size_t)FC * C));
        ensure_q8(m, zmax(zmax(weights, (size_t)N * widest), zmax((size_t)HEAD_ROWS * c->Vp, (size_t)1 << 19)));
    }
    cast_weights(m);

    pool_view v = pool_of(m);
    model_hook(m->hooks.before_forward, m->hooks.ctx, -1);
    PROF_KERNEL("encoder_fwd", prof_cost_encoder_forward(N, C), /* embeddings: fp32 weights, fp32 */
                encoder_forward(v.res, inputs, m->w.wte, m->w.wpe, B, T, C, c->V));
    keep_input(m, 0, v.res);
    for (int l = 0; l < c->L; l++) {
        model_hook(m->hooks.before_forward, m->hooks.ctx, l);
        block_forward(m, l, &v, true); /* leaves the block's output in v.res */
    }
    model_hook(m->hooks.before_forward, m->hooks.ctx, c->L);
    PROF_KERNEL("norm_fwd", prof_cost_norm_forward(N, C),
                model_norm_forward(m, v.ln, lp->lnf_mean, lp->lnf_rstd, v.res, m->w.lnfw, m->w.lnfb, N));
    store(lp, c->L, "lnf", lp->lnf, v.ln, NC, true);
    head_forward(m, v.ln, targets);
    m->have_targets = targets != NULL;
    if (!targets) return 0.0f;
    double sum = 0;
    m->counted = 0;
    for (int i = 0; i < N; i++)
        if (targets[i] >= 0) {
            sum += lp->losses[i];
            m->counted++;
        }
    return m->counted ? (float)(sum / m->counted) : 0.0f;
}

const float *model_lowp_logits(model *m, int b, int t) {
    model_lowp *lp = m->lowp;
    MP_ASSERT(lp->store && b >= 0 && b < lp->B && t >= 0 && t < lp->T, "logits of (%d, %d) outside the last batch", b,
              t);
    load(lp, lp->logit_row, stored_at(lp, lp->logits, ((size_t)b * lp->T + t) * m->cfg.Vp), (size_t)m->cfg.Vp);
    return lp->logit_row;
}

/* ------------------------------------------------------------------ backward */

/* dfch (N,FC) = the MLP activation's backward from dfch_act (N,F) and its stored input, decoded ACT_ROWS
 * rows at a time (so no fp32 copy of the whole input is needed next to both gradients). */
static void activation_backward(model *m, float *dfch, const float *dfch_act, const void *fch_stored, int N) {
    model_lowp *lp = m->lowp;
    const model_config *c = &m->cfg;
    size_t FC = model_dim_size(c, DIM_FC_IN), F = c->F;
    for (int r = 0; r < N; r += ACT_ROWS) {
        int rows = N - r < ACT_ROWS ? N - r : ACT_ROWS;
        float *d = dfch + (size_t)r * FC;
        load(lp, lp->rowtmp, stored_at(lp, fch_stored, (size_t)r * FC), (size_t)rows * FC);
        memset(d, 0, (size_t)rows * FC * sizeof(float));
        if (c->arch == MODEL_GPT2)
            PROF_KERNEL("gelu_bwd", prof_cost_elementwise((double)rows * F, 14, 2, 2),
                        gelu_backward(d, lp->rowtmp, dfch_act + (size_t)r * F, (long)rows * F));
        else
            PROF_KERNEL("swiglu_bwd", prof_cost_swiglu_backward(rows, F),
                        swiglu_backward(d, dfch_act + (size_t)r * F, lp->rowtmp, rows, (int)F));
    }
}

void model_lowp_backward(model *m, float loss_scale) {
    model_lowp *lp = m->lowp;
    const model_config *c = &m->cfg;
    int B = lp->B, T = lp->T, N = B * T, C = c->C, HS = C / c->NH, QKV = model_dim_size(c, DIM_QKV),
        FC = model_dim_size(c, DIM_FC_IN), F = c->F;
    size_t NC = (size_t)N * C, natt = (size_t)B * c->NH * T * T;
    pool_view v = pool_of(m);

    float per_position = m->counted ? loss_scale / (float)m->counted : 0.0f;
    for (int i = 0; i < N; i++) lp->dloss[i] = per_position;

    model_hook(m->hooks.before_backward, m->hooks.ctx, c->L);
    head_backward(m, v.dln);
    load_input(m, c->L, v.dec);
    memset(v.dres, 0, NC * sizeof(float));
    PROF_KERNEL("norm_bwd", prof_cost_norm_backward(N, C),
                model_norm_backward(m, v.dres, m->g.lnfw, m->g.lnfb, v.dln, v.dec, m->w.lnfw, lp->lnf_mean,
                                    lp->lnf_rstd, N));
    model_grads_ready(m, c->L);

    for (int l = c->L - 1; l >= 0; l--) {
        model_hook(m->hooks.before_backward, m->hooks.ctx, l);
        const layer_params *w = &m->layer_w[l];
        layer_params *dw = &m->layer_g[l];
        lowp_layer *a = &lp->layers[l];
        model_keep keep = model_keep_of(m, l);
        if (keep == MODEL_KEEP_INPUT) { /* after the hook (a ZeRO-3 gather), before anything reads the block */
            pool_view rv = recompute_view(m);
            memcpy(rv.res, a->in32, NC * sizeof(float));
            lp->recomputing = true;
            block_forward(m, l, &rv, false);
            lp->recomputing = false;
        }
        /* MLP branch */
        mm_backward(m, site_of(l, SITE_FCPROJ), l, v.dfch_act, offset_of(m, w->fcprojw), dw->fcprojb, v.dres,
                    a->fch_act, N, F, C);
        activation_backward(m, v.dfch, v.dfch_act, a->fch, N);
        mm_backward(m, site_of(l, SITE_FC), l, v.dln, offset_of(m, w->fcw), dw->fcb, v.dfch, a->ln2, N, C, FC);
        load(lp, v.dec, a->res2, NC);
        PROF_KERNEL("norm_bwd", prof_cost_norm_backward(N, C),
                    model_norm_backward(m, v.dres, dw->ln2w, dw->ln2b, v.dln, v.dec, w->ln2w, a->ln2_mean, a->ln2_rstd,
                                        N));
        /* attention branch */
        mm_backward(m, site_of(l, SITE_ATTPROJ), l, v.datty, offset_of(m, w->attprojw), dw->attprojb, v.dres, a->atty,
                    N, C, C);
        load(lp, v.dec_qkv, a->qkv, (size_t)N * QKV);
        if (keep == MODEL_KEEP_NO_SCORES) {
            /* selective: softmax(q k^T) again from the stored q, k, v, rounded as forward would have stored
             * it; the attention output comes again too, into v.dec (free until the norm below) */
            PROF_KERNEL("attention_fwd", prof_cost_attention_forward(B, T, c->NH, HS),
                        attention_forward(v.dec, v.dec_att, v.dec_qkv, B, T, c->NH, c->KVH, HS));
            round_in_place(lp, v.dec_att, natt);
        } else {
            load(lp, v.dec_att, a->att, natt);
        }
        memset(v.dqkv, 0, (size_t)N * QKV * sizeof(float));
        PROF_KERNEL("attention_bwd", prof_cost_attention_backward(B, T, c->NH, HS),
                    attention_backward(v.dqkv, v.datty, v.dec_qkv, v.dec_att, B, T, c->NH, c->KVH, HS));
        if (c->arch == MODEL_LLAMA) rope_backward(v.dqkv, B, T, c->NH, c->KVH, HS, c->rope_theta);
        mm_backward(m, site_of(l, SITE_QKV), l, v.dln, offset_of(m, w->qkvw), dw->qkvb, v.dqkv, a->ln1, N, C, QKV);
        load_input(m, l, v.dec);
        PROF_KERNEL("norm_bwd", prof_cost_norm_backward(N, C),
                    model_norm_backward(m, v.dres, dw->ln1w, dw->ln1b, v.dln, v.dec, w->ln1w, a->ln1_mean, a->ln1_rstd,
                                        N));
        model_grads_ready(m, l);
    }
    model_hook(m->hooks.before_backward, m->hooks.ctx, -1);
    PROF_KERNEL("encoder_bwd", prof_cost_encoder_backward(N, C),
                encoder_backward(m->g.wte, m->g.wpe, v.dres, m->inputs, B, T, C, c->V));
    model_grads_ready(m, -1);
    m->have_targets = false;
    m->matrix_grads_stale = false; /* written: a next backward before model_zero_grad adds to them */
    /* Delayed scaling: this step's amaxes set the next step's scales. */
    for (int i = 0; lp->fp8 && !lp->prec.fp8_unscaled && !lp->prec.fp8_mx && i < lp->nsites * FP8_PER_SITE; i++)
        amp_fp8_update_scale(&lp->fp8[i]);
}

/* ------------------------------------------------------------------ counters */

void model_rounding_enable(model *m, bool on) {
    if (m->lowp) m->lowp->counting = on;
}

const model_layer_rounding *model_rounding(const model *m, int *n) {
    *n = m->lowp ? m->cfg.L + 2 : 0;
    return m->lowp ? m->lowp->rounding : NULL;
}

void model_rounding_reset(model *m) {
    if (m->lowp) memset(m->lowp->rounding, 0, ((size_t)m->cfg.L + 2) * sizeof *m->lowp->rounding);
}
