/* cmd_plan.c: `mixpar plan`: the memory planner's command line: options, tables, --explain, --json, --tsv. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/parse.h"
#include "cli/commands.h"
#include "plan/plan.h"
#include "plan/parallel.h"
#include "dist/pp.h"

/* ================================================================== usage */

static void usage(FILE *out) {
    fprintf(out,
            "usage: mixpar plan [MODEL] [RUN] [OUTPUT]\n"
            "Memory one rank needs to train a transformer: weights, gradients, fp32 master weights, optimizer\n"
            "states and activations, under a precision recipe and a ZeRO stage (course lab 01).\n"
            "\n"
            "model (default: --preset gpt2-124m)\n"
            "  --preset NAME      ");
    for (int i = 0; i < plan_preset_count(); i++) fprintf(out, "%s%s", i ? ", " : "", plan_preset_at(i)->name);
    fprintf(out,
            "\n"
            "  --arch gpt2|llama  gpt2: LayerNorm, biases, GELU MLP, learned positions, tied head, dropout;\n"
            "                     llama: RMSNorm, no biases, SwiGLU MLP, rotary positions, untied head\n"
            "  --layers L --hidden h --heads a --kv-heads g --ffn F --vocab V --context T\n"
            "                     describe a model (a custom one needs --layers, --hidden and --heads), or\n"
            "                     change a preset; F follows h and g follows a unless given\n"
            "  --tied | --untied  output head shares the token embedding, or has its own V x h matrix\n"
            "  --params COUNT     plan model states for a bare parameter count (7.5B, 124M): no activations\n"
            "\n"
            "run\n"
            "  --recipe R         precision recipe (default bf16-mixed):\n");
    for (int r = 0; r < PLAN_NRECIPES; r++)
        fprintf(out, "                       %-11s %s\n", plan_recipe_get(r)->name, plan_recipe_get(r)->summary);
    fprintf(out, "  --optimizer O      (default adamw)\n");
    for (int o = 0; o < PLAN_NOPTIMIZERS; o++)
        fprintf(out, "                       %-11s %s\n", plan_optimizer_get(o)->name, plan_optimizer_get(o)->summary);
    fprintf(out,
            "  --zero S           ZeRO stage 0 (plain data parallel), 1 (shard optimizer states and master\n"
            "                     weights), 2 (also gradients), 3 (also weights); 'all' for a table of the four\n"
            "  --world N          data-parallel ranks the shards are split over (default 1)\n"
            "  --tp N --pp N      tensor and pipeline parallel sizes: a table of the pipeline's stages, bytes\n"
            "                     per rank of each and the bubble (p-1)/(m+p-1) (--world is then dp)\n"
            "  --sp               sequence parallel over the tp ranks (Megatron's --sequence-parallel): the norms',\n"
            "                     residual's and dropout's activations split over the sequence too (--seq\n"
            "                     divisible by --tp)\n"
            "  --course-model     plan the activations of the course's own model (core/model: fp32, no dropout,\n"
            "                     its norm statistics and backward scratch), what `mixpar train` measures\n"
            "  --micro-batches M  micro-batches per step under pipeline parallel (default 1)\n"
            "  --schedule S       gpipe (holds all M micro-batches), 1f1b (at most pp; default) or\n"
            "                     interleaved (with --chunks V model chunks per stage: bubble / V)\n"
            "  --batch b          micro-batch per rank, in sequences (default 1)\n"
            "  --seq s            tokens per sequence (default: the model's context T)\n"
            "  --recompute P      none (default) | selective (drop attention scores) | full (keep block inputs)\n"
            "  --dropout on|off   dropout masks kept for backward (default: on for gpt2, off for llama)\n"
            "  --offload          ZeRO-Offload: fp32 master weights and optimizer states (with an fp32 gradient\n"
            "                     buffer) of the rank's partition in host memory; shows device and host bytes\n"
            "  --device-memory M  say whether the plan fits in M bytes per rank: 24GB, 80GiB (GB = 1e9, GiB = 2^30)\n"
            "\n"
            "compute budget (any of these adds it: FLOPs = 6 N D + 12 L s h D, time = FLOPs / (G x peak x MFU))\n"
            "  --tokens D         training tokens: 300B, 1T, 2e12 (default: Chinchilla's 20 per parameter)\n"
            "  --gpus G           GPUs training together (default 1)\n"
            "  --peak P           dense FLOP/s of one GPU in the training format: 312T (A100 bf16, the default),\n"
            "                     989T (H100 SXM bf16), 1.98e15\n"
            "  --mfu U            model FLOPs utilisation, 0 < U <= 1 (default 0.4)\n"
            "\n"
            "output\n"
            "  --presets          one row per preset, for this run setting\n"
            "  --explain          the formulas with this plan's numbers, and what is not counted\n"
            "\n"
            "a run's own plan\n"
            "  --config FILE [--world N] [--set key=value ...]\n"
            "                     the bytes per rank and tag a training run of this config records in its header\n"
            "                     and is measured against: ZeRO-3/FSDP's gathered units at their worst, the cast\n"
            "                     cache and 16-bit activations included; no other option goes with it\n"
            "  --json             machine-readable: one object, or {\"plans\": [...]} for a table\n"
            "  --tsv              tab-separated rows with a '#' header, for gnuplot\n"
            "\n"
            "examples\n"
            "  mixpar plan --preset llama-1b --device-memory 24GB\n"
            "  mixpar plan --params 7.5B --world 64 --zero all --recipe fp16-mixed --optimizer adam\n"
            "  mixpar plan --presets --recompute selective\n"
            "  mixpar plan --preset llama-7b --tokens 1T --gpus 2048 --mfu 0.5\n");
}

/* ================================================================== options */

typedef enum { MODE_SINGLE, MODE_ZERO_TABLE, MODE_PRESET_TABLE } plan_mode;
typedef enum { OUT_TABLE, OUT_JSON, OUT_TSV } plan_output;

typedef struct {
    /* model: what the user named; 0 / -1 / NULL = not given */
    const char *preset;
    int arch, tied;
    uint64_t layers, hidden, heads, kv_heads, ffn, vocab, context;
    uint64_t bare_params;
    /* run */
    int recipe, optimizer, recompute, dropout, zero;
    int offload;
    int sequence_parallel, course_model; /* --sp, --course-model */
    uint64_t world, batch, seq;
    uint64_t tp, pp, micro_batches, chunks; /* model parallel (0 = not given) */
    int schedule;                   /* dist/pp.h's; -1 = not given */
    double device_memory; /* bytes; 0 = not given */
    const char *device_memory_text;
    /* compute budget: shown when any is given */
    bool budget;
    plan_budget_in budget_in;
    /* output */
    plan_mode mode;
    plan_output output;
    bool explain;
} plan_options;

static uint64_t parse_positive(const char *opt, const char *text) {
    uint64_t v;
    if (!parse_u64(text, &v))
        MP_FAIL_HINT("a whole number", "write it in digits, e.g. 2048", "%s '%s'", opt, text);
    if (v == 0) MP_FAIL("a number of at least 1", "%s 0", opt);
    return v;
}

static int parse_choice(const char *opt, const char *text, int (*from_name)(const char *), const char *choices) {
    int v = from_name(text);
    if (v < 0) {
        char expected[200];
        snprintf(expected, sizeof expected, "one of: %s", choices);
        MP_FAIL(expected, "%s '%s'", opt, text);
    }
    return v;
}

static int on_off_from_name(const char *name) {
    if (strcmp(name, "on") == 0) return 1;
    if (strcmp(name, "off") == 0) return 0;
    return -1;
}

/* "a, b, c" from a table of names, for messages. */
static const char *choices_of(const char *(*name_at)(int), int n, char *buf, size_t cap) {
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", name_at(i));
    }
    return buf;
}
static const char *recipe_name_at(int i) { return plan_recipe_get((plan_recipe)i)->name; }
static const char *optimizer_name_at(int i) { return plan_optimizer_get((plan_optimizer)i)->name; }
static const char *recompute_name_at(int i) { return plan_recompute_name((plan_recompute)i); }
static const char *arch_name_at(int i) { return plan_arch_get((plan_arch)i)->name; }
static const char *preset_name_at(int i) { return plan_preset_at(i)->name; }

static const char *on_off_name_at(int i) { return i ? "on" : "off"; }
static const char *schedule_name_at(int i) { return pp_schedule_names[i]; }

/* --tokens, --gpus, --peak, --mfu into *in; false for any other option. Bad values stop with exit 2. */
static bool parse_budget_option(const char *opt, const char *value, plan_budget_in *in) {
    static const struct {
        const char *name;
        size_t field; /* offset of the double in plan_budget_in */
        double min, max;
        const char *expected, *hint;
    } options[] = {
        {"--tokens", offsetof(plan_budget_in, tokens), 1, 1e16, "a token count from 1 to 1e16, with an optional "
         "K/M/B/T suffix", "e.g. --tokens 1T or --tokens 300B (leave it out for 20 tokens per parameter)"},
        {"--gpus", offsetof(plan_budget_in, gpus), 1, 1e7, "a whole number of GPUs from 1 to 1e7", "e.g. --gpus 2048"},
        {"--peak", offsetof(plan_budget_in, peak_flops), 1e6, 1e18, "FLOP/s of one GPU, from 1e6 to 1e18, with an "
         "optional K/M/B/T suffix", "A100 bf16: 312T; H100 SXM bf16: 989T"},
        {"--mfu", offsetof(plan_budget_in, mfu), 1e-6, 1, "a fraction 0 < MFU <= 1", "0.4 is a good large run; "
         "write 40% as 0.4"},
    };
    for (size_t i = 0; i < sizeof options / sizeof *options; i++) {
        if (strcmp(opt, options[i].name) != 0) continue;
        double v;
        bool whole = strcmp(opt, "--gpus") == 0;
        if (!parse_count(value, &v) || !(v >= options[i].min && v <= options[i].max) || (whole && v != floor(v)))
            MP_FAIL_HINT(options[i].expected, options[i].hint, "%s '%s'", opt, value);
        *(double *)((char *)in + options[i].field) = v;
        return true;
    }
    return false;
}

static void parse_options(int argc, char **argv, plan_options *o) {
    memset(o, 0, sizeof *o);
    o->arch = o->tied = o->recipe = o->optimizer = o->recompute = o->dropout = o->zero = o->schedule = -1;
    int presets_table = 0, zero_table = 0, explain = 0, output = OUT_TABLE;
    /* Flags set an int; count options take a whole number >= 1; choice options take a name from a table. */
    const struct {
        const char *name;
        int *field;
        int value;
    } flags[] = {{"--tied", &o->tied, 1},          {"--untied", &o->tied, 0},     {"--presets", &presets_table, 1},
                 {"--explain", &explain, 1},       {"--json", &output, OUT_JSON}, {"--tsv", &output, OUT_TSV},
                 {"--offload", &o->offload, 1},   {"--sp", &o->sequence_parallel, 1},
                 {"--course-model", &o->course_model, 1}};
    const struct {
        const char *name;
        uint64_t *field;
    } counts[] = {{"--layers", &o->layers}, {"--hidden", &o->hidden},     {"--heads", &o->heads},
                  {"--kv-heads", &o->kv_heads}, {"--ffn", &o->ffn},     {"--vocab", &o->vocab},
                  {"--context", &o->context}, {"--world", &o->world},   {"--batch", &o->batch},
                  {"--seq", &o->seq},       {"--tp", &o->tp},           {"--pp", &o->pp},
                  {"--micro-batches", &o->micro_batches}, {"--chunks", &o->chunks}};
    const struct {
        const char *name;
        int *field;
        int (*from_name)(const char *);
        const char *(*name_at)(int);
        int n;
    } choices[] = {{"--arch", &o->arch, plan_arch_from_name, arch_name_at, PLAN_NARCHS},
                   {"--recipe", &o->recipe, plan_recipe_from_name, recipe_name_at, PLAN_NRECIPES},
                   {"--optimizer", &o->optimizer, plan_optimizer_from_name, optimizer_name_at, PLAN_NOPTIMIZERS},
                   {"--recompute", &o->recompute, plan_recompute_from_name, recompute_name_at, PLAN_NRECOMPUTES},
                   {"--dropout", &o->dropout, on_off_from_name, on_off_name_at, 2},
                   {"--schedule", &o->schedule, pp_schedule_from_name, schedule_name_at, PP_NSCHEDULES}};
    static const char *const others[] = {"--preset", "--params", "--zero", "--device-memory",
                                         "--tokens", "--gpus", "--peak", "--mfu"};
    o->budget_in = (plan_budget_in){.tokens = 0, .gpus = 1, .peak_flops = 312e12, .mfu = 0.4};
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

    for (int i = 0; i < argc; i++) {
        char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strncmp(arg, "--", 2) != 0)
            mp_usage_error("plan", "unexpected argument '%s' (options start with --; see --help)", arg);
        /* --opt=value is the same as --opt value */
        char opt[64];
        const char *value = NULL;
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (len >= sizeof opt) mp_usage_error("plan", "unknown option '%s'", arg);
        memcpy(opt, arg, len);
        opt[len] = '\0';
        if (eq) value = eq + 1;

        bool done = false;
        for (size_t f = 0; f < COUNT_OF(flags) && !done; f++)
            if (strcmp(opt, flags[f].name) == 0) {
                if (value) mp_usage_error("plan", "option %s takes no value (found '%s')", opt, arg);
                *flags[f].field = flags[f].value;
                done = true;
            }
        if (done) continue;
        bool known = false;
        for (size_t k = 0; k < COUNT_OF(counts); k++) known |= strcmp(opt, counts[k].name) == 0;
        for (size_t k = 0; k < COUNT_OF(choices); k++) known |= strcmp(opt, choices[k].name) == 0;
        for (size_t k = 0; k < COUNT_OF(others); k++) known |= strcmp(opt, others[k]) == 0;
        if (!known) mp_usage_error("plan", "unknown option '%s'", opt);
        if (!value) {
            if (i + 1 >= argc) mp_usage_error("plan", "option %s needs a value", opt);
            value = argv[++i];
        }

        for (size_t k = 0; k < COUNT_OF(counts) && !done; k++)
            if (strcmp(opt, counts[k].name) == 0) {
                *counts[k].field = parse_positive(opt, value);
                done = true;
            }
        for (size_t k = 0; k < COUNT_OF(choices) && !done; k++)
            if (strcmp(opt, choices[k].name) == 0) {
                char names[200];
                *choices[k].field = parse_choice(opt, value, choices[k].from_name,
                                                 choices_of(choices[k].name_at, choices[k].n, names, sizeof names));
                done = true;
            }
        if (done) continue;
        if (strcmp(opt, "--preset") == 0) {
            plan_model probe;
            if (!plan_preset_find(value, &probe)) {
                char names[400], expected[480];
                snprintf(expected, sizeof expected, "a preset: %s",
                         choices_of(preset_name_at, plan_preset_count(), names, sizeof names));
                MP_FAIL_HINT(expected, "'mixpar plan --presets' compares them; --layers --hidden --heads "
                             "describe any other model", "--preset '%s'", value);
            }
            o->preset = value;
        } else if (strcmp(opt, "--params") == 0) {
            double count;
            if (!parse_count(value, &count) || count < 1 || count > 2.8e17 || count != floor(count))
                MP_FAIL_HINT("a whole parameter count from 1 to 2.8e17, with an optional K/M/B/T suffix",
                             "e.g. --params 7.5B or --params 124439808", "--params '%s'", value);
            o->bare_params = (uint64_t)count;
        } else if (strcmp(opt, "--zero") == 0) {
            int64_t stage;
            if (strcmp(value, "all") == 0)
                zero_table = 1;
            else if (parse_i64(value, &stage) && stage >= 0 && stage <= 3)
                o->zero = (int)stage;
            else
                MP_FAIL_HINT("ZeRO stage 0, 1, 2, 3 or 'all'",
                             "0 = plain data parallel; 1 shards optimizer states and master weights, 2 also "
                             "gradients, 3 also the weights", "--zero '%s'", value);
        } else if (parse_budget_option(opt, value, &o->budget_in)) {
            o->budget = true;
        } else { /* --device-memory */
            if (!parse_bytes(value, &o->device_memory) || o->device_memory < 1)
                MP_FAIL_HINT("a memory size such as 24GB, 80GiB or 16e9", "GB = 1e9 bytes, GiB = 2^30 bytes",
                             "--device-memory '%s'", value);
            o->device_memory_text = value;
        }
    }
#undef COUNT_OF
    o->explain = explain;
    o->output = (plan_output)output;
    if (presets_table && zero_table) mp_usage_error("plan", "choose one of --presets and --zero all");
    o->mode = presets_table ? MODE_PRESET_TABLE : zero_table ? MODE_ZERO_TABLE : MODE_SINGLE;
    bool model_flags = o->arch >= 0 || o->tied >= 0 || o->layers || o->hidden || o->heads || o->kv_heads ||
                       o->ffn || o->vocab || o->context;
    if (o->mode == MODE_PRESET_TABLE && (model_flags || o->preset || o->bare_params))
        mp_usage_error("plan", "--presets plans the built-in models; drop --preset, --params and the model sizes");
    if (o->bare_params && (model_flags || o->preset))
        mp_usage_error("plan", "--params plans a bare parameter count; it cannot be combined with a model "
                       "(--preset, --layers, ...)");
    if (o->bare_params && (o->recompute >= 0 || o->dropout >= 0 || o->batch || o->seq))
        mp_usage_error("plan", "--params has no architecture, so no activations: drop --batch, --seq, "
                       "--recompute and --dropout, or describe the model instead");
    if (o->explain && o->mode != MODE_SINGLE)
        mp_usage_error("plan", "--explain explains one plan; drop --presets or --zero all");
    if (o->explain && o->output != OUT_TABLE) mp_usage_error("plan", "--explain goes with the table output");
    bool parallel = o->tp || o->pp || o->micro_batches || o->chunks || o->schedule >= 0 || o->sequence_parallel ||
                    o->course_model;
    if ((o->chunks > 1) != (o->schedule == PP_INTERLEAVED))
        mp_usage_error("plan", "--schedule interleaved and --chunks V (>= 2 model chunks per stage) go together");
    if (parallel && (o->mode != MODE_SINGLE || o->bare_params || o->explain || o->output != OUT_TABLE || o->offload))
        mp_usage_error("plan", "--tp, --pp, --micro-batches, --schedule, --sp and --course-model plan one model's stages as a table: drop "
                       "--presets, --zero all, --params, --explain, --json, --tsv and --offload");
}

/* The model the options describe: a preset with changes, a custom model, or gpt2-124m by default. */
static plan_model build_model(const plan_options *o) {
    plan_model m;
    bool custom = !o->preset && (o->layers || o->hidden || o->heads || o->arch >= 0);
    if (custom) {
        if (!o->layers || !o->hidden || !o->heads)
            MP_FAIL_HINT("a custom model with --layers, --hidden and --heads (the rest have defaults)",
                         "or start from a preset and change what differs: --preset gpt2-124m --layers 6",
                         "--layers %llu --hidden %llu --heads %llu (0 = not given)", (unsigned long long)o->layers,
                         (unsigned long long)o->hidden, (unsigned long long)o->heads);
        plan_arch arch = o->arch >= 0 ? (plan_arch)o->arch : PLAN_ARCH_GPT2;
        const plan_arch_info *info = plan_arch_get(arch);
        m = (plan_model){.arch = arch, .layers = o->layers, .hidden = o->hidden, .heads = o->heads,
                         .kv_heads = o->heads, .ffn = plan_default_ffn(arch, o->hidden), .vocab = info->vocab,
                         .context = o->seq ? o->seq : info->context, .tied_head = info->tied_head};
        snprintf(m.name, sizeof m.name, "custom");
    } else {
        plan_preset_find(o->preset ? o->preset : "gpt2-124m", &m);
        bool gqa = m.kv_heads != m.heads;
        if (o->arch >= 0 && o->arch != (int)m.arch) {
            m.arch = (plan_arch)o->arch;
            m.tied_head = plan_arch_get(m.arch)->tied_head;
        }
        if (o->layers) m.layers = o->layers;
        if (o->hidden) m.hidden = o->hidden;
        if (o->heads) m.heads = o->heads;
        if (o->heads && !gqa) m.kv_heads = o->heads;
        if (o->hidden || o->arch >= 0) m.ffn = plan_default_ffn(m.arch, m.hidden);
        if (o->layers || o->hidden || o->heads || o->arch >= 0 || o->kv_heads || o->ffn || o->vocab ||
            o->context || o->tied >= 0) {
            size_t len = strlen(m.name);
            if (len + 1 < sizeof m.name) m.name[len] = '*', m.name[len + 1] = '\0';
        }
    }
    if (o->kv_heads) m.kv_heads = o->kv_heads;
    if (o->ffn) m.ffn = o->ffn;
    if (o->vocab) m.vocab = o->vocab;
    if (o->context) m.context = o->context;
    if (o->tied >= 0) m.tied_head = o->tied;
    plan_problem why;
    if (!plan_model_check(&m, &why)) {
        if (why.hint[0]) MP_FAIL_HINT(why.expected, why.hint, "%s", why.found);
        MP_FAIL(why.expected, "%s", why.found);
    }
    return m;
}

/* The run the options describe for model m (NULL for a bare parameter count). */
static plan_run build_run(const plan_options *o, const plan_model *m) {
    plan_run run = plan_run_defaults(m);
    if (o->recipe >= 0) run.recipe = (plan_recipe)o->recipe;
    if (o->optimizer >= 0) run.optimizer = (plan_optimizer)o->optimizer;
    if (o->recompute >= 0) run.recompute = (plan_recompute)o->recompute;
    if (o->dropout >= 0) run.dropout = o->dropout;
    if (o->zero >= 0) run.zero_stage = o->zero;
    if (o->world) run.world = o->world;
    if (o->batch) run.batch = o->batch;
    if (o->seq) run.seq = o->seq;
    run.offload = o->offload;
    return run;
}

/* ================================================================== formatting */

/* 1234567 -> "1,234,567" into one of a few rotating buffers, so several fit in one printf. */
static const char *commas(uint64_t v) {
    static char bufs[8][32];
    static int next;
    char *out = bufs[next++ % 8];
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
    int j = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) out[j++] = ',';
        out[j++] = digits[i];
    }
    out[j] = '\0';
    return out;
}

static double gb(uint64_t bytes) { return (double)bytes / 1e9; }
static double gib(uint64_t bytes) { return (double)bytes / 1073741824.0; }

static const char *const zero_shards[4] = {"nothing", "optim + master", "+ grads", "+ params"};

static void print_run_line(const plan_model *m, const plan_run *run, const plan_result *r) {
    printf("mixpar plan: %s, %s, %s, ZeRO-%d%s over N = %llu", m ? m->name : "bare parameter count",
           plan_recipe_get(run->recipe)->name, plan_optimizer_get(run->optimizer)->name, run->zero_stage,
           run->offload ? "-Offload" : "", (unsigned long long)run->world);
    if (r->has_activations)
        printf(", micro-batch b = %llu x seq s = %llu, recompute %s, dropout %s", (unsigned long long)run->batch,
               (unsigned long long)run->seq, plan_recompute_name(run->recompute), run->dropout ? "on" : "off");
    printf("\n");
}

static void print_model_line(const plan_model *m) {
    const plan_arch_info *arch = plan_arch_get(m->arch);
    printf("model   %s (%s, %s, %s positions), L = %llu, h = %llu, a = %llu heads", arch->name, arch->norm,
           arch->mlp, arch->learned_positions ? "learned" : "rotary", (unsigned long long)m->layers,
           (unsigned long long)m->hidden, (unsigned long long)m->heads);
    if (m->kv_heads != m->heads) printf(" (g = %llu KV heads)", (unsigned long long)m->kv_heads);
    printf(", F = %llu, V = %llu, T = %llu, %s head\n", (unsigned long long)m->ffn, (unsigned long long)m->vocab,
           (unsigned long long)m->context, m->tied_head ? "tied" : "untied");
}

static void print_fit(uint64_t total, const plan_options *o) {
    if (!o->device_memory) return;
    double device = o->device_memory;
    printf("device  %s = %s bytes per rank: ", o->device_memory_text, commas((uint64_t)device));
    if ((double)total <= device)
        printf("FITS, %.3f GB (%.1f%%) to spare\n", ((double)device - (double)total) / 1e9,
               100.0 * ((double)device - (double)total) / device);
    else
        printf("DOES NOT FIT: %.3f GB more needed (the plan is %.2fx the device)\n",
               ((double)total - device) / 1e9, (double)total / device);
}

/* Offload: the host's share, below the device's total, which it is not part of. */
static void print_host(const plan_run *run, const plan_result *r) {
    uint64_t partition = run->zero_stage >= 1 ? r->shard_elements : r->params;
    uint64_t per_element = partition ? r->bytes[MEM_HOST] / partition : 0;
    printf("%-16s %-18s %7llu %15s %17s %11.3f %11.3f\n", "host (offload)", "fp32 master+grad+K",
           (unsigned long long)per_element, commas(partition), commas(r->bytes[MEM_HOST]), gb(r->bytes[MEM_HOST]),
           gib(r->bytes[MEM_HOST]));
    printf("  (host memory, not the device's: the total above is the device's; per step %s bytes of gradients\n"
           "   go down and %s bytes of weights come up, in the recipe's formats)\n",
           commas(partition * r->per_param[MEM_GRAD]), commas(partition * r->per_param[MEM_PARAM]));
}

/* The compute budget of training m on run->seq-token sequences, with the option's GPUs, peak and MFU. */
static void print_budget(const plan_model *m, const plan_run *run, const plan_options *o) {
    plan_budget b;
    plan_training_budget(m, run->seq, &o->budget_in, &b);
    const plan_budget_in *in = &o->budget_in;
    printf("compute budget  N = %s parameters, D = %.4g tokens (%s), s = %llu\n", commas(b.params), b.tokens,
           in->tokens > 0 ? "--tokens" : "Chinchilla: 20 per parameter", (unsigned long long)run->seq);
    printf("  dense       6 N D        %12.4g FLOPs\n", b.dense_flops);
    printf("  attention   12 L s h D   %12.4g FLOPs  (%.1f%% of the total)\n", b.attention_flops,
           100 * b.attention_flops / b.total_flops);
    printf("  total                    %12.4g FLOPs\n", b.total_flops);
    printf("  time on %.0f GPU%s x %.4g FLOP/s x MFU %.2f: %.4g s = %.2f days (%.4g GPU-hours)\n\n", in->gpus,
           in->gpus == 1 ? "" : "s", in->peak_flops, in->mfu, b.seconds, b.days, b.gpu_hours);
}

static void print_single_table(const plan_model *m, const plan_run *run, const plan_result *r,
                               const plan_options *o) {
    const plan_recipe_info *recipe = plan_recipe_get(run->recipe);
    const plan_optimizer_info *opt = plan_optimizer_get(run->optimizer);
    print_run_line(m, run, r);
    printf("\n");
    if (m) {
        print_model_line(m);
        printf("params  Psi = %s (%s per block)\n", commas(r->params), commas(plan_block_params(m)));
    } else {
        printf("model   a bare parameter count: no architecture, so no activations are planned\n");
        printf("params  Psi = %s\n", commas(r->params));
    }
    printf("\n%-16s %-18s %7s %15s %17s %11s %11s\n", "memory per rank", "kept as", "B/param", "params held",
           "bytes", "GB", "GiB");
    char kept[4][40];
    snprintf(kept[MEM_PARAM], sizeof kept[0], "%s", plan_dtype_name(recipe->weights));
    snprintf(kept[MEM_GRAD], sizeof kept[0], "%s", plan_dtype_name(recipe->grads));
    snprintf(kept[MEM_MASTER], sizeof kept[0], "%s", recipe->master ? "fp32" : "(none)");
    if (opt->states)
        snprintf(kept[MEM_OPTIM], sizeof kept[0], "%u x %s (%s)", opt->states, plan_dtype_name(recipe->states),
                 opt->name);
    else
        snprintf(kept[MEM_OPTIM], sizeof kept[0], "(none: %s)", opt->name);
    if (run->offload) /* their bytes are in the host row below */
        for (int tag = MEM_MASTER; tag <= MEM_OPTIM; tag++) snprintf(kept[tag], sizeof kept[0], "(on the host)");
    uint64_t per_param_total = 0;
    for (int tag = MEM_PARAM; tag <= MEM_OPTIM; tag++) {
        uint64_t held = r->per_param[tag] ? r->bytes[tag] / r->per_param[tag] : 0;
        if (!run->offload || tag < MEM_MASTER) per_param_total += r->per_param[tag]; /* the device's bytes */
        printf("%-16s %-18s %7llu %15s %17s %11.3f %11.3f\n", mem_tag_name((mem_tag)tag), kept[tag],
               (unsigned long long)r->per_param[tag], r->per_param[tag] ? commas(held) : "-", commas(r->bytes[tag]),
               gb(r->bytes[tag]), gib(r->bytes[tag]));
    }
    printf("%-16s %-18s %7llu %15s %17s %11.3f %11.3f\n", "model states", "", (unsigned long long)per_param_total,
           "", commas(r->model_state_bytes), gb(r->model_state_bytes), gib(r->model_state_bytes));
    if (r->has_activations) {
        char act_kept[40];
        snprintf(act_kept, sizeof act_kept, "%s%s", plan_dtype_name(recipe->acts), run->dropout ? " + masks" : "");
        printf("%-16s %-18s %7s %15s %17s %11.3f %11.3f\n", mem_tag_name(MEM_ACT), act_kept, "", "",
               commas(r->act.total), gb(r->act.total), gib(r->act.total));
        printf("  %-14s %llu x %s bytes", "blocks", (unsigned long long)m->layers, commas(r->act.block_kept));
        if (run->recompute == PLAN_RECOMPUTE_FULL)
            printf(" (block inputs) + %s (one block rebuilt)", commas(r->act.working_set));
        else if (run->recompute == PLAN_RECOMPUTE_SELECTIVE)
            printf(" (no attention scores; %s with them)", commas(r->act.block_full));
        printf("\n  %-14s %s bytes (final norm and head inputs, %sfp32 logits %s)\n", "outside blocks",
               commas(r->act.outside), run->dropout ? "embedding dropout mask, " : "",
               commas(4 * run->seq * run->batch * m->vocab));
    }
    printf("%-16s %-18s %7s %15s %17s %11.3f %11.3f\n", "total", "", "", "", commas(r->total_bytes),
           gb(r->total_bytes), gib(r->total_bytes));
    if (r->zero3_gather_bytes)
        printf("  (ZeRO-3 also gathers one block's full weights while it runs: %s bytes more, transient)\n",
               commas(r->zero3_gather_bytes));
    if (run->offload) print_host(run, r);
    printf("\n");
    print_fit(r->total_bytes, o);
    if (o->budget) {
        if (m) print_budget(m, run, o);
        else printf("compute budget  needs a model (its L, h and the sequence length), not a bare --params count\n\n");
    }
    if (!o->explain)
        printf("GB = 10^9 bytes, GiB = 2^30 bytes. 'mixpar plan ... --explain' shows the formulas and what is "
               "not counted.\n");
}

/* ================================================================== --explain */

static void print_explain(const plan_model *m, const plan_run *run, const plan_result *r) {
    const plan_recipe_info *recipe = plan_recipe_get(run->recipe);
    const plan_optimizer_info *opt = plan_optimizer_get(run->optimizer);
    printf("How these numbers are computed\n");
    if (m) {
        const plan_arch_info *arch = plan_arch_get(m->arch);
        uint64_t h = m->hidden, F = m->ffn, V = m->vocab, T = m->context, L = m->layers;
        uint64_t kv = m->kv_heads * (h / m->heads);
        unsigned mats = arch->mlp_matrices, vecs = arch->norm_vectors;
        uint64_t block = plan_block_params(m);
        printf("  parameters (exact)\n");
        printf("    block  = 2h^2 (W_q, W_o) + 2h*g*d (W_k, W_v) + %uhF (%s MLP) + %uh (two %ss)", mats, arch->mlp,
               2 * vecs, arch->norm);
        if (arch->linear_bias)
            printf("\n             + biases: 3h + 2g*d (q, k, v, attention out) + %uF + h (MLP)", mats - 1);
        printf("\n           = 2*%llu^2 + 2*%llu*%llu + %u*%llu*%llu + %u*%llu", (unsigned long long)h,
               (unsigned long long)h, (unsigned long long)kv, mats, (unsigned long long)h, (unsigned long long)F,
               2 * vecs, (unsigned long long)h);
        if (arch->linear_bias) printf(" + %llu", (unsigned long long)(3 * h + 2 * kv + (mats - 1) * F + h));
        printf(" = %s\n", commas(block));
        printf("    model  = V*h (token embedding)%s + L*block + %uh (final %s)%s\n",
               arch->learned_positions ? " + T*h (positions)" : "", vecs, arch->norm,
               m->tied_head ? ", head tied to the embedding (0)" : " + V*h (head)");
        printf("           = %s%s%s + %llu*%s + %s%s%s = %s\n", commas(V * h), arch->learned_positions ? " + " : "",
               arch->learned_positions ? commas(T * h) : "", (unsigned long long)L, commas(block), commas(vecs * h),
               m->tied_head ? "" : " + ", m->tied_head ? "" : commas(V * h), commas(r->params));
    }
    printf("  model states (Rajbhandari et al. 2020, ZeRO)\n");
    printf("    bytes per parameter = weights %llu (%s) + grads %llu (%s) + K, K = master %llu + %u state%s x %u (%s)"
           " = %llu\n", (unsigned long long)r->per_param[MEM_PARAM], plan_dtype_name(recipe->weights),
           (unsigned long long)r->per_param[MEM_GRAD], plan_dtype_name(recipe->grads),
           (unsigned long long)r->per_param[MEM_MASTER], opt->states, opt->states == 1 ? "" : "s",
           plan_dtype_bytes(recipe->states), plan_dtype_name(recipe->states),
           (unsigned long long)(r->per_param[MEM_MASTER] + r->per_param[MEM_OPTIM]));
    static const char *const sharded[4] = {
        "nothing: every rank holds all four states (plain data parallel)",
        "the optimizer states and master weights over the N ranks",
        "the optimizer states, master weights and gradients over the N ranks",
        "all four states, the working weights too, over the N ranks"};
    printf("    ZeRO-%d shards %s;\n", run->zero_stage, sharded[run->zero_stage]);
    printf("    a sharded state is one flat buffer padded to a multiple of N: each rank holds\n"
           "    ceil(Psi/N) = ceil(%s/%llu) = %s of its elements\n", commas(r->params),
           (unsigned long long)run->world, commas(r->shard_elements));
    if (r->has_activations) {
        const plan_arch_info *arch = plan_arch_get(m->arch);
        uint64_t s = run->seq, b = run->batch, h = m->hidden, a = m->heads, F = m->ffn;
        uint64_t kv = m->kv_heads * (h / a);
        unsigned bytes = plan_dtype_bytes(recipe->acts);
        printf("  activations per block (Korthikanti et al. 2022), s = %llu, b = %llu\n", (unsigned long long)s,
               (unsigned long long)b);
        printf("    elements, %u bytes each (%s): 6sbh + 2sb*g*d + %u*sbF + %s*a*s^2*b\n", bytes,
               plan_dtype_name(recipe->acts), arch->mlp_matrices, run->dropout ? "2" : "1");
        uint64_t elements = 6 * s * b * h + 2 * s * b * kv + arch->mlp_matrices * s * b * F +
                            (run->dropout ? 2 : 1) * a * s * s * b;
        printf("      = %s + %s + %s + %s = %s elements = %s bytes\n", commas(6 * s * b * h), commas(2 * s * b * kv),
               commas(arch->mlp_matrices * s * b * F), commas((run->dropout ? 2 : 1) * a * s * s * b),
               commas(elements), commas(elements * bytes));
        if (run->dropout)
            printf("    dropout masks, 1 byte each: 2sbh + a*s^2*b = %s + %s = %s bytes\n", commas(2 * s * b * h),
                   commas(a * s * s * b), commas(2 * s * b * h + a * s * s * b));
        else
            printf("    dropout off: no masks, and the softmax output itself multiplies V (one a*s^2*b tensor)\n");
        printf("    GPT-2 shape, 16-bit, dropout on: sbh(34 + 5as/h) bytes; selective recompute drops the\n"
               "    a*s^2*b terms, full recompute keeps only each block's input (sbh elements) and rebuilds\n"
               "    one block at a time\n");
        printf("    one block: %s bytes; kept under recompute %s: %s per block%s\n", commas(r->act.block_full),
               plan_recompute_name(run->recompute), commas(r->act.block_kept),
               run->recompute == PLAN_RECOMPUTE_FULL ? " + one block's working set" : "");
        printf("    outside the blocks: 2sbh elements (final norm and head inputs)%s\n"
               "      + 4sbV (fp32 logits) = %s bytes\n",
               run->dropout ? " + sbh (embedding dropout mask)" : "", commas(r->act.outside));
    }
    printf("  not counted\n"
           "    activation gradients and temporaries during backward (about one block's worth at a time), GEMM\n"
           "    and attention workspaces, communication buckets, ZeRO-3's gathered weights of the running block,\n"
           "    the loss-scaler and other scalars, the CUDA context (0.3-1 GB) and allocator fragmentation:\n"
           "    leave 10-20%% of the device free.\n"
           "GB = 10^9 bytes, GiB = 2^30 bytes.\n");
}

/* ================================================================== --json and --tsv */

static void json_plan(const plan_model *m, const plan_run *run, const plan_result *r, const plan_options *o,
                      const char *indent) {
    printf("%s{\"model\": ", indent);
    if (m)
        printf("{\"name\": \"%s\", \"arch\": \"%s\", \"layers\": %llu, \"hidden\": %llu, \"heads\": %llu, "
               "\"kv_heads\": %llu, \"ffn\": %llu, \"vocab\": %llu, \"context\": %llu, \"tied_head\": %s}",
               m->name, plan_arch_get(m->arch)->name, (unsigned long long)m->layers, (unsigned long long)m->hidden,
               (unsigned long long)m->heads, (unsigned long long)m->kv_heads, (unsigned long long)m->ffn,
               (unsigned long long)m->vocab, (unsigned long long)m->context, m->tied_head ? "true" : "false");
    else
        printf("null");
    printf(",\n%s \"run\": {\"recipe\": \"%s\", \"optimizer\": \"%s\", \"zero_stage\": %d, \"world\": %llu", indent,
           plan_recipe_get(run->recipe)->name, plan_optimizer_get(run->optimizer)->name, run->zero_stage,
           (unsigned long long)run->world);
    if (run->offload) printf(", \"offload\": true");
    if (r->has_activations)
        printf(", \"batch\": %llu, \"seq\": %llu, \"recompute\": \"%s\", \"dropout\": %s",
               (unsigned long long)run->batch, (unsigned long long)run->seq, plan_recompute_name(run->recompute),
               run->dropout ? "true" : "false");
    printf("},\n%s \"params\": %llu, \"shard_elements\": %llu,\n", indent, (unsigned long long)r->params,
           (unsigned long long)r->shard_elements);
    printf("%s \"bytes_per_param\": {\"param\": %llu, \"grad\": %llu, \"master\": %llu, \"optim\": %llu},\n", indent,
           (unsigned long long)r->per_param[MEM_PARAM], (unsigned long long)r->per_param[MEM_GRAD],
           (unsigned long long)r->per_param[MEM_MASTER], (unsigned long long)r->per_param[MEM_OPTIM]);
    printf("%s \"bytes\": {\"param\": %llu, \"grad\": %llu, \"master\": %llu, \"optim\": %llu, \"act\": %llu, "
           "\"model_states\": %llu, \"total\": %llu}", indent, (unsigned long long)r->bytes[MEM_PARAM],
           (unsigned long long)r->bytes[MEM_GRAD], (unsigned long long)r->bytes[MEM_MASTER],
           (unsigned long long)r->bytes[MEM_OPTIM], (unsigned long long)r->bytes[MEM_ACT],
           (unsigned long long)r->model_state_bytes, (unsigned long long)r->total_bytes);
    if (run->offload) printf(",\n%s \"host_bytes\": %llu", indent, (unsigned long long)r->bytes[MEM_HOST]);
    if (r->has_activations)
        printf(",\n%s \"activations\": {\"block_full\": %llu, \"block_kept\": %llu, \"working_set\": %llu, "
               "\"outside\": %llu, \"total\": %llu}", indent, (unsigned long long)r->act.block_full,
               (unsigned long long)r->act.block_kept, (unsigned long long)r->act.working_set,
               (unsigned long long)r->act.outside, (unsigned long long)r->act.total);
    if (run->zero_stage == 3 && r->has_activations)
        printf(",\n%s \"zero3_gather_bytes\": %llu", indent, (unsigned long long)r->zero3_gather_bytes);
    if (o->device_memory)
        printf(",\n%s \"device_memory\": %.0f, \"fits\": %s", indent, o->device_memory,
               (double)r->total_bytes <= o->device_memory ? "true" : "false");
    printf("}");
}

static void tsv_header(void) {
    printf("#model\trecipe\toptimizer\tzero\tworld\tbatch\tseq\trecompute\tdropout\tparams\t"
           "param\tgrad\tmaster\toptim\tact\ttotal\n");
}

static void tsv_row(const plan_model *m, const plan_run *run, const plan_result *r) {
    printf("%s\t%s\t%s\t%d\t%llu\t%llu\t%llu\t%s\t%s\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\n",
           m ? m->name : "params", plan_recipe_get(run->recipe)->name, plan_optimizer_get(run->optimizer)->name,
           run->zero_stage, (unsigned long long)run->world, (unsigned long long)(r->has_activations ? run->batch : 0),
           (unsigned long long)(r->has_activations ? run->seq : 0), plan_recompute_name(run->recompute),
           run->dropout && r->has_activations ? "on" : "off", (unsigned long long)r->params,
           (unsigned long long)r->bytes[MEM_PARAM], (unsigned long long)r->bytes[MEM_GRAD],
           (unsigned long long)r->bytes[MEM_MASTER], (unsigned long long)r->bytes[MEM_OPTIM],
           (unsigned long long)r->bytes[MEM_ACT], (unsigned long long)r->total_bytes);
}

/* ================================================================== the three modes */

typedef struct {
    plan_model model;
    bool has_model;
    plan_run run;
    plan_result result;
} plan_row;

static void compute_row(plan_row *row) {
    if (row->has_model)
        plan_compute(&row->model, &row->run, &row->result);
    else
        plan_compute_params(row->result.params, &row->run, &row->result);
}

static void print_rows(const plan_row *rows, int n, const plan_options *o) {
    if (o->output == OUT_JSON) {
        printf("{\"plans\": [\n");
        for (int i = 0; i < n; i++) {
            json_plan(rows[i].has_model ? &rows[i].model : NULL, &rows[i].run, &rows[i].result, o, "  ");
            printf("%s\n", i + 1 < n ? "," : "");
        }
        printf("]}\n");
        return;
    }
    if (o->output == OUT_TSV) {
        tsv_header();
        for (int i = 0; i < n; i++)
            tsv_row(rows[i].has_model ? &rows[i].model : NULL, &rows[i].run, &rows[i].result);
        return;
    }
    const plan_run *run = &rows[0].run;
    bool by_stage = o->mode == MODE_ZERO_TABLE;
    bool acts = rows[0].result.has_activations;
    printf("mixpar plan: %s, %s, %s, ", by_stage ? (rows[0].has_model ? rows[0].model.name : "bare parameter count")
                                                 : "presets",
           plan_recipe_get(run->recipe)->name, plan_optimizer_get(run->optimizer)->name);
    if (by_stage)
        printf("ZeRO-0..3");
    else
        printf("ZeRO-%d", run->zero_stage);
    printf(" over N = %llu", (unsigned long long)run->world);
    char seq_text[24] = "T";
    if (o->seq || by_stage) snprintf(seq_text, sizeof seq_text, "%llu", (unsigned long long)run->seq);
    if (acts)
        printf(", micro-batch b = %llu x seq s = %s, recompute %s, dropout %s", (unsigned long long)run->batch,
               seq_text, plan_recompute_name(run->recompute),
               o->dropout < 0 && !by_stage ? "as trained" : (run->dropout ? "on" : "off"));
    printf("\n");
    if (by_stage && rows[0].has_model) print_model_line(&rows[0].model);
    if (by_stage) printf("params  Psi = %s\n", commas(rows[0].result.params));
    printf("\n");
    char fit_head[48] = "";
    if (o->device_memory) snprintf(fit_head, sizeof fit_head, "fits %s?", o->device_memory_text);
    if (by_stage)
        printf("%-6s %-15s", "stage", "shards");
    else
        printf("%-10s %15s", "preset", "params");
    printf(" %9s %9s %9s %9s %9s %10s %10s%s%s\n", "param GB", "grad GB", "master GB", "optim GB", "act GB",
           "total GB", "total GiB", fit_head[0] ? "  " : "", fit_head);
    for (int i = 0; i < n; i++) {
        const plan_result *r = &rows[i].result;
        if (by_stage)
            printf("%-6d %-15s", rows[i].run.zero_stage, zero_shards[rows[i].run.zero_stage]);
        else
            printf("%-10s %15s", rows[i].model.name, commas(r->params));
        printf(" %9.3f %9.3f %9.3f %9.3f", gb(r->bytes[MEM_PARAM]), gb(r->bytes[MEM_GRAD]), gb(r->bytes[MEM_MASTER]),
               gb(r->bytes[MEM_OPTIM]));
        if (acts)
            printf(" %9.3f", gb(r->bytes[MEM_ACT]));
        else
            printf(" %9s", "-");
        printf(" %10.3f %10.3f", gb(r->total_bytes), gib(r->total_bytes));
        if (o->device_memory) {
            double device = o->device_memory, total = (double)r->total_bytes;
            if (total <= device)
                printf("  yes (%.1f GB free)", (device - total) / 1e9);
            else
                printf("  NO (%.1f GB over)", (total - device) / 1e9);
        }
        printf("\n");
    }
    printf("\nGB = 10^9 bytes, GiB = 2^30 bytes; per rank. Totals exclude temporaries, buffers and the CUDA "
           "context (see --explain).\n");
}

/* Tensor and pipeline parallel: one row per stage (plan/parallel.h). */
static void print_parallel(const plan_model *m, const plan_run *run, const plan_options *o) {
    plan_parallel par = {.tp = o->tp ? o->tp : 1, .pp = o->pp ? o->pp : 1,
                         .micro_batches = o->micro_batches ? o->micro_batches : 1, .gpipe = o->schedule == PP_GPIPE,
                         .chunks = o->chunks, .sequence_parallel = o->sequence_parallel && o->tp > 1,
                         .course_model = o->course_model};
    plan_stage stages[par.pp > 4096 ? 1 : par.pp];
    if (par.pp > 4096) MP_FAIL("--pp up to 4096", "--pp %llu", (unsigned long long)par.pp);
    double bubble = plan_parallel_stages(m, run, &par, stages);
    plan_result with_acts = {.has_activations = true};
    print_run_line(m, run, &with_acts);
    print_model_line(m);
    printf("mesh    tp %llu x pp %llu x dp %llu = %llu ranks; %s schedule, m = %llu micro-batches per step\n",
           (unsigned long long)par.tp, (unsigned long long)par.pp, (unsigned long long)run->world,
           (unsigned long long)(par.tp * par.pp * run->world),
           par.gpipe ? "gpipe" : par.chunks > 1 ? "interleaved" : "1f1b",
           (unsigned long long)par.micro_batches);
    uint64_t v = par.chunks > 1 ? par.chunks : 1;
    if (o->sequence_parallel)
        printf("sp      %s\n", par.sequence_parallel
                                   ? "sequence parallel: the norms', residual's and dropout's activations split over the "
                                     "tp ranks' slices of the sequence"
                                   : "sequence parallel ignored: tp 1 has nothing to split (Megatron-LM turns it off too)");
    if (par.course_model)
        printf("acts    the course model's tensors (core/model): fp32, no dropout, norm statistics and backward "
               "scratch, 64-byte aligned\n");
    printf("bubble  (p-1)/(%sm+p-1) = %llu/%llu = %.3f of every stage's step idle%s\n", v > 1 ? "v " : "",
           (unsigned long long)(par.pp - 1), (unsigned long long)(v * par.micro_batches + par.pp - 1), bubble,
           v > 1 ? "" : " (gpipe and 1f1b alike)");
    printf("\n%-6s %-9s %15s %9s %9s %9s %9s %9s %9s %10s\n", "stage", "blocks", "params/rank", "param GB",
           "grad GB", "master GB", "optim GB", "in flight", "act GB", "total GB");
    size_t worst = 0;
    for (size_t s = 0; s < par.pp; s++) {
        const plan_stage *st = &stages[s];
        char blocks[32];
        if (v > 1) /* chunk j holds virtual stage j pp + s: its blocks are not one range */
            snprintf(blocks, sizeof blocks, "%llu in %llu", (unsigned long long)st->blocks, (unsigned long long)v);
        else
            snprintf(blocks, sizeof blocks, "%llu-%llu", (unsigned long long)st->first_block,
                     (unsigned long long)(st->first_block + st->blocks - 1));
        printf("%-6zu %-9s %15s %9.3f %9.3f %9.3f %9.3f %9llu %9.3f %10.3f\n", s, blocks, commas(st->params),
               gb(st->bytes[MEM_PARAM]), gb(st->bytes[MEM_GRAD]), gb(st->bytes[MEM_MASTER]), gb(st->bytes[MEM_OPTIM]),
               (unsigned long long)st->in_flight, gb(st->bytes[MEM_ACT]), gb(st->total));
        if (st->total > stages[worst].total) worst = s;
    }
    if (par.course_model) { /* exact, to set beside a run's measured MEM_ACT (the step event's pipeline.act_bytes) */
        printf("\nactivation bytes per rank (MEM_ACT at the stage's peak):");
        for (size_t s = 0; s < par.pp; s++)
            printf("%s stage %zu %llu", s ? "," : "", s, (unsigned long long)stages[s].bytes[MEM_ACT]);
        printf("\n");
    }
    printf("\nthe fullest rank is on stage %zu: %.3f GB (%.3f GiB)\n", worst, gb(stages[worst].total),
           gib(stages[worst].total));
    if (o->device_memory) print_fit(stages[worst].total, o);
    printf("GB = 10^9 bytes; activations at the stage's peak: its in-flight micro-batches x one micro-batch's.\n");
}

int cmd_plan(int argc, char **argv) {
    if (plan_args_name_config(argc, argv)) return cmd_plan_config(argc, argv);
    plan_options o;
    parse_options(argc, argv, &o);
    if (o.tp || o.pp || o.micro_batches || o.schedule >= 0 || o.sequence_parallel || o.course_model) {
        plan_model model = build_model(&o);
        plan_run run = build_run(&o, &model);
        plan_problem why;
        if (!plan_run_check(&model, &run, &why)) {
            if (why.hint[0]) MP_FAIL_HINT(why.expected, why.hint, "%s", why.found);
            MP_FAIL(why.expected, "%s", why.found);
        }
        print_parallel(&model, &run, &o);
        return 0;
    }

    if (o.mode == MODE_PRESET_TABLE) {
        /* A setting some presets cannot take (GPT-2's learned positions stop at T = 1024) skips those
         * rows with a note, rather than failing the whole table. */
        int n = 0, nskipped = 0;
        plan_row rows[plan_preset_count()];
        plan_problem skipped[plan_preset_count()];
        for (int i = 0; i < plan_preset_count(); i++) {
            plan_row row = {.model = *plan_preset_at(i), .has_model = true};
            row.run = build_run(&o, &row.model);
            if (!plan_run_check(&row.model, &row.run, &skipped[nskipped])) {
                nskipped++;
                continue;
            }
            compute_row(&row);
            rows[n++] = row;
        }
        if (n == 0)
            MP_FAIL_HINT("a run setting at least one preset can take",
                         "lower --seq (the GPT-2 presets stop at T = 1024, GPT-3 at 2048) or --batch",
                         "every preset refused, the first with: %s", skipped[0].found);
        print_rows(rows, n, &o);
        for (int i = 0; i < nskipped; i++)
            fprintf(o.output == OUT_TABLE ? stdout : stderr, "skipped: %s\n", skipped[i].found);
        return 0;
    }

    plan_row row = {.has_model = !o.bare_params};
    if (row.has_model) row.model = build_model(&o);
    row.run = build_run(&o, row.has_model ? &row.model : NULL);
    row.result.params = o.bare_params;

    if (o.mode == MODE_ZERO_TABLE) {
        plan_row rows[4];
        for (int stage = 0; stage < 4; stage++) {
            rows[stage] = row;
            rows[stage].run.zero_stage = stage;
            compute_row(&rows[stage]);
        }
        print_rows(rows, 4, &o);
        return 0;
    }

    compute_row(&row);
    const plan_model *m = row.has_model ? &row.model : NULL;
    if (o.output == OUT_JSON) {
        json_plan(m, &row.run, &row.result, &o, "");
        printf("\n");
    } else if (o.output == OUT_TSV) {
        tsv_header();
        tsv_row(m, &row.run, &row.result);
    } else {
        print_single_table(m, &row.run, &row.result, &o);
        if (o.explain) {
            printf("\n");
            print_explain(m, &row.run, &row.result);
        }
    }
    return 0;
}
