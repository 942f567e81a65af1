/* data_err.c: recording data errors for callers and tests, or printing them and exiting 2. */
#include "data/data_err.h"

#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool data_err_set(data_err *err, const char *file, int line, const char *expected, const char *hint,
                  const char *found_fmt, ...) {
    data_err local;
    data_err *e = err ? err : &local;
    memset(e, 0, sizeof *e);
    e->file = file;
    e->line = line;
    snprintf(e->expected, sizeof e->expected, "%s", expected);
    snprintf(e->hint, sizeof e->hint, "%s", hint ? hint : "");
    va_list ap;
    va_start(ap, found_fmt);
    vsnprintf(e->found, sizeof e->found, found_fmt, ap);
    va_end(ap);
    if (!err) data_err_exit(e);
    return false;
}

void data_err_exit(const data_err *err) {
    mp_fail_input_hint(err->file ? err->file : "core/data/data_err.c", err->line, err->expected, err->hint, "%s",
                       err->found);
}

const char *data_err_line(const data_err *err, char *buf, int buf_len) {
    snprintf(buf, buf_len, "expected: %s; found: %s%s%s", err->expected, err->found, err->hint[0] ? "; hint: " : "",
             err->hint);
    return buf;
}
