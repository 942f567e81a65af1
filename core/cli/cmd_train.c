/* cmd_train.c: `mixpar train --config FILE [--set key.path=value ...] [--resume PATH|auto] [--quiet]`. */
#include "base/error.h"
#include "cli/commands.h"
#include "comm/comm.h"
#include "train/run_lock.h"
#include "train/trainer.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: mixpar train --config FILE [--set key.path=value ...] [--resume PATH|auto] [--quiet]\n"
            "\n"
            "Trains the model the config describes (DeepSpeed-style JSON; see configs/README.md) on the CPU.\n"
            "  --config FILE          the run's config, e.g. configs/tiny-poetry.json\n"
            "  --set key.path=value   override one key before the config is read (repeatable), e.g.\n"
            "                         --set optimizer.params.lr=3e-4 --set train.steps=100\n"
            "  --resume PATH|auto     continue from a checkpoint: a file, or a ZeRO run's sharded directory, from\n"
            "                         any world size (auto: <run_dir>/checkpoint.safetensors or checkpoint.sharded/,\n"
            "                         the later); on the same layout the losses continue exactly\n"
            "  --max-memory BYTES     refuse to start a run that needs more (e.g. 24GB); = --set train.max_memory\n"
            "  --quiet                no progress lines (events are still written to <run_dir>)\n"
            "The dataset is built on first use. Events: <run_dir>/events.rank0.jsonl (core/base/EVENTS.md).\n"
            "A job holds <run_dir>/run.lock while it runs: a second job on the same run_dir exits 2 naming the\n"
            "holder's pids. Temporaries that killed saves left in run_dir are removed when a run starts. Token files\n"
            "are checked against the sha256 their dataset's info.json records (once per version of the file).\n");
}

/* Removes the temporaries of interrupted saves (safe: this job holds the run directory's lock) and says so. */
static void report_stale(const char *run_dir) {
    run_cleared cleared;
    data_err err;
    bool ok = run_clear_stale(run_dir, &cleared, &err);
    if (cleared.files)
        printf("run: removed %d stale temporary file%s of interrupted saves from %s (%llu bytes, %.1f MB)\n",
               cleared.files, cleared.files == 1 ? "" : "s", run_dir, (unsigned long long)cleared.bytes,
               cleared.bytes / 1e6);
    if (!ok) {
        char line[1200];
        fprintf(stderr, "mixpar: warning: a stale temporary was left in %s: %s\n", run_dir,
                data_err_line(&err, line, sizeof line));
    }
    fflush(stdout);
}

int cmd_train(int argc, char **argv) {
    const char *config = NULL, *resume = NULL, *sets[65]; /* 64 --set, and --max-memory */
    char max_memory[96];
    int nsets = 0;
    bool quiet = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = true;
        } else if (strcmp(a, "--max-memory") == 0) {
            if (i + 1 >= argc) mp_usage_error("train", "--max-memory needs a size such as 24GB");
            snprintf(max_memory, sizeof max_memory, "train.max_memory=\"%s\"", argv[++i]);
            sets[nsets++] = max_memory;
        } else if ((strcmp(a, "--config") == 0 || strcmp(a, "--set") == 0 || strcmp(a, "--resume") == 0)) {
            if (i + 1 >= argc) mp_usage_error("train", "%s needs a value", a);
            const char *v = argv[++i];
            if (a[2] == 'c') config = v;
            else if (a[2] == 'r') resume = v;
            else if (nsets >= 64) mp_usage_error("train", "at most 64 --set overrides");
            else sets[nsets++] = v;
        } else {
            mp_usage_error("train", "unknown argument '%s'", a);
        }
    }
    if (!config) mp_usage_error("train", "--config FILE is required (for example configs/tiny-poetry.json)");
    /* Under mpirun (or mixpar run) this is one of several ranks; alone it is the only one. */
    comm_t *world = comm_init(&argc, &argv);
    train_config cfg;
    config_load(config, sets, nsets, comm_size(world), &cfg, NULL);
    /* One job per run directory, for the job's whole life (train/run_lock.h); then what killed saves left. */
    run_lock_acquire(cfg.train.run_dir, world, NULL);
    if (comm_rank(world) == 0) report_stale(cfg.train.run_dir);
    trainer_options opt = {.resume = resume, .quiet = quiet, .comm = world};
    trainer_run(&cfg, &opt);
    comm_finalize(world);
    return 0;
}
