/* tp.h: Megatron-LM's tensor parallelism (张量并行): the conjugate communication ops f and g, and the
 * column-parallel and row-parallel linear layers built on them. */
#ifndef MIXPAR_DIST_TP_H
#define MIXPAR_DIST_TP_H

#include "comm/comm.h"
#include "dist/mesh.h"
#include "model/model.h"

/* Megatron-LM (megatron/core/tensor_parallel/mappings.py, layers.py), on a tp group of P ranks:
 *
 *   f  copy_to_tensor_model_parallel_region:     forward identity,   backward allreduce (sum)
 *   g  reduce_from_tensor_model_parallel_region: forward allreduce,  backward identity
 *
 * An MLP  Y = act(X A^T) B^T  splits A by its output rows (column-parallel: rank t holds rows
 * t*H/P .. of A, so act runs locally on its H/P hidden columns) and B by its input columns
 * (row-parallel: rank t holds columns t*H/P .. of B, so each rank makes a partial Y):
 *
 *     X --f--> [X A_t^T] --act--> [Z_t B_t^T] --g--> Y         two allreduces per layer pair: g forward,
 *                                                              f backward (dX is a sum over the shards)
 *
 * Shapes (ops/matmul.h's convention: weights (out, in) row-major): N rows (B*T), C input channels,
 * OC output channels; a suffix l marks this rank's share, OCl = OC / P or Cl = C / P. The backward
 * functions ACCUMULATE into their gradients, as matmul_backward does; any gradient may be NULL. */

/* f: forward identity (nothing to do; kept so the schedule of conjugate points reads as Megatron's). */
void tp_copy_to_region_forward(comm_t *tp, float *x, size_t n);
/* f: backward x = sum over tp of x, in place. */
void tp_copy_to_region_backward(comm_t *tp, float *x, size_t n);
/* g: forward x = sum over tp of x, in place. */
void tp_reduce_from_region_forward(comm_t *tp, float *x, size_t n);
/* g: backward identity. */
void tp_reduce_from_region_backward(comm_t *tp, float *x, size_t n);

/* Column-parallel: out (N, OCl) = inp (N, C) @ weight^T + bias, weight (OCl, C) and bias (OCl) this
 * rank's rows. The input is whole on every rank (f before it); the output stays split. */
void tp_column_linear_forward(comm_t *tp, float *out, const float *inp, const float *weight, const float *bias, int N,
                              int C, int OCl);
/* dinp (N, C) += sum over tp of dout @ weight (f's allreduce); dweight (OCl, C), dbias (OCl) += this
 * rank's shards. */
void tp_column_linear_backward(comm_t *tp, float *dinp, float *dweight, float *dbias, const float *dout,
                               const float *inp, const float *weight, int N, int C, int OCl);

/* Row-parallel: out (N, OC) = sum over tp of inp (N, Cl) @ weight^T, plus bias (OC) added once after
 * the sum (g). inp is split (a column-parallel layer's output); weight (OC, Cl) this rank's columns;
 * bias whole, the same on every rank. */
void tp_row_linear_forward(comm_t *tp, float *out, const float *inp, const float *weight, const float *bias, int N,
                           int Cl, int OC);
/* dinp (N, Cl) += dout @ weight; dweight (OC, Cl) += dout^T @ inp; dbias (OC) += the column sums of
 * dout, the same on every tp rank (g's backward is the identity: dout is whole everywhere). */
void tp_row_linear_backward(comm_t *tp, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int N, int Cl, int OC);

/* The shard description of this rank's part of a model (model.h): its tp rank and size from the mesh,
 * blocks [first, last), and the conjugate points' reductions as allreduces over the mesh's tp group
 * (sum for g forward and f backward, max for the vocab-parallel loss). The model never sees the group. */
model_shard tp_model_shard(mesh_t *mesh, int first, int last);

#endif
