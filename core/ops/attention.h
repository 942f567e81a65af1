/* attention.h: causal multi-head self-attention with grouped-query heads, forward and backward. */
#ifndef MIXPAR_OPS_ATTENTION_H
#define MIXPAR_OPS_ATTENTION_H

/* Input: the packed output of the qkv projection, one row per position:
 *     qkv[b][t] = [ q head 0 .. q head NH-1 | k head 0 .. k head KVH-1 | v head 0 .. v head KVH-1 ]
 * each head HS floats, so a row holds (NH + 2*KVH) * HS floats. GPT-2 has KVH = NH (plain multi-head
 * attention, the row is 3*C); grouped-query attention (LLaMA 2 70B, LLaMA 3) has KVH < NH, KVH divides
 * NH, and query head h reads key/value head h / (NH/KVH): consecutive query heads share one.
 *
 * For each batch b, query head h and position t (causal: only keys at t2 <= t):
 *     score[t2] = q . k[t2] / sqrt(HS)
 *     att[t2]   = softmax(score)[t2]      (max subtracted first, so exp never overflows)
 *     out[t]    = sum_t2 att[t2] * v[t2]
 * The output row is the NH heads side by side: (B, T, NH*HS).
 *
 * Memory kept for backward: att, the softmax probabilities, B*NH*T*T floats (the upper triangle, t2 > t,
 * is written as 0). For GPT-2 124M at B=4, T=64 that is 4*12*64*64*4 bytes = 786 KB per layer; it grows
 * with T^2, which is why long-context training recomputes it (flash attention) instead of keeping it.
 * Pre-softmax scores are not kept: the softmax backward needs only the probabilities.
 *
 * out (B,T,NH*HS); att (B,NH,T,T); qkv (B,T,(NH+2*KVH)*HS). */
void attention_forward(float *out, float *att, const float *qkv, int B, int T, int NH, int KVH, int HS);

/* dqkv (B,T,(NH+2*KVH)*HS) += the gradient through attention, from dout (B,T,NH*HS) and the forward's
 * qkv and att. The q, k and v parts all accumulate. Work is split over (batch, kv head) pairs, so the
 * query heads that share a kv head add into its dk and dv in one thread, in a fixed order. */
void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int NH,
                        int KVH, int HS);

#endif
