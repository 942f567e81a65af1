/* cmd_config.c: `mixpar config`: translate DeepSpeed / Megatron-LM / FSDP / Horovod settings; the frameworks table. */
#include "base/error.h"
#include "base/parse.h"
#include "cli/commands.h"
#include "train/translate.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: mixpar config COMMAND [options]   (lab 27)\n"
    "\n"
    "  translate --from deepspeed|megatron|fsdp|horovod FILE [--base CONFIG] [--world N] [-o OUT]\n"
    "        the mixpar config equivalent to another framework's settings (formats: core/train/translate.h):\n"
    "        a DeepSpeed JSON, Megatron-LM's arguments as pasted from a launch script, FSDP's constructor\n"
    "        arguments (name: value lines), Horovod's environment and DistributedOptimizer settings.\n"
    "        The translation is laid over CONFIG (what the file does not say: model, data, steps) and loaded\n"
    "        by the config loader for N ranks (default 1). Prints the loaded config as JSON (to OUT with -o),\n"
    "        and on stderr every setting that did not map, with the reason, and the keys translated but not\n"
    "        yet runnable. Exit 0 when the config loads, 1 when it does not (why is printed), 2 for a bad file.\n"
    "\n"
    "  frameworks [--tsv]\n"
    "        what each framework calls each setting, from the translators' own tables: one row per mixpar key\n"
    "        (or concept mixpar lacks, in parentheses), one column per framework; * marks a setting mixpar\n"
    "        does not have.\n";

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "mixpar config: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n\n%s", usage_text);
    return 2;
}

static int translate(int argc, char **argv) {
    const char *from = NULL, *file = NULL, *base_path = NULL, *out_path = NULL;
    int world = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool has_next = i + 1 < argc;
        if (strcmp(a, "--from") == 0 && has_next) from = argv[++i];
        else if (strcmp(a, "--base") == 0 && has_next) base_path = argv[++i];
        else if (strcmp(a, "-o") == 0 && has_next) out_path = argv[++i];
        else if (strcmp(a, "--world") == 0 && has_next) {
            int64_t w;
            if (!parse_i64(argv[++i], &w) || w < 1 || w > 4096) return usage_error("--world: an integer in [1, 4096], not '%s'", argv[i]);
            world = (int)w;
        } else if (a[0] == '-') return usage_error("unknown option or missing value: '%s'", a);
        else if (!file) file = a;
        else return usage_error("one FILE only: '%s' is a second", a);
    }
    if (!from) return usage_error("%s", "translate needs --from FRAMEWORK");
    if (!file) return usage_error("%s", "translate needs a FILE");
    int f = tr_framework_from_name(from);
    if (f < 0) return usage_error("--from: deepspeed, megatron, fsdp or horovod, not '%s'", from);
    cJSON *base = NULL;
    if (base_path) {
        char *text = tr_read_text(base_path, NULL);
        tr_parse_json_text(text, base_path, &base, NULL);
        free(text);
    }
    tr_result r;
    tr_translate_file((tr_framework)f, file, &r, NULL);
    tr_finish(&r, base, world);
    cJSON_Delete(base);
    char *json = cJSON_Print(r.config);
    MP_ASSERT(json, "out of memory");
    if (out_path) {
        FILE *o = fopen(out_path, "w");
        if (!o || fprintf(o, "%s\n", json) < 0 || fclose(o) != 0) {
            fprintf(stderr, "mixpar config: cannot write '%s'\n", out_path);
            free(json);
            tr_result_free(&r);
            return 2;
        }
    } else {
        printf("%s\n", json);
        fflush(stdout);
    }
    free(json);
    const tr_table *t = tr_table_get((tr_framework)f);
    int unmapped = 0, pending = 0;
    for (int i = 0; i < r.nnotes; i++) {
        if (r.notes[i].kind == TR_NOTE_UNMAPPED) unmapped++;
        else pending++;
    }
    fprintf(stderr, "%s -> mixpar: %d settings mapped, %d not mapped, %d not yet runnable%s%s\n", t->title, r.mapped,
            unmapped, pending, out_path ? "; config written to " : "", out_path ? out_path : "");
    for (int i = 0; i < r.nnotes; i++)
        if (r.notes[i].kind == TR_NOTE_UNMAPPED) fprintf(stderr, "  not mapped: %s: %s\n", r.notes[i].from, r.notes[i].reason);
    for (int i = 0; i < r.nnotes; i++)
        if (r.notes[i].kind == TR_NOTE_NOT_YET_RUNNABLE)
            fprintf(stderr, "  not yet runnable: %s -> %s: %s\n", r.notes[i].from, r.notes[i].to, r.notes[i].reason);
    int rc = 0;
    if (!r.runnable) {
        fprintf(stderr, "the translated config does not load: %s%s\n", r.load_error,
                base_path ? "" : "\n  (a framework's file rarely says everything: give the rest with --base CONFIG)");
        rc = 1;
    } else {
        fprintf(stderr, "the config loads for %d rank%s: mixpar train --config FILE\n", world, world > 1 ? "s" : "");
    }
    tr_result_free(&r);
    return rc;
}

/* One row per mixpar key (or concept), in the order the tables first name it. */
enum { MAX_ROWS = 256, CELL = 160 };
typedef struct {
    const char *to;
    char cell[TR_NFRAMEWORKS][CELL];   /* every name, comma-separated */
    char shown[TR_NFRAMEWORKS][64];    /* the first name, "+N" for the others (the text table) */
} row;

static int frameworks(int argc, char **argv) {
    bool tsv = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--tsv") == 0) tsv = true;
        else return usage_error("frameworks: unknown option '%s'", argv[i]);
    }
    static row rows[MAX_ROWS];
    int nrows = 0, mapped[TR_NFRAMEWORKS] = {0}, missing[TR_NFRAMEWORKS] = {0};
    for (int f = 0; f < TR_NFRAMEWORKS; f++) {
        const tr_table *t = tr_table_get((tr_framework)f);
        for (int i = 0; i < t->nrules; i++) {
            const tr_rule *rule = &t->rules[i];
            int k = 0;
            while (k < nrows && strcmp(rows[k].to, rule->to) != 0) k++;
            if (k == nrows) {
                MP_ASSERT(nrows < MAX_ROWS, "more than %d rows", MAX_ROWS);
                memset(&rows[nrows], 0, sizeof rows[nrows]);
                rows[nrows++].to = rule->to;
            }
            char *cell = rows[k].cell[f];
            size_t used = strlen(cell);
            snprintf(cell + used, CELL - used, "%s%s%s", used ? ", " : "", rule->from,
                     rule->kind == TR_UNSUPPORTED ? "*" : "");
            if (rule->kind == TR_UNSUPPORTED) missing[f]++;
            else mapped[f]++;
        }
    }
    for (int k = 0; k < nrows; k++)
        for (int f = 0; f < TR_NFRAMEWORKS; f++) {
            const char *c = rows[k].cell[f];
            int names = c[0] ? 1 : 0;
            for (const char *p = c; (p = strstr(p, ", ")); p += 2) names++;
            size_t first = strcspn(c, ",");
            if (names <= 1 || tsv) snprintf(rows[k].shown[f], sizeof rows[k].shown[f], "%s", tsv || first < 60 ? c : "?");
            else snprintf(rows[k].shown[f], sizeof rows[k].shown[f], "%.*s +%d", (int)(first < 50 ? first : 50), c, names - 1);
        }
    int width[TR_NFRAMEWORKS + 1] = {strlen("mixpar key (concept)")};
    for (int f = 0; f < TR_NFRAMEWORKS; f++) width[f + 1] = (int)strlen(tr_table_get((tr_framework)f)->title);
    for (int k = 0; k < nrows; k++) {
        if ((int)strlen(rows[k].to) > width[0]) width[0] = (int)strlen(rows[k].to);
        for (int f = 0; f < TR_NFRAMEWORKS; f++)
            if ((int)strlen(rows[k].shown[f]) > width[f + 1]) width[f + 1] = (int)strlen(rows[k].shown[f]);
    }
    const char *sep = tsv ? "\t" : "  ";
    printf("%-*s", tsv ? 0 : width[0], "mixpar key (concept)");
    for (int f = 0; f < TR_NFRAMEWORKS; f++) printf("%s%-*s", sep, tsv ? 0 : width[f + 1], tr_table_get((tr_framework)f)->title);
    printf("\n");
    for (int k = 0; k < nrows; k++) {
        printf("%-*s", tsv ? 0 : width[0], rows[k].to);
        for (int f = 0; f < TR_NFRAMEWORKS; f++)
            printf("%s%-*s", sep, tsv ? 0 : width[f + 1], rows[k].cell[f][0] ? (tsv ? rows[k].cell[f] : rows[k].shown[f]) : "-");
        printf("\n");
    }
    if (!tsv) {
        printf("\n* mixpar has no such setting (mixpar config translate says why); +N: N more names (--tsv lists them)."
               "\nsettings per framework:");
        for (int f = 0; f < TR_NFRAMEWORKS; f++)
            printf("%s %s %d mapped, %d not", f ? ";" : "", tr_table_get((tr_framework)f)->title, mapped[f], missing[f]);
        printf("\n");
    }
    return 0;
}

int cmd_config(int argc, char **argv) {
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fputs(usage_text, argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    if (strcmp(argv[0], "translate") == 0) return translate(argc - 1, argv + 1);
    if (strcmp(argv[0], "frameworks") == 0) return frameworks(argc - 1, argv + 1);
    return usage_error("unknown command '%s'", argv[0]);
}
