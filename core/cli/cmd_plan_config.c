/* cmd_plan_config.c: `mixpar plan --config FILE --world N`: the plan a training run of that config records in its
 * header (trainer_plan), per rank and allocator tag, which the run's mem events are measured against. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/parse.h"
#include "cli/commands.h"
#include "train/trainer.h"

bool plan_args_name_config(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--config") == 0) return true;
    return false;
}

/* What each tag holds, as the run's memory panel and `mixpar report` say it. */
static const char *const tag_meaning[MEM_NTAGS] = {
    [MEM_PARAM] = "working weights (fp32; a shard under ZeRO-3/FSDP)",
    [MEM_GRAD] = "their gradients (fp32; a shard from ZeRO-2 on)",
    [MEM_MASTER] = "fp32 master weights (recipes that keep a copy)",
    [MEM_OPTIM] = "optimizer states (a shard from ZeRO-1 on)",
    [MEM_ACT] = "activations kept for backward, and one layer's fp32 scratch",
    [MEM_COMM] = "gathered units, unreduced gradients, reduce buffers",
    [MEM_OTHER] = "cast cache of the weights for 16-bit matmuls",
    [MEM_HOST] = "host memory (ZeRO-Offload; not in the total)",
};

int cmd_plan_config(int argc, char **argv) {
    const char *config = NULL, *sets[256];
    int nsets = 0;
    int64_t world = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc && (!strcmp(a, "--config") || !strcmp(a, "--world") || !strcmp(a, "--set")))
            mp_usage_error("plan", "%s needs a value", a);
        if (strcmp(a, "--config") == 0) config = argv[++i];
        else if (strcmp(a, "--set") == 0 && nsets < 256) sets[nsets++] = argv[++i];
        else if (strcmp(a, "--world") == 0) {
            const char *v = argv[++i];
            if (!parse_i64(v, &world) || world < 1 || world > 1 << 20)
                mp_usage_error("plan", "--world takes a whole number of ranks from 1, not '%s'", v);
        } else
            mp_usage_error("plan", "with --config, only --world N and --set key=value go (the config is the "
                                   "model and the run), not '%s'", a);
    }
    train_config cfg;
    data_err err;
    plan_result plan;
    if (!trainer_plan_config(config, sets, nsets, (int)world, &cfg, &plan, &err)) data_err_exit(&err);
    printf("plan of one rank of %s on %lld rank%s (what the run header records as \"plan\")\n", config, (long long)world,
           world == 1 ? "" : "s");
    printf("%-7s %16s %10s  %s\n", "tag", "bytes", "GB", "holds");
    for (int t = 0; t < MEM_NTAGS; t++)
        if (plan.bytes[t] || t <= MEM_ACT)
            printf("%-7s %16llu %10.3f  %s\n", mem_tag_name((mem_tag)t), (unsigned long long)plan.bytes[t],
                   (double)plan.bytes[t] / 1e9, tag_meaning[t]);
    printf("%-7s %16llu %10.3f  per rank; x %ld ranks = %.3f GB\n", "total", (unsigned long long)plan.total_bytes,
           (double)plan.total_bytes / 1e9, world, (double)plan.total_bytes * (double)world / 1e9);
    return 0;
}
