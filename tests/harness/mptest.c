/* mptest.c: the lab test harness's runner: registry, checks, --list/--run, and the observations the grader compares. */
#include "mptest.h"

#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_TESTS = 512, MAX_SHOWN_FAILURES = 12, OBSERVATION_FD = 3 };

static struct {
    const char *name;
    mpt_fn fn;
    const char *file;
} tests[MAX_TESTS];
static int ntests;
static int failures;
static jmp_buf stop_test;
static uint64_t seed = 1;
static FILE *observations; /* descriptor 3 under --observe; NULL otherwise */

uint64_t mpt_seed(void) { return seed; }

/* Records for the grader (grader/README.md has the format), one line each:
 *     v OK FILE:LINE COUNT HASH     exact values (MPT_CHECK_EQ_*, MPT_CHECK_FLOAT_BITS, MPT_OBSERVE)
 *     c OK FILE:LINE COUNT HASH     conditions (MPT_CHECK, MPT_REQUIRE)
 *     f 0 FILE:LINE COUNT 0         failures reported by hand (mpt_fail)
 *     n OK FILE:LINE GOT EXPECTED REL ABS   a near check, in C99 hex floats
 *     e OK end                      the test came back
 * Consecutive v, c or f records from one line fold into one (a count and a hash of the values in order), so a
 * loop over 2^20 inputs is one line. OK is the test's own judgement (AND over a fold), used only where no
 * reference exists (the student edition); the grader otherwise compares with the reference run's records. */
static struct {
    char kind;
    int ok;
    const char *file;
    int line;
    uint64_t count, hash;
} pending;

static void flush_pending(void) {
    if (!observations || !pending.kind) return;
    const char *slash = strrchr(pending.file, '/');
    fprintf(observations, "%c %d %s:%d %llu %016llx\n", pending.kind, pending.ok, slash ? slash + 1 : pending.file,
            pending.line, (unsigned long long)pending.count, (unsigned long long)pending.hash);
    pending.kind = 0;
}

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void fold(char kind, int ok, const char *file, int line, uint64_t value) {
    if (!observations) return;
    if (pending.kind != kind || pending.line != line || strcmp(pending.file, file) != 0) {
        flush_pending();
        pending.kind = kind;
        pending.ok = 1;
        pending.file = file;
        pending.line = line;
        pending.count = 0;
        pending.hash = 0x6d70746573740000ULL;
    }
    pending.ok &= ok;
    pending.count++;
    pending.hash = mix64(pending.hash ^ mix64(value + pending.count));
}

static void record_near(int ok, const char *file, int line, double got, double expected, double rel, double abs_tol) {
    if (!observations) return;
    flush_pending();
    const char *slash = strrchr(file, '/');
    fprintf(observations, "n %d %s:%d %a %a %a %a\n", ok, slash ? slash + 1 : file, line, got, expected, rel, abs_tol);
}

void mpt_observe(const char *file, int line, uint64_t value) { fold('v', 1, file, line, value); }

void mpt_observe_near(const char *file, int line, double value, double rel_tol, double abs_tol) {
    record_near(1, file, line, value, value, rel_tol, abs_tol);
}

static void observe_near_array(const char *file, int line, const float *got, const float *want_f, const double *want_d,
                               long n, double rel_tol, double abs_tol) {
    if (!observations) return;
    double got_sum = 0, want_sum = 0, tol = 0;
    int ok = 1;
    uint64_t key = mix64(seed ^ 0x6e656172ULL);
    for (long i = 0; i < n; i++) {
        double want = want_f ? (double)want_f[i] : want_d[i];
        if (!isfinite(want)) continue;
        double w = 0.5 + (double)(mix64(key + (uint64_t)i) >> 11) * 0x1p-53;
        double allowed = abs_tol + rel_tol * fabs(want);
        ok &= fabs((double)got[i] - want) <= allowed;
        got_sum += w * (double)got[i];
        want_sum += w * want;
        tol += w * allowed;
    }
    /* a little more for the sums' own rounding */
    record_near(ok, file, line, got_sum, want_sum, 0, 2 * tol + 1e-12 * (fabs(want_sum) + 1));
}

void mpt_observe_near_f32(const char *file, int line, const float *got, const float *want, long n, double rel_tol,
                          double abs_tol) {
    observe_near_array(file, line, got, want, NULL, n, rel_tol, abs_tol);
}

void mpt_observe_near_f64(const char *file, int line, const float *got, const double *want, long n, double rel_tol,
                          double abs_tol) {
    observe_near_array(file, line, got, NULL, want, n, rel_tol, abs_tol);
}

void mpt_check_cond(const char *file, int line, int ok) { fold('c', ok, file, line, (uint64_t)ok); }

void mpt_register(const char *name, mpt_fn fn, const char *file) {
    if (ntests == MAX_TESTS) {
        fprintf(stderr, "mptest: more than %d tests in one binary\n", MAX_TESTS);
        exit(3);
    }
    for (int i = 0; i < ntests; i++)
        if (strcmp(tests[i].name, name) == 0) {
            fprintf(stderr, "mptest: two tests named '%s' (%s and %s)\n", name, tests[i].file, file);
            exit(3);
        }
    tests[ntests].name = name;
    tests[ntests].fn = fn;
    tests[ntests].file = file;
    ntests++;
}

int mpt_failures(void) { return failures; }

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void report(const char *file, int line, const char *fmt, va_list ap) {
    failures++;
    if (failures > MAX_SHOWN_FAILURES) {
        if (failures == MAX_SHOWN_FAILURES + 1) printf("    ... more failed checks not shown\n");
        return;
    }
    printf("    %s:%d: ", base_name(file), line);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
}

void mpt_fail(const char *file, int line, const char *fmt, ...) {
    fold('f', 0, file, line, 0);
    va_list ap;
    va_start(ap, fmt);
    report(file, line, fmt, ap);
    va_end(ap);
}

void mpt_fail_stop(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report(file, line, fmt, ap);
    va_end(ap);
    longjmp(stop_test, 1);
}

/* The failure messages below go through report(), not mpt_fail(), so a failed value check is one record. */
static void report_fmt(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report_fmt(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    report(file, line, fmt, ap);
    va_end(ap);
}

void mpt_check_u64(const char *file, int line, uint64_t expected, uint64_t got, int hex, const char *what) {
    fold('v', expected == got, file, line, got);
    if (expected == got) return;
    if (hex)
        report_fmt(file, line, "%s\n      expected: 0x%llx\n      got:      0x%llx", what, (unsigned long long)expected,
                   (unsigned long long)got);
    else
        report_fmt(file, line, "%s\n      expected: %llu\n      got:      %llu", what, (unsigned long long)expected,
                   (unsigned long long)got);
}

void mpt_check_i64(const char *file, int line, int64_t expected, int64_t got, const char *what) {
    fold('v', expected == got, file, line, got);
    if (expected != got)
        report_fmt(file, line, "%s\n      expected: %lld\n      got:      %lld", what, (long long)expected,
                   (long long)got);
}

void mpt_check_near(const char *file, int line, double expected, double got, double rel_tol, double abs_tol,
                    const char *what) {
    double diff = fabs(got - expected);
    int ok = diff <= abs_tol + rel_tol * fabs(expected);
    /* got, expected, rel, abs: the grader takes the tolerance and the expected value from the reference run */
    record_near(ok, file, line, got, expected, rel_tol, abs_tol);
    if (ok) return;
    report_fmt(file, line,
               "%s\n      expected: %.10g (tolerance: abs %g + rel %g)\n      got:      %.10g (off by %.3g)", what,
               expected, abs_tol, rel_tol, got, diff);
}

void mpt_check_float_bits(const char *file, int line, float expected, float got, const char *what) {
    uint32_t e, g;
    memcpy(&e, &expected, 4);
    memcpy(&g, &got, 4);
    fold('v', e == g, file, line, g);
    if (e != g)
        report_fmt(file, line, "%s\n      expected: %.9g (bits 0x%08x)\n      got:      %.9g (bits 0x%08x)", what,
                   (double)expected, e, (double)got, g);
}

static int find_test(const char *name) {
    for (int i = 0; i < ntests; i++)
        if (strcmp(tests[i].name, name) == 0) return i;
    return -1;
}

static int run_one(int index) {
    setvbuf(stdout, NULL, _IONBF, 0); /* output up to a crash must survive it */
    failures = 0;
    if (setjmp(stop_test) == 0) tests[index].fn();
    return failures ? 1 : 0;
}

/* --observe: the records go to descriptor 3; the last one says the test came back. Output before a crash is
 * lost with the buffer, which costs nothing: a test that crashes fails anyway. */
static int observe_one(int index, const char *seed_text) {
    char *end;
    seed = strtoull(seed_text, &end, 16);
    if (!*seed_text || *end) {
        fprintf(stderr, "mptest: the seed '%s' is not a hex number\n", seed_text);
        return 2;
    }
    observations = fdopen(OBSERVATION_FD, "w");
    if (!observations) {
        fprintf(stderr, "mptest: --observe needs descriptor %d open for writing (the grader opens it)\n",
                OBSERVATION_FD);
        return 2;
    }
    setvbuf(observations, NULL, _IOFBF, 1 << 16);
    int rc = run_one(index);
    flush_pending();
    fprintf(observations, "e %d end\n", rc == 0);
    fflush(observations);
    return rc;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Without the grader: every test in a child process with an alarm, a line per test, a total. */
static int run_all(const char *filter) {
    int limit = 60;
    const char *env = getenv("MPTEST_TIMEOUT");
    if (env && atoi(env) > 0) limit = atoi(env);
    int passed = 0, failed = 0;
    for (int i = 0; i < ntests; i++) {
        if (filter && !strstr(tests[i].name, filter)) continue;
        fflush(stdout);
        double t0 = now_s();
        pid_t pid = fork();
        if (pid == 0) {
            alarm((unsigned)limit);
            printf("== Test %s ==\n", tests[i].name);
            exit(run_one(i));
        }
        int status = 0;
        waitpid(pid, &status, 0);
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
            printf("    TIMEOUT after %d s (likely an infinite loop)\n", limit);
        else if (WIFSIGNALED(status))
            printf("    crashed: %s\n", strsignal(WTERMSIG(status)));
        printf("   %s (%.2fs)\n", ok ? "OK" : "FAIL", now_s() - t0);
        ok ? passed++ : failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

int main(int argc, char **argv) {
    const char *seed_env = getenv("MPTEST_SEED");
    if (seed_env && *seed_env) seed = strtoull(seed_env, NULL, 16);
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < ntests; i++) printf("%s\n", tests[i].name);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--run") == 0) {
        int index = find_test(argv[2]);
        if (index < 0) {
            fprintf(stderr, "no test named '%s' (see --list)\n", argv[2]);
            return 2;
        }
        return run_one(index);
    }
    if (argc == 4 && strcmp(argv[1], "--observe") == 0) {
        int index = find_test(argv[2]);
        if (index < 0) {
            fprintf(stderr, "no test named '%s' (see --list)\n", argv[2]);
            return 2;
        }
        return observe_one(index, argv[3]);
    }
    if (argc == 1 || (argc == 3 && strcmp(argv[1], "--filter") == 0)) return run_all(argc == 3 ? argv[2] : NULL);
    fprintf(stderr, "usage: %s [--list | --run NAME | --observe NAME SEED | --filter TEXT]\n", argv[0]);
    return 2;
}
