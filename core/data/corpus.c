/* corpus.c: reading fortune files and cleaning them: colour codes, overstrike, separators, UTF-8. */
#include "data/corpus.h"

#include "base/error.h"
#include "data/rand.h"
#include "data/sha256.h"
#include "data/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ESC = 0x1b, BACKSPACE = 0x08, REPLACEMENT_CHAR = 0xFFFD };

/* One line as a terminal would show it: cells of characters and a cursor that backspace moves. */
typedef struct {
    uint32_t *cells;
    size_t n, cap, cursor;
} screen_line;

/* Typing a character at the cursor: over an existing cell it replaces it, except that an underscore
 * does not hide what is under it ("x\b_" and "_\bx" are both an underlined x). */
static void type_char(screen_line *l, uint32_t cp) {
    if (l->cursor < l->n) {
        if (!(cp == '_' && l->cells[l->cursor] != ' ')) l->cells[l->cursor] = cp;
    } else {
        if (l->n == l->cap) {
            l->cap = l->cap ? 2 * l->cap : 256;
            l->cells = realloc(l->cells, l->cap * sizeof *l->cells);
            MP_ASSERT(l->cells != NULL, "out of memory");
        }
        l->cells[l->n++] = cp;
    }
    l->cursor++;
}

/* Entries are assembled here until their "%" line, so blank lines around them can be dropped. */
typedef struct {
    textbuf text;         /* the entry so far */
    int pending_blanks;   /* blank lines seen since the last non-blank one: kept only if text follows */
} entry_buf;

static void add_entry(corpus_entries *out, const char *text, size_t len) {
    if (out->n + 2 > out->cap) {
        out->cap = out->cap ? 2 * out->cap : 1024;
        out->starts = realloc(out->starts, out->cap * sizeof *out->starts);
        MP_ASSERT(out->starts != NULL, "out of memory");
    }
    out->starts[out->n] = out->text.len;
    textbuf_append(&out->text, text, len);
    out->n++;
    out->starts[out->n] = out->text.len;
}

static void finish_entry(entry_buf *e, corpus_entries *out, corpus_stats *stats) {
    if (e->text.len > 0) {
        add_entry(out, e->text.data, e->text.len);
        stats->entries++;
    }
    e->text.len = 0;
    e->pending_blanks = 0;
}

/* The end of a screen line: trim it, then it is either a separator, a blank line or entry text. */
static void finish_line(screen_line *l, entry_buf *e, corpus_entries *out, corpus_stats *stats) {
    size_t n = l->n;
    while (n > 0 && (l->cells[n - 1] == ' ' || l->cells[n - 1] == '\t')) n--;
    if (n == 1 && l->cells[0] == '%') {
        finish_entry(e, out, stats);
    } else if (n == 0) {
        if (e->text.len > 0) e->pending_blanks++;
    } else {
        for (; e->pending_blanks > 0; e->pending_blanks--) textbuf_putc(&e->text, '\n');
        char utf8[4];
        for (size_t i = 0; i < n; i++) textbuf_append(&e->text, utf8, (size_t)utf8_encode(l->cells[i], utf8));
        textbuf_putc(&e->text, '\n');
    }
    l->n = l->cursor = 0;
}

/* Length of the escape sequence at s[0] == ESC: CSI "ESC [ params intermediates final" (final byte
 * 0x40..0x7E), or a two-byte "ESC x". A sequence cut short by a newline or the end stops there. */
static size_t escape_length(const unsigned char *s, size_t len) {
    if (len < 2 || s[1] == '\n') return 1;
    if (s[1] != '[') return 2;
    size_t i = 2;
    while (i < len && s[i] >= 0x20 && s[i] <= 0x3F) i++; /* parameter and intermediate bytes */
    if (i < len && s[i] >= 0x40 && s[i] <= 0x7E) return i + 1;
    return i;
}

void corpus_clean_fortunes(const char *raw, size_t len, corpus_entries *out, corpus_stats *stats) {
    const unsigned char *s = (const unsigned char *)raw;
    screen_line line = {0};
    entry_buf entry = {0};
    stats->bytes_in += len;
    size_t at = 0;
    while (at < len) {
        unsigned char b = s[at];
        if (b == ESC) {
            at += escape_length(s + at, len - at);
            stats->ansi_escapes++;
        } else if (b == BACKSPACE) {
            if (line.cursor > 0) line.cursor--;
            stats->overstrikes++;
            at++;
        } else if (b == '\n') {
            finish_line(&line, &entry, out, stats);
            at++;
        } else if (b < 0x80) {
            if (b == '\t' || (b >= 0x20 && b != 0x7F)) type_char(&line, b);
            else stats->controls_removed++;
            at++;
        } else {
            uint32_t cp;
            int n = utf8_decode(raw + at, len - at, &cp);
            if (n == 0) {
                cp = REPLACEMENT_CHAR;
                n = 1;
                stats->invalid_utf8++;
            }
            if (cp >= 0x80 && cp < 0xA0) stats->controls_removed++; /* C1 controls */
            else type_char(&line, cp);
            at += (size_t)n;
        }
    }
    if (line.n > 0) finish_line(&line, &entry, out, stats); /* a last line without its newline */
    finish_entry(&entry, out, stats);
    free(line.cells);
    textbuf_free(&entry.text);
}

void corpus_join(const corpus_entries *entries, bool shuffle, uint64_t seed, textbuf *out) {
    size_t n = entries->n;
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    MP_ASSERT(order != NULL, "out of memory");
    for (size_t i = 0; i < n; i++) order[i] = i;
    if (shuffle && n > 1) { /* Fisher-Yates */
        mp_rng rng;
        mp_rng_seed(&rng, seed);
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = (size_t)data_rng_below(&rng, i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    }
    for (size_t k = 0; k < n; k++) {
        if (k > 0) textbuf_putc(out, '\n'); /* one blank line between entries */
        size_t i = order[k];
        textbuf_append(out, entries->text.data + entries->starts[i], entries->starts[i + 1] - entries->starts[i]);
    }
    free(order);
}

void corpus_entries_free(corpus_entries *entries) {
    textbuf_free(&entries->text);
    free(entries->starts);
    memset(entries, 0, sizeof *entries);
}

const char *corpus_fortunes_dir(void) {
    const char *dir = getenv("MIXPAR_FORTUNES_DIR");
    return dir && *dir ? dir : "/usr/share/games/fortunes";
}

bool corpus_load(const corpus_file *files, int n_files, corpus_entries *out, corpus_stats *stats, cJSON *sources,
                 data_err *err) {
    const char *dir = corpus_fortunes_dir();
    for (int i = 0; i < n_files; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i].file);
        FILE *f = fopen(path, "rb");
        if (!f) {
            int e = errno;
            char expected[256], hint[256];
            snprintf(expected, sizeof expected, "the file %s from the Debian package %s", path, files[i].package);
            snprintf(hint, sizeof hint, "install it with `make deps` (or: sudo apt-get install %s)%s", files[i].package,
                     getenv("MIXPAR_FORTUNES_DIR") ? "; MIXPAR_FORTUNES_DIR is set: is it right?" : "");
            return DATA_ERR(err, expected, hint, "cannot open '%s': %s", path, strerror(e));
        }
        textbuf raw = {0};
        char chunk[1 << 16];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) textbuf_append(&raw, chunk, n);
        bool bad = ferror(f);
        fclose(f);
        if (bad) {
            textbuf_free(&raw);
            return DATA_ERR(err, "a readable corpus file", NULL, "reading '%s' failed", path);
        }
        corpus_clean_fortunes(raw.data ? raw.data : "", raw.len, out, stats);
        if (sources) {
            char hex[65];
            sha256_hex(raw.data ? raw.data : "", raw.len, hex);
            cJSON *src = cJSON_CreateObject();
            cJSON_AddStringToObject(src, "path", path);
            cJSON_AddStringToObject(src, "package", files[i].package);
            cJSON_AddNumberToObject(src, "bytes", (double)raw.len);
            cJSON_AddStringToObject(src, "sha256", hex);
            cJSON_AddItemToArray(sources, src);
        }
        textbuf_free(&raw);
    }
    return true;
}
