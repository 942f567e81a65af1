/* events.c: JSON-lines event writer with a growable line buffer and one write(2) per line. */
#include "base/events.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ev_writer {
    int fd;
    int rank;
    char path[4096];
    char *line;       /* the line being built */
    size_t len, cap;
    bool need_comma;  /* inside an object, after its first member */
    int depth;        /* nesting depth of the line being built; 0 when no line is open */
};

static void put(ev_writer *w, const char *s, size_t n) {
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (w->len + n + 1 > cap) cap *= 2;
        char *grown = realloc(w->line, cap);
        MP_ASSERT(grown, "out of memory growing an event line to %zu bytes", cap);
        w->line = grown;
        w->cap = cap;
    }
    memcpy(w->line + w->len, s, n);
    w->len += n;
}

static void puts_(ev_writer *w, const char *s) { put(w, s, strlen(s)); }

static void putf(ev_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(ev_writer *w, const char *fmt, ...) {
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    put(w, buf, (size_t)n);
}

/* JSON string with the escapes RFC 8259 requires; other bytes (UTF-8) pass through. */
static void put_string(ev_writer *w, const char *s) {
    puts_(w, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            put(w, esc, 2);
        } else if (*p == '\n') {
            puts_(w, "\\n");
        } else if (*p == '\t') {
            puts_(w, "\\t");
        } else if (*p < 0x20) {
            putf(w, "\\u%04x", *p);
        } else {
            put(w, (const char *)p, 1);
        }
    }
    puts_(w, "\"");
}

static void put_key(ev_writer *w, const char *key) {
    MP_ASSERT(w->depth > 0, "event field '%s' written outside ev_begin/ev_end", key);
    if (w->need_comma) puts_(w, ",");
    put_string(w, key);
    puts_(w, ":");
    w->need_comma = true;
}

static void put_number(ev_writer *w, double v) {
    if (isnan(v)) puts_(w, "\"nan\"");
    else if (isinf(v)) puts_(w, v > 0 ? "\"inf\"" : "\"-inf\"");
    else if (v == floor(v) && fabs(v) < 1e15) putf(w, "%.0f", v);
    else putf(w, fabs(v) >= 1e6 ? "%.17g" : "%.9g", v); /* 9 digits hold any float; wall times need 17 */
}

static void make_dirs(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        MP_FAIL("a run directory path shorter than 4096 bytes", "a path of %zu bytes", strlen(dir));
    for (char *p = path + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                MP_FAIL_HINT("a run directory that can be created", "check the path and its permissions",
                             "cannot create '%s': %s", path, strerror(errno));
            *p = saved;
            if (!saved) break;
        }
    }
}

static ev_writer *open_writer(const char *run_dir, int rank, int truncate) {
    make_dirs(run_dir);
    ev_writer *w = calloc(1, sizeof *w);
    MP_ASSERT(w, "out of memory");
    w->rank = rank;
    snprintf(w->path, sizeof w->path, "%s/events.rank%d.jsonl", run_dir, rank);
    w->fd = open(w->path, O_WRONLY | O_CREAT | truncate | O_APPEND | O_CLOEXEC, 0644);
    if (w->fd < 0)
        MP_FAIL("a writable event file", "cannot open '%s': %s", w->path, strerror(errno));
    return w;
}

ev_writer *ev_open(const char *run_dir, int rank) { return open_writer(run_dir, rank, O_TRUNC); }
ev_writer *ev_open_append(const char *run_dir, int rank) { return open_writer(run_dir, rank, 0); }

void ev_close(ev_writer *w) {
    if (!w) return;
    MP_ASSERT(w->depth == 0, "ev_close with an event line still open");
    close(w->fd);
    free(w->line);
    free(w);
}

const char *ev_path(const ev_writer *w) { return w->path; }

void ev_begin(ev_writer *w, const char *kind) {
    MP_ASSERT(w->depth == 0, "ev_begin('%s') while another event line is open", kind);
    w->len = 0;
    w->depth = 1;
    w->need_comma = false;
    puts_(w, "{");
    ev_int(w, "v", EVENTS_SCHEMA_VERSION);
    ev_str(w, "kind", kind);
    ev_int(w, "rank", w->rank);
    ev_num(w, "t", mp_elapsed());
}

void ev_int(ev_writer *w, const char *key, long long value) {
    put_key(w, key);
    putf(w, "%lld", value);
}

void ev_num(ev_writer *w, const char *key, double value) {
    put_key(w, key);
    put_number(w, value);
}

void ev_str(ev_writer *w, const char *key, const char *value) {
    put_key(w, key);
    put_string(w, value ? value : "");
}

void ev_bool(ev_writer *w, const char *key, bool value) {
    put_key(w, key);
    puts_(w, value ? "true" : "false");
}

void ev_ints(ev_writer *w, const char *key, const long long *values, size_t n) {
    put_key(w, key);
    puts_(w, "[");
    for (size_t i = 0; i < n; i++) putf(w, i ? ",%lld" : "%lld", values[i]);
    puts_(w, "]");
}

void ev_nums(ev_writer *w, const char *key, const double *values, size_t n) {
    put_key(w, key);
    puts_(w, "[");
    for (size_t i = 0; i < n; i++) {
        if (i) puts_(w, ",");
        put_number(w, values[i]);
    }
    puts_(w, "]");
}

void ev_json(ev_writer *w, const char *key, const char *json) {
    put_key(w, key);
    /* One event is one line: a newline inside the value (pretty-printed JSON) would split it. */
    for (const char *p = json; *p; p++) put(w, *p == '\n' ? " " : p, 1);
}

void ev_object_begin(ev_writer *w, const char *key) {
    put_key(w, key);
    puts_(w, "{");
    w->need_comma = false;
    w->depth++;
}

void ev_object_end(ev_writer *w) {
    MP_ASSERT(w->depth > 1, "ev_object_end without ev_object_begin");
    puts_(w, "}");
    w->depth--;
    w->need_comma = true;
}

void ev_end(ev_writer *w) {
    MP_ASSERT(w->depth == 1, "ev_end with %d nested objects still open", w->depth - 1);
    puts_(w, "}\n");
    w->depth = 0;
    size_t off = 0;
    while (off < w->len) {
        ssize_t n = write(w->fd, w->line + off, w->len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) MP_FAIL("room to write the event file", "writing '%s' failed: %s", w->path, strerror(errno));
        off += (size_t)n;
    }
}

void ev_mem(ev_writer *w, long long step) {
    ev_begin(w, "mem");
    ev_int(w, "step", step);
    ev_object_begin(w, "current");
    for (int t = 0; t < MEM_NTAGS; t++) ev_int(w, mem_tag_name(t), (long long)mem_current(t));
    ev_object_end(w);
    ev_object_begin(w, "peak");
    for (int t = 0; t < MEM_NTAGS; t++) ev_int(w, mem_tag_name(t), (long long)mem_peak(t));
    ev_object_end(w);
    ev_int(w, "peak_total", (long long)mem_peak_total());
    ev_object_begin(w, "at_peak");
    for (int t = 0; t < MEM_NTAGS; t++) ev_int(w, mem_tag_name(t), (long long)mem_at_peak(t));
    ev_object_end(w);
    ev_int(w, "recycled", (long long)mem_recycled_bytes());
    ev_end(w);
}
