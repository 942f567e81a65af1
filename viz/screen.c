/* screen.c: the whole frame, the keys, and virtual screens (curses on /dev/null) for snapshots and tests. */
#include "screen.h"

#include "panels.h"

#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const VZ_PANEL_NAMES[VZ_NPANELS] = {"loss", "underflow", "comm", "memory"};
const char *const VZ_PANEL_TITLES[VZ_NPANELS] = {"Loss", "Underflow", "Comm", "Memory"};

static void (*const PANELS[VZ_NPANELS])(WINDOW *, const vz_model *, const vz_view *, const vz_style *) = {
    vz_panel_loss, vz_panel_underflow, vz_panel_comm, vz_panel_memory};

/* ---------------------------------------------------------------- view and keys */

void vz_view_init(vz_view *v) {
    memset(v, 0, sizeof *v);
    v->panel = VZ_PANEL_LOSS;
    v->layer = -1;
    v->ring_ranks = 4;
    vz_allreduce_reset(&v->ring, 4);
    v->ring_alpha = 5e-6; /* 5 us per message: a typical network latency */
    v->ring_beta = 10e9;  /* 10 GB/s per link */
    v->mode = "live";
    v->cursor = v->jump = -1;
}

void vz_view_clamp(vz_view *v, const vz_model *m) {
    if (m->hist_hi >= m->hist_lo) {
        if (v->layer < m->hist_lo) v->layer = m->hist_lo;
        if (v->layer > m->hist_hi) v->layer = m->hist_hi;
    }
    int world = vz_model_world(m);
    if (v->rank >= world) v->rank = world - 1;
    if (v->rank < 0) v->rank = 0;
    /* not before the oldest step kept; a cursor after the newest (--cursor at the start of a replay) waits
     * for the run to get there, drawing the newest histograms meanwhile */
    if (v->cursor >= 0 && vz_model_nsteps(m) > 0 && v->cursor < vz_model_step(m, 0)->step) v->cursor = vz_model_step(m, 0)->step;
}

long long vz_runs_last_step(const vz_model *const *ms, int n) {
    long long newest = -1;
    for (int r = 0; r < n; r++) {
        const vz_step *last = vz_model_last_step(ms[r]);
        if (last && last->step > newest) newest = last->step;
    }
    return newest;
}

/* The keys put the cursor on a step a run has: up to the newest step of any run shown. */
static void clamp_cursor(vz_view *v, long long newest) {
    if (v->cursor >= 0 && newest >= 0 && v->cursor > newest) v->cursor = newest;
}

/* Left, right: one step back or forward from the cursor (from the newest step when it follows the runs). */
static void move_cursor(vz_view *v, long long newest, int by) {
    if (newest < 0) return;
    long long at = v->cursor >= 0 && v->cursor <= newest ? v->cursor : newest;
    v->cursor = at + by < 0 ? 0 : at + by;
    clamp_cursor(v, newest);
}

/* g N Enter: digits collected in v->entry. Returns true when the key was taken. */
static bool entry_key(vz_view *v, int key) {
    if (!v->entering) return false;
    size_t len = strlen(v->entry);
    if (key >= '0' && key <= '9') {
        if (len + 1 < sizeof v->entry) v->entry[len] = (char)key, v->entry[len + 1] = '\0';
    } else if (key == KEY_BACKSPACE || key == 127 || key == 8) {
        if (len) v->entry[len - 1] = '\0';
    } else if (key == '\n' || key == '\r' || key == KEY_ENTER) {
        if (len) v->cursor = v->jump = atoll(v->entry);
        v->entering = false;
    } else {
        v->entering = false; /* Esc or any other key: no jump */
    }
    return true;
}

bool vz_view_key(vz_view *v, const vz_model *m, int key) { return vz_view_key_runs(v, &m, 1, key); }

bool vz_view_key_runs(vz_view *v, const vz_model *const *ms, int n, int key) {
    const vz_model *m = ms[0]; /* layers and ranks: run A's; each part clamps them to its own run */
    long long newest = vz_runs_last_step(ms, n);
    if (v->help && key != 'q' && key != 'Q') { /* any key closes the help */
        v->help = false;
        return true;
    }
    if (entry_key(v, key)) {
        clamp_cursor(v, newest); /* v->jump keeps the step asked for: a replay may go there */
        vz_view_clamp(v, m);
        return true;
    }
    switch (key) {
    case 'q': case 'Q': return false;
    case 'g': v->entering = true; v->entry[0] = '\0'; break;
    case KEY_END: case '$': v->cursor = -1; break;
    case '\t': v->panel = (vz_panel)((v->panel + 1) % VZ_NPANELS); v->scroll = 0; v->zoom = 0; break;
    case KEY_BTAB: v->panel = (vz_panel)((v->panel + VZ_NPANELS - 1) % VZ_NPANELS); v->scroll = 0; v->zoom = 0; break;
    case '1': case '2': case '3': case '4':
        if (v->panel != (vz_panel)(key - '1')) v->scroll = v->zoom = 0;
        v->panel = (vz_panel)(key - '1');
        break;
    case KEY_UP: case 'k':
        if (v->panel == VZ_PANEL_UNDERFLOW) v->layer--;
        else v->rank--;
        break;
    case KEY_DOWN: case 'j':
        if (v->panel == VZ_PANEL_UNDERFLOW) v->layer++;
        else v->rank++;
        break;
    case KEY_LEFT:
        if (v->panel == VZ_PANEL_UNDERFLOW) move_cursor(v, newest, -1);
        if (v->panel == VZ_PANEL_COMM) v->scroll++; /* back in time */
        break;
    case KEY_RIGHT:
        if (v->panel == VZ_PANEL_UNDERFLOW) move_cursor(v, newest, +1);
        if (v->panel == VZ_PANEL_COMM && v->scroll > 0) v->scroll--;
        break;
    case '+': case '=':
        if (v->zoom < 12) v->zoom++;
        break;
    case '-': case '_':
        if (v->zoom > (v->panel == VZ_PANEL_COMM ? -8 : 0)) v->zoom--;
        break;
    case '0': v->zoom = v->scroll = 0; break;
    case ' ': v->paused = !v->paused; break;
    case 'h': case '?': case KEY_F(1): v->help = true; break;
    case 'm':
        v->ring_model = !v->ring_model;
        v->ring.ranks = 0; /* restart the animation */
        break;
    case '[': case ']':
        if (v->panel == VZ_PANEL_UNDERFLOW) { /* the binades shown */
            v->scroll += key == ']' ? 4 : -4;
            break;
        }
        v->ring_ranks += key == ']' ? 1 : -1;
        if (v->ring_ranks < 2) v->ring_ranks = 2;
        if (v->ring_ranks > VZ_ALLREDUCE_MAX_RANKS) v->ring_ranks = VZ_ALLREDUCE_MAX_RANKS;
        v->ring.ranks = 0;
        break;
    default: break;
    }
    vz_view_clamp(v, m);
    return true;
}

void vz_view_ring_tick(vz_view *v, const vz_model *m) {
    int n = vz_view_ring_ranks(v, m), first, end;
    vz_view_ring_phase(v, m, &first, &end);
    if (v->ring.ranks != n || v->ring.step >= end || v->ring.step < first) {
        vz_allreduce_reset(&v->ring, n);
        while (v->ring.step < first) vz_allreduce_advance(&v->ring);
    } else {
        vz_allreduce_advance(&v->ring);
    }
}

/* ---------------------------------------------------------------- frame */

static void draw_too_small(WINDOW *w, int rows, int cols, const vz_style *s) {
    char need[64];
    snprintf(need, sizeof need, "needs %dx%d, have %dx%d", VZ_MIN_COLS, VZ_MIN_ROWS, cols, rows);
    const char *lines[3] = {"terminal too small", need, "enlarge it, or q to quit"};
    for (int i = 0; i < 3; i++) {
        int len = (int)strlen(lines[i]);
        int x = (cols - len) / 2;
        if (x < 0) x = 0;
        vz_text(w, rows / 2 - 1 + i, x, cols, i == 0 ? (vz_attr(s, VZ_PAIR_WARN) | A_BOLD) : A_NORMAL, "%s", lines[i]);
    }
}

static void draw_tabs(WINDOW *w, const vz_model *m, const vz_view *v, int cols, const vz_style *s) {
    int x = vz_text(w, 0, 0, cols, vz_attr(s, VZ_PAIR_ACCENT) | A_BOLD, "mixpar viz ");
    for (int p = 0; p < VZ_NPANELS; p++) {
        bool on = p == (int)v->panel;
        attr_t a = on ? (A_REVERSE | A_BOLD) : A_NORMAL;
        x += vz_text(w, 0, x, cols - x, a, s->color ? " %d %s " : on ? "[%d %s]" : " %d %s ", p + 1, VZ_PANEL_TITLES[p]);
    }
    char params[24];
    int world = vz_model_world(m);
    if (m->have_run)
        vz_text(w, 0, x + 2, cols - x - 2, vz_attr(s, VZ_PAIR_DIM), "%s: %d rank%s, %s params, %s", m->name, world,
                world == 1 ? "" : "s", vz_fmt_num(m->params, params, sizeof params), m->precision);
    else
        vz_text(w, 0, x + 2, cols - x - 2, vz_attr(s, VZ_PAIR_DIM), "(no run header yet)");
}

static void draw_status(WINDOW *w, const vz_model *m, const vz_source *src, const vz_view *v, int y, int cols,
                        const vz_style *s) {
    static const char KEYS[] = "h help  q quit";
    int room = cols - (int)sizeof KEYS - 1, x = 0;
    attr_t warn = vz_attr(s, VZ_PAIR_WARN) | A_BOLD;
    x += vz_text(w, y, x, room - x, A_BOLD, "%s", v->mode ? v->mode : "");
    if (v->paused) x += vz_text(w, y, x, room - x, warn, " PAUSED");
    if (v->entering) x += vz_text(w, y, x, room - x, A_BOLD | A_REVERSE, " go to step: %s_ ", v->entry);
    else if (v->cursor >= 0) x += vz_text(w, y, x, room - x, vz_attr(s, VZ_PAIR_ACCENT) | A_BOLD, " | cursor step %lld", v->cursor);
    /* counts first (short), then what explains them: the bar is cut at the keys' column */
    if (src) {
        if (src->malformed) x += vz_text(w, y, x, room - x, warn, " | %lld malformed", src->malformed);
        if (src->truncated) x += vz_text(w, y, x, room - x, warn, " | %lld truncated", src->truncated);
    }
    if (m->unknown_kinds)
        x += vz_text(w, y, x, room - x, vz_attr(s, VZ_PAIR_WARN), " | %lld unknown (%s)", m->unknown_kinds, m->last_unknown);
    if (src) {
        if (src->newer)
            x += vz_text(w, y, x, room - x, warn, " | %lld newer (v%d)", src->newer, src->newest_version);
        if (src->error[0]) x += vz_text(w, y, x, room - x, warn, " | %s", src->error);
        int present = vz_source_files_present(src), world = vz_model_world(m);
        if (world < src->nranks) world = src->nranks;
        x += vz_text(w, y, x, room - x, present < world ? warn : A_NORMAL, " | files %d/%d", present, world);
    }
    if (v->notice[0]) x += vz_text(w, y, x, room - x, vz_attr(s, VZ_PAIR_ACCENT), " | %s", v->notice);
    x += vz_text(w, y, x, room - x, vz_attr(s, VZ_PAIR_DIM), " | %lld events | %s", m->events, v->run_dir ? v->run_dir : "");
    vz_text(w, y, cols - (int)sizeof KEYS + 1, cols, vz_attr(s, VZ_PAIR_DIM), "%s", KEYS);
}

static void draw_help(WINDOW *w, int rows, int cols, const vz_style *s) {
    static const char *const LINES[] = {
        "keys",
        "",
        "tab, shift-tab   next, previous panel",
        "1 2 3 4          loss, underflow, comm, memory",
        "up, down         underflow: layer;  comm, memory: rank",
        "left, right      underflow: step cursor; comm: back/forward in time",
        "g N Enter, End   underflow: cursor to step N (Esc: cancel); back to newest",
        "[ ]              underflow: binades left, right; model ring: ranks",
        "+ -              zoom in, out (loss: steps; comm: time)",
        "0                reset zoom and scroll",
        "space            pause (live: stop reading; replay: stop the clock)",
        ". ,              replay: one step forward, back (and pause)",
        "> <              replay: twice, half the speed",
        "m                ring view: comm events <-> alpha-beta model",
        "h ? F1           this help (any key closes it)",
        "q                quit",
    };
    int n = (int)(sizeof LINES / sizeof LINES[0]), width = 74, height = n + 2;
    if (width > cols - 2) width = cols - 2;
    int y0 = (rows - height) / 2, x0 = (cols - width) / 2;
    for (int r = 0; r < height; r++)
        for (int c = 0; c < width; c++) vz_char(w, y0 + r, x0 + c, A_NORMAL, ' ');
    attr_t a = vz_attr(s, VZ_PAIR_ACCENT);
    vz_hline(w, y0, x0 + 1, width - 2, a, s);
    vz_hline(w, y0 + height - 1, x0 + 1, width - 2, a, s);
    for (int r = 1; r < height - 1; r++) {
        vz_glyph_at(w, y0 + r, x0, a, s, VZ_G_VLINE);
        vz_glyph_at(w, y0 + r, x0 + width - 1, a, s, VZ_G_VLINE);
    }
    vz_glyph_at(w, y0, x0, a, s, VZ_G_CORNER_TL);
    vz_glyph_at(w, y0, x0 + width - 1, a, s, VZ_G_CORNER_TR);
    vz_glyph_at(w, y0 + height - 1, x0, a, s, VZ_G_AXIS_CORNER);
    vz_glyph_at(w, y0 + height - 1, x0 + width - 1, a, s, VZ_G_CORNER_BR);
    for (int i = 0; i < n; i++) vz_text(w, y0 + 1 + i, x0 + 2, width - 4, i == 0 ? A_BOLD : A_NORMAL, "%s", LINES[i]);
}

void vz_draw_screen(WINDOW *w, const vz_model *m, const vz_source *src, const vz_view *v, const vz_style *s) {
    int rows, cols;
    getmaxyx(w, rows, cols);
    werase(w);
    if (cols < VZ_MIN_COLS || rows < VZ_MIN_ROWS) {
        draw_too_small(w, rows, cols, s);
        return;
    }
    draw_tabs(w, m, v, cols, s);
    WINDOW *body = derwin(w, rows - 2, cols, 1, 0);
    if (body) {
        PANELS[v->panel](body, m, v, s);
        if (m->events == 0 && strncmp(v->notice, "waiting for ", 12) == 0) { /* live, before the trainer writes */
            int len = (int)strlen(v->notice), y = (rows - 2) / 2, x = (cols - len) / 2;
            vz_text(body, y, x > 0 ? x : 0, cols, A_BOLD | vz_attr(s, VZ_PAIR_ACCENT), "%s", v->notice);
        }
        delwin(body);
    }
    draw_status(w, m, src, v, rows - 1, cols, s);
    if (src && src->newer) { /* the whole explanation, over the row above the status bar */
        char note[160];
        vz_source_version_note(src, note, sizeof note);
        vz_text(w, rows - 2, 0, cols, vz_attr(s, VZ_PAIR_WARN) | A_BOLD, "%-*s", cols, note);
    }
    if (v->help) draw_help(w, rows, cols, s);
}

/* ---------------------------------------------------------------- runs side by side */

void vz_run_part(int rows, int cols, int n, int i, int *y, int *x, int *h, int *wd) {
    if (n < 1) n = 1;
    if (cols / n >= VZ_MIN_COLS - 12) { /* side by side, a blank column between parts */
        int each = (cols - (n - 1)) / n;
        *y = 0, *h = rows, *x = i * (each + 1), *wd = i == n - 1 ? cols - *x : each;
    } else {
        int each = rows / n;
        *x = 0, *wd = cols, *y = i * each, *h = i == n - 1 ? rows - *y : each;
    }
}

void vz_draw_runs(WINDOW *w, const vz_model *const *ms, const vz_source *const *srcs, const char *const *dirs, int n,
                  const vz_view *v, const vz_style *s) {
    if (n <= 1) {
        vz_draw_screen(w, ms[0], srcs ? srcs[0] : NULL, v, s);
        return;
    }
    if (n > VZ_MAX_RUNS) n = VZ_MAX_RUNS;
    int rows, cols;
    getmaxyx(w, rows, cols);
    werase(w);
    if (cols < VZ_MIN_COLS || rows < VZ_MIN_ROWS) {
        draw_too_small(w, rows, cols, s);
        return;
    }
    /* tabs, then the runs by letter */
    int x = vz_text(w, 0, 0, cols, vz_attr(s, VZ_PAIR_ACCENT) | A_BOLD, "mixpar viz ");
    for (int p = 0; p < VZ_NPANELS; p++) {
        bool on = p == (int)v->panel;
        x += vz_text(w, 0, x, cols - x, on ? (A_REVERSE | A_BOLD) : A_NORMAL, s->color ? " %d %s " : on ? "[%d %s]" : " %d %s ",
                     p + 1, VZ_PANEL_TITLES[p]);
    }
    x += 1;
    for (int r = 0; r < n; r++) {
        x += 1 + vz_text(w, 0, x + 1, cols - x - 1, vz_attr(s, vz_run_pair(r)) | A_BOLD, "%c", 'A' + r);
        const char *base = strrchr(dirs[r], '/') && strrchr(dirs[r], '/')[1] ? strrchr(dirs[r], '/') + 1 : dirs[r];
        x += vz_text(w, 0, x, cols - x, vz_attr(s, VZ_PAIR_DIM), " %s", base);
    }
    WINDOW *body = derwin(w, rows - 2, cols, 1, 0);
    if (body) {
        if (v->panel == VZ_PANEL_LOSS) {
            vz_panel_loss_runs(body, ms, dirs, n, v, s);
        } else {
            double mem_scale = 0; /* the largest bar of any run: the memory parts compare by length */
            for (int r = 0; r < n; r++) {
                double plan = 0;
                for (int t = 0; t < VZ_NTAGS; t++)
                    if (t != VZ_TAG_HOST) plan += ms[r]->plan[t];
                if (plan > mem_scale) mem_scale = plan;
                for (int k = 0; k < vz_model_world(ms[r]) && k < VZ_MAX_RANKS; k++) {
                    const vz_mem *mem = &ms[r]->ranks[k].mem;
                    double now = 0, peak = 0;
                    for (int t = 0; t < VZ_NTAGS; t++)
                        if (t != VZ_TAG_HOST) now += mem->current[t], peak += mem->peak[t];
                    if (mem->valid && now > mem_scale) mem_scale = now;
                    if (mem->valid && peak > mem_scale) mem_scale = peak;
                }
            }
            for (int r = 0; r < n; r++) {
                int py, px, ph, pw;
                vz_run_part(rows - 2, cols, n, r, &py, &px, &ph, &pw);
                char label[300];
                int lx = vz_text(body, py, px, pw, vz_attr(s, vz_run_pair(r)) | A_BOLD | A_REVERSE, " %c ", 'A' + r);
                lx += vz_text(body, py, px + lx, pw - lx, A_BOLD, " %s", vz_model_run_label(ms[r], dirs[r], label, sizeof label));
                const vz_step *last = vz_model_last_step(ms[r]); /* the cursor ranges over every run */
                if (v->cursor >= 0 && last && last->step < v->cursor)
                    vz_text(body, py, px + lx, pw - lx, vz_attr(s, VZ_PAIR_WARN) | A_BOLD, "  run %c ended at step %lld", 'A' + r, last->step);
                if (px > 0)
                    for (int yy = py; yy < py + ph; yy++) vz_glyph_at(body, yy, px - 1, vz_attr(s, VZ_PAIR_DIM), s, VZ_G_VLINE);
                WINDOW *part = ph > 1 ? derwin(body, ph - 1, pw, py + 1, px) : NULL;
                if (!part) continue;
                vz_view pv = *v; /* each run's own layers and ranks */
                pv.mem_scale = mem_scale;
                vz_view_clamp(&pv, ms[r]);
                if (v->panel == VZ_PANEL_UNDERFLOW && ph - 1 < 24) vz_panel_underflow_compact(part, ms[r], &pv, s);
                else PANELS[v->panel](part, ms[r], &pv, s);
                delwin(part);
            }
        }
        delwin(body);
    }
    /* the status bar: run A's source, then what the other runs' files say */
    draw_status(w, ms[0], srcs ? srcs[0] : NULL, v, rows - 1, cols, s);
    if (srcs) {
        char more[160] = "";
        size_t used = 0;
        for (int r = 1; r < n; r++)
            if (srcs[r] && (srcs[r]->malformed || srcs[r]->truncated || srcs[r]->newer) && used < sizeof more - 40)
                used += (size_t)snprintf(more + used, sizeof more - used, " %c: %lld malformed, %lld truncated, %lld newer", 'A' + r,
                                         srcs[r]->malformed, srcs[r]->truncated, srcs[r]->newer);
        if (more[0]) vz_text(w, rows - 2, 0, cols, vz_attr(s, VZ_PAIR_WARN) | A_BOLD, "%s", more);
    }
    if (v->help) draw_help(w, rows, cols, s);
}

/* ---------------------------------------------------------------- virtual screens and text */

static FILE *virtual_out, *virtual_in;

SCREEN *vz_virtual_screen(int rows, int cols) {
    static const char *const TYPES[] = {"xterm-256color", "xterm", "vt100", "ansi"};
    virtual_out = fopen("/dev/null", "w");
    virtual_in = fopen("/dev/null", "r");
    if (!virtual_out || !virtual_in) return NULL;
    use_env(FALSE); /* the size is ours, not $LINES/$COLUMNS' */
    SCREEN *sp = NULL;
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0] && !sp; i++) sp = newterm(TYPES[i], virtual_out, virtual_in);
    if (!sp) return NULL;
    set_term(sp);
    resizeterm(rows, cols);
    return sp;
}

void vz_virtual_screen_end(SCREEN *sp) {
    if (!sp) return;
    endwin();
    delscreen(sp);
    if (virtual_out) fclose(virtual_out);
    if (virtual_in) fclose(virtual_in);
    virtual_out = virtual_in = NULL;
}

static size_t put_utf8(char *out, wchar_t c) {
    unsigned u = (unsigned)c;
    if (u < 0x80) return out[0] = (char)u, 1;
    if (u < 0x800) return out[0] = (char)(0xc0 | u >> 6), out[1] = (char)(0x80 | (u & 0x3f)), 2;
    if (u < 0x10000)
        return out[0] = (char)(0xe0 | u >> 12), out[1] = (char)(0x80 | ((u >> 6) & 0x3f)), out[2] = (char)(0x80 | (u & 0x3f)), 3;
    out[0] = (char)(0xf0 | u >> 18), out[1] = (char)(0x80 | ((u >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((u >> 6) & 0x3f)), out[3] = (char)(0x80 | (u & 0x3f));
    return 4;
}

char *vz_window_text(WINDOW *w) {
    int rows, cols;
    getmaxyx(w, rows, cols);
    char *text = malloc((size_t)rows * ((size_t)cols * 4 + 1) + 1);
    if (!text) return NULL;
    size_t n = 0;
    for (int y = 0; y < rows; y++) {
        size_t line_start = n, keep = n;
        for (int x = 0; x < cols; x++) {
            cchar_t cell;
            wchar_t wc[CCHARW_MAX + 1] = {0};
            attr_t attrs;
            short pair;
            if (mvwin_wch(w, y, x, &cell) == ERR || getcchar(&cell, wc, &attrs, &pair, NULL) == ERR || wc[0] == 0)
                wc[0] = L' ';
            n += put_utf8(text + n, wc[0]);
            if (wc[0] != L' ') keep = n;
        }
        (void)line_start;
        n = keep; /* trailing blanks cut */
        text[n++] = '\n';
    }
    text[n] = '\0';
    return text;
}

bool vz_locale_utf8(bool force_utf8) {
    setlocale(LC_ALL, "");
    const char *cs = nl_langinfo(CODESET);
    if (cs && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0)) return true;
    if (!force_utf8) return false;
    if (!setlocale(LC_CTYPE, "C.UTF-8")) return false;
    cs = nl_langinfo(CODESET);
    return cs && strcmp(cs, "UTF-8") == 0;
}
