/* app.c: `mixpar viz`: the live loop (follow the files), replay (events at their recorded pace, faster or
 * slower), and --snapshot (one frame as plain text, no terminal needed). */
#include "base/error.h"
#include "base/parse.h"
#include "cli.h"
#include "screen.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: mixpar viz RUN_DIR [options]\n"
    "       mixpar viz --replay RUN_DIR [--speed X] [options]\n"
    "       mixpar viz --snapshot RUN_DIR [--panel NAME] [--step N] [--width W --height H]\n"
    "       mixpar viz [--replay|--snapshot] RUN_A RUN_B [RUN_C RUN_D] [options]   (runs side by side)\n"
    "\n"
    "A terminal view of a training run, drawn from its event files (RUN_DIR/events.rank<R>.jsonl):\n"
    "  1 Loss       training and validation loss, learning rate, tokens/s\n"
    "  2 Underflow  a layer's gradient exponents against the ranges of fp32, bf16, fp16, e4m3, e5m2;\n"
    "               what each format would round to 0; what the run's format really flushed per layer and\n"
    "               step (heat map); the loss scale; a step cursor picks the step whose histograms are drawn\n"
    "  3 Comm       per-rank timelines of compute and comm; bandwidth per collective; a ring allreduce;\n"
    "               under pipeline parallel the schedule each stage ran (F/B of every micro-batch of a\n"
    "               step on one clock), its bubble against (p-1)/(vm+p-1), and the calls per group\n"
    "  4 Memory     bytes by tag per rank, now and peak, beside the planner's prediction (tags over it\n"
    "               marked); the rank's memory over steps with the capacity line of train.max_memory\n"
    "Live (the default) follows the files as the run writes them; --replay plays a finished run.\n"
    "With two to four runs, the loss panel overlays them (A, B, ... in their own colours, a legend, a header\n"
    "row per run with its directory, recipe, world and strategy); underflow, comm and memory draw each run\n"
    "in its own part of the screen (side by side when wide enough, else one above the other). Replay plays\n"
    "them on one clock from each run's start; . and , step every run to the same step; the step cursor\n"
    "ranges over every run (a run that ended before it shows its last step and says so).\n"
    "\n"
    "options:\n"
    "  --replay          play the events at their recorded pace (times --speed)\n"
    "  --speed X         replay speed factor (default 1; 10 = ten times faster)\n"
    "  --refresh MS      redraw and poll interval in milliseconds (default 250)\n"
    "  --panel NAME      the panel to start on: loss, underflow, comm, memory (or 1-4)\n"
    "  --layer N         underflow: the layer to start on (-1 embeddings, 0..L-1 blocks, L head)\n"
    "  --rank R          comm, memory: the rank in focus\n"
    "  --no-color        no colours (every distinction is also drawn as a different character)\n"
    "  --ascii           ASCII characters only (the default when the locale is not UTF-8)\n"
    "  --big             for a projector: no dim text, bold bright colours, chart lines a cell thick\n"
    "                    (whole and half blocks instead of braille dots); live, --replay or --snapshot\n"
    "  --snapshot        print one frame as text and exit (no terminal needed)\n"
    "  --step N          snapshot: the run as it stood after step N (each rank's events up to it)\n"
    "  --cursor N        underflow: start with the step cursor on step N (the histograms of that step)\n"
    "  --width W         snapshot width in columns (default 100, at least 72)\n"
    "  --height H        snapshot height in rows (default 30, at least 20)\n"
    "  --help            this text\n"
    "\n"
    "keys: tab/1-4 panels, up/down layer or rank, +/- zoom, space pause, m ring model, [ ] ring ranks,\n"
    "      h or ? help, q quit; replay: . , one step forward, back; > < speed x2, /2\n"
    "      underflow: left/right move the step cursor one step (the histograms drawn are those of that step;\n"
    "      the status bar shows it), g N Enter puts it on step N (in a replay, a step not reached yet is\n"
    "      replayed up to), End follows the newest step again, [ ] scroll the binades; comm: left/right time\n"
    "\n"
    "examples:\n"
    "  mixpar viz runs/tiny-poetry\n"
    "  mixpar viz --replay viz/samples/tiny-poetry --speed 20\n"
    "  mixpar viz --snapshot viz/samples/tiny-poetry --panel underflow --width 120 --height 36\n"
    "  mixpar viz --replay viz/samples/synthetic-addition viz/samples/fp16-scale1 --speed 10\n";

typedef struct {
    const char *dir;          /* the first run */
    const char *dirs[VZ_MAX_RUNS];
    int ndirs;
    bool replay, snapshot, no_color, ascii, big;
    double speed;
    int refresh_ms, width, height, layer, rank;
    long long step;           /* --step: the last step applied; -1 for all */
    long long cursor;         /* --cursor: the underflow panel's step cursor; -1: the newest step */
    bool have_layer, have_rank;
    vz_panel panel;
} viz_options;

static long long int_arg(const char *option, const char *value, long long lo, long long hi) {
    int64_t v;
    if (!value) mp_usage_error("viz", "%s needs a value", option);
    if (!parse_i64(value, &v) || v < lo || v > hi)
        mp_usage_error("viz", "%s expects a whole number from %lld to %lld, got '%s'", option, lo, hi, value);
    return v;
}

static vz_panel panel_arg(const char *value) {
    if (!value) mp_usage_error("viz", "--panel needs a value");
    for (int p = 0; p < VZ_NPANELS; p++) {
        char digit[2] = {(char)('1' + p), 0};
        if (strcmp(value, VZ_PANEL_NAMES[p]) == 0 || strcmp(value, digit) == 0) return (vz_panel)p;
    }
    mp_usage_error("viz", "--panel expects loss, underflow, comm or memory (or 1-4), got '%s'", value);
}

static viz_options parse_args(int argc, char **argv) {
    viz_options o = {.speed = 1, .refresh_ms = 250, .width = 100, .height = 30, .panel = VZ_PANEL_LOSS, .step = -1, .cursor = -1};
    bool size_given = false, speed_given = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(USAGE, stdout);
            exit(0);
        } else if (strcmp(a, "--replay") == 0) o.replay = true;
        else if (strcmp(a, "--snapshot") == 0) o.snapshot = true;
        else if (strcmp(a, "--no-color") == 0) o.no_color = true;
        else if (strcmp(a, "--ascii") == 0) o.ascii = true;
        else if (strcmp(a, "--big") == 0) o.big = true;
        else if (strcmp(a, "--speed") == 0) {
            if (!next || !parse_double(next, &o.speed) || !(o.speed > 0) || o.speed > 1e6)
                mp_usage_error("viz", "--speed expects a positive factor such as 0.5 or 10, got '%s'", next ? next : "");
            speed_given = true;
            i++;
        } else if (strcmp(a, "--refresh") == 0) o.refresh_ms = (int)int_arg(a, next, 10, 60000), i++;
        else if (strcmp(a, "--width") == 0) o.width = (int)int_arg(a, next, 1, 1000), i++, size_given = true;
        else if (strcmp(a, "--height") == 0) o.height = (int)int_arg(a, next, 1, 1000), i++, size_given = true;
        else if (strcmp(a, "--layer") == 0) o.layer = (int)int_arg(a, next, -1, 1024), o.have_layer = true, i++;
        else if (strcmp(a, "--rank") == 0) o.rank = (int)int_arg(a, next, 0, VZ_MAX_RANKS - 1), o.have_rank = true, i++;
        else if (strcmp(a, "--panel") == 0) o.panel = panel_arg(next), i++;
        else if (strcmp(a, "--step") == 0) o.step = int_arg(a, next, 0, 1LL << 50), i++;
        else if (strcmp(a, "--cursor") == 0) o.cursor = int_arg(a, next, 0, 1LL << 50), i++;
        else if (a[0] == '-' && a[1] != '\0') mp_usage_error("viz", "unknown option '%s'", a);
        else if (o.ndirs == VZ_MAX_RUNS) mp_usage_error("viz", "at most %d runs side by side, got a fifth: '%s'", VZ_MAX_RUNS, a);
        else o.dirs[o.ndirs++] = a;
    }
    o.dir = o.ndirs ? o.dirs[0] : NULL;
    if (!o.dir) mp_usage_error("viz", "RUN_DIR is required (a run directory such as runs/tiny-poetry)");
    if (size_given && !o.snapshot) mp_usage_error("viz", "--width and --height size a --snapshot; live, the terminal decides");
    if (speed_given && !o.replay) mp_usage_error("viz", "--speed sets the pace of --replay");
    if (o.step >= 0 && !o.snapshot) mp_usage_error("viz", "--step N picks the step a --snapshot shows");
    if (o.replay && o.snapshot) mp_usage_error("viz", "--snapshot draws the whole run; --replay plays it: choose one");
    /* Live, a terminal that is too small shows a "terminal too small" screen until it is enlarged; a snapshot
     * cannot be enlarged, so a size the panels do not fit in is a mistake in the command. */
    if (o.snapshot && (o.width < VZ_MIN_COLS || o.height < VZ_MIN_ROWS))
        mp_usage_error("viz", "a snapshot needs at least %d columns and %d rows (the smallest frame the panels fit in), "
                       "got --width %d --height %d; use --width %d --height %d or more",
                       VZ_MIN_COLS, VZ_MIN_ROWS, o.width, o.height,
                       o.width > VZ_MIN_COLS ? o.width : VZ_MIN_COLS, o.height > VZ_MIN_ROWS ? o.height : VZ_MIN_ROWS);
    return o;
}

static void check_focus(const viz_options *o, const vz_model *m, const char *dir, bool whole_run);

static void start_view(vz_view *v, const viz_options *o, const vz_model *m) {
    vz_view_init(v);
    v->panel = o->panel;
    v->run_dir = o->dir;
    v->rank = o->rank;
    if (o->have_layer) v->layer = o->layer;
    v->cursor = o->cursor;
    vz_view_clamp(v, m);
}

/* ---------------------------------------------------------------- snapshot */

/* --step N: each rank's events up to its first event of a later step (a rank writes in step order). */
typedef struct {
    vz_model *m;
    long long until;
    bool cut[VZ_MAX_RANKS];
} until_ctx;

static void apply_until(void *ctx, int rank, const cJSON *ev) {
    until_ctx *u = ctx;
    if (rank < 0 || rank >= VZ_MAX_RANKS || u->cut[rank]) return;
    if (u->until >= 0 && vz_json_int(ev, "step", -1) > u->until) {
        u->cut[rank] = true;
        return;
    }
    vz_model_apply(u->m, rank, ev);
}

static void reset_until(void *ctx) {
    until_ctx *u = ctx;
    vz_model_reset(u->m);
    memset(u->cut, 0, sizeof u->cut);
}

/* A run as the viewer holds it: its files, what they say, and (replay) its lines in time order. */
typedef struct {
    const char *dir;
    vz_source src;
    vz_model m;
    vz_replay rp;
    until_ctx until;
    double clock; /* replay: the time reached on this run's clock */
} viz_run;

/* The runs' arrays the frame takes. */
typedef struct {
    const vz_model *ms[VZ_MAX_RUNS];
    const vz_source *srcs[VZ_MAX_RUNS];
    const char *dirs[VZ_MAX_RUNS];
    char names[600]; /* the status bar's: "RUN_A vs RUN_B" */
} viz_frame;

static void frame_of(viz_frame *f, viz_run *runs, int n) {
    size_t used = 0;
    f->names[0] = '\0';
    for (int r = 0; r < n; r++) {
        f->ms[r] = &runs[r].m, f->srcs[r] = &runs[r].src, f->dirs[r] = runs[r].dir;
        if (used < sizeof f->names - 1)
            used += (size_t)snprintf(f->names + used, sizeof f->names - used, "%s%s", r ? " vs " : "", runs[r].dir);
    }
}

static int snapshot(const viz_options *o) {
    int n = o->ndirs;
    viz_run *runs = calloc((size_t)n, sizeof *runs);
    if (!runs) MP_FAIL("memory for the runs", "mixpar viz: out of memory");
    for (int r = 0; r < n; r++) { /* every run read and checked before anything is drawn */
        viz_run *run = &runs[r];
        run->dir = o->dirs[r];
        vz_open_run(&run->src, "viz", run->dir);
        vz_model_init(&run->m);
        run->until = (until_ctx){.m = &run->m, .until = o->step};
        vz_read_run(&run->src, apply_until, &run->until, reset_until);
        if (n > 1) vz_report_reading(&run->src, "viz"); /* side by side, a run with nothing readable is a mistake */
        if (run->m.world > 0) vz_source_expect(&run->src, run->m.world);
        check_focus(o, &run->m, run->dir, true);
    }
    bool utf8 = vz_locale_utf8(!o->ascii) && !o->ascii;
    SCREEN *sp = vz_virtual_screen(o->height, o->width);
    if (!sp)
        MP_FAIL_HINT("a terminal description (xterm, vt100) for the virtual screen", "install ncurses-base (make deps)",
                     "none could be loaded");
    vz_style style = {.color = false, .unicode = utf8, .big = o->big};
    vz_view v;
    start_view(&v, o, &runs[0].m);
    v.mode = "snapshot";
    viz_frame f;
    frame_of(&f, runs, n);
    if (n > 1) v.run_dir = f.names;
    /* the ring view at the end of reduce-scatter: each rank owns one fully reduced chunk */
    int nr = vz_view_ring_ranks(&v, &runs[0].m);
    vz_allreduce_reset(&v.ring, nr);
    for (int i = 0; i < nr - 1; i++) vz_allreduce_advance(&v.ring);
    vz_draw_runs(stdscr, f.ms, f.srcs, f.dirs, n, &v, &style);
    char *text = vz_window_text(stdscr);
    vz_virtual_screen_end(sp);
    if (text) fputs(text, stdout);
    free(text);
    for (int r = 0; r < n; r++) {
        vz_model_free(&runs[r].m);
        vz_source_close(&runs[r].src);
    }
    free(runs);
    return 0;
}

/* ---------------------------------------------------------------- live and replay */

/* Replay stepping: lines are handed to the model one instant at a time until rank 0's step event `want`
 * (or a later one) has arrived. Returns the clock reached. */
typedef struct {
    vz_model *m;
    long long step; /* the newest rank-0 step applied */
} step_watch;

static void apply_watching(void *ctx, int rank, const cJSON *ev) {
    step_watch *w = ctx;
    vz_model_apply(w->m, rank, ev);
    if (rank == 0 && strcmp(vz_json_str(ev, "kind", ""), "step") == 0) w->step = vz_json_int(ev, "step", w->step);
}

/* The "step" of the next line to replay (-1 when it has none or is not JSON). */
static long long next_line_step(const vz_replay *rp) {
    const vz_replay_line *l = &rp->lines[rp->next];
    cJSON *ev = cJSON_ParseWithLength(rp->text[l->rank] + l->offset, l->length);
    long long step = ev ? vz_json_int(ev, "step", -1) : -1;
    cJSON_Delete(ev);
    return step;
}

static double replay_to_step(vz_replay *rp, vz_model *m, long long want, double clock) {
    step_watch w = {m, -1};
    const vz_step *last = vz_model_last_step(m);
    if (last && last->step >= want) { /* back: start over from the beginning */
        vz_model_reset(m);
        rp->next = 0;
        clock = rp->t_begin;
    }
    while (rp->next < rp->nlines && w.step < want) {
        clock = rp->lines[rp->next].t;
        vz_replay_until(rp, clock, apply_watching, &w);
    }
    /* then the rest of that step (its spans, histograms, rounding counts, written after its step event),
     * up to the first line of a later step or without one */
    while (rp->next < rp->nlines && w.step >= want && next_line_step(rp) == w.step) {
        clock = rp->lines[rp->next].t;
        vz_replay_until(rp, clock, apply_watching, &w);
    }
    return clock;
}

static volatile sig_atomic_t resized, quit_signal;
static bool curses_on;

static void on_winch(int sig) { (void)sig, resized = 1; }
static void on_quit(int sig) { (void)sig, quit_signal = 1; }
static void end_curses(void) {
    if (curses_on) endwin();
    curses_on = false;
}

/* --layer and --rank must name a layer and a rank the run has: the layers with gradient histograms (else the
 * run header's -1..L), and the ranks of the run header's world or with event files. A live run may not have
 * written its header yet; with `whole_run` false, what is not known yet is not checked. */
static void check_focus(const viz_options *o, const vz_model *m, const char *dir, bool whole_run) {
    char msg[512] = "";
    if (o->have_layer) {
        int lo = 0, hi = -1;
        const char *from = "gradient histograms";
        if (m->hist_hi >= m->hist_lo) lo = m->hist_lo, hi = m->hist_hi;
        else if (m->layers > 0) lo = -1, hi = m->layers, from = "layers (run header)";
        char lo_name[32], hi_name[32];
        if (hi >= lo && (o->layer < lo || o->layer > hi))
            snprintf(msg, sizeof msg, "--layer %d: %s has %s for layers %d (%s) to %d (%s); choose one of those", o->layer,
                     dir, from, lo, vz_model_layer_name(m, lo, lo_name, sizeof lo_name), hi,
                     vz_model_layer_name(m, hi, hi_name, sizeof hi_name));
        else if (hi < lo && whole_run)
            snprintf(msg, sizeof msg, "--layer %d: %s has no layers to choose from (no run header with the model's "
                     "layers and no hist events); leave --layer out", o->layer, dir);
    }
    int world = vz_model_world(m);
    if (!msg[0] && o->have_rank && (world > 0 || whole_run) && o->rank >= world)
        snprintf(msg, sizeof msg, "--rank %d: %s has %d rank%s (%s%d); choose one of those", o->rank, dir, world,
                 world == 1 ? "" : "s", world > 1 ? "0 to " : "", world > 0 ? world - 1 : 0);
    if (msg[0]) {
        end_curses();
        mp_usage_error("viz", "%s", msg);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int interactive(const viz_options *o) {
    int n = o->ndirs;
    viz_run *runs = calloc((size_t)n, sizeof *runs);
    if (!runs) MP_FAIL("memory for the runs", "mixpar viz: out of memory");
    for (int r = 0; r < n; r++) {
        runs[r].dir = o->dirs[r];
        if (o->replay) vz_open_run(&runs[r].src, "viz", runs[r].dir);
        else vz_open_run_waiting(&runs[r].src, "viz", runs[r].dir); /* the demo starts us before the trainer writes */
        vz_model_init(&runs[r].m);
    }
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        MP_FAIL_HINT("a terminal on stdin and stdout", "for text output use mixpar viz --snapshot RUN_DIR",
                     "mixpar viz: %s is not a terminal", isatty(STDIN_FILENO) ? "stdout" : "stdin");
    /* Replay: `elapsed` seconds since the start, the same for every run (each from its own first event). */
    double elapsed = 0, speed = o->speed;
    char mode[48];
    if (o->replay) {
        for (int r = 0; r < n; r++) {
            vz_replay_load(&runs[r].rp, &runs[r].src);
            if (runs[r].rp.nlines == 0) vz_report_reading(&runs[r].src, "viz"); /* stops with the reason */
        }
        snprintf(mode, sizeof mode, "replay x%g", o->speed);
    } else {
        snprintf(mode, sizeof mode, "live");
    }

    /* Our SIGWINCH handler, installed before curses starts, so curses leaves it alone: the loop resizes. */
    struct sigaction sa = {0};
    sa.sa_handler = on_winch;
    sigaction(SIGWINCH, &sa, NULL);
    sa.sa_handler = on_quit;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    bool utf8 = !o->ascii && vz_locale_utf8(false);
    if (!newterm(NULL, stdout, stdin))
        MP_FAIL_HINT("a terminal curses knows ($TERM)", "try TERM=xterm-256color", "TERM=%s",
                     getenv("TERM") ? getenv("TERM") : "(unset)");
    curses_on = true;
    atexit(end_curses);
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    timeout(o->refresh_ms);
    vz_style style = {.color = false, .unicode = utf8, .big = o->big};
    if (!o->no_color && has_colors()) {
        start_color();
        use_default_colors(); /* the terminal's own background */
        vz_colors_init(o->big);
        style.color = true;
    }

    vz_model *m = &runs[0].m; /* the keys and the ring follow run A */
    vz_view v;
    start_view(&v, o, m);
    v.mode = mode;
    viz_frame f;
    frame_of(&f, runs, n);
    if (n > 1) v.run_dir = f.names;
    double last = now_s(), last_ring = last;
    bool running = true, focus_checked[VZ_MAX_RUNS] = {0};
    while (running && !quit_signal) {
        if (resized) {
            resized = 0;
            struct winsize ws;
            if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) resizeterm(ws.ws_row, ws.ws_col);
        }
        double t = now_s();
        if (!v.paused) {
            /* Wall time between two frames, but never more than a few frames' worth: a process stopped (Ctrl-Z)
             * or a machine suspended resumes where it was, not minutes later. */
            double frame = t - last, most = 4 * o->refresh_ms / 1000.0 + 0.1;
            if (o->replay) elapsed += (frame < most ? frame : most) * speed;
            bool done = true;
            for (int r = 0; r < n; r++) {
                viz_run *run = &runs[r];
                if (o->replay) {
                    run->clock = run->rp.t_begin + elapsed;
                    vz_replay_until(&run->rp, run->clock, vz_model_apply, &run->m);
                    done = done && vz_replay_done(&run->rp);
                } else if (vz_source_poll(&run->src, vz_model_apply, &run->m) == VZ_SOURCE_RESET) {
                    vz_model_reset(&run->m); /* a new run truncated the files: start over */
                    vz_source_poll(&run->src, vz_model_apply, &run->m);
                }
                if (run->m.world > 0) vz_source_expect(&run->src, run->m.world);
                if (!focus_checked[r] && run->m.have_run) check_focus(o, &run->m, run->dir, false), focus_checked[r] = true;
            }
            if (o->replay && done) snprintf(v.notice, sizeof v.notice, "replay finished");
            if (v.panel == VZ_PANEL_COMM && t - last_ring >= 0.7) {
                vz_view_ring_tick(&v, m);
                last_ring = t;
            }
        }
        last = t;
        vz_view_clamp(&v, m);
        if (!o->replay) {
            int waiting = -1;
            for (int r = 0; r < n && waiting < 0; r++)
                if (runs[r].m.events == 0 && runs[r].src.events == 0) waiting = r;
            if (waiting >= 0)
                snprintf(v.notice, sizeof v.notice, "waiting for %s to start (no events.rank0.jsonl yet)...", runs[waiting].dir);
            else if (strncmp(v.notice, "waiting for ", 12) == 0)
                v.notice[0] = '\0';
        }
        vz_draw_runs(stdscr, f.ms, f.srcs, f.dirs, n, &v, &style);
        wnoutrefresh(stdscr);
        doupdate();
        int key = getch();
        if (o->replay && (key == '.' || key == ',')) { /* step by step: the clock stops there */
            long long newest = vz_runs_last_step(f.ms, n), at = newest > 0 ? newest : 0, want = key == '.' ? at + 1 : at - 1;
            if (want >= 1)
                for (int r = 0; r < n; r++) {
                    runs[r].clock = replay_to_step(&runs[r].rp, &runs[r].m, want, runs[r].clock);
                    if (r == 0) elapsed = runs[0].clock - runs[0].rp.t_begin;
                }
            v.paused = true;
            v.notice[0] = '\0';
        } else if (o->replay && (key == '>' || key == '<')) {
            speed = key == '>' ? (speed * 2 <= 1e6 ? speed * 2 : speed) : (speed / 2 >= 1e-6 ? speed / 2 : speed);
            snprintf(mode, sizeof mode, "replay x%g", speed);
        } else if (key != ERR) {
            running = vz_view_key_runs(&v, f.ms, n, key);
            /* g N Enter in a replay: a step not reached yet is replayed up to (and the clock stops there) */
            long long now = vz_runs_last_step(f.ms, n);
            if (o->replay && v.jump >= 0 && v.jump > now) {
                for (int r = 0; r < n; r++) {
                    runs[r].clock = replay_to_step(&runs[r].rp, &runs[r].m, v.jump, runs[r].clock);
                    if (r == 0) elapsed = runs[0].clock - runs[0].rp.t_begin;
                }
                long long reached = vz_runs_last_step(f.ms, n); /* the longest run's end */
                v.cursor = reached >= 0 && v.jump > reached ? reached : v.jump; /* past the end: the end */
                v.paused = true;
                vz_view_clamp(&v, m);
            }
            v.jump = -1;
        }
    }
    end_curses();
    for (int r = 0; r < n; r++) {
        if (o->replay) vz_replay_free(&runs[r].rp);
        vz_model_free(&runs[r].m);
        vz_source_close(&runs[r].src);
    }
    free(runs);
    return 0;
}

int vz_cmd_viz(int argc, char **argv) {
    viz_options o = parse_args(argc, argv);
    return o.snapshot ? snapshot(&o) : interactive(&o);
}
