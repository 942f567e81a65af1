/* corpus.h: text corpora from Debian's fortune packages, cleaned for language modelling. */
#ifndef MIXPAR_DATA_CORPUS_H
#define MIXPAR_DATA_CORPUS_H

#include "data/data_err.h"
#include "data/textbuf.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What cleaning removed or changed, reported in info.json. */
typedef struct {
    uint64_t bytes_in;         /* raw bytes read */
    uint64_t entries;          /* fortunes (poems) kept */
    uint64_t ansi_escapes;     /* ANSI escape sequences removed, e.g. ESC[32m colour codes */
    uint64_t overstrikes;      /* backspaces resolved: "_\bx" (underline) and "x\bx" (bold) become "x" */
    uint64_t controls_removed; /* other control characters dropped: BEL, CR, ... (tab and newline stay) */
    uint64_t invalid_utf8;     /* invalid UTF-8 sequences replaced by U+FFFD */
} corpus_stats;

/* A corpus as a list of entries (fortunes, poems): their texts back to back, each ending in '\n'. */
typedef struct {
    textbuf text;
    uint64_t *starts; /* (n + 1) entry i is text.data[starts[i] .. starts[i+1]) */
    size_t n, cap;
} corpus_entries;

/* Cleans the text of one fortune file and appends its entries:
 *   - ANSI escape sequences (ESC [ ... final byte, and two-byte ESC x) are removed;
 *   - a backspace moves back one character, and what is typed over it wins, except that an underscore
 *     never hides a character (terminal overstrike, as nroff used it for underline and bold);
 *   - control characters other than tab and newline are dropped; trailing spaces and tabs are trimmed;
 *   - invalid UTF-8 becomes U+FFFD, so the output is always valid UTF-8;
 *   - a line holding just "%" separates entries; blank lines around an entry are dropped and empty
 *     entries skipped.
 * stats are added to (not reset). */
void corpus_clean_fortunes(const char *raw, size_t len, corpus_entries *out, corpus_stats *stats);

/* The entries joined with one blank line between them, in file order, or (shuffle) in an order drawn
 * from seed, so that the last part of the text, held out for validation, samples the whole corpus. */
void corpus_join(const corpus_entries *entries, bool shuffle, uint64_t seed, textbuf *out);
void corpus_entries_free(corpus_entries *entries);

/* Where the fortune files live: $MIXPAR_FORTUNES_DIR when set (tests, other systems), else
 * /usr/share/games/fortunes (Debian's fortunes, fortunes-min and fortunes-zh packages). */
const char *corpus_fortunes_dir(void);

/* A source file of a corpus, and the Debian package that installs it. */
typedef struct {
    const char *file;    /* name inside the fortunes directory */
    const char *package; /* Debian package */
} corpus_file;

/* Reads, cleans and appends the files in order. A missing file is an error naming the Debian package
 * to install (`make deps` installs them). sources (may be NULL), a JSON array, gets one object per file:
 * {"path", "package", "bytes", "sha256"} for info.json. */
bool corpus_load(const corpus_file *files, int n_files, corpus_entries *out, corpus_stats *stats, cJSON *sources,
                 data_err *err);

#endif
