/* cmd_profile.c: `mixpar profile RUN_DIR`: a profiled run's top kernels on the roofline, its exposed communication,
 * the bottleneck named, MFU, and one Perfetto trace of every rank (lab 23). */
#include "cli/commands.h"

#include "base/error.h"
#include "base/parse.h"
#include "plan/perf.h"
#include "prof/roofline.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: mixpar profile RUN_DIR [--top N] [--roofline FILE] [--trace FILE]\n"
    "\n"
    "Reads a run trained with train.profile=true (profile.rank<R>.tsv, trace.rank<R>.json, events.rank<R>.jsonl)\n"
    "and prints, per step after the first: the top kernels by time with their roofline position against the sgemm\n"
    "peak and triad bandwidth measured in the run (memory- or compute-bound, fraction of the roof; a run whose\n"
    "products ran on a bf16 kernel places them, and MFU, against that kernel's peak, also measured in the run),\n"
    "the exposed communication (comm calls' time with no kernel running on the rank, from the trace), the\n"
    "bottleneck in one line, and MFU (lab 10's model FLOPs).\n"
    "\n"
    "options:\n"
    "  --top N          kernels in the table (default 8)\n"
    "  --roofline FILE  rank 0's kernels as roofline points (TSV: name, FLOP/byte, GFLOP/s, bound, ms/step)\n"
    "  --trace FILE     every rank's trace in one Chrome trace file, the ranks' clocks aligned (for Perfetto)\n";

enum { MAX_ROWS = 256, MAX_RANKS = 64 };

typedef struct {
    char kind[16], name[64];
    long long calls;
    double total, self, flops, bytes;
} table_row;

typedef struct {
    double peak_flops, bandwidth, tokens_per_step, steps;
    double products_peak_flops; /* the 16-bit kernel's peak where the products ran on one, else NAN */
    char products_kernel[32];   /* its name ("avx512-bf16"), or "" */
    int world, layers, channels, heads, kv_heads, ffn, vocab, context, tied, seq_len;
    int threads, cpus; /* each rank's threads, the machine's online CPUs (0: a table from before they were written) */
    char arch[16];
    char gemm_kernels[320]; /* which OpenBLAS kernels reached the peak (prof/gemm_kernels.h) */
    table_row rows[MAX_ROWS];
    int nrows;
} profile_table;

static int fail(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "mixpar profile: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
    return 2;
}

/* Reads RUN_DIR/profile.rank<R>.tsv; 0 on success, 1 when it is missing, 2 (with a message) when it is bad. */
static int read_table(const char *dir, int rank, profile_table *t) {
    char path[4200], line[512];
    snprintf(path, sizeof path, "%s/profile.rank%d.tsv", dir, rank);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    memset(t, 0, sizeof *t);
    t->peak_flops = t->bandwidth = t->products_peak_flops = NAN;
    int lineno = 0, bad = 0;
    while (!bad && fgets(line, sizeof line, f)) {
        lineno++;
        char key[64], value[64];
        if (line[0] == '#') {
            if (sscanf(line, "# %63s %63s", key, value) != 2) continue;
            struct { const char *key; double *d; int *i; } fields[] = {
                {"peak_flops", &t->peak_flops, NULL}, {"bandwidth", &t->bandwidth, NULL},
                {"products_peak_flops", &t->products_peak_flops, NULL},
                {"tokens_per_step", &t->tokens_per_step, NULL}, {"steps", &t->steps, NULL},
                {"world", NULL, &t->world}, {"layers", NULL, &t->layers}, {"channels", NULL, &t->channels},
                {"heads", NULL, &t->heads}, {"kv_heads", NULL, &t->kv_heads}, {"ffn", NULL, &t->ffn},
                {"vocab", NULL, &t->vocab}, {"context", NULL, &t->context}, {"tied", NULL, &t->tied},
                {"seq_len", NULL, &t->seq_len}, {"threads", NULL, &t->threads}, {"cpus", NULL, &t->cpus}};
            if (strcmp(key, "arch") == 0) snprintf(t->arch, sizeof t->arch, "%s", value);
            if (strcmp(key, "products_kernel") == 0)
                snprintf(t->products_kernel, sizeof t->products_kernel, "%s", value);
            if (strcmp(key, "gemm_kernels") == 0) /* a sentence: the rest of the line */
                snprintf(t->gemm_kernels, sizeof t->gemm_kernels, "%.*s", (int)strcspn(line + 15, "\n"), line + 15);
            for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
                if (strcmp(key, fields[i].key) != 0) continue;
                double v;
                if (!parse_double(value, &v)) bad = 1;
                else if (fields[i].d) *fields[i].d = v;
                else if (!(v >= 0 && v <= 1e9)) bad = 1; /* a count or a size: (int) of anything else is undefined */
                else *fields[i].i = (int)v;
            }
            continue;
        }
        if (strncmp(line, "kind\t", 5) == 0) continue;
        if (t->nrows == MAX_ROWS) break;
        table_row *r = &t->rows[t->nrows];
        if (sscanf(line, "%15[^\t]\t%63[^\t]\t%lld\t%lf\t%lf\t%lf\t%lf", r->kind, r->name, &r->calls, &r->total, &r->self,
                   &r->flops, &r->bytes) != 7 || r->calls < 0)
            bad = 1;
        else
            t->nrows++;
    }
    fclose(f);
    if (!t->products_kernel[0] != isnan(t->products_peak_flops) ||
        (t->products_kernel[0] && !(t->products_peak_flops > 0 && isfinite(t->products_peak_flops))))
        bad = 1; /* the two lines come together */
    if (!(t->tokens_per_step > 0 && t->tokens_per_step < 1e15)) bad = 1; /* MFU's tokens: a positive count */
    if (bad || !(t->steps >= 1) || !(t->peak_flops > 0) || !(t->bandwidth > 0)) {
        fprintf(stderr, "mixpar profile: %s: not a profile table (line %d: expected '# key value' lines with "
                        "peak_flops, bandwidth, steps and tokens_per_step (products_kernel and products_peak_flops "
                        "together or not at all), then 'kind name calls total_s self_s flops bytes' rows)\n",
                path, lineno);
        return 2;
    }
    return 0;
}

static const table_row *row_named(const profile_table *t, const char *name) {
    for (int i = 0; i < t->nrows; i++)
        if (strcmp(t->rows[i].name, name) == 0) return &t->rows[i];
    return NULL;
}

/* The communication of the profiled steps (after the first) from the rank's trace: comm seconds, and exposed
 * seconds: comm time during which no kernel ran on any of the rank's threads (prof_exposed_seconds). A call made
 * on the compute thread inside backward is exposed (backward waits for it); one on DDP's communication thread
 * while kernels run is hidden. Also the rank's clock origin (the run header's wall, from the events). */
typedef struct {
    double comm_s, exposed_s, wall;
    long comm_calls;
} comm_summary;

static cJSON *read_json(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    MP_ASSERT(text, "out of memory");
    size_t got = fread(text, 1, (size_t)n, f);
    text[got] = 0;
    fclose(f);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    return doc;
}

static double run_wall(const char *dir, int rank) {
    char path[4200];
    snprintf(path, sizeof path, "%s/events.rank%d.jsonl", dir, rank);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    char *line = NULL;
    size_t cap = 0;
    double wall = NAN;
    while (isnan(wall) && getline(&line, &cap, f) > 0) {
        cJSON *ev = cJSON_Parse(line);
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "kind"));
        if (kind && strcmp(kind, "run") == 0 && cJSON_IsNumber(cJSON_GetObjectItem(ev, "wall")))
            wall = cJSON_GetObjectItem(ev, "wall")->valuedouble;
        cJSON_Delete(ev);
    }
    free(line);
    fclose(f);
    return wall;
}

static int read_comm(const char *dir, int rank, comm_summary *out) {
    char path[4200];
    snprintf(path, sizeof path, "%s/trace.rank%d.json", dir, rank);
    cJSON *doc = read_json(path);
    cJSON *events = cJSON_GetObjectItem(doc, "traceEvents");
    if (!cJSON_IsArray(events)) {
        cJSON_Delete(doc);
        return fail("%s: %s", path, "missing or not a Chrome trace (no traceEvents array)");
    }
    int n = cJSON_GetArraySize(events);
    prof_interval *comm = malloc(((size_t)n + 1) * sizeof *comm), *kernels = malloc(((size_t)n + 1) * sizeof *kernels);
    MP_ASSERT(comm && kernels, "out of memory");
    size_t nc = 0, nk = 0;
    double after = INFINITY; /* the end of the first step: its warm-up is left out, as in the table */
    cJSON *ev;
    cJSON_ArrayForEach(ev, events) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "name"));
        cJSON *ts = cJSON_GetObjectItem(ev, "ts"), *dur = cJSON_GetObjectItem(ev, "dur");
        if (name && strcmp(name, "step") == 0 && cJSON_IsNumber(ts) && cJSON_IsNumber(dur) &&
            (ts->valuedouble + dur->valuedouble) * 1e-6 < after)
            after = (ts->valuedouble + dur->valuedouble) * 1e-6;
    }
    int steps_seen = 0;
    cJSON_ArrayForEach(ev, events) {
        const char *cat = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "cat"));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "name"));
        cJSON *ts = cJSON_GetObjectItem(ev, "ts"), *dur = cJSON_GetObjectItem(ev, "dur");
        if (!cat || !cJSON_IsNumber(ts) || !cJSON_IsNumber(dur)) continue;
        if (name && strcmp(name, "step") == 0) steps_seen++;
        prof_interval iv = {ts->valuedouble * 1e-6, (ts->valuedouble + dur->valuedouble) * 1e-6};
        if (strcmp(cat, "kernel") == 0) kernels[nk++] = iv;
        else if (strcmp(cat, "comm") == 0 && (steps_seen < 2 || iv.t0 >= after)) comm[nc++] = iv;
    }
    cJSON_Delete(doc);
    memset(out, 0, sizeof *out);
    size_t kept = 0;
    for (size_t i = 0; i < nc; i++)
        if (steps_seen < 2 || comm[i].t0 >= after) {
            comm[kept++] = comm[i];
            out->comm_s += comm[i].t1 - comm[i].t0;
        }
    out->comm_calls = (long)kept;
    out->exposed_s = prof_exposed_seconds(comm, kept, kernels, nk);
    out->wall = run_wall(dir, rank);
    free(comm);
    free(kernels);
    return 0;
}

/* Every rank's trace.rank<R>.json in one file, each rank's ts moved onto rank 0's clock by the run headers' wall. */
static int merge_traces(const char *dir, int world, const double *wall, const char *out_path) {
    cJSON *all = cJSON_CreateObject(), *events = cJSON_AddArrayToObject(all, "traceEvents");
    cJSON_AddStringToObject(all, "displayTimeUnit", "ms");
    for (int r = 0; r < world; r++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/trace.rank%d.json", dir, r);
        cJSON *doc = read_json(path);
        cJSON *list = cJSON_GetObjectItem(doc, "traceEvents");
        if (!cJSON_IsArray(list)) {
            cJSON_Delete(doc);
            return fail("%s: %s", path, "not a Chrome trace (no traceEvents array)");
        }
        double shift = isfinite(wall[r]) && isfinite(wall[0]) ? (wall[r] - wall[0]) * 1e6 : 0;
        cJSON *ev;
        while ((ev = cJSON_DetachItemFromArray(list, 0))) {
            cJSON *ts = cJSON_GetObjectItem(ev, "ts");
            if (cJSON_IsNumber(ts)) cJSON_SetNumberValue(ts, ts->valuedouble + shift);
            cJSON_AddItemToArray(events, ev);
        }
        cJSON_Delete(doc);
    }
    char *text = cJSON_PrintUnformatted(all);
    cJSON_Delete(all);
    FILE *f = fopen(out_path, "w");
    if (!f || !text) return fail("%s: %s", out_path, strerror(errno));
    fputs(text, f);
    fputc('\n', f);
    free(text);
    if (fclose(f) != 0) return fail("%s: %s", out_path, strerror(errno));
    return 0;
}

/* The roof a kernel is placed against: the products' (the 16-bit kernel's peak, where they ran on one) for the
 * matmuls, the sgemm peak's for the rest. */
static const prof_roof *roof_of(const table_row *r, const prof_roof *roof, const prof_roof *products) {
    return strncmp(r->name, "matmul_", 7) == 0 ? products : roof;
}

static int by_total(const void *a, const void *b) {
    double x = (*(const table_row *const *)a)->total, y = (*(const table_row *const *)b)->total;
    return (x < y) - (x > y);
}

int cmd_profile(int argc, char **argv) {
    const char *dir = NULL, *roof_path = NULL, *trace_path = NULL;
    long top = 8;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(USAGE, stdout);
            return 0;
        }
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--top") == 0 && has_value) {
            int64_t v;
            if (!parse_i64(argv[++i], &v) || v < 1 || v > MAX_ROWS)
                return fail("--top wants a number of kernels from 1 to 256, got '%s'%s", argv[i], "");
            top = (long)v;
        } else if (strcmp(a, "--roofline") == 0 && has_value) {
            roof_path = argv[++i];
        } else if (strcmp(a, "--trace") == 0 && has_value) {
            trace_path = argv[++i];
        } else if (a[0] == '-' || dir) {
            fprintf(stderr, "mixpar profile: unexpected argument '%s'\n\n%s", a, USAGE);
            return 2;
        } else {
            dir = a;
        }
    }
    if (!dir) {
        fprintf(stderr, "mixpar profile: which run? (a RUN_DIR trained with train.profile=true)\n\n%s", USAGE);
        return 2;
    }
    static profile_table t;
    int rc = read_table(dir, 0, &t);
    if (rc == 1)
        return fail("%s/profile.rank0.tsv is missing: train with --set train.profile=true first%s", dir, "");
    if (rc) return rc;
    if (t.world < 1 || t.world > MAX_RANKS) return fail("%s: world %s out of range", dir, "");
    prof_roof roof = {t.peak_flops, t.bandwidth}, products = roof;
    if (t.products_kernel[0]) products.peak_flops = t.products_peak_flops;
    const table_row *step = row_named(&t, "step");
    if (!step || step->calls < 1) return fail("%s: the table has no 'step' span%s", dir, "");
    double steps = (double)step->calls, step_s = step->total / steps;

    printf("profile of %s: %d rank%s, %g step%s profiled (the first, warm-up, left out when there are more)\n", dir,
           t.world, t.world > 1 ? "s" : "", steps, steps > 1 ? "s" : "");
    printf("roof measured in the run: sgemm peak %.1f GFLOP/s, triad bandwidth %.1f GB/s, ridge point %.2f FLOP/byte\n",
           roof.peak_flops / 1e9, roof.bandwidth / 1e9, prof_ridge_point(&roof));
    if (t.gemm_kernels[0]) printf("%s\n", t.gemm_kernels);
    if (t.products_kernel[0])
        printf("the products ran on the %s kernel: its bf16 peak, measured in the run, %.1f GFLOP/s (ridge point %.2f "
               "FLOP/byte), is the matmul kernels' roof and MFU's\n",
               t.products_kernel, products.peak_flops / 1e9, prof_ridge_point(&products));
    /* a model-parallel run's forwards and backwards interleave in its schedule: one "pipeline" phase (mp_step.c) */
    const bool pipeline = row_named(&t, "pipeline") != NULL;
    const char *phases[] = {pipeline ? "pipeline" : "forward", "backward", "grad_sync_wait", "optimizer"};
    printf("step %.2f ms:", step_s * 1e3);
    for (int i = 0; i < 4; i++) {
        const table_row *r = row_named(&t, phases[i]);
        if (pipeline && i == 1) continue;
        printf(" %s %.2f", phases[i], r ? r->total / steps * 1e3 : 0.0);
    }
    printf(" (ms, rank 0)\n\n");

    /* the kernels, largest total first */
    const table_row *kernels[MAX_ROWS];
    int nk = 0;
    double kernel_s = 0, bound_s[2] = {0, 0};
    int above_roof = 0;
    for (int i = 0; i < t.nrows; i++)
        if (strcmp(t.rows[i].kind, "kernel") == 0) {
            kernels[nk++] = &t.rows[i];
            kernel_s += t.rows[i].total;
        }
    qsort(kernels, (size_t)nk, sizeof *kernels, by_total);
    FILE *rf = NULL;
    if (roof_path && !(rf = fopen(roof_path, "w"))) return fail("%s: %s", roof_path, strerror(errno));
    if (rf) fprintf(rf, "# kernel\tflop_per_byte\tgflops\tbound\tms_per_step\n");
    printf("top kernels by time (rank 0), per step:\n");
    printf("%-20s %6s %8s %6s %9s %8s %10s %8s  %s\n", "kernel", "calls", "ms", "%step", "GFLOP/s", "FLOP/B",
           "roof GF/s", "of roof", "bound");
    for (int k = 0; k < nk; k++) {
        const table_row *r = kernels[k];
        prof_roofline pt;
        char why[256];
        if (!prof_roofline_point(r->flops, r->bytes, r->total, roof_of(r, &roof, &products), &pt, why, sizeof why)) {
            if (k < top) printf("%-20s (no roofline point: %s)\n", r->name, why);
            continue;
        }
        bound_s[pt.bound] += r->total;
        if (rf)
            fprintf(rf, "%s\t%.6g\t%.6g\t%s\t%.6g\n", r->name, pt.intensity, pt.achieved / 1e9, prof_bound_name(pt.bound),
                    r->total / steps * 1e3);
        if (k >= top) continue;
        above_roof += pt.fraction > 1;
        printf("%-20s %6.0f %8.3f %5.1f%% %9.2f %8.2f %10.2f %7.1f%%  %s%s\n", r->name, (double)r->calls / steps,
               r->total / steps * 1e3, 100 * r->total / step->total, pt.achieved / 1e9, pt.intensity,
               pt.attainable / 1e9, 100 * pt.fraction, prof_bound_name(pt.bound), pt.fraction > 1 ? " *" : "");
    }
    if (above_roof)
        printf("* above the roof: the roof is DRAM bandwidth and the best %s seen in the run, so a kernel whose data\n"
               "  stays in cache, or a run whose roof was measured while the machine was busy, can pass it\n",
               t.products_kernel[0] ? "bf16 product and sgemm" : "sgemm");
    if (rf) fclose(rf);
    printf("kernels: %.1f%% of the step (memory-bound %.1f%%, compute-bound %.1f%%)\n\n", 100 * kernel_s / step->total,
           100 * bound_s[PROF_MEMORY_BOUND] / step->total, 100 * bound_s[PROF_COMPUTE_BOUND] / step->total);

    /* communication, per rank, from the events */
    double wall[MAX_RANKS], exposed0 = 0;
    for (int r = 0; r < t.world; r++) {
        comm_summary cs;
        if ((rc = read_comm(dir, r, &cs))) return rc;
        wall[r] = cs.wall;
        if (r == 0) exposed0 = cs.exposed_s / steps;
        if (t.world > 1)
            printf("rank %d communication: %ld calls, %.2f ms per step, exposed (no kernel running) %.2f ms = %.1f%% "
                   "of the step\n",
                   r, cs.comm_calls, cs.comm_s / steps * 1e3, cs.exposed_s / steps * 1e3,
                   100 * cs.exposed_s / steps / step_s);
    }
    if (t.world == 1) printf("communication: none (one rank)\n");

    /* the bottleneck: the largest share of the step */
    struct { const char *what; double s; } parts[] = {
        {"memory-bound kernels", bound_s[PROF_MEMORY_BOUND] / steps},
        {"compute-bound kernels", bound_s[PROF_COMPUTE_BOUND] / steps},
        {"exposed communication", exposed0},
        {"outside the kernels (optimizer, framework)", fmax(0, step_s - kernel_s / steps - exposed0)},
    };
    int worst = 0;
    for (int i = 1; i < 4; i++)
        if (parts[i].s > parts[worst].s) worst = i;
    printf("bottleneck: %s, %.0f%% of the step", parts[worst].what, 100 * parts[worst].s / step_s);
    if (worst < 2) {
        prof_bound want = worst == 0 ? PROF_MEMORY_BOUND : PROF_COMPUTE_BOUND;
        for (int k = 0; k < nk; k++) {
            prof_roofline pt;
            if (prof_roofline_point(kernels[k]->flops, kernels[k]->bytes, kernels[k]->total,
                                    roof_of(kernels[k], &roof, &products), &pt, NULL, 0) &&
                pt.bound == want) {
                printf("; the largest: %s at %.0f%% of its roof", kernels[k]->name, 100 * pt.fraction);
                break;
            }
        }
    }
    printf("\n");
    if (trace_path) {
        if ((rc = merge_traces(dir, t.world, wall, trace_path))) return rc;
        printf("trace: %s (every rank; open it at https://ui.perfetto.dev)\n", trace_path);
    }
    fflush(stdout);

    /* MFU last: it needs lab 10's model FLOPs (plan/perf.h) */
    plan_model pm = {.arch = strcmp(t.arch, "llama") == 0 ? PLAN_ARCH_LLAMA : PLAN_ARCH_GPT2,
                     .layers = (uint64_t)t.layers, .hidden = (uint64_t)t.channels, .heads = (uint64_t)t.heads,
                     .kv_heads = (uint64_t)t.kv_heads, .ffn = (uint64_t)t.ffn, .vocab = (uint64_t)t.vocab,
                     .context = (uint64_t)t.context, .tied_head = t.tied != 0};
    perf_flops flops;
    perf_train_flops_per_token(&pm, (uint64_t)t.seq_len, &flops);
    perf_throughput tp = perf_throughput_of((uint64_t)llround(t.tokens_per_step * t.world), step_s, (double)flops.total,
                                            products.peak_flops * t.world);
    printf("MFU: %.1f%% (%.0f tokens/s x %.3g model FLOPs per token = %.2f GFLOP/s, against %d x the ", 100 * tp.mfu,
           tp.tokens_per_s, (double)flops.total, tp.flops_per_s / 1e9, t.world);
    if (t.products_kernel[0])
        printf("%s kernel's peak; %.1f%% of %d x the sgemm peak)\n", t.products_kernel,
               100 * tp.flops_per_s / (roof.peak_flops * t.world), t.world);
    else
        printf("sgemm peak)\n");
    if (t.threads > 0 && t.cpus > 0 && (long)t.world * t.threads > t.cpus)
        printf("(the %d ranks x %d thread%s share %d CPUs: each rank measured its peak beside the others, so this MFU "
               "is only a guide; bench/capstone_1b.sh measures the machine's peak on all its cores, alone)\n",
               t.world, t.threads, t.threads > 1 ? "s" : "", t.cpus);
    return 0;
}
