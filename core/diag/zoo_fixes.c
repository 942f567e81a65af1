/* zoo_fixes.c: the bug zoo's config bugs and, in the lab 24 region, their fixes (config overrides). */
#include "diag/zoo_fixes.h"

#include "base/lab.h"

#include <string.h>

/* Each bug: the overrides on top of configs/synthetic-addition.json that reproduce it (the zoo's run.sh uses the
 * same list through `mixpar doctor --zoo BUG`). */
static const zoo_bug bugs[] = {
    {"fp16-lr-too-high", {"precision.recipe=fp16", "optimizer.params.lr=10", "gradient_clipping=0"}},
    {"scale-stuck-at-minimum", {"fp16.enabled=true", "fp16.loss_scale=1e9"}},
    {"bf16-no-master-weights", {"precision.recipe=bf16-pure", "precision.stochastic_rounding=false",
                                "optimizer.params.lr=1e-5", "optimizer.params.weight_decay=0", "scheduler.type=constant"}},
    {"loss-spike-no-warmup", {"optimizer.params.lr=0.3", "scheduler.params.warmup_steps=0", "gradient_clipping=0"}},
    {"oom-at-launch", {"train_micro_batch_size_per_gpu=128", "train.max_memory=32MB"}},
    {"silent-skipped-run", {"fp16.enabled=true", "fp16.loss_scale=1e9", "train.max_consecutive_skips=0"}},
};

const zoo_bug *zoo_config_bugs(int *count) {
    *count = (int)(sizeof bugs / sizeof bugs[0]);
    return bugs;
}

const zoo_bug *zoo_config_bug(const char *bug) {
    for (size_t i = 0; i < sizeof bugs / sizeof bugs[0]; i++)
        if (!strcmp(bugs[i].bug, bug)) return &bugs[i];
    return NULL;
}

int zoo_fix_overrides(const char *bug, const char *fix[ZOO_MAX_OVERRIDES + 1]) {
    if (!zoo_config_bug(bug)) return -1;
    memset(fix, 0, (ZOO_MAX_OVERRIDES + 1) * sizeof *fix);
    /* LAB 24 BEGIN the zoo's fixes: for each config bug, the overrides that repair it */
    /* Each fix changes the cause, not the symptom: raising train.max_consecutive_skips would only let a broken
     * run go on failing. */
    static const struct {
        const char *bug;
        const char *fix[ZOO_MAX_OVERRIDES];
    } fixes[] = {
        /* an lr 1000x too high: fp16 overflows in forward, the scaler backs off to its floor and stays there */
        {"fp16-lr-too-high", {"optimizer.params.lr=3e-3", "gradient_clipping=1"}},
        /* a static scale of 1e9 makes every scaled gradient inf: let the scaler find the scale */
        {"scale-stuck-at-minimum", {"fp16.loss_scale=0"}},
        /* bf16 weights round away updates under half an ulp: keep fp32 master weights */
        {"bf16-no-master-weights", {"precision.recipe=bf16"}},
        /* lr 0.3 from step 1 with no clipping: a smaller peak, warmed up, and the gradient norm clipped */
        {"loss-spike-no-warmup", {"scheduler.params.warmup_steps=30", "gradient_clipping=1", "optimizer.params.lr=3e-3"}},
        /* activations of 128 sequences do not fit: the same global batch in micro-batches of 32 */
        {"oom-at-launch", {"train_micro_batch_size_per_gpu=32", "gradient_accumulation_steps=4"}},
        /* every step skipped and nothing stops the run: the dynamic scaler, and the stop after 32 skips back */
        {"silent-skipped-run", {"fp16.loss_scale=0", "train.max_consecutive_skips=32"}},
    };
    for (size_t i = 0; i < sizeof fixes / sizeof fixes[0]; i++) {
        if (strcmp(fixes[i].bug, bug)) continue;
        int n = 0;
        while (n < ZOO_MAX_OVERRIDES && fixes[i].fix[n]) {
            fix[n] = fixes[i].fix[n];
            n++;
        }
        return n;
    }
    return 0;
    /* LAB 24 END */
}
