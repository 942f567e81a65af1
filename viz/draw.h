/* draw.h: drawing primitives on a curses WINDOW: clipped text, glyphs with ASCII fallbacks, colours, braille
 * line charts with axes, number formatting. Everything draws into a window; nothing here reads events. */
#ifndef MIXPAR_VIZ_DRAW_H
#define MIXPAR_VIZ_DRAW_H

#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1 /* cchar_t, mvwadd_wch, mvwin_wch: the wide-character curses (ncursesw) */
#endif
#include <curses.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

/* How to draw: colours or not (--no-color, or a terminal without them), Unicode glyphs or ASCII (a
 * non-UTF-8 locale, or --ascii). Without colour every distinction is also carried by the glyph. */
typedef struct {
    bool color;
    bool unicode;
    bool big;     /* --big, for a projector: no dim text, bold bright colours, charts in whole and half blocks */
} vz_style;

/* Colour pairs. Backgrounds are the terminal's own (use_default_colors): -1. */
enum {
    VZ_PAIR_NONE,
    VZ_PAIR_ACCENT,   /* titles, the active tab */
    VZ_PAIR_DIM,      /* axes, labels */
    VZ_PAIR_WARN,     /* malformed lines, diagnoses, too-small screen */
    VZ_PAIR_TRAIN,    /* training loss */
    VZ_PAIR_VAL,      /* validation loss */
    VZ_PAIR_LR,
    VZ_PAIR_TOKENS,
    VZ_PAIR_FORWARD,
    VZ_PAIR_BACKWARD,
    VZ_PAIR_OPTIMIZER,
    VZ_PAIR_OTHER,
    VZ_PAIR_COMM,
    VZ_PAIR_COMM_ALT, /* every other bucket, so neighbouring buckets stay apart */
    VZ_PAIR_ZONE,     /* + vz_zone: normal, subnormal, rounds to 0, overflow */
    VZ_PAIR_TAG = VZ_PAIR_ZONE + 4, /* + vz_tag: param .. other */
    VZ_PAIR_HIST = VZ_PAIR_TAG + 7,
    VZ_PAIR_FULL,     /* a fully reduced chunk */
    VZ_NPAIRS
};

/* Defines the colour pairs; call after start_color(). big: the bright half of a 16-colour terminal. */
void vz_colors_init(bool big);
/* The attribute of a pair in this style (0 without colour). */
attr_t vz_attr(const vz_style *s, int pair);

/* Glyphs with their ASCII stand-ins. */
typedef enum {
    VZ_G_HLINE, VZ_G_VLINE, VZ_G_AXIS_Y, VZ_G_AXIS_CORNER, VZ_G_TICK_X, VZ_G_ARROW_RIGHT, VZ_G_ARROW_UP,
    VZ_G_ARROW_DOWN, VZ_G_BLOCK, VZ_G_SHADE, VZ_G_DOT, VZ_G_CROSS, VZ_G_BULLET, VZ_G_DARK, VZ_G_RETURN, VZ_G_CORNER_TL,
    VZ_G_CORNER_TR, VZ_G_CORNER_BR, VZ_G_LIGHT, VZ_NGLYPHS
} vz_glyph;
/* The character a glyph is drawn as in this style. */
wchar_t vz_glyph_char(const vz_style *s, vz_glyph g);

/* Text at (y, x), cut at maxw columns and at the window's edge (text cut short, with more than spaces left
 * out, ends in '>': nothing is dropped silently); bytes outside printable ASCII become '?' (the cell grid
 * must stay one column per character). Returns the columns written. */
int vz_text(WINDOW *w, int y, int x, int maxw, attr_t a, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* One character (any Unicode scalar of width 1) at (y, x); nothing outside the window. */
void vz_char(WINDOW *w, int y, int x, attr_t a, wchar_t ch);
void vz_glyph_at(WINDOW *w, int y, int x, attr_t a, const vz_style *s, vz_glyph g);
void vz_hline(WINDOW *w, int y, int x, int n, attr_t a, const vz_style *s);
/* Eight vertical steps of a bar: level 0 (empty) .. 8 (full cell); ASCII has only full cells. */
void vz_bar_cell(WINDOW *w, int y, int x, attr_t a, const vz_style *s, int level);

/* A braille canvas: each cell holds 2 x 4 dots, so a w x h cell area is a 2w x 4h dot grid (y = 0 on top).
 * The last series drawn into a cell gives it its colour. */
typedef struct {
    int cols, rows;
    uint8_t *dots;  /* (rows, cols) bit masks */
    short *pair;    /* (rows, cols) colour pairs */
} vz_canvas;

void vz_canvas_init(vz_canvas *c, int cols, int rows);
void vz_canvas_free(vz_canvas *c);
void vz_canvas_dot(vz_canvas *c, int x, int y, short pair);
void vz_canvas_line(vz_canvas *c, int x0, int y0, int x1, int y1, short pair);
void vz_canvas_blit(WINDOW *w, int y, int x, const vz_canvas *c, const vz_style *s);

/* A line chart with a y axis (labels at top, middle, bottom) and an x axis with labels under it. */
typedef struct {
    const char *label;
    short pair;
    const double *x, *y; /* n points; non-finite y values leave gaps */
    size_t n;
    wchar_t marker;      /* 0: a line through the points; otherwise each point is this character */
} vz_series;

typedef struct {
    const char *title;
    double xmin, xmax;   /* the x range shown */
    bool logy;           /* log10 y axis (values <= 0 are left out) */
    const char *x_label; /* written at the axis' right end, e.g. "step" */
} vz_chart_opts;

/* Draws into the h x wd area at (y, x): a title row, the plot, an axis row and a label row (h >= 5). */
void vz_chart(WINDOW *w, int y, int x, int h, int wd, const vz_chart_opts *o, const vz_series *series, int nseries,
              const vz_style *s);

/* Numbers in few columns: "2.05k", "1.17M", "0.0012", "-3.2e-05". */
const char *vz_fmt_num(double v, char *buf, size_t n);
/* Bytes in decimal units: "512 B", "18.7 MB", "1.20 GB". */
const char *vz_fmt_bytes(double v, char *buf, size_t n);
/* Durations: "45 us", "1.23 ms", "2.10 s". */
const char *vz_fmt_seconds(double v, char *buf, size_t n);

#endif
