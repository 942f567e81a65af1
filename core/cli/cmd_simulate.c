/* cmd_simulate.c: `mixpar simulate`: predicted step time and scaling efficiency of DP, ZeRO and 3D from 8 to 1,024
 * GPUs (plan/simulate.h), as a table, a TSV and a gnuplot figure; and the model checked against comm-bench. */
#include "cli/commands.h"

#include "base/error.h"
#include "base/parse.h"
#include "plan/simulate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_GPU_COUNTS = 32, MAX_POINTS = 256 };

typedef struct {
    const char *model, *cluster, *tsv, *plot, *calibrate, *title;
    bool strategy_on[SIM_NSTRATEGIES];
    int gpus[MAX_GPU_COUNTS], ngpus;
    double inter_gbs, intra_gbs; /* overrides, GB/s per GPU; 0: the preset's */
    sim_job job;
} sim_args;

static void usage(FILE *out) {
    fprintf(out,
            "usage: mixpar simulate [--model NAME] [--cluster NAME] [--strategy LIST] [--gpus LIST] [--mfu F]\n"
            "                       [--tokens-per-gpu N] [--grad-bytes 2|4] [--bucket BYTES] [--no-overlap]\n"
            "                       [--tp N] [--pp N] [--micro-batches N] [--inter-bw GB/s] [--intra-bw GB/s]\n"
            "                       [--tsv FILE] [--plot FILE.png] [--title TEXT]\n"
            "       mixpar simulate --calibrate COMM_BENCH_OUTPUT\n"
            "       mixpar simulate --list\n"
            "\n"
            "Predicts one training step per GPU count with an alpha-beta model of the cluster (plan/simulate.h, lab 26):\n"
            "compute = 6 x params x tokens / (GPUs x peak x MFU); gradients reduced in buckets by a hierarchical\n"
            "allreduce (ring in the node, ring across nodes), overlapped with backward; exposed = max(0, comm - last\n"
            "bucket - backward) + last bucket; efficiency = compute / step (1 = linear scaling). Weak scaling: each GPU\n"
            "keeps --tokens-per-gpu, so the global batch grows with the GPUs.\n"
            "\n"
            "  --model NAME       gpt2-1.5b, llama-7b (default), llama-70b or any `mixpar plan` preset\n"
            "  --cluster NAME     dgx-h100-ib (default), dgx-a100-ib, eth-100g (--list: their figures and sources)\n"
            "  --strategy LIST    dp, zero1, zero2, zero3, 3d, all (default) or a list such as dp,zero3\n"
            "  --gpus LIST        GPU counts such as 8,64,512 (default 8, 16, ..., 1024)\n"
            "  --mfu F            model FLOPs utilisation of the compute, 0 < F <= 1 (default 0.4)\n"
            "  --tokens-per-gpu N tokens each GPU processes per step (default 16384: 8 sequences of 2048)\n"
            "  --grad-bytes B     2 (bf16 gradients on the wire, default) or 4 (fp32)\n"
            "  --bucket BYTES     gradient bucket, such as 25M (default) or 0 for one bucket\n"
            "  --no-overlap       reduce the gradients after backward instead of during it\n"
            "  --tp, --pp, --micro-batches   3d's tensor-parallel size, pipeline stages, micro-batches (8, 4, 16)\n"
            "  --inter-bw, --intra-bw        replace the cluster's bandwidth per GPU between / inside nodes (GB/s)\n"
            "  --tsv FILE         the table as tab-separated values; --plot FILE.png: efficiency vs GPUs (gnuplot)\n"
            "  --calibrate FILE   output of `mixpar comm-bench --algo ring,hierarchical --ranks-per-node K` on local\n"
            "                     ranks: fits the links from the ring's alpha-beta fit, predicts every measured size of\n"
            "                     both algorithms and reports the model's error\n");
}

static double number_arg(const char *flag, const char *v, double lo, double hi) {
    double x;
    if (!parse_double(v, &x) || !(x >= lo && x <= hi))
        mp_usage_error("simulate", "%s takes a number from %g to %g, not '%s'", flag, lo, hi, v);
    return x;
}

static void parse_gpus(const char *v, sim_args *a) {
    a->ngpus = 0;
    for (const char *p = v; *p;) {
        size_t n = strcspn(p, ",");
        char item[32];
        int64_t g;
        snprintf(item, sizeof item, "%.*s", (int)(n < sizeof item - 1 ? n : sizeof item - 1), p);
        if (a->ngpus == MAX_GPU_COUNTS || !parse_i64(item, &g) || g < 1 || g > 1 << 20)
            mp_usage_error("simulate", "--gpus takes up to %d counts from 1 to 1048576 such as 8,64,512, not '%s'",
                           MAX_GPU_COUNTS, v);
        a->gpus[a->ngpus++] = (int)g;
        p += n + (p[n] == ',');
    }
    if (a->ngpus == 0) mp_usage_error("simulate", "--gpus takes counts such as 8,64,512");
}

static void parse_strategies(const char *v, sim_args *a) {
    memset(a->strategy_on, 0, sizeof a->strategy_on);
    for (const char *p = v; *p;) {
        size_t n = strcspn(p, ",");
        char item[16];
        snprintf(item, sizeof item, "%.*s", (int)(n < sizeof item - 1 ? n : sizeof item - 1), p);
        int s = sim_strategy_from_name(item);
        if (strcmp(item, "all") == 0)
            for (int k = 0; k < SIM_NSTRATEGIES; k++) a->strategy_on[k] = true;
        else if (s < 0 || n >= sizeof item)
            mp_usage_error("simulate", "--strategy takes dp, zero1, zero2, zero3, 3d, all or a list such as dp,zero3; "
                                       "not '%.*s'", (int)n, p);
        else a->strategy_on[s] = true;
        p += n + (p[n] == ',');
    }
}

static void parse_args(int argc, char **argv, sim_args *a) {
    *a = (sim_args){.model = "llama-7b", .cluster = "dgx-h100-ib", .job = sim_job_defaults()};
    for (int k = 0; k < SIM_NSTRATEGIES; k++) a->strategy_on[k] = true;
    for (int g = 8; g <= 1024; g *= 2) a->gpus[a->ngpus++] = g;
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) usage(stdout), exit(0);
        if (strcmp(f, "--list") == 0) {
            for (int c = 0; c < sim_cluster_count(); c++)
                printf("%-12s %s\n", sim_cluster_at(c)->name, sim_cluster_at(c)->about);
            printf("models: %s\n", sim_model_names());
            exit(0);
        }
        if (strcmp(f, "--no-overlap") == 0) {
            a->job.overlap = false;
            continue;
        }
        if (i + 1 >= argc) mp_usage_error("simulate", "unknown option '%s' or missing value (see --help)", f);
        const char *v = argv[++i];
        double bytes;
        if (strcmp(f, "--model") == 0) a->model = v;
        else if (strcmp(f, "--cluster") == 0) a->cluster = v;
        else if (strcmp(f, "--strategy") == 0) parse_strategies(v, a);
        else if (strcmp(f, "--gpus") == 0) parse_gpus(v, a);
        else if (strcmp(f, "--mfu") == 0) a->job.mfu = number_arg(f, v, 1e-6, 1);
        else if (strcmp(f, "--tokens-per-gpu") == 0) a->job.tokens_per_gpu = number_arg(f, v, 1, 1e9);
        else if (strcmp(f, "--grad-bytes") == 0) {
            a->job.grad_bytes = number_arg(f, v, 2, 4);
            if (a->job.grad_bytes != 2 && a->job.grad_bytes != 4) mp_usage_error("simulate", "--grad-bytes takes 2 or 4");
        } else if (strcmp(f, "--bucket") == 0) {
            if (!parse_bytes(v, &bytes) || bytes < 0 || bytes > 1e15)
                mp_usage_error("simulate", "--bucket takes a size such as 25M, 1G or 0 (one bucket), not '%s'", v);
            a->job.bucket_bytes = bytes;
        } else if (strcmp(f, "--tp") == 0) a->job.tp = (int)number_arg(f, v, 1, 1024);
        else if (strcmp(f, "--pp") == 0) a->job.pp = (int)number_arg(f, v, 1, 1024);
        else if (strcmp(f, "--micro-batches") == 0) a->job.micro_batches = (int)number_arg(f, v, 1, 1 << 20);
        else if (strcmp(f, "--inter-bw") == 0) a->inter_gbs = number_arg(f, v, 1e-3, 1e5);
        else if (strcmp(f, "--intra-bw") == 0) a->intra_gbs = number_arg(f, v, 1e-3, 1e5);
        else if (strcmp(f, "--tsv") == 0) a->tsv = v;
        else if (strcmp(f, "--plot") == 0) a->plot = v;
        else if (strcmp(f, "--title") == 0) a->title = v;
        else if (strcmp(f, "--calibrate") == 0) a->calibrate = v;
        else mp_usage_error("simulate", "unknown option '%s' (see --help)", f);
    }
}

/* ------------------------------------------------------------------ calibration against comm-bench */

typedef struct {
    int ranks, ranks_per_node;
    double ring_alpha_us, ring_beta_gbs; /* comm-bench's fit of the ring allreduce: t = alpha + size / beta */
    bool have_fit;
    int n;
    char algo[MAX_POINTS][16];
    double bytes[MAX_POINTS], seconds[MAX_POINTS];
} bench_file;

/* comm-bench's table rows (op algo size count type time algbw busbw wrong) and fit rows (op algo alpha beta sizes). */
static void read_bench(const char *path, bench_file *b) {
    FILE *f = fopen(path, "r");
    if (!f) mp_usage_error("simulate", "--calibrate: cannot read '%s'", path);
    *b = (bench_file){0};
    char line[512];
    bool in_fit = false;
    while (fgets(line, sizeof line, f)) {
        int k;
        if (sscanf(line, "# mixpar comm-bench: %d rank", &k) == 1) b->ranks = k;
        if (sscanf(line, "# hierarchical: %d ranks per node", &k) == 1) b->ranks_per_node = k;
        if (strstr(line, "# alpha-beta fit")) in_fit = true;
        char op[32], algo[32], a3[32], a4[32], a5[32], a6[32];
        int fields = sscanf(line, " %31s %31s %31s %31s %31s %31s", op, algo, a3, a4, a5, a6);
        if (line[0] == '#' || strcmp(op, "allreduce") != 0) continue;
        if (!in_fit && fields == 6 && b->n < MAX_POINTS) {
            double size, t;
            if (sscanf(line, " %*s %*s %lf %*s %*s %lf", &size, &t) != 2) continue;
            snprintf(b->algo[b->n], sizeof b->algo[0], "%s", algo);
            b->bytes[b->n] = size, b->seconds[b->n] = t * 1e-6, b->n++;
        } else if (in_fit && strcmp(algo, "ring") == 0 && fields >= 4) {
            b->have_fit = parse_double(strtok(a3, "*"), &b->ring_alpha_us) && parse_double(a4, &b->ring_beta_gbs);
        }
    }
    fclose(f);
    if (b->ranks < 2 || !b->have_fit || b->n == 0)
        mp_usage_error("simulate", "--calibrate: '%s' is not comm-bench output with a ring allreduce fit on 2 or more "
                       "ranks (run: mixpar run -n 4 -- mixpar comm-bench --algo ring,hierarchical --ranks-per-node 2 "
                       "--min 4K --max 4M > FILE)", path);
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The middle of n values (sorted in place): one noisy size on a busy machine cannot move it, as it moves a mean. */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int calibrate(const char *path) {
    bench_file b;
    read_bench(path, &b);
    const int p = b.ranks, k = b.ranks_per_node > 0 && b.ranks_per_node < p ? b.ranks_per_node : p;
    /* The ring's fit t = A + n / beta is 2(p-1) alpha + 2(p-1)/p n / B: solve for the link's alpha and B. */
    double alpha = b.ring_alpha_us * 1e-6 / (2.0 * (p - 1));
    double bw = b.ring_beta_gbs * 1e9 * 2.0 * (p - 1) / p;
    sim_cluster local = {.about = "this machine's ranks, fitted from comm-bench", .gpus_per_node = k,
                         .intra_bw = bw, .intra_alpha = alpha, .inter_bw = bw, .inter_alpha = alpha};
    snprintf(local.name, sizeof local.name, "local");
    printf("# mixpar simulate --calibrate %s\n", path);
    printf("# %d ranks; link fitted from the ring allreduce: alpha = %.2f us per message, B = %.3f GB/s per rank\n", p,
           alpha * 1e6, bw / 1e9);
    printf("# hierarchical modelled as %d node%s of %d: ring(%d, n) + ring(%d, n/%d) on the same link%s\n",
           (p + k - 1) / k, (p + k - 1) / k == 1 ? "" : "s", k, k, (p + k - 1) / k, k,
           p % k ? " (the model assumes full nodes; this run has a smaller last node)" : "");
    printf("# ring: the fit's own residual; hierarchical: a prediction from the ring's fit alone\n#\n");
    printf("# %-12s %12s %14s %14s %9s\n", "algo", "size(B)", "measured(us)", "model(us)", "error(%)");
    double sum_err[2] = {0, 0}, errs[2][MAX_POINTS];
    int count[2] = {0, 0};
    for (int i = 0; i < b.n; i++) {
        int which = strcmp(b.algo[i], "ring") == 0 ? 0 : strcmp(b.algo[i], "hierarchical") == 0 ? 1 : -1;
        if (which < 0) continue;
        double model = which == 0 ? sim_ring_allreduce_s(p, b.bytes[i], alpha, bw) : sim_allreduce_s(&local, p, b.bytes[i]);
        double err = (model - b.seconds[i]) / b.seconds[i] * 100;
        printf("  %-12s %12.0f %14.2f %14.2f %+9.1f\n", b.algo[i], b.bytes[i], b.seconds[i] * 1e6, model * 1e6, err);
        sum_err[which] += fabs(err), errs[which][count[which]++] = fabs(err);
    }
    static const char *const NAMES[2] = {"ring", "hierarchical"};
    for (int w = 0; w < 2; w++)
        if (count[w])
            printf("# %s: median |error| %.1f%%, mean %.1f%% over %d sizes\n", NAMES[w], median(errs[w], count[w]),
                   sum_err[w] / count[w], count[w]);
    if (!count[1]) printf("# no hierarchical rows: add --algo ring,hierarchical --ranks-per-node K to comm-bench\n");
    return 0;
}

/* ------------------------------------------------------------------ the scaling table */

typedef struct {
    int strategy, gpus;
    sim_result r;
} row;

/* The table, for people (aligned, '!' after states that do not fit a GPU) or for gnuplot (tab-separated, a "fits"
 * column of 1 or 0). */
static void write_rows(FILE *out, const row *rows, int n, const sim_cluster *c, bool tsv) {
    static const char *const COLUMNS[] = {"strategy", "gpus", "nodes", "compute(ms)", "comm(ms)", "exposed(ms)",
                                          "bubble(ms)", "step(ms)", "efficiency", "states(GB)", "buckets", "fits"};
    if (tsv) {
        for (int k = 0; k < 12; k++) fprintf(out, "%s%s", k ? "\t" : "#", COLUMNS[k]);
        fprintf(out, "\n");
    } else {
        fprintf(out, "# %-9s %6s %6s %12s %10s %12s %10s %10s %10s %12s %8s\n", COLUMNS[0], COLUMNS[1], COLUMNS[2],
                COLUMNS[3], COLUMNS[4], COLUMNS[5], COLUMNS[6], COLUMNS[7], COLUMNS[8], COLUMNS[9], COLUMNS[10]);
    }
    for (int i = 0; i < n; i++) {
        const row *w = &rows[i];
        int nodes = (w->gpus + c->gpus_per_node - 1) / c->gpus_per_node;
        const char *name = sim_strategy_name((sim_strategy)w->strategy);
        if (!w->r.feasible) {
            if (!tsv) fprintf(out, "  %-9s %6d %6d   (not a multiple of tp x pp)\n", name, w->gpus, nodes);
            continue;
        }
        bool fits = !(c->gpu_bytes > 0 && w->r.state_bytes > c->gpu_bytes);
        double ms[5] = {w->r.compute_s * 1e3, w->r.comm_s * 1e3, w->r.exposed_s * 1e3, w->r.bubble_s * 1e3,
                        w->r.step_s * 1e3};
        if (tsv)
            fprintf(out, "%s\t%d\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.5f\t%.3f\t%d\t%d\n", name, w->gpus, nodes, ms[0],
                    ms[1], ms[2], ms[3], ms[4], w->r.efficiency, w->r.state_bytes / 1e9, w->r.buckets, fits);
        else
            fprintf(out, "  %-9s %6d %6d %12.2f %10.2f %12.2f %10.2f %10.2f %10.3f %11.1f%s %8d\n", name, w->gpus, nodes,
                    ms[0], ms[1], ms[2], ms[3], ms[4], w->r.efficiency, w->r.state_bytes / 1e9, fits ? " " : "!",
                    w->r.buckets);
    }
}

/* efficiency vs GPUs, one line per strategy, through gnuplot. */
static void plot(const char *path, const char *title, const row *rows, int n) {
    FILE *g = popen("gnuplot", "w");
    if (!g) mp_usage_error("simulate", "--plot needs gnuplot on PATH ('make deps' installs it)");
    fprintf(g, "set terminal pngcairo size 900,560 font ',11'\nset output '%s'\nset title \"%s\" noenhanced\n"
               "set logscale x 2\nset xlabel 'GPUs'\nset ylabel 'scaling efficiency (compute / step)'\n"
               "set yrange [0:1.05]\nset key bottom left\nset grid\nplot ", path, title);
    bool first = true;
    for (int s = 0; s < SIM_NSTRATEGIES; s++) {
        bool any = false;
        for (int i = 0; i < n; i++) any |= rows[i].strategy == s && rows[i].r.feasible;
        if (!any) continue;
        fprintf(g, "%s'-' using 1:2 with linespoints lw 2 title '%s'", first ? "" : ", ", sim_strategy_name((sim_strategy)s));
        first = false;
    }
    fprintf(g, "\n");
    for (int s = 0; s < SIM_NSTRATEGIES; s++) {
        bool any = false;
        for (int i = 0; i < n; i++)
            if (rows[i].strategy == s && rows[i].r.feasible) fprintf(g, "%d %.6f\n", rows[i].gpus, rows[i].r.efficiency), any = true;
        if (any) fprintf(g, "e\n");
    }
    int rc = pclose(g);
    if (rc != 0) {
        fprintf(stderr, "mixpar simulate: gnuplot failed (exit status %d) writing %s: is gnuplot installed ('make deps')?\n",
                rc, path);
        exit(EXIT_BAD_INPUT);
    }
    printf("# figure: %s\n", path);
}

int cmd_simulate(int argc, char **argv) {
    sim_args a;
    parse_args(argc, argv, &a);
    if (a.calibrate) return calibrate(a.calibrate);
    sim_cluster c;
    plan_model m;
    if (!sim_cluster_find(a.cluster, &c))
        mp_usage_error("simulate", "unknown cluster '%s' (dgx-h100-ib, dgx-a100-ib, eth-100g; --list shows them)", a.cluster);
    if (!sim_model_find(a.model, &m)) mp_usage_error("simulate", "unknown model '%s' (models: %s)", a.model, sim_model_names());
    if (a.inter_gbs > 0) c.inter_bw = a.inter_gbs * 1e9;
    if (a.intra_gbs > 0) c.intra_bw = a.intra_gbs * 1e9;
    sim_job j = a.job;
    j.params = (double)plan_model_params(&m);
    printf("# mixpar simulate: %s (%.3g params) on %s: %s\n", m.name, j.params, c.name, c.about);
    printf("# links per GPU: intra-node %.1f GB/s, %.1f us; inter-node %.2f GB/s, %.1f us; peak %.0f TFLOP/s, %.0f GB\n",
           c.intra_bw / 1e9, c.intra_alpha * 1e6, c.inter_bw / 1e9, c.inter_alpha * 1e6, c.peak_flops / 1e12,
           c.gpu_bytes / 1e9);
    printf("# compute per step = 6 x params x tokens / (GPUs x peak x MFU) = 6 x %.3g x %.0f / (%.0f TFLOP/s x %.2f) = "
           "%.1f ms per GPU (tokens = %.0f per GPU x GPUs)\n", j.params, j.tokens_per_gpu, c.peak_flops / 1e12, j.mfu,
           6 * j.params * j.tokens_per_gpu / (c.peak_flops * j.mfu) * 1e3, j.tokens_per_gpu);
    printf("# gradients %s on the wire, buckets of %.0f MiB%s, %s; 3d: tp %d, pp %d, %d micro-batches; states: "
           "bf16 + fp32 Adam, 16 bytes/param sharded by the strategy ('!': more than a GPU holds)\n",
           j.grad_bytes == 2 ? "bf16" : "fp32", j.bucket_bytes / (1 << 20), j.bucket_bytes > 0 ? "" : " (one bucket)",
           j.overlap ? "overlapped with backward" : "after backward (no overlap)", j.tp, j.pp, j.micro_batches);
    static row rows[SIM_NSTRATEGIES * MAX_GPU_COUNTS];
    int n = 0;
    for (int s = 0; s < SIM_NSTRATEGIES; s++) {
        if (!a.strategy_on[s]) continue;
        for (int g = 0; g < a.ngpus; g++) {
            j.strategy = (sim_strategy)s;
            j.gpus = a.gpus[g];
            rows[n] = (row){s, j.gpus, {0}};
            sim_step(&c, &m, &j, &rows[n].r);
            n++;
        }
    }
    write_rows(stdout, rows, n, &c, false);
    if (a.tsv) {
        FILE *f = fopen(a.tsv, "w");
        if (!f) mp_usage_error("simulate", "--tsv: cannot write '%s'", a.tsv);
        write_rows(f, rows, n, &c, true);
        fclose(f);
    }
    if (a.plot) {
        char title[256];
        snprintf(title, sizeof title, "%s", a.title ? a.title : "");
        if (!a.title) snprintf(title, sizeof title, "%s on %s: scaling efficiency (MFU %.2f, %.0f tokens/GPU)", m.name, c.name, j.mfu, j.tokens_per_gpu);
        plot(a.plot, title, rows, n);
    }
    return 0;
}
