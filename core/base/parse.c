/* parse.c: whole-string number parsing with suffixes, so "--seq 1O24" is an error, not 1. */
#include "base/parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool parse_double(const char *s, double *out) {
    if (!s || !*s || strchr(" \t\n", s[0])) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE) {
        /* ERANGE for underflow still gives a usable (subnormal or zero) value: accept it. */
        if (!(errno == ERANGE && end != s && !*end && v > -1e-300 && v < 1e-300)) return false;
    }
    *out = v;
    return true;
}

bool parse_i64(const char *s, int64_t *out) {
    if (!s || !*s || strchr(" \t\n", s[0])) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (end == s || *end || errno) return false;
    *out = v;
    return true;
}

bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || s[0] == '-' || strchr(" \t\n", s[0])) return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (end == s || *end || errno) return false;
    *out = v;
    return true;
}

/* Split "1.5B" into 1.5 and "B". */
static bool split_number(const char *s, double *num, const char **suffix) {
    if (!s || !*s || strchr(" \t\n+-", s[0])) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0) || v > 1e30) return false;
    *num = v;
    *suffix = end;
    return true;
}

bool parse_count(const char *s, double *out) {
    double v;
    const char *suf;
    if (!split_number(s, &v, &suf)) return false;
    static const struct { const char *name; double mult; } units[] = {
        {"", 1}, {"K", 1e3}, {"k", 1e3}, {"M", 1e6}, {"B", 1e9}, {"G", 1e9}, {"T", 1e12}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(suf, units[i].name) == 0) {
            *out = v * units[i].mult;
            return true;
        }
    return false;
}

bool parse_bytes(const char *s, double *out) {
    double v;
    const char *suf;
    if (!split_number(s, &v, &suf)) return false;
    static const struct { const char *name; double mult; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1024.0}, {"KiB", 1024.0}, {"KB", 1e3}, {"M", 1048576.0}, {"MiB", 1048576.0},
        {"MB", 1e6}, {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9}, {"T", 1099511627776.0},
        {"TiB", 1099511627776.0}, {"TB", 1e12}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(suf, units[i].name) == 0) {
            *out = v * units[i].mult;
            return true;
        }
    return false;
}
