/* cmd_precision.c: `mixpar precision`: running-sum error per format, the range probe, fp16 flush counts of runs, a static loss scale. */
#include "amp/scale_choice.h"
#include "base/error.h"
#include "base/parse.h"
#include "base/rng.h"
#include "cli/commands.h"
#include "fp/accumulate.h"
#include "fp/format.h"
#include "fp/hist.h"
#include "train/checkpoint.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: mixpar precision COMMAND [options]   (labs 04 and 06)\n"
    "\n"
    "  sum [--value V | --uniform LO,HI] [--n N,N,...] [--format F]... [--method M]... [--seed S] [--tsv]\n"
    "        sums n addends with the running sum kept in each format (rounded after every add), with Kahan's\n"
    "        compensation in the same format, and in an fp32 accumulator (the addends rounded to the format);\n"
    "        prints each sum and its error against the double sum of the addends. The addends are V each\n"
    "        (default 0.01) or uniform in [LO, HI) (--uniform 0,0.02: mean 0.01) from --seed (default 1).\n"
    "        n defaults to 100,1000,10000,100000,1000000 (at most 10^8); formats fp32 fp16 bf16;\n"
    "        methods: rounded, kahan, fp32-acc (all three by default).\n"
    "\n"
    "  range [--format F]... [--checkpoint FILE [--scale S] [--tsv]]\n"
    "        each format's range: largest and smallest values, binades of normals and subnormals, decades.\n"
    "        With a checkpoint (mixpar train writes runs/<run>/checkpoint.safetensors): for its parameters and\n"
    "        each optimizer buffer (Adam's m and v), the share of values each format keeps, and how many it\n"
    "        flushes to 0 or overflows, after multiplying by S (default 1); --tsv: those shares as tab-separated\n"
    "        columns. Formats default to fp32 fp16 bf16 e4m3 e5m2.\n"
    "\n"
    "  flushed EVENTS... [--tsv | --steps]\n"
    "        from the \"rounding\" events of fp16/bf16/fp8 runs (train.hist_interval > 0): per layer, the share\n"
    "        of the nonzero gradients entering the matmuls that rounding flushed to zero, and how many\n"
    "        overflowed, summed over the run; one column per events file. --steps: per recorded step instead\n"
    "        (all layers), one block per file, for plotting.\n"
    "\n"
    "  choose-scale EVENTS [--format F] [--margin B] [--step N|first|last] [--scale-only]\n"
    "        a static loss scale from the \"hist\" events of one step (default: the first): the largest power of\n"
    "        two that keeps the gradients' top binade B binades (default 1) below the format's top binade\n"
    "        (fp16: 15). The histograms are taken back to scale 1 first (the run's scale must be a power of\n"
    "        two). --scale-only prints just the scale.\n"
    "\n"
    "examples:\n"
    "  mixpar precision sum --value 1 --format bf16 --n 1000\n"
    "  mixpar precision sum --uniform 0,0.02 --tsv\n"
    "  mixpar precision range --checkpoint runs/lab06/fp32/checkpoint.safetensors\n"
    "  mixpar precision flushed runs/lab04/scale1/events.rank0.jsonl runs/lab04/dynamic/events.rank0.jsonl\n"
    "  mixpar precision choose-scale runs/lab04/scale1/events.rank0.jsonl --margin 1\n";

enum { MAX_FORMATS = 16, MAX_NS = 16, MAX_FILES = 8 };

static const char *option_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) mp_usage_error(cmd, "%s needs a value", argv[*i]);
    *i += 1;
    return argv[*i];
}

static const fp_format *format_arg(const char *option, const char *name) {
    const fp_format *f = fp_format_by_name(name);
    if (!f) MP_FAIL_HINT("a format name", FP_FORMAT_NAMES_HELP, "%s '%s'", option, name);
    return f;
}

static double number_arg(const char *option, const char *text) {
    double v;
    if (!parse_double(text, &v) || !isfinite(v)) MP_FAIL("a finite number, such as 0.01 or 1e-3", "%s '%s'", option, text);
    return v;
}

/* "2^16" for a power of two, else the number. */
static const char *fmt_scale(double scale, char *buf, size_t len) {
    int e;
    if (scale > 0 && frexp(scale, &e) == 0.5) snprintf(buf, len, "2^%d", e - 1);
    else snprintf(buf, len, "%g", scale);
    return buf;
}

static double share(uint64_t part, uint64_t whole) { return whole ? 100.0 * (double)part / (double)whole : 0.0; }

/* ------------------------------------------------------------------ sum */

/* "1000000" -> "10^6" for the column heads. */
static const char *fmt_count(size_t n, char *buf, size_t len) {
    size_t p = 1;
    int e = 0;
    while (p < n && e < 19) {
        p *= 10;
        e++;
    }
    if (p == n && e >= 4) snprintf(buf, len, "10^%d", e);
    else snprintf(buf, len, "%zu", n);
    return buf;
}

static int cmd_sum(int argc, char **argv) {
    const char *cmd = "precision sum";
    const fp_format *formats[MAX_FORMATS];
    int nformats = 0, nmethods = 0, tsv = 0, uniform = 0;
    fp_sum_method methods[FP_SUM_NMETHODS];
    size_t ns[MAX_NS];
    int nn = 0;
    double value = 0.01, lo = 0, hi = 0;
    uint64_t seed = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--value") == 0) {
            value = number_arg(a, option_value(cmd, argc, argv, &i));
        } else if (strcmp(a, "--uniform") == 0) {
            const char *text = option_value(cmd, argc, argv, &i);
            char first[64];
            const char *comma = strchr(text, ',');
            if (!comma || (size_t)(comma - text) >= sizeof first)
                MP_FAIL("--uniform LO,HI, such as 0,0.02", "--uniform '%s'", text);
            memcpy(first, text, (size_t)(comma - text));
            first[comma - text] = '\0';
            lo = number_arg("--uniform LO", first);
            hi = number_arg("--uniform HI", comma + 1);
            if (!(hi > lo)) MP_FAIL("--uniform LO,HI with LO < HI", "--uniform '%s'", text);
            uniform = 1;
        } else if (strcmp(a, "--n") == 0) {
            const char *text = option_value(cmd, argc, argv, &i);
            /* Field by field, empty ones included: "1,,2", ",5" and "5," are mistakes, not two counts. */
            const char *field = text;
            for (int k = 1;; k++) {
                const char *comma = strchr(field, ',');
                size_t len = comma ? (size_t)(comma - field) : strlen(field);
                char tok[64];
                double n;
                if (len == 0)
                    MP_FAIL_HINT("counts from 1 to 10^8, one comma between two (1000,1e6 or 10K)",
                                 text[0] ? "remove the extra comma, e.g. --n 1,2" : "give at least one count, e.g. --n 1000",
                                 "--n '%s': count %d is empty", text, k);
                bool ok = len < sizeof tok;
                if (ok) {
                    memcpy(tok, field, len);
                    tok[len] = '\0';
                    ok = parse_count(tok, &n) && n >= 1 && n <= 1e8 && n == floor(n);
                }
                if (!ok)
                    MP_FAIL_HINT("counts from 1 to 10^8, one comma between two (1000,1e6 or 10K)",
                                 "write each count as a whole number from 1 to 10^8, such as 300, 1e6 or 10K", "--n '%s': count %d is '%.*s'",
                                 text, k, (int)(len < 40 ? len : 40), field);
                if (nn == MAX_NS) mp_usage_error(cmd, "at most %d counts in --n", MAX_NS);
                ns[nn++] = (size_t)n;
                if (!comma) break;
                field = comma + 1;
            }
        } else if (strcmp(a, "--format") == 0) {
            if (nformats == MAX_FORMATS) mp_usage_error(cmd, "at most %d --format options", MAX_FORMATS);
            formats[nformats++] = format_arg(a, option_value(cmd, argc, argv, &i));
        } else if (strcmp(a, "--method") == 0) {
            const char *m = option_value(cmd, argc, argv, &i);
            int found = -1;
            for (int k = 0; k < FP_SUM_NMETHODS; k++)
                if (strcmp(m, fp_sum_method_name((fp_sum_method)k)) == 0) found = k;
            if (found < 0) MP_FAIL("--method rounded, kahan or fp32-acc", "--method '%s'", m);
            if (nmethods == FP_SUM_NMETHODS) mp_usage_error(cmd, "at most %d --method options", FP_SUM_NMETHODS);
            methods[nmethods++] = (fp_sum_method)found;
        } else if (strcmp(a, "--seed") == 0) {
            const char *s = option_value(cmd, argc, argv, &i);
            if (!parse_u64(s, &seed)) MP_FAIL("--seed followed by a non-negative integer", "--seed '%s'", s);
        } else if (strcmp(a, "--tsv") == 0) {
            tsv = 1;
        } else {
            mp_usage_error(cmd, "unknown option '%s' (mixpar precision --help)", a);
        }
    }
    if (!nformats) {
        formats[nformats++] = &FP_FP32;
        formats[nformats++] = &FP_FP16;
        formats[nformats++] = &FP_BF16;
    }
    if (!nmethods)
        for (int k = 0; k < FP_SUM_NMETHODS; k++) methods[nmethods++] = (fp_sum_method)k;
    if (!nn)
        for (size_t n = 100; n <= 1000000; n *= 10) ns[nn++] = n;
    size_t nmax = 0;
    for (int k = 0; k < nn; k++)
        if (ns[k] > nmax) nmax = ns[k];

    float *x = malloc(nmax * sizeof *x);
    MP_ASSERT(x, "out of memory for %zu addends", nmax);
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (size_t i = 0; i < nmax; i++) x[i] = uniform ? (float)(lo + (hi - lo) * mp_rng_uniform(&rng)) : (float)value;

    if (tsv) {
        printf("# format\tmethod\tn\tsum\texact\texact_in_format\trel_error\n");
        for (int f = 0; f < nformats; f++)
            for (int m = 0; m < nmethods; m++)
                for (int k = 0; k < nn; k++) {
                    fp_sum_report r = fp_sum_measure(formats[f], methods[m], x, ns[k]);
                    printf("%s\t%s\t%zu\t%.9g\t%.17g\t%.17g\t%.6e\n", formats[f]->name, fp_sum_method_name(methods[m]),
                           ns[k], r.result, r.exact, r.exact_in_f, r.rel_error);
                }
        free(x);
        return 0;
    }

    if (uniform) printf("sums of n addends uniform in [%g, %g) (seed %llu)", lo, hi, (unsigned long long)seed);
    else printf("sums of n addends %g (as fp32: %.9g)", value, (double)(float)value);
    printf(", kept in each format:\n"
           "  rounded   the running sum is a value of the format: rounded after every add\n"
           "  kahan     the same, with Kahan's compensation (every operation in the format)\n"
           "  fp32-acc  the addends in the format, the running sum in fp32 (tensor cores, AMP reductions)\n\n");
    char head[32];
    double exact[MAX_NS];
    for (int k = 0; k < nn; k++) {
        exact[k] = 0;
        for (size_t i = 0; i < ns[k]; i++) exact[k] += x[i];
    }
    for (int block = 0; block < 2; block++) {
        printf(block == 0 ? "the sums\n" : "\nrelative error |sum - exact| / exact\n");
        printf("%-6s %-9s", "format", "method");
        for (int k = 0; k < nn; k++) printf(" %12s", fmt_count(ns[k], head, sizeof head));
        printf("\n");
        if (block == 0) {
            printf("%-6s %-9s", "exact", "(double)");
            for (int k = 0; k < nn; k++) printf(" %12.7g", exact[k]);
            printf("\n");
        }
        for (int f = 0; f < nformats; f++)
            for (int m = 0; m < nmethods; m++) {
                if (formats[f] == &FP_FP32 && methods[m] == FP_SUM_FP32_ACCUMULATOR) continue; /* = rounded */
                printf("%-6s %-9s", formats[f]->name, fp_sum_method_name(methods[m]));
                for (int k = 0; k < nn; k++) {
                    fp_sum_report r = fp_sum_measure(formats[f], methods[m], x, ns[k]);
                    if (block == 0) printf(" %12.7g", r.result);
                    else printf(" %12.2e", r.rel_error);
                }
                printf("\n");
            }
    }
    free(x);
    return 0;
}

/* ------------------------------------------------------------------ range */

static void print_format_ranges(const fp_format *const *formats, int nformats) {
    printf("%-6s %4s %13s %13s %13s %7s %9s %7s %8s\n", "format", "bits", "max", "min normal", "min subnormal",
           "binades", "(normal", "+ sub)", "decades");
    for (int f = 0; f < nformats; f++) {
        fp_range r = fp_range_probe(formats[f]);
        char sub[32];
        snprintf(sub, sizeof sub, "+ %d)", r.subnormal_binades);
        printf("%-6s %4d %13.6g %13.6g %13.6g %7d %8s%-1d %7s %8.1f\n", formats[f]->name, fp_format_bits(formats[f]),
               r.max, r.min_normal, r.min_subnormal, r.normal_binades + r.subnormal_binades, "(",
               r.normal_binades, sub, r.decades);
    }
}

/* One group of a checkpoint's tensors: the parameters ("") or an optimizer buffer ("optim.m."). */
typedef struct {
    char prefix[32];
    const char *label;
    fp_range_counts counts[MAX_FORMATS];
    uint64_t values;
} tensor_group;

static int cmd_range(int argc, char **argv) {
    const char *cmd = "precision range";
    const fp_format *formats[MAX_FORMATS];
    int nformats = 0;
    const char *checkpoint = NULL;
    double scale = 1;
    int tsv = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--tsv") == 0) {
            tsv = 1;
        } else if (strcmp(a, "--format") == 0) {
            if (nformats == MAX_FORMATS) mp_usage_error(cmd, "at most %d --format options", MAX_FORMATS);
            formats[nformats++] = format_arg(a, option_value(cmd, argc, argv, &i));
        } else if (strcmp(a, "--checkpoint") == 0) {
            checkpoint = option_value(cmd, argc, argv, &i);
        } else if (strcmp(a, "--scale") == 0) {
            scale = number_arg(a, option_value(cmd, argc, argv, &i));
            if (!(scale > 0) || !isfinite((float)scale)) MP_FAIL("--scale S > 0, finite in fp32", "--scale %g", scale);
        } else {
            mp_usage_error(cmd, "unknown option '%s' (mixpar precision --help)", a);
        }
    }
    if (!nformats) { /* the storage formats (tf32 is a matmul mode, with fp32's range) */
        static const fp_format *const storage[] = {&FP_FP32, &FP_FP16, &FP_BF16, &FP_E4M3, &FP_E5M2};
        for (size_t f = 0; f < sizeof storage / sizeof storage[0]; f++) formats[nformats++] = storage[f];
    }
    if (tsv && !checkpoint) mp_usage_error(cmd, "--tsv goes with --checkpoint FILE");
    if (!tsv) print_format_ranges(formats, nformats);
    if (!checkpoint) return 0;

    ckpt_file *ck = ckpt_open(checkpoint, NULL);
    FILE *file = fopen(checkpoint, "rb");
    if (!file) MP_FAIL("a readable checkpoint", "'%s'", checkpoint);
    tensor_group groups[3] = {{"optim.m.", "optimizer m (Adam's 1st moment)", {{0}}, 0},
                              {"optim.v.", "optimizer v (Adam's 2nd moment)", {{0}}, 0},
                              {"", "parameters", {{0}}, 0}};
    float *buf = NULL;
    size_t cap = 0;
    for (int e = 0; e < ckpt_entry_count(ck); e++) {
        const ckpt_entry *t = ckpt_entry_at(ck, e);
        if (strcmp(t->dtype, "F32") != 0) continue;
        tensor_group *g = &groups[2];
        for (int k = 0; k < 2; k++)
            if (strncmp(t->name, groups[k].prefix, strlen(groups[k].prefix)) == 0) g = &groups[k];
        size_t n = (size_t)((t->end - t->begin) / sizeof(float));
        if (n > cap) {
            cap = n;
            buf = realloc(buf, cap * sizeof *buf);
            MP_ASSERT(buf, "out of memory for tensor %s (%zu floats)", t->name, n);
        }
        if (fseek(file, (long)(ckpt_data_start(ck) + t->begin), SEEK_SET) != 0 || fread(buf, sizeof(float), n, file) != n)
            MP_FAIL("a checkpoint whose tensors can be read", "%s: tensor %s at byte %llu", checkpoint, t->name,
                    (unsigned long long)(ckpt_data_start(ck) + t->begin));
        for (int f = 0; f < nformats; f++) fp_range_count(formats[f], buf, n, (float)scale, &g->counts[f]);
        g->values += n;
    }
    fclose(file);
    ckpt_close(ck);
    free(buf);
    if (tsv) {
        printf("# tensors\tformat\tkept_pct\tnormal_pct\tsubnormal_pct\tflushed_pct\toverflow_pct\n");
        for (int k = 2; k >= 0; k--)
            for (int f = 0; f < nformats && groups[k].values; f++) {
                const fp_range_counts *c = &groups[k].counts[f];
                uint64_t finite = c->count - c->nonfinite;
                printf("%s\t%s\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\n", k == 2 ? "params" : k == 1 ? "adam_v" : "adam_m",
                       formats[f]->name, 100 * fp_range_kept_share(c), share(c->normal, finite),
                       share(c->subnormal, finite), share(c->flushed, finite), share(c->overflow, finite));
            }
        return 0;
    }
    char sc[32];
    printf("\n%s, values x %s: the share each format keeps (normal, subnormal or zero);\n"
           "flushed = nonzero values that round to 0, overflow = finite values that round past max\n",
           checkpoint, fmt_scale(scale, sc, sizeof sc));
    for (int k = 2; k >= 0; k--) {
        tensor_group *g = &groups[k];
        if (!g->values) continue;
        printf("\n%s: %llu values\n", g->label, (unsigned long long)g->values);
        printf("  %-6s %10s %10s %10s %10s %10s\n", "format", "kept", "normal", "subnormal", "flushed", "overflow");
        for (int f = 0; f < nformats; f++) {
            const fp_range_counts *c = &g->counts[f];
            uint64_t finite = c->count - c->nonfinite;
            printf("  %-6s %9.4f%% %9.4f%% %9.4f%% %9.4f%% %9.4f%%\n", formats[f]->name, 100 * fp_range_kept_share(c),
                   share(c->normal, finite), share(c->subnormal, finite), share(c->flushed, finite),
                   share(c->overflow, finite));
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ events */

static FILE *open_events(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) MP_FAIL_HINT("a readable events file", "runs/<run>/events.rank0.jsonl, written by mixpar train", "'%s'", path);
    return f;
}

/* The next event of `kind` from f (NULL at the end); a line that is not JSON stops with exit 2, except a
 * truncated last line (a run that crashed mid-write), which is skipped as core/base/EVENTS.md says. */
static cJSON *next_event(FILE *f, const char *path, const char *kind, long *lineno) {
    char *line = NULL;
    size_t cap = 0;
    cJSON *found = NULL;
    while (!found && getline(&line, &cap, f) > 0) {
        (*lineno)++;
        cJSON *o = cJSON_Parse(line);
        if (!o) {
            if (!feof(f)) MP_FAIL("one JSON object per line", "%s:%ld is not JSON", path, *lineno);
            break;
        }
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "kind");
        if (cJSON_IsString(k) && strcmp(k->valuestring, kind) == 0) found = o;
        else cJSON_Delete(o);
    }
    free(line);
    return found;
}

static long long int_field(const cJSON *o, const char *key, const char *path, long lineno) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) MP_FAIL("an event with an integer field", "%s:%ld has no number '%s'", path, lineno, key);
    return (long long)v->valuedouble;
}

static const char *layer_label(int layer, int L, char *buf, size_t len) {
    if (layer < 0) snprintf(buf, len, "embeddings");
    else if (layer >= L) snprintf(buf, len, "lnf+head");
    else snprintf(buf, len, "block %d", layer);
    return buf;
}

/* Per layer (index layer + 1): gradients rounded, nonzero before, flushed, overflowed; and per event step, over
 * all layers. */
typedef struct {
    long step;
    uint64_t nonzero, flushed, overflowed;
} flush_step;

typedef struct {
    uint64_t values[FP_HIST_NBINS], nonzero[FP_HIST_NBINS], flushed[FP_HIST_NBINS], overflowed[FP_HIST_NBINS];
    int nlayers;
    char compute[16];
    flush_step *steps;
    int nsteps, cap;
} flush_totals;

static void read_flushes(const char *path, flush_totals *t) {
    memset(t, 0, sizeof *t);
    FILE *f = open_events(path);
    long lineno = 0;
    cJSON *o;
    while ((o = next_event(f, path, "rounding", &lineno))) {
        long long layer = int_field(o, "layer", path, lineno);
        if (layer < -1 || layer + 2 >= FP_HIST_NBINS) MP_FAIL("a layer from -1 up", "%s:%ld layer %lld", path, lineno, layer);
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, "grads");
        if (!cJSON_IsObject(g)) MP_FAIL("a rounding event with \"grads\"", "%s:%ld has none", path, lineno);
        int i = (int)layer + 1;
        t->values[i] += (uint64_t)int_field(g, "values", path, lineno);
        t->nonzero[i] += (uint64_t)int_field(g, "nonzero", path, lineno);
        t->flushed[i] += (uint64_t)int_field(g, "flushed", path, lineno);
        t->overflowed[i] += (uint64_t)int_field(g, "overflowed", path, lineno);
        if (i + 1 > t->nlayers) t->nlayers = i + 1;
        long step = (long)int_field(o, "step", path, lineno);
        if (!t->nsteps || t->steps[t->nsteps - 1].step != step) {
            if (t->nsteps == t->cap) {
                t->cap = t->cap ? 2 * t->cap : 64;
                t->steps = realloc(t->steps, (size_t)t->cap * sizeof *t->steps);
                MP_ASSERT(t->steps, "out of memory");
            }
            t->steps[t->nsteps++] = (flush_step){step, 0, 0, 0};
        }
        flush_step *st = &t->steps[t->nsteps - 1];
        st->nonzero += (uint64_t)int_field(g, "nonzero", path, lineno);
        st->flushed += (uint64_t)int_field(g, "flushed", path, lineno);
        st->overflowed += (uint64_t)int_field(g, "overflowed", path, lineno);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "compute");
        if (cJSON_IsString(c)) snprintf(t->compute, sizeof t->compute, "%s", c->valuestring);
        cJSON_Delete(o);
    }
    fclose(f);
    if (!t->nlayers)
        MP_FAIL_HINT("\"rounding\" events", "they are written by runs in a low-precision recipe (precision.recipe fp16, "
                     "bf16, ...) with train.hist_interval > 0", "none in '%s'", path);
}

/* "runs/lab04/scale1/events.rank0.jsonl" -> "scale1" (the run directory's name). */
static const char *run_name(const char *path, char *buf, size_t len) {
    snprintf(buf, len, "%s", path);
    char *slash = strrchr(buf, '/');
    if (slash && strncmp(slash + 1, "events", 6) == 0) {
        *slash = '\0';
        slash = strrchr(buf, '/');
    } else {
        slash = NULL;
    }
    if (slash) memmove(buf, slash + 1, strlen(slash + 1) + 1);
    return buf;
}

static int cmd_flushed(int argc, char **argv) {
    const char *cmd = "precision flushed";
    const char *paths[MAX_FILES];
    int npaths = 0, tsv = 0, by_step = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--tsv") == 0) tsv = 1;
        else if (strcmp(argv[i], "--steps") == 0) by_step = 1;
        else if (strncmp(argv[i], "--", 2) == 0) mp_usage_error(cmd, "unknown option '%s' (mixpar precision --help)", argv[i]);
        else if (npaths == MAX_FILES) mp_usage_error(cmd, "at most %d events files", MAX_FILES);
        else paths[npaths++] = argv[i];
    }
    if (!npaths) mp_usage_error(cmd, "one or more EVENTS files are needed (runs/<run>/events.rank0.jsonl)");
    static flush_totals totals[MAX_FILES];
    int nlayers = 0;
    for (int p = 0; p < npaths; p++) {
        read_flushes(paths[p], &totals[p]);
        if (totals[p].nlayers > nlayers) nlayers = totals[p].nlayers;
    }
    int L = nlayers - 2; /* rows: embeddings, blocks 0..L-1, head */
    char name[256], label[32];
    if (by_step) { /* one block per file (gnuplot: index N), separated by two blank lines */
        for (int p = 0; p < npaths; p++) {
            printf("%s# %s: step, flushed share of the nonzero gradients (%%), overflowed\n", p ? "\n\n" : "",
                   run_name(paths[p], name, sizeof name));
            for (int k = 0; k < totals[p].nsteps; k++) {
                const flush_step *st = &totals[p].steps[k];
                printf("%ld\t%.6f\t%llu\n", st->step, share(st->flushed, st->nonzero), (unsigned long long)st->overflowed);
            }
        }
        for (int p = 0; p < npaths; p++) free(totals[p].steps);
        return 0;
    }
    if (tsv) {
        printf("# layer");
        for (int p = 0; p < npaths; p++) printf("\t%s_flushed_pct\t%s_overflowed", run_name(paths[p], name, sizeof name),
                                                run_name(paths[p], name, sizeof name));
        printf("\n");
    } else {
        printf("gradients entering the matmuls in backward, rounded to the run's format: the share of the nonzero\n"
               "ones that became 0 (flushed), summed over the run's \"rounding\" events; overflowed = became inf\n\n");
        printf("%-11s", "layer");
        for (int p = 0; p < npaths; p++) printf(" %22s", run_name(paths[p], name, sizeof name));
        printf("\n");
    }
    for (int i = 0; i <= nlayers; i++) {
        bool all = i == nlayers;
        uint64_t used = 0;
        for (int p = 0; p < npaths; p++) used += all ? 1 : totals[p].values[i];
        if (!used) continue; /* the embeddings have no matmul input gradient */
        if (all) snprintf(label, sizeof label, "all");
        else layer_label(i - 1, L, label, sizeof label);
        if (tsv) printf("%s", label);
        else printf("%-11s", label);
        for (int p = 0; p < npaths; p++) {
            uint64_t nonzero = 0, flushed = 0, over = 0;
            for (int k = all ? 0 : i; k <= (all ? nlayers - 1 : i); k++) {
                nonzero += totals[p].nonzero[k];
                flushed += totals[p].flushed[k];
                over += totals[p].overflowed[k];
            }
            if (tsv) printf("\t%.6f\t%llu", share(flushed, nonzero), (unsigned long long)over);
            else {
                char cell[48];
                if (over) snprintf(cell, sizeof cell, "%.4f%% (%llu inf)", share(flushed, nonzero), (unsigned long long)over);
                else snprintf(cell, sizeof cell, "%.4f%%", share(flushed, nonzero));
                printf(" %22s", cell);
            }
        }
        printf("\n");
    }
    for (int p = 0; p < npaths; p++) free(totals[p].steps);
    return 0;
}

/* The gradient histograms of one step, taken back to scale 1 and merged over the layers; per layer too. */
typedef struct {
    long step;
    double scale;
    int nlayers;
    fp_hist all;
    fp_hist layer[FP_HIST_NBINS]; /* index layer + 1 */
} step_hists;

static void add_bins(fp_hist *h, const cJSON *bins, int first, int shift, const char *path, long lineno) {
    int b = first - shift;
    for (const cJSON *v = bins->child; v; v = v->next, b++) {
        if (!cJSON_IsNumber(v) || b < FP_HIST_MIN_BINADE || b > FP_HIST_MAX_BINADE)
            MP_FAIL("bins: counts in fp32's binades", "%s:%ld binade %d", path, lineno, b);
        h->bins[b - FP_HIST_MIN_BINADE] += (uint64_t)v->valuedouble;
    }
}

/* want: a step number, 0 for the first recorded step, -1 for the last. */
static void read_step_hists(const char *path, long want, step_hists *s) {
    memset(s, 0, sizeof *s);
    s->step = -1;
    FILE *f = open_events(path);
    long lineno = 0;
    cJSON *o;
    while ((o = next_event(f, path, "hist", &lineno))) {
        const cJSON *tensor = cJSON_GetObjectItemCaseSensitive(o, "tensor");
        if (cJSON_IsString(tensor) && strcmp(tensor->valuestring, "grad") != 0) {
            cJSON_Delete(o);
            continue;
        }
        long step = (long)int_field(o, "step", path, lineno);
        bool take = want > 0 ? step == want : want == 0 ? (s->step < 0 || step == s->step) : true;
        if (!take) {
            cJSON_Delete(o);
            continue;
        }
        if (step != s->step) { /* a new step (for "last": start over) */
            memset(s, 0, sizeof *s);
            s->step = step;
        }
        const cJSON *scale = cJSON_GetObjectItemCaseSensitive(o, "scale");
        const cJSON *bins = cJSON_GetObjectItemCaseSensitive(o, "bins");
        if (!cJSON_IsNumber(scale) || !cJSON_IsArray(bins)) MP_FAIL("a hist event with scale and bins", "%s:%ld", path, lineno);
        int e;
        if (!(scale->valuedouble > 0) || frexp(scale->valuedouble, &e) != 0.5)
            MP_FAIL_HINT("a power-of-two scale in the hist events", "only then is unscaling a shift of the binades",
                         "%s:%ld scale %g", path, lineno, scale->valuedouble);
        s->scale = scale->valuedouble;
        int first = (int)int_field(o, "first_binade", path, lineno);
        long long layer = int_field(o, "layer", path, lineno);
        if (layer < -1 || layer + 2 >= FP_HIST_NBINS) MP_FAIL("a layer from -1 up", "%s:%ld layer %lld", path, lineno, layer);
        add_bins(&s->all, bins, first, e - 1, path, lineno);
        add_bins(&s->layer[layer + 1], bins, first, e - 1, path, lineno);
        if (layer + 2 > s->nlayers) s->nlayers = (int)layer + 2;
        cJSON_Delete(o);
    }
    fclose(f);
    if (s->step < 0) {
        if (want > 0) MP_FAIL("hist events at the step asked for", "no step %ld in '%s'", want, path);
        MP_FAIL_HINT("\"hist\" events", "run mixpar train with train.hist_interval > 0", "none in '%s'", path);
    }
}

static int cmd_choose_scale(int argc, char **argv) {
    const char *cmd = "precision choose-scale";
    const char *path = NULL;
    const fp_format *format = &FP_FP16;
    int margin = 1, scale_only = 0;
    long step = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--format") == 0) {
            format = format_arg(a, option_value(cmd, argc, argv, &i));
        } else if (strcmp(a, "--margin") == 0) {
            const char *text = option_value(cmd, argc, argv, &i);
            int64_t m;
            if (!parse_i64(text, &m) || m < 0 || m > 64) MP_FAIL("--margin B: binades of headroom, 0 .. 64", "--margin '%s'", text);
            margin = (int)m;
        } else if (strcmp(a, "--step") == 0) {
            const char *text = option_value(cmd, argc, argv, &i);
            int64_t v;
            if (strcmp(text, "first") == 0) step = 0;
            else if (strcmp(text, "last") == 0) step = -1;
            else if (parse_i64(text, &v) && v >= 1) step = (long)v;
            else MP_FAIL("--step N (a step number >= 1), first or last", "--step '%s'", text);
        } else if (strcmp(a, "--scale-only") == 0) {
            scale_only = 1;
        } else if (strncmp(a, "--", 2) == 0) {
            mp_usage_error(cmd, "unknown option '%s' (mixpar precision --help)", a);
        } else if (path) {
            mp_usage_error(cmd, "one EVENTS file (got '%s' and '%s')", path, a);
        } else {
            path = a;
        }
    }
    if (!path) mp_usage_error(cmd, "an EVENTS file is needed (runs/<run>/events.rank0.jsonl)");
    static step_hists s;
    read_step_hists(path, step, &s);
    amp_scale_choice c = amp_scale_choose(&s.all, format, margin);
    if (scale_only) {
        printf("%.9g\n", (double)c.scale);
        return 0;
    }
    char rec[32];
    printf("gradient histograms of step %ld of %s (recorded at scale %s, taken back to scale 1)\n", s.step, path,
           fmt_scale(s.scale, rec, sizeof rec));
    printf("format %s: top binade %d (max %g), values below 2^%d flush to 0\n\n", format->name,
           amp_format_top_binade(format), fp_max(format), ilogb(fp_min_subnormal(format)) - 1);
    printf("%-11s %10s %6s %6s %12s %12s\n", "layer", "nonzero", "lowest", "top", "flushed@1", "flushed@S");
    int L = s.nlayers - 2;
    char label[32];
    for (int i = 0; i < s.nlayers; i++) {
        int lo, hi;
        if (!fp_hist_range(&s.layer[i], &lo, &hi)) continue;
        uint64_t nonzero = 0;
        for (int b = lo; b <= hi; b++) nonzero += fp_hist_bin(&s.layer[i], b);
        printf("%-11s %10llu %6d %6d %11.4f%% %11.4f%%\n", layer_label(i - 1, L, label, sizeof label),
               (unsigned long long)nonzero, lo, hi, share(amp_scale_flushed(&s.layer[i], format, 0), nonzero),
               share(amp_scale_flushed(&s.layer[i], format, c.log2_scale), nonzero));
    }
    int lo = 0, hi = 0;
    fp_hist_range(&s.all, &lo, &hi);
    printf("%-11s %10llu %6d %6d %11.4f%% %11.4f%%\n\n", "all", (unsigned long long)c.nonzero, lo, hi,
           share(amp_scale_flushed(&s.all, format, 0), c.nonzero), share(c.flushed, c.nonzero));
    if (c.empty) {
        printf("no nonzero gradients at that step: nothing to choose from; scale 1\n");
        return 0;
    }
    printf("largest gradients in binade %d; with margin %d the top may reach binade %d - %d = %d\n", c.top_binade, margin,
           amp_format_top_binade(format), margin, amp_format_top_binade(format) - margin);
    printf("static scale: 2^%d = %.9g%s (largest gradients land in binade %d)\n", c.log2_scale, (double)c.scale,
           c.clamped ? " (clamped to fp32's range)" : "", c.top_after);
    return 0;
}

/* ------------------------------------------------------------------ dispatch */

int cmd_precision(int argc, char **argv) {
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fputs(usage_text, argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } subcommands[] = {{"sum", cmd_sum}, {"range", cmd_range}, {"flushed", cmd_flushed}, {"choose-scale", cmd_choose_scale}};
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(argv[0], subcommands[i].name) == 0) return subcommands[i].run(argc - 1, argv + 1);
    mp_usage_error("precision", "unknown command '%s': sum, range, flushed or choose-scale (mixpar precision --help)",
                   argv[0]);
}
