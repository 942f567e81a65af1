/* trace.c: `mixpar trace`: a run's spans, comm calls and counters as a Chrome trace (the JSON object format
 * that Perfetto and chrome://tracing open): one process per rank, a compute thread and a comm thread. */
#include "base/error.h"
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: mixpar trace RUN_DIR [-o FILE]\n"
    "\n"
    "Writes the run's events as a Chrome trace: each rank is a process with a compute thread (forward,\n"
    "backward, optimizer spans), under pipeline parallel a track \"pipeline stage S\" (F3: micro-batch 3's\n"
    "forward, B3 its backward), and a comm thread (one slice per collective call, with its bytes, algorithm\n"
    "and bus bandwidth), plus counters for loss, validation loss, tokens/s and memory by tag. Times are in\n"
    "microseconds; when the run headers carry `wall` (the Unix time each rank's clock started), every rank\n"
    "is put on one clock, so a collective lines up across ranks, and flow arrows join each collective\n"
    "call across the ranks; older runs keep each rank's own clock.\n"
    "Open the file at\n"
    "https://ui.perfetto.dev (Open trace file) or in chrome://tracing.\n"
    "\n"
    "options:\n"
    "  -o, --out FILE   the trace to write (default RUN_DIR/trace.json)\n"
    "  --help           this text\n";

enum { TID_COMPUTE = 1, TID_COMM = 2, TID_PIPELINE = 3 }; /* pipeline: pp_forward/pp_backward spans, one track a stage */

typedef struct {
    FILE *out;
    long long written, spans, comms, counters;
    bool rank_named[VZ_MAX_RANKS];
    bool stage_named[VZ_MAX_RANKS]; /* the rank's pipeline track has its name */
    double base[VZ_MAX_RANKS], last_raw[VZ_MAX_RANKS], last[VZ_MAX_RANKS]; /* per-rank clock made monotonic */
    double mem_scale;
    double wall_ref;          /* the earliest run header's wall over ranks; NAN: ranks keep their own clocks */
    int world;                /* rank files */
    long long collectives[VZ_MAX_RANKS]; /* whole-world collectives seen per rank: the k-th is one call on all */
} trace_ctx;

/* Writes one trace event (and frees it). */
static void emit(trace_ctx *c, cJSON *ev) {
    char *text = cJSON_PrintUnformatted(ev);
    cJSON_Delete(ev);
    if (!text) {
        fprintf(stderr, "mixpar trace: out of memory\n");
        exit(3);
    }
    fprintf(c->out, "%s\n%s", c->written ? "," : "", text);
    free(text);
    c->written++;
}

static cJSON *base_event(const char *name, const char *ph, int pid, int tid) {
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "name", name);
    cJSON_AddStringToObject(ev, "ph", ph);
    cJSON_AddNumberToObject(ev, "pid", pid);
    cJSON_AddNumberToObject(ev, "tid", tid);
    return ev;
}

static void metadata(trace_ctx *c, const char *what, int pid, int tid, const char *key, const char *value, int number) {
    cJSON *ev = base_event(what, "M", pid, tid);
    cJSON *args = cJSON_AddObjectToObject(ev, "args");
    if (value) cJSON_AddStringToObject(args, key, value);
    else cJSON_AddNumberToObject(args, key, number);
    emit(c, ev);
}

static void name_rank(trace_ctx *c, int rank) {
    if (c->rank_named[rank]) return;
    c->rank_named[rank] = true;
    char name[32];
    snprintf(name, sizeof name, "rank %d", rank);
    metadata(c, "process_name", rank, 0, "name", name, 0);
    metadata(c, "process_sort_index", rank, 0, "sort_index", NULL, rank);
    metadata(c, "thread_name", rank, TID_COMPUTE, "name", "compute", 0);
    metadata(c, "thread_name", rank, TID_COMM, "name", "comm", 0);
    metadata(c, "thread_sort_index", rank, TID_COMPUTE, "sort_index", NULL, 0);
    metadata(c, "thread_sort_index", rank, TID_COMM, "sort_index", NULL, 1);
}

/* A rank's clock restarts when a resumed run appends to its file: later times continue from the last. */
static double rank_time(trace_ctx *c, int rank, double t_raw) {
    if (t_raw < c->last_raw[rank]) c->base[rank] = c->last[rank];
    c->last_raw[rank] = t_raw;
    c->last[rank] = c->base[rank] + t_raw;
    return c->last[rank];
}

static void slice(trace_ctx *c, int rank, int tid, const char *name, const char *cat, double t0, double t1, cJSON *args) {
    cJSON *ev = base_event(name, "X", rank, tid);
    cJSON_AddStringToObject(ev, "cat", cat);
    cJSON_AddNumberToObject(ev, "ts", (c->base[rank] + t0) * 1e6);
    cJSON_AddNumberToObject(ev, "dur", t1 > t0 ? (t1 - t0) * 1e6 : 0);
    cJSON_AddItemToObject(ev, "args", args);
    emit(c, ev);
}

static void counter(trace_ctx *c, int rank, const char *name, double t, const char *key, double value) {
    if (!isfinite(value)) return; /* a counter needs a number; nan and inf losses show as gaps */
    cJSON *ev = base_event(name, "C", rank, 0);
    cJSON_AddNumberToObject(ev, "ts", t * 1e6);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(ev, "args"), key, value);
    emit(c, ev);
    c->counters++;
}

static void on_event(void *ctx, int rank, const cJSON *e) {
    trace_ctx *c = ctx;
    name_rank(c, rank);
    double t = rank_time(c, rank, vz_json_num(e, "t", c->last_raw[rank]));
    const char *kind = vz_json_str(e, "kind", "");
    double wall = vz_json_num(e, "wall", NAN);
    if (strcmp(kind, "run") == 0 && isfinite(c->wall_ref) && isfinite(wall)) {
        /* this rank's clock (restarted by a resume, too) put on the common one */
        c->base[rank] = wall - c->wall_ref;
        c->last[rank] = c->base[rank] + c->last_raw[rank];
        t = c->last[rank];
    }
    if (strcmp(kind, "span") == 0) {
        double t0, t1;
        if (!vz_span_times(e, &t0, &t1)) return;
        cJSON *args = cJSON_CreateObject();
        cJSON_AddNumberToObject(args, "step", (double)vz_json_int(e, "step", -1));
        long long layer = vz_json_int(e, "layer", -2);
        if (layer >= -1) cJSON_AddNumberToObject(args, "layer", (double)layer);
        const char *name = vz_json_str(e, "name", "span");
        bool forward = strcmp(name, "pp_forward") == 0;
        if (forward || strcmp(name, "pp_backward") == 0) { /* pipeline parallel: on the stage's own track */
            long long stage = vz_json_int(e, "stage", -1), micro = vz_json_int(e, "micro", -1), chunk = vz_json_int(e, "chunk", -1);
            if (!c->stage_named[rank]) {
                c->stage_named[rank] = true;
                char track[48];
                snprintf(track, sizeof track, "pipeline stage %lld", stage);
                metadata(c, "thread_name", rank, TID_PIPELINE, "name", track, 0);
                metadata(c, "thread_sort_index", rank, TID_PIPELINE, "sort_index", NULL, -1);
            }
            char label[48];
            if (chunk >= 0) snprintf(label, sizeof label, "%c%lld c%lld", forward ? 'F' : 'B', micro, chunk);
            else snprintf(label, sizeof label, "%c%lld", forward ? 'F' : 'B', micro);
            cJSON_AddNumberToObject(args, "stage", (double)stage);
            cJSON_AddNumberToObject(args, "micro", (double)micro);
            if (chunk >= 0) cJSON_AddNumberToObject(args, "chunk", (double)chunk);
            cJSON_AddStringToObject(args, "schedule", vz_json_str(e, "schedule", "?"));
            slice(c, rank, TID_PIPELINE, label, "pipeline", t0, t1, args);
        } else slice(c, rank, TID_COMPUTE, name, "compute", t0, t1, args);
        c->spans++;
    } else if (strcmp(kind, "comm") == 0) {
        double t0 = vz_json_num(e, "t0", NAN), t1 = vz_json_num(e, "t1", NAN), bytes = vz_json_num(e, "bytes", 0);
        if (!isfinite(t0) || !isfinite(t1)) return;
        const char *op = vz_json_str(e, "op", "comm");
        int ranks = (int)vz_json_int(e, "ranks", 0);
        cJSON *args = cJSON_CreateObject();
        cJSON_AddStringToObject(args, "algorithm", vz_json_str(e, "algorithm", "?"));
        cJSON_AddNumberToObject(args, "bytes", bytes);
        cJSON_AddNumberToObject(args, "peer", (double)vz_json_int(e, "peer", -1));
        long long bucket = vz_json_int(e, "bucket", -1);
        if (bucket >= 0) cJSON_AddNumberToObject(args, "bucket", (double)bucket);
        if (t1 > t0) cJSON_AddNumberToObject(args, "busbw_GBps", bytes * vz_busbw_factor(op, ranks) / (t1 - t0) / 1e9);
        slice(c, rank, TID_COMM, op, "comm", t0, t1, args);
        c->comms++;
        /* A flow arrow joins the k-th collective of every rank, rank 0 -> 1 -> ... (only with the clocks on
         * one time line, and only for calls over the whole world: every rank makes those in the same order) */
        if (isfinite(c->wall_ref) && vz_json_int(e, "peer", -1) < 0 && ranks == c->world && c->world > 1) {
            long long k = c->collectives[rank]++;
            cJSON *flow = base_event(op, rank == 0 ? "s" : rank == c->world - 1 ? "f" : "t", rank, TID_COMM);
            cJSON_AddStringToObject(flow, "cat", "collective");
            cJSON_AddNumberToObject(flow, "id", (double)k);
            cJSON_AddNumberToObject(flow, "ts", (c->base[rank] + (t0 + t1) / 2) * 1e6);
            if (rank == c->world - 1) cJSON_AddStringToObject(flow, "bp", "e");
            emit(c, flow);
        }
    } else if (strcmp(kind, "step") == 0) {
        counter(c, rank, "loss", t, "loss", vz_json_num(e, "loss", NAN));
        counter(c, rank, "tokens/s", t, "tokens/s", vz_json_num(e, "tokens_per_s", NAN));
        counter(c, rank, "loss scale", t, "scale", vz_json_num(e, "scale", NAN));
    } else if (strcmp(kind, "eval") == 0) {
        counter(c, rank, "val loss", t, "val_loss", vz_json_num(e, "val_loss", NAN));
    } else if (strcmp(kind, "mem") == 0) {
        const cJSON *current = cJSON_GetObjectItemCaseSensitive(e, "current");
        if (!cJSON_IsObject(current)) return;
        cJSON *ev = base_event("memory (MB)", "C", rank, 0);
        cJSON_AddNumberToObject(ev, "ts", t * 1e6);
        cJSON *args = cJSON_AddObjectToObject(ev, "args");
        for (int tag = 0; tag < VZ_NTAGS; tag++)
            cJSON_AddNumberToObject(args, VZ_TAG_NAMES[tag], vz_json_num(current, VZ_TAG_NAMES[tag], 0) / 1e6);
        emit(c, ev);
        c->counters++;
    } else if (strcmp(kind, "checkpoint") == 0 || strcmp(kind, "diagnosis") == 0 || strcmp(kind, "run") == 0) {
        cJSON *ev = base_event(strcmp(kind, "run") == 0 ? (vz_json_int(e, "resumed_at", 0) > 0 ? "resumed" : "run start") : kind,
                               "i", rank, TID_COMPUTE);
        cJSON_AddNumberToObject(ev, "ts", t * 1e6);
        cJSON_AddStringToObject(ev, "s", "p");
        cJSON *args = cJSON_AddObjectToObject(ev, "args");
        cJSON_AddNumberToObject(args, "step", (double)vz_json_int(e, "step", vz_json_int(e, "resumed_at", 0)));
        const char *message = vz_json_str(e, "message", vz_json_str(e, "path", NULL));
        if (message) cJSON_AddStringToObject(args, "detail", message);
        emit(c, ev);
    }
}

/* The wall of the first line (a run header) of each rank's file: the earliest is time 0 of the trace. NAN
 * when any rank's header has none (a run written before `wall`): then every rank keeps its own clock. */
static double earliest_wall(const vz_source *src) {
    double ref = NAN;
    for (int r = 0; r < src->nranks; r++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/events.rank%d.jsonl", src->dir, r);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        char *line = NULL;
        size_t cap = 0;
        double wall = NAN;
        if (getline(&line, &cap, f) > 0) {
            cJSON *o = cJSON_Parse(line);
            if (o && strcmp(vz_json_str(o, "kind", ""), "run") == 0) wall = vz_json_num(o, "wall", NAN);
            cJSON_Delete(o);
        }
        free(line);
        fclose(f);
        if (!isfinite(wall)) return NAN;
        if (!isfinite(ref) || wall < ref) ref = wall;
    }
    return ref;
}

static void reset_trace(void *ctx) {
    (void)ctx;
    MP_FAIL("event files that do not change while mixpar trace reads them", "a file was replaced mid-read; run it again");
}

int vz_cmd_trace(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(USAGE, stdout);
            return 0;
        } else if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--out") == 0) {
            if (i + 1 >= argc) mp_usage_error("trace", "%s needs a file name", argv[i]);
            out = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) mp_usage_error("trace", "unknown option '%s'", argv[i]);
        else if (dir) mp_usage_error("trace", "one RUN_DIR expected, got '%s' and '%s'", dir, argv[i]);
        else dir = argv[i];
    }
    if (!dir) mp_usage_error("trace", "RUN_DIR is required (a run directory such as runs/tiny-poetry)");
    vz_source src;
    vz_open_run(&src, "trace", dir);
    char default_out[4200];
    if (!out) {
        snprintf(default_out, sizeof default_out, "%s/trace.json", dir);
        out = default_out;
    }
    /* Written to a temporary name and renamed, so a reader never sees half a trace. */
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    trace_ctx c = {0};
    c.wall_ref = earliest_wall(&src);
    c.world = src.nranks;
    c.out = fopen(tmp, "w");
    if (!c.out) MP_FAIL("a writable path for the trace (-o FILE)", "mixpar trace: cannot write %s: %s", tmp, strerror(errno));
    fprintf(c.out, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"source\":\"mixpar trace\",\"run_dir\":");
    cJSON *dir_json = cJSON_CreateString(dir);
    char *quoted = cJSON_PrintUnformatted(dir_json); /* the path, escaped for JSON */
    fprintf(c.out, "%s,\"clocks\":\"%s\"},\"traceEvents\":[", quoted ? quoted : "\"\"",
            isfinite(c.wall_ref) ? "aligned by wall clock" : "each rank's own");
    free(quoted);
    cJSON_Delete(dir_json);
    vz_read_run(&src, on_event, &c, reset_trace);
    fprintf(c.out, "\n]}\n");
    bool failed = ferror(c.out) | (fclose(c.out) != 0);
    if (src.events == 0) remove(tmp);
    vz_report_reading(&src, "trace"); /* stops here (exit 2) when nothing could be read */
    if (failed || rename(tmp, out) != 0) {
        remove(tmp);
        MP_FAIL("room to write the trace", "mixpar trace: writing %s failed", out);
    }
    printf("wrote %s: %lld trace events (%lld spans, %lld comm calls, %lld counter samples) from %d rank%s\n"
           "open it at https://ui.perfetto.dev (Open trace file) or in chrome://tracing\n",
           out, c.written, c.spans, c.comms, c.counters, vz_source_files_present(&src),
           vz_source_files_present(&src) == 1 ? "" : "s");
    vz_source_close(&src);
    return 0;
}
