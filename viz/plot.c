/* plot.c: `mixpar plot`: gnuplot figures of a run (PNG and SVG, or the terminal), each with its data file
 * and its script written next to it, so a figure can be restyled by editing NAME.gp and running gnuplot. */
#include "base/error.h"
#include "cli.h"
#include "formats.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: mixpar plot RUN_DIR [--out DIR] [--term]\n"
    "\n"
    "Figures of a run from its event files, drawn by gnuplot:\n"
    "  loss            training and validation loss over steps\n"
    "  loss_scale      the loss scale over steps, skipped steps marked\n"
    "  underflow       per layer, the share of gradient values each format rounds to 0\n"
    "  memory          bytes by tag: measured peak beside the planner's prediction\n"
    "  timeline        the last three steps of every rank: compute spans and comm calls\n"
    "  comm_bandwidth  bus bandwidth against message size, per collective and algorithm\n"
    "Each figure is NAME.png and NAME.svg, drawn from NAME.dat by NAME.gp (all in --out). A figure\n"
    "whose events the run lacks (comm in a single-rank run, say) is skipped with a note.\n"
    "\n"
    "options:\n"
    "  --out DIR   where to write (default RUN_DIR/plots)\n"
    "  --term      draw the figures in the terminal (gnuplot's dumb terminal) instead of PNG/SVG\n"
    "  --help      this text\n"
    "\n"
    "example: mixpar plot viz/samples/tiny-poetry --out /tmp/poetry-plots\n";

typedef struct {
    const char *dir, *out;
    char label[400];          /* the titles' run: directory, config, recipe, world, strategy */
    bool term;
    const char *png_terminal; /* "pngcairo" or "png" */
    int written, skipped;
} plot_ctx;

/* ---------------------------------------------------------------- files and gnuplot */

static FILE *open_out(const plot_ctx *p, const char *name) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", p->out, name);
    FILE *f = fopen(path, "w");
    if (!f) MP_FAIL("a writable output directory (--out)", "mixpar plot: cannot write %s: %s", path, strerror(errno));
    return f;
}

static void close_out(FILE *f, const plot_ctx *p, const char *name) {
    if (ferror(f) | (fclose(f) != 0))
        MP_FAIL("room to write the plot files", "mixpar plot: writing %s/%s failed", p->out, name);
}

static void mkdirs(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *c = path + 1; *c; c++) {
        if (*c != '/') continue;
        *c = '\0';
        mkdir(path, 0755);
        *c = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        MP_FAIL("a directory that can be created (--out)", "mixpar plot: cannot create %s: %s", dir, strerror(errno));
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) MP_FAIL("a directory (--out)", "mixpar plot: %s is not a directory", dir);
}

/* Runs gnuplot ARGS... (NULL-terminated) in directory cwd (NULL: here), its output thrown away when quiet;
 * returns its exit status (127: gnuplot is not on the PATH). */
static int run_gnuplot(const char *cwd, bool quiet, const char *const *args) {
    pid_t pid = fork();
    if (pid < 0) return 127;
    if (pid == 0) {
        if (cwd && chdir(cwd) != 0) _exit(126);
        if (quiet) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
        }
        execvp("gnuplot", (char *const *)args);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return 127;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Writes NAME.gp: the terminal set-up around `body`, then draws it. */
static void figure(plot_ctx *p, const char *name, const char *data_files, const char *fmt, ...) {
    char file[128];
    snprintf(file, sizeof file, "%s.gp", name);
    FILE *f = open_out(p, file);
    fprintf(f, "# %s.gp: written by `mixpar plot %s`; run `gnuplot %s.gp` here to redraw %s.png and %s.svg\n"
               "# (`gnuplot -e dumb=1 %s.gp` draws it in the terminal). Data: %s.\n",
            name, p->dir, name, name, name, name, data_files);
    fprintf(f, "if (exists(\"dumb\")) {\n    set terminal dumb size 100,30\n    set output\n} else {\n"
               "    set terminal %s size 960,540 noenhanced font \",11\"\n    set output '%s.png'\n}\n",
            p->png_terminal, name);
    fprintf(f, "set grid\nset key noenhanced\n");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fprintf(f, "if (!exists(\"dumb\")) {\n    set terminal svg size 960,540 noenhanced font \",11\"\n    set output '%s.svg'\n"
               "    replot\n    unset output\n}\n", name);
    close_out(f, p, file);
    if (p->term) printf("== %s\n", name);
    fflush(stdout);
    const char *const draw[] = {"gnuplot", file, NULL}, *const dumb[] = {"gnuplot", "-e", "dumb=1", file, NULL};
    int rc = run_gnuplot(p->out, false, p->term ? dumb : draw);
    if (rc != 0) MP_FAIL_HINT("gnuplot to draw the figure", "the script and its data are in --out; run it there to see why",
                              "mixpar plot: gnuplot %s/%s exited with %d", p->out, file, rc);
    if (!p->term) printf("wrote %s/%s.png and %s.svg (data %s, script %s.gp)\n", p->out, name, name, data_files, name);
    p->written++;
}

static void skip(plot_ctx *p, const char *name, const char *why) {
    printf("skipped %s: %s\n", name, why);
    p->skipped++;
}

/* ---------------------------------------------------------------- figures */

static void quoted(FILE *f, const char *s) { fprintf(f, "\"%s\"", s); }

static void loss_figures(plot_ctx *p, const vz_model *m) {
    size_t n = vz_model_nsteps(m);
    if (n == 0) {
        skip(p, "loss", "no step events");
        skip(p, "loss_scale", "no step events");
        return;
    }
    FILE *f = open_out(p, "loss.dat");
    fprintf(f, "# step loss lr scale skipped grad_norm tokens_per_s   (rank 0's step events; NaN: not finite)\n");
    for (size_t i = 0; i < n; i++) {
        const vz_step *s = vz_model_step(m, i);
        fprintf(f, "%lld %.9g %.9g %.9g %d %.9g %.9g\n", s->step, s->loss, s->lr, s->scale, s->skipped ? 1 : 0,
                s->grad_norm, s->tokens_per_s);
    }
    close_out(f, p, "loss.dat");
    bool have_val = m->evals.count > 0;
    if (have_val) {
        f = open_out(p, "val.dat");
        fprintf(f, "# step val_loss   (eval events)\n");
        for (size_t i = 0; i < m->evals.count; i++) {
            const vz_eval *e = vz_ring_at(&m->evals, i);
            fprintf(f, "%lld %.9g\n", e->step, e->val_loss);
        }
        close_out(f, p, "val.dat");
    }
    figure(p, "loss", have_val ? "loss.dat, val.dat" : "loss.dat",
           "set title '%s: loss'\nset xlabel 'step'\nset ylabel 'loss (nats per token)'\n"
           "plot 'loss.dat' using 1:2 with lines lw 1.5 title 'train'%s\n",
           p->label, have_val ? ", 'val.dat' using 1:2 with linespoints pt 7 ps 1.2 lw 2 title 'validation'" : "");

    bool flat = m->min_scale == m->max_scale;
    char yrange[64]; /* a flat line on a log axis needs its range set: gnuplot cannot pick one */
    double at = m->max_scale > 0 ? m->max_scale : 1;
    snprintf(yrange, sizeof yrange, "set yrange [%g:%g]\n", at / 4, at * 4);
    /* tick every 2^k binades, k a power of two, so a scale from 1 to 2^28 gets about eight labels */
    double lo_k = m->min_scale > 0 ? floor(log2(m->min_scale)) : 0, hi_k = m->max_scale > 0 ? ceil(log2(m->max_scale)) : 0;
    int step_k = 1;
    while ((hi_k - lo_k + 4) / step_k > 8) step_k *= 2;
    figure(p, "loss_scale", "loss.dat",
           "set title '%s: loss scale%s'\nset xlabel 'step'\nset ylabel 'loss scale (log2 axis)'\nset logscale y 2\n"
           "set format y '2^%%L'\nset ytics %g\n%s"
           "plot 'loss.dat' using 1:4 with steps lw 2 title 'loss scale', "
           "'' using 1:($5 > 0 ? $4 : 1/0) with points pt 2 ps 1.5 lc rgb 'red' title 'skipped step (%lld)'\n",
           p->label, flat ? (strncmp(m->precision, "fp16", 4) == 0 ? " (unchanged over the run)" : " (no loss scaling in this run)") : "",
           pow(2, step_k), flat ? yrange : "", m->skipped_steps);
}

static void underflow_figure(plot_ctx *p, const vz_model *m) {
    if (m->hist_hi < m->hist_lo) {
        skip(p, "underflow", "no hist events (set train.hist_interval)");
        return;
    }
    FILE *f = open_out(p, "underflow.dat");
    fprintf(f, "# layer name fp16_to_0%% bf16_to_0%% e4m3_to_0%% e5m2_to_0%% fp16_subnormal%% step   (latest hist per layer)\n");
    for (int layer = m->hist_lo; layer <= m->hist_hi; layer++) {
        const vz_hist *h = vz_model_hist(m, layer);
        if (!h || h->count <= 0) continue;
        char name[24];
        fprintf(f, "%d ", layer);
        quoted(f, vz_model_layer_name(m, layer, name, sizeof name));
        double c = h->count / 100;
        fprintf(f, " %.6g %.6g %.6g %.6g %.6g %lld\n", h->underflow[VZ_TARGET_FP16] / c, h->underflow[VZ_TARGET_BF16] / c,
                h->underflow[VZ_TARGET_E4M3] / c, h->underflow[VZ_TARGET_E5M2] / c, h->subnormal[VZ_TARGET_FP16] / c, h->step);
    }
    close_out(f, p, "underflow.dat");
    figure(p, "underflow", "underflow.dat",
           "set title \"%s: gradient values a cast would round to 0, per layer (latest histograms)\"\n"
           "set ylabel '%% of the layer''s gradient values'\nset style data histograms\n"
           "set style histogram clustered gap 1\nset style fill solid 0.8 border -1\nset xtics rotate by -30\nset yrange [0:*]\n"
           "plot 'underflow.dat' using 3:xtic(2) title 'fp16', '' using 4 title 'bf16', '' using 5 title 'e4m3', "
           "'' using 6 title 'e5m2', '' using 7 title 'fp16 subnormal (kept, less precise)'\n",
           p->label);
}

static void memory_figure(plot_ctx *p, const vz_model *m) {
    int world = vz_model_world(m), with_mem = 0;
    double peak[VZ_NTAGS] = {0};
    for (int r = 0; r < world; r++) {
        const vz_mem *mem = &m->ranks[r].mem;
        if (!mem->valid) continue;
        with_mem++;
        for (int t = 0; t < VZ_NTAGS; t++)
            if (mem->peak[t] > peak[t]) peak[t] = mem->peak[t];
    }
    if (!with_mem && !m->have_plan) {
        skip(p, "memory", "no mem events and no plan in the run header");
        return;
    }
    FILE *f = open_out(p, "memory.dat");
    fprintf(f, "# tag peak_MB plan_MB   (peak: the largest over %d rank%s; plan: the run header's)\n", with_mem,
            with_mem == 1 ? "" : "s");
    for (int t = 0; t < VZ_NTAGS; t++) fprintf(f, "%s %.6g %.6g\n", VZ_TAG_NAMES[t], peak[t] / 1e6, m->plan[t] / 1e6);
    close_out(f, p, "memory.dat");
    figure(p, "memory", "memory.dat",
           "set title '%s: memory per rank by tag, measured peak and plan'\nset ylabel 'MB (10^6 bytes)'\n"
           "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\nset yrange [0:*]\n"
           "plot 'memory.dat' using 2:xtic(1) title 'measured peak'%s\n",
           p->label, m->have_plan ? ", '' using 3 title 'plan (mixpar plan)'" : "");
}

static void timeline_figure(plot_ctx *p, const vz_model *m) {
    int world = vz_model_world(m);
    long long last_step = -1;
    for (int r = 0; r < world; r++) {
        const vz_span *s = vz_ring_last(&m->ranks[r].spans);
        if (s && s->step > last_step) last_step = s->step;
    }
    if (last_step < 0) {
        skip(p, "timeline", "no span events");
        return;
    }
    FILE *f = open_out(p, "timeline.dat");
    fprintf(f, "# lane t0 t1 colour name   (lane: rank + 0 compute, rank + 0.4 comm; the last three steps; times on\n"
               "# rank 0's clock when the ranks made a collective: see vz_model_clock_offset in viz/model.h)\n");
    for (int r = 0; r < world; r++) {
        double t_lo = INFINITY, t_hi = -INFINITY, off = vz_model_clock_offset(m, r);
        for (size_t i = 0; i < m->ranks[r].spans.count; i++) {
            const vz_span *s = vz_ring_at(&m->ranks[r].spans, i);
            if (s->step <= last_step - 3) continue;
            fprintf(f, "%g %.9g %.9g %d %s\n", (double)r, s->t0 + off, s->t1 + off, s->kind + 1, VZ_SPAN_NAMES[s->kind]);
            if (s->t0 < t_lo) t_lo = s->t0;
            if (s->t1 > t_hi) t_hi = s->t1;
        }
        for (size_t i = 0; i < m->ranks[r].comms.count; i++) {
            const vz_comm *c = vz_ring_at(&m->ranks[r].comms, i);
            if (c->t1 + off < t_lo || c->t0 + off > t_hi) continue;
            fprintf(f, "%g %.9g %.9g %d %s\n", r + 0.4, c->t0 + off, c->t1 + off, c->bucket >= 0 ? 5 + c->bucket % 2 : 7, c->op);
        }
    }
    close_out(f, p, "timeline.dat");
    char ytics[4096] = "";
    size_t used = 0;
    for (int r = 0; r < world && used < sizeof ytics - 64; r++)
        used += (size_t)snprintf(ytics + used, sizeof ytics - used, "%s\"rank %d compute\" %d, \"rank %d comm\" %g",
                                 r ? ", " : "", r, r, r, r + 0.4);
    figure(p, "timeline", "timeline.dat",
           "set title '%s: steps %lld..%lld%s'\nset xlabel 'seconds'\nset ytics (%s)\n"
           "set yrange [%g:-0.4]\nset style fill solid 0.85 noborder\nunset grid\nset grid xtics\n"
           "set key outside right top vertical samplen 2\n" /* beside the plot: the key covers no bar */
           "plot 'timeline.dat' using (($2+$3)/2):1:(($3-$2)/2):(0.17):4 with boxxyerror lc variable notitle, "
           "keyentry with boxes lc 7 title 'loss allreduce, other comm', keyentry with boxes lc 4 title 'data wait (other spans)', "
           "keyentry with boxes lc 1 title 'forward', "
           "keyentry with boxes lc 2 title 'backward', keyentry with boxes lc 3 title 'optimizer', "
           "keyentry with boxes lc 5 title 'grad bucket (even)', keyentry with boxes lc 6 title 'grad bucket (odd)'\n",
           p->label, last_step - 2 > 0 ? last_step - 2 : 0, last_step,
           vz_model_clocks_aligned(m) ? (strcmp(vz_model_clock_alignment(m), "by wall clock") == 0 ? " (rank clocks aligned by wall clock)" : " (rank clocks aligned on the first collective)") : " on each rank''s clock", ytics,
           world - 1 + 0.8);
}

static void comm_figure(plot_ctx *p, const vz_model *m) {
    if (m->comm_events == 0) {
        skip(p, "comm_bandwidth", vz_model_world(m) > 1 ? "no comm events" : "no comm events (a single-rank run)");
        return;
    }
    FILE *f = open_out(p, "comm.dat");
    fprintf(f, "# bytes seconds busbw_GBps   (one block per collective and algorithm, in the order of the plot's titles)\n");
    int world = vz_model_world(m);
    char plot[4096] = "";
    size_t used = 0;
    for (int o = 0; o < m->nops; o++) {
        fprintf(f, "# %s %s\n", m->ops[o].op, m->ops[o].algorithm);
        for (int r = 0; r < world; r++)
            for (size_t i = 0; i < m->ranks[r].comms.count; i++) {
                const vz_comm *c = vz_ring_at(&m->ranks[r].comms, i);
                double secs = c->t1 - c->t0;
                if (strcmp(c->op, m->ops[o].op) != 0 || strcmp(c->algorithm, m->ops[o].algorithm) != 0 || secs <= 0 || c->bytes <= 0)
                    continue;
                int n = c->ranks > 0 ? c->ranks : world;
                fprintf(f, "%.0f %.9g %.6g\n", c->bytes, secs, c->bytes * vz_busbw_factor(c->op, n) / secs / 1e9);
            }
        fprintf(f, "\n\n");
        if (used < sizeof plot - 128)
            used += (size_t)snprintf(plot + used, sizeof plot - used, "%s'comm.dat' index %d using 1:($3*1e9) with points pt 7 title '%s %s'",
                                     o ? ", " : "", o, m->ops[o].op, m->ops[o].algorithm);
    }
    close_out(f, p, "comm.dat");
    figure(p, "comm_bandwidth", "comm.dat",
           "set title '%s: bus bandwidth of each collective call'\nset xlabel 'message size'\n"
           "set ylabel 'bus bandwidth (nccl-tests busbw)'\nset logscale xy\n"
           "set format x '%%.0s %%cB'\nset format y '%%.0s %%cB/s'\nset key left top\nplot %s\n",
           p->label, plot);
}

/* ---------------------------------------------------------------- command */

static void reset_model(void *ctx) { vz_model_reset(ctx); }

int vz_cmd_plot(int argc, char **argv) {
    plot_ctx p = {0};
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(USAGE, stdout);
            return 0;
        } else if (strcmp(argv[i], "--term") == 0) p.term = true;
        else if (strcmp(argv[i], "--out") == 0 || strcmp(argv[i], "-o") == 0) {
            if (i + 1 >= argc) mp_usage_error("plot", "%s needs a directory", argv[i]);
            p.out = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) mp_usage_error("plot", "unknown option '%s'", argv[i]);
        else if (p.dir) mp_usage_error("plot", "one RUN_DIR expected, got '%s' and '%s'", p.dir, argv[i]);
        else p.dir = argv[i];
    }
    if (!p.dir) mp_usage_error("plot", "RUN_DIR is required (a run directory such as runs/tiny-poetry)");
    vz_source src;
    vz_model m;
    vz_open_run(&src, "plot", p.dir);
    vz_model_init(&m);
    vz_read_run(&src, vz_model_apply, &m, reset_model);
    vz_report_reading(&src, "plot");
    vz_model_run_label(&m, p.dir, p.label, sizeof p.label);

    const char *const probe[] = {"gnuplot", "-e", "exit", NULL}, *const cairo[] = {"gnuplot", "-e", "set terminal pngcairo", NULL};
    if (run_gnuplot(NULL, true, probe) == 127)
        MP_FAIL_HINT("gnuplot on the PATH", "install it: make deps (Debian package gnuplot-nox)", "mixpar plot: gnuplot not found");
    p.png_terminal = run_gnuplot(NULL, true, cairo) == 0 ? "pngcairo" : "png"; /* cairo draws smoother text */
    char out[4200];
    if (!p.out) {
        snprintf(out, sizeof out, "%s/plots", p.dir);
        p.out = out;
    }
    mkdirs(p.out);

    loss_figures(&p, &m);
    underflow_figure(&p, &m);
    memory_figure(&p, &m);
    timeline_figure(&p, &m);
    comm_figure(&p, &m);
    printf("%d figure%s %s, %d skipped\n", p.written, p.written == 1 ? "" : "s", p.term ? "drawn" : "written", p.skipped);
    vz_model_free(&m);
    vz_source_close(&src);
    return 0;
}
