/* model.h: what the visualizer knows about a run, built from its events: steps, evals, gradient histograms,
 * spans and comm calls per rank, memory per rank, and the run header's plan. No drawing here. */
#ifndef MIXPAR_VIZ_MODEL_H
#define MIXPAR_VIZ_MODEL_H

#include "ringbuf.h"
#include "source.h"

#include <stdbool.h>
#include <stdint.h>

enum {
    VZ_STEP_CAPACITY = 1 << 16, /* the newest steps kept (a 100k-step run shows its last 65536) */
    VZ_EVAL_CAPACITY = 4096,
    VZ_SPAN_CAPACITY = 8192,    /* per rank: a timeline shows seconds, not hours */
    VZ_COMM_CAPACITY = 16384,   /* per rank */
    VZ_MAX_LAYERS = 1026,       /* histogram slots: layer -1 (embeddings) .. 1024 */
    VZ_NBINADES = 277,          /* fp32 spans binades -149 .. 127 */
    VZ_MIN_BINADE = -149,
    VZ_NOPSTATS = 32,           /* distinct (op, algorithm) pairs tracked for the comm table */
    VZ_ROUNDING_CAPACITY = 1 << 16, /* (step, layer) rounding records kept for the heat map */
    VZ_MEM_HISTORY = 4096,      /* per rank: mem events kept for the memory panel's history */
    VZ_HIST_HISTORY = 2048,     /* gradient histograms kept for the step cursor (2.3 kB each) */
};

/* Memory tags, in the order of core/base/mem.h and the mem event's objects. */
typedef enum { VZ_TAG_PARAM, VZ_TAG_GRAD, VZ_TAG_MASTER, VZ_TAG_OPTIM, VZ_TAG_ACT, VZ_TAG_COMM, VZ_TAG_OTHER, VZ_TAG_HOST, VZ_NTAGS } vz_tag;
extern const char *const VZ_TAG_NAMES[VZ_NTAGS]; /* "param", "grad", ... */

/* The formats a hist event counts losses for, in the order of core/fp/hist.h. */
typedef enum { VZ_TARGET_FP16, VZ_TARGET_BF16, VZ_TARGET_E4M3, VZ_TARGET_E5M2, VZ_TARGET_TF32, VZ_NTARGETS } vz_target;
extern const char *const VZ_TARGET_NAMES[VZ_NTARGETS];

typedef struct {
    long long step;
    double t, loss, lr, scale, grad_norm, tokens_per_s;
    bool skipped;
} vz_step;

typedef struct {
    long long step;
    double t, val_loss;
} vz_eval;

/* Compute phases: the span kinds the timeline colours. Others are kept as VZ_SPAN_OTHER. */
typedef enum { VZ_SPAN_FORWARD, VZ_SPAN_BACKWARD, VZ_SPAN_OPTIMIZER, VZ_SPAN_OTHER, VZ_NSPAN_KINDS } vz_span_kind;
extern const char *const VZ_SPAN_NAMES[VZ_NSPAN_KINDS];

typedef struct {
    double t0, t1; /* seconds on the rank's clock */
    long long step;
    int kind;      /* vz_span_kind (pp_forward counts as forward, pp_backward as backward) */
    int layer;     /* -2 when the event has none */
    int micro;     /* pipeline parallel: the micro-batch (pp_forward/pp_backward spans); -1 otherwise */
    int chunk;     /* the interleaved schedule's model chunk; 0 otherwise */
} vz_span;

typedef struct {
    double t0, t1, bytes;
    int peer, bucket, ranks; /* bucket -1 when the event has none; ranks 0 when unknown */
    char op[24], algorithm[16];
    char group[16];          /* the communicator: "world", "tp", "dp", "pp", ... ("world" when not written) */
} vz_comm;

/* Collectives and point-to-point calls per (communicator, op): which group each one ran on. */
enum { VZ_NGROUPSTATS = 32 };
typedef struct {
    char group[16], op[24];
    int ranks;               /* the group's size */
    long long calls;         /* summed over ranks */
    double bytes;
} vz_groupstat;

/* The `pipeline` object of one rank's newest step event (pipeline or tensor parallel). */
typedef struct {
    bool valid;
    long long step;
    double bubble, bubble_schedule, bubble_formula;
    int in_flight;
} vz_pipeline_step;

/* Per (op, algorithm): what the comm table shows. Bus bandwidth follows nccl-tests: algorithm bandwidth
 * (bytes / seconds) times 2(n-1)/n for allreduce, (n-1)/n for allgather and reduce-scatter, 1 otherwise. */
typedef struct {
    char op[24], algorithm[16];
    long long calls;
    double bytes, seconds, bus_bytes; /* sums; bus_bytes = bytes * the op's factor */
    double largest_bytes, largest_seconds; /* the newest call among the largest (what the ring view draws) */
    int ranks;
} vz_opstat;

typedef struct {
    bool valid;
    long long step;
    double t, current[VZ_NTAGS], peak[VZ_NTAGS], peak_total;
} vz_mem;

/* One mem event of a rank, kept for the memory panel's history: bytes by tag at that step. */
typedef struct {
    long long step;
    double current[VZ_NTAGS], peak_total;
} vz_mem_sample;

/* The latest gradient exponent histogram of one layer. */
typedef struct {
    bool valid;
    long long step;
    int layer;
    char tensor[16], format[16];
    double scale, count, zero, nonfinite;
    int first_binade, nbins;          /* bins[i] counts values in binade first_binade + i */
    double bins[VZ_NBINADES];
    double subnormal[VZ_NTARGETS], underflow[VZ_NTARGETS], overflow[VZ_NTARGETS];
} vz_hist;

/* What rounding into the run's low format really did to one layer's gradients entering the matmuls in
 * backward, from one "rounding" event (counts since the previous event; model/model_lowp.h). */
typedef struct {
    long long step;
    int layer;                 /* -1 embeddings, 0..L-1 blocks, L head */
    double values, nonzero, flushed, overflowed;
    double subnormal;          /* -1 when the event does not count subnormals */
} vz_rounding;

/* A layer's rounding counts summed over every event read (as `mixpar precision flushed` sums them). */
typedef struct {
    double values, nonzero, flushed, overflowed, subnormal;
    bool subnormal_known;
} vz_rounding_total;

typedef struct {
    bool seen;                 /* any event from this rank */
    double t_last;             /* the newest event time */
    vz_ring spans;             /* vz_span */
    vz_ring comms;             /* vz_comm */
    vz_mem mem;
    vz_ring mem_history;       /* vz_mem_sample, the newest VZ_MEM_HISTORY mem events */
    bool have_wall;            /* the run header gave `wall`: Unix time when this rank's clock t was 0 */
    double wall;
    bool synced;               /* first_collective_end is known */
    double first_collective_end; /* t1 of this rank's first collective call, on its own clock */
    int stage;                 /* pipeline parallel: this rank's stage (run header or spans); -1 otherwise */
    vz_pipeline_step pipeline; /* its newest step's pipeline object */
} vz_rank;

typedef struct {
    /* run header */
    bool have_run;
    char name[128];
    char precision[24];        /* the recipe: "fp32", "fp16", "bf16", "bf16-pure", ... (the run header) */
    char strategy[40];         /* "single rank", "DDP", "ZeRO-1", "ZeRO-3", "FSDP full_shard", from data_parallel */
    int world, layers;
    double params;
    long long resumed_at, total_steps;
    bool have_plan;
    double plan[VZ_NTAGS];
    double max_memory;         /* bytes: the device capacity the run was held to (train.max_memory); 0: none */

    vz_ring steps;             /* vz_step, rank 0's */
    vz_ring evals;             /* vz_eval */
    long long skipped_steps;   /* steps skipped for overflow (kept even when the ring drops them) */
    double min_scale, max_scale;

    vz_ring roundings;         /* vz_rounding, rank 0's, in the order written (a step's layers together) */
    vz_rounding_total *rounding_totals; /* [VZ_MAX_LAYERS], by layer + 1; NULL until a rounding event */
    int round_lo, round_hi;    /* layers with rounded gradients (values > 0): lo..hi (hi < lo when none) */
    char round_compute[16];    /* the format the rounding went into ("fp16") */

    vz_hist *hists;            /* [VZ_MAX_LAYERS], by layer + 1 */
    vz_ring hist_history;      /* vz_hist, the newest VZ_HIST_HISTORY of every layer, in the order read */
    int hist_lo, hist_hi;      /* layers with a histogram: lo..hi (hi < lo when none) */

    vz_rank ranks[VZ_MAX_RANKS];
    int nranks;                /* 1 + the highest rank seen */
    vz_opstat ops[VZ_NOPSTATS];
    int nops;
    long long comm_events;
    vz_groupstat groups[VZ_NGROUPSTATS];
    int ngroups;

    /* pipeline parallel (span events pp_forward/pp_backward): 0 stages when the run has none */
    int pp_stages, pp_micro_batches, pp_chunks;
    char pp_schedule[16];

    long long checkpoints, last_checkpoint_step;
    long long diagnoses;
    char diagnosis[160];

    long long events, unknown_kinds;
    char last_unknown[32];
    double t_last;             /* the newest event time over ranks */
} vz_model;

void vz_model_init(vz_model *m);
void vz_model_free(vz_model *m);
/* Forget everything (the files were rewound). */
void vz_model_reset(vz_model *m);
/* A vz_event_fn: apply one event. Unknown kinds are counted and otherwise ignored. */
void vz_model_apply(void *model, int rank, const cJSON *event);
/* A span event's t0 and t1 on the rank's event clock (the one `t` counts on). Pipeline-parallel spans
 * (dist/pp.c) are timed on the process's raw monotonic clock instead; a span cannot end after the event
 * reporting it, which the trainer writes as soon as the span ends, so one ending later than its `t` is moved
 * to end at `t` (the write's few microseconds early). False when t0 or t1 is missing. */
bool vz_span_times(const cJSON *ev, double *t0, double *t1);

/* Queries the panels use. */
const vz_step *vz_model_step(const vz_model *m, size_t i); /* 0 = oldest kept */
size_t vz_model_nsteps(const vz_model *m);
const vz_step *vz_model_last_step(const vz_model *m);
const vz_eval *vz_model_last_eval(const vz_model *m);
/* The histogram of a layer (-1 .. L), NULL when none arrived. */
const vz_hist *vz_model_hist(const vz_model *m, int layer);
/* The histogram of a layer as it stood at `step`: the newest one of that layer written at or before it
 * (NULL when none is kept); step < 0: the newest, as vz_model_hist. */
const vz_hist *vz_model_hist_at(const vz_model *m, int layer, long long step);
/* Rounding: whether any layer's gradients were rounded; the run total of a layer (NULL when none); the
 * record of (step, layer) among those kept (NULL when none). Shares are of the nonzero values, in percent. */
bool vz_model_has_rounding(const vz_model *m);
const vz_rounding_total *vz_model_rounding_total(const vz_model *m, int layer);
const vz_rounding *vz_model_rounding_at(const vz_model *m, size_t i); /* 0 = oldest kept */
size_t vz_model_nroundings(const vz_model *m);
double vz_share_pct(double part, double whole);
/* "embeddings", "block 3", "head" (the head is layer L when the run header says L layers). */
const char *vz_model_layer_name(const vz_model *m, int layer, char *buf, size_t n);
/* "ddp-2 (fp32, 2 ranks, DDP)": what a figure's title names: the run directory, recipe, world and strategy. */
const char *vz_model_run_label(const vz_model *m, const char *run_dir, char *buf, size_t n);
/* A rank's memory history: sample i (0 = oldest kept), how many are kept. */
const vz_mem_sample *vz_model_mem_sample(const vz_model *m, int rank, size_t i);
size_t vz_model_mem_samples(const vz_model *m, int rank);
/* A tag whose measured peak on the rank exceeds the planner's prediction (false without a plan, or for a
 * tag the plan puts at 0: the planner does not predict it). */
bool vz_model_over_plan(const vz_model *m, int rank, int tag);
/* Bus bandwidth factor of a collective over n ranks (see vz_opstat). */
double vz_busbw_factor(const char *op, int ranks);
/* Ranks with any events or a file. */
int vz_model_world(const vz_model *m);
/* Seconds to add to a rank's times to put them on rank 0's clock. Each rank's clock starts when its
 * process does, so ranks launched together still differ by their start-up skew (12-175 ms measured). When
 * both run headers carry `wall` (the Unix time of t = 0), the difference of the two is the offset. Older
 * runs fall back on collectives: every rank calls the same ones in the same order, and a collective ends
 * at nearly the same moment on all of them, so the end of each rank's first collective is taken as one
 * instant. 0 when neither is known. */
double vz_model_clock_offset(const vz_model *m, int rank);
/* Whether vz_model_clock_offset aligns anything (two or more ranks with walls or a collective). */
bool vz_model_clocks_aligned(const vz_model *m);
/* Between t0 and t1 on rank 0's clock: how long a rank communicated with no compute span running (exposed
 * communication: what overlap would hide) and how long it did neither (waiting: data, stragglers). */
typedef struct {
    double exposed_comm, idle, comm, compute;
} vz_busy;
vz_busy vz_model_busy(const vz_model *m, int rank, double t0, double t1);
/* Pipeline parallel: the rank drawn for each stage (the lowest rank of that stage; -1 when none has
 * written a span), and the newest step every drawn stage has finished its spans of (-1 when none). A step
 * at or before `at` (at < 0: the newest). */
int vz_model_stage_rank(const vz_model *m, int stage);
long long vz_model_pipeline_step(const vz_model *m, long long at);
/* A stage's pipeline spans of one step, in the order written (the order the stage ran them): their
 * indices in the rank's span ring; returns how many (at most n). */
int vz_model_pipeline_spans(const vz_model *m, int stage, long long step, size_t *out, int n);
/* The step event's `pipeline` object of a stage's drawn rank for `step` (NULL when its newest is another). */
const vz_pipeline_step *vz_model_stage_pipeline(const vz_model *m, int stage, long long step);
/* How: "by wall clock", "at the first collective", or "" when not aligned. */
const char *vz_model_clock_alignment(const vz_model *m);

#endif
