/* panel_comm.c: panel 3: per-rank timelines of compute spans and comm calls (so allreduce overlapping
 * backward shows), bytes and bus bandwidth per collective, and a ring allreduce animated step by step. */
#include "panels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LABEL_COLS = 9 }; /* "r12 comm " */

static const char SPAN_CHARS[VZ_NSPAN_KINDS] = {'F', 'B', 'O', '*'};
static const int SPAN_PAIRS[VZ_NSPAN_KINDS] = {VZ_PAIR_FORWARD, VZ_PAIR_BACKWARD, VZ_PAIR_OPTIMIZER, VZ_PAIR_OTHER};

/* A comm call's mark when it has no bucket: the op's letter. */
static char op_char(const char *op) {
    static const struct {
        const char *op;
        char c;
    } OPS[] = {{"allreduce", 'A'}, {"allgather", 'G'}, {"reduce_scatter", 'R'}, {"broadcast", 'C'}, {"reduce", 'r'},
               {"barrier", '|'},   {"send", 's'},      {"recv", 'v'},           {"scatter", 'S'},   {"gather", 'g'}};
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        if (strcmp(op, OPS[i].op) == 0) return OPS[i].c;
    return '?';
}

/* ---------------------------------------------------------------- lanes: short spans never vanish */

/* One span or call on a lane: the columns it covers, its length, and how it is drawn. */
typedef struct {
    int c0, c1, order;
    double seconds;
    char ch;
    attr_t at;
} lane_mark;

/* Longest first, so shorter marks are drawn over longer ones; equal lengths in the order written. */
static int by_length_desc(const void *pa, const void *pb) {
    const lane_mark *a = pa, *b = pb;
    if (a->seconds != b->seconds) return a->seconds < b->seconds ? 1 : -1;
    return a->order - b->order;
}

/* Draws a lane so that nothing is lost to a longer neighbour: a mark drawn after (shorter than) another
 * covers it, and a mark of one column whose column another one-column mark already holds (a 0.35 ms
 * optimizer step and the next step's data wait, 75 ms to a column) moves to the nearest free column, up to
 * two away. Returns how many one-column marks found no column. */
static int draw_lane(WINDOW *w, int row, int x, int width, double col_seconds, lane_mark *marks, int n) {
    for (int i = 0; i < n; i++) /* shorter than a column but across a column edge: still one column */
        if (marks[i].seconds < col_seconds && marks[i].c1 == marks[i].c0 + 1) marks[i].c1 = marks[i].c0;
    qsort(marks, (size_t)n, sizeof *marks, by_length_desc);
    bool *point = calloc((size_t)width, sizeof *point);
    if (!point) return 0;
    int lost = 0;
    for (int i = 0; i < n; i++) {
        const lane_mark *k = &marks[i];
        if (k->c1 > k->c0) {
            for (int c = k->c0; c <= k->c1; c++)
                if (!point[c]) vz_char(w, row, x + c, k->at, (wchar_t)k->ch);
            continue;
        }
        static const int TRY[] = {0, 1, -1, 2, -2};
        int c = -1;
        for (size_t t = 0; t < sizeof TRY / sizeof TRY[0] && c < 0; t++) {
            int cc = k->c0 + TRY[t];
            if (cc >= 0 && cc < width && !point[cc]) c = cc;
        }
        if (c < 0) {
            lost++;
            continue;
        }
        point[c] = true;
        vz_char(w, row, x + c, k->at, (wchar_t)k->ch);
    }
    free(point);
    return lost;
}

/* The time window: ends at the newest span or comm call of any rank; spans three steps (the period of
 * rank 0's last forward passes) at zoom 0. */
static void time_window(const vz_model *m, const vz_view *v, double *t0, double *t1) {
    double end = -INFINITY, first = INFINITY, period = 0;
    for (int r = 0; r < m->nranks; r++) {
        double off = vz_model_clock_offset(m, r);
        const vz_span *s = vz_ring_last(&m->ranks[r].spans);
        const vz_comm *c = vz_ring_last(&m->ranks[r].comms);
        const vz_span *s0 = vz_ring_at(&m->ranks[r].spans, 0);
        const vz_comm *c0 = vz_ring_at(&m->ranks[r].comms, 0);
        if (s && s->t1 + off > end) end = s->t1 + off;
        if (c && c->t1 + off > end) end = c->t1 + off;
        if (s0 && s0->t0 + off < first) first = s0->t0 + off;
        if (c0 && c0->t0 + off < first) first = c0->t0 + off;
        if (period > 0) continue;
        /* the distance between the last two forward spans */
        double last_forward = NAN;
        for (size_t i = m->ranks[r].spans.count; i-- > 0;) {
            const vz_span *sp = vz_ring_at(&m->ranks[r].spans, i);
            if (sp->kind != VZ_SPAN_FORWARD || sp->micro > 0 || sp->chunk > 0) continue; /* a step's first forward */
            if (isnan(last_forward)) last_forward = sp->t0;
            else {
                period = last_forward - sp->t0;
                break;
            }
        }
    }
    if (!(end > -INFINITY)) end = 1, first = 0;
    double window = period > 0 ? 3 * period : end - first;
    if (!(window > 0)) window = 1;
    window /= pow(2, v->zoom);
    end -= v->scroll * window / 2;
    *t0 = end - window;
    *t1 = end;
}

static int draw_timeline(WINDOW *w, const vz_model *m, const vz_view *v, int y, int rows, int cols, const vz_style *s) {
    double t0, t1;
    time_window(m, v, &t0, &t1);
    int width = cols - LABEL_COLS - 1;
    char a[32], b[32], b2[32];
    const char *how = vz_model_clock_alignment(m);
    vz_text(w, y, 0, cols, A_BOLD, "timeline: %s per rank%s%s   +/- zoom, left/right scroll", vz_fmt_seconds(t1 - t0, a, sizeof a),
            how[0] ? ", clocks aligned " : "", how);
    int world = vz_model_world(m);
    if (world < 1) world = 1;
    int lanes = (rows - 4) / 2; /* ranks that fit: two rows each, below the title and axis, above two rows */
    if (lanes < 1) return 0;
    int first = 0;
    if (world > lanes) {
        first = v->rank - lanes / 2;
        if (first < 0) first = 0;
        if (first + lanes > world) first = world - lanes;
    }
    vz_text(w, y + 1, LABEL_COLS, cols, vz_attr(s, VZ_PAIR_DIM), "%.3f s", t0);
    snprintf(b, sizeof b, "%.3f s", t1);
    vz_text(w, y + 1, cols - 1 - (int)strlen(b), cols, vz_attr(s, VZ_PAIR_DIM), "%s", b);
    int row = y + 2;
    for (int r = first; r < world && r < first + lanes; r++, row += 2) {
        attr_t label = r == v->rank ? (A_BOLD | vz_attr(s, VZ_PAIR_ACCENT)) : vz_attr(s, VZ_PAIR_DIM);
        vz_text(w, row, 0, LABEL_COLS, label, "r%-2d comp", r);
        vz_text(w, row + 1, 0, LABEL_COLS, label, "    comm");
        vz_glyph_at(w, row, LABEL_COLS - 1, vz_attr(s, VZ_PAIR_DIM), s, VZ_G_VLINE);
        vz_glyph_at(w, row + 1, LABEL_COLS - 1, vz_attr(s, VZ_PAIR_DIM), s, VZ_G_VLINE);
        const vz_rank *rk = &m->ranks[r];
        double off = vz_model_clock_offset(m, r); /* this rank's times on rank 0's clock */
        if (!rk->seen) {
            vz_text(w, row, LABEL_COLS, width, vz_attr(s, VZ_PAIR_WARN), "waiting for events.rank%d.jsonl", r);
            continue;
        }
        size_t cap = rk->spans.count > rk->comms.count ? rk->spans.count : rk->comms.count;
        lane_mark *marks = malloc((cap ? cap : 1) * sizeof *marks);
        if (!marks) continue;
        int nmarks = 0;
        for (size_t i = 0; i < rk->spans.count; i++) {
            const vz_span *sp = vz_ring_at(&rk->spans, i);
            double s0 = sp->t0 + off, s1 = sp->t1 + off;
            if (s1 < t0 || s0 > t1) continue;
            int c0 = (int)floor((s0 - t0) / (t1 - t0) * width), c1 = (int)floor((s1 - t0) / (t1 - t0) * width);
            if (c0 < 0) c0 = 0;
            if (c1 >= width) c1 = width - 1;
            int k = nmarks++;
            marks[k] = (lane_mark){c0, c1, k, sp->t1 - sp->t0, SPAN_CHARS[sp->kind],
                                   vz_attr(s, SPAN_PAIRS[sp->kind]) | (s->color ? A_REVERSE : 0)};
        }
        draw_lane(w, row, LABEL_COLS, width, (t1 - t0) / width, marks, nmarks);
        if (rk->comms.count == 0 && m->comm_events == 0) {
            vz_text(w, row + 1, LABEL_COLS, width, vz_attr(s, VZ_PAIR_DIM), "(no comm events%s)",
                    world == 1 ? ": a single-rank run" : "");
            free(marks);
            continue;
        }
        nmarks = 0;
        for (size_t i = 0; i < rk->comms.count; i++) {
            const vz_comm *cm = vz_ring_at(&rk->comms, i);
            double s0 = cm->t0 + off, s1 = cm->t1 + off;
            if (s1 < t0 || s0 > t1) continue;
            int c0 = (int)floor((s0 - t0) / (t1 - t0) * width), c1 = (int)floor((s1 - t0) / (t1 - t0) * width);
            if (c0 < 0) c0 = 0;
            if (c1 >= width) c1 = width - 1;
            char ch = cm->bucket >= 0 ? (char)('0' + cm->bucket % 10) : op_char(cm->op);
            int pair = cm->bucket >= 0 && cm->bucket % 2 ? VZ_PAIR_COMM_ALT : VZ_PAIR_COMM;
            int k = nmarks++;
            marks[k] = (lane_mark){c0, c1, k, cm->t1 - cm->t0, ch, vz_attr(s, pair) | (s->color ? A_REVERSE : 0)};
        }
        draw_lane(w, row + 1, LABEL_COLS, width, (t1 - t0) / width, marks, nmarks);
        free(marks);
    }
    /* per rank in view: communication no compute hides, and time doing neither */
    int x = vz_text(w, row, 0, cols, A_BOLD, "in view, comm not under compute | idle: ");
    for (int r = first; r < world && r < first + lanes && x < cols; r++) {
        vz_busy b = vz_model_busy(m, r, t0, t1);
        x += vz_text(w, row, x, cols - x, A_NORMAL, "r%d %s %.0f%% | %s %.0f%%  ", r,
                     vz_fmt_seconds(b.exposed_comm, a, sizeof a), 100 * b.exposed_comm / (t1 - t0),
                     vz_fmt_seconds(b.idle, b2, sizeof b2), 100 * b.idle / (t1 - t0));
    }
    row++;
    x = 0;
    if (world > lanes) /* ranks left out: said first, so a narrow screen keeps it */
        x = vz_text(w, row, 0, cols, vz_attr(s, VZ_PAIR_WARN), "+%d more rank%s (up/down) ", world - lanes, world - lanes == 1 ? "" : "s");
    vz_text(w, row, x, cols - x, vz_attr(s, VZ_PAIR_DIM),
            "F forward B backward O optimizer * data | comm row: 0-9 bucket, A allreduce G allgather R reduce-scatter");
    return row + 1 - y;
}

/* The table's columns after the collective's name; those that do not fit are left out and counted. */
enum { OPS_NCOLS = 6 };
static const char *const OPS_HEADS[OPS_NCOLS] = {"algorithm", "calls", "bytes/call", "time/call", "algbw", "busbw"};
static const int OPS_WIDTHS[OPS_NCOLS] = {-9, 7, 11, 11, 11, 11};

static int draw_ops(WINDOW *w, const vz_model *m, int y, int rows, int cols, const vz_style *s) {
    if (rows < 2) return 0;
    int fit = 0, width = 15, note = 10; /* note: " +6 more" */
    while (fit < OPS_NCOLS && width + 1 + abs(OPS_WIDTHS[fit]) + (fit + 1 < OPS_NCOLS ? note : 0) <= cols)
        width += 1 + abs(OPS_WIDTHS[fit++]);
    int x = vz_text(w, y, 0, cols, A_BOLD, "%-15s", "collective");
    for (int c = 0; c < fit; c++) x += vz_text(w, y, x, cols - x, A_BOLD, " %*s", OPS_WIDTHS[c], OPS_HEADS[c]);
    if (fit < OPS_NCOLS) vz_text(w, y, x, cols - x, vz_attr(s, VZ_PAIR_WARN), " +%d more", OPS_NCOLS - fit);
    if (m->nops == 0) {
        vz_text(w, y + 1, 0, cols, vz_attr(s, VZ_PAIR_DIM), "(no comm events in this run)");
        return 2;
    }
    int r = 1;
    for (int i = 0; i < m->nops && r < rows; i++, r++) {
        const vz_opstat *o = &m->ops[i];
        char cell[OPS_NCOLS][24];
        double secs = o->seconds > 0 ? o->seconds : NAN;
        snprintf(cell[0], sizeof cell[0], "%s", o->algorithm);
        snprintf(cell[1], sizeof cell[1], "%lld", o->calls);
        vz_fmt_bytes(o->bytes / (double)o->calls, cell[2], sizeof cell[2]);
        vz_fmt_seconds(o->seconds / (double)o->calls, cell[3], sizeof cell[3]);
        snprintf(cell[4], sizeof cell[4], isfinite(secs) ? "%.2f GB/s" : "-", o->bytes / secs / 1e9);
        snprintf(cell[5], sizeof cell[5], isfinite(secs) ? "%.2f GB/s" : "-", o->bus_bytes / secs / 1e9);
        x = vz_text(w, y + r, 0, cols, A_NORMAL, "%-15s", o->op);
        for (int c = 0; c < fit; c++) x += vz_text(w, y + r, x, cols - x, A_NORMAL, " %*s", OPS_WIDTHS[c], cell[c]);
    }
    if (r < rows && m->nops > r - 1) vz_text(w, y + r, 0, cols, vz_attr(s, VZ_PAIR_WARN), "+%d more collectives", m->nops - (r - 1));
    return r;
}

/* The collective that carries the model's data, or NULL: of the allreduce, reduce-scatter and allgather
 * calls over two or more ranks, the (op, algorithm) that moved the most bytes. DDP's gradient buckets, not
 * its 4-byte loss allreduce; ZeRO-3 and FSDP's reduce-scatter of gradients or allgather of parameters. */
static const vz_opstat *real_collective(const vz_model *m) {
    const vz_opstat *best = NULL;
    for (int i = 0; i < m->nops; i++) {
        const vz_opstat *o = &m->ops[i];
        bool data = strcmp(o->op, "allreduce") == 0 || strcmp(o->op, "reduce_scatter") == 0 || strcmp(o->op, "allgather") == 0;
        if (data && o->ranks >= 2 && (!best || o->bytes > best->bytes)) best = o;
    }
    return best;
}

/* Only a ring algorithm has the steps the view draws; "native" is the MPI library's own choice, unseen. */
static bool is_ring(const vz_opstat *o) { return strcmp(o->algorithm, "ring") == 0; }

int vz_view_ring_ranks(const vz_view *v, const vz_model *m) {
    const vz_opstat *real = real_collective(m);
    int n = !v->ring_model && real ? real->ranks : v->ring_ranks;
    return n < 2 ? 2 : n > VZ_ALLREDUCE_MAX_RANKS ? VZ_ALLREDUCE_MAX_RANKS : n;
}

void vz_view_ring_phase(const vz_view *v, const vz_model *m, int *first, int *end) {
    const vz_opstat *real = v->ring_model ? NULL : real_collective(m);
    int n = vz_view_ring_ranks(v, m);
    *first = 0;
    *end = vz_allreduce_steps(n);
    if (real && strcmp(real->op, "reduce_scatter") == 0) *end = n - 1;
    if (real && strcmp(real->op, "allgather") == 0) *first = n - 1;
}

/* The other data collectives of the run, in one line (ZeRO-3 has both a reduce-scatter and an allgather). */
static void draw_other_collectives(WINDOW *w, const vz_model *m, const vz_opstat *shown, int y, int cols, const vz_style *s) {
    int x = 0;
    for (int i = 0; i < m->nops && x < cols; i++) {
        const vz_opstat *o = &m->ops[i];
        if (o == shown || o->ranks < 2) continue;
        char b1[24];
        x += vz_text(w, y, x, cols - x, vz_attr(s, VZ_PAIR_DIM), "%s%s %s (%s) %s x %lld", x ? "; " : "also: ", o->op,
                     o->algorithm, strcmp(o->algorithm, "native") == 0 ? "MPI library" : "mixpar",
                     vz_fmt_bytes(o->bytes / (double)o->calls, b1, sizeof b1), o->calls);
    }
}

static void draw_ring(WINDOW *w, const vz_model *m, const vz_view *v, int y, int rows, int cols, const vz_style *s) {
    if (rows < 3) return;
    const vz_opstat *real = v->ring_model ? NULL : real_collective(m);
    int n = vz_view_ring_ranks(v, m);
    int first, end;
    vz_view_ring_phase(v, m, &first, &end);
    vz_allreduce a = v->ring;
    if (a.ranks != n || a.step < first || a.step > end) {
        vz_allreduce_reset(&a, n);
        while (a.step < first) vz_allreduce_advance(&a);
    }
    int steps = end - first;
    bool gather = vz_allreduce_in_allgather(n, a.step);
    char b1[24], b2[24], b3[24];
    double bytes, step_s;
    const char *opname = "allreduce";
    if (real) {
        opname = strcmp(real->op, "reduce_scatter") == 0 ? "reduce-scatter" : real->op;
        bytes = real->largest_bytes;
        step_s = real->largest_seconds / steps;
        double bus = real->largest_seconds > 0 ? bytes * vz_busbw_factor(real->op, n) / real->largest_seconds / 1e9 : 0;
        if (!is_ring(real)) { /* never draw steps that did not run */
            bool native = strcmp(real->algorithm, "native") == 0;
            vz_text(w, y, 0, cols, A_BOLD, "%s from comm events: %s over %d ranks took %s (busbw %.2f GB/s)  [m: model]",
                    opname, vz_fmt_bytes(bytes, b1, sizeof b1), n, vz_fmt_seconds(real->largest_seconds, b2, sizeof b2), bus);
            vz_text(w, y + 1, 0, cols, A_NORMAL, "algorithm: %s: %s", native ? "native (MPI library)" : real->algorithm,
                    native ? "the library picks its own steps, unseen by mixpar: no ring is drawn"
                           : "not a ring: no ring is drawn");
            draw_other_collectives(w, m, real, y + 2, cols, s);
            return;
        }
        vz_text(w, y, 0, cols, A_BOLD, "ring %s from comm events: %s over %d ranks took %s (busbw %.2f GB/s)  [m: model]",
                opname, vz_fmt_bytes(bytes, b1, sizeof b1), n, vz_fmt_seconds(real->largest_seconds, b2, sizeof b2), bus);
    } else {
        bytes = v->ring_bytes > 0 ? v->ring_bytes : m->params > 0 ? 4 * m->params : 100e6;
        double total = vz_allreduce_model_seconds(n, bytes, v->ring_alpha, v->ring_beta);
        step_s = total / steps;
        vz_text(w, y, 0, cols, A_BOLD, "ring allreduce, alpha-beta model: %s over %d ranks, alpha %s, beta %.0f GB/s: %s%s",
                vz_fmt_bytes(bytes, b1, sizeof b1), n, vz_fmt_seconds(v->ring_alpha, b2, sizeof b2), v->ring_beta / 1e9,
                vz_fmt_seconds(total, b3, sizeof b3), m->nops ? "  [m: real]" : "  [ ]: ranks");
    }
    if (a.step >= end)
        vz_text(w, y + 1, 0, cols, A_NORMAL, "step %d/%d: done: %s", steps, steps,
                end < vz_allreduce_steps(n) ? "each rank holds the sum of its own chunk" : "every rank holds the sum of every chunk");
    else
        vz_text(w, y + 1, 0, cols, A_NORMAL, "step %d/%d %s: each rank sends one chunk (%s) to the next and %s it",
                a.step - first + 1, steps, gather ? "allgather" : "reduce-scatter", vz_fmt_bytes(bytes / n, b1, sizeof b1),
                gather ? "copies" : "adds");
    int shown = rows - 3;
    for (int r = 0; r < n && r < shown; r++) {
        int row = y + 2 + r, x = vz_text(w, row, 0, cols, A_NORMAL, "rank %-2d ", r);
        int sending = a.step < end ? vz_allreduce_send_chunk(n, r, a.step) : -1;
        for (int c = 0; c < n; c++) {
            int count = vz_allreduce_count(&a, r, c);
            char digit = count < 10 ? (char)('0' + count) : (char)('a' + count - 10);
            attr_t at = count == n ? (vz_attr(s, VZ_PAIR_FULL) | A_BOLD) : A_NORMAL;
            bool send = c == sending;
            if (send && s->color) at |= A_REVERSE;
            vz_char(w, row, x, at, send ? '<' : '[');
            vz_char(w, row, x + 1, at, digit);
            vz_char(w, row, x + 2, at, send ? '>' : ']');
            x += 3;
        }
        if (sending >= 0) {
            x += vz_text(w, row, x, cols - x, A_NORMAL, "  sends chunk %d ", sending);
            vz_glyph_at(w, row, x, A_NORMAL, s, VZ_G_ARROW_RIGHT);
            vz_text(w, row, x + 1, cols - x - 1, A_NORMAL, " rank %d%s", (r + 1) % n, r == n - 1 ? " (the ring closes)" : "");
        }
    }
    if (n > shown) vz_text(w, y + 2 + shown, 0, cols, vz_attr(s, VZ_PAIR_WARN), "+%d more ranks", n - shown);
    else {
        char t[24];
        int x = vz_text(w, y + 2 + n, 0, cols, vz_attr(s, VZ_PAIR_DIM),
                        "[k]: a chunk summing k ranks; <k>: sent now; %d steps x %s (%s)", steps,
                        vz_fmt_seconds(step_s, t, sizeof t), real ? "measured time / steps" : "alpha + S/(N*beta)");
        if (real && y + 3 + n < y + rows) draw_other_collectives(w, m, real, y + 3 + n, cols, s);
        (void)x;
    }
}

/* ---------------------------------------------------------------- pipeline schedule */

/* A pipeline span's mark: the forward of micro-batch k is the digit k, its backward the letter (0 -> a),
 * so the order stays readable without colour; micro-batches past 10 (26) wrap. */
char vz_pipeline_mark(const vz_span *sp) {
    return sp->kind == VZ_SPAN_FORWARD ? (char)('0' + sp->micro % 10) : (char)('a' + sp->micro % 26);
}

/* The measured bubble of a stage's rank for `step`, NAN when its step event is another step's. */
static double stage_bubble(const vz_model *m, int stage, long long step, double *schedule, double *formula) {
    const vz_pipeline_step *p = vz_model_stage_pipeline(m, stage, step);
    if (!p) return NAN;
    *schedule = p->bubble_schedule;
    *formula = p->bubble_formula;
    return p->bubble;
}

/* Which communicator each kind of call ran on ("pp send 24, recv 24 | dp allreduce 10"). */
static int draw_groups(WINDOW *w, const vz_model *m, int y, int cols, const vz_style *s) {
    int x = vz_text(w, y, 0, cols, A_BOLD, "calls by group:");
    if (m->ngroups == 0) return vz_text(w, y, x, cols - x, vz_attr(s, VZ_PAIR_DIM), " (no comm events)"), 1;
    bool *done = calloc((size_t)m->ngroups, sizeof *done);
    if (!done) return 1;
    for (int g = 0; g < m->ngroups && x < cols; g++) {
        if (done[g]) continue;
        x += vz_text(w, y, x, cols - x, A_BOLD, "%s %s", g ? " |" : "", m->groups[g].group);
        for (int h = g; h < m->ngroups; h++) {
            if (done[h] || strcmp(m->groups[h].group, m->groups[g].group) != 0) continue;
            done[h] = true;
            x += vz_text(w, y, x, cols - x, A_NORMAL, " %s %lld", m->groups[h].op, m->groups[h].calls);
        }
    }
    free(done);
    return 1;
}

int vz_pipeline_rows(const vz_model *m) { return m->pp_stages > 1 ? m->pp_stages + 4 : 0; }

/* Per stage, the forward and backward of each micro-batch of one step on one time axis (ranks on one
 * clock), the idle cells between them (the bubble), the measured bubble against the schedule's and
 * (p-1)/(v m+p-1), and which group each kind of call ran on. Draws at most `rows` rows; returns them. */
static int draw_pipeline(WINDOW *w, const vz_model *m, const vz_view *v, int y, int rows, int cols, const vz_style *s) {
    if (rows < 3 || m->pp_stages < 2) return 0;
    long long step = vz_model_pipeline_step(m, v->cursor);
    char a[32];
    int stages = m->pp_stages, shown = stages <= rows - 4 ? stages : rows - 5; /* a row for "+N more" */
    if (shown < 1) shown = 1;
    if (step < 0) {
        vz_text(w, y, 0, cols, A_BOLD, "pipeline schedule: %s, %d stages: waiting for a whole step of every stage",
                m->pp_schedule, stages);
        return 1;
    }
    /* the step's extent over every stage, on rank 0's clock */
    double t0 = INFINITY, t1 = -INFINITY;
    size_t idx[4096];
    for (int st = 0; st < stages; st++) {
        int r = vz_model_stage_rank(m, st), n = vz_model_pipeline_spans(m, st, step, idx, 4096);
        if (r < 0) continue; /* no rank of this stage has written a span */
        double off = vz_model_clock_offset(m, r);
        for (int i = 0; i < n; i++) {
            const vz_span *sp = vz_ring_at(&m->ranks[r].spans, idx[i]);
            if (sp->t0 + off < t0) t0 = sp->t0 + off;
            if (sp->t1 + off > t1) t1 = sp->t1 + off;
        }
    }
    if (!(t1 > t0)) t1 = t0 + 1e-6;
    const char *how = vz_model_clock_alignment(m);
    int x = vz_text(w, y, 0, cols, A_BOLD, "pipeline schedule: %s, %d stages x %d micro-batches", m->pp_schedule, stages,
                    m->pp_micro_batches);
    if (m->pp_chunks > 1) x += vz_text(w, y, x, cols - x, A_BOLD, " x %d chunks", m->pp_chunks);
    x += vz_text(w, y, x, cols - x, A_BOLD, ", step %lld", step);
    if (v->cursor >= 0) x += vz_text(w, y, x, cols - x, A_BOLD, " (cursor %lld)", v->cursor);
    vz_text(w, y, x, cols - x, vz_attr(s, VZ_PAIR_DIM), ": %s%s%s", vz_fmt_seconds(t1 - t0, a, sizeof a),
            how[0] ? ", clocks aligned " : "", how);
    int width = cols - LABEL_COLS - 1;
    if (width < 4) return 1;
    int lost = 0; /* spans pushed past the right edge by the ones before them (a very narrow screen) */
    for (int st = 0; st < shown; st++) {
        int row = y + 1 + st, r = vz_model_stage_rank(m, st);
        vz_text(w, row, 0, LABEL_COLS, vz_attr(s, VZ_PAIR_DIM), "s%-2d r%-3d", st, r);
        vz_glyph_at(w, row, LABEL_COLS - 1, vz_attr(s, VZ_PAIR_DIM), s, VZ_G_VLINE);
        if (r < 0) continue;
        int n = vz_model_pipeline_spans(m, st, step, idx, 4096);
        double off = vz_model_clock_offset(m, r);
        for (int c = 0; c < width; c++) vz_char(w, row, LABEL_COLS + c, vz_attr(s, VZ_PAIR_DIM), '.'); /* idle */
        /* in the order the stage ran them (one stage computes one span at a time): a span shorter than a
         * column that shares one with the previous moves right, so every span keeps a column and the order
         * stays as run; the bubble between spans stays where it was */
        int next_free = 0;
        for (int i = 0; i < n; i++) {
            const vz_span *sp = vz_ring_at(&m->ranks[r].spans, idx[i]);
            int c0 = (int)floor((sp->t0 + off - t0) / (t1 - t0) * width), c1 = (int)floor((sp->t1 + off - t0) / (t1 - t0) * width);
            if (c1 > c0 && (sp->t1 + off - t0) / (t1 - t0) * width == c1) c1--; /* ends on a column's edge */
            if (c0 < next_free) c0 = next_free;
            if (c1 < c0) c1 = c0;
            if (c0 >= width) {
                lost++;
                continue;
            }
            if (c1 >= width) c1 = width - 1;
            int pair = sp->kind == VZ_SPAN_FORWARD ? VZ_PAIR_FORWARD : VZ_PAIR_BACKWARD;
            attr_t at = vz_attr(s, pair) | (s->color ? A_REVERSE : 0) | (sp->chunk % 2 ? A_UNDERLINE : 0);
            for (int c = c0; c <= c1; c++) vz_char(w, row, LABEL_COLS + c, at, (wchar_t)vz_pipeline_mark(sp));
            next_free = c1 + 1;
        }
    }
    int row = y + 1 + shown;
    if (lost > 0) vz_text(w, y, cols - 24, 24, vz_attr(s, VZ_PAIR_WARN), " +%d spans past the edge", lost);
    if (shown < stages)
        vz_text(w, row++, 0, cols, vz_attr(s, VZ_PAIR_WARN), "+%d more stage%s (a taller terminal shows them)",
                stages - shown, stages - shown == 1 ? "" : "s");
    /* the bubble: the formula, what the schedule's order implies, then measured per stage */
    double schedule = NAN, formula = NAN;
    for (int st = 0; st < stages; st++) {
        double sch = NAN, frm = NAN;
        stage_bubble(m, st, step, &sch, &frm);
        if (isfinite(sch)) schedule = sch;
        if (isfinite(frm)) formula = frm;
    }
    int p = stages, vm = (m->pp_chunks > 0 ? m->pp_chunks : 1) * m->pp_micro_batches;
    if (!isfinite(formula) && vm > 0) formula = (double)(p - 1) / (vm + p - 1);
    x = vz_text(w, row, 0, cols, A_BOLD, "bubble");
    x += vz_text(w, row, x, cols - x, A_NORMAL, " (p-1)/(vm+p-1)=%d/%d %.0f%%, order %.0f%%, measured", p - 1, vm + p - 1,
                 100 * formula, 100 * schedule);
    for (int st = 0; st < stages && x < cols; st++) {
        double sch, frm, b = stage_bubble(m, st, step, &sch, &frm);
        x += isfinite(b) ? vz_text(w, row, x, cols - x, A_NORMAL, " s%d %.0f%%", st, 100 * b)
                         : vz_text(w, row, x, cols - x, vz_attr(s, VZ_PAIR_DIM), " s%d -", st);
    }
    draw_groups(w, m, row + 1, cols, s);
    vz_text(w, row + 2, 0, cols, vz_attr(s, VZ_PAIR_DIM),
            "0-9 forward of micro-batch k, a-z its backward%s, . idle (the bubble); g N Enter: step N",
            m->pp_chunks > 1 ? ", underlined: an odd chunk" : "");
    return row + 3 - y;
}

void vz_panel_comm(WINDOW *w, const vz_model *m, const vz_view *v, const vz_style *s) {
    int rows, cols;
    getmaxyx(w, rows, cols);
    int n = vz_view_ring_ranks(v, m);
    int ring_rows = n + 3;
    int ops_rows = 1 + (m->nops > 0 ? (m->nops < 4 ? m->nops : 4) : 1);
    int world = vz_model_world(m) > 0 ? vz_model_world(m) : 1;
    int pipe_rows = vz_pipeline_rows(m);
    if (pipe_rows > 0) { /* pipeline parallel: its schedule before the timeline's ranks */
        int room = rows - 7; /* before the timeline (6 rows at least) and the table: what pp is about */
        if (pipe_rows > room) pipe_rows = room > 5 ? room : 5;
        int y = draw_pipeline(w, m, v, 0, pipe_rows, cols, s) + 1;
        int timeline_rows = rows - y - ops_rows - 2;
        if (timeline_rows > 4 + 2 * world) timeline_rows = 4 + 2 * world;
        if (timeline_rows < 6) timeline_rows = 6;
        WINDOW *rest = derwin(w, rows - y > 0 ? rows - y : 1, cols, y < rows ? y : rows - 1, 0);
        if (!rest) return;
        int yy = draw_timeline(rest, m, v, 0, timeline_rows, cols, s) + 1;
        yy += draw_ops(rest, m, yy, ops_rows, cols, s) + 1;
        draw_ring(rest, m, v, yy, rows - y - yy, cols, s);
        delwin(rest);
        return;
    }
    int timeline_rows = rows - ring_rows - ops_rows - 2;
    if (timeline_rows > 4 + 2 * world) timeline_rows = 4 + 2 * world;
    if (timeline_rows < 6) { /* a short screen: the timeline first, the ring gets what is left */
        timeline_rows = 6;
        ring_rows = rows - timeline_rows - ops_rows - 2;
    }
    int y = draw_timeline(w, m, v, 0, timeline_rows, cols, s) + 1;
    y += draw_ops(w, m, y, ops_rows, cols, s) + 1;
    draw_ring(w, m, v, y, rows - y, cols, s);
}
