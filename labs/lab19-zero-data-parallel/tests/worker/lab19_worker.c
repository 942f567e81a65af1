/* lab19_worker.c: the program lab 19's tests and experiment start on N ranks (build/labs/lab19_worker): one
 * real training run of the core's trainer, built from this tree's regions (so a test sees the student's code,
 * where the `mixpar` binary could be one build behind).
 *
 *   lab19_worker CONFIG RUN_DIR [key.path=value ...]
 *     (under mpirun) trains what CONFIG with the overrides describes, quietly, and writes the events of
 *     every rank to RUN_DIR/events.rank<R>.jsonl (core/base/EVENTS.md): the run header (params, plan,
 *     data_parallel), step (loss, grad_norm, comm_bytes, gather_bytes, reduce_bytes, param_hash when
 *     MIXPAR_PARAM_HASH is set), comm, span and mem events. Bad input stops with exit 2, as `mixpar train`. */
#include "train/trainer.h"

int main(int argc, char **argv) { return trainer_rank_worker("lab19_worker", argc, argv); }
