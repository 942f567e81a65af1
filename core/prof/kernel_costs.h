/* kernel_costs.h: FLOPs and bytes moved of the model's kernels, from their shapes (for the profiler, lab 23). */
#ifndef MIXPAR_PROF_KERNEL_COSTS_H
#define MIXPAR_PROF_KERNEL_COSTS_H

/* What a kernel must do at the least, counted from its arguments' shapes: a multiply-add is 2 FLOPs; an
 * element-wise op counts the arithmetic of its formula; bytes are every tensor it reads or writes, once, 4 bytes
 * a value (fp32), and twice for one it adds into (+=: read and write). A cache that holds a tensor between two
 * kernels makes the real traffic smaller; a kernel that streams a tensor twice makes it larger: the roofline
 * places the kernel by this minimum, as the roofline model does. Letters as in model.h: N = B*T rows, C, OC
 * channels in and out, NH heads of HS, T positions; F the MLP width; V the vocabulary (Vp padded). */

#include "prof/prof.h"

#include <stdbool.h>

static inline prof_cost prof_cost_make(double flops, double floats_moved) {
    return (prof_cost){flops, 4.0 * floats_moved};
}

/* out (N,OC) = inp (N,C) @ weight^T (OC,C) + bias (OC) */
static inline prof_cost prof_cost_matmul_forward(double N, double C, double OC) {
    return prof_cost_make(2 * N * C * OC + N * OC, N * C + OC * C + OC + N * OC);
}
/* dinp (N,C) += dout @ weight; dweight (OC,C) += dout^T @ inp; dbias (OC) += column sums */
static inline prof_cost prof_cost_matmul_backward(double N, double C, double OC) {
    return prof_cost_make(4 * N * C * OC + N * OC, N * OC + N * C + OC * C + 2 * N * C + 2 * OC * C + 2 * OC);
}
/* causal attention, per head: scores q.k for the T(T+1)/2 pairs (2 HS each), softmax (about 5 per pair: max,
 * subtract, exp, sum, scale), and the weighted sum of values (2 HS per pair); reads qkv (N, 3C), writes the
 * probabilities (B,NH,T,T) and the output (N,C) */
static inline prof_cost prof_cost_attention_forward(double B, double T, double NH, double HS) {
    double pairs = B * NH * T * (T + 1) / 2;
    return prof_cost_make(pairs * (4 * HS + 5), 3 * B * T * NH * HS + B * NH * T * T + B * T * NH * HS);
}
/* the four products of backward (dV, dP, dQ, dK: 2 HS per pair each) and softmax's backward (about 4 per pair);
 * reads dout (N,C), qkv, the probabilities; writes dqkv (N,3C) */
static inline prof_cost prof_cost_attention_backward(double B, double T, double NH, double HS) {
    double pairs = B * NH * T * (T + 1) / 2;
    return prof_cost_make(pairs * (8 * HS + 4), B * T * NH * HS + 3 * B * T * NH * HS + B * NH * T * T +
                                                    2 * 3 * B * T * NH * HS);
}
/* layer norm over rows of C: mean, variance, normalise and scale: about 8 per value; reads inp, w, b, writes
 * out (N,C) and the row statistics */
static inline prof_cost prof_cost_norm_forward(double N, double C) {
    return prof_cost_make(8 * N * C, 2 * N * C + 2 * C + 2 * N);
}
/* its backward: about 12 per value; reads dout, inp, w, the statistics; dinp +=, dw and db += */
static inline prof_cost prof_cost_norm_backward(double N, double C) {
    return prof_cost_make(12 * N * C, 2 * N * C + C + 2 * N + 2 * N * C + 4 * C);
}
/* an element-wise op over n values with `flops` per value, reading `in` and writing `out` tensors of n */
static inline prof_cost prof_cost_elementwise(double n, double flops, double in, double out) {
    return prof_cost_make(flops * n, (in + out) * n);
}
/* SwiGLU over N rows of F: out = silu(gate) * up reads both halves of fch (2F) and writes F, about 6 per value; its
 * backward reads dout and both halves and adds into both halves of dfch (read and write), about 12 per value */
static inline prof_cost prof_cost_swiglu_forward(double N, double F) { return prof_cost_elementwise(N * F, 6, 2, 1); }
static inline prof_cost prof_cost_swiglu_backward(double N, double F) { return prof_cost_elementwise(N * F, 12, 3, 4); }
/* embeddings: out (B,T,C) = wte[token] + wpe[t] */
static inline prof_cost prof_cost_encoder_forward(double N, double C) { return prof_cost_make(N * C, 3 * N * C); }
/* dwte[token] += dout, dwpe[t] += dout */
static inline prof_cost prof_cost_encoder_backward(double N, double C) { return prof_cost_make(2 * N * C, 5 * N * C); }
/* softmax cross-entropy over V of the Vp logits per row: max, exp, sum (about 4 per logit) */
static inline prof_cost prof_cost_crossentropy_forward(double N, double V, double Vp) {
    return prof_cost_make(4 * N * V, N * Vp + 3 * N);
}
/* dlogits = softmax - onehot, times dloss: about 3 per logit; reads the logits, writes dlogits */
static inline prof_cost prof_cost_crossentropy_backward(double N, double V, double Vp) {
    return prof_cost_make(3 * N * V, 2 * N * Vp + 3 * N);
}

/* ---- the 16-bit path (model_lowp.c): products whose operands are 16-bit, and the conversions around them */

/* out (N,OC) fp32 = inp (N,C) @ weight^T (OC,C) + bias, inp and weight 16-bit (`esz` bytes a value: 2) */
static inline prof_cost prof_cost_matmul_forward_narrow(double N, double C, double OC, double esz) {
    return (prof_cost){2 * N * C * OC + N * OC, esz * (N * C + OC * C) + 4 * (OC + N * OC)};
}
/* dinp (N,C) fp32 = dout @ weight (written); dweight (OC,C) fp32 += dout^T @ inp, or = where the product writes it
 * (dweight_written: a gradient no earlier backward added to, model_lowp.c); dbias += column sums; dout, inp and
 * weight 16-bit. With few rows (N) the fp32 weight gradient's traffic outweighs the products: memory-bound. */
static inline prof_cost prof_cost_matmul_backward_narrow(double N, double C, double OC, double esz,
                                                         bool dweight_written) {
    return (prof_cost){4 * N * C * OC + N * OC,
                       esz * (N * OC + N * C + OC * C) + 4 * (N * C + (dweight_written ? 1 : 2) * OC * C + 2 * OC)};
}
/* n values read at `in` bytes each and written at `out` bytes each (a cast to or from a 16-bit format, or a
 * rounding in place): no floating-point arithmetic, only traffic */
static inline prof_cost prof_cost_convert(double n, double in, double out) { return (prof_cost){0, (in + out) * n}; }

#endif
