/* sp.h: Megatron-LM's sequence parallel (序列并行) on the tp group: the all-gather and reduce-scatter over the sequence that replace tensor parallel's allreduces, and the per-step sum of the norms' partial gradients. */
#ifndef MIXPAR_DIST_SP_H
#define MIXPAR_DIST_SP_H

#include "comm/comm.h"
#include "dist/mesh.h"
#include "model/model.h"

/* Sequence parallel (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
 * Models", section 4.2.2): with tensor parallel alone every tp rank holds the whole residual stream, the
 * norms' inputs and outputs (B,T,C) and computes the same norms and residual adds tp times. Sequence
 * parallel splits those along the sequence: tp rank t keeps positions [t T/tp, (t+1) T/tp) of every
 * sequence, so they take 1/tp of the memory, and the conjugate ops change:
 *
 *            tensor parallel                 sequence parallel
 *   f        identity / allreduce            all-gather (sequence) / reduce-scatter (sequence)
 *   g        allreduce / identity            reduce-scatter (sequence) / all-gather (sequence)
 *
 *   [B,T/tp,C] --norm--> --all-gather--> [B,T,C] column-parallel .. row-parallel [B,T,C] partial
 *              --reduce-scatter--> [B,T/tp,C] --residual add-->
 *
 * An allreduce is a reduce-scatter followed by an all-gather, so the bytes moved per layer are the same;
 * what changes is that between the two halves each rank holds only its slice. The collectives run on the
 * mesh's tp group (comm_allgather, comm_reduce_scatter: their events name the group "tp"). Our layout is
 * (B,T,C), batch-major, so rank r's slice is B runs of T/tp rows, not one block: the gather puts each
 * rank's runs in their place and the reduce-scatter lays them out rank by rank first (a copy through a
 * MEM_COMM buffer; none when B = 1). */

/* The shard of tp_model_shard with sequence parallel on (tp > 1; with tp = 1 it is tp_model_shard's,
 * unchanged: nothing to split, as Megatron turns sequence parallel off there). */
model_shard sp_model_shard(mesh_t *mesh, int first, int last);

/* full (B,T,C) = every tp rank's slice (B,T/tp,C) in its place in the sequence. tp: the tp group. */
void sp_gather_sequence(comm_t *tp, const float *slice, float *full, int B, int T, int C);
/* slice (B,T/tp,C) = this rank's positions of the sum over the tp ranks of full (B,T,C). */
void sp_reduce_scatter_sequence(comm_t *tp, const float *full, float *slice, int B, int T, int C);

/* Sums over the tp group the gradients each rank computed from its slice of the sequence only (the norms'
 * gains and biases: model_tensor_seq_partial), in one allreduce of the tensors packed together. Call once
 * per step, after the last micro-batch's backward (gradients accumulate over micro-batches first).
 * Nothing without sequence parallel. */
void sp_sum_partial_grads(comm_t *tp, model *m);

#endif
