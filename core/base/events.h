/* events.h: the event writer: one JSON object per line, one file per rank (schema in EVENTS.md). */
#ifndef MIXPAR_BASE_EVENTS_H
#define MIXPAR_BASE_EVENTS_H

#include <stdbool.h>
#include <stddef.h>

#define EVENTS_SCHEMA_VERSION 1

typedef struct ev_writer ev_writer;

/* Opens (creating the directory and truncating the file) <run_dir>/events.rank<rank>.jsonl.
 * Bad paths stop with a clear message (exit 2). */
ev_writer *ev_open(const char *run_dir, int rank);
/* The same, but keeps what the file holds and appends (a resumed run continues its stream). */
ev_writer *ev_open_append(const char *run_dir, int rank);
void ev_close(ev_writer *w);
const char *ev_path(const ev_writer *w);

/* A line is built between ev_begin and ev_end and written with one write(2), so a reader following
 * the file sees whole lines (or, after a crash, one truncated last line it can skip).
 *
 *     ev_begin(w, "step");              // {"v":1,"kind":"step","rank":0,"t":12.5
 *     ev_int(w, "step", 10);            // ,"step":10
 *     ev_num(w, "loss", 3.25);          // ,"loss":3.25
 *     ev_end(w);                        // }\n
 */
void ev_begin(ev_writer *w, const char *kind);
void ev_int(ev_writer *w, const char *key, long long value);
void ev_num(ev_writer *w, const char *key, double value); /* non-finite -> "nan", "inf", "-inf" */
void ev_str(ev_writer *w, const char *key, const char *value);
void ev_bool(ev_writer *w, const char *key, bool value);
void ev_ints(ev_writer *w, const char *key, const long long *values, size_t n);
void ev_nums(ev_writer *w, const char *key, const double *values, size_t n);
void ev_object_begin(ev_writer *w, const char *key); /* nested object: ,"key":{ */
/* A value that is already JSON text (an object from cJSON_PrintUnformatted, say), written as it is. */
void ev_json(ev_writer *w, const char *key, const char *json);
void ev_object_end(ev_writer *w);
void ev_end(ev_writer *w);

/* A "mem" event with the allocator's current and peak bytes for every tag. */
void ev_mem(ev_writer *w, long long step);

#endif
