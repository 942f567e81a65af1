/* regions.h: finding, checking and rewriting the lab regions (LAB NN BEGIN/END) in core sources. */
#ifndef MIXPAR_GRADER_REGIONS_H
#define MIXPAR_GRADER_REGIONS_H

#include <stdbool.h>
#include <stddef.h>

/* One region in a file's text. Offsets are into that text:
 *     [begin_line_start ... body_start)  the BEGIN marker line
 *     [body_start ... body_end)          the body: what the student writes
 *     [body_end ... end_line_end)        the END marker line            */
typedef struct {
    int lab;
    char title[160];
    int begin_line, end_line;         /* 1-based line numbers */
    size_t begin_line_start, body_start, body_end, end_line_end;
    char indent[64];                  /* leading whitespace of the BEGIN line */
} region;

typedef struct {
    region *items;
    int count;
} region_list;

/* Scans `text` (the file `path`, for messages). Malformed markers (a BEGIN inside an open region, an END
 * without its BEGIN or with another lab's number, a region never closed, a marker line with extra text)
 * make it return false with "path:line: what is wrong" in err. */
bool regions_scan(const char *path, const char *text, region_list *out, char *err, size_t errlen);
void regions_free(region_list *list);

/* Text with each region of `lab` (or of every lab when lab < 0) replaced by the student stub. Caller frees. */
/* handout_for(lab) names the handout each stub points to (NULL: "the lab's README.md"). */
char *regions_stub(const char *text, const region_list *list, int lab, const char *(*handout_for)(int lab));

/* Text of `clean` with the bodies of lab `lab`'s regions taken, in order, from `submitted`. Returns NULL
 * with a message when the submitted file lacks a region the clean one has. Caller frees. */
char *regions_splice(const char *path, const char *clean, const region_list *clean_regions, const char *submitted,
                     const region_list *submitted_regions, int lab, char *err, size_t errlen);

/* regions_splice for `make catchup`: only the regions of `lab` that are still LAB_TODO stubs in `text` take their
 * bodies from `released` (the instructor's released regions); the ones a student wrote stay. *filled counts the
 * regions replaced. NULL with a message as regions_splice. Caller frees. */
char *regions_fill_stubs(const char *path, const char *text, const region_list *regions, const char *released,
                         const region_list *released_regions, int lab, int *filled, char *err, size_t errlen);
/* Is any region of `lab` in `text` still a LAB_TODO stub? */
bool regions_has_stub(const char *text, const region_list *regions, int lab);

/* A region body (text, len; its first line's number) that is only code inside its function: no preprocessor
 * lines, asm, attributes or _Pragma, balanced braces and parentheses (regions_splice refuses any other). */
bool body_stays_a_body(const char *text, size_t len, int first_line, char *why, size_t cap);

/* Whole-file helpers. */
char *read_text_file(const char *path, size_t *len);        /* NULL if unreadable */
bool write_text_file(const char *path, const char *text);   /* creates parent dirs */

#endif
