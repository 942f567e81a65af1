/* answer.c: reading and judging one answer of a course question (kinds in answer.h). */
#include "course/answer.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const KIND_NAMES[] = {"number", "choice", "text"};

const char *quiz_kind_name(quiz_kind k) { return k >= QUIZ_NUMBER && k <= QUIZ_TEXT ? KIND_NAMES[k] : "?"; }

bool quiz_kind_from_name(const char *name, quiz_kind *k) {
    for (int i = QUIZ_NUMBER; name && i <= QUIZ_TEXT; i++)
        if (strcmp(name, KIND_NAMES[i]) == 0) {
            *k = (quiz_kind)i;
            return true;
        }
    return false;
}

bool quiz_answer_number(const char *answer, double *value) {
    if (!answer || !*answer || isspace((unsigned char)answer[0])) return false;
    char *end = NULL;
    double v = strtod(answer, &end);
    if (end == answer || *end != '\0' || !isfinite(v)) return false;
    *value = v;
    return true;
}

static bool is_letter_a_to_d(const char *answer) {
    return answer && strlen(answer) == 1 && strchr("ABCDabcd", answer[0]);
}

bool quiz_answer_readable(quiz_kind k, const char *answer, char *why, size_t cap) {
    double unused;
    switch (k) {
    case QUIZ_NUMBER:
        if (quiz_answer_number(answer, &unused)) return true;
        snprintf(why, cap, "a number is asked for: write only the number (\"16\", \"0.25\", \"-8\", \"1e-3\"), no unit");
        return false;
    case QUIZ_CHOICE:
        if (is_letter_a_to_d(answer)) return true;
        snprintf(why, cap, "a choice is asked for: write one letter, A to D");
        return false;
    case QUIZ_TEXT:
        if (answer && *answer) return true;
        snprintf(why, cap, "a sentence or two in your own words is asked for");
        return false;
    }
    snprintf(why, cap, "unknown kind of question");
    return false;
}

bool quiz_answer_right(quiz_kind k, const char *answer, double expected, char expected_letter, double rel_tol,
                       double abs_tol) {
    double got;
    switch (k) {
    case QUIZ_NUMBER:
        return quiz_answer_number(answer, &got) && fabs(got - expected) <= fmax(abs_tol, rel_tol * fabs(expected));
    case QUIZ_CHOICE:
        return is_letter_a_to_d(answer) && toupper((unsigned char)answer[0]) == toupper((unsigned char)expected_letter);
    case QUIZ_TEXT:
        return false;
    }
    return false;
}
