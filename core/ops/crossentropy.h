/* crossentropy.h: softmax and cross-entropy fused over the vocabulary, forward and backward. */
#ifndef MIXPAR_OPS_CROSSENTROPY_H
#define MIXPAR_OPS_CROSSENTROPY_H

/* For each of the N positions (B*T), logits z over the vocabulary and a target token y:
 *     loss = -log softmax(z)[y] = lse - z[y],     lse = log sum_v exp(z[v])   (the log-sum-exp)
 *     dloss/dz[v] = softmax(z)[v] - [v == y] = exp(z[v] - lse) - [v == y]
 * lse is computed as max + log sum exp(z - max), so no exp overflows whatever the logits' size.
 * Softmax and loss are fused: the (N, V) probabilities are never stored; backward rebuilds each one
 * from the logit and the row's lse (N floats), which forward saves.
 *
 * Padding: rows are Vp >= V floats long (GPT-2 pads 50257 to 50304 so matmul tiles evenly); columns
 * V..Vp-1 take no part in the softmax and get zero gradient.
 * Ignored positions: a target of -1 (padding, or a prompt not to be trained on) has loss 0 and a zero
 * gradient row. The caller averages over the positions it counts, through dloss.
 * A target outside [-1, V) is a bug upstream and stops the program. */

/* losses (N): per-position loss; lse (N): saved for backward; logits (N,Vp); targets (N). */
void crossentropy_forward(float *losses, float *lse, const float *logits, const int *targets, int N, int V, int Vp);

/* dlogits (N,Vp) = (softmax(logits) - onehot(target)) * dloss[n], computed from logits and lse.
 * dloss (N) is the gradient at each position's loss, usually 1 / (number of counted positions).
 * dlogits is OVERWRITTEN, not accumulated, so it may be the logits array itself (the logits are not
 * needed after this, and GPT-2's (256, 50304) logits are 51 MB). */
void crossentropy_backward(float *dlogits, const float *logits, const float *lse, const int *targets,
                           const float *dloss, int N, int V, int Vp);

#endif
