/* draw.c: drawing primitives on a curses WINDOW: clipped text, glyphs, colours, braille charts, number formats. */
#include "draw.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- colours */

void vz_colors_init(bool big) {
    static const struct {
        int pair;
        short fg;
    } PAIRS[] = {
        {VZ_PAIR_ACCENT, COLOR_CYAN},         {VZ_PAIR_DIM, -1},
        {VZ_PAIR_WARN, COLOR_RED},            {VZ_PAIR_TRAIN, COLOR_CYAN},
        {VZ_PAIR_VAL, COLOR_YELLOW},          {VZ_PAIR_LR, COLOR_GREEN},
        {VZ_PAIR_TOKENS, COLOR_MAGENTA},      {VZ_PAIR_FORWARD, COLOR_BLUE},
        {VZ_PAIR_BACKWARD, COLOR_MAGENTA},    {VZ_PAIR_OPTIMIZER, COLOR_YELLOW},
        {VZ_PAIR_OTHER, -1},                  {VZ_PAIR_COMM, COLOR_GREEN},
        {VZ_PAIR_COMM_ALT, COLOR_CYAN},       {VZ_PAIR_ZONE + 0, COLOR_GREEN},
        {VZ_PAIR_ZONE + 1, COLOR_YELLOW},     {VZ_PAIR_ZONE + 2, COLOR_RED},
        {VZ_PAIR_ZONE + 3, COLOR_MAGENTA},    {VZ_PAIR_TAG + 0, COLOR_BLUE},
        {VZ_PAIR_TAG + 1, COLOR_MAGENTA},     {VZ_PAIR_TAG + 2, COLOR_CYAN},
        {VZ_PAIR_TAG + 3, COLOR_YELLOW},      {VZ_PAIR_TAG + 4, COLOR_GREEN},
        {VZ_PAIR_TAG + 5, COLOR_RED},         {VZ_PAIR_TAG + 6, -1},
        {VZ_PAIR_HIST, COLOR_CYAN},           {VZ_PAIR_FULL, COLOR_GREEN},
    };
    bool bright = big && COLORS >= 16; /* colours 8..15: the bright ones, legible on a projector */
    for (size_t i = 0; i < sizeof PAIRS / sizeof PAIRS[0]; i++)
        init_pair((short)PAIRS[i].pair, (short)(PAIRS[i].fg >= 0 && bright ? PAIRS[i].fg + 8 : PAIRS[i].fg), -1);
}

attr_t vz_attr(const vz_style *s, int pair) {
    if (s->big) /* a projector washes out dim and thin: labels in the text colour, everything else bold */
        return pair == VZ_PAIR_DIM || pair <= 0 ? A_BOLD : (s->color ? COLOR_PAIR(pair) : A_NORMAL) | A_BOLD;
    if (pair == VZ_PAIR_DIM) return s->color ? (COLOR_PAIR(pair) | A_DIM) : A_NORMAL;
    return s->color && pair > 0 ? COLOR_PAIR(pair) : A_NORMAL;
}

/* ---------------------------------------------------------------- glyphs and text */

static const struct {
    wchar_t uni;
    char ascii;
} GLYPHS[VZ_NGLYPHS] = {
    [VZ_G_HLINE] = {L'\x2500', '-'},       [VZ_G_VLINE] = {L'\x2502', '|'},
    [VZ_G_AXIS_Y] = {L'\x2524', '+'},      [VZ_G_AXIS_CORNER] = {L'\x2514', '+'},
    [VZ_G_TICK_X] = {L'\x2534', '+'},      [VZ_G_ARROW_RIGHT] = {L'\x2192', '>'},
    [VZ_G_ARROW_UP] = {L'\x2191', '^'},    [VZ_G_ARROW_DOWN] = {L'\x2193', 'v'},
    [VZ_G_BLOCK] = {L'\x2588', '#'},       [VZ_G_SHADE] = {L'\x2592', ':'},
    [VZ_G_DOT] = {L'\x00b7', '.'},         [VZ_G_CROSS] = {L'\x00d7', 'x'},
    [VZ_G_BULLET] = {L'\x25cf', 'o'},      [VZ_G_DARK] = {L'\x2593', '%'},
    [VZ_G_RETURN] = {L'\x21b5', '<'},     [VZ_G_CORNER_TL] = {L'\x250c', '+'},
    [VZ_G_CORNER_TR] = {L'\x2510', '+'},  [VZ_G_CORNER_BR] = {L'\x2518', '+'},
    [VZ_G_LIGHT] = {L'\x2591', ','},
};

wchar_t vz_glyph_char(const vz_style *s, vz_glyph g) { return s->unicode ? GLYPHS[g].uni : (wchar_t)GLYPHS[g].ascii; }

int vz_text(WINDOW *w, int y, int x, int maxw, attr_t a, const char *fmt, ...) {
    int rows, cols;
    getmaxyx(w, rows, cols);
    if (y < 0 || y >= rows || x >= cols || maxw <= 0) return 0;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    int start = 0;
    if (x < 0) { /* text that starts left of the window shows its tail */
        start = -x;
        maxw -= start;
        x = 0;
    }
    int n = (int)strlen(buf) - start;
    if (n <= 0) return 0;
    if (n > maxw) n = maxw;
    if (n > cols - x) n = cols - x;
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[start + i];
        if (c < 0x20 || c > 0x7e) buf[start + i] = '?';
    }
    /* cut short with something left to say: '>' in its last column says so (as less -S does) */
    bool cut = false;
    for (const char *c = buf + start + n; *c && !cut; c++) cut = *c != ' ';
    if (cut) buf[start + n - 1] = '>';
    wattrset(w, a);
    mvwaddnstr(w, y, x, buf + start, n);
    wattrset(w, A_NORMAL);
    return n;
}

void vz_char(WINDOW *w, int y, int x, attr_t a, wchar_t ch) {
    int rows, cols;
    getmaxyx(w, rows, cols);
    if (y < 0 || y >= rows || x < 0 || x >= cols) return;
    wchar_t text[2] = {ch, 0};
    cchar_t cell;
    setcchar(&cell, text, a & ~A_COLOR, (short)PAIR_NUMBER(a), NULL);
    mvwadd_wch(w, y, x, &cell);
}

void vz_glyph_at(WINDOW *w, int y, int x, attr_t a, const vz_style *s, vz_glyph g) {
    vz_char(w, y, x, a, vz_glyph_char(s, g));
}

void vz_hline(WINDOW *w, int y, int x, int n, attr_t a, const vz_style *s) {
    for (int i = 0; i < n; i++) vz_glyph_at(w, y, x + i, a, s, VZ_G_HLINE);
}

void vz_bar_cell(WINDOW *w, int y, int x, attr_t a, const vz_style *s, int level) {
    if (level <= 0) return;
    if (level > 8) level = 8;
    if (!s->unicode) {
        vz_char(w, y, x, a, level >= 4 ? '#' : '.');
        return;
    }
    vz_char(w, y, x, a, (wchar_t)(0x2580 + level)); /* U+2581 lower one eighth .. U+2588 full block */
}

/* ---------------------------------------------------------------- braille canvas */

void vz_canvas_init(vz_canvas *c, int cols, int rows) {
    c->cols = cols > 0 ? cols : 0;
    c->rows = rows > 0 ? rows : 0;
    size_t n = (size_t)c->cols * (size_t)c->rows;
    c->dots = calloc(n ? n : 1, 1);
    c->pair = calloc(n ? n : 1, sizeof *c->pair);
    if (!c->dots || !c->pair) {
        fprintf(stderr, "mixpar viz: out of memory for a %dx%d canvas\n", cols, rows);
        exit(3);
    }
}

void vz_canvas_free(vz_canvas *c) {
    free(c->dots);
    free(c->pair);
    c->dots = NULL;
    c->pair = NULL;
}

void vz_canvas_dot(vz_canvas *c, int x, int y, short pair) {
    if (x < 0 || y < 0 || x >= 2 * c->cols || y >= 4 * c->rows) return;
    static const uint8_t BITS[2][4] = {{0x01, 0x02, 0x04, 0x40}, {0x08, 0x10, 0x20, 0x80}}; /* braille dot order */
    size_t cell = (size_t)(y / 4) * (size_t)c->cols + (size_t)(x / 2);
    c->dots[cell] |= BITS[x % 2][y % 4];
    c->pair[cell] = pair;
}

void vz_canvas_line(vz_canvas *c, int x0, int y0, int x1, int y1, short pair) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (;;) { /* Bresenham */
        vz_canvas_dot(c, x0, y0, pair);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}

void vz_canvas_blit(WINDOW *w, int y, int x, const vz_canvas *c, const vz_style *s) {
    for (int r = 0; r < c->rows; r++)
        for (int col = 0; col < c->cols; col++) {
            size_t cell = (size_t)r * (size_t)c->cols + (size_t)col;
            uint8_t d = c->dots[cell];
            if (!d) continue;
            wchar_t ch;
            bool top = d & 0x1b, bottom = d & 0xe4; /* dots 1,2,4,5 / 3,6,7,8 */
            if (s->big) /* lines a cell thick, not a dot: half and whole blocks */
                ch = s->unicode ? (top && bottom ? 0x2588 : top ? 0x2580 : 0x2584) : (top && bottom ? '#' : top ? '"' : '_');
            else if (s->unicode) ch = (wchar_t)(0x2800 + d);
            else {
                ch = top && bottom ? ':' : top ? '\'' : '.';
            }
            vz_char(w, y + r, x + col, vz_attr(s, c->pair[cell]), ch);
        }
}

/* ---------------------------------------------------------------- charts */

static double chart_value(double v, bool logy) {
    if (!isfinite(v)) return NAN;
    if (logy) return v > 0 ? log10(v) : NAN;
    return v;
}

static const char *fmt_x(double v, char *buf, size_t n) {
    if (fabs(v) < 1e6 && v == floor(v)) snprintf(buf, n, "%.0f", v);
    else vz_fmt_num(v, buf, n);
    return buf;
}

void vz_chart(WINDOW *w, int y, int x, int h, int wd, const vz_chart_opts *o, const vz_series *series, int nseries,
              const vz_style *s) {
    enum { LABEL_W = 8 };
    if (h < 5 || wd < LABEL_W + 6) return;
    attr_t dim = vz_attr(s, VZ_PAIR_DIM);
    int used = vz_text(w, y, x, wd, vz_attr(s, VZ_PAIR_ACCENT) | A_BOLD, "%s", o->title);
    /* the legend, right after the title: a sample of each series' mark and its name */
    int lx = x + used + 2;
    for (int i = 0; i < nseries && nseries > 1; i++) {
        wchar_t mark = series[i].marker ? series[i].marker : vz_glyph_char(s, VZ_G_HLINE);
        vz_char(w, y, lx, vz_attr(s, series[i].pair), mark);
        lx += 2 + vz_text(w, y, lx + 2, x + wd - lx - 2, A_NORMAL, "%s", series[i].label) + 2;
    }

    int plot_x = x + LABEL_W + 1, plot_w = wd - LABEL_W - 1, plot_y = y + 1, plot_h = h - 3;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < nseries; i++)
        for (size_t k = 0; k < series[i].n; k++) {
            if (series[i].x[k] < o->xmin || series[i].x[k] > o->xmax) continue;
            double v = chart_value(series[i].y[k], o->logy);
            if (isnan(v)) continue;
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
    bool empty = !(lo <= hi);
    if (empty) lo = 0, hi = 1;
    if (hi - lo < 1e-12 * (fabs(hi) + 1)) { /* a flat series: centre it */
        double pad = fabs(hi) > 0 ? fabs(hi) * 0.1 : 1;
        lo -= pad;
        hi += pad;
    }

    /* y axis with labels at the top, middle and bottom rows */
    for (int r = 0; r < plot_h; r++) vz_glyph_at(w, plot_y + r, plot_x - 1, dim, s, VZ_G_VLINE);
    int label_rows[3] = {0, plot_h / 2, plot_h - 1};
    for (int i = 0; i < 3; i++) {
        int r = label_rows[i];
        double frac = plot_h > 1 ? 1.0 - (double)r / (plot_h - 1) : 0.5;
        double v = lo + (hi - lo) * frac;
        char buf[32];
        vz_fmt_num(o->logy ? pow(10, v) : v, buf, sizeof buf);
        for (int digits = 3; (int)strlen(buf) > LABEL_W - 1 && digits >= 1; digits--)
            snprintf(buf, sizeof buf, "%.*g", digits, o->logy ? pow(10, v) : v); /* fewer digits, not a cut number */
        vz_text(w, plot_y + r, x + LABEL_W - 1 - (int)strlen(buf), LABEL_W - 1, dim, "%s", buf);
        vz_glyph_at(w, plot_y + r, plot_x - 1, dim, s, VZ_G_AXIS_Y);
    }
    /* x axis, ticks at the ends and the middle, labels under them */
    int axis_y = plot_y + plot_h;
    vz_glyph_at(w, axis_y, plot_x - 1, dim, s, VZ_G_AXIS_CORNER);
    vz_hline(w, axis_y, plot_x, plot_w, dim, s);
    double xs[3] = {o->xmin, (o->xmin + o->xmax) / 2, o->xmax};
    int cols[3] = {0, (plot_w - 1) / 2, plot_w - 1};
    int next_free = plot_x - 1;
    for (int i = 0; i < 3; i++) {
        if (i == 1 && o->xmax - o->xmin < 2) continue;
        char buf[32];
        fmt_x(i == 1 ? round(xs[i]) : xs[i], buf, sizeof buf);
        int len = (int)strlen(buf), at = plot_x + cols[i] - (i == 0 ? 0 : i == 1 ? len / 2 : len - 1);
        if (at < next_free) continue;
        if (i > 0) vz_glyph_at(w, axis_y, plot_x + cols[i], dim, s, VZ_G_TICK_X);
        vz_text(w, axis_y + 1, at, len, dim, "%s", buf);
        next_free = at + len + 1;
        if (i == 1 && o->x_label) vz_text(w, axis_y + 1, next_free + 1, plot_x + cols[2] - next_free - 8, dim, "%s", o->x_label);
    }
    if (empty) {
        vz_text(w, plot_y + plot_h / 2, plot_x + plot_w / 2 - 6, plot_w, dim, "(no data yet)");
        return;
    }

    vz_canvas c;
    vz_canvas_init(&c, plot_w, plot_h);
    double xspan = o->xmax > o->xmin ? o->xmax - o->xmin : 1;
    for (int i = 0; i < nseries; i++) {
        if (series[i].marker) continue;
        int px = 0, py = 0;
        bool have_prev = false;
        for (size_t k = 0; k < series[i].n; k++) {
            double v = chart_value(series[i].y[k], o->logy), xv = series[i].x[k];
            if (isnan(v) || xv < o->xmin || xv > o->xmax) {
                have_prev = false;
                continue;
            }
            int dx = (int)lround((xv - o->xmin) / xspan * (2 * plot_w - 1));
            int dy = (int)lround((hi - v) / (hi - lo) * (4 * plot_h - 1));
            if (have_prev) vz_canvas_line(&c, px, py, dx, dy, series[i].pair);
            else vz_canvas_dot(&c, dx, dy, series[i].pair);
            px = dx, py = dy, have_prev = true;
        }
    }
    vz_canvas_blit(w, plot_y, plot_x, &c, s);
    vz_canvas_free(&c);
    for (int i = 0; i < nseries; i++) { /* point series on top of the lines */
        if (!series[i].marker) continue;
        for (size_t k = 0; k < series[i].n; k++) {
            double v = chart_value(series[i].y[k], o->logy), xv = series[i].x[k];
            if (isnan(v) || xv < o->xmin || xv > o->xmax) continue;
            int col = (int)lround((xv - o->xmin) / xspan * (plot_w - 1));
            int row = (int)lround((hi - v) / (hi - lo) * (plot_h - 1));
            vz_char(w, plot_y + row, plot_x + col, vz_attr(s, series[i].pair) | A_BOLD, series[i].marker);
        }
    }
}

/* ---------------------------------------------------------------- numbers */

const char *vz_fmt_num(double v, char *buf, size_t n) {
    static const struct {
        double at;
        const char *suffix;
    } SI[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e4, "k"}};
    if (!isfinite(v)) {
        snprintf(buf, n, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return buf;
    }
    double a = fabs(v);
    for (size_t i = 0; i < sizeof SI / sizeof SI[0]; i++)
        if (a >= SI[i].at) {
            double scaled = v / (SI[i].at == 1e4 ? 1e3 : SI[i].at);
            snprintf(buf, n, "%.3g%s", scaled, SI[i].suffix);
            return buf;
        }
    if (a != 0 && a < 1e-3) snprintf(buf, n, "%.2g", v);
    else snprintf(buf, n, "%.4g", v);
    return buf;
}

const char *vz_fmt_bytes(double v, char *buf, size_t n) {
    static const char *const UNITS[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    while (fabs(v) >= 1000 && u < 4) v /= 1000, u++;
    if (u == 0) snprintf(buf, n, "%.0f B", v);
    else snprintf(buf, n, "%.*f %s", fabs(v) >= 100 ? 0 : fabs(v) >= 10 ? 1 : 2, v, UNITS[u]);
    return buf;
}

const char *vz_fmt_seconds(double v, char *buf, size_t n) {
    double a = fabs(v);
    if (a >= 1) snprintf(buf, n, "%.2f s", v);
    else if (a >= 1e-3) snprintf(buf, n, "%.*f ms", a >= 0.1 ? 0 : a >= 0.01 ? 1 : 2, v * 1e3);
    else snprintf(buf, n, "%.0f us", v * 1e6);
    return buf;
}
