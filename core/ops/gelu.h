/* gelu.h: the GELU activation in GPT-2's tanh approximation, forward and backward. */
#ifndef MIXPAR_OPS_GELU_H
#define MIXPAR_OPS_GELU_H

/* gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)   (Hendrycks and Gimpel 2016) */

/* out (N) = gelu(inp (N)); N is the element count (B*T*4C in GPT-2's MLP). */
void gelu_forward(float *out, const float *inp, long N);
/* dinp (N) += gelu'(inp) * dout. */
void gelu_backward(float *dinp, const float *inp, const float *dout, long N);

#endif
