/* data_err.h: how data/ functions report bad input: fill a data_err to be tested or shown, or stop (exit 2). */
#ifndef MIXPAR_DATA_DATA_ERR_H
#define MIXPAR_DATA_DATA_ERR_H

#include <stdbool.h>

/* The three parts of the project's error message (see base/error.h): what was expected, what was
 * found (with the byte offset, key or position that is wrong) and, when there is one, what to do.
 * Functions that can meet bad input take a `data_err *err`:
 *   - err == NULL: the error is printed and the program exits with code 2 (what a command wants);
 *   - err != NULL: the message is stored there and the function returns false (or -1), so a caller
 *     or a test can inspect it.
 * Usage inside such a function:
 *     if (width != 2 && width != 4)
 *         return DATA_ERR(err, "token width 2 or 4", NULL, "width %u at byte offset 8", width);
 */
typedef struct {
    char expected[256];
    char found[512];
    char hint[256];
    const char *file; /* where in the source the error was raised, for the printed message */
    int line;
} data_err;

/* Records (or, with err == NULL, prints and exits 2). Always returns false. */
bool data_err_set(data_err *err, const char *file, int line, const char *expected, const char *hint,
                  const char *found_fmt, ...) __attribute__((format(printf, 6, 7)));
#define DATA_ERR(err, expected, hint, ...) data_err_set((err), __FILE__, __LINE__, (expected), (hint), __VA_ARGS__)

/* Prints a recorded error in the project's format and exits with code 2. */
_Noreturn void data_err_exit(const data_err *err);

/* "expected: ...; found: ...; hint: ..." on one line, for logs and test messages. */
const char *data_err_line(const data_err *err, char *buf, int buf_len);

#endif
