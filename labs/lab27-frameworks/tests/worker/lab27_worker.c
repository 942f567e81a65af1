/* lab27_worker.c: the program lab 27's tests and experiment start on N ranks (build/labs/lab27_worker): one
 * real training run of the core's trainer, built from this tree's regions (so a test sees the student's code,
 * where the `mixpar` binary could be one build behind).
 *
 *   lab27_worker CONFIG RUN_DIR [key.path=value ...]
 *     (under mpirun) trains what CONFIG with the overrides describes, quietly, and writes the events of
 *     every rank to RUN_DIR/events.rank<R>.jsonl (core/base/EVENTS.md): the run header (params, plan,
 *     data_parallel), step (loss, grad_norm, comm_bytes, gather_bytes, reduce_bytes, param_hash when
 *     MIXPAR_PARAM_HASH is set), comm, span and mem events. Bad input stops with exit 2, as `mixpar train`. */
#include "comm/comm.h"
#include "train/config.h"
#include "train/trainer.h"

#include <stdio.h>
#include <stdlib.h>

enum { MAX_SETS = 48 };

int main(int argc, char **argv) {
    if (argc < 3 || argc - 3 > MAX_SETS - 1) {
        fprintf(stderr, "usage: lab27_worker CONFIG RUN_DIR [key.path=value ...] (at most %d overrides)\n", MAX_SETS - 1);
        return 2;
    }
    const char *sets[MAX_SETS];
    char run_dir[4200];
    snprintf(run_dir, sizeof run_dir, "train.run_dir=%s", argv[2]);
    int nsets = 0;
    sets[nsets++] = run_dir;
    for (int i = 3; i < argc; i++) sets[nsets++] = argv[i];
    comm_t *world = comm_init(&argc, &argv);
    train_config cfg;
    config_load(argv[1], sets, nsets, comm_size(world), &cfg, NULL);
    trainer_options opt = {.quiet = true, .comm = world};
    trainer_run(&cfg, &opt);
    comm_finalize(world);
    return 0;
}
