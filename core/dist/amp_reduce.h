/* amp_reduce.h: gradients on a 16-bit wire under mixed precision (lab 17): the ranks' fp16/bf16 values averaged in fp32, rounded once. */
#ifndef MIXPAR_DIST_AMP_REDUCE_H
#define MIXPAR_DIST_AMP_REDUCE_H

#include "comm/comm.h"

#include <stddef.h>
#include <stdint.h>

/* The DDP hooks "fp16" and "bf16" (dist/hooks.h) send 16-bit gradients: each rank rounds its bucket to dt, and
 * the rank that owns a chunk of it receives every rank's 16 bits of that chunk. What it does with them decides
 * what survives the wire:
 *   - widen each value to fp32 (exact: every fp16 and bf16 value is an fp32 value) and add there: a sum kept in
 *     16 bits rounds after every addition (bf16 keeps 8 significant bits: 1 + 2^-9 + 2^-9 stays 1) and, in fp16,
 *     overflows as soon as it passes 65504, although the average would not;
 *   - add the ranks in rank order, so every chunk is summed the same way on every run;
 *   - divide by p once (the hook's result is the average, as DDP's is) and round to dt once.
 * Under fp16 AMP the values are the still-scaled gradients S x g_r: the reduction keeps S, and the step unscales
 * the average once, afterwards (amp_finish, lab 07), which is right only because every rank uses the same S.
 *
 *     amp_reduce_mean16(out, in, p, n, COMM_FP16, acc, wide);   // out[i] = fp16(sum_j in[j*n + i] / p)
 */

/* in (p, n): row j is rank j's n values in dt (COMM_FP16 or COMM_BF16). out (n): their average, in dt.
 * acc, wide (n floats each): scratch. */
void amp_reduce_mean16(uint16_t *out, const uint16_t *in, size_t p, size_t n, comm_dtype dt, float *acc, float *wide);

/* n values between fp32 and dt (COMM_FP16 or COMM_BF16): rounded to nearest even going down, exact going up. */
void amp_reduce_narrow16(uint16_t *dst, const float *src, size_t n, comm_dtype dt);
void amp_reduce_widen16(float *dst, const uint16_t *src, size_t n, comm_dtype dt);

#endif
