/* tarball.c: ustar archives for submissions: 512-byte headers, octal fields, checked on the way in. */
#include "tarball.h"

#include <stdarg.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK = 512, MAX_FILE_BYTES = 1 << 20, MAX_TOTAL_BYTES = 8 << 20, MAX_ENTRIES = 256 };

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static unsigned header_checksum(const unsigned char *h) {
    unsigned sum = 0;
    for (int i = 0; i < BLOCK; i++) sum += (i >= 148 && i < 156) ? ' ' : h[i];
    return sum;
}

static void put_octal(char *field, size_t width, unsigned long long value) {
    snprintf(field, width, "%0*llo", (int)width - 1, value);
}

bool tar_write(const char *out_path, const char *const *paths, const char *const *contents, int count, char *err,
               size_t errlen) {
    FILE *f = fopen(out_path, "wb");
    if (!f) {
        set_err(err, errlen, "cannot write %s", out_path);
        return false;
    }
    static const char zeros[BLOCK];
    bool ok = true;
    for (int i = 0; i < count && ok; i++) {
        size_t size = strlen(contents[i]);
        if (strlen(paths[i]) >= 100) {
            set_err(err, errlen, "path too long for the archive: %s", paths[i]);
            ok = false;
            break;
        }
        char h[BLOCK] = {0};
        memcpy(h, paths[i], strlen(paths[i]));
        put_octal(h + 100, 8, 0644);
        put_octal(h + 108, 8, 0);
        put_octal(h + 116, 8, 0);
        put_octal(h + 124, 12, size);
        put_octal(h + 136, 12, 0);
        h[156] = '0';
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        snprintf(h + 148, 8, "%06o", header_checksum((unsigned char *)h));
        h[155] = ' ';
        ok = fwrite(h, 1, BLOCK, f) == BLOCK && fwrite(contents[i], 1, size, f) == size &&
             fwrite(zeros, 1, (BLOCK - size % BLOCK) % BLOCK, f) == (BLOCK - size % BLOCK) % BLOCK;
    }
    ok = ok && fwrite(zeros, 1, BLOCK, f) == BLOCK && fwrite(zeros, 1, BLOCK, f) == BLOCK;
    if (fclose(f) != 0) ok = false;
    if (!ok && !*err) set_err(err, errlen, "writing %s failed", out_path);
    return ok;
}

static bool parse_octal(const unsigned char *field, size_t width, unsigned long long *out) {
    unsigned long long v = 0;
    size_t i = 0;
    while (i < width && field[i] == ' ') i++;
    if (i == width || field[i] < '0' || field[i] > '7') return false;
    for (; i < width && field[i] >= '0' && field[i] <= '7'; i++) v = v * 8 + (field[i] - '0');
    for (; i < width; i++)
        if (field[i] != ' ' && field[i] != '\0') return false;
    *out = v;
    return true;
}

/* Accepts "core/fp/half.c"-style paths only: relative, plain components, from a small alphabet. */
/* "labs/lab04-underflow-and-loss-scaling/answers.md": a lab's answers file (grader/answers.h). */
static bool is_answers_path(const char *p) {
    const char *slash = strchr(p + (strlen(p) > 9 ? 9 : 0), '/');
    return strncmp(p, "labs/lab", 8) == 0 && isdigit((unsigned char)p[8]) && isdigit((unsigned char)p[9]) &&
           p[10] == '-' && slash && slash > p + 11 && strcmp(slash, "/answers.md") == 0;
}

static bool safe_path(const char *p, char *why, size_t whylen) {
    if (p[0] == '/') return set_err(why, whylen, "absolute path"), false;
    for (const char *c = p; *c; c++)
        if (!(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/", *c)))
            return set_err(why, whylen, "unexpected character in path"), false;
    char copy[256];
    snprintf(copy, sizeof copy, "%s", p);
    for (char *save = NULL, *part = strtok_r(copy, "/", &save); part; part = strtok_r(NULL, "/", &save))
        if (strcmp(part, "..") == 0 || strcmp(part, ".") == 0)
            return set_err(why, whylen, "'%s' component in path", part), false;
    if (strncmp(p, "core/", 5) != 0 && strcmp(p, "MANIFEST") != 0 && !is_answers_path(p))
        return set_err(why, whylen, "only files under core/, a lab's answers.md and MANIFEST belong in a submission"),
               false;
    return true;
}

bool tar_read(const char *path, tar_archive *out, char *err, size_t errlen) {
    out->entries = NULL;
    out->count = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, errlen, "cannot open the submission '%s'", path);
        return false;
    }
    unsigned char h[BLOCK];
    size_t offset = 0, total = 0;
    bool ok = false;
    for (;;) {
        size_t got = fread(h, 1, BLOCK, f);
        if (got == 0 && offset > 0) { ok = true; break; } /* end without the zero blocks: accept */
        if (got != BLOCK) {
            if (offset == 0 && got >= 2 && h[0] == 0x1f && h[1] == 0x8b)
                set_err(err, errlen, "'%s' is gzip-compressed; submit the plain .tar that 'make submit' writes", path);
            else
                set_err(err, errlen, "'%s' is truncated: a 512-byte header was expected at byte %zu", path, offset);
            break;
        }
        if (offset == 0 && h[0] == 0x1f && h[1] == 0x8b) {
            set_err(err, errlen, "'%s' is gzip-compressed; submit the plain .tar that 'make submit' writes", path);
            break;
        }
        bool zero = true;
        for (int i = 0; i < BLOCK && zero; i++) zero = h[i] == 0;
        if (zero) { ok = true; break; }
        unsigned long long size, sum;
        if (!parse_octal(h + 148, 8, &sum) || sum != header_checksum(h) || !parse_octal(h + 124, 12, &size)) {
            set_err(err, errlen, "'%s' is not a valid tar archive: bad header at byte %zu", path, offset);
            break;
        }
        char name[256];
        char prefix[156] = {0}, base[101] = {0};
        memcpy(prefix, h + 345, 155);
        memcpy(base, h, 100);
        if (memcmp(h + 257, "ustar", 5) == 0 && prefix[0]) snprintf(name, sizeof name, "%s/%s", prefix, base);
        else snprintf(name, sizeof name, "%s", base);
        char type = (char)h[156];
        offset += BLOCK;
        if (type == '5') { /* directory: nothing to keep */
            if (size) { set_err(err, errlen, "directory entry with data at byte %zu", offset); break; }
            continue;
        }
        if (type != '0' && type != '\0') {
            const char *what = type == '1' ? "a hard link" : type == '2' ? "a symbolic link"
                             : (type == 'x' || type == 'g' || type == 'L') ? "an extended (pax/GNU) header"
                             : "a special file";
            set_err(err, errlen, "'%s' contains %s ('%s', at byte %zu); only regular files are accepted; make the "
                    "archive with 'make submit'", path, what, name, offset - BLOCK);
            break;
        }
        char why[128] = "";
        if (!safe_path(name, why, sizeof why)) {
            set_err(err, errlen, "'%s': rejected entry '%s': %s", path, name, why);
            break;
        }
        if (size > MAX_FILE_BYTES || total + size > MAX_TOTAL_BYTES || out->count == MAX_ENTRIES) {
            set_err(err, errlen, "'%s': too large (entry '%s' of %llu bytes); a submission holds only source files",
                    path, name, size);
            break;
        }
        char *data = malloc(size + 1);
        if (!data || fread(data, 1, size, f) != size) {
            free(data);
            set_err(err, errlen, "'%s' is truncated inside '%s' (at byte %zu)", path, name, offset);
            break;
        }
        data[size] = '\0';
        if (strlen(data) != size) {
            free(data);
            set_err(err, errlen, "'%s': '%s' contains NUL bytes; a submission holds only source text", path, name);
            break;
        }
        size_t pad = (BLOCK - size % BLOCK) % BLOCK;
        if (pad && fseek(f, (long)pad, SEEK_CUR) != 0) { free(data); break; }
        offset += size + pad;
        total += size;
        if (tar_find(out, name)) {
            free(data);
            set_err(err, errlen, "'%s': '%s' appears twice", path, name);
            break;
        }
        out->entries = realloc(out->entries, (size_t)(out->count + 1) * sizeof *out->entries);
        tar_entry *e = &out->entries[out->count++];
        snprintf(e->path, sizeof e->path, "%s", name);
        e->data = data;
        e->size = size;
    }
    fclose(f);
    if (ok && out->count == 0) {
        set_err(err, errlen, "'%s' holds no files", path);
        ok = false;
    }
    if (!ok) tar_free(out);
    return ok;
}

const tar_entry *tar_find(const tar_archive *a, const char *path) {
    for (int i = 0; i < a->count; i++)
        if (strcmp(a->entries[i].path, path) == 0) return &a->entries[i];
    return NULL;
}

void tar_free(tar_archive *a) {
    for (int i = 0; i < a->count; i++) free(a->entries[i].data);
    free(a->entries);
    a->entries = NULL;
    a->count = 0;
}
