/* pp.c: pipeline parallelism: stage balancing, GPipe and 1F1B schedules, their p2p of activations and gradients, bubble and in-flight accounting. */
#include "dist/pp.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/mem.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

const char *const pp_schedule_names[] = {[PP_GPIPE] = "gpipe", [PP_1F1B] = "1f1b", NULL};

int pp_schedule_from_name(const char *name) {
    for (int k = 0; k < PP_NSCHEDULES; k++)
        if (strcmp(name, pp_schedule_names[k]) == 0) return k;
    return -1;
}

/* ------------------------------------------------------------------ schedules */

void pp_schedule_actions(pp_schedule kind, int p, int s, int m, pp_action *out) {
    MP_ASSERT(p >= 1 && s >= 0 && s < p && m >= 1, "schedule of stage %d of %d, %d micro-batches", s, p, m);
    int n = 0, f = 0, b = 0;
    if (kind == PP_GPIPE) {
        while (f < m) out[n++] = (pp_action){'F', f++};
        while (b < m) out[n++] = (pp_action){'B', b++};
        return;
    }
    /* 1F1B: warm up with the forwards the later stages need before the first backward can come back,
     * then one forward and one backward in turn, then the backwards that are left. */
    int warmup = p - s - 1 < m ? p - s - 1 : m;
    while (f < warmup) out[n++] = (pp_action){'F', f++};
    while (f < m) {
        out[n++] = (pp_action){'F', f++};
        out[n++] = (pp_action){'B', b++};
    }
    while (b < m) out[n++] = (pp_action){'B', b++};
}

double pp_bubble_formula(int p, int m) { return (double)(p - 1) / (double)(m + p - 1); }

double pp_schedule_bubble(pp_schedule kind, int p, int m, double t_fwd, double t_bwd, int *in_flight) {
    /* done_f[s][k], done_b[s][k]: when stage s finished F k and B k; each stage's actions run in its
     * schedule's order, each as soon as the stage is free and its input is there. Stages are played in
     * rounds until every action has run (a dependency may only be met by a later round's progress). */
    size_t cells = (size_t)p * m;
    double *done_f = malloc(cells * sizeof(double)), *done_b = malloc(cells * sizeof(double));
    pp_action *order = malloc((size_t)p * 2 * m * sizeof(pp_action));
    int *next = calloc((size_t)p, sizeof(int));
    double *free_at = calloc((size_t)p, sizeof(double));
    MP_ASSERT(done_f && done_b && order && next && free_at, "out of memory");
    for (size_t i = 0; i < cells; i++) done_f[i] = done_b[i] = -1;
    for (int s = 0; s < p; s++) pp_schedule_actions(kind, p, s, m, order + (size_t)s * 2 * m);
    for (bool progress = true; progress;) {
        progress = false;
        for (int s = 0; s < p; s++)
            while (next[s] < 2 * m) {
                pp_action a = order[(size_t)s * 2 * m + next[s]];
                double ready;
                if (a.kind == 'F') ready = s == 0 ? 0 : done_f[(size_t)(s - 1) * m + a.micro];
                else ready = s == p - 1 ? done_f[(size_t)s * m + a.micro] : done_b[(size_t)(s + 1) * m + a.micro];
                if (ready < 0) break; /* its input is not made yet: another stage first */
                double start = ready > free_at[s] ? ready : free_at[s];
                free_at[s] = start + (a.kind == 'F' ? t_fwd : t_bwd);
                (a.kind == 'F' ? done_f : done_b)[(size_t)s * m + a.micro] = free_at[s];
                next[s]++;
                progress = true;
            }
    }
    double makespan = 0;
    for (int s = 0; s < p; s++) {
        MP_ASSERT(next[s] == 2 * m, "schedule %s deadlocks at stage %d", pp_schedule_names[kind], s);
        makespan = free_at[s] > makespan ? free_at[s] : makespan;
        if (in_flight) { /* the most forwards done whose backward is not, in the stage's own order */
            int now = 0, most = 0;
            for (int i = 0; i < 2 * m; i++) {
                now += order[(size_t)s * 2 * m + i].kind == 'F' ? 1 : -1;
                most = now > most ? now : most;
            }
            in_flight[s] = most;
        }
    }
    double busy = (double)p * m * (t_fwd + t_bwd);
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
    model *m;
    pp_schedule kind;
    int micro;
    ev_writer *ev;
    pp_action *order;         /* (2m) this stage's schedule */
    int *slot_of;             /* (m) the activation slot micro-batch k runs in */
    bool *slot_busy;          /* (slots made) */
    int nslots;
    float *recv_act, *recv_grad; /* (B,T,C) what arrives from the neighbours (MEM_COMM) */
    float *send_grad;         /* (m, B,T,C) input gradients on their way back, one per micro-batch (MEM_COMM) */
    size_t capacity;          /* floats of one (B,T,C) buffer */
    comm_request **fwd_sends; /* (m) activation sends, waited for before the slot's backward */
    comm_request **bwd_sends; /* (m) gradient sends, waited for at the end of the step */
    pp_stats stats;
};

pp *pp_create(mesh_t *mesh, model *stage, pp_schedule kind, int micro_batches, ev_writer *ev) {
    MP_ASSERT(kind >= 0 && kind < PP_NSCHEDULES && micro_batches >= 1, "pipeline schedule %d, %d micro-batches",
              (int)kind, micro_batches);
    pp *p = calloc(1, sizeof *p);
    MP_ASSERT(p, "out of memory");
    p->mesh = mesh, p->m = stage, p->kind = kind, p->micro = micro_batches, p->ev = ev;
    int m = micro_batches;
    p->order = malloc((size_t)2 * m * sizeof *p->order);
    p->slot_of = malloc((size_t)m * sizeof(int));
    p->fwd_sends = calloc((size_t)m, sizeof *p->fwd_sends);
    p->bwd_sends = calloc((size_t)m, sizeof *p->bwd_sends);
    p->slot_busy = calloc((size_t)m, sizeof(bool));
    MP_ASSERT(p->order && p->slot_of && p->fwd_sends && p->bwd_sends && p->slot_busy, "out of memory");
    pp_schedule_actions(kind, mesh->pp_size, mesh->pp_rank, m, p->order);
    p->stats.micro_batches = m, p->stats.stages = mesh->pp_size, p->stats.stage = mesh->pp_rank;
    return p;
}

void pp_free(pp *p) {
    if (!p) return;
    mem_free(p->recv_act);
    mem_free(p->recv_grad);
    mem_free(p->send_grad);
    free(p->order), free(p->slot_of), free(p->slot_busy), free(p->fwd_sends), free(p->bwd_sends);
    free(p);
}

const pp_stats *pp_get_stats(const pp *p) { return &p->stats; }

static void ensure_buffers(pp *p, size_t floats) {
    if (floats <= p->capacity) return;
    mem_free(p->recv_act), mem_free(p->recv_grad), mem_free(p->send_grad);
    p->recv_act = mem_alloc(floats * sizeof(float), MEM_COMM, "pp.recv_activation");
    p->recv_grad = mem_alloc(floats * sizeof(float), MEM_COMM, "pp.recv_gradient");
    p->send_grad = mem_alloc((size_t)p->micro * floats * sizeof(float), MEM_COMM, "pp.send_gradients");
    p->capacity = floats;
}

/* The first free activation slot (a new one when all are busy). */
static int take_slot(pp *p) {
    for (int i = 0; i < p->nslots; i++)
        if (!p->slot_busy[i]) {
            p->slot_busy[i] = true;
            return i;
        }
    MP_ASSERT(p->nslots < p->micro, "more activation slots than micro-batches");
    p->slot_busy[p->nslots] = true;
    return p->nslots++;
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
    ev_str(p->ev, "schedule", pp_schedule_names[p->kind]);
    ev_end(p->ev);
}

float pp_run(pp *p, const int *inputs, const int *targets, int B, int T, float loss_scale, long step) {
    mesh_t *mesh = p->mesh;
    model *m = p->m;
    int C = model_get_config(m)->C, mb = p->micro, prev = mesh_pp_prev(mesh), next = mesh_pp_next(mesh);
    bool first = prev < 0, last = next < 0;
    size_t rows = (size_t)B * T, floats = rows * (size_t)C;
    ensure_buffers(p, floats);
    size_t act_most = mem_current(MEM_ACT); /* slots are allocated in forward only: the step's peak is after one */
    double t_step = mp_now(), busy = 0, t_f = 0, t_b = 0;
    double loss_sum = 0;
    int in_flight = 0, most = 0;
    for (int i = 0; i < 2 * mb; i++) {
        const pp_action *a = &p->order[i];
        int k = a->micro;
        if (a->kind == 'F') {
            if (!first) comm_recv(mesh->pp, p->recv_act, floats, COMM_FP32, prev, 2 * k);
            p->slot_of[k] = take_slot(p);
            model_use_act_slot(m, p->slot_of[k]);
            double t0 = mp_now();
            float loss = model_forward_stage(m, first ? inputs + (size_t)k * rows : NULL, first ? NULL : p->recv_act,
                                             last ? targets + (size_t)k * rows : NULL, B, T);
            double t1 = mp_now();
            busy += t1 - t0, t_f += t1 - t0;
            span_event(p, a, step, t0, t1);
            if (last) loss_sum += loss;
            else p->fwd_sends[k] = comm_isend(mesh->pp, model_stage_output(m), floats, COMM_FP32, next, 2 * k);
            most = ++in_flight > most ? in_flight : most;
            act_most = mem_current(MEM_ACT) > act_most ? mem_current(MEM_ACT) : act_most;
        } else {
            if (!last) {
                comm_recv(mesh->pp, p->recv_grad, floats, COMM_FP32, next, 2 * k + 1);
                comm_wait(&p->fwd_sends[k]); /* delivered long ago: the gradient of it just came back */
            }
            model_use_act_slot(m, p->slot_of[k]);
            float *dinput = first ? NULL : p->send_grad + (size_t)k * floats;
            double t0 = mp_now();
            model_backward_stage(m, loss_scale / (float)mb, last ? NULL : p->recv_grad, dinput);
            double t1 = mp_now();
            busy += t1 - t0, t_b += t1 - t0;
            span_event(p, a, step, t0, t1);
            if (!first) p->bwd_sends[k] = comm_isend(mesh->pp, dinput, floats, COMM_FP32, prev, 2 * k + 1);
            p->slot_busy[p->slot_of[k]] = false;
            in_flight--;
        }
    }
    comm_wait_all(p->bwd_sends, (size_t)mb);
    model_use_act_slot(m, 0);
    /* The last stage has the loss: every stage reports it (the step event, the trainer's line). */
    float loss = last ? (float)(loss_sum / mb) : 0.0f;
    comm_broadcast(mesh->pp, &loss, 1, COMM_FP32, mesh->pp_size - 1, COMM_ALGO_DEFAULT);
    pp_stats *st = &p->stats;
    st->step_s = mp_now() - t_step;
    st->busy_s = busy;
    st->bubble = st->step_s > 0 ? 1.0 - busy / st->step_s : 0;
    st->bubble_schedule = pp_schedule_bubble(p->kind, mesh->pp_size, mb, t_f / mb, t_b / mb, NULL);
    st->max_in_flight = most;
    st->slots = model_act_slots(m);
    st->act_peak_bytes = act_most;
    return loss;
}

void pp_sum_tied_grads(pp *p) {
    model *m = p->m;
    if (p->mesh->pp_size == 1 || !model_get_config(m)->tied || !p->mesh->embed) return;
    const model_tensor *wte = model_tensor_find(m, "wte");
    MP_ASSERT(wte, "a first or last stage of a tied model without wte");
    float *g = model_grads(m) + wte->offset;
    comm_allreduce(p->mesh->embed, g, g, wte->size, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
}
