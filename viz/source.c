/* source.c: a run's event files (events.rank<R>.jsonl): read whole, followed as they grow, or replayed in time order. */
#include "source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- event fields */

double vz_json_num(const cJSON *obj, const char *key, double fallback) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsNumber(it)) return it->valuedouble;
    if (cJSON_IsString(it)) {
        if (strcmp(it->valuestring, "nan") == 0) return NAN;
        if (strcmp(it->valuestring, "inf") == 0) return INFINITY;
        if (strcmp(it->valuestring, "-inf") == 0) return -INFINITY;
    }
    return fallback;
}

long long vz_json_int(const cJSON *obj, const char *key, long long fallback) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(it) && isfinite(it->valuedouble) ? (long long)it->valuedouble : fallback;
}

const char *vz_json_str(const cJSON *obj, const char *key, const char *fallback) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(it) ? it->valuestring : fallback;
}

bool vz_json_bool(const cJSON *obj, const char *key, bool fallback) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsBool(it)) return cJSON_IsTrue(it);
    if (cJSON_IsNumber(it)) return it->valuedouble != 0;
    return fallback;
}

/* ---------------------------------------------------------------- lines */

typedef enum { LINE_BLANK, LINE_OK, LINE_MALFORMED, LINE_NEWER } line_kind;

/* Parses one line; on LINE_OK the caller owns *out. */
static line_kind parse_line(const char *line, size_t len, cJSON **out, int *version) {
    *out = NULL;
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) i++;
    if (i == len) return LINE_BLANK;
    cJSON *ev = cJSON_ParseWithLength(line, len);
    if (!ev || !cJSON_IsObject(ev)) {
        cJSON_Delete(ev);
        return LINE_MALFORMED;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ev, "v");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(ev, "kind");
    if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble != floor(v->valuedouble) || !cJSON_IsString(kind)) {
        cJSON_Delete(ev);
        return LINE_MALFORMED;
    }
    *version = (int)v->valuedouble;
    if (v->valuedouble > VZ_SCHEMA_VERSION) {
        cJSON_Delete(ev);
        return LINE_NEWER;
    }
    *out = ev;
    return LINE_OK;
}

/* Counts a line that will not be handed on; returns 1 when it is an event to hand on. */
static int classify(vz_source *s, vz_file *f, line_kind k, int version) {
    f->line_number++;
    if (k == LINE_BLANK) return 0;
    f->lines++;
    s->lines++;
    if (k == LINE_MALFORMED) {
        if (!f->malformed) f->first_malformed = f->line_number;
        f->malformed++;
        s->malformed++;
        return 0;
    }
    if (k == LINE_NEWER) {
        f->newer++;
        s->newer++;
        if (version > s->newest_version) s->newest_version = version;
        return 0;
    }
    return 1;
}

static int handle_line(vz_source *s, vz_file *f, const char *line, size_t len, vz_event_fn fn, void *ctx) {
    cJSON *ev;
    int version = 0;
    line_kind k = parse_line(line, len, &ev, &version);
    if (!classify(s, f, k, version)) return 0;
    f->events++;
    s->events++;
    fn(ctx, f->rank, ev);
    cJSON_Delete(ev);
    return 1;
}

/* ---------------------------------------------------------------- files */

static vz_file *file_for_rank(vz_source *s, int rank) {
    if (rank < 0 || rank >= VZ_MAX_RANKS) return NULL;
    if (!s->files[rank]) {
        vz_file *f = calloc(1, sizeof *f);
        if (!f) {
            fprintf(stderr, "mixpar viz: out of memory\n");
            exit(3);
        }
        f->rank = rank;
        snprintf(f->path, sizeof f->path, "%s/events.rank%d.jsonl", s->dir, rank);
        s->files[rank] = f;
        if (rank + 1 > s->nranks) s->nranks = rank + 1;
    }
    return s->files[rank];
}

/* "events.rank12.jsonl" -> 12; -1 for any other name. */
static int rank_of_name(const char *name) {
    int rank, used = 0;
    if (sscanf(name, "events.rank%d.jsonl%n", &rank, &used) != 1 || name[used] != '\0' || rank < 0) return -1;
    char canonical[64];
    snprintf(canonical, sizeof canonical, "events.rank%d.jsonl", rank);
    return strcmp(canonical, name) == 0 ? rank : -1; /* "events.rank01.jsonl" is not a rank file */
}

/* Registers the rank files present in the directory; returns how many there are. */
static int scan_dir(vz_source *s) {
    DIR *d = opendir(s->dir);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *e; (e = readdir(d));) {
        int rank = rank_of_name(e->d_name);
        if (rank < 0 || rank >= VZ_MAX_RANKS) continue;
        file_for_rank(s, rank);
        found++;
    }
    closedir(d);
    return found;
}

static int source_open(vz_source *s, const char *dir, bool waiting, char *why, size_t why_len) {
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(why, why_len, "'%s' does not exist (%s)", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, why_len, "'%s' is not a directory", dir);
        return -1;
    }
    if (scan_dir(s) == 0) {
        if (waiting) {
            file_for_rank(s, 0);
            return 0;
        }
        snprintf(why, why_len, "'%s' holds no events.rank<R>.jsonl files", dir);
        return -1;
    }
    return 0;
}

int vz_source_open(vz_source *s, const char *dir, char *why, size_t why_len) { return source_open(s, dir, false, why, why_len); }
int vz_source_open_waiting(vz_source *s, const char *dir, char *why, size_t why_len) {
    return source_open(s, dir, true, why, why_len);
}

static void file_rewind(vz_file *f) {
    f->exists = false;
    f->offset = 0;
    f->dev = f->ino = 0;
    f->partial_len = 0;
    f->lines = f->events = f->malformed = f->newer = f->truncated = f->first_malformed = f->line_number = 0;
}

static void source_rewind(vz_source *s) {
    for (int r = 0; r < s->nranks; r++)
        if (s->files[r]) file_rewind(s->files[r]);
    s->lines = s->events = s->malformed = s->newer = s->truncated = 0;
    s->newest_version = 0;
}

void vz_source_close(vz_source *s) {
    for (int r = 0; r < VZ_MAX_RANKS; r++) {
        if (!s->files[r]) continue;
        free(s->files[r]->partial);
        free(s->files[r]);
        s->files[r] = NULL;
    }
    s->nranks = 0;
}

void vz_source_expect(vz_source *s, int world) {
    if (world > VZ_MAX_RANKS) world = VZ_MAX_RANKS;
    for (int r = 0; r < world; r++) file_for_rank(s, r);
}

static void partial_append(vz_file *f, const char *p, size_t n) {
    if (f->partial_len + n + 1 > f->partial_cap) {
        size_t cap = f->partial_cap ? f->partial_cap : 4096;
        while (cap < f->partial_len + n + 1) cap *= 2;
        char *grown = realloc(f->partial, cap);
        if (!grown) {
            fprintf(stderr, "mixpar viz: out of memory for a %zu-byte line\n", f->partial_len + n);
            exit(3);
        }
        f->partial = grown;
        f->partial_cap = cap;
    }
    memcpy(f->partial + f->partial_len, p, n);
    f->partial_len += n;
}

/* Splits new bytes into lines; text after the last newline waits in f->partial. */
static int feed(vz_source *s, vz_file *f, const char *buf, size_t n, vz_event_fn fn, void *ctx) {
    int handed = 0;
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n') continue;
        if (f->partial_len) {
            partial_append(f, buf + start, i - start);
            handed += handle_line(s, f, f->partial, f->partial_len, fn, ctx);
            f->partial_len = 0;
        } else {
            handed += handle_line(s, f, buf + start, i - start, fn, ctx);
        }
        start = i + 1;
    }
    if (start < n) partial_append(f, buf + start, n - start);
    return handed;
}

/* Reads what one file gained. Returns events handed on, or VZ_SOURCE_RESET. */
static int poll_file(vz_source *s, vz_file *f, vz_event_fn fn, void *ctx) {
    int fd = open(f->path, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT) return f->exists ? VZ_SOURCE_RESET : 0; /* not written yet, or removed */
        snprintf(s->error, sizeof s->error, "%s: %s", f->path, strerror(errno));
        return 0;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(s->error, sizeof s->error, "%s: not a regular file", f->path);
        close(fd);
        return 0;
    }
    if (f->exists && (st.st_ino != f->ino || st.st_dev != f->dev || st.st_size < f->offset)) {
        close(fd);
        return VZ_SOURCE_RESET;
    }
    f->exists = true;
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    int handed = 0;
    static char buf[1 << 16];
    while (f->offset < st.st_size) {
        ssize_t got = pread(fd, buf, sizeof buf, f->offset);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            if (got < 0) snprintf(s->error, sizeof s->error, "%s: %s", f->path, strerror(errno));
            break;
        }
        f->offset += got;
        handed += feed(s, f, buf, (size_t)got, fn, ctx);
    }
    close(fd);
    return handed;
}

int vz_source_poll(vz_source *s, vz_event_fn fn, void *ctx) {
    scan_dir(s);
    int handed = 0;
    for (int r = 0; r < s->nranks; r++) {
        if (!s->files[r]) continue;
        int got = poll_file(s, s->files[r], fn, ctx);
        if (got == VZ_SOURCE_RESET) {
            source_rewind(s);
            return VZ_SOURCE_RESET;
        }
        handed += got;
    }
    return handed;
}

void vz_source_finish(vz_source *s) {
    for (int r = 0; r < s->nranks; r++) {
        vz_file *f = s->files[r];
        if (!f || !f->partial_len) continue;
        /* A last line without its newline: cut off by a crash or a full disk. It may even parse (a cut
         * between digits), so it is never trusted. */
        f->truncated++;
        s->truncated++;
        f->partial_len = 0;
    }
}

int vz_source_files_present(const vz_source *s) {
    int n = 0;
    for (int r = 0; r < s->nranks; r++)
        if (s->files[r] && s->files[r]->exists) n++;
    return n;
}

const char *vz_source_version_note(const vz_source *s, char *buf, size_t n) {
    if (!s->newer) {
        if (n) buf[0] = '\0';
        return buf;
    }
    snprintf(buf, n, "%lld event%s of schema version %d skipped: this reader knows version %d (rebuild mixpar)",
             s->newer, s->newer == 1 ? "" : "s", s->newest_version, VZ_SCHEMA_VERSION);
    return buf;
}

/* ---------------------------------------------------------------- replay */

static char *read_whole(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *text = malloc(cap);
    for (size_t got; text && (got = fread(text + n, 1, cap - n, fp)) > 0;) {
        n += got;
        if (n == cap) {
            char *grown = realloc(text, cap *= 2);
            if (!grown) free(text);
            text = grown;
        }
    }
    fclose(fp);
    if (!text) {
        fprintf(stderr, "mixpar viz: out of memory reading %s\n", path);
        exit(3);
    }
    *len = n;
    return text;
}

static int compare_lines(const void *a, const void *b) {
    const vz_replay_line *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->rank != y->rank) return x->rank - y->rank;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

void vz_replay_load(vz_replay *r, vz_source *s) {
    memset(r, 0, sizeof *r);
    size_t cap = 0;
    for (int rank = 0; rank < s->nranks; rank++) {
        vz_file *f = s->files[rank];
        if (!f) continue;
        size_t len;
        char *text = read_whole(f->path, &len);
        if (!text) continue;
        f->exists = true;
        f->offset = (long long)len;
        r->text[rank] = text;
        double base = 0, last_raw = -INFINITY, last = 0;
        for (size_t start = 0; start < len;) {
            char *nl = memchr(text + start, '\n', len - start);
            if (!nl) { /* the last line never ended */
                f->truncated++;
                s->truncated++;
                break;
            }
            size_t end = (size_t)(nl - text);
            cJSON *ev;
            int version = 0;
            line_kind k = parse_line(text + start, end - start, &ev, &version);
            if (classify(s, f, k, version)) {
                double t_raw = vz_json_num(ev, "t", last_raw > -INFINITY ? last_raw : 0);
                if (!isfinite(t_raw)) t_raw = last_raw > -INFINITY ? last_raw : 0;
                if (t_raw < last_raw) base = last; /* a resumed process: its clock starts again at 0 */
                last_raw = t_raw;
                last = base + t_raw;
                if (r->nlines == cap) {
                    cap = cap ? cap * 2 : 4096;
                    vz_replay_line *grown = realloc(r->lines, cap * sizeof *grown);
                    if (!grown) {
                        fprintf(stderr, "mixpar viz: out of memory for %zu lines\n", cap);
                        exit(3);
                    }
                    r->lines = grown;
                }
                r->lines[r->nlines++] = (vz_replay_line){last, rank, start, end - start};
                cJSON_Delete(ev);
            }
            start = end + 1;
        }
    }
    if (r->nlines) qsort(r->lines, r->nlines, sizeof *r->lines, compare_lines);
    r->t_begin = r->nlines ? r->lines[0].t : 0;
    r->t_end = r->nlines ? r->lines[r->nlines - 1].t : 0;
}

size_t vz_replay_until(vz_replay *r, double until, vz_event_fn fn, void *ctx) {
    size_t handed = 0;
    for (; r->next < r->nlines && r->lines[r->next].t <= until; r->next++) {
        const vz_replay_line *l = &r->lines[r->next];
        cJSON *ev = cJSON_ParseWithLength(r->text[l->rank] + l->offset, l->length);
        if (!ev) continue; /* parsed at load; cannot fail unless memory runs out */
        fn(ctx, l->rank, ev);
        cJSON_Delete(ev);
        handed++;
    }
    return handed;
}

bool vz_replay_done(const vz_replay *r) { return r->next >= r->nlines; }

void vz_replay_free(vz_replay *r) {
    for (int i = 0; i < VZ_MAX_RANKS; i++) free(r->text[i]);
    free(r->lines);
    memset(r, 0, sizeof *r);
}
