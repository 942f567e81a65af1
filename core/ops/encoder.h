/* encoder.h: the input layer: token embedding plus learned position embedding, forward and backward. */
#ifndef MIXPAR_OPS_ENCODER_H
#define MIXPAR_OPS_ENCODER_H

/* out[b][t] = wte[tokens[b][t]] + wpe[t]. GPT-2 learns the position table wpe; a RoPE model (LLaMA)
 * passes wpe = NULL and puts positions into attention instead (ops/rope.h).
 * Token ids must lie in [0, V); an id outside is a bug upstream (the data loader checks its files) and
 * stops the program with an internal error. */

/* out (B,T,C); tokens (B,T); wte (V,C); wpe (maxT,C) with maxT >= T, or NULL. */
void encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C, int V);

/* dwte (V,C) += scatter of dout by token; dwpe (maxT,C) += sum of dout over the batch. Either may be NULL.
 * A token that occurs twice gets both contributions. Work is split over channels, not positions, so
 * no two threads add into the same element and the result does not depend on the thread count. */
void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C, int V);

#endif
