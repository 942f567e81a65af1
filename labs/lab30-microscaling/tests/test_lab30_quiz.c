/* test_lab30_quiz.c: lab 30 visible test of the quiz answers (core/course/quiz.c): every question answered once, in
 * its kind (a number, a letter A-D, or a sentence). Whether the answers are right is a hidden test. */
#include "course/quiz.h"
#include "mptest.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

MPT_TEST(quiz_every_question_answered_in_its_kind) {
    quiz_answer a[2 * QUIZ_NQUESTIONS];
    int n = quiz_answers(a, 2 * QUIZ_NQUESTIONS);
    int seen[QUIZ_NQUESTIONS] = {0};
    for (int i = 0; i < n; i++) {
        const quiz_question *q = quiz_question_by_id(a[i].id);
        MPT_CHECK(q != NULL, "ANSWER(\"%s\", ...): there is no question %s in quiz.md", a[i].id ? a[i].id : "(null)",
                  a[i].id ? a[i].id : "(null)");
        if (!q) continue;
        seen[q - QUIZ_QUESTIONS]++;
        const char *s = a[i].answer ? a[i].answer : "";
        char *end = NULL;
        switch (q->kind) {
        case QUIZ_NUMBER:
            strtod(s, &end);
            MPT_CHECK(end != s && *end == '\0', "%s asks for a number; got \"%s\" (write only the number: \"16\", "
                      "\"0.2\", \"-8\")", q->id, s);
            break;
        case QUIZ_CHOICE:
            MPT_CHECK(strlen(s) == 1 && strchr("ABCDabcd", s[0]), "%s asks for one letter A to D; got \"%s\"", q->id, s);
            break;
        case QUIZ_TEXT:
            MPT_CHECK(strlen(s) >= 20, "%s asks for a sentence in your own words; got \"%s\"", q->id, s);
            break;
        }
    }
    for (int i = 0; i < QUIZ_NQUESTIONS; i++)
        MPT_CHECK(seen[i] == 1, "%s (chapter %d, %s): answered %d times, expected once", QUIZ_QUESTIONS[i].id,
                  QUIZ_QUESTIONS[i].chapter, quiz_kind_name(QUIZ_QUESTIONS[i].kind), seen[i]);
}
