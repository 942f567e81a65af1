/* labinfo.h: a lab's description (lab.json) and its hidden tests (grader/hidden/labNN/tests.json). */
#ifndef MIXPAR_GRADER_LABINFO_H
#define MIXPAR_GRADER_LABINFO_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char name[128];
    double points;
    char part[128];
    double time_limit_s;
    bool hidden;
} lab_test;

/* A question of the lab's answers file (lab.json "questions"; labs/labNN-slug/answers.md holds its text and the
 * answer line "Qn: ..."). The expected answer is the reference answers file's (the instructor's edition), or,
 * with from_test, the value the graded code computes: the first near observation (MPT_OBSERVE_NEAR) of
 * (or the OBSERVATION-th, from 0) of `labNN_tests --observe FROM_TEST SEED`, run in the sandbox, so a question about the student's own run expects
 * what that run showed. */
typedef struct {
    char id[16];            /* "Q1", "Q2b" */
    int kind;               /* quiz_kind (course/answer.h) */
    double points, rel_tol, abs_tol;
    char from_test[128];    /* "" or the test whose observation is the expected value */
    char seed[24];          /* its seed (the one experiment.sh uses), decimal */
    int observation;        /* which of its near observations, from 0 */
} lab_question;

enum { LAB_MAX_QUESTIONS = 32 };

typedef struct {
    int lab;
    char dir[256];       /* labs/lab03-float-formats */
    char title[256];
    char title_zh[128];
    char files[16][256]; /* core files holding this lab's regions */
    int nfiles;
    double time_limit_s;
    long memory_limit_mb;
    lab_test *tests;
    int ntests;
    char forbidden[32][64]; /* identifiers a region of this lab may not use (lab.json "forbidden") */
    int nforbidden;
    char forbidden_why[256];
    char forbidden_instructions[16][32]; /* mnemonics a region file's object may not gain (lab.json) */
    int nforbidden_instructions;
    double submission_limit_s; /* all of a submission's tests together (lab.json "submission_limit_s") */
    char hidden_visibility[32]; /* Gradescope visibility of hidden tests (lab.json; default "hidden") */
    int requires[16];       /* labs whose regions this lab's tests run too (lab.json "requires") */
    double hours;           /* hours a student should plan for it (lab.json "hours"); 0 when not given */
    int nrequires;
    lab_question questions[LAB_MAX_QUESTIONS]; /* lab.json "questions", in order */
    int nquestions;
} lab_info;

/* Loads lab `lab` from the tree at `root`; false with a message naming the file and key that is wrong. */
bool lab_load(const char *root, int lab, lab_info *out, char *err, size_t errlen);
void lab_free(lab_info *info);
/* The numbers of the labs under root/labs, ascending; returns how many. */
int lab_numbers(const char *root, int *nums, int max);
/* "labs/lab03-float-formats" for lab 3, or false. */
bool lab_dir(const char *root, int lab, char *out, size_t outlen);

#endif
