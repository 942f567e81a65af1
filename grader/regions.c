/* regions.c: the lab-region scanner, the student-stub rewriter and the submission splicer. */
#include "regions.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Parses one line as a marker. Returns 0 for an ordinary line, 1 for BEGIN, 2 for END, -1 for a line
 * that mentions a marker but is not exactly one (so a typo is caught instead of silently ignored). */
static int parse_marker(const char *line, size_t len, int *lab, char *title, size_t title_cap) {
    char buf[512];
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, line, len);
    buf[len] = '\0';
    char *p = buf;
    while (*p == ' ' || *p == '\t') p++;
    char *end = p + strlen(p);
    while (end > p && isspace((unsigned char)end[-1])) *--end = '\0';
    char *mention = strstr(p, "LAB ");
    if (!mention || !isdigit((unsigned char)mention[4]) || !isdigit((unsigned char)mention[5])) return 0;
    if (strncmp(mention + 6, " BEGIN", 6) != 0 && strncmp(mention + 6, " END", 4) != 0) return 0;
    /* It mentions a marker: from here on it must be exactly one. */
    if (strncmp(p, "/* LAB ", 7) != 0 || end - p < 4 || strcmp(end - 3, " */") != 0) return -1;
    if (!isdigit((unsigned char)p[7]) || !isdigit((unsigned char)p[8])) return -1;
    *lab = (p[7] - '0') * 10 + (p[8] - '0');
    char *rest = p + 9;
    end[-3] = '\0';
    if (strcmp(rest, " END") == 0) return 2;
    if (strncmp(rest, " BEGIN ", 7) == 0 && rest[7]) {
        snprintf(title, title_cap, "%s", rest + 7);
        return 1;
    }
    return -1;
}

bool regions_scan(const char *path, const char *text, region_list *out, char *err, size_t errlen) {
    out->items = NULL;
    out->count = 0;
    int cap = 0, line_no = 0;
    region *open = NULL;
    for (size_t pos = 0; text[pos];) {
        size_t line_start = pos;
        size_t nl = strcspn(text + pos, "\n");
        size_t line_end = pos + nl + (text[pos + nl] == '\n');
        line_no++;
        int lab = 0;
        char title[160] = "";
        int kind = parse_marker(text + line_start, nl, &lab, title, sizeof title);
        if (kind < 0) {
            set_err(err, errlen, "%s:%d: malformed lab marker; write '/* LAB NN BEGIN title */' or '/* LAB NN END */' "
                    "alone on its line", path, line_no);
            goto fail;
        }
        if (kind == 1) {
            if (open) {
                set_err(err, errlen, "%s:%d: LAB %02d BEGIN inside the open region of lab %02d (from line %d); regions "
                        "cannot nest", path, line_no, lab, open->lab, open->begin_line);
                goto fail;
            }
            if (out->count == cap) {
                cap = cap ? 2 * cap : 8;
                out->items = realloc(out->items, (size_t)cap * sizeof *out->items);
            }
            open = &out->items[out->count++];
            memset(open, 0, sizeof *open);
            open->lab = lab;
            snprintf(open->title, sizeof open->title, "%s", title);
            open->begin_line = line_no;
            open->begin_line_start = line_start;
            open->body_start = line_end;
            size_t ind = strspn(text + line_start, " \t");
            if (ind >= sizeof open->indent) ind = sizeof open->indent - 1;
            memcpy(open->indent, text + line_start, ind);
        } else if (kind == 2) {
            if (!open) {
                set_err(err, errlen, "%s:%d: LAB %02d END without a BEGIN before it", path, line_no, lab);
                goto fail;
            }
            if (open->lab != lab) {
                set_err(err, errlen, "%s:%d: LAB %02d END closes the region of lab %02d opened at line %d", path,
                        line_no, lab, open->lab, open->begin_line);
                goto fail;
            }
            open->end_line = line_no;
            open->body_end = line_start;
            open->end_line_end = line_end;
            open = NULL;
        }
        pos = line_end;
    }
    if (open) {
        set_err(err, errlen, "%s:%d: the region of lab %02d opened here never ends (no LAB %02d END)", path,
                open->begin_line, open->lab, open->lab);
        goto fail;
    }
    return true;
fail:
    regions_free(out);
    return false;
}

void regions_free(region_list *list) {
    free(list->items);
    list->items = NULL;
    list->count = 0;
}

/* A growable string. */
typedef struct {
    char *s;
    size_t len, cap;
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

char *regions_stub(const char *text, const region_list *list, int lab, const char *(*handout_for)(int lab)) {
    strbuf b = {0};
    size_t copied = 0;
    for (int i = 0; i < list->count; i++) {
        const region *r = &list->items[i];
        if (lab >= 0 && r->lab != lab) continue;
        sb_add(&b, text + copied, r->body_start - copied);
        const char *handout = handout_for ? handout_for(r->lab) : NULL;
        sb_printf(&b, "%s/* TODO(lab %02d): %s. See %s */\n", r->indent, r->lab, r->title,
                  handout ? handout : "the lab's README.md");
        sb_printf(&b, "%sLAB_TODO(%d);\n", r->indent, r->lab);
        copied = r->body_end;
    }
    sb_add(&b, text + copied, strlen(text + copied));
    return b.s;
}

/* A region body must stay a body: the code between its markers, inside the function the course wrote. Checked on
 * the text as the compiler sees it (backslash-newlines joined, comments, strings and character literals
 * blanked): no preprocessor line (#include, #define: no token pasting, no file read at build time), no asm,
 * attributes or _Pragma, and braces and parentheses that never close more than the body opened. Returns
 * false with "line N: what" in why. */
bool body_stays_a_body(const char *text, size_t len, int first_line, char *why, size_t cap) {
    char *t = malloc(len + 1);
    int *line_of = malloc((len + 1) * sizeof *line_of);
    size_t n = 0;
    int line = first_line;
    for (size_t i = 0; i < len; i++) { /* join backslash-newlines */
        if (text[i] == '\\' && i + 1 < len && text[i + 1] == '\n') {
            i++;
            line++;
            continue;
        }
        if (text[i] == '\\' && i + 2 < len && text[i + 1] == '\r' && text[i + 2] == '\n') {
            i += 2;
            line++;
            continue;
        }
        line_of[n] = line;
        t[n++] = text[i];
        if (text[i] == '\n') line++;
    }
    t[n] = '\0';
    for (size_t i = 0; i < n; i++) { /* blank comments, strings and character literals */
        if (t[i] == '/' && t[i + 1] == '*') {
            size_t j = i + 2;
            while (j + 1 < n && !(t[j] == '*' && t[j + 1] == '/')) j++;
            size_t end = j + 1 < n ? j + 2 : n;
            for (size_t k = i; k < end; k++)
                if (t[k] != '\n') t[k] = ' ';
            i = end - 1;
        } else if (t[i] == '/' && t[i + 1] == '/') {
            while (i < n && t[i] != '\n') t[i++] = ' ';
        } else if (t[i] == '"' || t[i] == '\'') {
            char q = t[i];
            size_t j = i + 1;
            while (j < n && t[j] != q && t[j] != '\n') j += t[j] == '\\' ? 2 : 1;
            for (size_t k = i + 1; k < j && k < n; k++) t[k] = ' ';
            i = j < n ? j : n;
        }
    }
    bool ok = true;
    int depth_brace = 0, depth_paren = 0;
    bool line_start = true;
    static const char *const banned[] = {"asm", "__asm", "__asm__", "__attribute", "__attribute__", "_Pragma",
                                         "__extension__", "__builtin_ia32_vcvtps2ph", NULL};
    for (size_t i = 0; i < n && ok; i++) {
        char c = t[i];
        if (c == '\n') {
            line_start = true;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') continue;
        if (line_start && c == '#') { /* OpenMP pragmas are fine: "#pragma omp ..." */
            size_t j = i + 1;
            while (t[j] == ' ' || t[j] == '\t') j++;
            if (strncmp(t + j, "pragma", 6) == 0) {
                j += 6;
                while (t[j] == ' ' || t[j] == '\t') j++;
                if (strncmp(t + j, "omp", 3) == 0 && (t[j + 3] == ' ' || t[j + 3] == '\t' || t[j + 3] == '\n')) {
                    while (i < n && t[i] != '\n') i++;
                    i--;
                    continue;
                }
            }
        }
        if (line_start && (c == '#' || (c == '%' && t[i + 1] == ':'))) {
            snprintf(why, cap, "line %d: a preprocessor line (#...) in a region (only #pragma omp is allowed); write plain code in the body", line_of[i]);
            ok = false;
            break;
        }
        line_start = false;
        if (c == '{') depth_brace++;
        else if (c == '}' && --depth_brace < 0) {
            snprintf(why, cap, "line %d: this '}' closes the function the region is in; a region's braces must "
                     "balance within it", line_of[i]);
            ok = false;
        } else if (c == '(') depth_paren++;
        else if (c == ')' && --depth_paren < 0) {
            snprintf(why, cap, "line %d: this ')' closes more than the region opened", line_of[i]);
            ok = false;
        } else if (c == '<' && t[i + 1] == '%') {
            snprintf(why, cap, "line %d: digraphs ('<%%', '%%>', '%%:') are not allowed in a region", line_of[i]);
            ok = false;
        } else if (c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) {
            size_t j = i;
            while (j < n && (t[j] == '_' || (t[j] >= 'A' && t[j] <= 'Z') || (t[j] >= 'a' && t[j] <= 'z') ||
                             (t[j] >= '0' && t[j] <= '9')))
                j++;
            for (int k = 0; banned[k]; k++)
                if (j - i == strlen(banned[k]) && strncmp(t + i, banned[k], j - i) == 0) {
                    snprintf(why, cap, "line %d: '%s' is not allowed in a region", line_of[i], banned[k]);
                    ok = false;
                }
            i = j - 1;
        }
    }
    if (ok && (depth_brace != 0 || depth_paren != 0)) {
        snprintf(why, cap, "the region's %s do not balance (a region must be code inside its function)",
                 depth_brace ? "braces" : "parentheses");
        ok = false;
    }
    free(t);
    free(line_of);
    return ok;
}

static bool body_is_stub(const char *text, const region *r) {
    return memmem(text + r->body_start, r->body_end - r->body_start, "LAB_TODO(", 9) != NULL;
}

/* regions_splice, or (only_stubs) only where the clean text's region is still a stub; *replaced counts them. */
static char *splice_regions(const char *path, const char *clean, const region_list *clean_regions, const char *submitted,
                            const region_list *submitted_regions, int lab, bool only_stubs, int *replaced, char *err,
                            size_t errlen) {
    int wanted = 0, have = 0;
    for (int i = 0; i < clean_regions->count; i++) wanted += clean_regions->items[i].lab == lab;
    for (int i = 0; i < submitted_regions->count; i++) have += submitted_regions->items[i].lab == lab;
    if (have != wanted) {
        set_err(err, errlen, "%s: the submission has %d region(s) of lab %02d, the course has %d; keep every "
                "'LAB %02d BEGIN ... END' pair as handed out", path, have, lab, wanted, lab);
        return NULL;
    }
    strbuf b = {0};
    size_t copied = 0;
    int k = 0;
    for (int i = 0; i < clean_regions->count; i++) {
        const region *r = &clean_regions->items[i];
        if (r->lab != lab) continue;
        while (submitted_regions->items[k].lab != lab) k++;
        const region *s = &submitted_regions->items[k++];
        if (only_stubs && !body_is_stub(clean, r)) continue;
        char why[256];
        if (!body_stays_a_body(submitted + s->body_start, s->body_end - s->body_start, s->begin_line + 1, why,
                               sizeof why)) {
            set_err(err, errlen, "%s: region '%s' (line %d): %s", path, s->title, s->begin_line, why);
            free(b.s);
            return NULL;
        }
        sb_add(&b, clean + copied, r->body_start - copied);
        sb_add(&b, submitted + s->body_start, s->body_end - s->body_start);
        copied = r->body_end;
        if (replaced) (*replaced)++;
    }
    sb_add(&b, clean + copied, strlen(clean + copied));
    if (!b.s) sb_add(&b, "", 0);
    return b.s;
}

char *regions_splice(const char *path, const char *clean, const region_list *clean_regions, const char *submitted,
                     const region_list *submitted_regions, int lab, char *err, size_t errlen) {
    return splice_regions(path, clean, clean_regions, submitted, submitted_regions, lab, false, NULL, err, errlen);
}

char *regions_fill_stubs(const char *path, const char *text, const region_list *regions, const char *released,
                         const region_list *released_regions, int lab, int *filled, char *err, size_t errlen) {
    *filled = 0;
    return splice_regions(path, text, regions, released, released_regions, lab, true, filled, err, errlen);
}

bool regions_has_stub(const char *text, const region_list *regions, int lab) {
    for (int i = 0; i < regions->count; i++)
        if (regions->items[i].lab == lab && body_is_stub(text, &regions->items[i])) return true;
    return false;
}

char *read_text_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    strbuf b = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sb_add(&b, buf, n);
    fclose(f);
    if (!b.s) sb_add(&b, "", 0);
    if (len) *len = b.len;
    return b.s;
}

static bool make_parent_dirs(const char *path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    return true;
}

bool write_text_file(const char *path, const char *text) {
    if (!make_parent_dirs(path)) return false;
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    size_t n = strlen(text);
    bool ok = fwrite(text, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}
