/* prof.c: the profiler: a span stack per thread, totals per name, and the Chrome trace written at each flush. */
#include "prof/prof.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/lab.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { PROF_MAX_THREADS = 16, PROF_MAX_DEPTH = 64 };

typedef struct {
    pthread_t thread;
    int tid;
    const char *name;   /* for the trace's thread_name metadata; NULL: "thread <tid>" */
    bool named_in_trace; /* its metadata event is in the trace */
    int depth;
    prof_open open[PROF_MAX_DEPTH];
} prof_stack;

struct prof {
    int rank;
    prof_clock_fn clock;
    void *clock_ctx;
    pthread_mutex_t lock;
    prof_listener listener;
    prof_stack stacks[PROF_MAX_THREADS];
    int nthreads;
    prof_span *spans; /* finished since the last flush */
    size_t nspans, cap_spans;
    prof_stat *stats;
    size_t nstats, cap_stats;
    /* the trace */
    int fd;            /* -1: none */
    char *trace_path;
    off_t end;         /* where the next events go: just before the closing brackets */
    long long written; /* events in the file */
};

prof *prof_active;

const char *prof_kind_name(prof_kind k) {
    static const char *const names[] = {[PROF_KIND_SPAN] = "span", [PROF_KIND_KERNEL] = "kernel", [PROF_KIND_COMM] = "comm"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "span";
}
void prof_activate(prof *p) { prof_active = p; }

static double default_clock(void *ctx) {
    (void)ctx;
    return mp_elapsed();
}

prof *prof_create(int rank, prof_clock_fn clock, void *clock_ctx) {
    prof *p = calloc(1, sizeof *p);
    MP_ASSERT(p, "out of memory");
    p->rank = rank;
    p->clock = clock ? clock : default_clock;
    p->clock_ctx = clock_ctx;
    p->fd = -1;
    pthread_mutex_init(&p->lock, NULL);
    return p;
}

int prof_rank(const prof *p) { return p->rank; }

/* The calling thread's stack (a new one on its first span). Called with the lock held. */
static prof_stack *my_stack(prof *p) {
    pthread_t self = pthread_self();
    for (int i = 0; i < p->nthreads; i++)
        if (pthread_equal(p->stacks[i].thread, self)) return &p->stacks[i];
    if (p->nthreads == PROF_MAX_THREADS)
        MP_FAIL("at most 16 threads recording spans", "a 17th thread called the profiler");
    prof_stack *s = &p->stacks[p->nthreads];
    memset(s, 0, sizeof *s);
    s->thread = self;
    s->tid = ++p->nthreads;
    return s;
}

static void *grow(void *array, size_t *cap, size_t elem) {
    *cap = *cap ? 2 * *cap : 256;
    void *bigger = realloc(array, *cap * elem);
    MP_ASSERT(bigger, "out of memory: %zu profiler records", *cap);
    return bigger;
}

static void push(prof *p, const char *name, prof_cost cost, prof_kind kind) {
    MP_ASSERT(name, "a span needs a name");
    double t0 = p->clock(p->clock_ctx);
    pthread_mutex_lock(&p->lock);
    prof_stack *s = my_stack(p);
    if (s->depth == PROF_MAX_DEPTH)
        MP_FAIL("spans nested at most 64 deep", "'%s' opened inside 64 open spans (is a prof_end missing?)", name);
    s->open[s->depth++] = (prof_open){.name = name, .t0 = t0, .cost = cost, .kind = kind};
    pthread_mutex_unlock(&p->lock);
    if (p->listener.begin) p->listener.begin(p->listener.ctx, name, kind);
}

void prof_begin(prof *p, const char *name) { push(p, name, (prof_cost){0, 0}, PROF_KIND_SPAN); }
void prof_kernel_begin(prof *p, const char *name, prof_cost cost) { push(p, name, cost, PROF_KIND_KERNEL); }

void prof_span_close(const prof_open *top, prof_open *parent, int depth, double t1, prof_span *out) {
    out->name = top->name;
    out->parent = parent ? parent->name : NULL;
    out->depth = depth;
    out->t0 = top->t0;
    out->t1 = t1;
    out->cost = top->cost;
    out->kind = top->kind;
    /* LAB 23 BEGIN span end: total and self time, and the parent's children time */
    /* The span's wall time; its own time is what its finished children did not cover. Its parent learns of it
     * now, so that when the parent closes, its self time leaves this span out. */
    out->total = t1 - top->t0;
    out->self = out->total - top->child;
    if (parent) parent->child += out->total;
    /* LAB 23 END */
}

static prof_stat *stat_for(prof *p, const char *name, prof_kind kind) {
    for (size_t i = 0; i < p->nstats; i++)
        if (p->stats[i].name == name || strcmp(p->stats[i].name, name) == 0) return &p->stats[i];
    if (p->nstats == p->cap_stats) p->stats = grow(p->stats, &p->cap_stats, sizeof *p->stats);
    prof_stat *st = &p->stats[p->nstats++];
    *st = (prof_stat){.name = name, .kind = kind};
    return st;
}

/* Keeps a finished span and adds it to its name's totals. Called with the lock held. */
static void record(prof *p, const prof_span *sp) {
    if (p->nspans == p->cap_spans) p->spans = grow(p->spans, &p->cap_spans, sizeof *p->spans);
    p->spans[p->nspans++] = *sp;
    prof_stat *st = stat_for(p, sp->name, sp->kind);
    st->calls++;
    st->total += sp->total;
    st->self += sp->self;
    st->cost.flops += sp->cost.flops;
    st->cost.bytes += sp->cost.bytes;
}

void prof_end(prof *p, const char *name) {
    double t1 = p->clock(p->clock_ctx);
    pthread_mutex_lock(&p->lock);
    prof_stack *s = my_stack(p);
    if (s->depth == 0) MP_FAIL("prof_end after a matching prof_begin", "prof_end(\"%s\") with no span open", name);
    prof_open *top = &s->open[s->depth - 1];
    if (strcmp(top->name, name) != 0)
        MP_FAIL("spans closed in the reverse order of opening", "prof_end(\"%s\") while \"%s\" is the innermost open span",
                name, top->name);
    prof_span sp = {.tid = s->tid};
    s->depth--;
    prof_span_close(top, s->depth > 0 ? &s->open[s->depth - 1] : NULL, s->depth, t1, &sp);
    sp.tid = s->tid;
    record(p, &sp);
    pthread_mutex_unlock(&p->lock);
    if (p->listener.end) p->listener.end(p->listener.ctx, name);
}

void prof_complete(prof *p, const char *name, prof_kind kind, double t0, double t1, prof_cost cost) {
    if (!(t1 >= t0)) MP_FAIL("a span with t1 >= t0", "'%s' from %g to %g", name, t0, t1);
    pthread_mutex_lock(&p->lock);
    prof_stack *s = my_stack(p);
    prof_open done = {.name = name, .t0 = t0, .cost = cost, .kind = kind};
    prof_span sp = {.tid = s->tid};
    prof_span_close(&done, s->depth > 0 ? &s->open[s->depth - 1] : NULL, s->depth, t1, &sp);
    sp.tid = s->tid;
    record(p, &sp);
    pthread_mutex_unlock(&p->lock);
}

void prof_set_listener(prof *p, const prof_listener *l) {
    pthread_mutex_lock(&p->lock);
    p->listener = l ? *l : (prof_listener){0};
    pthread_mutex_unlock(&p->lock);
}

void prof_comm_call(prof *p, const char *op, double t0, double t1, double bytes) {
    pthread_mutex_lock(&p->lock);
    prof_stack *s = my_stack(p);
    if (!s->name) s->name = "comm";
    pthread_mutex_unlock(&p->lock);
    prof_complete(p, op, PROF_KIND_COMM, t0, t1 >= t0 ? t1 : t0, (prof_cost){0, bytes});
}

void prof_name_thread(prof *p, const char *name) {
    pthread_mutex_lock(&p->lock);
    prof_stack *s = my_stack(p);
    if (!s->name || strcmp(s->name, name) != 0) {
        s->name = name;
        s->named_in_trace = false;
    }
    pthread_mutex_unlock(&p->lock);
}

const prof_span *prof_spans(const prof *p, size_t *count) {
    *count = p->nspans;
    return p->spans;
}
const prof_stat *prof_stats(const prof *p, size_t *count) {
    *count = p->nstats;
    return p->stats;
}
const prof_stat *prof_stat_find(const prof *p, const char *name) {
    for (size_t i = 0; i < p->nstats; i++)
        if (strcmp(p->stats[i].name, name) == 0) return &p->stats[i];
    return NULL;
}
void prof_reset_stats(prof *p) {
    pthread_mutex_lock(&p->lock);
    p->nstats = 0;
    pthread_mutex_unlock(&p->lock);
}

/* ------------------------------------------------------------------ the trace */

cJSON *prof_trace_event(const prof_span *s, int pid) {
    cJSON *ev = cJSON_CreateObject();
    cJSON *args = cJSON_CreateObject();
    MP_ASSERT(ev && args, "out of memory");
    /* LAB 23 BEGIN trace event: a Chrome trace complete event ("X") with microsecond ts and dur */
    /* Chrome's trace format counts microseconds; a complete event carries its start and duration, so one event
     * per span; Perfetto nests the slices of one (pid, tid) by containment of [ts, ts + dur]. */
    cJSON_AddStringToObject(ev, "name", s->name);
    cJSON_AddStringToObject(ev, "cat", prof_kind_name(s->kind));
    cJSON_AddStringToObject(ev, "ph", "X");
    cJSON_AddNumberToObject(ev, "ts", s->t0 * 1e6);
    cJSON_AddNumberToObject(ev, "dur", (s->t1 - s->t0) * 1e6);
    cJSON_AddNumberToObject(ev, "pid", pid);
    cJSON_AddNumberToObject(ev, "tid", s->tid);
    cJSON_AddNumberToObject(args, "flops", s->cost.flops);
    cJSON_AddNumberToObject(args, "bytes", s->cost.bytes);
    cJSON_AddNumberToObject(args, "depth", s->depth);
    cJSON_AddNumberToObject(args, "self_us", s->self * 1e6);
    /* LAB 23 END */
    cJSON_AddItemToObject(ev, "args", args);
    return ev;
}

/* A metadata event: the name Perfetto shows for a process or a thread. */
static cJSON *name_event(const char *what, int pid, int tid, const char *name) {
    cJSON *ev = cJSON_CreateObject();
    cJSON_AddStringToObject(ev, "name", what);
    cJSON_AddStringToObject(ev, "ph", "M");
    cJSON_AddNumberToObject(ev, "pid", pid);
    cJSON_AddNumberToObject(ev, "tid", tid);
    cJSON *args = cJSON_AddObjectToObject(ev, "args");
    cJSON_AddStringToObject(args, "name", name);
    return ev;
}

typedef struct {
    char *text;
    size_t len, cap;
} text_buf;

static void buf_add(text_buf *b, const char *s) {
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->text = realloc(b->text, b->cap);
        MP_ASSERT(b->text, "out of memory: a trace chunk of %zu bytes", b->cap);
    }
    memcpy(b->text + b->len, s, n + 1);
    b->len += n;
}

/* Appends one event (and frees it), a comma before it unless it is the file's first. */
static void buf_event(prof *p, text_buf *b, cJSON *ev) {
    char *text = cJSON_PrintUnformatted(ev);
    cJSON_Delete(ev);
    MP_ASSERT(text, "out of memory");
    buf_add(b, p->written++ ? ",\n" : "\n");
    buf_add(b, text);
    free(text);
}

static const char TRACE_TAIL[] = "\n]}\n";

/* Writes b (events) and the closing brackets at p->end; the next chunk starts where the brackets began. */
static void write_chunk(prof *p, const text_buf *b) {
    text_buf all = {0};
    if (b->len) buf_add(&all, b->text);
    buf_add(&all, TRACE_TAIL);
    size_t done = 0;
    while (done < all.len) {
        ssize_t n = pwrite(p->fd, all.text + done, all.len - done, p->end + (off_t)done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) MP_FAIL("a writable trace file", "%s: %s", p->trace_path, strerror(errno));
        done += (size_t)n;
    }
    p->end += (off_t)b->len;
    free(all.text);
}

void prof_open_trace(prof *p, const char *path) {
    MP_ASSERT(p->fd < 0, "a trace is already open (%s)", p->trace_path);
    p->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (p->fd < 0) MP_FAIL("a trace file that can be created", "%s: %s", path, strerror(errno));
    p->trace_path = strdup(path);
    MP_ASSERT(p->trace_path, "out of memory");
    text_buf b = {0};
    buf_add(&b, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"clock\":\"seconds since the rank's first clock reading, "
                "as the event stream's t\"},\"traceEvents\":[");
    p->end = 0;
    p->written = 0;
    char process[32];
    snprintf(process, sizeof process, "rank %d", p->rank);
    buf_event(p, &b, name_event("process_name", p->rank, 0, process));
    write_chunk(p, &b);
    free(b.text);
    for (int i = 0; i < p->nthreads; i++) p->stacks[i].named_in_trace = false;
}

void prof_flush(prof *p) {
    pthread_mutex_lock(&p->lock);
    if (p->fd >= 0) {
        text_buf b = {0};
        for (int i = 0; i < p->nthreads; i++) {
            prof_stack *s = &p->stacks[i];
            if (s->named_in_trace) continue;
            char fallback[32];
            snprintf(fallback, sizeof fallback, "thread %d", s->tid);
            buf_event(p, &b, name_event("thread_name", p->rank, s->tid, s->name ? s->name : fallback));
            s->named_in_trace = s->name != NULL;
        }
        for (size_t i = 0; i < p->nspans; i++) buf_event(p, &b, prof_trace_event(&p->spans[i], p->rank));
        write_chunk(p, &b);
        free(b.text);
    }
    p->nspans = 0;
    pthread_mutex_unlock(&p->lock);
}

void prof_free(prof *p) {
    if (!p) return;
    if (prof_active == p) prof_active = NULL;
    prof_flush(p);
    if (p->fd >= 0) close(p->fd);
    free(p->trace_path);
    free(p->spans);
    free(p->stats);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
