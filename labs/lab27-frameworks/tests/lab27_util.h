/* lab27_util.h: helpers for the lab 27 tests: a checked fusion plan, the Megatron translation of a token list,
 * and the runs of lab 19's runner (2 ranks, the synthetic-addition model) with fusion on or off. */
#ifndef LAB27_UTIL_H
#define LAB27_UTIL_H

#include "../../lab19-zero-data-parallel/tests/lab19_run.h"
#include "dist/fusion.h"
#include "train/translate.h"

#include <cjson/cJSON.h>

enum { LAB27 = 27, LAB27_MAX_TENSORS = 64 };

/* The plan for sizes[0..n) against the expected buffer of each tensor; `why` explains the expectation. */
#define CHECK_PLAN(sizes, n, threshold, want, why) lab27_check_plan(__FILE__, __LINE__, sizes, n, threshold, want, why)
static inline bool lab27_check_plan(const char *file, int line, const size_t *sizes, int n, size_t threshold,
                                    const int *want, const char *why) {
    int got[LAB27_MAX_TENSORS];
    memset(got, -1, sizeof got);
    int nb = fusion_assign(sizes, n, threshold, got);
    int want_nb = n ? want[n - 1] + 1 : 0;
    bool same = nb == want_nb;
    for (int i = 0; i < n; i++) {
        same = same && got[i] == want[i];
        mpt_observe(file, line, (uint64_t)(got[i] + 1));
    }
    if (same) return true;
    char sz[512] = "", w[256] = "", g[256] = "";
    for (int i = 0; i < n; i++) {
        snprintf(sz + strlen(sz), sizeof sz - strlen(sz), "%s%zu", i ? " " : "", sizes[i]);
        snprintf(w + strlen(w), sizeof w - strlen(w), "%s%d", i ? " " : "", want[i]);
        snprintf(g + strlen(g), sizeof g - strlen(g), "%s%d", i ? " " : "", got[i]);
    }
    mpt_fail(file, line,
             "fusion_assign(sizes {%s}, threshold %zu)\n      expected buffers: %s  (%d buffers; %s)\n"
             "      got:              %s  (returned %d)\n      likely mistake: %s",
             sz, threshold, w, want_nb, why, g, nb,
             "a tensor joins the open buffer when the buffer then holds <= threshold elements (an exact fit joins); "
             "otherwise the buffer is flushed first; a tensor larger than the threshold opens its own buffer and "
             "nothing joins it; return the number of buffers");
    return false;
}

/* The Megatron translator on a NULL-terminated token list; stops the test when it fails. */
static inline void lab27_megatron(tr_result *r, const char *const *args) {
    char *tokens[128];
    int n = 0;
    while (args[n] && n < 128) tokens[n] = (char *)args[n], n++;
    memset(r, 0, sizeof *r);
    r->framework = TR_MEGATRON;
    r->config = cJSON_CreateObject();
    data_err err = {0};
    MPT_REQUIRE(tr_megatron_args(r, tokens, n, &err), "tr_megatron_args failed on valid arguments: %s (expected %s)",
                err.found, err.expected);
}

/* The number at key.path in the translation, NAN when absent. */
static inline double lab27_number(const tr_result *r, const char *path) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *obj = r->config;
    for (char *seg = strtok(buf, "."); seg && obj; seg = strtok(NULL, ".")) obj = cJSON_GetObjectItemCaseSensitive(obj, seg);
    return cJSON_IsNumber(obj) ? obj->valuedouble : cJSON_IsTrue(obj) ? 1 : cJSON_IsFalse(obj) ? 0 : NAN;
}

static inline bool lab27_noted(const tr_result *r, const char *from) {
    for (int i = 0; i < r->nnotes; i++)
        if (strcmp(r->notes[i].from, from) == 0) return true;
    return false;
}

/* Allreduce calls rank 0 made in each step of a run: the same every step; returns step 2's. */
static inline int lab27_allreduces_per_step(const lab19_result *res) {
    const lab19_rank *r0 = &res->rank[0];
    int first = lab19_count_ops(r0, LAB19_ALLREDUCE, 2);
    for (int s = 2; s <= r0->steps; s++)
        MPT_CHECK(lab19_count_ops(r0, LAB19_ALLREDUCE, s) == first, "%s: step %d made %d allreduce calls, step 2 made %d: "
                  "the fusion plan is the same every step", res->what, s, lab19_count_ops(r0, LAB19_ALLREDUCE, s), first);
    return first;
}

#endif
