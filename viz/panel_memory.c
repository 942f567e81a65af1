/* panel_memory.c: panel 4: memory per rank as bars stacked by tag (now and peak) beside the planner's
 * prediction from the run header, and a table for the rank in focus. The bars and totals are device memory;
 * the host pool (ZeRO-Offload's optimizer state and master) is not part of them and has its own line. */
#include "panels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LABEL_COLS = 9, VALUE_COLS = 10 };

static const char TAG_CHARS[VZ_NTAGS] = {'P', 'G', 'M', 'O', 'A', 'C', '.', 'H'};

/* The device tags: every one but host, which is another pool (as mem_current_total counts them). */
static void memory_history(WINDOW *w, int y, int x, int h, int wd, const vz_model *m, int rank, const vz_style *s);

static bool on_device(int tag) { return tag != VZ_TAG_HOST; }

static double total(const double v[VZ_NTAGS]) {
    double t = 0;
    for (int i = 0; i < VZ_NTAGS; i++)
        if (on_device(i)) t += v[i];
    return t;
}

/* One bar: each tag's bytes as a run of its letter, lengths by cumulative rounding (so they add up). */
static void stacked_bar(WINDOW *w, int y, int x, int width, const double v[VZ_NTAGS], double scale, const vz_style *s) {
    double cum = 0;
    int at = 0;
    for (int t = 0; t < VZ_NTAGS; t++) {
        if (!on_device(t)) continue;
        cum += v[t];
        int end = scale > 0 ? (int)(cum / scale * width + 0.5) : 0;
        if (end > width) end = width;
        if (v[t] > 0 && end == at && at < width) end = at + 1; /* a tag that is there gets a cell */
        attr_t a = vz_attr(s, VZ_PAIR_TAG + t) | (s->color ? A_REVERSE : 0);
        for (; at < end; at++) vz_char(w, y, x + at, a, TAG_CHARS[t]);
    }
}

static void bar_row(WINDOW *w, int y, int cols, const char *label, attr_t la, const double v[VZ_NTAGS], double shown_total,
                    double scale, const vz_style *s) {
    int width = cols - LABEL_COLS - VALUE_COLS - 2;
    char buf[24];
    vz_text(w, y, 0, LABEL_COLS, la, "%s", label);
    vz_glyph_at(w, y, LABEL_COLS - 1, vz_attr(s, VZ_PAIR_DIM), s, VZ_G_VLINE);
    stacked_bar(w, y, LABEL_COLS, width, v, scale, s);
    vz_glyph_at(w, y, LABEL_COLS + width, vz_attr(s, VZ_PAIR_DIM), s, VZ_G_VLINE);
    vz_text(w, y, LABEL_COLS + width + 2, VALUE_COLS, A_BOLD, "%9s", vz_fmt_bytes(shown_total, buf, sizeof buf));
}

void vz_panel_memory(WINDOW *w, const vz_model *m, const vz_view *v, const vz_style *s) {
    int rows, cols;
    getmaxyx(w, rows, cols);
    int world = vz_model_world(m) > 0 ? vz_model_world(m) : 1;
    vz_text(w, 0, 0, cols, A_BOLD, "memory per rank by tag: now, peak (per-tag peaks; the total is the allocator's peak) and the plan");

    /* one scale for every bar, so ranks and the plan compare by length (and runs side by side, too) */
    double scale = m->have_plan ? total(m->plan) : 0;
    if (v->mem_scale > scale) scale = v->mem_scale;
    for (int r = 0; r < world; r++) {
        const vz_mem *mem = &m->ranks[r].mem;
        if (!mem->valid) continue;
        if (total(mem->peak) > scale) scale = total(mem->peak);
        if (total(mem->current) > scale) scale = total(mem->current);
    }

    int table_rows = VZ_NTAGS + 3;
    int lanes = (rows - 4 - table_rows - (m->have_plan ? 1 : 0)) / 2;
    if (lanes < 1) lanes = 1;
    int first = 0;
    if (world > lanes) {
        first = v->rank - lanes / 2;
        if (first < 0) first = 0;
        if (first + lanes > world) first = world - lanes;
    }
    int y = 2;
    char label[24];
    for (int r = first; r < world && r < first + lanes; r++) {
        const vz_mem *mem = &m->ranks[r].mem;
        attr_t la = r == v->rank ? (A_BOLD | vz_attr(s, VZ_PAIR_ACCENT)) : A_NORMAL;
        snprintf(label, sizeof label, "r%-2d now", r);
        if (!mem->valid) {
            vz_text(w, y, 0, cols, la, "%s", label);
            vz_text(w, y, LABEL_COLS, cols - LABEL_COLS, vz_attr(s, VZ_PAIR_DIM), "(no mem event yet%s)",
                    m->ranks[r].seen ? "" : ": waiting for this rank's file");
            y += 2;
            continue;
        }
        bar_row(w, y, cols, label, la, mem->current, total(mem->current), scale, s);
        bar_row(w, y + 1, cols, "    peak", la, mem->peak, mem->peak_total, scale, s);
        y += 2;
    }
    if (m->have_plan) bar_row(w, y++, cols, "plan", A_BOLD, m->plan, total(m->plan), scale, s);
    else vz_text(w, y++, 0, cols, vz_attr(s, VZ_PAIR_DIM), "plan     (the run header has no plan)");
    int x = 0;
    for (int t = 0; t < VZ_NTAGS; t++) {
        if (!on_device(t)) continue;
        vz_char(w, y, x, vz_attr(s, VZ_PAIR_TAG + t) | (s->color ? A_REVERSE : 0), TAG_CHARS[t]);
        x += 1 + vz_text(w, y, x + 1, cols - x - 1, A_NORMAL, " %s", VZ_TAG_NAMES[t]) + 2;
    }
    if (world > lanes) { /* ranks left out: at the row's right end, over the legend if need be */
        char more[48];
        int n = snprintf(more, sizeof more, " +%d more ranks (up/down)", world - lanes);
        vz_text(w, y, cols - n > x ? x : (cols - n > 0 ? cols - n : 0), cols, vz_attr(s, VZ_PAIR_WARN), "%s", more);
    }
    y += 2;

    /* the table for the rank in focus */
    const vz_mem *mem = &m->ranks[v->rank].mem;
    vz_text(w, y++, 0, cols, A_BOLD, "rank %-3d %12s %12s %12s %10s", v->rank, "now", "peak", "plan", "peak/plan");
    char a[24], b[24], c[24];
    int table_top = y - 1;
    for (int t = 0; t < VZ_NTAGS && y < rows; t++) {
        if (!on_device(t)) continue;
        double plan = m->have_plan ? m->plan[t] : 0;
        char ratio[24] = "-";
        if (plan > 0 && mem->valid) snprintf(ratio, sizeof ratio, "%.0f%%", 100 * mem->peak[t] / plan);
        bool over = vz_model_over_plan(m, v->rank, t); /* highlighted, and marked in words for no colour */
        if (over) vz_text(w, y, 58, cols - 58, vz_attr(s, VZ_PAIR_WARN) | A_BOLD, " over plan");
        vz_text(w, y, 0, cols, over ? (vz_attr(s, VZ_PAIR_WARN) | A_BOLD) : A_NORMAL, "%-8s %12s %12s %12s %10s", VZ_TAG_NAMES[t],
                mem->valid ? vz_fmt_bytes(mem->current[t], a, sizeof a) : "-",
                mem->valid ? vz_fmt_bytes(mem->peak[t], b, sizeof b) : "-",
                m->have_plan ? vz_fmt_bytes(plan, c, sizeof c) : "-", ratio);
        y++;
    }
    if (y < rows) {
        char ratio[24] = "-";
        double plan = m->have_plan ? total(m->plan) : 0;
        if (plan > 0 && mem->valid) snprintf(ratio, sizeof ratio, "%.0f%%", 100 * mem->peak_total / plan);
        vz_text(w, y, 0, cols, A_BOLD, "%-8s %12s %12s %12s %10s", "total",
                mem->valid ? vz_fmt_bytes(total(mem->current), a, sizeof a) : "-",
                mem->valid ? vz_fmt_bytes(mem->peak_total, b, sizeof b) : "-", m->have_plan ? vz_fmt_bytes(plan, c, sizeof c) : "-",
                ratio);
        y++;
    }
    /* Host memory on its own line, outside the device total, when the run offloads anything there. */
    double host_plan = m->have_plan ? m->plan[VZ_TAG_HOST] : 0;
    if (y < rows && ((mem->valid && mem->peak[VZ_TAG_HOST] > 0) || host_plan > 0)) {
        char ratio[24] = "-";
        if (host_plan > 0 && mem->valid) snprintf(ratio, sizeof ratio, "%.0f%%", 100 * mem->peak[VZ_TAG_HOST] / host_plan);
        vz_text(w, y++, 0, cols, vz_attr(s, VZ_PAIR_DIM), "%-8s %12s %12s %12s %10s  (host memory, not in the total)",
                VZ_TAG_NAMES[VZ_TAG_HOST], mem->valid ? vz_fmt_bytes(mem->current[VZ_TAG_HOST], a, sizeof a) : "-",
                mem->valid ? vz_fmt_bytes(mem->peak[VZ_TAG_HOST], b, sizeof b) : "-",
                host_plan > 0 ? vz_fmt_bytes(host_plan, c, sizeof c) : "-", ratio);
    }
    if (mem->valid && y < rows)
        vz_text(w, y, 0, cols, vz_attr(s, VZ_PAIR_DIM), "as of step %lld", mem->step);
    y++;

    /* the history of the rank in focus: right of the table when there is room, else under it */
    if (cols >= 112) memory_history(w, table_top, 70, rows - table_top, cols - 70, m, v->rank, s);
    else if (rows - y >= 6) memory_history(w, y, 0, rows - y, cols, m, v->rank, s);
}

/* The rank's device memory over its mem events: the total and each tag in use, and the capacity of
 * train.max_memory when the run had one. */
static void memory_history(WINDOW *w, int y, int x, int h, int wd, const vz_model *m, int rank, const vz_style *s) {
    size_t n = vz_model_mem_samples(m, rank);
    if (h < 5 || wd < 20) return;
    /* steps, the total and each tag in MB, then the capacity line's points */
    double *buf = malloc(((n + 1) * (VZ_NTAGS + 2) + 2 * ((size_t)wd + 1)) * sizeof *buf);
    if (!buf) {
        fprintf(stderr, "mixpar viz: out of memory\n");
        exit(3);
    }
    double *xs = buf, *tot = buf + (n + 1), *tags = tot + (n + 1);
    double *capx = tags + VZ_NTAGS * (n + 1), *capy = capx + wd + 1;
    vz_series series[VZ_NTAGS + 2];
    int ns = 0;
    for (size_t i = 0; i < n; i++) {
        const vz_mem_sample *ms = vz_model_mem_sample(m, rank, i);
        xs[i] = (double)ms->step;
        tot[i] = total(ms->current) / 1e6;
        for (int t = 0; t < VZ_NTAGS; t++) tags[t * (n + 1) + i] = ms->current[t] / 1e6;
    }
    series[ns++] = (vz_series){"total", VZ_PAIR_ACCENT, xs, tot, n, 0};
    for (int t = 0; t < VZ_NTAGS; t++) {
        if (!on_device(t)) continue;
        bool any = false;
        for (size_t i = 0; i < n && !any; i++) any = tags[t * (n + 1) + i] > 0;
        if (!any) continue;
        series[ns++] = (vz_series){VZ_TAG_NAMES[t], (short)(VZ_PAIR_TAG + t), xs, tags + t * (n + 1), n,
                                   s->color ? 0 : (wchar_t)TAG_CHARS[t]};
    }
    double xmin = n ? xs[0] : 0, xmax = n ? xs[n - 1] : 1;
    if (xmax <= xmin) xmax = xmin + 1;
    char title[96], cap_s[24];
    if (m->max_memory > 0) {
        /* a point per column: without colour the line is a row of '=' marks */
        for (int i = 0; i <= wd; i++) capx[i] = xmin + (xmax - xmin) * i / wd, capy[i] = m->max_memory / 1e6;
        series[ns++] = (vz_series){"capacity", VZ_PAIR_WARN, capx, capy, (size_t)wd + 1, s->color ? 0 : L'='};
        snprintf(title, sizeof title, "r%d MB over steps, capacity %s", rank, vz_fmt_bytes(m->max_memory, cap_s, sizeof cap_s));
    } else {
        snprintf(title, sizeof title, "r%d MB over steps", rank);
    }
    vz_chart_opts o = {title, xmin, xmax, false, "step"};
    if (n == 0) vz_text(w, y, x, wd, vz_attr(s, VZ_PAIR_DIM), "%s: no mem event yet", title);
    else vz_chart(w, y, x, h, wd, &o, series, ns, s);
    free(buf);
}
