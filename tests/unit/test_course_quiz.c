/* test_course_quiz.c: Criterion tests of the course quiz: labs/lab30-microscaling/quiz.md and the question table
 * (course/quiz.h) list the same questions, with the same chapter and kind, and every chapter has one. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "course/quiz.h"

Test(course_quiz, quiz_md_matches_the_table) {
    FILE *f = fopen("labs/lab30-microscaling/quiz.md", "r");
    cr_assert(f, "run from the repository root");
    char line[1024];
    int found[QUIZ_NQUESTIONS] = {0}, listed = 0;
    while (fgets(line, sizeof line, f)) {
        char id[16], kind[16];
        int chapter;
        /* a question starts: **Q01** (number, ch. 1 ... */
        if (sscanf(line, "**%15[^*]** (%15[^,], ch. %d", id, kind, &chapter) != 3) continue;
        listed++;
        const quiz_question *q = quiz_question_by_id(id);
        cr_assert(q, "quiz.md has %s, the table does not", id);
        cr_expect_eq(q->chapter, chapter, "%s: chapter %d in quiz.md, %d in the table", id, chapter, q->chapter);
        cr_expect_str_eq(quiz_kind_name(q->kind), kind, "%s: kind", id);
        found[q - QUIZ_QUESTIONS]++;
    }
    fclose(f);
    cr_expect_eq(listed, QUIZ_NQUESTIONS, "questions in quiz.md");
    int per_chapter[31] = {0};
    for (int i = 0; i < QUIZ_NQUESTIONS; i++) {
        cr_expect_eq(found[i], 1, "%s in quiz.md once", QUIZ_QUESTIONS[i].id);
        per_chapter[QUIZ_QUESTIONS[i].chapter]++;
    }
    for (int c = 1; c <= 30; c++) cr_expect(per_chapter[c] >= 1, "chapter %d has a question", c);
}

/* The instructor's answers (the region's reference) answer every question once. */
Test(course_quiz, reference_answers_every_question) {
    quiz_answer a[2 * QUIZ_NQUESTIONS];
    int n = quiz_answers(a, 2 * QUIZ_NQUESTIONS);
    cr_expect_eq(n, QUIZ_NQUESTIONS);
    for (int i = 0; i < n; i++) cr_expect(quiz_question_by_id(a[i].id) != NULL, "answer to %s", a[i].id);
}
