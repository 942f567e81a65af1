/* ranks_agree.c: the config compared across ranks key by key, and one message for an error every rank finds. */
#include "train/ranks_agree.h"

#include "base/error.h"
#include "base/msgbuf.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ranks_stop(const char *file, int line, comm_t *comm, const char *expected, const char *hint,
                const char *found_fmt, ...) {
    int rank = comm ? comm_rank(comm) : 0;
    if (rank == 0) {
        char found[2048];
        va_list ap;
        va_start(ap, found_fmt);
        vsnprintf(found, sizeof found, found_fmt, ap);
        va_end(ap);
        mp_print_input_error(file, line, expected, hint, "%s", found);
    }
    if (comm && comm_size(comm) > 1) comm_barrier(comm); /* rank 0 has said it: now every rank may stop */
    fflush(stdout);
    exit(EXIT_BAD_INPUT);
}

/* ------------------------------------------------------------------ the config, key by key */

/* The value at a dotted path ("optimizer.params.lr") of a JSON tree, or NULL. */
static const cJSON *value_at(const cJSON *root, const char *path) {
    char key[256];
    const cJSON *at = root;
    while (at && *path) {
        size_t n = strcspn(path, ".");
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        at = cJSON_IsObject(at) ? cJSON_GetObjectItemCaseSensitive(at, key) : NULL;
        path += n + (path[n] == '.');
    }
    return at;
}


/* A value as the message shows it: JSON, numbers and strings as they were written; "(missing)" for none. */
static void append_value(msgbuf *t, const cJSON *v) {
    if (!v) {
        msgbuf_printf(t, "(missing)");
        return;
    }
    char *s = cJSON_PrintUnformatted(v);
    msgbuf_printf(t, "%s", s ? s : "?");
    free(s);
}

/* Every leaf of rank 0's tree (and, for keys rank 0 lacks, of the others'), where some rank's value differs:
 * "path: rank 0 V, rank 1 W; ". */
static void list_differences(const cJSON *node, const char *path, cJSON **trees, int world, msgbuf *out, int *count) {
    if (cJSON_IsObject(node)) {
        for (const cJSON *c = node->child; c; c = c->next) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", c->string);
            list_differences(c, sub, trees, world, out, count);
        }
        return;
    }
    const cJSON *mine = value_at(trees[0], path);
    bool differ = false;
    for (int r = 1; r < world && !differ; r++) {
        const cJSON *theirs = value_at(trees[r], path);
        differ = !mine || !theirs || !cJSON_Compare(mine, theirs, true);
    }
    if (!differ) return;
    msgbuf_printf(out, "%s%s:", *count ? "; " : "", path);
    for (int r = 0; r < world; r++) {
        msgbuf_printf(out, "%s rank %d ", r ? "," : "", r);
        append_value(out, value_at(trees[r], path));
    }
    (*count)++;
}

void ranks_check_same_config(const train_config *cfg, comm_t *comm) {
    if (!comm || comm_size(comm) == 1) return;
    int world = comm_size(comm), rank = comm_rank(comm);
    char *mine = config_dump(cfg);
    int64_t len = (int64_t)strlen(mine) + 1, *lens = malloc((size_t)world * sizeof *lens);
    MP_ASSERT(lens, "out of memory");
    comm_allgather(comm, &len, lens, 1, COMM_INT64, COMM_ALGO_NATIVE);
    int64_t longest = 0;
    for (int r = 0; r < world; r++) longest = lens[r] > longest ? lens[r] : longest;
    size_t words = (size_t)(longest + 3) / 4; /* the texts travel as int32 words, zero-padded */
    int32_t *send = calloc(words, 4), *all = calloc(words * (size_t)world, 4);
    MP_ASSERT(send && all, "out of memory");
    memcpy(send, mine, (size_t)len);
    comm_allgather(comm, send, all, words, COMM_INT32, COMM_ALGO_NATIVE);
    bool same = true;
    for (int r = 1; r < world; r++) same &= memcmp(all + words * (size_t)r, all, words * 4) == 0;
    char found[4096] = "", differ_ranks[256] = "";
    if (!same && rank == 0) {
        cJSON **trees = calloc((size_t)world, sizeof *trees);
        MP_ASSERT(trees, "out of memory");
        for (int r = 0; r < world; r++) trees[r] = cJSON_Parse((const char *)(all + words * (size_t)r));
        msgbuf out = {found, sizeof found, 0};
        msgbuf_printf(&out, "config differs across ranks: ");
        int count = 0;
        list_differences(trees[0], "", trees, world, &out, &count);
        for (int r = 1; r < world; r++) /* keys only another rank has */
            for (const cJSON *c = trees[r] ? trees[r]->child : NULL; c; c = c->next)
                if (!value_at(trees[0], c->string)) list_differences(c, c->string, trees, world, &out, &count);
        size_t used = 0;
        for (int r = 1; r < world && used < sizeof differ_ranks - 16; r++)
            if (memcmp(all + words * (size_t)r, all, words * 4) != 0)
                used += (size_t)snprintf(differ_ranks + used, sizeof differ_ranks - used, "%s%d", used ? ", " : "", r);
        for (int r = 0; r < world; r++) cJSON_Delete(trees[r]);
        free(trees);
    }
    free(mine);
    free(lens);
    free(send);
    free(all);
    if (!same)
        RANKS_STOP(comm, "the same config on every rank (the same file and the same --set overrides)",
                   "start every rank with the same config and --set overrides (mixpar run passes them to all); "
                   "the data (micro-batch, seq_len), the model and the recipe must all match",
                   "%s (rank(s) %s differ from rank 0)", found, differ_ranks);
}
