/* labinfo.c: reading lab.json and the hidden tests' tests.json with cJSON, checking every key. */
#include "labinfo.h"
#include "regions.h"

#include "course/answer.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int lab_numbers(const char *root, int *nums, int max) {
    char path[4096];
    snprintf(path, sizeof path, "%s/labs", root);
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        const char *s = e->d_name;
        if (strncmp(s, "lab", 3) == 0 && s[3] >= '0' && s[3] <= '9' && s[4] >= '0' && s[4] <= '9' && s[5] == '-')
            nums[n++] = (s[3] - '0') * 10 + (s[4] - '0');
    }
    closedir(d);
    qsort(nums, (size_t)n, sizeof *nums, cmp_int);
    return n;
}

bool lab_dir(const char *root, int lab, char *out, size_t outlen) {
    char path[4096], prefix[16];
    snprintf(path, sizeof path, "%s/labs", root);
    snprintf(prefix, sizeof prefix, "lab%02d-", lab);
    DIR *d = opendir(path);
    if (!d) return false;
    bool found = false;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, prefix, 6) == 0) {
            snprintf(out, outlen, "labs/%s", e->d_name);
            found = true;
            break;
        }
    closedir(d);
    return found;
}

static cJSON *load_json(const char *path, char *err, size_t errlen) {
    char *text = read_text_file(path, NULL);
    if (!text) {
        set_err(err, errlen, "cannot read %s", path);
        return NULL;
    }
    cJSON *json = cJSON_Parse(text);
    if (!json) {
        const char *at = cJSON_GetErrorPtr();
        set_err(err, errlen, "%s: invalid JSON near byte %ld", path, at ? (long)(at - text) : -1L);
    }
    free(text);
    return json;
}

static bool read_tests(const char *path, const cJSON *array, bool hidden, double default_limit, lab_info *out,
                       char *err, size_t errlen) {
    if (!cJSON_IsArray(array)) {
        set_err(err, errlen, "%s: key 'tests' must be an array", path);
        return false;
    }
    int i = 0;
    for (const cJSON *t = array->child; t; t = t->next, i++) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        const cJSON *points = cJSON_GetObjectItemCaseSensitive(t, "points");
        const cJSON *part = cJSON_GetObjectItemCaseSensitive(t, "part");
        const cJSON *limit = cJSON_GetObjectItemCaseSensitive(t, "time_limit_s");
        if (!cJSON_IsString(name) || strlen(name->valuestring) >= 128 || !cJSON_IsNumber(points) ||
            points->valuedouble < 0) {
            set_err(err, errlen, "%s: tests[%d] needs a 'name' (string) and 'points' (number >= 0)", path, i);
            return false;
        }
        out->tests = realloc(out->tests, (size_t)(out->ntests + 1) * sizeof *out->tests);
        lab_test *lt = &out->tests[out->ntests++];
        memset(lt, 0, sizeof *lt);
        snprintf(lt->name, sizeof lt->name, "%s", name->valuestring);
        lt->points = points->valuedouble;
        snprintf(lt->part, sizeof lt->part, "%s", cJSON_IsString(part) ? part->valuestring : "");
        lt->time_limit_s = cJSON_IsNumber(limit) && limit->valuedouble > 0 ? limit->valuedouble : default_limit;
        lt->hidden = hidden;
        for (int j = 0; j < out->ntests - 1; j++)
            if (strcmp(out->tests[j].name, lt->name) == 0) {
                set_err(err, errlen, "%s: test '%s' is listed twice", path, lt->name);
                return false;
            }
    }
    return true;
}

/* "Q1", "Q12", "Q2b": a Q, one or two digits, at most one lower-case letter. */
static bool question_id_ok(const char *id) {
    size_t n = strlen(id), digits = 0;
    while (1 + digits < n && isdigit((unsigned char)id[1 + digits])) digits++;
    return id[0] == 'Q' && digits >= 1 && digits <= 2 &&
           (n == 1 + digits || (n == 2 + digits && islower((unsigned char)id[n - 1])));
}

/* lab.json "questions": [{"id", "kind", "points", "rel", "abs", "from_test", "seed"}, ...] (labinfo.h). */
static bool read_questions(const char *path, const cJSON *array, lab_info *out, char *err, size_t errlen) {
    if (!array) return true;
    if (!cJSON_IsArray(array)) {
        set_err(err, errlen, "%s: key 'questions' must be an array", path);
        return false;
    }
    int i = 0;
    for (const cJSON *q = array->child; q; q = q->next, i++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(q, "id");
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(q, "kind");
        const cJSON *points = cJSON_GetObjectItemCaseSensitive(q, "points");
        const cJSON *rel = cJSON_GetObjectItemCaseSensitive(q, "rel");
        const cJSON *abs_tol = cJSON_GetObjectItemCaseSensitive(q, "abs");
        const cJSON *from = cJSON_GetObjectItemCaseSensitive(q, "from_test");
        const cJSON *seed = cJSON_GetObjectItemCaseSensitive(q, "seed");
        const cJSON *which = cJSON_GetObjectItemCaseSensitive(q, "observation");
        quiz_kind k;
        if (out->nquestions == LAB_MAX_QUESTIONS || !cJSON_IsString(id) || !question_id_ok(id->valuestring) ||
            !cJSON_IsString(kind) || !quiz_kind_from_name(kind->valuestring, &k) || !cJSON_IsNumber(points) ||
            points->valuedouble < 0 || (k == QUIZ_TEXT && points->valuedouble != 0)) {
            set_err(err, errlen, "%s: questions[%d] needs an 'id' (\"Q1\", \"Q2b\"), a 'kind' (number, choice or text) and "
                    "'points' (>= 0; 0 for text, which is read, not scored); at most %d questions", path, i,
                    LAB_MAX_QUESTIONS);
            return false;
        }
        if ((rel && (!cJSON_IsNumber(rel) || rel->valuedouble < 0)) ||
            (abs_tol && (!cJSON_IsNumber(abs_tol) || abs_tol->valuedouble < 0)) ||
            (from && (!cJSON_IsString(from) || k != QUIZ_NUMBER || strlen(from->valuestring) >= 128)) ||
            (seed && (!cJSON_IsNumber(seed) || seed->valuedouble < 0 || seed->valuedouble > 1e15 || !from)) ||
            (which && (!cJSON_IsNumber(which) || which->valuedouble < 0 || which->valuedouble > 1000 || !from))) {
            set_err(err, errlen, "%s: questions[%d] (%s): 'rel' and 'abs' are tolerances >= 0; 'from_test' (a number "
                    "question only) names a test of the lab, 'seed' its seed, 'observation' which of its near "
                    "observations (from 0)", path, i, id->valuestring);
            return false;
        }
        lab_question *lq = &out->questions[out->nquestions++];
        memset(lq, 0, sizeof *lq);
        snprintf(lq->id, sizeof lq->id, "%s", id->valuestring);
        lq->kind = k;
        lq->points = points->valuedouble;
        lq->rel_tol = rel ? rel->valuedouble : 0;
        lq->abs_tol = abs_tol ? abs_tol->valuedouble : 0;
        if (from) snprintf(lq->from_test, sizeof lq->from_test, "%s", from->valuestring);
        snprintf(lq->seed, sizeof lq->seed, "%.0f", seed ? seed->valuedouble : 1.0);
        lq->observation = which ? (int)which->valuedouble : 0;
        for (int j = 0; j < out->nquestions - 1; j++)
            if (strcmp(out->questions[j].id, lq->id) == 0) {
                set_err(err, errlen, "%s: question '%s' is listed twice", path, lq->id);
                return false;
            }
    }
    return true;
}

/* Hidden tests join the visible ones of their part, so each part is reported once, in the order
 * parts first appear (a stable reordering: tests keep their order within a part). */
static void group_by_part(lab_info *info) {
    lab_test *sorted = malloc((size_t)info->ntests * sizeof *sorted);
    bool *taken = calloc((size_t)info->ntests, sizeof *taken);
    int n = 0;
    for (int i = 0; i < info->ntests; i++) {
        if (taken[i]) continue;
        for (int j = i; j < info->ntests; j++)
            if (!taken[j] && strcmp(info->tests[j].part, info->tests[i].part) == 0) {
                sorted[n++] = info->tests[j];
                taken[j] = true;
            }
    }
    memcpy(info->tests, sorted, (size_t)n * sizeof *sorted);
    free(sorted);
    free(taken);
}

bool lab_load(const char *root, int lab, lab_info *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->lab = lab;
    if (!lab_dir(root, lab, out->dir, sizeof out->dir)) {
        set_err(err, errlen, "there is no lab %02d (no labs/lab%02d-* folder)", lab, lab);
        return false;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/lab.json", root, out->dir);
    cJSON *json = load_json(path, err, errlen);
    if (!json) return false;
    bool ok = false;
    const cJSON *number = cJSON_GetObjectItemCaseSensitive(json, "lab");
    const cJSON *title = cJSON_GetObjectItemCaseSensitive(json, "title");
    const cJSON *title_zh = cJSON_GetObjectItemCaseSensitive(json, "title_zh");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(json, "files");
    const cJSON *limit = cJSON_GetObjectItemCaseSensitive(json, "time_limit_s");
    const cJSON *memory = cJSON_GetObjectItemCaseSensitive(json, "memory_limit_mb");
    if (!cJSON_IsNumber(number) || number->valueint != lab) {
        set_err(err, errlen, "%s: key 'lab' must be %d", path, lab);
        goto done;
    }
    if (!cJSON_IsString(title) || !cJSON_IsArray(files)) {
        set_err(err, errlen, "%s: keys 'title' (string) and 'files' (array) are required", path);
        goto done;
    }
    snprintf(out->title, sizeof out->title, "%s", title->valuestring);
    snprintf(out->title_zh, sizeof out->title_zh, "%s", cJSON_IsString(title_zh) ? title_zh->valuestring : "");
    for (const cJSON *f = files->child; f; f = f->next) {
        if (!cJSON_IsString(f) || out->nfiles == 16) {
            set_err(err, errlen, "%s: 'files' must be at most 16 strings", path);
            goto done;
        }
        snprintf(out->files[out->nfiles++], sizeof out->files[0], "%s", f->valuestring);
    }
    const cJSON *forbidden = cJSON_GetObjectItemCaseSensitive(json, "forbidden");
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(json, "forbidden_why");
    for (const cJSON *f = cJSON_IsArray(forbidden) ? forbidden->child : NULL; f; f = f->next) {
        if (!cJSON_IsString(f) || strlen(f->valuestring) >= 64 || out->nforbidden == 32) {
            set_err(err, errlen, "%s: 'forbidden' must be at most 32 identifiers", path);
            goto done;
        }
        snprintf(out->forbidden[out->nforbidden++], sizeof out->forbidden[0], "%s", f->valuestring);
    }
    snprintf(out->forbidden_why, sizeof out->forbidden_why, "%s", cJSON_IsString(why) ? why->valuestring : "");
    const cJSON *instructions = cJSON_GetObjectItemCaseSensitive(json, "forbidden_instructions");
    for (const cJSON *f = cJSON_IsArray(instructions) ? instructions->child : NULL; f; f = f->next) {
        if (!cJSON_IsString(f) || strlen(f->valuestring) >= sizeof out->forbidden_instructions[0] ||
            out->nforbidden_instructions == 16) {
            set_err(err, errlen, "%s: 'forbidden_instructions' must list at most 16 short mnemonics", path);
            goto done;
        }
        snprintf(out->forbidden_instructions[out->nforbidden_instructions++], sizeof out->forbidden_instructions[0],
                 "%s", f->valuestring);
    }
    /* "requires": earlier labs whose regions the tests run (a lab that trains a real model needs the
     * backward passes of lab 2, ...). The grader says so when those are still stubs. */
    const cJSON *requires = cJSON_GetObjectItemCaseSensitive(json, "requires");
    for (const cJSON *r = cJSON_IsArray(requires) ? requires->child : NULL; r; r = r->next) {
        if (!cJSON_IsNumber(r) || r->valuedouble < 1 || r->valuedouble >= lab || r->valuedouble != (int)r->valuedouble ||
            out->nrequires == 16) {
            set_err(err, errlen, "%s: 'requires' must list at most 16 earlier lab numbers", path);
            goto done;
        }
        out->requires[out->nrequires++] = (int)r->valuedouble;
    }
    /* "hours": the time a student should plan for the lab, shown in the student edition's lab table. */
    const cJSON *hours = cJSON_GetObjectItemCaseSensitive(json, "hours");
    if (hours && (!cJSON_IsNumber(hours) || hours->valuedouble <= 0 || hours->valuedouble > 40)) {
        set_err(err, errlen, "%s: 'hours' must be a number of hours from 0.5 to 40", path);
        goto done;
    }
    out->hours = hours ? hours->valuedouble : 0;
    out->time_limit_s = cJSON_IsNumber(limit) && limit->valuedouble > 0 ? limit->valuedouble : 10.0;
    const cJSON *cap = cJSON_GetObjectItemCaseSensitive(json, "submission_limit_s");
    out->submission_limit_s = cJSON_IsNumber(cap) && cap->valuedouble > 0 ? cap->valuedouble : 0;
    const cJSON *vis = cJSON_GetObjectItemCaseSensitive(json, "hidden_visibility");
    static const char *const visibilities[] = {"hidden", "after_due_date", "after_published", NULL};
    snprintf(out->hidden_visibility, sizeof out->hidden_visibility, "hidden");
    if (vis) {
        bool known = false;
        for (int i = 0; visibilities[i]; i++) known |= cJSON_IsString(vis) && strcmp(vis->valuestring, visibilities[i]) == 0;
        if (!known) {
            set_err(err, errlen, "%s: 'hidden_visibility' must be \"hidden\", \"after_due_date\" or \"after_published\"", path);
            goto done;
        }
        snprintf(out->hidden_visibility, sizeof out->hidden_visibility, "%s", vis->valuestring);
    }
    out->memory_limit_mb = cJSON_IsNumber(memory) && memory->valuedouble > 0 ? (long)memory->valuedouble : 1024;
    if (!read_tests(path, cJSON_GetObjectItemCaseSensitive(json, "tests"), false, out->time_limit_s, out, err, errlen))
        goto done;
    if (!read_questions(path, cJSON_GetObjectItemCaseSensitive(json, "questions"), out, err, errlen)) goto done;
    ok = true;
done:
    cJSON_Delete(json);
    if (!ok) return false;
    /* Hidden tests exist only in the instructor's edition. */
    snprintf(path, sizeof path, "%s/grader/hidden/lab%02d/tests.json", root, lab);
    FILE *probe = fopen(path, "r");
    if (!probe) return true;
    fclose(probe);
    json = load_json(path, err, errlen);
    if (!json) return false;
    ok = read_tests(path, cJSON_GetObjectItemCaseSensitive(json, "tests"), true, out->time_limit_s, out, err, errlen);
    cJSON_Delete(json);
    if (ok) group_by_part(out);
    return ok;
}

void lab_free(lab_info *info) {
    free(info->tests);
    info->tests = NULL;
    info->ntests = 0;
}
