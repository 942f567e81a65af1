/* screen.h: the whole frame (tab bar, the chosen panel, status bar, help, "terminal too small"), the view
 * state the keys change, and virtual screens for snapshots and tests. */
#ifndef MIXPAR_VIZ_SCREEN_H
#define MIXPAR_VIZ_SCREEN_H

#include "allreduce.h"
#include "draw.h"
#include "model.h"
#include "source.h"

enum {
    VZ_MIN_COLS = 72, /* the smallest terminal the panels fit in */
    VZ_MIN_ROWS = 20,
    VZ_MAX_RUNS = 4,  /* runs side by side: mixpar viz RUN_A RUN_B ... */
};

typedef enum { VZ_PANEL_LOSS, VZ_PANEL_UNDERFLOW, VZ_PANEL_COMM, VZ_PANEL_MEMORY, VZ_NPANELS } vz_panel;
extern const char *const VZ_PANEL_NAMES[VZ_NPANELS]; /* "loss", "underflow", "comm", "memory" */
extern const char *const VZ_PANEL_TITLES[VZ_NPANELS]; /* "Loss", "Underflow", "Comm", "Memory" */

/* What the user has chosen; the keys change it, the panels read it. */
typedef struct {
    vz_panel panel;
    int layer;            /* underflow: the layer shown (-1 embeddings .. L head) */
    int rank;             /* comm, memory: the rank in focus */
    int zoom;             /* loss: steps shown = all / 2^zoom; comm: timeline window * 2^-zoom */
    int scroll;           /* underflow: binades moved right; comm: windows moved back in time */
    bool paused;
    bool help;
    long long cursor;     /* underflow: the step whose histograms are drawn; -1: the newest (follow the run) */
    long long jump;       /* a step asked for with g N Enter, until the caller has seen it (-1: none) */
    bool entering;        /* g was pressed: digits are a step number until Enter (Esc cancels) */
    char entry[20];
    double mem_scale;     /* memory: bytes a full bar stands for, at least; runs side by side share one (0: own) */
    bool ring_model;      /* comm: the ring view from the alpha-beta model rather than from comm events */
    int ring_ranks;       /* ring ranks in model mode */
    vz_allreduce ring;    /* the animation's state */
    double ring_alpha, ring_beta; /* the model's latency per step (s) and link bandwidth (bytes/s) */
    double ring_bytes;    /* the model's message size; 0: the run's fp32 gradients (4 x params), else 100 MB */
    const char *mode;     /* "live", "replay x10", "snapshot" */
    const char *run_dir;
    char notice[160];     /* one line for the status bar: a version note, replay finished, ... */
} vz_view;

void vz_view_init(vz_view *v);
/* Keeps layer and rank within what the model holds. */
void vz_view_clamp(vz_view *v, const vz_model *m);
/* Handles a key; returns false when it means quit. */
bool vz_view_key(vz_view *v, const vz_model *m, int key);
/* The same for runs side by side: the step cursor ranges up to the newest step of any of them (each part
 * draws its run's newest step at or before the cursor). */
bool vz_view_key_runs(vz_view *v, const vz_model *const *ms, int n, int key);
/* The newest step of any of the runs (-1 when none has one). */
long long vz_runs_last_step(const vz_model *const *ms, int n);
/* Advances the ring animation one step (wrapping to a fresh allreduce at the end). */
void vz_view_ring_tick(vz_view *v, const vz_model *m);
/* The ring the comm panel shows: model mode, or the rank count of the collective that moved the most data. */
int vz_view_ring_ranks(const vz_view *v, const vz_model *m);
/* The steps of the ring animation the comm panel shows, first .. end-1: all 2(n-1) for an allreduce, the
 * first n-1 for a reduce-scatter (ZeRO's gradients), the last n-1 for an allgather (its parameters). */
void vz_view_ring_phase(const vz_view *v, const vz_model *m, int *first, int *end);

/* Draws everything into w (the whole screen). */
void vz_draw_screen(WINDOW *w, const vz_model *m, const vz_source *src, const vz_view *v, const vz_style *s);

/* Runs side by side (mixpar viz RUN_A RUN_B ...; n <= VZ_MAX_RUNS, n == 1 draws as vz_draw_screen): the loss
 * panel overlays the runs, one colour (and, without colour, one mark) per run, A, B, ...; the other panels
 * draw each run in its own part of the body, labelled with its letter and run directory. srcs may be NULL. */
void vz_draw_runs(WINDOW *w, const vz_model *const *ms, const vz_source *const *srcs, const char *const *dirs, int n,
                  const vz_view *v, const vz_style *s);
/* Where run i of n goes in a body of rows x cols: side by side when each part keeps VZ_MIN_COLS - 12 columns,
 * else one above the other. */
void vz_run_part(int rows, int cols, int n, int i, int *y, int *x, int *h, int *wd);
/* The colour pair of run i (A, B, ...). */
short vz_run_pair(int run);

/* A curses screen writing to /dev/null, sized rows x cols, for snapshots and tests; NULL when no terminal
 * description can be loaded. Free it with vz_virtual_screen_end. */
SCREEN *vz_virtual_screen(int rows, int cols);
void vz_virtual_screen_end(SCREEN *sp);
/* The window's cells as UTF-8 text, one line per row, trailing blanks cut (caller frees). */
char *vz_window_text(WINDOW *w);
/* Picks Unicode glyphs when the locale is UTF-8 (trying C.UTF-8 when `force_utf8` and it is not). */
bool vz_locale_utf8(bool force_utf8);

#endif
