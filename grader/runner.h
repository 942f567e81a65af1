/* runner.h: runs one test, sandboxed, with time, memory, process and output limits, and collects what it observed. */
#ifndef MIXPAR_GRADER_RUNNER_H
#define MIXPAR_GRADER_RUNNER_H

#include <stdbool.h>
#include <stddef.h>

/* A host folder made visible, read-only, at `inside` in the sandbox (the same path when inside is NULL). */
typedef struct {
    const char *host, *inside;
} run_bind;

typedef struct {
    const char *workdir;   /* the test's working folder inside the sandbox (an absolute path) */
    const run_bind *binds; /* what it may read besides the system folders (/usr, /etc, ...) */
    int nbinds;
    double time_limit_s;
    long memory_mb;        /* the whole process tree's resident memory, and each process's address space */
    int max_processes;
} run_spec;

typedef struct {
    bool finished;         /* exited by itself (not killed for time or memory) */
    int exit_code;         /* when finished and not signaled */
    int signal;            /* the signal that ended it, or 0 */
    bool timed_out, out_of_memory;
    double seconds;
    char *output;          /* stdout + stderr, capped; caller frees */
    size_t output_len;
    bool output_truncated;
    char *observations;    /* descriptor 3 (tests/harness/mptest.h), capped; caller frees */
    size_t observations_len;
    bool observations_truncated;
} run_result;

/* Which protections the kernel granted on this machine (probed once): a line for the grade's header. */
const char *runner_protections(void);

/* Runs `binary --observe name seed` (binary: its path inside the sandbox) under `spec`. The process and every
 * descendant are gone when this returns. */
void run_observed(const char *binary, const char *name, const char *seed, const run_spec *spec, run_result *result);
void run_result_free(run_result *r);

/* A sentence on how a run ended, for a test's output ("TIMEOUT after 10 s ..."), or "" for a normal exit. */
const char *run_ending(const run_result *r, double limit_s, long memory_mb, char *buf, size_t cap);

#endif
