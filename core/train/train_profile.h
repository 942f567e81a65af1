/* train_profile.h: the trainer's profiling run (train.profile): spans, kernels and a trace per rank (lab 23). */
#ifndef MIXPAR_TRAIN_TRAIN_PROFILE_H
#define MIXPAR_TRAIN_TRAIN_PROFILE_H

#include "model/model.h"

/* With "train": {"profile": true} (or --set train.profile=true) the trainer measures the machine's roof (sgemm
 * peak and triad bandwidth, prof/roofline.h) before the first step and after the last, keeping the better of
 * each, and profiles every step: the spans step > forward/backward > block_fwd/block_bwd > kernels (under tensor
 * or pipeline parallel step > pipeline > kernels, then grad_sync_wait and optimizer), plus the communication calls on
 * the thread that makes them. It writes, in the run folder:
 *
 *     trace.rank<R>.json     a Chrome trace of every step, valid JSON after each step (open it in Perfetto)
 *     profile.rank<R>.tsv    per name: calls, total and self seconds, FLOPs and bytes, over the steps after the
 *                            first (warm-up: first-touch page faults, BLAS buffers); header lines carry the roof,
 *                            the model's shape and the tokens per step. `mixpar profile RUN_DIR` reads it.
 *
 * Without the option nothing is measured: the model's PROF_KERNEL wrappers test one NULL pointer. */

typedef struct train_profile train_profile;

/* tokens_per_step: the tokens a step trains, per rank (the world's tokens / world: under tensor or pipeline
 * parallel a fraction of a replica's), so that `mixpar profile`'s MFU counts each token once.
 * products_kernel16: the 16-bit kernel the model's products run on (model_products_kernel16), or NULL. With one, the
 * roof also has that kernel's peak, measured the same way after the last step (# products_peak_flops,
 * # products_kernel), against which `mixpar profile` places the matmul kernels and MFU. */
train_profile *train_profile_start(const char *run_dir, int rank, int world, const model_config *mc, int T,
                                   double tokens_per_step, const char *products_kernel16);
void train_profile_step_begin(train_profile *tp);
void train_profile_step_end(train_profile *tp);
void train_profile_finish(train_profile *tp); /* writes the table, closes the trace; NULL is fine */

#endif
