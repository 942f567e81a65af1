/* parse.h: strict parsing of numbers from command-line arguments and config values. */
#ifndef MIXPAR_BASE_PARSE_H
#define MIXPAR_BASE_PARSE_H

#include <stdbool.h>
#include <stdint.h>

/* Each returns false (and leaves *out alone) unless the whole string is a valid value in range:
 * "12abc", "", " 3" and overflow are all rejected. */
bool parse_double(const char *s, double *out);  /* 0.1, -1e-3, inf, nan, 0x1p-24 */
bool parse_i64(const char *s, int64_t *out);    /* decimal or 0x hex */
bool parse_u64(const char *s, uint64_t *out);
/* Counts with an optional suffix: 124M, 1.5B, 7e9, 50257; K/M/B/T = 1e3/1e6/1e9/1e12. */
bool parse_count(const char *s, double *out);
/* Byte sizes: 512, 24GB, 24GiB, 80G, 1.5TB; GB = 1e9, GiB = 2^30, a bare G means GiB. */
bool parse_bytes(const char *s, double *out);

#endif
