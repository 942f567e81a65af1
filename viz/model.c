/* model.c: what the visualizer knows about a run, built from its events (schema: core/base/EVENTS.md). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const VZ_TAG_NAMES[VZ_NTAGS] = {"param", "grad", "master", "optim", "act", "comm", "other", "host"};
const char *const VZ_TARGET_NAMES[VZ_NTARGETS] = {"fp16", "bf16", "e4m3", "e5m2", "tf32"};
const char *const VZ_SPAN_NAMES[VZ_NSPAN_KINDS] = {"forward", "backward", "optimizer", "other"};

static void copy_str(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : ""); }

void vz_model_init(vz_model *m) {
    memset(m, 0, sizeof *m);
    vz_ring_init(&m->steps, sizeof(vz_step), VZ_STEP_CAPACITY);
    vz_ring_init(&m->evals, sizeof(vz_eval), VZ_EVAL_CAPACITY);
    vz_ring_init(&m->roundings, sizeof(vz_rounding), VZ_ROUNDING_CAPACITY);
    vz_ring_init(&m->hist_history, sizeof(vz_hist), VZ_HIST_HISTORY);
    m->round_lo = 0;
    m->round_hi = -1;
    for (int r = 0; r < VZ_MAX_RANKS; r++) {
        vz_ring_init(&m->ranks[r].spans, sizeof(vz_span), VZ_SPAN_CAPACITY);
        vz_ring_init(&m->ranks[r].comms, sizeof(vz_comm), VZ_COMM_CAPACITY);
        vz_ring_init(&m->ranks[r].mem_history, sizeof(vz_mem_sample), VZ_MEM_HISTORY);
        m->ranks[r].stage = -1;
    }
    m->hist_lo = 0;
    m->hist_hi = -1;
    m->world = 0;
    copy_str(m->precision, sizeof m->precision, "fp32");
}

void vz_model_free(vz_model *m) {
    vz_ring_free(&m->steps);
    vz_ring_free(&m->evals);
    vz_ring_free(&m->roundings);
    vz_ring_free(&m->hist_history);
    free(m->rounding_totals);
    m->rounding_totals = NULL;
    for (int r = 0; r < VZ_MAX_RANKS; r++) {
        vz_ring_free(&m->ranks[r].spans);
        vz_ring_free(&m->ranks[r].comms);
        vz_ring_free(&m->ranks[r].mem_history);
    }
    free(m->hists);
    m->hists = NULL;
}

void vz_model_reset(vz_model *m) {
    vz_model_free(m);
    vz_model_init(m);
}

/* ---------------------------------------------------------------- events */

static void read_tags(const cJSON *obj, double out[VZ_NTAGS]) {
    for (int t = 0; t < VZ_NTAGS; t++) out[t] = obj ? vz_json_num(obj, VZ_TAG_NAMES[t], 0) : 0;
}

static void apply_run(vz_model *m, int rank, const cJSON *ev) {
    bool again = m->have_run;
    m->have_run = true;
    copy_str(m->name, sizeof m->name, vz_json_str(ev, "name", m->name));
    int world = (int)vz_json_int(ev, "world", 1);
    if (world > m->world) m->world = world < VZ_MAX_RANKS ? world : VZ_MAX_RANKS;
    m->params = vz_json_num(ev, "params", m->params);
    double wall = vz_json_num(ev, "wall", NAN);
    m->ranks[rank].have_wall = isfinite(wall) && wall > 0;
    m->ranks[rank].wall = m->ranks[rank].have_wall ? wall : 0;
    m->resumed_at = vz_json_int(ev, "resumed_at", 0);
    const cJSON *dp = cJSON_GetObjectItemCaseSensitive(ev, "data_parallel");
    const cJSON *mp = cJSON_GetObjectItemCaseSensitive(ev, "model_parallel");
    if (cJSON_IsObject(mp)) { /* tensor or pipeline parallel: the mesh, and this rank's stage */
        snprintf(m->strategy, sizeof m->strategy, "dp %lld x tp %lld x pp %lld", vz_json_int(mp, "dp", 1),
                 vz_json_int(mp, "tp", 1), vz_json_int(mp, "pp", 1));
        long long stage = vz_json_int(mp, "stage", -1), pp = vz_json_int(mp, "pp", 1);
        if (pp > 1 && stage >= 0 && stage < pp && pp <= VZ_MAX_RANKS) {
            m->ranks[rank].stage = (int)stage;
            m->pp_stages = (int)pp;
            long long mb = vz_json_int(mp, "micro_batches", 0), chunks = vz_json_int(mp, "chunks", 1);
            if (mb > 0 && mb <= 1 << 20) m->pp_micro_batches = (int)mb;
            if (chunks > 0 && chunks <= 1 << 20) m->pp_chunks = (int)chunks;
            copy_str(m->pp_schedule, sizeof m->pp_schedule, vz_json_str(mp, "schedule", m->pp_schedule));
        }
    } else if (m->world <= 1) copy_str(m->strategy, sizeof m->strategy, "single rank");
    else if (!cJSON_IsObject(dp)) copy_str(m->strategy, sizeof m->strategy, "data parallel");
    else {
        long long stage = vz_json_int(dp, "zero_stage", 0);
        const char *fsdp = vz_json_str(dp, "fsdp", NULL);
        if (fsdp) snprintf(m->strategy, sizeof m->strategy, "FSDP %s", fsdp);
        else if (stage > 0) snprintf(m->strategy, sizeof m->strategy, "ZeRO-%lld", stage);
        else copy_str(m->strategy, sizeof m->strategy, "DDP");
    }
    const cJSON *plan = cJSON_GetObjectItemCaseSensitive(ev, "plan");
    if (cJSON_IsObject(plan)) {
        m->have_plan = true;
        read_tags(plan, m->plan);
    }
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(ev, "config");
    if (cJSON_IsObject(config)) {
        const cJSON *fp16 = cJSON_GetObjectItemCaseSensitive(config, "fp16");
        const cJSON *bf16 = cJSON_GetObjectItemCaseSensitive(config, "bf16");
        copy_str(m->precision, sizeof m->precision,
                 vz_json_bool(fp16, "enabled", false) ? "fp16" : vz_json_bool(bf16, "enabled", false) ? "bf16" : "fp32");
    }
    /* Runs that name their recipe (every run since the precision section) say it in "precision". */
    const cJSON *precision = cJSON_GetObjectItemCaseSensitive(ev, "precision");
    if (cJSON_IsObject(precision)) copy_str(m->precision, sizeof m->precision, vz_json_str(precision, "recipe", "fp32"));
    if (cJSON_IsObject(config)) {
        const cJSON *model = cJSON_GetObjectItemCaseSensitive(config, "model");
        m->layers = (int)vz_json_int(model, "layers", m->layers);
        const cJSON *train = cJSON_GetObjectItemCaseSensitive(config, "train");
        m->total_steps = vz_json_int(train, "steps", m->total_steps);
        m->max_memory = vz_json_num(train, "max_memory", 0); /* bytes (config.c: FK_BYTES), 0: no limit */
        if (!(m->max_memory > 0)) m->max_memory = 0;
    }
    /* A resumed run rewinds to its checkpoint: steps after it are about to be written again. Its process
     * starts a new clock, so this rank's timeline starts over too. */
    if (rank == 0 && m->resumed_at >= 0) {
        vz_step *s;
        while ((s = vz_ring_last(&m->steps)) && s->step > m->resumed_at) vz_ring_pop_last(&m->steps);
        vz_eval *e;
        while ((e = vz_ring_last(&m->evals)) && e->step > m->resumed_at) vz_ring_pop_last(&m->evals);
        vz_rounding *r;
        while ((r = vz_ring_last(&m->roundings)) && r->step > m->resumed_at) vz_ring_pop_last(&m->roundings);
        vz_hist *h;
        while ((h = vz_ring_last(&m->hist_history)) && h->step > m->resumed_at) vz_ring_pop_last(&m->hist_history);
    }
    if (m->resumed_at >= 0) { /* each rank's memory history rewinds with it */
        vz_mem_sample *ms;
        while ((ms = vz_ring_last(&m->ranks[rank].mem_history)) && ms->step > m->resumed_at)
            vz_ring_pop_last(&m->ranks[rank].mem_history);
    }
    if (again) {
        vz_ring_clear(&m->ranks[rank].spans);
        vz_ring_clear(&m->ranks[rank].comms);
        m->ranks[rank].synced = false;
    }
}

static void apply_step(vz_model *m, int rank, const cJSON *ev) {
    const cJSON *pipe = cJSON_GetObjectItemCaseSensitive(ev, "pipeline");
    if (cJSON_IsObject(pipe)) { /* every rank's own: its stage's bubble */
        vz_pipeline_step *p = &m->ranks[rank].pipeline;
        p->valid = true;
        p->step = vz_json_int(ev, "step", -1);
        p->bubble = vz_json_num(pipe, "bubble", NAN);
        p->bubble_schedule = vz_json_num(pipe, "bubble_schedule", NAN);
        p->bubble_formula = vz_json_num(pipe, "bubble_formula", NAN);
        p->in_flight = (int)vz_json_int(pipe, "in_flight", 0);
    }
    if (rank != 0) return; /* every rank trains the same model; the charts follow rank 0 */
    long long step = vz_json_int(ev, "step", -1);
    if (step < 0) return;
    vz_step *last;
    while ((last = vz_ring_last(&m->steps)) && last->step >= step) vz_ring_pop_last(&m->steps);
    vz_step *s = vz_ring_push(&m->steps);
    s->step = step;
    s->t = vz_json_num(ev, "t", 0);
    s->loss = vz_json_num(ev, "loss", NAN);
    s->lr = vz_json_num(ev, "lr", NAN);
    s->scale = vz_json_num(ev, "scale", 1);
    s->grad_norm = vz_json_num(ev, "grad_norm", NAN);
    s->tokens_per_s = vz_json_num(ev, "tokens_per_s", NAN);
    s->skipped = vz_json_bool(ev, "skipped", false);
    if (s->skipped) m->skipped_steps++;
    if (isfinite(s->scale) && s->scale > 0) {
        if (m->min_scale == 0 || s->scale < m->min_scale) m->min_scale = s->scale;
        if (s->scale > m->max_scale) m->max_scale = s->scale;
    }
}

static void apply_eval(vz_model *m, int rank, const cJSON *ev) {
    if (rank != 0) return;
    vz_eval *e = vz_ring_push(&m->evals);
    e->step = vz_json_int(ev, "step", 0);
    e->t = vz_json_num(ev, "t", 0);
    e->val_loss = vz_json_num(ev, "val_loss", NAN);
}

static void apply_hist(vz_model *m, int rank, const cJSON *ev) {
    (void)rank;
    long long layer = vz_json_int(ev, "layer", -2);
    if (layer < -1 || layer >= VZ_MAX_LAYERS - 1) return;
    /* The underflow panel shows gradients; activation histograms ("act") are for plots and the labs. */
    if (strcmp(vz_json_str(ev, "tensor", "grad"), "grad") != 0) return;
    const cJSON *bins = cJSON_GetObjectItemCaseSensitive(ev, "bins");
    long long first = vz_json_int(ev, "first_binade", VZ_MIN_BINADE - 1);
    if (!cJSON_IsArray(bins) || first < VZ_MIN_BINADE || first >= VZ_MIN_BINADE + VZ_NBINADES) return;
    if (!m->hists) {
        m->hists = calloc(VZ_MAX_LAYERS, sizeof *m->hists);
        if (!m->hists) {
            fprintf(stderr, "mixpar viz: out of memory for histograms\n");
            exit(3);
        }
    }
    vz_hist *h = &m->hists[layer + 1];
    memset(h, 0, sizeof *h);
    h->valid = true;
    h->layer = (int)layer;
    h->step = vz_json_int(ev, "step", 0);
    copy_str(h->tensor, sizeof h->tensor, vz_json_str(ev, "tensor", "grad"));
    copy_str(h->format, sizeof h->format, vz_json_str(ev, "format", "fp32"));
    h->scale = vz_json_num(ev, "scale", 1);
    h->count = vz_json_num(ev, "count", 0);
    h->zero = vz_json_num(ev, "zero", 0);
    h->nonfinite = vz_json_num(ev, "nonfinite", 0);
    h->first_binade = (int)first;
    int n = cJSON_GetArraySize(bins);
    int room = VZ_MIN_BINADE + VZ_NBINADES - (int)first;
    h->nbins = n < room ? n : room;
    for (int i = 0; i < h->nbins; i++) {
        const cJSON *b = cJSON_GetArrayItem(bins, i);
        h->bins[i] = cJSON_IsNumber(b) && b->valuedouble > 0 ? b->valuedouble : 0;
    }
    const cJSON *targets = cJSON_GetObjectItemCaseSensitive(ev, "targets");
    for (int t = 0; t < VZ_NTARGETS; t++) {
        const cJSON *one = cJSON_GetObjectItemCaseSensitive(targets, VZ_TARGET_NAMES[t]);
        h->subnormal[t] = vz_json_num(one, "subnormal", 0);
        h->underflow[t] = vz_json_num(one, "underflow", 0);
        h->overflow[t] = vz_json_num(one, "overflow", 0);
    }
    memcpy(vz_ring_push(&m->hist_history), h, sizeof *h); /* for the step cursor */
    if (m->hist_hi < m->hist_lo) m->hist_lo = m->hist_hi = (int)layer;
    if (layer < m->hist_lo) m->hist_lo = (int)layer;
    if (layer > m->hist_hi) m->hist_hi = (int)layer;
}

bool vz_span_times(const cJSON *ev, double *t0, double *t1) {
    *t0 = vz_json_num(ev, "t0", NAN), *t1 = vz_json_num(ev, "t1", NAN);
    if (!isfinite(*t0) || !isfinite(*t1)) return false;
    double t = vz_json_num(ev, "t", NAN);
    if (isfinite(t) && *t1 > t + 1e-3) { /* another clock: a span's event is written after it ends */
        *t0 += t - *t1;
        *t1 = t;
    }
    return true;
}

static void apply_span(vz_model *m, int rank, const cJSON *ev) {
    double t0, t1;
    if (!vz_span_times(ev, &t0, &t1)) return;
    vz_span *s = vz_ring_push(&m->ranks[rank].spans);
    s->t0 = t0;
    s->t1 = t1 < t0 ? t0 : t1;
    s->step = vz_json_int(ev, "step", -1);
    s->layer = (int)vz_json_int(ev, "layer", -2);
    const char *name = vz_json_str(ev, "name", "");
    s->kind = VZ_SPAN_OTHER;
    for (int k = 0; k < VZ_SPAN_OTHER; k++)
        if (strcmp(name, VZ_SPAN_NAMES[k]) == 0) s->kind = k;
    s->micro = -1;
    s->chunk = 0;
    bool pp_forward = strcmp(name, "pp_forward") == 0;
    if (!pp_forward && strcmp(name, "pp_backward") != 0) return;
    s->kind = pp_forward ? VZ_SPAN_FORWARD : VZ_SPAN_BACKWARD;
    long long micro = vz_json_int(ev, "micro", -1), stage = vz_json_int(ev, "stage", -1);
    long long stages = vz_json_int(ev, "stages", 0), mb = vz_json_int(ev, "micro_batches", 0);
    if (micro < 0 || micro > 1 << 20 || stage < 0 || stage >= VZ_MAX_RANKS || stages < 1 || stages > VZ_MAX_RANKS) return;
    s->micro = (int)micro;
    long long chunk = vz_json_int(ev, "chunk", 0), chunks = vz_json_int(ev, "chunks", 1);
    s->chunk = chunk >= 0 && chunk < 1 << 20 ? (int)chunk : 0;
    m->ranks[rank].stage = (int)stage;
    m->pp_stages = (int)stages;
    if (mb > 0 && mb <= 1 << 20) m->pp_micro_batches = (int)mb;
    if (chunks > 0 && chunks <= 1 << 20) m->pp_chunks = (int)chunks;
    copy_str(m->pp_schedule, sizeof m->pp_schedule, vz_json_str(ev, "schedule", m->pp_schedule));
}

double vz_busbw_factor(const char *op, int ranks) {
    if (ranks < 2) return 1;
    double n = ranks;
    if (strcmp(op, "allreduce") == 0) return 2 * (n - 1) / n;
    if (strcmp(op, "allgather") == 0 || strcmp(op, "reduce_scatter") == 0) return (n - 1) / n;
    return 1;
}

static void apply_comm(vz_model *m, int rank, const cJSON *ev) {
    double t0 = vz_json_num(ev, "t0", NAN), t1 = vz_json_num(ev, "t1", NAN);
    if (!isfinite(t0) || !isfinite(t1)) return;
    vz_comm *c = vz_ring_push(&m->ranks[rank].comms);
    c->t0 = t0;
    c->t1 = t1 < t0 ? t0 : t1;
    c->bytes = vz_json_num(ev, "bytes", 0);
    c->peer = (int)vz_json_int(ev, "peer", -1);
    c->bucket = (int)vz_json_int(ev, "bucket", -1);
    c->ranks = (int)vz_json_int(ev, "ranks", 0);
    copy_str(c->op, sizeof c->op, vz_json_str(ev, "op", "?"));
    copy_str(c->algorithm, sizeof c->algorithm, vz_json_str(ev, "algorithm", "?"));
    copy_str(c->group, sizeof c->group, vz_json_str(ev, "group", "world"));
    m->comm_events++;
    int g = 0;
    while (g < m->ngroups && !(strcmp(m->groups[g].group, c->group) == 0 && strcmp(m->groups[g].op, c->op) == 0)) g++;
    if (g == m->ngroups && m->ngroups < VZ_NGROUPSTATS) {
        m->ngroups++;
        memset(&m->groups[g], 0, sizeof m->groups[g]);
        copy_str(m->groups[g].group, sizeof m->groups[g].group, c->group);
        copy_str(m->groups[g].op, sizeof m->groups[g].op, c->op);
    }
    if (g < m->ngroups) {
        m->groups[g].calls++;
        m->groups[g].bytes += c->bytes;
        if (c->ranks > m->groups[g].ranks) m->groups[g].ranks = c->ranks;
    }
    bool p2p = strcmp(c->op, "send") == 0 || strcmp(c->op, "recv") == 0;
    if (!p2p && !m->ranks[rank].synced) {
        m->ranks[rank].synced = true;
        m->ranks[rank].first_collective_end = c->t1;
    }

    int i = 0;
    while (i < m->nops && !(strcmp(m->ops[i].op, c->op) == 0 && strcmp(m->ops[i].algorithm, c->algorithm) == 0)) i++;
    if (i == m->nops) {
        if (m->nops == VZ_NOPSTATS) return;
        m->nops++;
        memset(&m->ops[i], 0, sizeof m->ops[i]);
        copy_str(m->ops[i].op, sizeof m->ops[i].op, c->op);
        copy_str(m->ops[i].algorithm, sizeof m->ops[i].algorithm, c->algorithm);
    }
    vz_opstat *o = &m->ops[i];
    int n = c->ranks > 0 ? c->ranks : (m->world > 0 ? m->world : 1);
    o->calls++;
    o->bytes += c->bytes;
    o->seconds += c->t1 - c->t0;
    o->bus_bytes += c->bytes * vz_busbw_factor(c->op, n);
    /* The ring view shows the newest of the largest calls: gradient buckets, not the loss's 4 bytes. */
    if (c->bytes >= o->largest_bytes) {
        o->largest_bytes = c->bytes;
        o->largest_seconds = c->t1 - c->t0;
    }
    o->ranks = n;
}

static void apply_mem(vz_model *m, int rank, const cJSON *ev) {
    vz_mem *mem = &m->ranks[rank].mem;
    mem->valid = true;
    mem->step = vz_json_int(ev, "step", 0);
    mem->t = vz_json_num(ev, "t", 0);
    read_tags(cJSON_GetObjectItemCaseSensitive(ev, "current"), mem->current);
    read_tags(cJSON_GetObjectItemCaseSensitive(ev, "peak"), mem->peak);
    mem->peak_total = vz_json_num(ev, "peak_total", 0);
    vz_mem_sample *last;
    while ((last = vz_ring_last(&m->ranks[rank].mem_history)) && last->step > mem->step)
        vz_ring_pop_last(&m->ranks[rank].mem_history); /* steps go forward; a rewound file writes them again */
    vz_mem_sample *sample = vz_ring_push(&m->ranks[rank].mem_history);
    sample->step = mem->step;
    memcpy(sample->current, mem->current, sizeof sample->current);
    sample->peak_total = mem->peak_total;
}

static void apply_checkpoint(vz_model *m, int rank, const cJSON *ev) {
    if (rank != 0) return;
    m->checkpoints++;
    m->last_checkpoint_step = vz_json_int(ev, "step", 0);
}

static void apply_diagnosis(vz_model *m, int rank, const cJSON *ev) {
    m->diagnoses++;
    snprintf(m->diagnosis, sizeof m->diagnosis, "rank %d step %lld: %s", rank, vz_json_int(ev, "step", 0),
             vz_json_str(ev, "message", vz_json_str(ev, "what", "?")));
}

/* What fp16 (or bf16, fp8) really did to the gradients in backward: the heat map of the underflow panel.
 * Rank 0's, like the steps: `mixpar precision flushed runs/<run>/events.rank0.jsonl` reads the same events. */
static void apply_rounding(vz_model *m, int rank, const cJSON *ev) {
    if (rank != 0) return;
    long long layer = vz_json_int(ev, "layer", -2);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(ev, "grads");
    if (layer < -1 || layer >= VZ_MAX_LAYERS - 1 || !cJSON_IsObject(g)) return;
    if (!m->rounding_totals) {
        m->rounding_totals = calloc(VZ_MAX_LAYERS, sizeof *m->rounding_totals);
        if (!m->rounding_totals) {
            fprintf(stderr, "mixpar viz: out of memory for rounding counts\n");
            exit(3);
        }
    }
    vz_rounding *r = vz_ring_push(&m->roundings);
    r->step = vz_json_int(ev, "step", 0);
    r->layer = (int)layer;
    r->values = vz_json_num(g, "values", 0);
    r->nonzero = vz_json_num(g, "nonzero", 0);
    r->flushed = vz_json_num(g, "flushed", 0);
    r->overflowed = vz_json_num(g, "overflowed", 0);
    r->subnormal = vz_json_num(g, "subnormal", -1); /* not written by today's trainer; read when it is */
    vz_rounding_total *t = &m->rounding_totals[layer + 1];
    t->values += r->values;
    t->nonzero += r->nonzero;
    t->flushed += r->flushed;
    t->overflowed += r->overflowed;
    if (r->subnormal >= 0) t->subnormal += r->subnormal, t->subnormal_known = true;
    copy_str(m->round_compute, sizeof m->round_compute, vz_json_str(ev, "compute", m->round_compute));
    if (r->values <= 0) return; /* the embeddings have no matmul input gradient */
    if (m->round_hi < m->round_lo) m->round_lo = m->round_hi = (int)layer;
    if (layer < m->round_lo) m->round_lo = (int)layer;
    if (layer > m->round_hi) m->round_hi = (int)layer;
}

static const struct {
    const char *kind;
    void (*apply)(vz_model *m, int rank, const cJSON *ev);
} APPLIERS[] = {
    {"run", apply_run},   {"step", apply_step}, {"eval", apply_eval},           {"hist", apply_hist},
    {"span", apply_span}, {"comm", apply_comm}, {"mem", apply_mem},             {"checkpoint", apply_checkpoint},
    {"diagnosis", apply_diagnosis}, {"rounding", apply_rounding},
};

void vz_model_apply(void *model, int rank, const cJSON *event) {
    vz_model *m = model;
    if (rank < 0 || rank >= VZ_MAX_RANKS) return;
    const char *kind = vz_json_str(event, "kind", "");
    m->events++;
    vz_rank *r = &m->ranks[rank];
    r->seen = true;
    if (rank + 1 > m->nranks) m->nranks = rank + 1;
    double t = vz_json_num(event, "t", NAN);
    if (isfinite(t)) {
        r->t_last = t;
        if (t > m->t_last) m->t_last = t;
    }
    for (size_t i = 0; i < sizeof APPLIERS / sizeof APPLIERS[0]; i++)
        if (strcmp(kind, APPLIERS[i].kind) == 0) {
            APPLIERS[i].apply(m, rank, event);
            return;
        }
    m->unknown_kinds++; /* a newer writer's kind: skipped, counted, shown in the status bar */
    copy_str(m->last_unknown, sizeof m->last_unknown, kind);
}

/* ---------------------------------------------------------------- queries */

size_t vz_model_nsteps(const vz_model *m) { return m->steps.count; }
const vz_step *vz_model_step(const vz_model *m, size_t i) { return vz_ring_at(&m->steps, i); }
const vz_step *vz_model_last_step(const vz_model *m) { return vz_ring_last(&m->steps); }
const vz_eval *vz_model_last_eval(const vz_model *m) { return vz_ring_last(&m->evals); }

const vz_hist *vz_model_hist_at(const vz_model *m, int layer, long long step) {
    if (step < 0) return vz_model_hist(m, layer);
    for (size_t i = m->hist_history.count; i-- > 0;) {
        const vz_hist *h = vz_ring_at(&m->hist_history, i);
        if (h->layer == layer && h->step <= step) return h;
    }
    return NULL;
}

const vz_hist *vz_model_hist(const vz_model *m, int layer) {
    if (!m->hists || layer < -1 || layer >= VZ_MAX_LAYERS - 1) return NULL;
    return m->hists[layer + 1].valid ? &m->hists[layer + 1] : NULL;
}

bool vz_model_has_rounding(const vz_model *m) { return m->round_hi >= m->round_lo; }

const vz_rounding_total *vz_model_rounding_total(const vz_model *m, int layer) {
    if (!m->rounding_totals || layer < -1 || layer >= VZ_MAX_LAYERS - 1) return NULL;
    const vz_rounding_total *t = &m->rounding_totals[layer + 1];
    return t->values > 0 ? t : NULL;
}

size_t vz_model_nroundings(const vz_model *m) { return m->roundings.count; }
const vz_rounding *vz_model_rounding_at(const vz_model *m, size_t i) { return vz_ring_at(&m->roundings, i); }

double vz_share_pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0; }

const char *vz_model_layer_name(const vz_model *m, int layer, char *buf, size_t n) {
    if (layer < 0) snprintf(buf, n, "embeddings");
    else if (m->layers > 0 && layer >= m->layers) snprintf(buf, n, "head");
    else snprintf(buf, n, "block %d", layer);
    return buf;
}

const char *vz_model_run_label(const vz_model *m, const char *run_dir, char *buf, size_t n) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s", run_dir ? run_dir : "");
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') dir[--len] = '\0';
    const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    int world = vz_model_world(m);
    if (world <= 1) snprintf(buf, n, "%s (%s, %s, 1 rank)", base, m->name, m->precision);
    else snprintf(buf, n, "%s (%s, %s, %d ranks, %s)", base, m->name, m->precision, world, m->strategy);
    return buf;
}

const vz_mem_sample *vz_model_mem_sample(const vz_model *m, int rank, size_t i) {
    if (rank < 0 || rank >= VZ_MAX_RANKS) return NULL;
    return vz_ring_at(&m->ranks[rank].mem_history, i);
}

size_t vz_model_mem_samples(const vz_model *m, int rank) {
    return rank < 0 || rank >= VZ_MAX_RANKS ? 0 : m->ranks[rank].mem_history.count;
}

bool vz_model_over_plan(const vz_model *m, int rank, int tag) {
    if (!m->have_plan || rank < 0 || rank >= VZ_MAX_RANKS || tag < 0 || tag >= VZ_NTAGS) return false;
    const vz_mem *mem = &m->ranks[rank].mem;
    return mem->valid && m->plan[tag] > 0 && mem->peak[tag] > m->plan[tag]; /* a tag planned at 0 is not predicted */
}

int vz_model_world(const vz_model *m) { return m->world > m->nranks ? m->world : m->nranks; }

static bool walls(const vz_model *m, int rank) { return m->ranks[0].have_wall && m->ranks[rank].have_wall; }
static bool collectives(const vz_model *m, int rank) { return m->ranks[0].synced && m->ranks[rank].synced; }

/* ---------------------------------------------------------------- pipeline schedule */

int vz_model_stage_rank(const vz_model *m, int stage) {
    for (int r = 0; r < m->nranks; r++)
        if (m->ranks[r].stage == stage && m->ranks[r].spans.count > 0) return r;
    return -1;
}

int vz_model_pipeline_spans(const vz_model *m, int stage, long long step, size_t *out, int n) {
    int r = vz_model_stage_rank(m, stage), k = 0;
    if (r < 0) return 0;
    const vz_ring *spans = &m->ranks[r].spans;
    for (size_t i = 0; i < spans->count; i++) {
        const vz_span *s = vz_ring_at(spans, i);
        if (s->micro < 0 || s->step != step) continue;
        if (k < n) out[k] = i;
        k++;
    }
    return k < n ? k : n;
}

const vz_pipeline_step *vz_model_stage_pipeline(const vz_model *m, int stage, long long step) {
    int r = vz_model_stage_rank(m, stage);
    if (r < 0 || !m->ranks[r].pipeline.valid || m->ranks[r].pipeline.step != step) return NULL;
    return &m->ranks[r].pipeline;
}

/* A stage's spans of a step are all written when it has 2 m v of them (a forward and a backward of each
 * micro-batch and chunk). */
static bool stage_done(const vz_model *m, int stage, long long step) {
    int r = vz_model_stage_rank(m, stage);
    if (r < 0) return false;
    long long want = 2LL * (m->pp_micro_batches > 0 ? m->pp_micro_batches : 1) * (m->pp_chunks > 0 ? m->pp_chunks : 1), have = 0;
    const vz_ring *spans = &m->ranks[r].spans;
    for (size_t i = spans->count; i-- > 0;) {
        const vz_span *s = vz_ring_at(spans, i);
        if (s->micro >= 0 && s->step == step) have++;
        if (s->step >= 0 && s->step < step) break;
    }
    return have >= want;
}

long long vz_model_pipeline_step(const vz_model *m, long long at) {
    if (m->pp_stages < 1) return -1;
    int r0 = vz_model_stage_rank(m, 0);
    if (r0 < 0) return -1;
    const vz_ring *spans = &m->ranks[r0].spans;
    long long tried = -1;
    for (size_t i = spans->count; i-- > 0;) { /* newest first, each step once */
        const vz_span *s = vz_ring_at(spans, i);
        if (s->micro < 0 || s->step == tried || (at >= 0 && s->step > at)) continue;
        tried = s->step;
        bool all = true;
        for (int st = 0; st < m->pp_stages && all; st++) all = stage_done(m, st, s->step);
        if (all) return s->step;
    }
    return -1;
}

double vz_model_clock_offset(const vz_model *m, int rank) {
    if (rank <= 0 || rank >= VZ_MAX_RANKS) return 0;
    if (walls(m, rank)) return m->ranks[rank].wall - m->ranks[0].wall;
    if (collectives(m, rank)) return m->ranks[0].first_collective_end - m->ranks[rank].first_collective_end;
    return 0;
}

bool vz_model_clocks_aligned(const vz_model *m) { return vz_model_clock_alignment(m)[0] != '\0'; }

const char *vz_model_clock_alignment(const vz_model *m) {
    bool any_wall = false, any_collective = false;
    for (int r = 1; r < m->nranks; r++) {
        if (walls(m, r)) any_wall = true;
        else if (collectives(m, r)) any_collective = true;
    }
    return any_wall && !any_collective ? "by wall clock" : any_collective ? "at the first collective" : "";
}

/* ---------------------------------------------------------------- exposed communication */

typedef struct {
    double a, b;
} interval;

static int by_start(const void *pa, const void *pb) {
    const interval *x = pa, *y = pb;
    return x->a < y->a ? -1 : x->a > y->a;
}

/* Sorts and merges n intervals in place; returns how many are left. */
static size_t merge(interval *v, size_t n) {
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, by_start);
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (v[i].a <= v[k].b) {
            if (v[i].b > v[k].b) v[k].b = v[i].b;
        } else {
            v[++k] = v[i];
        }
    }
    return k + 1;
}

static double total(const interval *v, size_t n) {
    double t = 0;
    for (size_t i = 0; i < n; i++) t += v[i].b - v[i].a;
    return t;
}

/* Length of the intersection of two merged lists. */
static double overlap(const interval *x, size_t nx, const interval *y, size_t ny) {
    double t = 0;
    for (size_t i = 0, j = 0; i < nx && j < ny;) {
        double a = x[i].a > y[j].a ? x[i].a : y[j].a, b = x[i].b < y[j].b ? x[i].b : y[j].b;
        if (b > a) t += b - a;
        if (x[i].b < y[j].b) i++;
        else j++;
    }
    return t;
}

vz_busy vz_model_busy(const vz_model *m, int rank, double t0, double t1) {
    vz_busy out = {0, 0, 0, 0};
    if (rank < 0 || rank >= VZ_MAX_RANKS || !(t1 > t0)) return out;
    const vz_rank *r = &m->ranks[rank];
    double off = vz_model_clock_offset(m, rank);
    interval *comp = malloc((r->spans.count + 1) * sizeof *comp), *comm = malloc((r->comms.count + 1) * sizeof *comm);
    size_t nc = 0, nm = 0;
    if (!comp || !comm) goto done;
    for (size_t i = 0; i < r->spans.count; i++) {
        const vz_span *sp = vz_ring_at(&r->spans, i);
        double a = sp->t0 + off, b = sp->t1 + off;
        if (sp->kind == VZ_SPAN_OTHER) continue; /* the data wait is waiting, not compute */
        if (b > t0 && a < t1) comp[nc++] = (interval){a > t0 ? a : t0, b < t1 ? b : t1};
    }
    for (size_t i = 0; i < r->comms.count; i++) {
        const vz_comm *c = vz_ring_at(&r->comms, i);
        double a = c->t0 + off, b = c->t1 + off;
        if (b > t0 && a < t1) comm[nm++] = (interval){a > t0 ? a : t0, b < t1 ? b : t1};
    }
    nc = merge(comp, nc);
    nm = merge(comm, nm);
    out.compute = total(comp, nc);
    out.comm = total(comm, nm);
    double both = overlap(comp, nc, comm, nm);
    out.exposed_comm = out.comm - both;
    out.idle = (t1 - t0) - (out.compute + out.comm - both);
    if (out.idle < 0) out.idle = 0;
done:
    free(comp);
    free(comm);
    return out;
}
