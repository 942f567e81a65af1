/* trainer.h: the training loop of `mixpar train`: data, model, steps, evaluation, samples, checkpoints, events. */
#ifndef MIXPAR_TRAIN_TRAINER_H
#define MIXPAR_TRAIN_TRAINER_H

#include "comm/comm.h"
#include "plan/plan.h"
#include "train/config.h"

#include <stdbool.h>

typedef struct {
    const char *resume;  /* a checkpoint to continue from; "auto" = <run_dir>/checkpoint.safetensors; NULL */
    bool quiet;          /* no progress lines (events are still written) */
    comm_t *comm;        /* the ranks to train on together (data parallel); NULL = this process alone */
} trainer_options;

/* What a finished run measured, for callers that compare runs (lab experiments, tests). */
typedef struct {
    long steps_done;
    float first_loss, last_loss;   /* training loss of the first and the last step taken */
    float last_val_loss;           /* the last evaluation's loss; NAN when none ran */
    double seconds;
} trainer_summary;

/* Runs the training the config describes, from scratch or from a checkpoint. With several ranks each takes
 * its share of every global batch (train_batch_size = micro-batch x accumulation x ranks), DDP averages
 * the gradients, rank 0 prints, samples and writes the checkpoint, and every rank writes its own events. The dataset is built on
 * first use (cached under data.dir), the memory a run needs is checked against train.max_memory before
 * anything large is allocated, events go to <run_dir>/events.rank0.jsonl, the checkpoint to
 * <run_dir>/checkpoint.safetensors (atomically replaced). Bad input stops with a message, exit 2.
 * Resuming continues the exact loss sequence of the uninterrupted run, bit for bit. */
trainer_summary trainer_run(train_config *cfg, const trainer_options *opt);

/* The planner's bytes per rank for this run (plan/plan.h), what the run header's "plan" records: fp32
 * weights and gradients (the trainer's, under every autocast recipe), the optimizer's states, the ZeRO
 * stage or FSDP strategy's sharding over its group, the micro-batch's activations as the model stores them, the
 * cast cache (other) and ZeRO-3/FSDP's gathered units and buffers at their worst (comm, plan/gathered.h).
 * mc: completed. */
void trainer_plan(const train_config *cfg, const model_config *mc, plan_result *out);
/* Loads a config file for `world` ranks (with --set overrides) and plans one rank of it: what `mixpar run`'s memory
 * check and `mixpar plan --config` read. False, with *err filled, when the config or its vocabulary cannot be read. */
bool trainer_plan_config(const char *path, const char *const *sets, int nsets, int world, train_config *cfg,
                         plan_result *out, data_err *err);

/* The labs' worker programs on the ranks mpirun started: argv is PROG CONFIG RUN_DIR [key.path=value ...]; trains
 * quietly with every rank's events in RUN_DIR (train/rank_worker.c). Returns the exit code; bad input stops with
 * exit 2 (a usage line naming prog), as `mixpar train`. */
int trainer_rank_worker(const char *prog, int argc, char **argv);

#endif
