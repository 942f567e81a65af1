/* source.h: a run's event files (events.rank<R>.jsonl): read whole, followed as they grow, or replayed in time order. */
#ifndef MIXPAR_VIZ_SOURCE_H
#define MIXPAR_VIZ_SOURCE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

enum {
    VZ_SCHEMA_VERSION = 1, /* the event schema this reader understands (core/base/EVENTS.md) */
    VZ_MAX_RANKS = 256,    /* rank files beyond this are ignored */
    VZ_SOURCE_RESET = -1,  /* vz_source_poll: a file shrank or was replaced; start over */
};

/* Called for each well-formed event of a version this reader knows: an object with an integer "v" and a
 * string "kind". rank is the rank of the file it came from. The event is freed after the call. */
typedef void (*vz_event_fn)(void *ctx, int rank, const cJSON *event);

/* One rank's file. Lines are consumed as they complete: a live writer appends whole lines with one
 * write(2), but a reader polling the size can still catch half a line (or, after a crash, a last line that
 * never ends); the partial text waits here until its newline arrives. */
typedef struct {
    int rank;
    char path[4096];
    bool exists;                      /* the file has been seen */
    long long offset;                 /* bytes read so far, including the partial line */
    unsigned long long dev, ino;      /* identity, to notice a file replaced under the same name */
    char *partial;                    /* an incomplete last line */
    size_t partial_len, partial_cap;
    long long lines, events;          /* lines read; events handed on */
    long long malformed, newer, truncated;
    long long line_number;            /* lines seen so far, blank ones too: the last one's number in the file */
    long long first_malformed;        /* line number (from 1) of the first malformed line; 0 when none */
} vz_file;

typedef struct {
    char dir[4096];
    vz_file *files[VZ_MAX_RANKS]; /* by rank; NULL until a file (or the run header's world) names the rank */
    int nranks;                   /* 1 + the highest rank known */
    int newest_version;           /* the highest schema version met, when newer than VZ_SCHEMA_VERSION */
    long long lines, events, malformed, newer, truncated; /* totals over files */
    char error[256];              /* the last read error ("" when none) */
} vz_source;

/* Opens a run directory. Returns 0, or -1 with a reason in `why` (missing directory, not a directory,
 * no events.rank*.jsonl inside). */
int vz_source_open(vz_source *s, const char *dir, char *why, size_t why_len);
/* The same for the live view, which may start before the trainer: an existing directory without rank files
 * is accepted, and rank 0's file is expected (read once it appears). */
int vz_source_open_waiting(vz_source *s, const char *dir, char *why, size_t why_len);
void vz_source_close(vz_source *s);
/* The run header says how many ranks there are: ranks without a file yet are shown as waiting. */
void vz_source_expect(vz_source *s, int world);
/* Reads what every file gained since the last call (new files too) and hands each complete line on.
 * Returns the number of events handed on, or VZ_SOURCE_RESET when a file shrank, vanished or was replaced
 * (a new run truncates its stream): the source has rewound every file, and the caller must clear what it
 * built and poll again. */
int vz_source_poll(vz_source *s, vz_event_fn fn, void *ctx);
/* After the last poll of a finished run: a partial last line will never complete; count it as truncated. */
void vz_source_finish(vz_source *s);
/* Files that exist, out of s->nranks. */
int vz_source_files_present(const vz_source *s);
/* "events of schema version 2 skipped: this reader knows version 1 (rebuild mixpar)", or "" when none. */
const char *vz_source_version_note(const vz_source *s, char *buf, size_t n);

/* Replay: every line of every file, merged in time order (a rank's time restarts when a resumed run appends
 * to its file; such a restart continues from where the file's clock had reached). */
typedef struct {
    double t;     /* seconds, made monotonic per file */
    int rank;
    size_t offset, length; /* the line within its file's text */
} vz_replay_line;

typedef struct {
    char *text[VZ_MAX_RANKS];
    vz_replay_line *lines;
    size_t nlines, next;
    double t_begin, t_end;
} vz_replay;

/* Reads the source's files whole (malformed, newer and truncated lines are counted in s and left out). */
void vz_replay_load(vz_replay *r, vz_source *s);
/* Hands on every line with t <= until not yet handed on; returns how many. */
size_t vz_replay_until(vz_replay *r, double until, vz_event_fn fn, void *ctx);
bool vz_replay_done(const vz_replay *r);
void vz_replay_free(vz_replay *r);

/* Reading event fields. Numbers may be written as the strings "nan", "inf" and "-inf" (EVENTS.md). */
double vz_json_num(const cJSON *obj, const char *key, double fallback);
long long vz_json_int(const cJSON *obj, const char *key, long long fallback);
const char *vz_json_str(const cJSON *obj, const char *key, const char *fallback);
bool vz_json_bool(const cJSON *obj, const char *key, bool fallback);

#endif
