/* residual.h: the residual connection out = a + b, forward and backward. */
#ifndef MIXPAR_OPS_RESIDUAL_H
#define MIXPAR_OPS_RESIDUAL_H

/* out (N) = inp1 (N) + inp2 (N); out may be the same array as either input. */
void residual_forward(float *out, const float *inp1, const float *inp2, long N);
/* dinp1 (N) += dout; dinp2 (N) += dout: the gradient passes unchanged down both paths. */
void residual_backward(float *dinp1, float *dinp2, const float *dout, long N);

#endif
