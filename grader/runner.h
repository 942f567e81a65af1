/* runner.h: runs one test in its own process group with time, memory and output limits. */
#ifndef MIXPAR_GRADER_RUNNER_H
#define MIXPAR_GRADER_RUNNER_H

#include <stdbool.h>

typedef struct {
    bool passed;
    bool timed_out;
    double seconds;
    char *output;       /* what the test printed (capped), then the grader's own note; caller frees */
} test_result;

/* Runs `binary --run name` in `workdir`. It passes only if the test process hands back the random token
 * the grader gave it (see tests/harness/mptest.h) and exits 0: a test that loops, crashes, calls exit(0)
 * or prints fake results fails, and only that test. */
void run_test(const char *binary, const char *workdir, const char *name, double time_limit_s, long memory_mb,
              test_result *result);

#endif
