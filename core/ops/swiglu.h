/* swiglu.h: the SwiGLU gate of LLaMA's feed-forward block, forward and backward. */
#ifndef MIXPAR_OPS_SWIGLU_H
#define MIXPAR_OPS_SWIGLU_H

/* LLaMA's MLP is down(silu(gate(x)) * up(x)) (Shazeer 2020). The gate and up projections are done as one
 * matmul with 2F outputs, so each input row is laid out [gate (F) | up (F)]:
 *     out[n][f] = silu(g) * u,   g = inp[n][f],  u = inp[n][F + f],  silu(g) = g * sigmoid(g)
 *
 * out (N,F); inp (N,2F). */
void swiglu_forward(float *out, const float *inp, int N, int F);

/* dinp (N,2F) += [dout * u * silu'(g) | dout * silu(g)],  silu'(g) = s (1 + g (1 - s)), s = sigmoid(g). */
void swiglu_backward(float *dinp, const float *dout, const float *inp, int N, int F);

#endif
