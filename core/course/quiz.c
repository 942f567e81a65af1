/* quiz.c: the self-check quiz's question table and, in lab 30's region, the student's answers to it. */
#include "course/quiz.h"

#include "base/lab.h"

#include <string.h>

const quiz_question QUIZ_QUESTIONS[QUIZ_NQUESTIONS] = {
    {"Q01", 1, QUIZ_NUMBER},   {"Q02", 2, QUIZ_NUMBER},   {"Q03", 3, QUIZ_NUMBER},   {"Q03b", 3, QUIZ_TEXT},
    {"Q04", 4, QUIZ_NUMBER},   {"Q05", 5, QUIZ_NUMBER},   {"Q06", 6, QUIZ_NUMBER},   {"Q07", 7, QUIZ_CHOICE},
    {"Q08", 8, QUIZ_CHOICE},   {"Q09", 9, QUIZ_NUMBER},   {"Q10", 10, QUIZ_NUMBER},  {"Q11", 11, QUIZ_NUMBER},
    {"Q12", 12, QUIZ_NUMBER},  {"Q13", 13, QUIZ_NUMBER},  {"Q14", 14, QUIZ_CHOICE},  {"Q15", 15, QUIZ_NUMBER},
    {"Q16", 16, QUIZ_NUMBER},  {"Q17", 17, QUIZ_CHOICE},  {"Q18", 18, QUIZ_NUMBER},  {"Q19", 19, QUIZ_NUMBER},
    {"Q19b", 19, QUIZ_NUMBER}, {"Q20", 20, QUIZ_CHOICE},  {"Q21", 21, QUIZ_CHOICE},  {"Q22", 22, QUIZ_CHOICE},
    {"Q23", 23, QUIZ_CHOICE},  {"Q24", 24, QUIZ_CHOICE},  {"Q25", 25, QUIZ_NUMBER},  {"Q25b", 25, QUIZ_NUMBER},
    {"Q26", 26, QUIZ_NUMBER},  {"Q27", 27, QUIZ_NUMBER},  {"Q28", 28, QUIZ_NUMBER},  {"Q29", 29, QUIZ_NUMBER},
    {"Q30", 30, QUIZ_NUMBER},  {"Q30b", 30, QUIZ_NUMBER}, {"Q30c", 30, QUIZ_NUMBER}, {"Q30d", 30, QUIZ_TEXT},
};

const quiz_question *quiz_question_by_id(const char *id) {
    for (int i = 0; id && i < QUIZ_NQUESTIONS; i++)
        if (strcmp(QUIZ_QUESTIONS[i].id, id) == 0) return &QUIZ_QUESTIONS[i];
    return NULL;
}

/* ANSWER("Q01", "16"): one answer, as a string (a number, a letter, or a sentence for text questions). */
#define ANSWER(question, text) \
    do { \
        if (n < cap) out[n++] = (quiz_answer){(question), (text)}; \
    } while (0)

int quiz_answers(quiz_answer *out, int cap) {
    int n = 0;
    /* LAB 30 BEGIN your answers to labs/lab30-microscaling/quiz.md, one ANSWER("Qnn", "answer") line per question */
    ANSWER("Q01", "16");
    ANSWER("Q02", "0.8");
    ANSWER("Q03", "65504");
    ANSWER("Q03b", "0.1 = 1/10 has the factor 5 in its denominator, so its binary expansion 0.000110011... never "
                   "ends; every binary format keeps a finite number of mantissa bits and rounds it");
    ANSWER("Q04", "-24");
    ANSWER("Q05", "2000");
    ANSWER("Q06", "7");
    ANSWER("Q07", "B");
    ANSWER("Q08", "B");
    ANSWER("Q09", "0.0009765625");
    ANSWER("Q10", "0.5");
    ANSWER("Q11", "64");
    ANSWER("Q12", "1.5");
    ANSWER("Q13", "25");
    ANSWER("Q14", "A");
    ANSWER("Q15", "3");
    ANSWER("Q16", "64");
    ANSWER("Q17", "A");
    ANSWER("Q18", "2");
    ANSWER("Q19", "12");
    ANSWER("Q19b", "1.875");
    ANSWER("Q20", "B");
    ANSWER("Q21", "A");
    ANSWER("Q22", "A");
    ANSWER("Q23", "B");
    ANSWER("Q24", "A");
    ANSWER("Q25", "448");
    ANSWER("Q25b", "256");
    ANSWER("Q26", "10.01");
    ANSWER("Q27", "512");
    ANSWER("Q28", "0.2");
    ANSWER("Q29", "4");
    ANSWER("Q30", "-8");
    ANSWER("Q30b", "4.25");
    ANSWER("Q30c", "4.5");
    ANSWER("Q30d", "each block's scale comes from the block's own amax at the moment of the cast, in one pass "
                   "over 32 values that are already in registers, so no history of past amaxes is needed, and "
                   "an outlier only coarsens its own block instead of the whole tensor");
    /* LAB 30 END */
    return n;
}
