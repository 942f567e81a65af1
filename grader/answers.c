/* answers.c: reading a lab's answers file ("Qn: answer" lines), bounded, and blanking it for the handout. */
#include "answers.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* If line[0, len) is an answer line ("Q3: ...", "  Q2b:..."), its id goes to id (cap >= 8) and the offset of what
 * follows the colon to *after. */
static bool answer_line(const char *line, size_t len, char *id, size_t *after) {
    size_t i = 0, n = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
    if (i >= len || line[i] != 'Q') return false;
    id[n++] = line[i++];
    size_t digits = 0;
    while (i < len && isdigit((unsigned char)line[i]) && digits < 3) id[n++] = line[i++], digits++;
    if (digits == 0 || digits > 2) return false;
    if (i < len && islower((unsigned char)line[i])) id[n++] = line[i++];
    if (i >= len || line[i] != ':') return false;
    id[n] = '\0';
    *after = i + 1;
    return true;
}

/* [start, end) without surrounding blanks and one pair of backticks ("`0.25`"), as a malloc'd string of at most
 * ANSWERS_MAX_ANSWER bytes (*cut when longer). */
static char *trimmed_copy(const char *start, const char *end, bool *cut) {
    while (start < end && isspace((unsigned char)*start)) start++;
    while (end > start && isspace((unsigned char)end[-1])) end--;
    if (end - start >= 2 && *start == '`' && end[-1] == '`') start++, end--;
    size_t n = (size_t)(end - start);
    *cut = n > ANSWERS_MAX_ANSWER;
    if (*cut) n = ANSWERS_MAX_ANSWER;
    char *s = malloc(n + 1);
    if (!s) return NULL;
    if (n) memcpy(s, start, n);
    s[n] = '\0';
    return s;
}

static void append_note(char *notes, size_t cap, const char *fmt, const char *id, int line) {
    size_t used = strlen(notes);
    if (used + 64 < cap) snprintf(notes + used, cap - used, fmt, id, line);
}

void answers_read(const char *text, size_t len, const char *where, const lab_info *info, answer_sheet *out) {
    memset(out, 0, sizeof *out);
    if (!text) {
        snprintf(out->problem, sizeof out->problem, "there is no %s: every question scores 0", where);
        return;
    }
    if (len > ANSWERS_MAX_BYTES) {
        snprintf(out->problem, sizeof out->problem, "%s is %zu bytes, more than the %d an answers file may have: it is "
                 "not read, every question scores 0", where, len, ANSWERS_MAX_BYTES);
        return;
    }
    if (memchr(text, '\0', len)) {
        snprintf(out->problem, sizeof out->problem, "%s is not a text file (it holds NUL bytes): it is not read, every "
                 "question scores 0", where);
        return;
    }
    int lineno = 0;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        lineno++;
        char id[8];
        size_t after;
        if (answer_line(p, (size_t)(stop - p), id, &after)) {
            int q = -1;
            for (int k = 0; k < info->nquestions; k++)
                if (strcmp(info->questions[k].id, id) == 0) q = k;
            if (q < 0) {
                append_note(out->notes, sizeof out->notes, "%s (line %d) is not a question of this lab; ", id, lineno);
            } else if (out->line[q]) {
                if (!out->repeated_at[q]) out->repeated_at[q] = lineno;
            } else {
                bool cut = false;
                out->given[q] = trimmed_copy(p + after, stop, &cut);
                out->too_long[q] = cut;
                out->line[q] = lineno;
            }
        }
        p = nl ? nl + 1 : end;
    }
}

void answers_free(answer_sheet *sheet) {
    for (int k = 0; k < LAB_MAX_QUESTIONS; k++) {
        free(sheet->given[k]);
        sheet->given[k] = NULL;
    }
}

int answers_count(const answer_sheet *sheet, const lab_info *info) {
    int n = 0;
    for (int k = 0; k < info->nquestions; k++) n += sheet->given[k] && sheet->given[k][0];
    return n;
}

char *answers_blank(const char *text) {
    size_t len = strlen(text);
    char *out = malloc(len + 1), *o = out;
    if (!out) return NULL;
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        char id[8];
        size_t after;
        size_t keep = answer_line(p, (size_t)(stop - p), id, &after) ? after : (size_t)(stop - p);
        memcpy(o, p, keep);
        o += keep;
        if (nl) *o++ = '\n';
        p = nl ? nl + 1 : end;
    }
    *o = '\0';
    return out;
}
