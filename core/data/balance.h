/* balance.h: length-aware sharding: split each global batch over the data-parallel ranks by tokens, not by samples. */
#ifndef MIXPAR_DATA_BALANCE_H
#define MIXPAR_DATA_BALANCE_H

#include "data/data_err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Why (lab 15, part D). The distributed sampler (sampler.h) gives every rank the same number of samples.
 * When samples have different lengths (poems, documents, conversations), equal counts are unequal work: a
 * rank that drew the long samples computes longer, and in synchronous data parallel every other rank waits
 * for it at the gradient allreduce. That rank is the straggler (掉队者); the step takes as long as the
 * slowest rank, so the fraction of the cluster that is busy is mean / max of the ranks' work.
 *
 * The remedy here is a static one: split each global batch so that the ranks' token totals are nearly equal
 * (PyTorch users reach for length-grouped or token-budget samplers; Megatron and DeepSpeed pack sequences).
 * The rule is the classic longest-processing-time-first (LPT) heuristic for scheduling jobs on identical
 * machines:
 *
 *   1. order the batch's samples longest first; samples of equal length keep their order in the batch
 *      (balance_longest_first does this);
 *   2. give each sample, in that order, to the rank with the fewest tokens so far; among ranks with equal
 *      totals the lowest rank wins.
 *
 * Graham (1969): LPT's largest total is at most (4/3 - 1/(3 world)) times the best possible, and like any
 * greedy assignment at most mean + (1 - 1/world) * longest. Ranks may get different numbers of samples; they
 * still take the same number of steps (one per global batch), which is what keeps them in step.
 *
 * Everything depends only on the lengths and the epoch's order, which every rank computes alone from the seed
 * and the epoch (dist_sampler_order): every rank works out the same split without communication. */

/* Part D's rule on one global batch: lengths (g) are the tokens of its samples, in the batch's order;
 * owner (g) gets the rank of each sample, tokens (world) each rank's total. g may be 0 (totals 0). */
void balance_assign(const uint32_t *lengths, size_t g, int world, int *owner, uint64_t *tokens);

/* The sampler's split of the same batch, for comparison: position p to rank p % world (equal counts). */
void balance_assign_strided(size_t g, int world, int *owner);

/* by_length (g) = the positions 0..g-1 ordered longest first, ties by position (step 1 of the rule). */
void balance_longest_first(const uint32_t *lengths, size_t g, size_t *by_length);

/* tokens (world) = the sum of lengths[p] over the positions p that owner[p] gives each rank. */
void balance_rank_tokens(const uint32_t *lengths, const int *owner, size_t g, int world, uint64_t *tokens);

/* The measure: the largest rank's tokens over the mean, >= 1. 1 is perfect balance; 1.5 means the slowest
 * rank has 50% more work than the average, so in a synchronous step the ranks idle a third of the time
 * (1 - 1/1.5). With no tokens at all: 1 (no rank waits). */
double balance_imbalance(const uint64_t *tokens, int world);

/* One epoch. order (n) is the epoch's order of the samples (dist_sampler_order), lengths (n) the tokens of
 * each sample by sample index. The order is cut into global batches of global_batch positions (the last may
 * be shorter) and each is split over the ranks, balanced (balance_assign) or strided. owner (n) gets, for
 * each position p of the order, the rank that takes sample order[p] in step p / global_batch: every sample
 * once an epoch, by exactly one rank. Bad input (n = 0, world < 1, global_batch < 1, an order entry >= n)
 * fills *err and returns false (err NULL: the message, then exit 2). */
bool balance_epoch(const uint32_t *lengths, const uint64_t *order, uint64_t n, int world, uint64_t global_batch,
                   bool balanced, int *owner, data_err *err);

#endif
