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
    "       mixpar plot RUN_A RUN_B [RUN_C ...] [--out DIR] [--term]   (runs side by side)\n"
    "\n"
    "Figures of a run from its event files, drawn by gnuplot:\n"
    "  loss            training and validation loss over steps\n"
    "  loss_scale      the loss scale over steps, skipped steps marked\n"
    "  underflow       per layer, the share of gradient values each format rounds to 0\n"
    "  memory          bytes by tag: measured peak beside the planner's prediction\n"
    "  memory_time     device memory over steps: each rank's total, rank 0's tags, the capacity of\n"
    "                  train.max_memory when the run had one\n"
    "  timeline        the last three steps of every rank: compute spans and comm calls\n"
    "  pipeline        under pipeline parallel: each stage's forward and backward of every micro-batch of\n"
    "                  the newest whole step, the bubble measured per stage against (p-1)/(vm+p-1)\n"
    "  comm_bandwidth  bus bandwidth against message size, per collective and algorithm\n"
    "Each figure is NAME.png and NAME.svg, drawn from NAME.dat by NAME.gp (all in --out). A figure\n"
    "whose events the run lacks (comm in a single-rank run, say) is skipped with a note.\n"
    "\n"
    "With two or more runs (up to 8) the figures overlay them, each labelled by its run directory, recipe,\n"
    "world size and strategy (from its run header); each data file holds one block per run (gnuplot's\n"
    "`index`), in the order given:\n"
    "  loss            every run's training and validation loss\n"
    "  loss_gap        each later run's loss minus run A's, at the steps both have\n"
    "  loss_scale      every run's loss scale and skipped steps\n"
    "  flushed_steps   each run's share of nonzero gradients flushed to 0, all layers, step by step\n"
    "  flushed         per layer, the share of nonzero gradients each fp16/bf16 run really flushed to 0 in\n"
    "                  backward (rounding events, as mixpar precision flushed sums them)\n"
    "  memory          per tag, each run's measured peak (the largest over its ranks)\n"
    "  memory_time     each run's device memory over steps, per rank\n"
    "The timeline, pipeline and comm figures stay per run (mixpar plot RUN_DIR).\n"
    "\n"
    "options:\n"
    "  --out DIR   where to write (default RUN_DIR/plots; with several runs RUN_A/plots/compare)\n"
    "  --term      draw the figures in the terminal (gnuplot's dumb terminal) instead of PNG/SVG\n"
    "  --throughput FLOPS:PEAK  also draw `throughput`: rank 0's tokens/s over steps, and on the right axis the\n"
    "              MFU that rate means, tokens/s x ranks x FLOPS (model FLOPs a token) / PEAK (FLOP/s of all\n"
    "              ranks; PEAK 0: no MFU axis). mixpar report passes them (one run only)\n"
    "  --help      this text\n"
    "\n"
    "examples: mixpar plot viz/samples/tiny-poetry --out /tmp/poetry-plots\n"
    "          mixpar plot viz/samples/synthetic-addition viz/samples/fp16-scale1 --out /tmp/fp32-vs-fp16\n";

typedef struct {
    const char *dir, *out;
    char label[400];          /* the titles' run: directory, config, recipe, world, strategy */
    bool term;
    const char *png_terminal; /* "pngcairo" or "png" */
    int written, skipped;
    double flops_per_token, peak; /* --throughput: model FLOPs a token, FLOP/s of all ranks (0: no MFU axis) */
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

static const char *gp_quote(const char *s, char *buf, size_t n);
static void cat(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

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

/* --throughput: tokens/s from loss.dat (rank 0's rate: each rank reads its own tokens, so the run's is world
 * times it) and the MFU it means on the right axis. */
static void throughput_figure(plot_ctx *p, const vz_model *m) {
    if (!(p->flops_per_token > 0)) return;
    if (vz_model_nsteps(m) == 0) {
        skip(p, "throughput", "no step events");
        return;
    }
    int world = m->world > 0 ? m->world : 1;
    char mfu[512] = "";
    if (p->peak > 0)
        snprintf(mfu, sizeof mfu, ", '' using 1:($7 * %d * %.9g / %.9g * 100) axes x1y2 with lines lw 1 dt 2 "
                 "title 'MFU (right axis)'", world, p->flops_per_token, p->peak);
    figure(p, "throughput", "loss.dat",
           "set title '%s: throughput'\nset xlabel 'step'\nset ylabel 'tokens/s per rank'\n%s"
           "plot 'loss.dat' using 1:7 with linespoints pt 7 ps 0.6 lw 1.5 title 'tokens/s (rank 0)'%s\n",
           p->label, p->peak > 0 ? "set y2label 'MFU (%)'\nset y2tics\nset ytics nomirror\n" : "", mfu);
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

/* Device memory over steps: each rank's total (the tags summed, host left out) and, when the run had one, the
 * capacity of train.max_memory. With several runs, one block per (run, rank). */
static bool memory_time_block(FILE *f, const vz_model *m, int rank) {
    size_t n = vz_model_mem_samples(m, rank);
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++) {
        const vz_mem_sample *s = vz_model_mem_sample(m, rank, i);
        double total = 0;
        for (int t = 0; t < VZ_NTAGS; t++)
            if (t != VZ_TAG_HOST) total += s->current[t];
        fprintf(f, "%lld %.6g", s->step, total / 1e6);
        for (int t = 0; t < VZ_NTAGS; t++) fprintf(f, " %.6g", s->current[t] / 1e6);
        fprintf(f, "\n");
    }
    fprintf(f, "\n\n");
    return true;
}

static void memory_time_figure(plot_ctx *p, const vz_model *const *ms, const char *const *labels, int nruns) {
    FILE *f = NULL;
    char plot[8192] = "", q[900];
    int block = 0;
    double cap = 0;
    for (int r = 0; r < nruns; r++) {
        for (int k = 0; k < vz_model_world(ms[r]) && k < VZ_MAX_RANKS; k++) {
            if (vz_model_mem_samples(ms[r], k) == 0) continue;
            if (!f) {
                f = open_out(p, "memory_time.dat");
                fprintf(f, "# step total_MB then MB by tag: param grad master optim act comm other host   (mem events; one "
                           "block per %srank; total leaves out host)\n", nruns > 1 ? "run and " : "");
            }
            if (nruns > 1) fprintf(f, "# run %d: %s, rank %d\n", r + 1, labels[r], k);
            else fprintf(f, "# rank %d\n", k);
            memory_time_block(f, ms[r], k);
            gp_quote(nruns > 1 ? labels[r] : "", q, sizeof q);
            cat(plot, sizeof plot, "%s'memory_time.dat' index %d using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc %d dt %d title '%s%srank %d total'",
                block ? ", " : "", block, nruns > 1 ? r + 1 : k + 1, nruns > 1 ? k + 1 : 1, q, nruns > 1 ? ", " : "", k);
            if (nruns == 1 && k == 0) /* one run: rank 0's tags as well */
                for (int t = 0; t < VZ_NTAGS; t++) {
                    if (t == VZ_TAG_HOST) continue;
                    bool any = false;
                    for (size_t i = 0; i < vz_model_mem_samples(ms[r], k) && !any; i++)
                        any = vz_model_mem_sample(ms[r], k, i)->current[t] > 0;
                    if (any)
                        cat(plot, sizeof plot, ", '' index %d using 1:%d with lines lw 1.5 dt 2 lc %d title 'rank 0 %s'", block,
                            3 + t, 3 + t, VZ_TAG_NAMES[t]);
                }
            block++;
        }
        if (ms[r]->max_memory > cap) cap = ms[r]->max_memory;
    }
    if (!f) {
        skip(p, "memory_time", nruns > 1 ? "no run has mem events" : "no mem events");
        return;
    }
    close_out(f, p, "memory_time.dat");
    char capline[160] = "";
    if (cap > 0) snprintf(capline, sizeof capline, ", %.6g with lines lw 3 lc rgb 'black' title 'capacity (train.max_memory)'", cap / 1e6);
    figure(p, "memory_time", "memory_time.dat",
           "set title '%s: device memory over steps'\nset xlabel 'step'\nset ylabel 'MB (10^6 bytes)'\nset yrange [0:*]\n"
           "set offsets 0, 0, graph 0.08, 0\n" /* room above the capacity line */
           "%s\nplot %s%s\n",
           p->label, nruns > 1 ? "set key bottom right box opaque" : "set key outside right top", plot, capline);
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

/* Pipeline parallel: per stage, the forward and backward of each micro-batch of the newest whole step on one
 * time axis (the ranks' clocks aligned), labelled with the micro-batch; the title gives the bubble measured
 * per stage against what the schedule's order implies and (p-1)/(vm+p-1). Drawn only for such runs. */
static void pipeline_figure(plot_ctx *p, const vz_model *m) {
    long long step = vz_model_pipeline_step(m, -1);
    if (step < 0) return;
    int stages = m->pp_stages;
    double t_lo = INFINITY;
    size_t idx[4096];
    for (int st = 0; st < stages; st++) {
        int r = vz_model_stage_rank(m, st), n = vz_model_pipeline_spans(m, st, step, idx, 4096);
        if (r < 0) continue; /* no rank of this stage has written a span */
        for (int i = 0; i < n; i++) {
            double t0 = ((const vz_span *)vz_ring_at(&m->ranks[r].spans, idx[i]))->t0 + vz_model_clock_offset(m, r);
            if (t0 < t_lo) t_lo = t0;
        }
    }
    FILE *f = open_out(p, "pipeline.dat");
    fprintf(f, "# stage t0_ms t1_ms colour micro chunk   (step %lld; ms from its first span; colour 1 forward, 2 backward;\n"
               "# rows in the order each stage ran them)\n", step);
    char measured[512] = "";
    size_t used = 0;
    double order = NAN, formula = NAN;
    for (int st = 0; st < stages; st++) {
        int r = vz_model_stage_rank(m, st), n = vz_model_pipeline_spans(m, st, step, idx, 4096);
        if (r < 0) continue; /* no rank of this stage has written a span */
        double off = vz_model_clock_offset(m, r);
        for (int i = 0; i < n; i++) {
            const vz_span *sp = vz_ring_at(&m->ranks[r].spans, idx[i]);
            fprintf(f, "%d %.6f %.6f %d %d %d\n", st, (sp->t0 + off - t_lo) * 1e3, (sp->t1 + off - t_lo) * 1e3,
                    sp->kind == VZ_SPAN_FORWARD ? 1 : 2, sp->micro, sp->chunk);
        }
        const vz_pipeline_step *ps = vz_model_stage_pipeline(m, st, step);
        if (ps && used < sizeof measured - 32) {
            used += (size_t)snprintf(measured + used, sizeof measured - used, " s%d %.0f%%", st, 100 * ps->bubble);
            order = ps->bubble_schedule, formula = ps->bubble_formula;
        }
    }
    close_out(f, p, "pipeline.dat");
    int vm = (m->pp_chunks > 0 ? m->pp_chunks : 1) * m->pp_micro_batches;
    if (!isfinite(formula) && vm > 0) formula = (double)(stages - 1) / (vm + stages - 1);
    char ytics[2048] = "";
    used = 0;
    for (int st = 0; st < stages && used < sizeof ytics - 48; st++)
        used += (size_t)snprintf(ytics + used, sizeof ytics - used, "%s\"stage %d (rank %d)\" %d", st ? ", " : "", st,
                                 vz_model_stage_rank(m, st), st);
    figure(p, "pipeline", "pipeline.dat",
           "set title '%s: pipeline schedule, step %lld (%s, %d stages x %d micro-batches%s)' . \"\\n\" . 'bubble: (p-1)/(vm+p-1) = "
           "%.0f%%, the schedule''s order %.0f%%, measured%s%s'\n"
           "set xlabel 'milliseconds from the step''s first span%s'\nset ytics (%s)\nset yrange [%g:-0.6]\n"
           "set style fill solid 0.85 border lc rgb 'white'\nunset grid\nset grid xtics\n"
           "set key outside right top vertical samplen 2\n"
           "plot 'pipeline.dat' using (($2+$3)/2):1:(($3-$2)/2):(0.35):4 with boxxyerror lc variable notitle, "
           "'' using (($2+$3)/2):1:(sprintf('%%d', $5)) with labels notitle, "
           "keyentry with boxes lc 1 title 'forward (micro-batch k)', keyentry with boxes lc 2 title 'backward', "
           "keyentry with boxes lc rgb 'white' title 'gaps: the bubble'\n",
           p->label, step, m->pp_schedule, stages, m->pp_micro_batches,
           m->pp_chunks > 1 ? ", interleaved chunks" : "", 100 * formula, 100 * order, measured[0] ? "" : " -", measured,
           vz_model_clocks_aligned(m) ? ", rank clocks aligned" : "", ytics, stages - 1 + 0.6);
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

/* ---------------------------------------------------------------- runs side by side */

enum { PLOT_MAX_RUNS = 8 };

typedef struct {
    const char *dir;
    vz_source src;
    vz_model m;
    char label[400]; /* "ddp-2 (synthetic-addition, fp32, 2 ranks, DDP)" */
} plot_run;

/* s inside a gnuplot single-quoted string: a quote is doubled. */
static const char *gp_quote(const char *s, char *buf, size_t n) {
    size_t o = 0;
    for (; *s && o + 3 < n; s++) {
        if (*s == '\'') buf[o++] = '\'';
        buf[o++] = *s;
    }
    buf[o] = '\0';
    return buf;
}

/* Appends to a plot command being built. */
static void cat(char *buf, size_t n, const char *fmt, ...) {
    size_t used = strlen(buf);
    if (used + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, n - used, fmt, ap);
    va_end(ap);
}

static void compare_loss(plot_ctx *p, plot_run *runs, int n) {
    FILE *f = open_out(p, "loss.dat"), *fv = NULL;
    fprintf(f, "# step loss lr scale skipped grad_norm tokens_per_s   (rank 0's step events; one block per run)\n");
    char plot[8192] = "", scale_plot[8192] = "", q[900];
    int blocks = 0, val_blocks = 0;
    double lo = INFINITY, hi = 0;
    for (int r = 0; r < n; r++) {
        const vz_model *m = &runs[r].m;
        size_t steps = vz_model_nsteps(m);
        if (steps == 0) {
            printf("loss: %s has no step events; left out\n", runs[r].dir);
            continue;
        }
        fprintf(f, "# run %d: %s\n", r + 1, runs[r].label);
        for (size_t i = 0; i < steps; i++) {
            const vz_step *s = vz_model_step(m, i);
            fprintf(f, "%lld %.9g %.9g %.9g %d %.9g %.9g\n", s->step, s->loss, s->lr, s->scale, s->skipped ? 1 : 0,
                    s->grad_norm, s->tokens_per_s);
        }
        fprintf(f, "\n\n");
        gp_quote(runs[r].label, q, sizeof q);
        cat(plot, sizeof plot, "%s'loss.dat' index %d using 1:2 with lines lw 1.5 lc %d title '%s: train'", blocks ? ", " : "",
            blocks, r + 1, q);
        cat(scale_plot, sizeof scale_plot,
            "%s'loss.dat' index %d using 1:4 with steps lw 2 lc %d title '%s', '' index %d using 1:($5 > 0 ? $4 : 1/0) "
            "with points pt 2 ps 1.5 lc %d ",
            blocks ? ", " : "", blocks, r + 1, q, blocks, r + 1);
        if (m->skipped_steps) cat(scale_plot, sizeof scale_plot, "title '%s: skipped step (%lld)'", q, m->skipped_steps);
        else cat(scale_plot, sizeof scale_plot, "notitle"); /* a key entry only for a run that skipped */
        if (m->min_scale > 0 && m->min_scale < lo) lo = m->min_scale;
        if (m->max_scale > hi) hi = m->max_scale;
        blocks++;
        if (m->evals.count > 0) {
            if (!fv) {
                fv = open_out(p, "val.dat");
                fprintf(fv, "# step val_loss   (eval events; one block per run that has them)\n");
            }
            fprintf(fv, "# run %d: %s\n", r + 1, runs[r].label);
            for (size_t i = 0; i < m->evals.count; i++) {
                const vz_eval *e = vz_ring_at(&m->evals, i);
                fprintf(fv, "%lld %.9g\n", e->step, e->val_loss);
            }
            fprintf(fv, "\n\n");
            cat(plot, sizeof plot, ", 'val.dat' index %d using 1:2 with linespoints pt 7 ps 1.2 lw 2 dt 2 lc %d title '%s: validation'",
                val_blocks++, r + 1, q);
        }
    }
    close_out(f, p, "loss.dat");
    if (fv) close_out(fv, p, "val.dat");
    if (blocks == 0) {
        skip(p, "loss", "no run has step events");
        skip(p, "loss_scale", "no run has step events");
        return;
    }
    figure(p, "loss", fv ? "loss.dat, val.dat" : "loss.dat",
           "set title '%s: loss'\nset xlabel 'step'\nset ylabel 'loss (nats per token)'\nset key top right\nplot %s\n", p->label,
           plot);
    if (!(lo <= hi)) lo = hi = 1;
    double lo_k = floor(log2(lo)), hi_k = ceil(log2(hi));
    int step_k = 1;
    while ((hi_k - lo_k + 4) / step_k > 8) step_k *= 2;
    figure(p, "loss_scale", "loss.dat",
           "set title '%s: loss scale'\nset xlabel 'step'\nset ylabel 'loss scale (log2 axis)'\nset logscale y 2\n"
           "set format y '2^%%L'\nset ytics %g\nset yrange [%g:%g]\nset key top left\nplot %s\n",
           p->label, pow(2, step_k), pow(2, lo_k - 2), pow(2, hi_k + 2), scale_plot);
}

/* Per layer, each run's share of nonzero gradients flushed to 0 (rounding events' run totals). */
static void compare_flushed(plot_ctx *p, plot_run *runs, int n) {
    int lo = 1 << 30, hi = -(1 << 30), with = 0;
    for (int r = 0; r < n; r++) {
        const vz_model *m = &runs[r].m;
        if (!vz_model_has_rounding(m)) {
            printf("flushed: %s has no rounding events (%s: nothing is rounded to a low format in backward); left out\n",
                   runs[r].dir, m->precision[0] ? m->precision : "no run header");
            continue;
        }
        with++;
        if (m->round_lo < lo) lo = m->round_lo;
        if (m->round_hi > hi) hi = m->round_hi;
    }
    if (!with) {
        skip(p, "flushed", "no run has rounding events (an fp16 or bf16 run writes them)");
        return;
    }
    FILE *f = open_out(p, "flushed.dat");
    fprintf(f, "# layer name, then per run: flushed%% of the layer's nonzero gradients (NaN: the run has none)\n# runs:");
    for (int r = 0; r < n; r++)
        if (vz_model_has_rounding(&runs[r].m)) fprintf(f, " [%d] %s", r + 1, runs[r].label);
    fprintf(f, "\n");
    for (int layer = lo; layer <= hi; layer++) {
        char name[24] = "";
        for (int r = 0; r < n && !name[0]; r++)
            if (vz_model_rounding_total(&runs[r].m, layer)) vz_model_layer_name(&runs[r].m, layer, name, sizeof name);
        if (!name[0]) continue;
        fprintf(f, "%d ", layer);
        quoted(f, name);
        for (int r = 0; r < n; r++) {
            if (!vz_model_has_rounding(&runs[r].m)) continue;
            const vz_rounding_total *t = vz_model_rounding_total(&runs[r].m, layer);
            if (t && t->nonzero > 0) fprintf(f, " %.6g", vz_share_pct(t->flushed, t->nonzero));
            else fprintf(f, " NaN");
        }
        fprintf(f, "\n");
    }
    close_out(f, p, "flushed.dat");
    char plot[8192] = "", q[900];
    int col = 3;
    for (int r = 0; r < n; r++) {
        if (!vz_model_has_rounding(&runs[r].m)) continue;
        gp_quote(runs[r].label, q, sizeof q);
        cat(plot, sizeof plot, "%s%s using %d%s lc %d title '%s'", col > 3 ? ", " : "", col > 3 ? "''" : "'flushed.dat'", col,
            col == 3 ? ":xtic(2)" : "", r + 1, q);
        col++;
    }
    figure(p, "flushed", "flushed.dat",
           "set title '%s: gradients flushed to 0 in backward, per layer (rounding events, run totals)'\n"
           "set ylabel '%% of the layer''s nonzero gradient values'\nset style data histograms\n"
           "set style histogram clustered gap 1\nset style fill solid 0.8 border -1\nset xtics rotate by -30\nset yrange [0:*]\n"
           "set key top right\nplot %s\n",
           p->label, plot);
}

/* Each later run's loss minus run A's, at the steps both have (runs on the same batches: the gap is what the
 * precision or the strategy changed). Skipped when no step lines up. */
static void compare_loss_gap(plot_ctx *p, plot_run *runs, int n) {
    const vz_model *a = &runs[0].m;
    size_t na = vz_model_nsteps(a);
    FILE *f = NULL;
    char plot[8192] = "", q[900], qa[900];
    int blocks = 0;
    const char *slash = strrchr(runs[0].dir, '/'), *base = slash && slash[1] ? slash + 1 : runs[0].dir;
    gp_quote(base, qa, sizeof qa); /* run A by its directory's name */
    for (int r = 1; r < n; r++) {
        const vz_model *m = &runs[r].m;
        size_t nm = vz_model_nsteps(m), i = 0, j = 0, lines = 0;
        for (; i < na && j < nm;) { /* both in step order: a merge on the step number */
            const vz_step *sa = vz_model_step(a, i), *sm = vz_model_step(m, j);
            if (sa->step < sm->step) i++;
            else if (sm->step < sa->step) j++;
            else {
                if (!f) {
                    f = open_out(p, "loss_gap.dat");
                    fprintf(f, "# step loss_minus_run_A   (run A: %s; one block per later run, at the steps both have)\n", runs[0].label);
                }
                if (!lines++) fprintf(f, "# run %d: %s\n", r + 1, runs[r].label);
                fprintf(f, "%lld %.9g\n", sa->step, sm->loss - sa->loss);
                i++, j++;
            }
        }
        if (!lines) {
            printf("loss_gap: %s has no step in common with %s; left out\n", runs[r].dir, runs[0].dir);
            continue;
        }
        fprintf(f, "\n\n");
        gp_quote(runs[r].label, q, sizeof q);
        cat(plot, sizeof plot, "%s'loss_gap.dat' index %d using 1:2 with lines lw 1.5 lc %d title '%s'", blocks ? ", " : "", blocks,
            r + 1, q);
        blocks++;
    }
    if (!f) {
        if (n > 1) skip(p, "loss_gap", "no later run has a step in common with run A");
        return;
    }
    close_out(f, p, "loss_gap.dat");
    figure(p, "loss_gap", "loss_gap.dat",
           "set title '%s: loss minus %s''s, step by step'\nset xlabel 'step'\nset ylabel 'loss difference (nats per token)'\n"
           "set key below\nset xzeroaxis lt -1 dt 2\nplot %s\n",
           p->label, qa, plot);
}

/* Over the steps, each run's share of nonzero gradients flushed to 0, all layers together (its rounding events
 * step by step; `mixpar precision flushed --steps` prints the same). A log axis: 0 is drawn at 1e-5 %. */
static void compare_flushed_steps(plot_ctx *p, plot_run *runs, int n) {
    FILE *f = NULL;
    char plot[8192] = "", q[900];
    int blocks = 0;
    for (int r = 0; r < n; r++) {
        const vz_model *m = &runs[r].m;
        if (!vz_model_has_rounding(m)) continue;
        if (!f) {
            f = open_out(p, "flushed_steps.dat");
            fprintf(f, "# step flushed%%   (all layers' flushed / nonzero gradient values at that step; one block per run)\n");
        }
        fprintf(f, "# run %d: %s\n", r + 1, runs[r].label);
        size_t count = vz_model_nroundings(m);
        for (size_t i = 0; i < count;) {
            const vz_rounding *first = vz_model_rounding_at(m, i);
            double flushed = 0, nonzero = 0;
            for (; i < count && vz_model_rounding_at(m, i)->step == first->step; i++)
                flushed += vz_model_rounding_at(m, i)->flushed, nonzero += vz_model_rounding_at(m, i)->nonzero;
            if (nonzero > 0) fprintf(f, "%lld %.6g\n", first->step, vz_share_pct(flushed, nonzero));
        }
        fprintf(f, "\n\n");
        gp_quote(runs[r].label, q, sizeof q);
        cat(plot, sizeof plot, "%s'flushed_steps.dat' index %d using 1:($2 > 0 ? $2 : 1e-5) with linespoints lw 2 pt 7 ps 0.6 "
            "lc %d title '%s'", blocks ? ", " : "", blocks, r + 1, q);
        blocks++;
    }
    if (!f) {
        skip(p, "flushed_steps", "no run has rounding events (an fp16 or bf16 run writes them)");
        return;
    }
    close_out(f, p, "flushed_steps.dat");
    figure(p, "flushed_steps", "flushed_steps.dat",
           "set title '%s: flushed to 0 in backward, all layers, per step'\n"
           "set xlabel 'step'\nset ylabel '%% of nonzero gradients (log; 0 drawn at 1e-5)'\nset logscale y 10\n"
           "set format y '10^%%L'\nset yrange [1e-5:100]\nset key below\nplot %s\n",
           p->label, plot);
}

static void compare_memory(plot_ctx *p, plot_run *runs, int n) {
    double peak[PLOT_MAX_RUNS][VZ_NTAGS] = {{0}};
    int with = 0;
    bool has[PLOT_MAX_RUNS] = {0};
    for (int r = 0; r < n; r++) {
        const vz_model *m = &runs[r].m;
        for (int k = 0; k < vz_model_world(m); k++) {
            const vz_mem *mem = &m->ranks[k].mem;
            if (!mem->valid) continue;
            has[r] = true;
            for (int t = 0; t < VZ_NTAGS; t++)
                if (mem->peak[t] > peak[r][t]) peak[r][t] = mem->peak[t];
        }
        if (has[r]) with++;
        else printf("memory: %s has no mem events; left out\n", runs[r].dir);
    }
    if (!with) {
        skip(p, "memory", "no run has mem events");
        return;
    }
    FILE *f = open_out(p, "memory.dat");
    fprintf(f, "# tag, then per run: peak_MB (the largest over its ranks)\n# runs:");
    for (int r = 0; r < n; r++)
        if (has[r]) fprintf(f, " [%d] %s", r + 1, runs[r].label);
    fprintf(f, "\n");
    for (int t = 0; t < VZ_NTAGS; t++) {
        fprintf(f, "%s", VZ_TAG_NAMES[t]);
        for (int r = 0; r < n; r++)
            if (has[r]) fprintf(f, " %.6g", peak[r][t] / 1e6);
        fprintf(f, "\n");
    }
    close_out(f, p, "memory.dat");
    char plot[8192] = "", q[900];
    int col = 2;
    for (int r = 0; r < n; r++) {
        if (!has[r]) continue;
        gp_quote(runs[r].label, q, sizeof q);
        cat(plot, sizeof plot, "%s%s using %d%s lc %d title '%s'", col > 2 ? ", " : "", col > 2 ? "''" : "'memory.dat'", col,
            col == 2 ? ":xtic(1)" : "", r + 1, q);
        col++;
    }
    figure(p, "memory", "memory.dat",
           "set title '%s: measured peak memory per rank by tag'\nset ylabel 'MB (10^6 bytes)'\n"
           "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\nset yrange [0:*]\n"
           "set key top right\nplot %s\n",
           p->label, plot);
}

static void reset_model(void *ctx) { vz_model_reset(ctx); }

/* gnuplot found (or stop), its PNG terminal chosen, the output directory made (default RUN_DIR/SUB). */
static void setup_output(plot_ctx *p, char *out, size_t n, const char *sub) {
    const char *const probe[] = {"gnuplot", "-e", "exit", NULL}, *const cairo[] = {"gnuplot", "-e", "set terminal pngcairo", NULL};
    if (run_gnuplot(NULL, true, probe) == 127)
        MP_FAIL_HINT("gnuplot on the PATH", "install it: make deps (Debian package gnuplot-nox)", "mixpar plot: gnuplot not found");
    p->png_terminal = run_gnuplot(NULL, true, cairo) == 0 ? "pngcairo" : "png"; /* cairo draws smoother text */
    if (!p->out) {
        snprintf(out, n, "%s/%s", p->dir, sub);
        p->out = out;
    }
    mkdirs(p->out);
}

static int plot_runs(plot_ctx *p, const char *const *dirs, int n) {
    plot_run *runs = calloc((size_t)n, sizeof *runs);
    if (!runs) MP_FAIL("memory for the runs", "mixpar plot: out of memory");
    char title[sizeof p->label] = "", q[900];
    for (int r = 0; r < n; r++) { /* every run opened and read before anything is written: bad input stops first */
        runs[r].dir = dirs[r];
        vz_open_run(&runs[r].src, "plot", dirs[r]);
        vz_model_init(&runs[r].m);
        vz_read_run(&runs[r].src, vz_model_apply, &runs[r].m, reset_model);
        vz_report_reading(&runs[r].src, "plot");
        vz_model_run_label(&runs[r].m, dirs[r], runs[r].label, sizeof runs[r].label);
        char base[260];
        snprintf(base, sizeof base, "%s", runs[r].label);
        char *paren = strstr(base, " (");
        if (paren) *paren = '\0';
        cat(title, sizeof title, "%s%s", r ? " vs " : "", gp_quote(base, q, sizeof q));
    }
    snprintf(p->label, sizeof p->label, "%s", title);
    char out[4200];
    setup_output(p, out, sizeof out, "plots/compare");
    compare_loss(p, runs, n);
    compare_loss_gap(p, runs, n);
    compare_flushed(p, runs, n);
    compare_flushed_steps(p, runs, n);
    compare_memory(p, runs, n);
    const vz_model *ms[PLOT_MAX_RUNS];
    const char *labels[PLOT_MAX_RUNS];
    for (int r = 0; r < n; r++) ms[r] = &runs[r].m, labels[r] = runs[r].label;
    memory_time_figure(p, ms, labels, n);
    skip(p, "timeline", "one run at a time (mixpar plot RUN_DIR)");
    skip(p, "comm_bandwidth", "one run at a time (mixpar plot RUN_DIR)");
    for (int r = 0; r < n; r++) {
        vz_model_free(&runs[r].m);
        vz_source_close(&runs[r].src);
    }
    free(runs);
    printf("%d figure%s %s, %d skipped\n", p->written, p->written == 1 ? "" : "s", p->term ? "drawn" : "written", p->skipped);
    return 0;
}

/* ---------------------------------------------------------------- command */

int vz_cmd_plot(int argc, char **argv) {
    plot_ctx p = {0};
    const char *dirs[PLOT_MAX_RUNS];
    int ndirs = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(USAGE, stdout);
            return 0;
        } else if (strcmp(argv[i], "--term") == 0) p.term = true;
        else if (strcmp(argv[i], "--out") == 0 || strcmp(argv[i], "-o") == 0) {
            if (i + 1 >= argc) mp_usage_error("plot", "%s needs a directory", argv[i]);
            p.out = argv[++i];
        } else if (strcmp(argv[i], "--throughput") == 0) {
            char *end = NULL;
            if (i + 1 < argc) {
                p.flops_per_token = strtod(argv[++i], &end);
                if (end && *end == ':') p.peak = strtod(end + 1, &end);
            }
            if (!end || *end || !(p.flops_per_token > 0) || !(p.peak >= 0) || !isfinite(p.flops_per_token) || !isfinite(p.peak))
                mp_usage_error("plot", "--throughput needs FLOPS:PEAK (model FLOPs a token > 0, peak FLOP/s >= 0)");
        } else if (argv[i][0] == '-' && argv[i][1]) mp_usage_error("plot", "unknown option '%s'", argv[i]);
        else if (ndirs == PLOT_MAX_RUNS) mp_usage_error("plot", "at most %d run directories side by side", PLOT_MAX_RUNS);
        else dirs[ndirs++] = argv[i];
    }
    if (ndirs > 0) p.dir = dirs[0];
    if (!p.dir) mp_usage_error("plot", "RUN_DIR is required (a run directory such as runs/tiny-poetry)");
    if (ndirs > 1) return plot_runs(&p, dirs, ndirs);
    vz_source src;
    vz_model m;
    vz_open_run(&src, "plot", p.dir);
    vz_model_init(&m);
    vz_read_run(&src, vz_model_apply, &m, reset_model);
    vz_report_reading(&src, "plot");
    vz_model_run_label(&m, p.dir, p.label, sizeof p.label);

    char out[4200];
    setup_output(&p, out, sizeof out, "plots");

    loss_figures(&p, &m);
    throughput_figure(&p, &m);
    underflow_figure(&p, &m);
    memory_figure(&p, &m);
    const vz_model *one = &m;
    const char *label = p.label;
    memory_time_figure(&p, &one, &label, 1);
    timeline_figure(&p, &m);
    pipeline_figure(&p, &m);
    comm_figure(&p, &m);
    printf("%d figure%s %s, %d skipped\n", p.written, p.written == 1 ? "" : "s", p.term ? "drawn" : "written", p.skipped);
    vz_model_free(&m);
    vz_source_close(&src);
    return 0;
}
