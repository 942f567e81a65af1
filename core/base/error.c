/* error.c: the messages behind MP_FAIL and MP_ASSERT. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Paths are printed from core/ down ("fp/format.c"), which is how students find the file. */
static const char *short_path(const char *file) {
    const char *core = strstr(file, "core/");
    return core ? core + 5 : file;
}

static void print_input_error(const char *file, int line, const char *expected, const char *hint,
                              const char *found_fmt, va_list ap) {
    fflush(stdout);
    fprintf(stderr, "mixpar: error (%s:%d)\n  expected: %s\n  found:    ", short_path(file), line, expected);
    vfprintf(stderr, found_fmt, ap);
    fputc('\n', stderr);
    if (hint && *hint) fprintf(stderr, "  hint:     %s\n", hint);
    fflush(stderr);
}

static _Noreturn void fail_input(const char *file, int line, const char *expected, const char *hint,
                                 const char *found_fmt, va_list ap) {
    print_input_error(file, line, expected, hint, found_fmt, ap);
    exit(EXIT_BAD_INPUT);
}

void mp_print_input_error(const char *file, int line, const char *expected, const char *hint, const char *found_fmt,
                          ...) {
    va_list ap;
    va_start(ap, found_fmt);
    print_input_error(file, line, expected, hint, found_fmt, ap);
    va_end(ap);
}

void mp_fail_input(const char *file, int line, const char *expected, const char *found_fmt, ...) {
    va_list ap;
    va_start(ap, found_fmt);
    fail_input(file, line, expected, NULL, found_fmt, ap);
}

void mp_fail_input_hint(const char *file, int line, const char *expected, const char *hint, const char *found_fmt,
                        ...) {
    va_list ap;
    va_start(ap, found_fmt);
    fail_input(file, line, expected, hint, found_fmt, ap);
}

void mp_fail_internal(const char *file, int line, const char *cond, const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "mixpar: internal error (%s:%d): %s failed\n  ", short_path(file), line, cond);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n  hint:     this is a bug in mixpar; please report it with the command that caused it\n");
    exit(EXIT_INTERNAL);
}

void mp_usage_error(const char *cmd, const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "mixpar %s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n  (run 'mixpar %s --help' for usage)\n", cmd);
    exit(EXIT_BAD_INPUT);
}
