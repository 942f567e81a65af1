/* cmd_amp.c: `mixpar amp`: the autocast policy table, loss-scaler traces, fp16 underflow from a run's histograms. */
#include "amp/policy.h"
#include "amp/scaler.h"
#include "amp/setup.h"
#include "base/error.h"
#include "base/parse.h"
#include "cli/commands.h"
#include "fp/format.h"
#include "fp/hist.h"
#include "train/config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: mixpar amp COMMAND [options]\n"
    "\n"
    "  policy [--recipe R] [--op OP=PREC]...\n"
    "  policy --keras NAME | --torch DTYPE [--scaler on|off] | --config FILE [--set KEY=VALUE]...\n"
    "        the autocast policy: which class of op runs in which precision. Without a recipe, every recipe\n"
    "        side by side; with one, its table and why. --keras/--torch/--config show the recipe (and loss\n"
    "        scaler) that a Keras policy name, PyTorch's autocast dtype + GradScaler, or a DeepSpeed-style\n"
    "        config maps to. --op overrides one class (softmax=low, matmul=fp32); precisions: fp32, low,\n"
    "        follow, fp8.\n"
    "        recipes: %s\n"
    "\n"
    "  scaler-trace [--kind K] [options] PATTERN...\n"
    "        replays a pattern of steps through a loss scaler (the real unscale and update code, on a small\n"
    "        gradient with inf or NaN injected) and prints, per step, the scale used, whether the step was\n"
    "        skipped, the next scale and the scaler's state. Runs of uneventful steps are folded into one line\n"
    "        (--all prints every step; --tsv prints tab-separated columns for plotting).\n"
    "        PATTERN: steps separated by spaces: C a clean step, O an overflow (+inf), M a -inf, N a NaN;\n"
    "        X*K repeats X K times; (C*5 O)*3 repeats a group. Example: \"C*2000 O C*5 O O O\"\n"
    "        kinds: %s (default pytorch)\n"
    "        --init-scale S        first scale (static: the scale)\n"
    "        --init-scale-power P  first scale 2^P (DeepSpeed's initial_scale_power)\n"
    "        --growth-interval N   clean steps before growth (pytorch growth_interval; deepspeed\n"
    "                              loss_scale_window, also --window N)\n"
    "        --growth-factor F, --backoff-factor F    pytorch and keras\n"
    "        --hysteresis N, --consecutive-hysteresis, --min-scale S    deepspeed\n"
    "        A fatal condition (deepspeed: overflow at min_loss_scale) prints the diagnosis and exits 2, as a\n"
    "        training run stops there.\n"
    "\n"
    "  underflow EVENTS [--scale S] [--step N|first|last] [--format F] [--tsv | --bins]\n"
    "        from the \"hist\" events of a run (train.hist_interval > 0), per layer: the share of the nonzero\n"
    "        gradients that format F (default fp16) would flush to zero, or keep only as subnormals, as\n"
    "        recorded and after a loss scale S (a power of two, default 65536 = 2^16): scaling by 2^k moves\n"
    "        every value up k binades, so the shares come from the histogram's bins shifted by k.\n"
    "        --bins prints the step's exponent histograms instead: one row per binade, the count over all\n"
    "        layers, then one column per layer.\n"
    "\n"
    "examples:\n"
    "  mixpar amp policy\n"
    "  mixpar amp policy --recipe fp8 --op softmax=low\n"
    "  mixpar amp policy --keras mixed_float16\n"
    "  mixpar amp scaler-trace --kind deepspeed \"C*999 C O C*3 O O\"\n"
    "  mixpar amp underflow runs/tiny-poetry/events.rank0.jsonl --scale 65536\n";

static void usage(FILE *out) { fprintf(out, usage_text, AMP_RECIPE_NAMES, AMP_SCALER_KIND_NAMES); }

static const char *option_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) mp_usage_error(cmd, "%s needs a value", argv[*i]);
    *i += 1;
    return argv[*i];
}

static double number_arg(const char *option, const char *text) {
    double v;
    if (!parse_double(text, &v)) MP_FAIL("a number, such as 65536 or 1e-3", "%s '%s'", option, text);
    return v;
}

static int int_arg(const char *option, const char *text, int lo, int hi) {
    int64_t v;
    if (!parse_i64(text, &v) || v < lo || v > hi)
        MP_FAIL("a whole number in range", "%s '%s' (expected %d .. %d)", option, text, lo, hi);
    return (int)v;
}

/* ------------------------------------------------------------------ policy */

/* What a precision means for a recipe, as the table shows it: "fp16", "fp32", "follow", "e4m3/e5m2". */
static const char *resolved_name(const amp_policy *p, amp_op op) {
    amp_precision prec = amp_policy_lookup(p, op);
    if (prec == AMP_PREC_FOLLOW) return "follow";
    if (prec == AMP_PREC_FP8) return "e4m3/e5m2";
    return amp_policy_format(p, op, false)->name;
}

static void print_scaler_config(const amp_scaler_config *c) {
    const amp_scaler_kind_info *k = amp_scaler_kind_get(c->kind);
    printf("loss scaler: %s (%s)", k->name, k->origin);
    switch (c->kind) {
    case AMP_SCALER_STATIC: printf(": scale %g\n", c->init_scale); break;
    case AMP_SCALER_PYTORCH:
    case AMP_SCALER_KERAS:
        printf(": from %g, x%g after %d clean steps, x%g and skip on inf/NaN\n", c->init_scale, c->growth_factor,
               c->growth_interval, c->backoff_factor);
        break;
    case AMP_SCALER_DEEPSPEED:
        printf(": from %g, x2 after a window of %d clean steps, hysteresis %d%s, floor %g\n", c->init_scale,
               c->growth_interval, c->hysteresis, c->consecutive_hysteresis ? " (refilled on every clean step)" : "",
               c->min_scale);
        break;
    default: printf("\n");
    }
}

static void print_recipe(const amp_recipe_info *r) {
    printf("recipe %s: %s\n", r->name, r->title);
    printf("  weights %s, gradients %s, optimizer updates %s%s; default loss scaler: %s\n", r->weights->name,
           r->grads->name, r->master_fp32 ? "an fp32 master copy" : "the weights",
           r->stochastic_rounding ? " (rounded stochastically)" : "", amp_scaler_kind_get(r->scaler)->name);
}

static void print_one_policy(const amp_policy *p) {
    print_recipe(amp_recipe_get(p->recipe));
    printf("\n%-13s %-10s %-8s %s\n", "op class", "runs in", "rule", "kernels");
    for (int o = 0; o < AMP_NOPS; o++) {
        const amp_op_info *info = amp_op_get((amp_op)o);
        printf("%-13s %-10s %-8s %s\n", info->name, resolved_name(p, (amp_op)o),
               p->overridden[o] ? "override" : amp_precision_name(amp_policy_lookup(p, (amp_op)o)), info->kernels);
    }
    bool any_follow = false;
    for (int o = 0; o < AMP_NOPS; o++) any_follow |= amp_policy_lookup(p, (amp_op)o) == AMP_PREC_FOLLOW;
    if (any_follow) {
        printf("\n\"follow\" runs in the format of the op's inputs; in the GPT-2 graph that is:\n");
        for (int o = 0; o < AMP_NOPS; o++)
            if (amp_policy_lookup(p, (amp_op)o) == AMP_PREC_FOLLOW) {
                const amp_op_info *info = amp_op_get((amp_op)o);
                printf("  %-11s %s\n", info->name, info->follows[0] ? info->follows : "its inputs");
            }
    }
    if (p->recipe == AMP_RECIPE_FP8)
        printf("\nfp8: e4m3 for the forward pass, e5m2 for gradients, one delayed scale per tensor (amp/fp8.h).\n");
}

/* A row of the side-by-side table: a label, then one cell per recipe, with no trailing blanks. */
static void print_row(const char *label, const char *const cells[AMP_NRECIPES]) {
    printf("%-13s", label);
    for (int r = 0; r < AMP_NRECIPES; r++) printf(r + 1 < AMP_NRECIPES ? " %-10s" : " %s", cells[r]);
    printf("\n");
}

static void print_all_policies(void) {
    const char *cells[AMP_NRECIPES];
    for (int r = 0; r < AMP_NRECIPES; r++) cells[r] = amp_recipe_get((amp_recipe)r)->name;
    print_row("op class", cells);
    for (int o = 0; o < AMP_NOPS; o++) {
        for (int r = 0; r < AMP_NRECIPES; r++) {
            amp_policy p;
            amp_policy_init(&p, (amp_recipe)r);
            cells[r] = resolved_name(&p, (amp_op)o);
        }
        print_row(amp_op_get((amp_op)o)->name, cells);
    }
    printf("\n");
    for (int r = 0; r < AMP_NRECIPES; r++) cells[r] = amp_recipe_get((amp_recipe)r)->weights->name;
    print_row("weights", cells);
    for (int r = 0; r < AMP_NRECIPES; r++) cells[r] = amp_recipe_get((amp_recipe)r)->master_fp32 ? "fp32" : "-";
    print_row("master copy", cells);
    for (int r = 0; r < AMP_NRECIPES; r++) cells[r] = amp_scaler_kind_get(amp_recipe_get((amp_recipe)r)->scaler)->name;
    print_row("loss scaler", cells);
    printf("\nfollow: the op runs in its inputs' format (autocast leaves it alone); e4m3/e5m2: fp8, e4m3 forward\n"
           "and e5m2 for gradients. mixpar amp policy --recipe R explains one column.\n");
}

static int cmd_policy(int argc, char **argv) {
    const char *recipe_name = NULL, *keras = NULL, *torch = NULL, *config = NULL, *scaler = NULL;
    const char *overrides[64], *sets[64];
    int noverrides = 0, nsets = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--recipe") == 0) recipe_name = option_value("amp policy", argc, argv, &i);
        else if (strcmp(a, "--keras") == 0) keras = option_value("amp policy", argc, argv, &i);
        else if (strcmp(a, "--torch") == 0) torch = option_value("amp policy", argc, argv, &i);
        else if (strcmp(a, "--scaler") == 0) scaler = option_value("amp policy", argc, argv, &i);
        else if (strcmp(a, "--config") == 0) config = option_value("amp policy", argc, argv, &i);
        else if ((strcmp(a, "--set") == 0 && nsets == 64) || (strcmp(a, "--op") == 0 && noverrides == 64))
            mp_usage_error("amp policy", "at most 64 %s options", a);
        else if (strcmp(a, "--set") == 0) sets[nsets++] = option_value("amp policy", argc, argv, &i);
        else if (strcmp(a, "--op") == 0) overrides[noverrides++] = option_value("amp policy", argc, argv, &i);
        else if (strcmp(a, "--help") == 0) return usage(stdout), 0;
        else mp_usage_error("amp policy", "unknown argument '%s' (mixpar amp --help)", a);
    }
    int sources = (recipe_name != NULL) + (keras != NULL) + (torch != NULL) + (config != NULL);
    if (sources > 1) mp_usage_error("amp policy", "give one of --recipe, --keras, --torch and --config");
    if (scaler && !torch) mp_usage_error("amp policy", "--scaler goes with --torch (PyTorch's GradScaler on or off)");
    if (nsets && !config) mp_usage_error("amp policy", "--set goes with --config");
    if (scaler && strcmp(scaler, "on") != 0 && strcmp(scaler, "off") != 0)
        MP_FAIL("--scaler on or off", "--scaler '%s'", scaler);

    amp_setup setup;
    bool have_setup = true;
    if (keras) {
        amp_recipe_from_keras(keras, &setup, NULL);
    } else if (torch) {
        amp_recipe_from_torch(torch, scaler && strcmp(scaler, "on") == 0, &setup, NULL);
    } else if (config) {
        train_config cfg;
        config_load(config, sets, nsets, 1, &cfg, NULL);
        amp_recipe_from_config(&cfg, &setup, NULL);
    } else if (recipe_name) {
        int r = amp_recipe_from_name(recipe_name);
        if (r < 0) MP_FAIL_HINT("a recipe name", AMP_RECIPE_NAMES, "--recipe '%s'", recipe_name);
        setup.recipe = (amp_recipe)r;
        setup.scaler = amp_scaler_defaults(amp_recipe_get(setup.recipe)->scaler);
        have_setup = false;
    } else {
        if (noverrides) mp_usage_error("amp policy", "--op needs a recipe (--recipe R)");
        print_all_policies();
        return 0;
    }
    amp_policy p;
    amp_policy_init(&p, setup.recipe);
    for (int k = 0; k < noverrides; k++) amp_policy_override(&p, overrides[k], NULL);
    if (have_setup) printf("%s -> recipe %s\n", setup.source, amp_recipe_get(setup.recipe)->name);
    print_scaler_config(&setup.scaler);
    print_one_policy(&p);
    return 0;
}

/* ------------------------------------------------------------------ scaler-trace */

typedef enum { STEP_CLEAN, STEP_INF, STEP_NEG_INF, STEP_NAN } step_event;
static const char *const EVENT_NAMES[] = {"clean", "inf", "-inf", "nan"};

typedef struct {
    step_event *steps;
    long n, cap;
} step_list;

enum { MAX_TRACE_STEPS = 10000000 };

static void push_step(step_list *l, step_event e, const char *pattern) {
    if (l->n >= MAX_TRACE_STEPS)
        MP_FAIL("a pattern of at most 10,000,000 steps", "more in '%s'", pattern);
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->steps = realloc(l->steps, (size_t)l->cap * sizeof *l->steps);
        MP_ASSERT(l->steps, "out of memory");
    }
    l->steps[l->n++] = e;
}

/* A small recursive-descent reader: sequence := item*; item := (letter | '(' sequence ')') ['*' count]. */
typedef struct {
    const char *text, *p;
} pattern_reader;

static _Noreturn void pattern_error(const pattern_reader *r, const char *what) {
    MP_FAIL_HINT("a step pattern: C (clean), O (+inf), M (-inf), N (NaN), X*K, (GROUP)*K, separated by spaces",
                 "example: \"C*2000 O C*5 O O O\"", "%s at position %d of '%s'", what, (int)(r->p - r->text) + 1,
                 r->text);
}

static void skip_spaces(pattern_reader *r) {
    while (*r->p == ' ' || *r->p == '\t' || *r->p == ',') r->p++;
}

static long read_repeat(pattern_reader *r) {
    skip_spaces(r);
    if (*r->p != '*') return 1;
    r->p++;
    skip_spaces(r);
    char *end;
    long k = strtol(r->p, &end, 10);
    if (end == r->p || k < 1 || k > MAX_TRACE_STEPS) pattern_error(r, "a repeat count of 1 .. 10000000 expected");
    r->p = end;
    return k;
}

static void read_sequence(pattern_reader *r, step_list *out, int depth) {
    if (depth > 16) pattern_error(r, "groups nested too deep");
    for (;;) {
        skip_spaces(r);
        char c = *r->p;
        if (c == '\0' || c == ')') return;
        long start = out->n;
        if (c == '(') {
            r->p++;
            read_sequence(r, out, depth + 1);
            if (*r->p != ')') pattern_error(r, "')' expected");
            r->p++;
        } else {
            static const char letters[] = "COMN";
            const char *at = strchr(letters, c >= 'a' && c <= 'z' ? c - 32 : c);
            if (!at || !c) pattern_error(r, "a step letter expected");
            r->p++;
            push_step(out, (step_event)(at - letters), r->text);
        }
        long k = read_repeat(r), len = out->n - start;
        if (len && (double)len * (double)k > MAX_TRACE_STEPS) pattern_error(r, "too many steps");
        for (long rep = 1; rep < k; rep++)
            for (long j = 0; j < len; j++) push_step(out, out->steps[start + j], r->text);
    }
}

static step_list parse_pattern(const char *text) {
    pattern_reader r = {text, text};
    step_list l = {0};
    read_sequence(&r, &l, 0);
    if (*r.p == ')') pattern_error(&r, "')' without '('");
    if (l.n == 0) pattern_error(&r, "no steps");
    return l;
}

/* The state columns of a kind. */
static void state_header(amp_scaler_kind kind) {
    if (kind == AMP_SCALER_PYTORCH || kind == AMP_SCALER_KERAS) printf("  %8s", "tracker");
    if (kind == AMP_SCALER_DEEPSPEED) printf("  %10s  %14s", "hysteresis", "since overflow");
}

static void state_columns(const amp_scaler *s) {
    amp_scaler_kind kind = s->cfg.kind;
    if (kind == AMP_SCALER_PYTORCH || kind == AMP_SCALER_KERAS) printf("  %8d", s->growth_tracker);
    /* What the window rule compared at this update: (iter - last_overflow_iter), iter being this update's. */
    if (kind == AMP_SCALER_DEEPSPEED) printf("  %10d  %14ld", s->hysteresis_left, s->iter - 1 - s->last_overflow_iter);
}

static int cmd_scaler_trace(int argc, char **argv) {
    amp_scaler_kind kind = AMP_SCALER_PYTORCH;
    const char *words[256];
    int nwords = 0;
    bool all = false, tsv = false;
    /* Options are applied after the kind's defaults, so their order does not matter. */
    struct {
        bool init, power, interval, growth, backoff, hysteresis, consecutive, min;
    } given = {0};
    double init = 0, growth = 0, backoff = 0, min_scale = 0;
    int power = 0, interval = 0, hysteresis = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *cmd = "amp scaler-trace";
        if (strcmp(a, "--kind") == 0) {
            const char *name = option_value(cmd, argc, argv, &i);
            int k = amp_scaler_kind_from_name(name);
            if (k < 0) MP_FAIL_HINT("a loss scaler kind", AMP_SCALER_KIND_NAMES, "--kind '%s'", name);
            kind = (amp_scaler_kind)k;
        } else if (strcmp(a, "--init-scale") == 0) {
            init = number_arg(a, option_value(cmd, argc, argv, &i));
            given.init = true;
        } else if (strcmp(a, "--init-scale-power") == 0) {
            power = int_arg(a, option_value(cmd, argc, argv, &i), 0, 127);
            given.power = true;
        } else if (strcmp(a, "--growth-interval") == 0 || strcmp(a, "--window") == 0) {
            interval = int_arg(a, option_value(cmd, argc, argv, &i), 1, 1000000000);
            given.interval = true;
        } else if (strcmp(a, "--growth-factor") == 0) {
            growth = number_arg(a, option_value(cmd, argc, argv, &i));
            given.growth = true;
        } else if (strcmp(a, "--backoff-factor") == 0) {
            backoff = number_arg(a, option_value(cmd, argc, argv, &i));
            given.backoff = true;
        } else if (strcmp(a, "--hysteresis") == 0) {
            hysteresis = int_arg(a, option_value(cmd, argc, argv, &i), 1, 1000000);
            given.hysteresis = true;
        } else if (strcmp(a, "--consecutive-hysteresis") == 0) {
            given.consecutive = true;
        } else if (strcmp(a, "--min-scale") == 0) {
            min_scale = number_arg(a, option_value(cmd, argc, argv, &i));
            given.min = true;
        } else if (strcmp(a, "--all") == 0) {
            all = true;
        } else if (strcmp(a, "--tsv") == 0) {
            tsv = true;
        } else if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strncmp(a, "--", 2) == 0) {
            mp_usage_error(cmd, "unknown option '%s' (mixpar amp --help)", a);
        } else {
            if (nwords == 256) mp_usage_error(cmd, "at most 256 pattern words");
            words[nwords++] = a;
        }
    }
    if (nwords == 0) mp_usage_error("amp scaler-trace", "a PATTERN is needed, such as \"C*2000 O C*5 O O O\"");

    amp_scaler_config cfg = amp_scaler_defaults(kind);
    bool dynamic = kind == AMP_SCALER_PYTORCH || kind == AMP_SCALER_KERAS || kind == AMP_SCALER_DEEPSPEED;
    const char *kname = amp_scaler_kind_get(kind)->name;
    if (given.init && given.power)
        mp_usage_error("amp scaler-trace", "give --init-scale or --init-scale-power, not both");
    bool growth_backoff = kind == AMP_SCALER_PYTORCH || kind == AMP_SCALER_KERAS;
    if ((given.interval && !dynamic) || ((given.growth || given.backoff) && !growth_backoff) ||
        ((given.hysteresis || given.consecutive || given.min) && kind != AMP_SCALER_DEEPSPEED))
        mp_usage_error("amp scaler-trace", "an option given does not apply to the %s scaler (mixpar amp --help)",
                       kname);
    if (given.init) cfg.init_scale = init;
    if (given.power) cfg.init_scale = ldexp(1.0, power);
    if (given.interval) cfg.growth_interval = interval;
    if (given.growth) cfg.growth_factor = growth;
    if (given.backoff) cfg.backoff_factor = backoff;
    if (given.hysteresis) cfg.hysteresis = hysteresis;
    if (given.consecutive) cfg.consecutive_hysteresis = true;
    if (given.min) cfg.min_scale = min_scale;
    amp_scaler_config_check(&cfg, NULL);

    char joined[8192] = "";
    for (int w = 0; w < nwords; w++) {
        if (strlen(joined) + strlen(words[w]) + 2 >= sizeof joined) MP_FAIL("a pattern of at most 8 KB", "longer");
        if (w) strcat(joined, " ");
        strcat(joined, words[w]);
    }
    step_list steps = parse_pattern(joined);

    amp_scaler s;
    amp_scaler_init(&s, &cfg);
    if (tsv) {
        printf("# step\tgrads\tscale\tskipped\tnext_scale\ttracker\thysteresis\tstatus\n");
    } else {
        print_scaler_config(&cfg);
        printf("pattern: %s (%ld steps)\n\n%6s  %-5s  %12s  %-7s  %12s", joined, steps.n, "step", "grads", "scale",
               "skipped", "next scale");
        state_header(kind);
        printf("  note\n");
    }
    /* A tiny "gradient": what backward would leave, scaled by S, with the step's bad value in it. */
    long folded = 0, fold_first = 0, skipped = 0;
    float fold_scale = 0;
    for (long k = 0; k < steps.n; k++) {
        float S = amp_scaler_scale(&s);
        float grads[4] = {1e-3f * S, -2.5e-4f * S, 3e-6f * S, 0.0f};
        static const float bad[] = {0, INFINITY, -INFINITY, NAN};
        if (steps.steps[k] != STEP_CLEAN) grads[1] = bad[steps.steps[k]];
        clip_span span = {grads, 4};
        bool found_inf = amp_scaler_unscale(&s, &span, 1);
        amp_update u = amp_scaler_update(&s, found_inf);
        skipped += u.skipped;
        if (tsv) {
            printf("%ld\t%s\t%.9g\t%d\t%.9g\t%d\t%d\t%s\n", k + 1, EVENT_NAMES[steps.steps[k]], (double)u.scale,
                   u.skipped, (double)u.next_scale, s.growth_tracker, s.hysteresis_left,
                   amp_scaler_status_name(u.status));
        } else {
            bool eventful = all || k == 0 || k == steps.n - 1 || found_inf || u.next_scale != u.scale ||
                            u.status != AMP_SCALER_OK || (k + 1 < steps.n && steps.steps[k + 1] != STEP_CLEAN);
            if (!eventful) {
                if (folded++ == 0) fold_first = k + 1, fold_scale = u.scale;
                continue;
            }
            if (folded)
                printf("%6s  %-5s  %12.9g  (%ld clean steps %ld .. %ld, scale unchanged)\n", "...", "clean",
                       (double)fold_scale, folded, fold_first, k);
            folded = 0;
            char note[640] = "";
            if (found_inf || u.next_scale != u.scale || u.status != AMP_SCALER_OK)
                amp_scaler_explain(&s, &u, note, sizeof note);
            printf("%6ld  %-5s  %12.9g  %-7s  %12.9g", k + 1, EVENT_NAMES[steps.steps[k]], (double)u.scale,
                   u.skipped ? "yes" : "no", (double)u.next_scale);
            state_columns(&s);
            if (amp_scaler_status_is_fatal(u.status)) printf("  STOP (see below)");
            else if (note[0]) printf("  %s", note);
            printf("\n");
        }
        if (amp_scaler_status_is_fatal(u.status)) {
            fflush(stdout);
            free(steps.steps);
            amp_scaler_stop(&s, &u, k + 1);
        }
    }
    if (!tsv)
        printf("\n%ld steps, %ld skipped; final scale %.9g\n", steps.n, skipped, (double)amp_scaler_scale(&s));
    free(steps.steps);
    return 0;
}

/* ------------------------------------------------------------------ underflow */

/* One hist event, as the trainer writes it (core/base/EVENTS.md). */
typedef struct {
    long step;
    int layer;
    double scale;
    long long count, zero, nonfinite;
    int first_binade, nbins;
    long long bins[FP_HIST_NBINS];
    long long exact_underflow[FP_HIST_NTARGETS], exact_subnormal[FP_HIST_NTARGETS];
} hist_event;

static bool json_int(const cJSON *o, const char *key, long long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) return false;
    *out = (long long)v->valuedouble;
    return true;
}

/* Reads the hist events of a file; returns how many (stops with exit 2 on a file that is not an event stream). */
static hist_event *read_hist_events(const char *path, int *count) {
    FILE *f = fopen(path, "r");
    if (!f)
        MP_FAIL_HINT("a readable events file", "runs/<run>/events.rank0.jsonl, written by mixpar train", "'%s'", path);
    hist_event *events = NULL;
    int n = 0, cap = 0;
    char *line = NULL;
    size_t linecap = 0;
    long lineno = 0;
    while (getline(&line, &linecap, f) > 0) {
        lineno++;
        cJSON *o = cJSON_Parse(line);
        if (!o) {
            if (!feof(f)) MP_FAIL("one JSON object per line", "%s:%ld is not JSON", path, lineno);
            break; /* a truncated last line (a crash mid-write): skipped, as EVENTS.md says */
        }
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
        const cJSON *bins = cJSON_GetObjectItemCaseSensitive(o, "bins");
        const cJSON *tensor = cJSON_GetObjectItemCaseSensitive(o, "tensor");
        if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "hist") != 0 ||
            (cJSON_IsString(tensor) && strcmp(tensor->valuestring, "grad") != 0)) {
            cJSON_Delete(o);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            events = realloc(events, (size_t)cap * sizeof *events);
            MP_ASSERT(events, "out of memory");
        }
        hist_event *e = &events[n];
        memset(e, 0, sizeof *e);
        long long step, layer, first;
        const cJSON *scale = cJSON_GetObjectItemCaseSensitive(o, "scale");
        if (!json_int(o, "step", &step) || !json_int(o, "layer", &layer) || !json_int(o, "count", &e->count) ||
            !json_int(o, "zero", &e->zero) || !json_int(o, "nonfinite", &e->nonfinite) ||
            !json_int(o, "first_binade", &first) || !cJSON_IsArray(bins) || !cJSON_IsNumber(scale) ||
            cJSON_GetArraySize(bins) > FP_HIST_NBINS)
            MP_FAIL("a hist event with step, layer, scale, count, zero, nonfinite, first_binade and bins",
                    "%s:%ld lacks one of them", path, lineno);
        e->step = (long)step;
        e->layer = (int)layer;
        e->scale = scale->valuedouble;
        e->first_binade = (int)first;
        e->nbins = cJSON_GetArraySize(bins);
        int b = 0;
        for (const cJSON *v = bins->child; v; v = v->next) e->bins[b++] = (long long)v->valuedouble;
        const cJSON *targets = cJSON_GetObjectItemCaseSensitive(o, "targets");
        for (int t = 0; t < FP_HIST_NTARGETS; t++) {
            const cJSON *tj = cJSON_GetObjectItemCaseSensitive(targets, fp_hist_target_name((fp_hist_target)t));
            e->exact_underflow[t] = e->exact_subnormal[t] = -1;
            if (tj) {
                json_int(tj, "underflow", &e->exact_underflow[t]);
                json_int(tj, "subnormal", &e->exact_subnormal[t]);
            }
        }
        n++;
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    *count = n;
    return events;
}

/* What happens to the values of one event when scaled by 2^shift and rounded to format f, from the bins:
 * a value in binade b lands in binade b + shift. Binades at or below emin_sub - 2 round to 0 (below half the
 * smallest subnormal 2^emin_sub); binade emin_sub - 1 rounds to the smallest subnormal except at exactly
 * 2^(emin_sub-1), a tie that goes to the even 0, which bins cannot see; binades up to emin_norm - 1 are
 * subnormal; binades above floor(log2(max)) overflow (the top binade may overflow in part: counted apart). */
typedef struct {
    long long nonzero, flushed, subnormal, overflow, maybe_overflow;
    int max_binade;
} shifted_counts;

static shifted_counts count_shifted(const hist_event *e, const fp_format *f, int shift) {
    int emin_sub = 1 - f->bias - f->mbits, emin_norm = 1 - f->bias;
    int emax;
    frexp(fp_max(f), &emax);
    emax -= 1; /* floor(log2(max)) */
    shifted_counts c = {0};
    c.max_binade = FP_HIST_MIN_BINADE - 1;
    for (int i = 0; i < e->nbins; i++) {
        long long k = e->bins[i];
        if (!k) continue;
        int b = e->first_binade + i + shift;
        c.nonzero += k;
        c.max_binade = b;
        if (b <= emin_sub - 2) c.flushed += k;
        else if (b <= emin_norm - 1) c.subnormal += k;
        else if (b > emax) c.overflow += k;
        else if (b == emax) c.maybe_overflow += k;
    }
    return c;
}

static const char *layer_label(int layer, int L, char *buf, size_t len) {
    if (layer < 0) snprintf(buf, len, "embeddings");
    else if (layer >= L) snprintf(buf, len, "lnf+head");
    else snprintf(buf, len, "block %d", layer);
    return buf;
}

/* floor(log2(max)) of a format: its top binade (15 for fp16: 65504 = 1.999 * 2^15). */
static int top_binade(const fp_format *f) {
    int e;
    frexp(fp_max(f), &e);
    return e - 1;
}

/* "2^16" for a power of two, else the number. */
static const char *fmt_scale(double scale, char *buf, size_t len) {
    int e;
    if (frexp(scale, &e) == 0.5) snprintf(buf, len, "2^%d", e - 1);
    else snprintf(buf, len, "%g", scale);
    return buf;
}

/* --bins: the step's histograms side by side, one row per binade (as recorded), one column per layer. */
static void print_bins(const hist_event *events, int n, long step, int L, const char *path) {
    int lo = FP_HIST_MAX_BINADE + 1, hi = FP_HIST_MIN_BINADE - 1, shown = 0;
    for (int i = 0; i < n; i++)
        if (events[i].step == step && events[i].nbins > 0) {
            lo = events[i].first_binade < lo ? events[i].first_binade : lo;
            int top = events[i].first_binade + events[i].nbins - 1;
            hi = top > hi ? top : hi;
        }
    printf("# binade\tall");
    for (int i = 0; i < n; i++)
        if (events[i].step == step) {
            char label[32];
            printf("\t%s", layer_label(events[i].layer, L, label, sizeof label));
            shown++;
        }
    if (!shown) MP_FAIL("a step that has hist events", "step %ld: none in '%s'", step, path);
    printf("\t(counts of nonzero gradients per binade at step %ld, scale %g)\n", step, events[0].scale);
    for (int b = lo; b <= hi; b++) {
        long long counts[64], all = 0;
        int ncols = 0;
        for (int i = 0; i < n && ncols < 64; i++)
            if (events[i].step == step) {
                int k = b - events[i].first_binade;
                counts[ncols] = k >= 0 && k < events[i].nbins ? events[i].bins[k] : 0;
                all += counts[ncols++];
            }
        printf("%d\t%lld", b, all);
        for (int c = 0; c < ncols; c++) printf("\t%lld", counts[c]);
        printf("\n");
    }
}

static double share(long long part, long long whole) { return whole ? 100.0 * (double)part / (double)whole : 0; }

static int cmd_underflow(int argc, char **argv) {
    const char *path = NULL, *step_arg = "last", *format_name = "fp16";
    double scale = 65536;
    bool tsv = false, bins = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *cmd = "amp underflow";
        if (strcmp(a, "--scale") == 0) scale = number_arg(a, option_value(cmd, argc, argv, &i));
        else if (strcmp(a, "--step") == 0) step_arg = option_value(cmd, argc, argv, &i);
        else if (strcmp(a, "--format") == 0) format_name = option_value(cmd, argc, argv, &i);
        else if (strcmp(a, "--tsv") == 0) tsv = true;
        else if (strcmp(a, "--bins") == 0) bins = true;
        else if (strcmp(a, "--help") == 0) return usage(stdout), 0;
        else if (strncmp(a, "--", 2) == 0) mp_usage_error(cmd, "unknown option '%s' (mixpar amp --help)", a);
        else if (path) mp_usage_error(cmd, "one EVENTS file, not '%s' too", a);
        else path = a;
    }
    if (!path) mp_usage_error("amp underflow", "an EVENTS file is needed (runs/<run>/events.rank0.jsonl)");
    int exp2;
    if (!(scale > 0) || !isfinite(scale) || frexp(scale, &exp2) != 0.5)
        MP_FAIL_HINT("--scale: a power of two, such as 1, 1024 or 65536",
                     "only a power of two moves every value by whole binades, which is what the histogram can show",
                     "--scale %g", scale);
    const fp_format *f = fp_format_by_name(format_name);
    int target = -1;
    for (int t = 0; t < FP_HIST_NTARGETS; t++)
        if (f && fp_hist_target_format((fp_hist_target)t) == f) target = t;
    if (target < 0) MP_FAIL("--format fp16, bf16, e4m3, e5m2 or tf32", "--format '%s'", format_name);

    int n;
    hist_event *events = read_hist_events(path, &n);
    if (n == 0)
        MP_FAIL_HINT("hist events in the file", "train with train.hist_interval > 0 (--set train.hist_interval=10)",
                     "none in '%s'", path);
    long step;
    if (strcmp(step_arg, "last") == 0) step = events[n - 1].step;
    else if (strcmp(step_arg, "first") == 0) step = events[0].step;
    else {
        int64_t v;
        if (!parse_i64(step_arg, &v)) MP_FAIL("--step N, first or last", "--step '%s'", step_arg);
        step = (long)v;
    }
    int L = -1;
    for (int i = 0; i < n; i++) L = events[i].layer > L ? events[i].layer : L; /* the head's layer is L */
    if (bins) {
        print_bins(events, n, step, L, path);
        free(events);
        return 0;
    }

    int shown = 0;
    shifted_counts total1 = {0}, totalS = {0};
    long long total_exact = 0;
    bool exact_known = true;
    for (int i = 0; i < n; i++) {
        const hist_event *e = &events[i];
        if (e->step != step) continue;
        int e_exp;
        if (!(e->scale > 0) || frexp(e->scale, &e_exp) != 0.5)
            MP_FAIL("hist events recorded at a power-of-two scale", "step %ld layer %d at scale %g", e->step, e->layer,
                    e->scale);
        int shift = (exp2 - 1) - (e_exp - 1); /* log2(S) - log2(the event's scale) */
        shifted_counts c1 = count_shifted(e, f, 0), cS = count_shifted(e, f, shift);
        char label[32], s1[24], s2[24];
        layer_label(e->layer, L, label, sizeof label);
        if (shown == 0 && tsv) {
            printf("# layer\tnonzero\tflushed_%%_at_%g\tsubnormal_%%_at_%g\tflushed_%%_at_%g\tsubnormal_%%_at_%g\t"
                   "overflow_at_%g\n", e->scale, e->scale, scale, scale, scale);
        } else if (shown == 0) {
            printf("%s at loss scale %.9g (as recorded) and %.9g (2^%d: every value moves up %d binades), "
                   "step %ld of %s\n"
                   "shares of the nonzero gradients; flushed = rounds to 0, subnormal = keeps fewer than %d bits;\n"
                   "top = the highest binade after scaling (%s overflows from binade %d up)\n\n",
                   f->name, e->scale, scale, exp2 - 1, shift, step, path, f->mbits + 1, f->name, top_binade(f) + 1);
            char h[7][32];
            fmt_scale(e->scale, s1, sizeof s1);
            fmt_scale(scale, s2, sizeof s2);
            snprintf(h[0], sizeof h[0], "flushed@%s", s1);
            snprintf(h[1], sizeof h[1], "exact@%s", s1);
            snprintf(h[2], sizeof h[2], "subnormal@%s", s1);
            snprintf(h[3], sizeof h[3], "flushed@%s", s2);
            snprintf(h[4], sizeof h[4], "subnormal@%s", s2);
            snprintf(h[5], sizeof h[5], "overflow@%s", s2);
            snprintf(h[6], sizeof h[6], "top@%s", s2);
            printf("%-11s %8s %11s %11s %12s %12s %14s %13s %8s\n", "layer", "nonzero", h[0], h[1], h[2], h[3], h[4],
                   h[5], h[6]);
        }
        if (tsv) {
            printf("%s\t%lld\t%.6f\t%.6f\t%.6f\t%.6f\t%lld\n", label, c1.nonzero, share(c1.flushed, c1.nonzero),
                   share(c1.subnormal, c1.nonzero), share(cS.flushed, cS.nonzero), share(cS.subnormal, cS.nonzero),
                   cS.overflow);
        } else {
            char exact[24] = "-";
            if (e->exact_underflow[target] >= 0)
                snprintf(exact, sizeof exact, "%.3f%%", share(e->exact_underflow[target], c1.nonzero));
            printf("%-11s %8lld %10.3f%% %11s %11.3f%% %11.3f%% %13.3f%% %13lld %8d%s\n", label, c1.nonzero,
                   share(c1.flushed, c1.nonzero), exact, share(c1.subnormal, c1.nonzero), share(cS.flushed, cS.nonzero),
                   share(cS.subnormal, cS.nonzero), cS.overflow, cS.max_binade,
                   cS.maybe_overflow ? " (+ some in the top binade)" : "");
        }
        total1.nonzero += c1.nonzero, total1.flushed += c1.flushed, total1.subnormal += c1.subnormal;
        totalS.flushed += cS.flushed, totalS.subnormal += cS.subnormal, totalS.overflow += cS.overflow;
        if (shown == 0 || cS.max_binade > totalS.max_binade) totalS.max_binade = cS.max_binade;
        if (e->exact_underflow[target] >= 0) total_exact += e->exact_underflow[target];
        else exact_known = false;
        shown++;
    }
    if (shown == 0) MP_FAIL("a step that has hist events", "--step %s: none in '%s'", step_arg, path);
    if (!tsv) {
        char exact[24] = "-";
        if (exact_known) snprintf(exact, sizeof exact, "%.3f%%", share(total_exact, total1.nonzero));
        printf("%-11s %8lld %10.3f%% %11s %11.3f%% %11.3f%% %13.3f%% %13lld %8d\n", "all", total1.nonzero,
               share(total1.flushed, total1.nonzero), exact, share(total1.subnormal, total1.nonzero),
               share(totalS.flushed, total1.nonzero), share(totalS.subnormal, total1.nonzero), totalS.overflow,
               totalS.max_binade);
        printf("\n(exact): the trainer's own count, rounding every value; the bins cannot see a value of exactly\n"
               "half the smallest subnormal, which rounds to 0 (a tie, to even), so the two may differ by those.\n");
    }
    free(events);
    return 0;
}

/* ------------------------------------------------------------------ dispatch */

int cmd_amp(int argc, char **argv) {
    if (argc < 1) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[0], "policy") == 0) return cmd_policy(argc - 1, argv + 1);
    if (strcmp(argv[0], "scaler-trace") == 0) return cmd_scaler_trace(argc - 1, argv + 1);
    if (strcmp(argv[0], "underflow") == 0) return cmd_underflow(argc - 1, argv + 1);
    mp_usage_error("amp", "unknown command '%s': policy, scaler-trace or underflow (mixpar amp --help)", argv[0]);
}
