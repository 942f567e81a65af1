/* quiz.h: the course's self-check quiz (labs/lab30-microscaling/quiz.md): its questions and the student's answers. */
#ifndef MIXPAR_COURSE_QUIZ_H
#define MIXPAR_COURSE_QUIZ_H

/* The questions are in labs/lab30-microscaling/quiz.md; this table holds what a program needs of them:
 * the id, the chapter, and the kind of answer expected.
 *   number  a decimal number ("16", "0.2", "-8", "1e-3"); graded within a tolerance
 *   choice  one letter, A to D; graded exactly
 *   text    a sentence or two in your own words; read by a person, not graded automatically
 * The answers are what quiz_answers (quiz.c, lab 30's region) gives; lab 30's tests check them. */

typedef enum { QUIZ_NUMBER, QUIZ_CHOICE, QUIZ_TEXT } quiz_kind;

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

const char *quiz_kind_name(quiz_kind k); /* "number", "choice", "text" */
const quiz_question *quiz_question_by_id(const char *id); /* NULL when unknown */

/* Writes the answers given (at most cap) into out and returns how many. */
int quiz_answers(quiz_answer *out, int cap);

#endif
