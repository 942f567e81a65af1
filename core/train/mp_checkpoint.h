/* mp_checkpoint.h: checkpoints of dp x tp x pp runs: every rank writes its shard in the whole model's layout, so any mesh (or the data-parallel trainer) loads and reslices it. */
#ifndef MIXPAR_TRAIN_MP_CHECKPOINT_H
#define MIXPAR_TRAIN_MP_CHECKPOINT_H

/* ---------------------------------------------------------------- the idea
 * A rank of a 3D-parallel run (train/mp_step.h) holds pieces of the whole model: its pipeline stage's
 * blocks, and of each tensor its tensor-parallel slice (model.h: qkvw's rows of its heads, fcprojw's
 * input columns, wte's vocabulary rows, ...). Every element of such a slice is one element of the whole
 * model's flat parameter buffer (the registry of model_create on one rank), so a slice is a list of
 * ranges of that buffer: a row-split tensor one range per stacked part (q, k, v: three), a column-split
 * one range per row. model_tensor_whole_runs gives them in the order the shard stores the elements.
 *
 * The checkpoint is therefore an ordinary sharded checkpoint (train/ckpt_sharded.h) over the WHOLE
 * model's buffer: total = the 1-rank model's parameter count, buffers "params", "optim.m", "optim.v"
 * (those the optimizer has), each rank's file holding its ranges. Loading is a range read: a rank of
 * another mesh asks for the whole-model ranges of ITS slices and gets them from whichever files hold
 * them; the data-parallel trainer (any world, ZeRO or not) asks for [0, total) or its ZeRO ranges. And
 * `mixpar checkpoint consolidate` makes one safetensors file of it, as of a ZeRO run's.
 *
 * Who writes what (the ranges of all ranks cover [0, total) exactly once):
 *   - a tensor every tp rank holds whole (norms, row-parallel biases, wpe): tp rank 0 only;
 *   - the last stage's copy of a tied embedding (pp > 1): nobody (the first stage's wte is the tensor;
 *     the two copies are equal, their gradients being summed);
 *   - dp replicas: without ZeRO, dp rank 0 only (the others write an empty shard); with ZeRO-1 each dp
 *     rank writes the pieces whose optimizer state it owns (its 1/dp of each chunk's buffer), with the
 *     weights of those pieces. Either way the parameters and the Adam moments of an element come from
 *     the same rank.
 * fp32 only: model-parallel runs keep no master copy (the trainer refuses low-precision recipes there).
 *
 * The manifest: index.json's metadata gains "mesh" (JSON: dp, tp, pp, chunks, zero_stage and the
 * virtual stages' first blocks) and "tensors" (JSON: for each tensor of the whole model its name,
 * shape, offset in the buffer, tp split "replicated" | "qkv_head_rows" | "ffn_rows" | "cols" |
 * "vocab_rows", the dimension split (0 rows, 1 columns, -1 none) and the pipeline stage that holds it).
 * The index's ranges are what loading uses; the manifest says, for a person or another tool, why each
 * rank holds what it holds.
 *
 * Saving is atomic as ckpt_sharded_save is (DIR.tmp, the index last, one rename).
 *
 * Costs and limits: a column-split tensor (attprojw, fcprojw: row-parallel layers) is one range per row of
 * the whole tensor, so index.json lists about 2 C ranges per block per tp rank (fine for the course's
 * models; a 4096-wide model on tp 8 would have an index of tens of MB). Loading one file (not a sharded
 * directory) reads it whole on every rank, 3 x the model's floats each, then keeps the slices. */

#include <stdbool.h>

#include "data/data_err.h"
#include "train/checkpoint.h"
#include "train/mp_step.h"

/* Collective over the mesh's world: writes every rank's shard and the index to dir. meta (the same on
 * every rank: config, step, optim_step, loader position) goes into the index with the manifest. Returns
 * the same on every rank; false with *err filled (exit 2 when err is NULL) and dir as it was. */
bool mp_checkpoint_save(mp_step *s, const char *dir, const ckpt_meta *meta, int nmeta, data_err *err);

/* Where a loaded checkpoint stood. */
typedef struct {
    long step;                    /* training steps done */
    uint64_t loader_epoch, loader_batch;
    uint64_t loader_rows;         /* rows of one loader batch there (micro-batch x dp); 0: not recorded (a
                                   * data-parallel run's checkpoint: micro-batch x world) */
} mp_checkpoint_progress;

/* Collective: loads path into this rank's shard: the weights of every tensor it holds (tied copies and
 * tp-replicated tensors included) and the optimizer state of its spans, with the optimizer's step, and
 * fills *progress from the metadata. path is a sharded checkpoint directory written by any mesh or by a
 * ZeRO/FSDP data-parallel run, or one safetensors file of a 1-rank run (or `mixpar checkpoint
 * consolidate`'s). A model of another shape, a missing buffer or a damaged shard: exit 2 on every rank,
 * naming the file. The copies are bytes: what was saved is what is loaded, bit for bit. Under a mixed-precision
 * recipe the loss scaler's state (saved in the metadata, keys loss_scaler.*) is restored too. */
void mp_checkpoint_load(mp_step *s, const char *path, mp_checkpoint_progress *progress);

#endif
