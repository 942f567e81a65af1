/* rank_worker.c: the body of the labs' worker programs that train on the ranks mpirun started: parse
 * CONFIG RUN_DIR [key.path=value ...], train quietly with every rank's events in RUN_DIR (trainer_rank_worker). */
#include "train/trainer.h"

#include "comm/comm.h"
#include "train/config.h"

#include <stdio.h>

enum { RANK_WORKER_MAX_SETS = 48 };

int trainer_rank_worker(const char *prog, int argc, char **argv) {
    if (argc < 3 || argc - 3 > RANK_WORKER_MAX_SETS - 1) {
        fprintf(stderr, "usage: %s CONFIG RUN_DIR [key.path=value ...] (at most %d overrides)\n", prog,
                RANK_WORKER_MAX_SETS - 1);
        return 2;
    }
    const char *sets[RANK_WORKER_MAX_SETS];
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
