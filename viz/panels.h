/* panels.h: the four panels. Each draws the model into a whole window (its size is the panel's area). */
#ifndef MIXPAR_VIZ_PANELS_H
#define MIXPAR_VIZ_PANELS_H

#include "screen.h"

void vz_panel_loss(WINDOW *w, const vz_model *m, const vz_view *v, const vz_style *s);
void vz_panel_underflow(WINDOW *w, const vz_model *m, const vz_view *v, const vz_style *s);
void vz_panel_comm(WINDOW *w, const vz_model *m, const vz_view *v, const vz_style *s);
void vz_panel_memory(WINDOW *w, const vz_model *m, const vz_view *v, const vz_style *s);
/* The underflow panel in a short part (runs one above the other): a line on the layer's histogram, then
 * the heat map of what was flushed (or the loss scale strip). */
void vz_panel_underflow_compact(WINDOW *w, const vz_model *m, const vz_view *v, const vz_style *s);
/* Several runs' losses overlaid: a header row per run (its letter, label and newest values), loss and
 * validation loss, then loss scale and tokens/s, one series per run. */
void vz_panel_loss_runs(WINDOW *w, const vz_model *const *ms, const char *const *dirs, int n, const vz_view *v,
                        const vz_style *s);

/* Pipeline parallel: the character the comm panel's schedule draws a pp_forward/pp_backward span as (the
 * forward of micro-batch k the digit k, its backward the letter a + k), and the rows the schedule takes
 * (0 without pipeline parallel). */
char vz_pipeline_mark(const vz_span *sp);
int vz_pipeline_rows(const vz_model *m);

/* Underflow panel geometry, shared with the tests: binade b is drawn in column first_col + (b - lo). */
typedef struct {
    int lo, hi;         /* binades shown */
    int first_col;      /* the column of binade lo */
    int hist_top, hist_rows; /* histogram rows */
    int axis_row;       /* binade labels */
    int format_row;     /* the first format row (VZ_FORMATS order) */
} vz_underflow_layout;
vz_underflow_layout vz_underflow_layout_for(const vz_model *m, const vz_view *v, int rows, int cols);

#endif
