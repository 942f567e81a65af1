/* panel_underflow.c: panel 2: what the run's format really flushed in backward (a layer x step heat map from
 * "rounding" events, the loss scale and skipped steps aligned under it), and, labelled apart, what a cast of a
 * layer's newest gradient histogram would lose in fp32, bf16, fp16, e4m3 and e5m2. */
#include "formats.h"
#include "panels.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

enum { LABEL_COLS = 7 }; /* "  e4m3 " left of the binade columns */

static const vz_glyph ZONE_GLYPHS[VZ_NZONES] = {VZ_G_BLOCK, VZ_G_SHADE, VZ_G_DOT, VZ_G_CROSS};

/* The non-empty binades over every histogram kept (every layer, every step: the axis stays still while the
 * layer and the step cursor move); returns false when there is none. */
static bool data_range(const vz_model *m, int *lo, int *hi) {
    bool any = false;
    for (size_t k = 0; k < m->hist_history.count; k++) {
        const vz_hist *h = vz_ring_at(&m->hist_history, k);
        for (int i = 0; i < h->nbins; i++) {
            if (h->bins[i] <= 0) continue;
            int b = h->first_binade + i;
            if (!any || b < *lo) *lo = b;
            if (!any || b > *hi) *hi = b;
            any = true;
        }
    }
    return any;
}

/* The heat map block at the panel's foot: a title row, one row per layer shown, the scale row and the
 * skipped row. Layers beyond what fits are left out with a "+N more" note in its title. */
static int heat_layers(const vz_model *m) { return vz_model_has_rounding(m) ? m->round_hi - m->round_lo + 1 : 0; }
static int heat_shown(const vz_model *m, int rows) {
    int n = heat_layers(m), room = rows - 13 - 3; /* 13: the least the histogram part needs */
    if (room < 1) room = 1;
    return n < room ? n : room;
}
static int foot_rows(const vz_model *m, int rows) { return vz_model_has_rounding(m) ? 3 + heat_shown(m, rows) : 2; }

vz_underflow_layout vz_underflow_layout_for(const vz_model *m, const vz_view *v, int rows, int cols) {
    vz_underflow_layout L;
    L.first_col = LABEL_COLS;
    int ncols = cols - LABEL_COLS - 1;
    if (ncols < 8) ncols = 8;
    /* The range always shows fp16's edges (it rounds to 0 below binade -24 and overflows above 15) and the
     * data of every layer (so switching layers keeps the axis still); what width is left goes to the small
     * end, where values are lost. */
    int dlo = -25, dhi = 16;
    data_range(m, &dlo, &dhi);
    int lo = (dlo < -25 ? dlo : -25) - 1, hi = (dhi > 16 ? dhi : 16) + 2;
    int extra = ncols - (hi - lo + 1);
    if (extra >= 0) lo -= extra;
    else hi = lo + ncols - 1; /* too narrow for everything: keep the small end */
    lo += v->scroll;
    hi += v->scroll;
    if (lo < VZ_MIN_BINADE) hi += VZ_MIN_BINADE - lo, lo = VZ_MIN_BINADE;
    if (hi > VZ_MIN_BINADE + VZ_NBINADES - 1) lo -= hi - (VZ_MIN_BINADE + VZ_NBINADES - 1), hi = VZ_MIN_BINADE + VZ_NBINADES - 1;
    L.lo = lo;
    L.hi = hi;
    L.hist_top = 1;
    /* rows: title, histogram, axis, the format rows, legend, gap, tables (header + layers), gap, the foot (the
     * heat map block, or the scale strip) */
    int layers = m->hist_hi >= m->hist_lo ? m->hist_hi - m->hist_lo + 1 : 4;
    int table = 1 + (layers > 4 ? layers : 4);
    L.hist_rows = rows - (1 + 1 + VZ_NFORMATS + 1 + 1 + table + 1 + foot_rows(m, rows));
    if (L.hist_rows > 12) L.hist_rows = 12;
    if (L.hist_rows < 3) L.hist_rows = 3;
    L.axis_row = L.hist_top + L.hist_rows;
    L.format_row = L.axis_row + 1;
    return L;
}

static double share(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0; }

static void draw_histogram(WINDOW *w, const vz_hist *h, const vz_underflow_layout *L, int cols, const vz_style *s) {
    attr_t dim = vz_attr(s, VZ_PAIR_DIM);
    double max = 0;
    for (int i = 0; h && i < h->nbins; i++)
        if (h->bins[i] > max) max = h->bins[i];
    char buf[32];
    vz_text(w, L->hist_top, 0, LABEL_COLS - 1, dim, "%6s", max > 0 ? vz_fmt_num(max, buf, sizeof buf) : "");
    vz_text(w, L->hist_top + L->hist_rows - 1, 0, LABEL_COLS - 1, dim, "%6s", "1");
    vz_text(w, L->hist_top + L->hist_rows / 2, 0, LABEL_COLS - 1, dim, "%6s", "log");
    for (int r = 0; r < L->hist_rows; r++) vz_glyph_at(w, L->hist_top + r, LABEL_COLS - 1, dim, s, VZ_G_VLINE);
    /* one column per binade, height log10(1 + count) / log10(1 + max), in eighths of a row */
    for (int b = L->lo; b <= L->hi && h && max > 0; b++) {
        int col = L->first_col + (b - L->lo);
        if (col >= cols) break;
        int i = b - h->first_binade;
        double c = i >= 0 && i < h->nbins ? h->bins[i] : 0;
        if (c <= 0) continue;
        int eighths = (int)ceil(log10(1 + c) / log10(1 + max) * L->hist_rows * 8);
        for (int r = 0; r < L->hist_rows && eighths > 0; r++, eighths -= 8)
            vz_bar_cell(w, L->hist_top + L->hist_rows - 1 - r, col, vz_attr(s, VZ_PAIR_HIST), s, eighths);
    }
    /* binade labels every 8 binades, each starting at its column */
    vz_text(w, L->axis_row, 0, LABEL_COLS, dim, "binade");
    int free_col = L->first_col;
    for (int b = L->lo; b <= L->hi; b++) {
        if (((b % 8) + 8) % 8 != 0) continue;
        int col = L->first_col + (b - L->lo);
        if (col < free_col) continue;
        free_col = col + vz_text(w, L->axis_row, col, cols - col, dim, "%d", b) + 1;
    }
}

static void draw_format_rows(WINDOW *w, const vz_underflow_layout *L, int cols, const vz_style *s) {
    for (int f = 0; f < VZ_NFORMATS; f++) {
        int y = L->format_row + f;
        vz_text(w, y, 0, LABEL_COLS - 1, A_BOLD, "%5s", VZ_FORMATS[f].name);
        for (int b = L->lo; b <= L->hi; b++) {
            int col = L->first_col + (b - L->lo);
            if (col >= cols) break;
            vz_zone z = vz_format_zone(&VZ_FORMATS[f], b);
            vz_glyph_at(w, y, col, vz_attr(s, VZ_PAIR_ZONE + (int)z), s, ZONE_GLYPHS[z]);
        }
    }
    int y = L->format_row + VZ_NFORMATS, x = 0;
    for (int z = 0; z < VZ_NZONES; z++) {
        vz_glyph_at(w, y, x, vz_attr(s, VZ_PAIR_ZONE + z), s, ZONE_GLYPHS[z]);
        x += 2 + vz_text(w, y, x + 2, cols - x - 2, A_NORMAL, "%s", VZ_ZONE_NAMES[z]) + 3;
    }
    vz_text(w, y, x, cols - x, vz_attr(s, VZ_PAIR_DIM), "(binade b holds values in [2^b, 2^(b+1)))");
}

/* The chosen layer: of its values, the share each format rounds to 0 and keeps only as subnormals. */
static void draw_shares(WINDOW *w, const vz_hist *h, int y, int x, int wd, int rows, const vz_style *s) {
    if (rows < 2) return;
    vz_text(w, y, x, wd, A_BOLD, "%-7s %8s %10s %9s", "if cast", "zero", "subnormal", "overflow");
    for (int f = 1, r = 1; f < VZ_NFORMATS && r < rows; f++, r++) {
        if (r == rows - 1 && f < VZ_NFORMATS - 1) { /* the last row left, more formats than rows: say so */
            vz_text(w, y + r, x, wd, vz_attr(s, VZ_PAIR_WARN), "+%d more formats (a taller screen)", VZ_NFORMATS - f);
            break;
        }
        int t = VZ_FORMATS[f].target;
        if (!h) {
            vz_text(w, y + r, x, wd, A_NORMAL, "%-6s %9s %10s %9s", VZ_FORMATS[f].name, "-", "-", "-");
            continue;
        }
        double lost = share(h->underflow[t], h->count);
        vz_text(w, y + r, x, wd, lost > 0.5 ? vz_attr(s, VZ_PAIR_WARN) : A_NORMAL, "%-6s %8.2f%% %9.2f%% %9.0f",
                VZ_FORMATS[f].name, lost, share(h->subnormal[t], h->count), h->overflow[t]);
    }
}

/* Every layer's losses if cast, the chosen one marked; scrolls to keep the chosen layer in view. Columns
 * and layers that do not fit are left out and counted. */
enum { LAYER_NCOLS = 5 };
static const char *const LAYER_HEADS[LAYER_NCOLS] = {"fp16 zero", "fp16 sub", "bf16 zero", "e4m3 zero", "e5m2 zero"};

static void draw_layer_table(WINDOW *w, const vz_model *m, const vz_view *v, int y, int x, int wd, int rows,
                             const vz_style *s) {
    if (rows < 2) return;
    int nlayers = m->hist_hi - m->hist_lo + 1, shown = rows - 1;
    int fit = 0, width = 7;
    while (fit < LAYER_NCOLS && width + 10 + (fit + 1 < LAYER_NCOLS ? 8 : 0) <= wd) width += 10, fit++;
    int hx = x + vz_text(w, y, x, wd, A_BOLD, "  %-5s", "layer");
    for (int c = 0; c < fit; c++) hx += vz_text(w, y, hx, x + wd - hx, A_BOLD, " %9s", LAYER_HEADS[c]);
    char more[48] = "";
    int nmore = 0;
    if (fit < LAYER_NCOLS) nmore += snprintf(more, sizeof more, " +%d cols", LAYER_NCOLS - fit);
    if (nlayers > shown) snprintf(more + nmore, sizeof more - (size_t)nmore, " +%d rows", nlayers - shown);
    if (more[0]) vz_text(w, y, hx, x + wd - hx, vz_attr(s, VZ_PAIR_WARN), "%s", more);
    int first = m->hist_lo;
    if (nlayers > shown) {
        first = v->layer - shown / 2;
        if (first < m->hist_lo) first = m->hist_lo;
        if (first + shown - 1 > m->hist_hi) first = m->hist_hi - shown + 1;
    }
    for (int layer = first, r = 1; layer <= m->hist_hi && r < rows; layer++, r++) {
        const vz_hist *h = vz_model_hist_at(m, layer, v->cursor);
        char name[24];
        if (layer < 0) snprintf(name, sizeof name, "emb");
        else if (m->layers > 0 && layer >= m->layers) snprintf(name, sizeof name, "head");
        else snprintf(name, sizeof name, "b%d", layer);
        attr_t a = layer == v->layer ? (A_BOLD | vz_attr(s, VZ_PAIR_ACCENT)) : A_NORMAL;
        if (!h) {
            vz_text(w, y + r, x, wd, a, "%c %-5s (none yet)", layer == v->layer ? '>' : ' ', name);
            continue;
        }
        const double value[LAYER_NCOLS] = {
            share(h->underflow[VZ_TARGET_FP16], h->count), share(h->subnormal[VZ_TARGET_FP16], h->count),
            share(h->underflow[VZ_TARGET_BF16], h->count), share(h->underflow[VZ_TARGET_E4M3], h->count),
            share(h->underflow[VZ_TARGET_E5M2], h->count)};
        int cx = x + vz_text(w, y + r, x, wd, a, "%c %-5s", layer == v->layer ? '>' : ' ', name);
        for (int c = 0; c < fit; c++) cx += vz_text(w, y + r, cx, x + wd - cx, a, " %8.2f%%", value[c]);
    }
}

/* The loss scale over the steps kept: one column per step (or per group of steps), height log2(scale)
 * between the run's smallest and largest; skipped steps marked. */
static void draw_scale_strip(WINDOW *w, const vz_model *m, int y, int cols, const vz_style *s) {
    size_t n = vz_model_nsteps(m);
    char a[32], b[32];
    if (n == 0) {
        vz_text(w, y, 0, cols, vz_attr(s, VZ_PAIR_DIM), "loss scale: no steps yet");
        return;
    }
    if (m->min_scale == m->max_scale) {
        vz_text(w, y, 0, cols, A_NORMAL, "loss scale %s at every step (%s run: %s); %lld of %zu steps skipped",
                vz_fmt_num(m->max_scale, a, sizeof a), m->precision,
                strncmp(m->precision, "fp16", 4) == 0 ? "a fixed scale" : "no loss scaling", m->skipped_steps, n);
        return;
    }
    /* the skipped count first: a narrow screen cuts the end of the line */
    int x = vz_text(w, y, 0, cols, m->skipped_steps ? vz_attr(s, VZ_PAIR_WARN) : A_NORMAL, "skipped %lld of %zu steps; ",
                    m->skipped_steps, n);
    x += vz_text(w, y, x, cols - x, A_NORMAL, "loss scale %s .. %s; ", vz_fmt_num(m->min_scale, a, sizeof a),
                 vz_fmt_num(m->max_scale, b, sizeof b));
    vz_glyph_at(w, y, x, vz_attr(s, VZ_PAIR_WARN), s, VZ_G_CROSS);
    vz_text(w, y, x + 1, cols - x - 1, A_NORMAL, " = skipped step");
    int width = cols - LABEL_COLS;
    if (width < 1) return;
    double lo = log2(m->min_scale), hi = log2(m->max_scale);
    vz_text(w, y + 1, 0, LABEL_COLS, vz_attr(s, VZ_PAIR_DIM), "scale");
    for (int col = 0; col < width; col++) {
        size_t i0 = (size_t)col * n / (size_t)width, i1 = (size_t)(col + 1) * n / (size_t)width;
        if (i1 <= i0) continue;
        size_t skipped = 0;
        double scale = INFINITY;
        for (size_t i = i0; i < i1; i++) {
            const vz_step *st = vz_model_step(m, i);
            skipped += st->skipped;
            if (st->scale < scale) scale = st->scale;
        }
        /* a long run's column holds many steps: one skip in a thousand does not hide its scale */
        if (skipped * 100 >= i1 - i0) {
            vz_glyph_at(w, y + 1, LABEL_COLS + col, vz_attr(s, VZ_PAIR_WARN) | A_BOLD, s, VZ_G_CROSS);
            continue;
        }
        int level = 1 + (int)lround((log2(scale) - lo) / (hi - lo) * 7);
        vz_bar_cell(w, y + 1, LABEL_COLS + col, vz_attr(s, VZ_PAIR_LR), s, level);
    }
}

/* ---------------------------------------------------------------- the heat map of what was flushed */

/* Steps x0..x1 over `width` columns: column of a step, and the steps of a column. */
typedef struct {
    long long x0, n;
    int width;
} step_axis;
static int axis_col(const step_axis *a, long long step) {
    long long c = (step - a->x0) * a->width / a->n;
    return c < 0 ? 0 : c >= a->width ? a->width - 1 : (int)c;
}

/* The shade of a flushed share (percent): none at all, > 0, >= 1%, >= 5%, >= 20%. */
static const double HEAT_EDGES[] = {0, 1, 5, 20};
static const vz_glyph HEAT_GLYPHS[] = {VZ_G_LIGHT, VZ_G_SHADE, VZ_G_DARK, VZ_G_BLOCK};
static void heat_cell(WINDOW *w, int y, int x, double share, const vz_style *s) {
    if (share <= 0) {
        vz_glyph_at(w, y, x, vz_attr(s, VZ_PAIR_DIM), s, VZ_G_DOT);
        return;
    }
    int k = 0;
    while (k + 1 < 4 && share >= HEAT_EDGES[k + 1]) k++;
    vz_glyph_at(w, y, x, vz_attr(s, k >= 2 ? VZ_PAIR_WARN : VZ_PAIR_HIST), s, HEAT_GLYPHS[k]);
}

enum { HEAT_RIGHT = 10 }; /* " 12.3456%": the layer's run total, as `mixpar precision flushed` prints it */

/* Rows: a title, one row per layer (flushed share of the nonzero gradients entering the matmuls, per group
 * of steps: a rounding event counts the steps since the previous one, so it fills their columns), the loss
 * scale (log2, between the run's smallest and largest) and the skipped steps, on the same columns. */
static void draw_heat_map(WINDOW *w, const vz_model *m, const vz_view *v, int y, int rows, int cols, const vz_style *s) {
    int nshow = rows - 3, nlayers = heat_layers(m);
    int width = cols - LABEL_COLS - HEAT_RIGHT;
    attr_t dim = vz_attr(s, VZ_PAIR_DIM);
    size_t nsteps = vz_model_nsteps(m), nround = vz_model_nroundings(m);
    const vz_rounding *r_first = vz_model_rounding_at(m, 0), *r_last = vz_model_rounding_at(m, nround ? nround - 1 : 0);
    if (nshow < 1 || width < 4 || !r_first) return;
    step_axis ax;
    ax.x0 = nsteps ? vz_model_step(m, 0)->step : r_first->step;
    if (r_first->step < ax.x0) ax.x0 = r_first->step;
    long long x1 = nsteps ? vz_model_last_step(m)->step : r_last->step;
    if (r_last->step > x1) x1 = r_last->step;
    ax.n = x1 - ax.x0 + 1;
    ax.width = ax.n < width ? (int)ax.n : width;

    int first = m->round_lo;
    if (nlayers > nshow) { /* keep the layer chosen with up/down in view */
        first = v->layer - nshow / 2;
        if (first < m->round_lo) first = m->round_lo;
        if (first + nshow - 1 > m->round_hi) first = m->round_hi - nshow + 1;
    }
    /* the title, then what was left out, then the legend where it fits (left of "run total") */
    int right = cols - HEAT_RIGHT;
    const char *fmt = m->round_compute[0] ? m->round_compute : m->precision;
    enum { LEGEND = 25 }; /* "░>0 ▒1%+ ▓5%+ █20%+ ·none" */
    int more = nlayers > nshow ? 28 : 0;
    char title[128];
    snprintf(title, sizeof title, "was flushed in backward (%s rounding events, steps %lld..%lld): ", fmt, ax.x0, x1);
    if ((int)strlen(title) + more + LEGEND > right)
        snprintf(title, sizeof title, "was flushed (%s, steps %lld..%lld): ", fmt, ax.x0, x1);
    int x = vz_text(w, y, 0, right, A_BOLD, "%s", title);
    if (more) x += vz_text(w, y, x, right - x, vz_attr(s, VZ_PAIR_WARN), "+%d more layers (up/down) ", nlayers - nshow);
    static const char *const HEAT_LABELS[] = {">0 ", "1%%+ ", "5%%+ ", "20%%+ "};
    if (right - x >= LEGEND) {
        for (int k = 0; k < 4; k++) {
            heat_cell(w, y, x, k == 0 ? 0.5 : HEAT_EDGES[k], s);
            x += 1 + vz_text(w, y, x + 1, right - x - 1, A_NORMAL, HEAT_LABELS[k]);
        }
        heat_cell(w, y, x, 0, s);
        vz_text(w, y, x + 1, right - x - 1, A_NORMAL, "none");
    }
    vz_text(w, y, cols - HEAT_RIGHT, HEAT_RIGHT, dim, "%*s", HEAT_RIGHT, "run total");

    double *flushed = calloc((size_t)ax.width * 2, sizeof *flushed);
    if (!flushed) return;
    double *nonzero = flushed + ax.width;
    for (int layer = first, row = 1; layer <= m->round_hi && row <= nshow; layer++, row++) {
        char name[24];
        if (layer < 0) snprintf(name, sizeof name, "emb");
        else if (m->layers > 0 && layer >= m->layers) snprintf(name, sizeof name, "head");
        else snprintf(name, sizeof name, "b%d", layer);
        attr_t a = layer == v->layer ? (A_BOLD | vz_attr(s, VZ_PAIR_ACCENT)) : A_NORMAL;
        vz_text(w, y + row, 0, LABEL_COLS, a, "%c%-5s", layer == v->layer ? '>' : ' ', name);
        memset(flushed, 0, (size_t)ax.width * 2 * sizeof *flushed);
        long long prev = ax.x0 - 1;
        for (size_t i = 0; i < nround; i++) {
            const vz_rounding *r = vz_model_rounding_at(m, i);
            if (r->layer != layer) continue;
            long long from = prev + 1 < r->step ? prev + 1 : r->step;
            for (int c = axis_col(&ax, from); c <= axis_col(&ax, r->step); c++) flushed[c] += r->flushed, nonzero[c] += r->nonzero;
            prev = r->step;
        }
        for (int c = 0; c < ax.width; c++)
            if (nonzero[c] > 0) heat_cell(w, y + row, LABEL_COLS + c, vz_share_pct(flushed[c], nonzero[c]), s);
        const vz_rounding_total *t = vz_model_rounding_total(m, layer);
        if (t) vz_text(w, y + row, cols - HEAT_RIGHT, HEAT_RIGHT, t->flushed > 0 ? vz_attr(s, VZ_PAIR_WARN) : A_NORMAL, "%9.4f%%",
                       vz_share_pct(t->flushed, t->nonzero));
    }
    free(flushed);

    /* the loss scale and the skipped steps of the same columns */
    int ys = y + 1 + nshow, yk = ys + 1;
    char a[32], b[32];
    vz_text(w, ys, 0, LABEL_COLS, dim, "scale");
    vz_text(w, yk, 0, LABEL_COLS, dim, "skip");
    double lo = m->min_scale > 0 ? log2(m->min_scale) : 0, hi = m->max_scale > 0 ? log2(m->max_scale) : 0;
    for (size_t i = 0, c = 0; i < nsteps; i = c) {
        const vz_step *st = vz_model_step(m, i);
        int col = axis_col(&ax, st->step);
        size_t skipped = 0;
        double scale = INFINITY;
        for (c = i; c < nsteps && axis_col(&ax, vz_model_step(m, c)->step) == col; c++) {
            skipped += vz_model_step(m, c)->skipped;
            if (vz_model_step(m, c)->scale < scale) scale = vz_model_step(m, c)->scale;
        }
        /* x: 1% or more of the column's steps skipped; a dot: fewer (a long run's rare skips) */
        if (skipped * 100 >= c - i) vz_glyph_at(w, yk, LABEL_COLS + col, vz_attr(s, VZ_PAIR_WARN) | A_BOLD, s, VZ_G_CROSS);
        else if (skipped) vz_glyph_at(w, yk, LABEL_COLS + col, vz_attr(s, VZ_PAIR_WARN), s, VZ_G_DOT);
        int level = hi > lo && scale > 0 ? 1 + (int)lround((log2(scale) - lo) / (hi - lo) * 7) : 4;
        vz_bar_cell(w, ys, LABEL_COLS + col, vz_attr(s, VZ_PAIR_LR), s, level);
    }
    if (m->min_scale == m->max_scale)
        vz_text(w, ys, cols - HEAT_RIGHT, HEAT_RIGHT, dim, " %s", vz_fmt_num(m->max_scale, a, sizeof a));
    else
        vz_text(w, ys, cols - HEAT_RIGHT, HEAT_RIGHT, dim, " %s..%s", vz_fmt_num(m->min_scale, a, sizeof a),
                vz_fmt_num(m->max_scale, b, sizeof b));
    vz_text(w, yk, cols - HEAT_RIGHT, HEAT_RIGHT, m->skipped_steps ? vz_attr(s, VZ_PAIR_WARN) : dim, " %lld", m->skipped_steps);
    /* the step cursor: an arrow under its column, in the skip row */
    if (v->cursor >= ax.x0 && v->cursor <= x1)
        vz_glyph_at(w, yk, LABEL_COLS + axis_col(&ax, v->cursor), vz_attr(s, VZ_PAIR_ACCENT) | A_BOLD, s, VZ_G_ARROW_UP);
}

void vz_panel_underflow(WINDOW *w, const vz_model *m, const vz_view *v, const vz_style *s) {
    int rows, cols;
    getmaxyx(w, rows, cols);
    const vz_hist *h = vz_model_hist_at(m, v->layer, v->cursor);
    char name[24], scale_buf[32], count_buf[32], cursor[48] = "";
    if (v->cursor >= 0) snprintf(cursor, sizeof cursor, " (cursor %lld)", v->cursor);
    vz_model_layer_name(m, v->layer, name, sizeof name);
    if (m->hist_hi < m->hist_lo)
        vz_text(w, 0, 0, cols, vz_attr(s, VZ_PAIR_DIM),
                "no hist events yet (the trainer writes them every train.hist_interval steps)");
    else if (!h)
        vz_text(w, 0, 0, cols, A_BOLD, "gradient exponents: %s (no histogram %s; up/down: layer)", name,
                v->cursor >= 0 ? "at or before the cursor" : "yet");
    else
        vz_text(w, 0, 0, cols, A_BOLD, "gradient exponents: %s, step %lld%s, %s values x scale %s: %s values, %.2f%% zero%s",
                name, h->step, cursor, h->format, vz_fmt_num(h->scale, scale_buf, sizeof scale_buf),
                vz_fmt_num(h->count, count_buf, sizeof count_buf),
                share(h->zero, h->count), h->nonfinite > 0 ? ", NON-FINITE values" : "");

    vz_underflow_layout L = vz_underflow_layout_for(m, v, rows, cols);
    draw_histogram(w, h, &L, cols, s);
    draw_format_rows(w, &L, cols, s);
    int foot = foot_rows(m, rows);
    int y = L.format_row + VZ_NFORMATS + 2;
    int table_rows = rows - y - foot;
    int left_w = 40 < cols / 2 ? 40 : cols / 2;
    draw_shares(w, h, y, 0, left_w - 1, table_rows, s);
    draw_layer_table(w, m, v, y, left_w, cols - left_w, table_rows, s);
    if (vz_model_has_rounding(m)) draw_heat_map(w, m, v, rows - foot, foot, cols, s);
    else draw_scale_strip(w, m, rows - 2, cols, s);
}

/* Runs one above the other leave each part too few rows for the whole panel: the part keeps what the run
 * really did (the heat map, or the loss scale strip of a run without rounding events) under one line on
 * the chosen layer's histogram. */
void vz_panel_underflow_compact(WINDOW *w, const vz_model *m, const vz_view *v, const vz_style *s) {
    int rows, cols;
    getmaxyx(w, rows, cols);
    const vz_hist *h = vz_model_hist_at(m, v->layer, v->cursor);
    char name[24];
    vz_model_layer_name(m, v->layer, name, sizeof name);
    if (h)
        vz_text(w, 0, 0, cols, A_NORMAL, "%s, step %lld: if cast, fp16 would round %.2f%% to 0 (%.2f%% subnormal)", name, h->step,
                share(h->underflow[VZ_TARGET_FP16], h->count), share(h->subnormal[VZ_TARGET_FP16], h->count));
    else
        vz_text(w, 0, 0, cols, vz_attr(s, VZ_PAIR_DIM), "%s: no gradient histogram yet", name);
    if (vz_model_has_rounding(m)) {
        int foot = 3 + heat_layers(m); /* the scale and skip rows right under the layers */
        draw_heat_map(w, m, v, 1, foot < rows - 1 ? foot : rows - 1, cols, s);
    } else {
        vz_text(w, 1, 0, cols, vz_attr(s, VZ_PAIR_DIM), "no rounding events: this %s run rounds no gradients to a low format",
                m->precision);
        if (rows >= 4) draw_scale_strip(w, m, 2, cols, s);
    }
}
