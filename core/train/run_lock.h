/* run_lock.h: one job per run directory (a lock every rank holds), and clearing what killed saves left there. */
#ifndef MIXPAR_TRAIN_RUN_LOCK_H
#define MIXPAR_TRAIN_RUN_LOCK_H

/* ---------------------------------------------------------------- the lock
 * Two jobs writing one run directory tear each other's checkpoints: the second one's rank 0 empties
 * checkpoint.sharded.tmp/ while the first one's ranks still write into it, and an index then names shards
 * that are not the ones it hashed. So a job holds <run_dir>/run.lock for its whole life, with flock(2):
 *   1. rank 0 takes it exclusively, without waiting: it fails while any process of another job still holds
 *      it (even a rank whose launcher was killed), and the job stops, exit 2, naming the holders;
 *   2. rank 0 writes its line into the file (pid, machine, rank, start time), then turns its lock into a
 *      shared one (a job that takes the lock in between wins; this one then stops, as in 1);
 *   3. every other rank takes it shared and writes its own line; all agree on the outcome.
 * The kernel drops a lock when its process dies, however it dies: there is never a stale lock to remove.
 * The descriptor is close-on-exec and kept open until the process exits.
 *
 * ---------------------------------------------------------------- stale temporaries
 * A save killed midway leaves its temporary behind (checkpoint.safetensors.tmp.XXXXXX, as big as a
 * checkpoint; checkpoint.sharded.tmp/; after a crash between the fallback's renames, checkpoint.sharded.old/
 * beside a complete checkpoint.sharded/). With the lock held, nobody else writes there, so rank 0 removes
 * them when the run starts and says how many bytes it freed. A checkpoint.sharded.old/ that is the only
 * complete sharded checkpoint is kept: a resume loads it. */

#include <stdbool.h>
#include <stdint.h>

#include "comm/comm.h"
#include "data/data_err.h"

#define RUN_LOCK_FILE "run.lock"

/* Collective over c (NULL: this process alone): creates run_dir when missing and takes its lock as above.
 * Returns true on every rank, or false on every rank with *err filled on rank 0 (on other ranks: "rank 0
 * could not take the lock"); with err NULL, rank 0 prints the message and every rank exits 2. */
bool run_lock_acquire(const char *run_dir, comm_t *c, data_err *err);

/* What run_clear_stale removed. */
typedef struct {
    int files;      /* files removed, those inside removed directories included */
    uint64_t bytes; /* their sizes */
} run_cleared;

/* Removes the stale temporaries of interrupted saves from run_dir (not recursive beyond the checkpoint
 * directories named above). Call it with the lock held, on one rank. Things it cannot remove are
 * reported in *err (false); what it did remove is counted in *out either way. */
bool run_clear_stale(const char *run_dir, run_cleared *out, data_err *err);

#endif
