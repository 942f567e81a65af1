/* translate.c: the translators' plumbing: reading each framework's file, applying rules, loading the result. */
#include "train/translate.h"

#include "base/error.h"
#include "base/lab.h"
#include "train/config.h"
#include "train/translate_tables.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const tr_table *const tables[TR_NFRAMEWORKS] = {
    [TR_DEEPSPEED] = &tr_deepspeed_table,
    [TR_MEGATRON] = &tr_megatron_table,
    [TR_FSDP] = &tr_fsdp_table,
    [TR_HOROVOD] = &tr_horovod_table,
};

const tr_table *tr_table_get(tr_framework f) {
    MP_ASSERT(f >= 0 && f < TR_NFRAMEWORKS, "framework %d", (int)f);
    return tables[f];
}

int tr_framework_from_name(const char *name) {
    for (int f = 0; f < TR_NFRAMEWORKS; f++)
        if (strcmp(name, tables[f]->name) == 0) return f;
    return -1;
}

const tr_rule *tr_find_rule(const tr_table *t, const char *from) {
    for (int i = 0; i < t->nrules; i++)
        if (strcmp(t->rules[i].from, from) == 0) return &t->rules[i];
    return NULL;
}

void tr_add_note(tr_result *r, tr_note_kind kind, const char *from, const char *to, const char *reason) {
    if (r->nnotes == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 16;
        r->notes = realloc(r->notes, (size_t)r->cap * sizeof *r->notes);
        MP_ASSERT(r->notes, "out of memory");
    }
    tr_note *n = &r->notes[r->nnotes++];
    n->kind = kind;
    snprintf(n->from, sizeof n->from, "%s", from);
    snprintf(n->to, sizeof n->to, "%s", to ? to : "");
    snprintf(n->reason, sizeof n->reason, "%s", reason);
}

/* key.path=value into the fragment: config_set (train/config.h) reads the value as JSON, else as a string. */
bool tr_set(tr_result *r, const char *to, const char *value, data_err *err) {
    char assignment[1200];
    snprintf(assignment, sizeof assignment, "%s=%s", to, value);
    return config_set(r->config, assignment, err);
}

/* "none=allreduce,fp16=fp16": the new name of value, or false. */
static bool rename_value(const char *pairs, const char *value, char *out, size_t len) {
    const char *p = pairs;
    size_t vlen = strlen(value);
    while (*p) {
        const char *eq = strchr(p, '='), *comma = strchr(p, ',');
        if (!comma) comma = p + strlen(p);
        if (eq && eq < comma && (size_t)(eq - p) == vlen && strncmp(p, value, vlen) == 0) {
            snprintf(out, len, "%.*s", (int)(comma - eq - 1), eq + 1);
            return true;
        }
        p = *comma ? comma + 1 : comma;
    }
    return false;
}

bool tr_apply(tr_result *r, const tr_rule *rule, const char *from, const char *value, data_err *err) {
    char renamed[128];
    switch (rule->kind) {
    case TR_UNSUPPORTED:
        tr_add_note(r, TR_NOTE_UNMAPPED, from, NULL, rule->note);
        return true;
    case TR_VALUE: r->mapped++; return tr_set(r, rule->to, value, err);
    case TR_FIXED: r->mapped++; return tr_set(r, rule->to, rule->arg, err);
    case TR_RENAME:
        if (!rename_value(rule->arg, value, renamed, sizeof renamed)) {
            char why[256];
            snprintf(why, sizeof why, "the value \"%.40s\" has no mixpar equivalent (known: %s)", value, rule->arg);
            tr_add_note(r, TR_NOTE_UNMAPPED, from, rule->to, why);
            return true;
        }
        r->mapped++;
        return tr_set(r, rule->to, renamed, err);
    case TR_CALL: r->mapped++; return rule->convert(r, rule->to, value, err);
    }
    return true;
}

/* ================================================================ Megatron-LM: argv tokens */

/* Splits a pasted launch script into tokens: blanks and newlines separate, "\" continuations and # comments
 * go, and quotes around a token are removed. tokens point into text (modified). */
static int split_tokens(char *text, char **tokens, int max) {
    int n = 0;
    for (char *p = text; *p;) {
        while (*p && (isspace((unsigned char)*p) || (*p == '\\' && (p[1] == '\n' || p[1] == '\r' || !p[1])))) p++;
        if (*p == '#') {
            while (*p && *p != '\n') p++;
            continue;
        }
        if (!*p) break;
        char quote = (*p == '"' || *p == '\'') ? *p++ : 0;
        char *start = p;
        while (*p && (quote ? *p != quote : !isspace((unsigned char)*p))) p++;
        if (*p) *p++ = '\0';
        if (n < max) tokens[n] = start;
        n++;
    }
    return n;
}

bool tr_megatron_args(tr_result *r, char **tokens, int n, data_err *err) {
    const tr_table *t = tr_table_get(TR_MEGATRON);
    /* LAB 27 BEGIN Megatron-LM: each --argument (with its value unless it is a flag) through the table */
    for (int i = 0; i < n; i++) {
        const char *arg = tokens[i];
        if (strncmp(arg, "--", 2) != 0) { /* the launcher's words: torchrun, pretrain_gpt.py, $GPT_ARGS */
            tr_add_note(r, TR_NOTE_UNMAPPED, arg, NULL, "not a Megatron-LM argument (a launcher word or a variable)");
            continue;
        }
        const tr_rule *rule = tr_find_rule(t, arg);
        if (!rule) {
            /* Unknown: skip its value too, if the next token is one. */
            bool has_value = i + 1 < n && strncmp(tokens[i + 1], "--", 2) != 0;
            tr_add_note(r, TR_NOTE_UNMAPPED, arg, NULL, "no mixpar setting for this Megatron-LM argument");
            if (has_value) i++;
            continue;
        }
        const char *value = NULL;
        if (!rule->flag) {
            if (i + 1 >= n || strncmp(tokens[i + 1], "--", 2) == 0)
                return DATA_ERR(err, "a value after it", "Megatron-LM's arguments are --name value, or --flag alone",
                                "%s (argument %d of %d) has none", arg, i + 1, n);
            value = tokens[++i];
        }
        if (!tr_apply(r, rule, arg, value ? value : "", err)) return false;
    }
    return true;
    /* LAB 27 END */
}

/* ================================================================ DeepSpeed: a JSON tree */

/* The rule for path: the exact one, else the closest one above it (an object's rule covers its keys). */
static const tr_rule *rule_for_path(const tr_table *t, const char *path, bool *exact) {
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s", path);
    *exact = true;
    for (;;) {
        const tr_rule *rule = tr_find_rule(t, prefix);
        if (rule) return rule;
        char *dot = strrchr(prefix, '.');
        if (!dot) return NULL;
        *dot = '\0';
        *exact = false;
    }
}

static bool walk_json(tr_result *r, const tr_table *t, const cJSON *obj, const char *parent, data_err *err) {
    for (const cJSON *it = obj->child; it; it = it->next) {
        char path[512];
        snprintf(path, sizeof path, "%s%s%s", parent, parent[0] ? "." : "", it->string);
        bool exact;
        const tr_rule *rule = rule_for_path(t, path, &exact);
        if (rule && rule->kind != TR_UNSUPPORTED && exact) {
            char *text = cJSON_IsString(it) ? NULL : cJSON_PrintUnformatted(it);
            bool ok = tr_apply(r, rule, path, text ? text : it->valuestring, err);
            free(text);
            if (!ok) return false;
        } else if (cJSON_IsObject(it) && it->child) {
            if (!walk_json(r, t, it, path, err)) return false;
        } else {
            tr_add_note(r, TR_NOTE_UNMAPPED, path, NULL,
                        rule && rule->kind == TR_UNSUPPORTED ? rule->note : "no mixpar setting for this DeepSpeed key");
        }
    }
    return true;
}

bool tr_parse_json_text(const char *text, const char *name, cJSON **out, data_err *err) {
    const char *end = NULL;
    size_t len = strlen(text);
    *out = cJSON_ParseWithLengthOpts(text, len + 1, &end, true);
    if (*out && cJSON_IsObject(*out)) return true;
    size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
    int line = 1, col = 1;
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '\n') line++, col = 1;
        else col++;
    }
    bool object = *out == NULL;
    cJSON_Delete(*out);
    *out = NULL;
    if (!object) return DATA_ERR(err, "a JSON object {...}", NULL, "%s: another JSON value", name);
    return DATA_ERR(err, "valid JSON (no comments, no trailing commas)", NULL,
                    "%s: invalid JSON at line %d, column %d (byte offset %zu)", name, line, col, at);
}

/* ================================================================ FSDP and Horovod: key-value lines */

/* Python spellings as JSON: True -> true, None -> null, torch.bfloat16 -> bfloat16, ShardingStrategy.X -> X. */
static void normalise_value(char *v) {
    static const char *const words[][2] = {{"True", "true"}, {"False", "false"}, {"None", "null"}};
    for (int i = 0; i < 3; i++)
        if (strcmp(v, words[i][0]) == 0) {
            strcpy(v, words[i][1]);
            return;
        }
    const char *dot = strrchr(v, '.');
    if (dot && isalpha((unsigned char)v[0]) && isalpha((unsigned char)dot[1])) memmove(v, dot + 1, strlen(dot + 1) + 1);
    size_t n = strlen(v);
    if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
        memmove(v, v + 1, n - 2);
        v[n - 2] = '\0';
    }
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

static bool apply_pair(tr_result *r, const tr_table *t, const char *key, const char *value, data_err *err) {
    const tr_rule *rule = tr_find_rule(t, key);
    if (!rule) {
        char why[160];
        snprintf(why, sizeof why, "no mixpar setting for this %s setting", t->title);
        tr_add_note(r, TR_NOTE_UNMAPPED, key, NULL, why);
        return true;
    }
    return tr_apply(r, rule, key, value, err);
}

static bool read_lines(tr_result *r, const tr_table *t, char *text, const char *name, data_err *err) {
    int line = 0;
    for (char *p = text; p && *p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        line++;
        char *hash = strchr(p, '#');
        if (hash) *hash = '\0';
        char *s = trim(p);
        if (strncmp(s, "export ", 7) == 0) s = trim(s + 7);
        if (*s) {
            char *sep = strpbrk(s, "=:");
            if (!sep || sep == s)
                return DATA_ERR(err, "name: value or name=value on each line", "# starts a comment",
                                "%s:%d: \"%.60s\"", name, line, s);
            *sep = '\0';
            char *key = trim(s), value[512];
            snprintf(value, sizeof value, "%s", trim(sep + 1));
            if (!value[0])
                return DATA_ERR(err, "a value after the name", NULL, "%s:%d: %s has none", name, line, key);
            normalise_value(value);
            if (!apply_pair(r, t, key, value, err)) return false;
        }
        p = nl ? nl + 1 : NULL;
    }
    return true;
}

/* ================================================================ entry points */

bool tr_translate_text(tr_framework f, const char *text, const char *name, tr_result *r, data_err *err) {
    memset(r, 0, sizeof *r);
    r->framework = f;
    r->config = cJSON_CreateObject();
    MP_ASSERT(r->config, "out of memory");
    const tr_table *t = tr_table_get(f);
    /* What the framework is, whatever the file says: FSDP shards, Horovod fuses. */
    if (f == TR_FSDP) tr_set(r, "fsdp.sharding_strategy", "FULL_SHARD", NULL);
    if (f == TR_HOROVOD) tr_set(r, "communication.fusion", "true", NULL);
    /* Megatron-LM's defaults where mixpar's differ: Adam with decoupled decay 0.01, linear decay, GPT-2's block. */
    static const char *const megatron_defaults[] = {
        "optimizer.type=AdamW", "optimizer.params.weight_decay=0.01", "optimizer.params.betas=[0.9, 0.999]",
        "optimizer.params.eps=1e-8", "scheduler.type=warmup_linear", "model.arch=gpt2"};
    for (int i = 0; f == TR_MEGATRON && i < (int)(sizeof megatron_defaults / sizeof *megatron_defaults); i++)
        config_set(r->config, megatron_defaults[i], NULL);
    char *copy = strdup(text);
    MP_ASSERT(copy, "out of memory");
    bool ok = true;
    const char *first = text;
    while (isspace((unsigned char)*first)) first++;
    if (f == TR_DEEPSPEED || (f == TR_HOROVOD && *first == '{')) {
        cJSON *root = NULL;
        ok = tr_parse_json_text(text, name, &root, err);
        if (ok && f == TR_DEEPSPEED) ok = walk_json(r, t, root, "", err);
        for (const cJSON *it = ok && f == TR_HOROVOD ? root->child : NULL; ok && it; it = it->next) {
            char *v = cJSON_IsString(it) ? strdup(it->valuestring) : cJSON_PrintUnformatted(it);
            ok = apply_pair(r, t, it->string, v, err);
            free(v);
        }
        cJSON_Delete(root);
    } else if (f == TR_MEGATRON) {
        int n = split_tokens(copy, NULL, 0);
        char **tokens = malloc((size_t)(n ? n : 1) * sizeof *tokens);
        MP_ASSERT(tokens, "out of memory");
        free(copy);
        copy = strdup(text);
        split_tokens(copy, tokens, n);
        ok = tr_megatron_args(r, tokens, n, err);
        free(tokens);
    } else {
        ok = read_lines(r, t, copy, name, err);
    }
    free(copy);
    if (!ok) tr_result_free(r);
    return ok;
}

char *tr_read_text(const char *path, data_err *err) {
    FILE *file = fopen(path, "rb");
    if (!file) {
        DATA_ERR(err, "a readable file", NULL, "cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    char *text = malloc(1 << 20);
    MP_ASSERT(text, "out of memory");
    size_t n = fread(text, 1, (1 << 20) - 1, file);
    bool too_big = !feof(file);
    fclose(file);
    text[n] = '\0';
    if (too_big || strlen(text) != n) {
        free(text);
        DATA_ERR(err, "a text file under 1 MiB", NULL, "%s: %s", path, too_big ? "larger" : "holds a NUL byte");
        return NULL;
    }
    return text;
}

bool tr_translate_file(tr_framework f, const char *path, tr_result *r, data_err *err) {
    char *text = tr_read_text(path, err);
    if (!text) return false;
    bool ok = tr_translate_text(f, text, path, r, err);
    free(text);
    return ok;
}

/* Objects merge key by key; anything else in `over` replaces what base has. */
static void merge_into(cJSON *base, const cJSON *over) {
    for (const cJSON *it = over->child; it; it = it->next) {
        cJSON *have = cJSON_GetObjectItemCaseSensitive(base, it->string);
        if (have && cJSON_IsObject(have) && cJSON_IsObject(it)) merge_into(have, it);
        else if (have) cJSON_ReplaceItemInObjectCaseSensitive(base, it->string, cJSON_Duplicate(it, true));
        else cJSON_AddItemToObject(base, it->string, cJSON_Duplicate(it, true));
    }
}

/* Removes key.path from root; false when it is not there. */
static bool remove_path(cJSON *root, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    cJSON *obj = root;
    char *seg = buf;
    for (char *dot; (dot = strchr(seg, '.')); seg = dot + 1) {
        *dot = '\0';
        obj = cJSON_GetObjectItemCaseSensitive(obj, seg);
        if (!cJSON_IsObject(obj)) return false;
    }
    if (!cJSON_GetObjectItemCaseSensitive(obj, seg)) return false;
    cJSON_DeleteItemFromObjectCaseSensitive(obj, seg);
    return true;
}

/* The rule of this result's table whose mixpar key is `to`, for naming the framework's setting. */
static const char *framework_name_of(const tr_result *r, const char *to) {
    const tr_table *t = tr_table_get(r->framework);
    for (int i = 0; i < t->nrules; i++)
        if (t->rules[i].kind != TR_UNSUPPORTED && t->rules[i].to && strcmp(t->rules[i].to, to) == 0) return t->rules[i].from;
    return to;
}

void tr_finish(tr_result *r, const cJSON *base, int world) {
    cJSON *merged = base ? cJSON_Duplicate(base, true) : cJSON_CreateObject();
    MP_ASSERT(merged, "out of memory");
    /* The batch is one rule over three keys (total = micro x accumulation x world): the translation's keys win,
     * and the base keeps only what does not over-determine it. Two or three given: the base's go. One given: the
     * base's micro-batch stays (what a training script fixes) and the key the translation's one would contradict
     * goes: the base's total, or its accumulation when the translation gives the total. */
    static const char *const batch_keys[] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                             "gradient_accumulation_steps"};
    bool gives[3];
    int given = 0;
    for (int i = 0; i < 3; i++) given += gives[i] = cJSON_GetObjectItemCaseSensitive(r->config, batch_keys[i]) != NULL;
    for (int i = 0; i < 3; i++) {
        bool drop = given >= 2 || (given == 1 && (gives[0] ? i == 2 : i == 0));
        if (drop) cJSON_DeleteItemFromObjectCaseSensitive(merged, batch_keys[i]);
    }
    merge_into(merged, r->config);
    /* Load; a key the loader does not know that this translation wrote is not yet runnable: out, and again. */
    for (int tries = 0; tries < 32; tries++) {
        train_config cfg;
        data_err err = {0};
        if (config_parse(merged, world, &cfg, &err)) {
            r->runnable = true;
            r->load_error[0] = '\0';
            /* The resolved config; a run name nobody gave stays out, so `mixpar train` names the run after the file. */
            const cJSON *train = cJSON_GetObjectItemCaseSensitive(merged, "train");
            bool named = cJSON_GetObjectItemCaseSensitive(train, "run_name") != NULL;
            bool placed = cJSON_GetObjectItemCaseSensitive(train, "run_dir") != NULL;
            cJSON_Delete(merged);
            merged = config_to_json(&cfg);
            cJSON *out_train = cJSON_GetObjectItemCaseSensitive(merged, "train");
            if (!named) cJSON_DeleteItemFromObjectCaseSensitive(out_train, "run_name");
            if (!placed) cJSON_DeleteItemFromObjectCaseSensitive(out_train, "run_dir");
            break;
        }
        r->runnable = false;
        snprintf(r->load_error, sizeof r->load_error, "%s (expected %s)", err.found, err.expected);
        char path[256];
        const char *unknown = strstr(err.found, ": unknown key");
        size_t plen = unknown ? (size_t)(unknown - err.found) : 0;
        if (!unknown || plen >= sizeof path) break;
        memcpy(path, err.found, plen);
        path[plen] = '\0';
        cJSON *probe = cJSON_Duplicate(r->config, true);
        bool ours = remove_path(probe, path);
        cJSON_Delete(probe);
        if (!ours) break;
        remove_path(merged, path);
        tr_add_note(r, TR_NOTE_NOT_YET_RUNNABLE, framework_name_of(r, path), path,
                    "translated, but mixpar's config does not accept this key yet");
    }
    cJSON_Delete(r->config);
    r->config = merged;
}

void tr_result_free(tr_result *r) {
    cJSON_Delete(r->config);
    free(r->notes);
    memset(r, 0, sizeof *r);
}
