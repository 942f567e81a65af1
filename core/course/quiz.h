/* quiz.h: the course's self-check quiz (labs/lab30-microscaling/quiz.md): its questions and the student's answers. */
#ifndef MIXPAR_COURSE_QUIZ_H
#define MIXPAR_COURSE_QUIZ_H

#include "course/answer.h" /* quiz_kind: number, choice, text */

/* The questions are in labs/lab30-microscaling/quiz.md; this table holds what a program needs of them:
 * the id, the chapter, and the kind of answer expected (course/answer.h).
 * The answers are what quiz_answers (quiz.c, lab 30's region) gives; lab 30's tests check them. */

typedef struct {
    const char *id;  /* "Q01", "Q30b" */
    int chapter;     /* 1 .. 30 */
    quiz_kind kind;
} quiz_question;

enum { QUIZ_NQUESTIONS = 36 };
extern const quiz_question QUIZ_QUESTIONS[QUIZ_NQUESTIONS];

typedef struct {
    const char *id;
    const char *answer;
} quiz_answer;

const quiz_question *quiz_question_by_id(const char *id); /* NULL when unknown */

/* Writes the answers given (at most cap) into out and returns how many. */
int quiz_answers(quiz_answer *out, int cap);

#endif
