/* prof.h: a profiler (性能分析): nested timing spans per thread, per-kernel FLOPs and bytes, a Chrome trace (lab 23). */
#ifndef MIXPAR_PROF_PROF_H
#define MIXPAR_PROF_PROF_H

/* A span is a named interval of one thread's time: a training step, its forward pass, one matmul. Spans nest:
 * each thread keeps a stack, prof_begin pushes, prof_end pops. When a span ends it knows
 *
 *     total = t1 - t0                  its wall time
 *     self  = total - (sum of its direct children's totals)
 *
 * and adds its total to its parent's children, so over any span  self + children = total. A kernel is a span
 * that also carries the work its call site computed from the shapes (kernel_costs.h): FLOPs and bytes moved,
 * from which roofline.h places it against the machine's peak FLOP/s and memory bandwidth.
 *
 *     prof *p = prof_create(rank, NULL, NULL);        // NULL clock: mp_elapsed, the event stream's clock
 *     prof_open_trace(p, "runs/x/trace.rank0.json");  // optional: a Chrome trace for Perfetto
 *     prof_begin(p, "step");
 *       prof_kernel_begin(p, "matmul_fwd:qkv", prof_cost_matmul_forward(N, C, 3 * C));
 *       matmul_forward(...);
 *       prof_end(p, "matmul_fwd:qkv");
 *     prof_end(p, "step");
 *     prof_flush(p);                                  // finished spans -> the trace, which stays valid JSON
 *
 * The model's ops are wrapped with PROF_KERNEL, which costs one test of a global pointer when no profiler is
 * active (prof_activate). Times are seconds from the clock; the trace writes microseconds. Names must be
 * string literals or outlive the profiler (they are kept by pointer). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef double (*prof_clock_fn)(void *ctx); /* seconds; must not go backwards */

/* What a span is: a plain span (a phase, a layer), a kernel (an op with FLOPs and bytes), or a communication call
 * (its bytes; measured by the communicator, recorded with prof_complete). */
typedef enum { PROF_KIND_SPAN, PROF_KIND_KERNEL, PROF_KIND_COMM } prof_kind;
const char *prof_kind_name(prof_kind k); /* "span", "kernel", "comm": the trace's cat */

typedef struct {
    double flops; /* floating-point operations the kernel does (a multiply-add is 2) */
    double bytes; /* bytes it must read and write at least once, from its shapes */
} prof_cost;

/* A span still open on a thread's stack. */
typedef struct {
    const char *name;
    double t0;      /* when it began */
    double child;   /* seconds of its finished direct children */
    prof_cost cost; /* a kernel's work; zeros for a plain span */
    prof_kind kind;
} prof_open;

/* A finished span. */
typedef struct {
    const char *name;
    const char *parent; /* the span it ran inside, NULL at the top of its thread */
    int tid;            /* the profiler's number for the thread: 1, 2, ... in order of first use */
    int depth;          /* 0 at the top of its thread */
    double t0, t1;      /* seconds */
    double total;       /* t1 - t0 */
    double self;        /* total less its direct children's totals */
    prof_cost cost;
    prof_kind kind;
} prof_span;

/* Totals per name over every span of that name that finished since the last prof_reset_stats. */
typedef struct {
    const char *name;
    prof_kind kind;
    long long calls;
    double total, self; /* seconds */
    prof_cost cost;     /* summed over the calls */
} prof_stat;

typedef struct prof prof;

/* A profiler for `rank` (the trace's pid). clock NULL: mp_elapsed (base/clock.h), so spans line up with the
 * event stream's t; tests pass a fake clock. */
prof *prof_create(int rank, prof_clock_fn clock, void *clock_ctx);
void prof_free(prof *p); /* flushes and closes the trace first */

void prof_begin(prof *p, const char *name);
void prof_kernel_begin(prof *p, const char *name, prof_cost cost);
/* Ends the innermost open span of the calling thread, which must be `name` (anything else stops with exit 2:
 * begin and end are mismatched). */
void prof_end(prof *p, const char *name);
/* A span measured elsewhere (a communication call's t0 and t1), recorded as a child of the calling thread's
 * open span, if any. */
void prof_complete(prof *p, const char *name, prof_kind kind, double t0, double t1, prof_cost cost);
/* A communication call of `bytes` from t0 to t1 (the communicator's clock, mp_elapsed), on the calling thread; a
 * thread not named yet is named "comm" (DDP's communication thread). */
void prof_comm_call(prof *p, const char *op, double t0, double t1, double bytes);
/* Names the calling thread in the trace ("compute", "comm"). */
void prof_name_thread(prof *p, const char *name);

/* Closes `top`, the innermost open span of a thread whose stack is `depth` deep below it, at time t1 into *out
 * (total and self time) and adds its time to `parent` (NULL at the top). The heart of prof_end. */
void prof_span_close(const prof_open *top, prof_open *parent, int depth, double t1, prof_span *out);

/* The spans finished since the last flush, in the order they ended (children before parents). */
const prof_span *prof_spans(const prof *p, size_t *count);
const prof_stat *prof_stats(const prof *p, size_t *count);
const prof_stat *prof_stat_find(const prof *p, const char *name);
void prof_reset_stats(prof *p);
int prof_rank(const prof *p);

/* Someone told of every span as it begins and ends on its thread, to mirror the spans into another tool: the CUDA
 * build's NVTX ranges (core/cuda/nvtx_spans.h), which Nsight Systems shows beside the GPU's kernels. Called outside
 * the profiler's lock, on the span's own thread. */
typedef struct {
    void (*begin)(void *ctx, const char *name, prof_kind kind);
    void (*end)(void *ctx, const char *name);
    void *ctx;
} prof_listener;
void prof_set_listener(prof *p, const prof_listener *l); /* NULL: none */

/* ------------------------------------------------------------------ Chrome trace (Perfetto) */

/* Starts the trace at `path` (a JSON object {"traceEvents": [...]}, metadata naming the process "rank R").
 * A bad path stops with exit 2. The file is valid JSON after every prof_flush: each flush writes its events
 * and the closing brackets, and the next flush overwrites the brackets. */
void prof_open_trace(prof *p, const char *path);
/* Writes the spans finished since the last flush to the trace (if one is open) and forgets them. */
void prof_flush(prof *p);
/* One finished span as a Chrome trace "complete" event: name, cat (prof_kind_name), ph "X", ts and dur in
 * microseconds, pid (the rank), tid, args {flops, bytes, depth, self_us}. The caller owns the result. */
struct cJSON *prof_trace_event(const prof_span *s, int pid);

/* ------------------------------------------------------------------ the model's ops */

extern prof *prof_active; /* the profiler PROF_KERNEL and PROF_BEGIN/END record into; NULL: off */
void prof_activate(prof *p);

#define PROF_BEGIN(name) \
    do { \
        if (__builtin_expect(prof_active != NULL, 0)) prof_begin(prof_active, (name)); \
    } while (0)
#define PROF_END(name) \
    do { \
        if (__builtin_expect(prof_active != NULL, 0)) prof_end(prof_active, (name)); \
    } while (0)
/* PROF_KERNEL("matmul_fwd:qkv", prof_cost_matmul_forward(N, C, QKV), matmul_forward(...)): the call, timed as a
 * kernel with its cost when a profiler is active; just the call otherwise (the cost is not even computed). */
#define PROF_KERNEL(name, cost, call) \
    do { \
        prof *prof_kernel_p_ = prof_active; \
        if (__builtin_expect(prof_kernel_p_ != NULL, 0)) { \
            prof_kernel_begin(prof_kernel_p_, (name), (cost)); \
            call; \
            prof_end(prof_kernel_p_, (name)); \
        } else { \
            call; \
        } \
    } while (0)

#endif
