/* verdict.h: a test's verdict from observation streams (tests/harness/mptest.c writes them), and clean text. */
#ifndef MIXPAR_GRADER_VERDICT_H
#define MIXPAR_GRADER_VERDICT_H

#include <stdbool.h>
#include <stddef.h>

/* Compares the submission's observations with the reference regions' for the same test and seed. True when
 * they agree record by record (exact values, near values within the tolerance the reference run declared,
 * conditions, the same checks in the same order) and the submission's test came back. Otherwise false with
 * what differed first in `why` (file:line of the check; the caller decides whether it may be shown). */
bool verdict_compare(const char *submitted, const char *reference, char *why, size_t cap);

/* Where no reference exists (the student edition): the test's own judgement from its records. */
bool verdict_self(const char *submitted, char *why, size_t cap);

/* `text` made safe to show and to store: valid UTF-8 (bad bytes become U+FFFD), no control characters but
 * newline and tab (escape sequences and carriage returns go), at most `max` bytes. Caller frees. */
char *clean_text(const char *text, size_t len, size_t max);

#endif
