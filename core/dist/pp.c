/* pp.c: pipeline parallelism: stage balancing, GPipe and 1F1B schedules, their p2p of activations and gradients, bubble and in-flight accounting. */
#include "dist/pp.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/lab.h"
#include "base/mem.h"
#include "model/model_lowp.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

const char *const pp_schedule_names[] = {[PP_GPIPE] = "gpipe", [PP_1F1B] = "1f1b", [PP_INTERLEAVED] = "interleaved",
                                         NULL};

int pp_schedule_from_name(const char *name) {
    for (int k = 0; k < PP_NSCHEDULES; k++)
        if (strcmp(name, pp_schedule_names[k]) == 0) return k;
    return -1;
}

/* ------------------------------------------------------------------ schedules */

void pp_check_schedule(pp_schedule kind, int p, int m, int v) {
    if (kind != PP_INTERLEAVED) {
        if (v != 1)
            MP_FAIL_HINT("virtual pipeline stages only with pipeline_schedule \"interleaved\"",
                         "drop num_layers_per_virtual_pipeline_stage, or choose the interleaved schedule",
                         "%d model chunks per stage with schedule %s", v, pp_schedule_names[kind]);
        return;
    }
    if (p < 2 || v < 2)
        MP_FAIL_HINT("at least 2 pipeline stages and 2 model chunks per stage for the interleaved schedule",
                     "set num_layers_per_virtual_pipeline_stage so that layers / (stages x it) is 2 or more",
                     "%d stages, %d chunks per stage", p, v);
    if (m % p != 0)
        MP_FAIL_HINT("a number of micro-batches divisible by the pipeline stages (interleaved schedule)",
                     "Megatron's interleaved 1F1B runs the micro-batches in groups of p: make "
                     "gradient_accumulation_steps a multiple of pipeline_model_parallel_size",
                     "%d micro-batches on %d stages", m, p);
}

/* Megatron-LM's interleaved 1F1B (schedules.py, forward_backward_pipelining_with_interleaving): the k-th
 * forward of a stage runs model chunk (k mod pv) / p on micro-batch (k / pv) p + k mod p; the k-th
 * backward the same micro-batch of chunk v - 1 - that. */
static pp_action interleaved_action(char kind, int k, int p, int v) {
    int in_group = k % (p * v), chunk = in_group / p;
    return (pp_action){kind, k / (p * v) * p + k % p, kind == 'F' ? chunk : v - 1 - chunk};
}

void pp_schedule_actions(pp_schedule kind, int p, int s, int m, int v, pp_action *out) {
    MP_ASSERT(p >= 1 && s >= 0 && s < p && m >= 1 && v >= 1, "schedule of stage %d of %d, %d micro-batches, %d chunks",
              s, p, m, v);
    int n = 0, f = 0, b = 0;
    if (kind == PP_GPIPE) {
        while (f < m) out[n++] = (pp_action){'F', f++, 0};
        while (b < m) out[n++] = (pp_action){'B', b++, 0};
        return;
    }
    if (kind == PP_INTERLEAVED) {
        int total = m * v, warmup = (p - s - 1) * 2 + (v - 1) * p;
        warmup = warmup < total ? warmup : total;
        while (f < warmup) out[n++] = interleaved_action('F', f++, p, v);
        while (f < total) {
            out[n++] = interleaved_action('F', f++, p, v);
            out[n++] = interleaved_action('B', b++, p, v);
        }
        while (b < total) out[n++] = interleaved_action('B', b++, p, v);
        return;
    }
    /* LAB 28 BEGIN the 1F1B order of stage s: min(p-s-1, m) warm-up forwards, then one forward and one backward in turn, then the backwards left */
    /* 1F1B: warm up with the forwards the later stages need before the first backward can come back,
     * then one forward and one backward in turn, then the backwards that are left. */
    int warmup = p - s - 1 < m ? p - s - 1 : m;
    while (f < warmup) out[n++] = (pp_action){'F', f++, 0};
    while (f < m) {
        out[n++] = (pp_action){'F', f++, 0};
        out[n++] = (pp_action){'B', b++, 0};
    }
    while (b < m) out[n++] = (pp_action){'B', b++, 0};
    /* LAB 28 END */
}

double pp_bubble_formula(int p, int m, int v) { return (double)(p - 1) / (double)(v * m + p - 1); }

double pp_schedule_bubble(pp_schedule kind, int p, int m, int v, double t_fwd, double t_bwd, int *in_flight) {
    /* Virtual stage j p + s is chunk j of stage s. done_f[vs][k], done_b[vs][k]: when virtual stage vs
     * finished F k and B k; each stage's actions run in its schedule's order, each as soon as the stage is
     * free and its input is there. Stages are played in rounds until every action has run (a dependency
     * may only be met by a later round's progress); an order that can never finish is a deadlock. */
    int P = p * v, n = 2 * m * v;
    size_t cells = (size_t)P * m;
    double *done_f = malloc(cells * sizeof(double)), *done_b = malloc(cells * sizeof(double));
    pp_action *order = malloc((size_t)p * n * sizeof(pp_action));
    int *next = calloc((size_t)p, sizeof(int));
    double *free_at = calloc((size_t)p, sizeof(double));
    MP_ASSERT(done_f && done_b && order && next && free_at, "out of memory");
    for (size_t i = 0; i < cells; i++) done_f[i] = done_b[i] = -1;
    for (int s = 0; s < p; s++) pp_schedule_actions(kind, p, s, m, v, order + (size_t)s * n);
    for (bool progress = true; progress;) {
        progress = false;
        for (int s = 0; s < p; s++)
            while (next[s] < n) {
                pp_action a = order[(size_t)s * n + next[s]];
                int vs = a.chunk * p + s;
                double ready;
                if (a.kind == 'F') ready = vs == 0 ? 0 : done_f[(size_t)(vs - 1) * m + a.micro];
                else ready = vs == P - 1 ? done_f[(size_t)vs * m + a.micro] : done_b[(size_t)(vs + 1) * m + a.micro];
                if (ready < 0) break; /* its input is not made yet: another stage first */
                double start = ready > free_at[s] ? ready : free_at[s];
                free_at[s] = start + (a.kind == 'F' ? t_fwd : t_bwd);
                (a.kind == 'F' ? done_f : done_b)[(size_t)vs * m + a.micro] = free_at[s];
                next[s]++;
                progress = true;
            }
    }
    double makespan = 0;
    for (int s = 0; s < p; s++) {
        MP_ASSERT(next[s] == n, "schedule %s deadlocks at stage %d", pp_schedule_names[kind], s);
        makespan = free_at[s] > makespan ? free_at[s] : makespan;
        if (in_flight) { /* the most forwards done whose backward is not, in the stage's own order */
            int now = 0, most = 0;
            for (int i = 0; i < n; i++) {
                now += order[(size_t)s * n + i].kind == 'F' ? 1 : -1;
                most = now > most ? now : most;
            }
            in_flight[s] = most;
        }
    }
    double busy = (double)p * m * v * (t_fwd + t_bwd);
    free(done_f), free(done_b), free(order), free(next), free(free_at);
    return makespan > 0 ? 1.0 - busy / ((double)p * makespan) : 0.0;
}

/* ------------------------------------------------------------------ stages */

/* Parameters of the embeddings, of one block and of the top (final norm and an untied head). */
static void stage_costs(const model_config *cfg, double *embed, double *block, double *top) {
    model_config one = *cfg;
    one.L = 1;
    double with1 = (double)model_count_params(&one);
    one.L = 2;
    double with2 = (double)model_count_params(&one);
    *block = with2 - with1;
    double outside = with1 - *block;
    double head = cfg->tied ? 0 : (double)cfg->Vp * cfg->C;
    double emb = (double)cfg->Vp * cfg->C + (cfg->arch == MODEL_GPT2 ? (double)cfg->maxT * cfg->C : 0);
    *embed = emb;
    *top = outside - emb; /* final norm and head */
    if (cfg->tied) *top += (double)cfg->Vp * cfg->C; /* pp > 1: the last stage holds wte's copy */
    (void)head;
}

void pp_balance_stages(const model_config *cfg, int p, int *first) {
    int L = cfg->L;
    if (p < 1 || L < p)
        MP_FAIL_HINT("model.layers >= pipeline_model_parallel_size", "each stage needs at least one block: use fewer "
                     "stages or more layers", "%d layers on %d stages", L, p);
    double embed, block, top;
    stage_costs(cfg, &embed, &block, &top);
    /* best[s][l]: the smallest largest stage when blocks [0, l) go to stages [0, s); cut[s][l] where stage
     * s-1 begins in it. Stage s's cost: its blocks, plus the embeddings on stage 0, the top on the last. */
    size_t rows = (size_t)p + 1, cols = (size_t)L + 1;
    double *best = malloc(rows * cols * sizeof(double));
    int *cut = malloc(rows * cols * sizeof(int));
    MP_ASSERT(best && cut, "out of memory");
    for (size_t i = 0; i < rows * cols; i++) best[i] = -1;
    best[0] = 0;
    for (int s = 1; s <= p; s++)
        for (int l = s; l <= L; l++)
            for (int b = s - 1; b < l; b++) {
                double prev = best[(size_t)(s - 1) * cols + b];
                if (prev < 0) continue;
                double cost = (l - b) * block + (s == 1 ? embed : 0) + (s == p && l == L ? top : 0);
                double worst = cost > prev ? cost : prev;
                double *cell = &best[(size_t)s * cols + l];
                if (*cell < 0 || worst < *cell) *cell = worst, cut[(size_t)s * cols + l] = b;
            }
    first[p] = L;
    for (int s = p; s >= 1; s--) first[s - 1] = cut[(size_t)s * cols + first[s]];
    free(best);
    free(cut);
}

void pp_stages_from_list(const model_config *cfg, int p, const char *list, int *first) {
    const char *at = list;
    first[0] = 0;
    for (int s = 0; s < p; s++) {
        char *end;
        long n = strtol(at, &end, 10);
        if (end == at || n < 1 || (s < p - 1 && *end != ',') || (s == p - 1 && *end != '\0'))
            MP_FAIL_HINT("one positive count of blocks per stage, comma-separated", "e.g. \"3,2,2,1\" for 4 stages",
                         "'%s' for %d stages", list, p);
        first[s + 1] = first[s] + (int)n;
        at = end + 1;
    }
    if (first[p] != cfg->L)
        MP_FAIL_HINT("blocks per stage adding up to model.layers", "make the counts sum to the number of layers",
                     "'%s' sums to %d, model.layers is %d", list, first[p], cfg->L);
}

/* ------------------------------------------------------------------ running a schedule */

struct pp {
    mesh_t *mesh;
    model **chunks;           /* (v) this stage's model chunks: chunk j is virtual stage j p + s */
    int v;
    pp_schedule kind;
    int micro;
    ev_writer *ev;
    pp_action *order;         /* (2 m v) this stage's schedule */
    int *slot_of;             /* (v m) the activation slot of chunk j's micro-batch k: [j m + k] */
    bool *slot_busy;          /* (v m) [j m + slot] */
    int *nslots;              /* (v) slots made per chunk */
    float *recv_act, *recv_grad; /* (B,T,C) what arrives from the neighbours (MEM_COMM) */
    float *send_grad;         /* (v m, B,T,C) input gradients on their way back, one per chunk and micro-batch */
    size_t capacity;          /* floats of one (B,T,C) buffer */
    comm_request **fwd_sends; /* (v m) activation sends, waited for before the chunk's backward */
    comm_request **bwd_sends; /* (v m) gradient sends, waited for at the end of the step */
    pp_stats stats;
};

pp *pp_create(mesh_t *mesh, model **chunks, int v, pp_schedule kind, int micro_batches, ev_writer *ev) {
    MP_ASSERT(kind >= 0 && kind < PP_NSCHEDULES && micro_batches >= 1 && v >= 1, "pipeline schedule %d, %d micro-batches",
              (int)kind, micro_batches);
    pp_check_schedule(kind, mesh->pp_size, micro_batches, v);
    pp *p = calloc(1, sizeof *p);
    MP_ASSERT(p, "out of memory");
    p->mesh = mesh, p->v = v, p->kind = kind, p->micro = micro_batches, p->ev = ev;
    size_t units = (size_t)v * micro_batches;
    p->chunks = malloc((size_t)v * sizeof *p->chunks);
    p->order = malloc(2 * units * sizeof *p->order);
    p->slot_of = malloc(units * sizeof(int));
    p->fwd_sends = calloc(units, sizeof *p->fwd_sends);
    p->bwd_sends = calloc(units, sizeof *p->bwd_sends);
    p->slot_busy = calloc(units, sizeof(bool));
    p->nslots = calloc((size_t)v, sizeof(int));
    MP_ASSERT(p->chunks && p->order && p->slot_of && p->fwd_sends && p->bwd_sends && p->slot_busy && p->nslots,
              "out of memory");
    memcpy(p->chunks, chunks, (size_t)v * sizeof *chunks);
    pp_schedule_actions(kind, mesh->pp_size, mesh->pp_rank, micro_batches, v, p->order);
    p->stats.micro_batches = micro_batches, p->stats.stages = mesh->pp_size, p->stats.stage = mesh->pp_rank;
    p->stats.chunks = v;
    return p;
}

void pp_free(pp *p) {
    if (!p) return;
    mem_free(p->recv_act);
    mem_free(p->recv_grad);
    mem_free(p->send_grad);
    free(p->chunks), free(p->order), free(p->slot_of), free(p->slot_busy), free(p->nslots);
    free(p->fwd_sends), free(p->bwd_sends);
    free(p);
}

const pp_stats *pp_get_stats(const pp *p) { return &p->stats; }

static void ensure_buffers(pp *p, size_t floats) {
    if (floats <= p->capacity) return;
    mem_free(p->recv_act), mem_free(p->recv_grad), mem_free(p->send_grad);
    p->recv_act = mem_alloc(floats * sizeof(float), MEM_COMM, "pp.recv_activation");
    p->recv_grad = mem_alloc(floats * sizeof(float), MEM_COMM, "pp.recv_gradient");
    p->send_grad = mem_alloc((size_t)p->v * p->micro * floats * sizeof(float), MEM_COMM, "pp.send_gradients");
    p->capacity = floats;
}

/* The first free activation slot of a chunk (a new one when all are busy). */
static int take_slot(pp *p, int chunk) {
    bool *busy = p->slot_busy + (size_t)chunk * p->micro;
    for (int i = 0; i < p->nslots[chunk]; i++)
        if (!busy[i]) {
            busy[i] = true;
            return i;
        }
    MP_ASSERT(p->nslots[chunk] < p->micro, "more activation slots than micro-batches");
    busy[p->nslots[chunk]] = true;
    return p->nslots[chunk]++;
}

static void span_event(pp *p, const pp_action *a, long step, double t0, double t1) {
    if (!p->ev) return;
    ev_begin(p->ev, "span");
    ev_str(p->ev, "name", a->kind == 'F' ? "pp_forward" : "pp_backward");
    ev_int(p->ev, "step", step);
    ev_num(p->ev, "t0", t0);
    ev_num(p->ev, "t1", t1);
    ev_int(p->ev, "stage", p->mesh->pp_rank);
    ev_int(p->ev, "stages", p->mesh->pp_size);
    ev_int(p->ev, "micro", a->micro);
    ev_int(p->ev, "micro_batches", p->micro);
    if (p->v > 1) {
        ev_int(p->ev, "chunk", a->chunk);
        ev_int(p->ev, "chunks", p->v);
    }
    ev_str(p->ev, "schedule", pp_schedule_names[p->kind]);
    ev_end(p->ev);
}

/* Virtual stage j p + s's neighbours: the stage (in the pp group) and chunk before and after it, -1 at
 * the two ends of the whole pipeline. */
static void neighbours(const pp *p, int chunk, int *prev, int *prev_chunk, int *next, int *next_chunk) {
    int s = p->mesh->pp_rank, P = p->mesh->pp_size, vs = chunk * P + s;
    *prev = vs > 0 ? (vs - 1) % P : -1, *prev_chunk = vs > 0 ? (vs - 1) / P : -1;
    *next = vs < P * p->v - 1 ? (vs + 1) % P : -1, *next_chunk = vs < P * p->v - 1 ? (vs + 1) / P : -1;
}

/* A message's tag: micro-batch k arriving for chunk j, activation (0) or gradient (1). */
static int tag_of(const pp *p, int k, int chunk, int gradient) { return ((k * p->v) + chunk) * 2 + gradient; }

float pp_run(pp *p, const int *inputs, const int *targets, int B, int T, float loss_scale, long step) {
    mesh_t *mesh = p->mesh;
    int mb = p->micro;
    size_t rows = (size_t)B * T, floats = model_stage_floats(p->chunks[0], B, T), units = (size_t)p->v * mb;
    ensure_buffers(p, floats);
    size_t act_most = mem_current(MEM_ACT); /* slots are allocated in forward only: the step's peak is after one */
    double t_step = mp_now(), busy = 0, t_f = 0, t_b = 0;
    double loss_sum = 0;
    bool has_loss = false;
    int in_flight = 0, most = 0;
    /* no update until the step ends: each chunk's weights are cast once, at its first forward */
    for (int j = 0; j < p->v; j++) model_hold_weights(p->chunks[j], true);
    for (size_t i = 0; i < 2 * units; i++) {
        const pp_action *a = &p->order[i];
        int k = a->micro, j = a->chunk, prev, prev_chunk, next, next_chunk;
        model *m = p->chunks[j];
        neighbours(p, j, &prev, &prev_chunk, &next, &next_chunk);
        bool first = prev < 0, last = next < 0;
        size_t unit = (size_t)j * mb + k;
        if (a->kind == 'F') {
            if (!first) comm_recv(mesh->pp, p->recv_act, floats, COMM_FP32, prev, tag_of(p, k, j, 0));
            p->slot_of[unit] = take_slot(p, j);
            model_use_act_slot(m, p->slot_of[unit]);
            double t0 = mp_now();
            float loss = model_forward_stage(m, first ? inputs + (size_t)k * rows : NULL, first ? NULL : p->recv_act,
                                             last ? targets + (size_t)k * rows : NULL, B, T);
            double t1 = mp_now();
            busy += t1 - t0, t_f += t1 - t0;
            span_event(p, a, step, t0, t1);
            if (last) loss_sum += loss, has_loss = true;
            else
                p->fwd_sends[unit] = comm_isend(mesh->pp, model_stage_output(m), floats, COMM_FP32, next,
                                                tag_of(p, k, next_chunk, 0));
            most = ++in_flight > most ? in_flight : most;
            act_most = mem_current(MEM_ACT) > act_most ? mem_current(MEM_ACT) : act_most;
        } else {
            if (!last) {
                comm_recv(mesh->pp, p->recv_grad, floats, COMM_FP32, next, tag_of(p, k, j, 1));
                comm_wait(&p->fwd_sends[unit]); /* delivered long ago: the gradient of it just came back */
            }
            model_use_act_slot(m, p->slot_of[unit]);
            float *dinput = first ? NULL : p->send_grad + unit * floats;
            double t0 = mp_now();
            model_backward_stage(m, loss_scale / (float)mb, last ? NULL : p->recv_grad, dinput);
            double t1 = mp_now();
            busy += t1 - t0, t_b += t1 - t0;
            span_event(p, a, step, t0, t1);
            if (!first)
                p->bwd_sends[unit] = comm_isend(mesh->pp, dinput, floats, COMM_FP32, prev, tag_of(p, k, prev_chunk, 1));
            p->slot_busy[(size_t)j * mb + p->slot_of[unit]] = false;
            in_flight--;
        }
    }
    comm_wait_all(p->bwd_sends, units);
    for (int j = 0; j < p->v; j++) {
        model_use_act_slot(p->chunks[j], 0);
        model_hold_weights(p->chunks[j], false); /* the update comes next */
    }
    /* The last stage has the loss: every stage reports it (the step event, the trainer's line). */
    float loss = has_loss ? (float)(loss_sum / mb) : 0.0f;
    comm_broadcast(mesh->pp, &loss, 1, COMM_FP32, mesh->pp_size - 1, COMM_ALGO_DEFAULT);
    pp_stats *st = &p->stats;
    st->step_s = mp_now() - t_step;
    st->busy_s = busy;
    st->bubble = st->step_s > 0 ? 1.0 - busy / st->step_s : 0;
    st->bubble_schedule = pp_schedule_bubble(p->kind, mesh->pp_size, mb, p->v, t_f / (double)units,
                                             t_b / (double)units, NULL);
    st->max_in_flight = most;
    st->slots = 0;
    for (int j = 0; j < p->v; j++) st->slots += model_act_slots(p->chunks[j]);
    st->act_peak_bytes = act_most;
    return loss;
}

float pp_evaluate(pp *p, const int *inputs, const int *targets, int n, int B, int T) {
    mesh_t *mesh = p->mesh;
    size_t rows = (size_t)B * T, floats = model_stage_floats(p->chunks[0], B, T);
    ensure_buffers(p, floats);
    pp_action *order = malloc((size_t)2 * n * p->v * sizeof *order);
    comm_request **sent = calloc((size_t)p->v, sizeof *sent); /* a chunk's last output on its way */
    MP_ASSERT(order && sent, "out of memory");
    /* The forwards of a schedule for n micro-batches, in its order (interleaved needs n a multiple of p:
     * otherwise GPipe's order, chunk by chunk, which is the same dependency chain). */
    pp_schedule kind = p->kind == PP_INTERLEAVED && n % mesh->pp_size != 0 ? PP_GPIPE : p->kind;
    int v = kind == PP_INTERLEAVED ? p->v : 1, stride = p->v / v;
    double sum = 0;
    bool has_loss = false;
    for (int c = 0; c < stride; c++) { /* GPipe's fallback: all micro-batches through chunk c, then c + 1 */
        pp_schedule_actions(kind, mesh->pp_size, mesh->pp_rank, n, v, order);
        for (int i = 0; i < 2 * n * v; i++) {
            if (order[i].kind != 'F') continue;
            int k = order[i].micro, j = v == p->v ? order[i].chunk : c, prev, prev_chunk, next, next_chunk;
            model *m = p->chunks[j];
            neighbours(p, j, &prev, &prev_chunk, &next, &next_chunk);
            bool first = prev < 0, last = next < 0;
            if (!first) comm_recv(mesh->pp, p->recv_act, floats, COMM_FP32, prev, tag_of(p, k, j, 0));
            comm_wait(&sent[j]); /* slot 0's output is about to be overwritten */
            model_use_act_slot(m, 0);
            float loss = model_forward_stage(m, first ? inputs + (size_t)k * rows : NULL, first ? NULL : p->recv_act,
                                             last ? targets + (size_t)k * rows : NULL, B, T);
            if (last) sum += loss, has_loss = true;
            else sent[j] = comm_isend(mesh->pp, model_stage_output(m), floats, COMM_FP32, next, tag_of(p, k, next_chunk, 0));
        }
    }
    comm_wait_all(sent, (size_t)p->v);
    free(order);
    free(sent);
    float loss = has_loss ? (float)(sum / n) : 0.0f;
    comm_broadcast(mesh->pp, &loss, 1, COMM_FP32, mesh->pp_size - 1, COMM_ALGO_DEFAULT);
    return loss;
}

void pp_sum_tied_grads(pp *p) {
    /* The embeddings are chunk 0's on the first stage, the head's copy chunk v-1's on the last. */
    model *m = p->chunks[p->mesh->pp_rank == 0 ? 0 : p->v - 1];
    if (p->mesh->pp_size == 1 || !model_get_config(m)->tied || !p->mesh->embed) return;
    const model_tensor *wte = model_tensor_find(m, "wte");
    MP_ASSERT(wte, "a first or last stage of a tied model without wte");
    float *g = model_grads(m) + wte->offset;
    comm_allreduce(p->mesh->embed, g, g, wte->size, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
}
