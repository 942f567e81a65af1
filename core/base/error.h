/* error.h: error reporting that names the place, what was expected, what was found and what to do. */
#ifndef MIXPAR_BASE_ERROR_H
#define MIXPAR_BASE_ERROR_H

/* Exit codes used across the project. */
enum {
    EXIT_BAD_INPUT = 2, /* bad usage, arguments, files or configs: the user can fix it */
    EXIT_INTERNAL = 3,  /* a broken invariant inside mixpar: a bug to report */
};

/* Stop on bad input: prints
 *     mixpar: error (fp/format.c:120)
 *       expected: <expected>
 *       found:    <found, printf-style>
 *       hint:     <hint>            (only when set with mp_set_hint or MP_FAIL_HINT)
 * and exits with EXIT_BAD_INPUT. */
_Noreturn void mp_fail_input(const char *file, int line, const char *expected, const char *found_fmt, ...)
    __attribute__((format(printf, 4, 5)));
_Noreturn void mp_fail_input_hint(const char *file, int line, const char *expected, const char *hint,
                                  const char *found_fmt, ...) __attribute__((format(printf, 5, 6)));
/* The same message without stopping: for a caller that must let others (the other ranks) know first. */
void mp_print_input_error(const char *file, int line, const char *expected, const char *hint, const char *found_fmt,
                          ...) __attribute__((format(printf, 5, 6)));
/* Stop on a broken invariant (a bug), exit EXIT_INTERNAL. */
_Noreturn void mp_fail_internal(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A plain usage error for command-line tools: "mixpar <cmd>: <message>" and exit 2. */
_Noreturn void mp_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Bad input: MP_FAIL("a number such as 0.1 or 1e-3", "'%s'", arg); */
#define MP_FAIL(expected, ...) mp_fail_input(__FILE__, __LINE__, expected, __VA_ARGS__)
#define MP_FAIL_HINT(expected, hint, ...) mp_fail_input_hint(__FILE__, __LINE__, expected, hint, __VA_ARGS__)
/* Invariant: MP_ASSERT(n >= 0, "negative size %d", n); */
#define MP_ASSERT(cond, ...) \
    do { \
        if (!(cond)) mp_fail_internal(__FILE__, __LINE__, #cond, __VA_ARGS__); \
    } while (0)

#endif
