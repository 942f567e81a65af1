/* answer.h: the kinds of answer the course's questions take (a number within a tolerance, a letter, a sentence)
 * and how one answer is read and judged: shared by lab 30's quiz (quiz.h) and the grader's answers files
 * (grader/answers.c, labs/labNN-slug/answers.md). */
#ifndef MIXPAR_COURSE_ANSWER_H
#define MIXPAR_COURSE_ANSWER_H

#include <stdbool.h>
#include <stddef.h>

/*   number  a decimal number ("16", "0.2", "-8", "1e-3"); right within a tolerance
 *   choice  one letter, A to D; right when it is the key's letter
 *   text    a sentence or two in your own words; read by a person, never scored automatically */
typedef enum { QUIZ_NUMBER, QUIZ_CHOICE, QUIZ_TEXT } quiz_kind;

const char *quiz_kind_name(quiz_kind k);                /* "number", "choice", "text" */
bool quiz_kind_from_name(const char *name, quiz_kind *k); /* false for any other name */

/* Whether `answer` is written as its kind asks (a whole number string, one letter A-D, a non-empty sentence);
 * false with a sentence in `why` that says what to write instead. */
bool quiz_answer_readable(quiz_kind k, const char *answer, char *why, size_t cap);

/* The number an answer of kind number gives; false when it is not one finite number and nothing else. */
bool quiz_answer_number(const char *answer, double *value);

/* Whether a readable answer is right: a number within max(abs_tol, rel_tol * |expected|) of the expected one, a
 * letter equal to the key's (either case). Text answers are never right or wrong: false. */
bool quiz_answer_right(quiz_kind k, const char *answer, double expected, char expected_letter, double rel_tol,
                       double abs_tol);

#endif
