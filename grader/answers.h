/* answers.h: a lab's answers file (labs/labNN-slug/answers.md): one "Qn: answer" line per question, read with
 * bounds (the file comes from a student), blanked for the handout, and judged against lab.json "questions". */
#ifndef MIXPAR_GRADER_ANSWERS_H
#define MIXPAR_GRADER_ANSWERS_H

#include "labinfo.h"

#include <stdbool.h>
#include <stddef.h>

enum {
    ANSWERS_MAX_BYTES = 64 << 10, /* a longer file is not read at all */
    ANSWERS_MAX_ANSWER = 4000,    /* a longer answer is cut there (and a number or letter that long is unreadable) */
};

typedef struct {
    char *given[LAB_MAX_QUESTIONS]; /* per lab.json question: the answer after "Qn:", trimmed (malloc'd), or NULL */
    int line[LAB_MAX_QUESTIONS];    /* where it was; 0 when not answered */
    int repeated_at[LAB_MAX_QUESTIONS]; /* a second "Qn:" line (the question scores 0), or 0 */
    bool too_long[LAB_MAX_QUESTIONS];
    char problem[512]; /* why the whole file was not read (missing, too large, not text), or "" */
    char notes[512];   /* lines that look like answers to questions the lab does not have */
} answer_sheet;

/* Reads answers file `text` (`len` bytes; NULL when there is none, `where` names it in messages) for the
 * questions of `info`. Never fails: what is wrong goes into problem, notes, repeated_at and too_long. */
void answers_read(const char *text, size_t len, const char *where, const lab_info *info, answer_sheet *out);
void answers_free(answer_sheet *sheet);

/* `text` with every answer line emptied after its "Qn:" (the handout's blank form). Caller frees. */
char *answers_blank(const char *text);

/* How many of info's questions sheet answers (once, readably or not). */
int answers_count(const answer_sheet *sheet, const lab_info *info);

#endif
