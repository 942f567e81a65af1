/* ranks_agree.h: every rank must run the same config; bad input all ranks find alike is said once, by rank 0. */
#ifndef MIXPAR_TRAIN_RANKS_AGREE_H
#define MIXPAR_TRAIN_RANKS_AGREE_H

#include "comm/comm.h"
#include "train/config.h"

/* Compares the resolved config of every rank of comm (a collective: all ranks call it, before anything
 * reads data or builds a model). When they differ, rank 0 names each key that differs with every rank's
 * value, once:
 *     found: config differs across ranks: optimizer.params.lr: rank 0 0.001, rank 1 0.002 (rank(s) 1 differ
 *            from rank 0)
 * and every rank exits 2. comm NULL or one rank: nothing to compare. */
void ranks_check_same_config(const train_config *cfg, comm_t *comm);

/* Stops every rank of comm with exit 2 and one message: rank 0 prints it (base/error.h's layout), the others
 * wait until it has and exit silently, so N ranks do not print N interleaved copies. Every rank must call
 * it (it is a barrier); comm NULL: this process alone. */
_Noreturn void ranks_stop(const char *file, int line, comm_t *comm, const char *expected, const char *hint,
                          const char *found_fmt, ...) __attribute__((format(printf, 6, 7)));
#define RANKS_STOP(comm, expected, hint, ...) ranks_stop(__FILE__, __LINE__, comm, expected, hint, __VA_ARGS__)

#endif
