/* rope.h: rotary position embedding (RoPE) on the q and k heads of a packed qkv, forward and backward. */
#ifndef MIXPAR_OPS_ROPE_H
#define MIXPAR_OPS_ROPE_H

/* RoPE (Su et al. 2021, used by LLaMA) encodes position t by rotating pairs of channels of every q and k
 * head by angles proportional to t:
 *     freq_i = theta^(-2i/HS),  angle = t * freq_i,  for i in [0, HS/2)
 *     (x_i, x_{i+HS/2}) -> (x_i cos - x_{i+HS/2} sin,  x_i sin + x_{i+HS/2} cos)
 * Pairs are (i, i + HS/2), the "rotate half" layout of GPT-NeoX and Hugging Face LLaMA checkpoints (Meta's
 * original code pairs neighbours (2i, 2i+1) instead; converting a checkpoint permutes q and k rows).
 * Because q at position m and k at position n are rotated by m and n, their dot product depends only on
 * m - n: attention sees relative positions. theta is 10000 in LLaMA 1 and 2, 500000 in LLaMA 3.
 *
 * Both functions work in place on the packed (B, T, (NH + 2*KVH)*HS) layout of ops/attention.h; the v
 * heads are left alone. HS must be even. Positions are 0..T-1 in every sequence of the batch. */

/* freq_i = theta^(-2i/HS) for pair i in [0, HS/2), computed in double: the angle of pair i at position t is
 * t * freq_i (radians). Pair 0 turns by one radian per position, the last pair by about 1/theta. */
double rope_frequency(int i, int HS, double theta);

/* qkv: rotate the q and k heads in place (call after the qkv projection, before attention). */
void rope_forward(float *qkv, int B, int T, int NH, int KVH, int HS, float theta);

/* dqkv: on entry the gradient at the rotated q, k (what attention_backward produced); on return the
 * gradient at the unrotated ones. A rotation's Jacobian is the rotation, so this applies the inverse
 * rotation (angle -t*freq_i). The v part is unchanged. This one transforms in place, not +=. */
void rope_backward(float *dqkv, int B, int T, int NH, int KVH, int HS, float theta);

#endif
