/* test_course_answer.c: Criterion tests of course/answer.h, how the course reads and judges one answer (lab 30's
 * quiz and the graded answers files, part Q): numbers within a tolerance, letters, text, and what is unreadable. */
#include <criterion/criterion.h>
#include <string.h>

#include "course/answer.h"

Test(course_answer, kinds_by_name_round_trip) {
    for (int k = QUIZ_NUMBER; k <= QUIZ_TEXT; k++) {
        quiz_kind back;
        cr_assert(quiz_kind_from_name(quiz_kind_name((quiz_kind)k), &back));
        cr_expect_eq(back, k);
    }
    quiz_kind unused;
    cr_expect_not(quiz_kind_from_name("letter", &unused));
    cr_expect_not(quiz_kind_from_name(NULL, &unused));
}

Test(course_answer, a_number_is_one_finite_number_and_nothing_else) {
    static const char *const good[] = {"16", "0.25", "-8", "1e-3", "+2", "0x1p-24", "65519.99609375"};
    static const char *const bad[] = {"", " 16", "16 MB", "2^10", "inf", "nan", "1,5", "sixteen", "1e999"};
    double v;
    char why[160];
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        cr_expect(quiz_answer_readable(QUIZ_NUMBER, good[i], why, sizeof why), "'%s' is a number", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_expect_not(quiz_answer_number(bad[i], &v), "'%s' is not one finite number", bad[i]);
        cr_expect_not(quiz_answer_readable(QUIZ_NUMBER, bad[i], why, sizeof why));
        cr_expect(strstr(why, "only the number") != NULL, "the reason says what to write: %s", why);
    }
}

Test(course_answer, numbers_right_within_the_larger_tolerance) {
    cr_expect(quiz_answer_right(QUIZ_NUMBER, "2000", 2000, 0, 0, 0));
    cr_expect_not(quiz_answer_right(QUIZ_NUMBER, "2001", 2000, 0, 0, 0), "exact means exact");
    cr_expect(quiz_answer_right(QUIZ_NUMBER, "1.87", 1.875, 0, 1e-2, 0), "within 1%");
    cr_expect_not(quiz_answer_right(QUIZ_NUMBER, "1.8", 1.875, 0, 1e-2, 0), "4% off");
    cr_expect(quiz_answer_right(QUIZ_NUMBER, "0.0009", 0.0009765625, 0, 0, 1e-4), "the absolute tolerance");
    cr_expect(quiz_answer_right(QUIZ_NUMBER, "-24", -24, 0, 1e-3, 0), "negative expected values");
    cr_expect_not(quiz_answer_right(QUIZ_NUMBER, "24", -24, 0, 1e-3, 0));
    cr_expect_not(quiz_answer_right(QUIZ_NUMBER, "about 2000", 2000, 0, 1, 1), "unreadable is never right");
}

Test(course_answer, letters_and_text) {
    char why[160];
    cr_expect(quiz_answer_right(QUIZ_CHOICE, "b", 0, 'B', 0, 0), "either case");
    cr_expect(quiz_answer_right(QUIZ_CHOICE, "B", 0, 'b', 0, 0));
    cr_expect_not(quiz_answer_right(QUIZ_CHOICE, "C", 0, 'B', 0, 0));
    cr_expect_not(quiz_answer_readable(QUIZ_CHOICE, "B.", why, sizeof why), "one letter only");
    cr_expect_not(quiz_answer_readable(QUIZ_CHOICE, "E", why, sizeof why), "A to D");
    cr_expect(quiz_answer_readable(QUIZ_TEXT, "because the exponent range is fp32's", why, sizeof why));
    cr_expect_not(quiz_answer_readable(QUIZ_TEXT, "", why, sizeof why));
    cr_expect_not(quiz_answer_right(QUIZ_TEXT, "any sentence", 0, 0, 1, 1), "text is read, never scored");
}
