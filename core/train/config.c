/* config.c: reading, checking, overriding and writing back a training run's JSON configuration. */
#include "train/config.h"

#include "dist/pp.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/parse.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/tokenizer.h"
#include "dist/fsdp.h"
#include "dist/hooks.h"
#include "plan/plan.h"
#include "amp/setup.h"

/* Enums are written through int pointers by the table-driven parser below. */
_Static_assert(sizeof(model_arch) == sizeof(int), "model_arch is stored as an int");
_Static_assert(sizeof(config_offload_device) == sizeof(int), "config_offload_device is stored as an int");
_Static_assert(sizeof(loader_order) == sizeof(int), "loader_order is stored as an int");

/* ================================================================ the schema
 * Every key the file may hold is a row below: its JSON name, what kind of value it takes, where the value
 * goes in train_config, and its range. One generic walk (parse_section) checks types, ranges, unknown and
 * repeated keys for all sections alike; the few rules that tie keys together come after it (resolve_*). */

typedef enum {
    FK_INT,     /* a whole number into an int */
    FK_LONG,    /* a whole number into a long */
    FK_U64,     /* a whole number 0 .. 2^53 (exact in a JSON double) into a uint64_t; 5e8 is fine */
    FK_DOUBLE,  /* a finite number into a double */
    FK_FLOAT,   /* a finite number into a float */
    FK_BOOL,    /* true or false */
    FK_STRING,  /* a string into a char[size] */
    FK_ENUM,    /* one of names[] into an int (the index) */
    FK_BYTES,   /* "24GB", "80GiB" or a number of bytes into a uint64_t */
    FK_SECTION, /* an object, walked with its own table */
    FK_BLOCK,   /* an object read by another module (optimizer, scheduler) */
} field_kind;

typedef struct section_spec section_spec;

typedef struct {
    const char *key;
    field_kind kind;
    size_t offset;            /* into train_config */
    size_t size;              /* FK_STRING: the buffer's size */
    double lo, hi;            /* numbers: the closed range [lo, hi] */
    bool lo_open;             /* numbers: lo itself is excluded */
    const char *const *names; /* FK_ENUM: NULL-terminated, index = stored value */
    const section_spec *sub;  /* FK_SECTION */
    const char *about;        /* added to the expected text: what the value means */
} field_spec;

struct section_spec {
    const char *name;         /* "" for the top level */
    const field_spec *fields;
    int nfields;
};

#define OFF(member) offsetof(train_config, member)
#define SIZE(member) sizeof(((train_config *)0)->member)
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define NO_LIMIT INFINITY         /* .hi of a field bounded only by what its C type holds */
#define EXACT_U64 9007199254740992.0 /* 2^53: up to here every integer is exact in a JSON double */

static const char *const arch_names[] = {[MODEL_GPT2] = "gpt2", [MODEL_LLAMA] = "llama", NULL};
static const plan_arch arch_plan[] = {[MODEL_GPT2] = PLAN_ARCH_GPT2, [MODEL_LLAMA] = PLAN_ARCH_LLAMA};
static const char *const offload_names[] = {[OFFLOAD_NONE] = "none", [OFFLOAD_CPU] = "cpu", [OFFLOAD_NVME] = "nvme",
                                            NULL};
static const char *const order_names[] = {[LOADER_SEQUENTIAL] = "sequential", [LOADER_SHUFFLE] = "shuffle", NULL};
static const char *const sampler_names[] = {[DATA_SAMPLER_GLOBAL] = "global", [DATA_SAMPLER_DISTRIBUTED] = "distributed",
                                            NULL};

static const field_spec fp16_fields[] = {
    {.key = "enabled", .kind = FK_BOOL, .offset = OFF(fp16.enabled)},
    {.key = "loss_scale", .kind = FK_DOUBLE, .offset = OFF(fp16.loss_scale), .lo = 0, .hi = NO_LIMIT, .about = "0 means dynamic scaling"},
    {.key = "initial_scale_power", .kind = FK_INT, .offset = OFF(fp16.initial_scale_power), .lo = 0, .hi = 127,
     .about = "the first dynamic scale is 2^initial_scale_power, which must be finite in fp32"},
    {.key = "loss_scale_window", .kind = FK_INT, .offset = OFF(fp16.loss_scale_window), .lo = 1, .hi = NO_LIMIT},
    {.key = "hysteresis", .kind = FK_INT, .offset = OFF(fp16.hysteresis), .lo = 1, .hi = NO_LIMIT},
    {.key = "consecutive_hysteresis", .kind = FK_BOOL, .offset = OFF(fp16.consecutive_hysteresis)},
    {.key = "min_loss_scale", .kind = FK_DOUBLE, .offset = OFF(fp16.min_loss_scale), .lo = 0, .lo_open = true, .hi = NO_LIMIT},
    {.key = "auto_cast", .kind = FK_BOOL, .offset = OFF(fp16.auto_cast)},
};
static const field_spec bf16_fields[] = {
    {.key = "enabled", .kind = FK_BOOL, .offset = OFF(bf16.enabled)},
};
static const field_spec precision_fields[] = {
    {.key = "recipe", .kind = FK_STRING, .offset = OFF(precision.recipe), .size = SIZE(precision.recipe),
     .about = "fp32, tf32, fp16, fp16-o2, bf16, bf16-pure or fp8"},
    {.key = "keras_policy", .kind = FK_STRING, .offset = OFF(precision.keras_policy), .size = SIZE(precision.keras_policy),
     .about = "float32, mixed_float16, mixed_bfloat16 or bfloat16"},
    {.key = "torch_autocast", .kind = FK_STRING, .offset = OFF(precision.torch_autocast),
     .size = SIZE(precision.torch_autocast), .about = "float16, bfloat16, or float32 / none"},
    {.key = "torch_grad_scaler", .kind = FK_BOOL, .offset = OFF(precision.torch_grad_scaler)},
    {.key = "loss_scaler", .kind = FK_STRING, .offset = OFF(precision.loss_scaler), .size = SIZE(precision.loss_scaler),
     .about = "none, static, pytorch, keras or deepspeed"},
    {.key = "init_scale", .kind = FK_DOUBLE, .offset = OFF(precision.init_scale), .lo = 0, .hi = 3.4e38,
     .about = "0 keeps the scaler's default"},
    {.key = "growth_interval", .kind = FK_INT, .offset = OFF(precision.growth_interval), .lo = 0, .hi = NO_LIMIT,
     .about = "0 keeps the scaler's default"},
    {.key = "stochastic_rounding", .kind = FK_BOOL, .offset = OFF(precision.stochastic_rounding)},
    {.key = "fp8_history", .kind = FK_INT, .offset = OFF(precision.fp8_history), .lo = 1, .hi = 4096},
    {.key = "fp8_margin", .kind = FK_INT, .offset = OFF(precision.fp8_margin), .lo = 0, .hi = 32},
    {.key = "fp8_scaling", .kind = FK_BOOL, .offset = OFF(precision.fp8_scaling)},
    {.key = "fp8_mx", .kind = FK_BOOL, .offset = OFF(precision.fp8_mx)},
};
static const field_spec offload_fields[] = {
    {.key = "device", .kind = FK_ENUM, .offset = OFF(zero.offload_optimizer), .names = offload_names},
    {.key = "pin_memory", .kind = FK_BOOL, .offset = OFF(zero.offload_pin_memory)},
};
static const section_spec offload_section = {"offload_optimizer", offload_fields, COUNT(offload_fields)};
static const field_spec zero_fields[] = {
    {.key = "stage", .kind = FK_INT, .offset = OFF(zero.stage), .lo = 0, .hi = 3},
    {.key = "reduce_bucket_size", .kind = FK_U64, .offset = OFF(zero.reduce_bucket_size), .lo = 1, .hi = NO_LIMIT, .about = "elements"},
    {.key = "allgather_bucket_size", .kind = FK_U64, .offset = OFF(zero.allgather_bucket_size), .lo = 1, .hi = NO_LIMIT, .about = "elements"},
    {.key = "overlap_comm", .kind = FK_BOOL, .offset = OFF(zero.overlap_comm)},
    {.key = "contiguous_gradients", .kind = FK_BOOL, .offset = OFF(zero.contiguous_gradients)},
    {.key = "reduce_scatter", .kind = FK_BOOL, .offset = OFF(zero.reduce_scatter)},
    {.key = "stage3_prefetch_bucket_size", .kind = FK_U64, .offset = OFF(zero.stage3_prefetch_bucket_size), .lo = 0, .hi = NO_LIMIT,
     .about = "elements"},
    {.key = "stage3_param_persistence_threshold", .kind = FK_U64, .offset = OFF(zero.stage3_param_persistence_threshold), .lo = 0,
     .hi = NO_LIMIT, .about = "elements"},
    {.key = "offload_optimizer", .kind = FK_SECTION, .sub = &offload_section},
};
static const char *const backward_prefetch_names[] = {"BACKWARD_PRE", "NONE", NULL};
static const field_spec fsdp_fields[] = {
    {.key = "sharding_strategy", .kind = FK_ENUM, .offset = OFF(fsdp.sharding_strategy), .names = fsdp_strategy_names},
    {.key = "hybrid_shard_size", .kind = FK_INT, .offset = OFF(fsdp.hybrid_shard_size), .lo = 0, .hi = 1 << 20,
     .about = "HYBRID_SHARD: ranks per shard group, dividing the world size"},
    {.key = "forward_prefetch", .kind = FK_BOOL, .offset = OFF(fsdp.forward_prefetch)},
    {.key = "backward_prefetch", .kind = FK_ENUM, .offset = OFF(fsdp.backward_prefetch), .names = backward_prefetch_names},
    {.key = "limit_all_gathers", .kind = FK_BOOL, .offset = OFF(fsdp.limit_all_gathers)},
};
static const field_spec comm_fields[] = {
    {.key = "hook", .kind = FK_ENUM, .offset = OFF(comm.hook), .names = ddp_hook_names},
    {.key = "topk_ratio", .kind = FK_DOUBLE, .offset = OFF(comm.topk_ratio), .lo = 0, .lo_open = true, .hi = 1,
     .about = "the share of each bucket's entries top-k sends"},
    {.key = "powersgd_rank", .kind = FK_INT, .offset = OFF(comm.powersgd_rank), .lo = 1, .hi = 64},
    {.key = "deterministic", .kind = FK_BOOL, .offset = OFF(comm.deterministic)},
    {.key = "fusion", .kind = FK_BOOL, .offset = OFF(comm.fusion),
     .about = "Horovod's tensor fusion instead of DDP's buckets"},
    {.key = "fusion_threshold", .kind = FK_BYTES, .offset = OFF(comm.fusion_threshold), .lo = 0, .hi = NO_LIMIT,
     .about = "bytes of one fusion buffer; 0 reduces every tensor alone"},
};
static const field_spec ckpt_fields[] = {
    {.key = "policy", .kind = FK_ENUM, .offset = OFF(ckpt.policy), .names = model_recompute_names,
     .about = "which blocks recompute their forward in backward, model/model.h"},
    {.key = "every_k", .kind = FK_INT, .offset = OFF(ckpt.every_k), .lo = 1, .hi = 4096,
     .about = "with policy every_k: blocks 0, k, 2k, ... are checkpointed"},
};
static const section_spec ckpt_section = {"activation_checkpointing", ckpt_fields, COUNT(ckpt_fields)};
_Static_assert(sizeof(model_recompute) == sizeof(int), "model_recompute is stored as an int");
static const field_spec model_fields[] = {
    {.key = "preset", .kind = FK_STRING, .offset = OFF(model.preset), .size = SIZE(model.preset), .about = "a model of `mixpar plan --list`"},
    {.key = "arch", .kind = FK_ENUM, .offset = OFF(model.model.arch), .names = arch_names},
    {.key = "layers", .kind = FK_INT, OFF(model.model.L), .lo = 1, .hi = 4096},
    {.key = "channels", .kind = FK_INT, OFF(model.model.C), .lo = 1, .hi = 1 << 20},
    {.key = "heads", .kind = FK_INT, OFF(model.model.NH), .lo = 1, .hi = 1 << 16},
    {.key = "kv_heads", .kind = FK_INT, OFF(model.model.KVH), .lo = 1, .hi = 1 << 16},
    {.key = "ffn", .kind = FK_INT, OFF(model.model.F), .lo = 1, .hi = 1 << 22},
    {.key = "context", .kind = FK_INT, OFF(model.model.maxT), .lo = 1, .hi = 1 << 20},
    {.key = "tied", .kind = FK_BOOL, .offset = OFF(model.model.tied)},
    {.key = "vocab", .kind = FK_INT, OFF(model.model.V), .lo = 1, .hi = 1 << 24},
    {.key = "padded_vocab", .kind = FK_INT, OFF(model.model.Vp), .lo = 1, .hi = 1 << 24},
    {.key = "rope_theta", .kind = FK_FLOAT, .offset = OFF(model.model.rope_theta), .lo = 0, .lo_open = true, .hi = NO_LIMIT},
    {.key = "norm_eps", .kind = FK_FLOAT, .offset = OFF(model.model.norm_eps), .lo = 0, .lo_open = true, .hi = 1},
};
static const field_spec data_fields[] = {
    {.key = "dataset", .kind = FK_STRING, .offset = OFF(data.dataset), .size = SIZE(data.dataset), .about = "a dataset of `mixpar data list`"},
    {.key = "dir", .kind = FK_STRING, .offset = OFF(data.dir), .size = SIZE(data.dir)},
    {.key = "seq_len", .kind = FK_INT, .offset = OFF(data.seq_len), .lo = 1, .hi = 1 << 20},
    {.key = "order", .kind = FK_ENUM, .offset = OFF(data.order), .names = order_names},
    {.key = "sampler", .kind = FK_ENUM, .offset = OFF(data.sampler), .names = sampler_names,
     .about = "global: each rank a block of every global batch; distributed: PyTorch's DistributedSampler"},
    {.key = "drop_last", .kind = FK_BOOL, .offset = OFF(data.drop_last)},
    {.key = "workers", .kind = FK_INT, .offset = OFF(data.workers), .lo = 0, .hi = 2, .about = "prefetch threads"},
};
static const field_spec train_fields[] = {
    {.key = "steps", .kind = FK_LONG, .offset = OFF(train.steps), .lo = 1, .hi = 1e12},
    {.key = "eval_interval", .kind = FK_INT, .offset = OFF(train.eval_interval), .lo = 0, .hi = NO_LIMIT, .about = "0 turns it off"},
    {.key = "eval_batches", .kind = FK_INT, .offset = OFF(train.eval_batches), .lo = 1, .hi = NO_LIMIT},
    {.key = "checkpoint_interval", .kind = FK_INT, .offset = OFF(train.checkpoint_interval), .lo = 0, .hi = NO_LIMIT,
     .about = "0 turns it off"},
    {.key = "run_name", .kind = FK_STRING, .offset = OFF(train.run_name), .size = SIZE(train.run_name)},
    {.key = "run_dir", .kind = FK_STRING, .offset = OFF(train.run_dir), .size = SIZE(train.run_dir)},
    {.key = "seed", .kind = FK_U64, .offset = OFF(train.seed), .lo = 0, .hi = NO_LIMIT},
    {.key = "log_interval", .kind = FK_INT, .offset = OFF(train.log_interval), .lo = 1, .hi = NO_LIMIT},
    {.key = "sample_interval", .kind = FK_INT, .offset = OFF(train.sample_interval), .lo = 0, .hi = NO_LIMIT, .about = "0 turns it off"},
    {.key = "hist_interval", .kind = FK_INT, .offset = OFF(train.hist_interval), .lo = 0, .hi = NO_LIMIT,
     .about = "0 turns it off"},
    {.key = "sample_tokens", .kind = FK_INT, .offset = OFF(train.sample_tokens), .lo = 1, .hi = 1 << 20},
    {.key = "sample_prompt", .kind = FK_STRING, .offset = OFF(train.sample_prompt), .size = SIZE(train.sample_prompt)},
    {.key = "max_memory", .kind = FK_BYTES, .offset = OFF(train.max_memory), .lo = 0, .hi = NO_LIMIT, .about = "0 means no limit"},
    {.key = "threads", .kind = FK_INT, .offset = OFF(train.threads), .lo = 0, .hi = 4096, .about = "0 leaves it to OpenMP"},
    {.key = "freeze", .kind = FK_STRING, .offset = OFF(train.freeze), .size = SIZE(train.freeze),
     .about = "comma-separated tensor names or prefixes ending in '*'"},
    {.key = "no_decay", .kind = FK_STRING, .offset = OFF(train.no_decay), .size = SIZE(train.no_decay),
     .about = "weight-decay groups left undecayed: norm, bias, embedding (comma-separated)"},
    {.key = "profile", .kind = FK_BOOL, .offset = OFF(train.profile),
     .about = "spans, kernels and a Chrome trace per rank in the run folder (lab 23)"},
    {.key = "max_consecutive_skips", .kind = FK_INT, .offset = OFF(train.max_consecutive_skips), .lo = 0,
     .hi = NO_LIMIT, .about = "skipped steps in a row that stop the run; 0 turns it off"},
};

static const section_spec fp16_section = {"fp16", fp16_fields, COUNT(fp16_fields)};
static const section_spec bf16_section = {"bf16", bf16_fields, COUNT(bf16_fields)};
static const section_spec precision_section = {"precision", precision_fields, COUNT(precision_fields)};
static const section_spec zero_section = {"zero_optimization", zero_fields, COUNT(zero_fields)};
static const section_spec fsdp_section = {"fsdp", fsdp_fields, COUNT(fsdp_fields)};
static const section_spec comm_section = {"communication", comm_fields, COUNT(comm_fields)};
static const section_spec model_section = {"model", model_fields, COUNT(model_fields)};
static const section_spec data_section = {"data", data_fields, COUNT(data_fields)};
static const section_spec train_section = {"train", train_fields, COUNT(train_fields)};

static const field_spec top_fields[] = {
    {.key = "train_batch_size", .kind = FK_INT, .offset = OFF(train_batch_size), .lo = 1, .hi = NO_LIMIT},
    {.key = "train_micro_batch_size_per_gpu", .kind = FK_INT, .offset = OFF(micro_batch), .lo = 1, .hi = NO_LIMIT},
    {.key = "gradient_accumulation_steps", .kind = FK_INT, .offset = OFF(grad_accum), .lo = 1, .hi = NO_LIMIT},
    {.key = "gradient_clipping", .kind = FK_DOUBLE, .offset = OFF(gradient_clipping), .lo = 0, .hi = NO_LIMIT, .about = "0 turns it off"},
    {.key = "tensor_model_parallel_size", .kind = FK_INT, .offset = OFF(tensor_parallel), .lo = 1, .hi = 4096},
    {.key = "pipeline_model_parallel_size", .kind = FK_INT, .offset = OFF(pipeline_parallel), .lo = 1, .hi = 4096},
    {.key = "sequence_parallel", .kind = FK_BOOL, .offset = OFF(sequence_parallel),
     .about = "norms and residual adds on 1/tp of the sequence, dist/sp.h; ignored with tp 1, as in Megatron-LM"},
    {.key = "pipeline_schedule", .kind = FK_ENUM, .offset = OFF(pipeline_schedule), .names = pp_schedule_names,
     .about = "the micro-batch order of pipeline parallel, dist/pp.h"},
    {.key = "num_layers_per_virtual_pipeline_stage", .kind = FK_INT, .offset = OFF(layers_per_virtual_stage), .lo = 0,
     .hi = 4096, .about = "blocks per model chunk of the interleaved schedule; 0: none"},
    {.key = "optimizer", .kind = FK_BLOCK},
    {.key = "scheduler", .kind = FK_BLOCK},
    {.key = "fp16", .kind = FK_SECTION, .sub = &fp16_section},
    {.key = "bf16", .kind = FK_SECTION, .sub = &bf16_section},
    {.key = "precision", .kind = FK_SECTION, .sub = &precision_section},
    {.key = "zero_optimization", .kind = FK_SECTION, .sub = &zero_section},
    {.key = "activation_checkpointing", .kind = FK_SECTION, .sub = &ckpt_section},
    {.key = "fsdp", .kind = FK_SECTION, .sub = &fsdp_section},
    {.key = "communication", .kind = FK_SECTION, .sub = &comm_section},
    {.key = "model", .kind = FK_SECTION, .sub = &model_section},
    {.key = "data", .kind = FK_SECTION, .sub = &data_section},
    {.key = "train", .kind = FK_SECTION, .sub = &train_section},
};
static const section_spec top_section = {"", top_fields, COUNT(top_fields)};

/* ================================================================ helpers */

/* "model" + "layers" -> "model.layers"; "" + "fp16" -> "fp16". */
static void join_path(char *out, size_t len, const char *parent, const char *key) {
    snprintf(out, len, "%s%s%s", parent, parent[0] ? "." : "", key);
}

/* What a JSON value is, for "found:": 12, "four" (a string), true, an array, an object. */
static const char *describe(const cJSON *v, char *buf, size_t len) {
    if (cJSON_IsNumber(v)) snprintf(buf, len, "%.17g (a number)", v->valuedouble);
    else if (cJSON_IsString(v)) snprintf(buf, len, "\"%.60s%s\" (a string)", v->valuestring,
                                         strlen(v->valuestring) > 60 ? "..." : "");
    else if (cJSON_IsBool(v)) snprintf(buf, len, "%s (a boolean)", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNull(v)) snprintf(buf, len, "null");
    else if (cJSON_IsArray(v)) snprintf(buf, len, "an array");
    else if (cJSON_IsObject(v)) snprintf(buf, len, "an object");
    else snprintf(buf, len, "an unreadable value");
    return buf;
}

static void format_number(char *buf, size_t len, double x) {
    if (x >= 1e15 && x == floor(x)) snprintf(buf, len, "%.6g", x);
    else snprintf(buf, len, "%.15g", x);
}

/* The largest value each kind of field can hold; NO_LIMIT fields stop there. */
static double type_cap(field_kind kind) {
    switch (kind) {
    case FK_INT: return INT_MAX;
    case FK_LONG: return 1e15;
    case FK_U64:
    case FK_BYTES: return EXACT_U64;
    case FK_FLOAT: return FLT_MAX;
    default: return DBL_MAX;
    }
}

static bool is_whole(field_kind kind) { return kind == FK_INT || kind == FK_LONG || kind == FK_U64 || kind == FK_BYTES; }

/* "an integer in [0, 3]", "a number > 0", "one of "gpt2", "llama"", with the field's `about`. */
static void describe_expected(const field_spec *f, const char *path, char *buf, size_t len) {
    char lo[32], hi[32], what[256];
    format_number(lo, sizeof lo, f->lo);
    format_number(hi, sizeof hi, f->hi);
    const char *noun = is_whole(f->kind) ? "an integer" : "a number";
    switch (f->kind) {
    case FK_INT:
    case FK_LONG:
    case FK_U64:
    case FK_DOUBLE:
    case FK_FLOAT:
        if (isinf(f->hi)) snprintf(what, sizeof what, "%s %s %s", noun, f->lo_open ? ">" : ">=", lo);
        else snprintf(what, sizeof what, "%s in %s%s, %s]", noun, f->lo_open ? "(" : "[", lo, hi);
        break;
    case FK_BOOL: snprintf(what, sizeof what, "true or false"); break;
    case FK_STRING: snprintf(what, sizeof what, "a string of at most %zu bytes", f->size - 1); break;
    case FK_ENUM: {
        size_t used = (size_t)snprintf(what, sizeof what, "one of");
        for (int i = 0; f->names[i] && used < sizeof what; i++)
            used += (size_t)snprintf(what + used, sizeof what - used, "%s \"%s\"", i ? "," : "", f->names[i]);
        break;
    }
    case FK_BYTES: snprintf(what, sizeof what, "a byte size such as \"24GB\" or \"80GiB\", or a number of bytes"); break;
    case FK_SECTION:
    case FK_BLOCK: snprintf(what, sizeof what, "an object {...}"); break;
    }
    snprintf(buf, len, "%s: %s%s%s%s", path, what, f->about ? " (" : "", f->about ? f->about : "", f->about ? ")" : "");
}

int config_key_distance(const char *a, const char *b) {
    /* Optimal string alignment distance over three rows; keys are short. */
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 63 || m > 63) return abs(n - m) + 64;
    int rows[3][64];
    int *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
    for (int j = 0; j <= m; j++) prev[j] = j;
    for (int i = 1; i <= n; i++) {
        cur[0] = i;
        for (int j = 1; j <= m; j++) {
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            if (prev[j - 1] + cost < best) best = prev[j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
        int *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[m];
}

static bool same_ignoring_case(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if ((*a | 0x20) != (*b | 0x20)) return false;
    return *a == *b;
}

/* The closest key of the section, when it is close enough to be a slip: a case difference, one key the
 * start of the other, or a few edits (a third of the key's length, at least 2). NULL otherwise. */
static const char *closest_key(const section_spec *s, const char *key) {
    const char *best = NULL;
    int best_d = INT_MAX;
    int len = (int)strlen(key);
    int allowed = len / 3 > 2 ? len / 3 : 2;
    for (int i = 0; i < s->nfields; i++) {
        const char *known = s->fields[i].key;
        int d = config_key_distance(key, known);
        if (same_ignoring_case(key, known)) d = 0;
        /* Cut short ("train_micro_batch_size") is the likeliest slip; run on ("loss_scale_windows") is
         * admitted, but ranked after any key a few edits away. */
        size_t kl = strlen(known);
        if (len >= 4 && strncmp(known, key, (size_t)len) == 0 && d > 1) d = 1;
        if (len >= 4 && kl >= 4 && strncmp(key, known, kl) == 0 && d > allowed) d = allowed;
        if (d > allowed) continue;
        if (d < best_d) best_d = d, best = known;
    }
    return best;
}

/* A key that is not in this section but is exactly a key of another: "steps" at the top is train.steps. */
static bool key_elsewhere(const section_spec *s, const char *parent, const char *key, char *out, size_t len) {
    for (int i = 0; i < s->nfields; i++) {
        const field_spec *f = &s->fields[i];
        char path[256];
        join_path(path, sizeof path, parent, f->key);
        if (strcmp(f->key, key) == 0) {
            snprintf(out, len, "%s", path);
            return true;
        }
        if (f->kind == FK_SECTION && key_elsewhere(f->sub, path, key, out, len)) return true;
    }
    return false;
}

static void key_list(const section_spec *s, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->nfields && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", s->fields[i].key);
}

static bool unknown_key(data_err *err, const section_spec *s, const char *parent, const char *key) {
    char path[512], known[1024], expected[300];
    join_path(path, sizeof path, parent, key);
    key_list(s, known, sizeof known);
    if (parent[0]) snprintf(expected, sizeof expected, "a key of the \"%s\" section", parent);
    else snprintf(expected, sizeof expected, "a top-level key");
    char hint[1100];
    snprintf(hint, sizeof hint, "the keys here are: %s", known);
    const char *near = closest_key(s, key);
    char elsewhere[256];
    if (near) {
        char near_path[512];
        join_path(near_path, sizeof near_path, parent, near);
        return DATA_ERR(err, expected, hint, "%s: unknown key; did you mean %s?", path, near_path);
    }
    if (key_elsewhere(&top_section, "", key, elsewhere, sizeof elsewhere))
        return DATA_ERR(err, expected, hint, "%s: unknown key; did you mean %s?", path, elsewhere);
    return DATA_ERR(err, expected, hint, "%s: unknown key", path);
}

static const field_spec *find_field(const section_spec *s, const char *key) {
    for (int i = 0; i < s->nfields; i++)
        if (strcmp(s->fields[i].key, key) == 0) return &s->fields[i];
    return NULL;
}

/* ================================================================ the generic walk */

static bool bad_value(data_err *err, const field_spec *f, const char *path, const cJSON *v) {
    char expected[512], found[128];
    describe_expected(f, path, expected, sizeof expected);
    return DATA_ERR(err, expected, NULL, "%s: %s", path, describe(v, found, sizeof found));
}

static bool in_range(const field_spec *f, double x) {
    if (!isfinite(x) || x > f->hi || x > type_cap(f->kind)) return false;
    return f->lo_open ? x > f->lo : x >= f->lo;
}

static bool parse_section(const cJSON *obj, const section_spec *s, const char *parent, train_config *cfg,
                          data_err *err);

static bool parse_field(const cJSON *v, const field_spec *f, const char *path, train_config *cfg, data_err *err) {
    char *dst = (char *)cfg + f->offset;
    switch (f->kind) {
    case FK_INT:
    case FK_LONG:
    case FK_U64:
    case FK_DOUBLE:
    case FK_FLOAT: {
        if (!cJSON_IsNumber(v)) return bad_value(err, f, path, v);
        double x = v->valuedouble;
        if (!in_range(f, x) || (is_whole(f->kind) && x != floor(x))) return bad_value(err, f, path, v);
        if (f->kind == FK_INT) *(int *)dst = (int)x;
        else if (f->kind == FK_LONG) *(long *)dst = (long)x;
        else if (f->kind == FK_U64) *(uint64_t *)dst = (uint64_t)x;
        else if (f->kind == FK_DOUBLE) *(double *)dst = x;
        else *(float *)dst = (float)x;
        return true;
    }
    case FK_BOOL:
        if (!cJSON_IsBool(v)) return bad_value(err, f, path, v);
        *(bool *)dst = cJSON_IsTrue(v);
        return true;
    case FK_STRING:
        if (!cJSON_IsString(v) || strlen(v->valuestring) >= f->size) return bad_value(err, f, path, v);
        memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
        return true;
    case FK_ENUM:
        if (cJSON_IsString(v))
            for (int i = 0; f->names[i]; i++)
                if (strcmp(v->valuestring, f->names[i]) == 0) {
                    *(int *)dst = i;
                    return true;
                }
        return bad_value(err, f, path, v);
    case FK_BYTES: {
        double bytes = NAN;
        if (cJSON_IsNumber(v)) bytes = v->valuedouble;
        else if (cJSON_IsString(v) && !parse_bytes(v->valuestring, &bytes)) bytes = NAN;
        if (!in_range(f, bytes) || bytes != floor(bytes)) return bad_value(err, f, path, v);
        *(uint64_t *)dst = (uint64_t)bytes;
        return true;
    }
    case FK_SECTION:
        if (!cJSON_IsObject(v)) return bad_value(err, f, path, v);
        return parse_section(v, f->sub, path, cfg, err);
    case FK_BLOCK:
        if (!cJSON_IsObject(v)) return bad_value(err, f, path, v);
        return true; /* read by its module after the walk */
    }
    return true;
}

static bool parse_section(const cJSON *obj, const section_spec *s, const char *parent, train_config *cfg,
                          data_err *err) {
    for (const cJSON *it = obj->child; it; it = it->next) {
        char path[512];
        join_path(path, sizeof path, parent, it->string);
        for (const cJSON *before = obj->child; before != it; before = before->next)
            if (strcmp(before->string, it->string) == 0)
                return DATA_ERR(err, "each key once in an object", "remove one of them", "%s: given twice", path);
        const field_spec *f = find_field(s, it->string);
        if (!f) return unknown_key(err, s, parent, it->string);
        if (!parse_field(it, f, path, cfg, err)) return false;
    }
    return true;
}

/* ================================================================ defaults */

static void set_defaults(train_config *cfg, int world) {
    memset(cfg, 0, sizeof *cfg);
    cfg->world = world;
    cfg->fp16 = (config_fp16){.loss_scale = 0, .initial_scale_power = 16, .loss_scale_window = 1000,
                              .hysteresis = 2, .min_loss_scale = 1};
    cfg->zero = (config_zero){.stage = 0, .reduce_bucket_size = 500000000, .allgather_bucket_size = 500000000,
                              .contiguous_gradients = true, .reduce_scatter = true,
                              .stage3_prefetch_bucket_size = 50000000, .stage3_param_persistence_threshold = 100000,
                              .offload_optimizer = OFFLOAD_NONE};
    cfg->precision = (config_precision){.stochastic_rounding = true, .fp8_history = 16, .fp8_margin = 0,
                                          .fp8_scaling = true};
    cfg->ckpt = (config_activation_checkpointing){.policy = MODEL_RECOMPUTE_NONE, .every_k = 2};
    cfg->fsdp = (config_fsdp){.sharding_strategy = FSDP_FULL_SHARD, .backward_prefetch = 0, .limit_all_gathers = true};
    cfg->comm = (config_comm){.hook = DDP_HOOK_ALLREDUCE, .topk_ratio = 0.01, .powersgd_rank = 1,
                              .fusion_threshold = 64u << 20};
    snprintf(cfg->data.dir, sizeof cfg->data.dir, "data");
    cfg->data.order = LOADER_SHUFFLE;
    cfg->data.sampler = DATA_SAMPLER_GLOBAL;
    cfg->data.workers = 1;
    cfg->train.eval_batches = 8;
    cfg->train.seed = 1;
    cfg->train.log_interval = 1;
    cfg->train.sample_tokens = 64;
    cfg->train.max_consecutive_skips = 32;
    cfg->tensor_parallel = cfg->pipeline_parallel = 1;
    cfg->pipeline_schedule = PP_1F1B;
}

static const cJSON *child(const cJSON *obj, const char *key) {
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

/* ================================================================ rules between keys */

static bool resolve_batch(train_config *cfg, const cJSON *root, data_err *err) {
    const char *rule = "train_batch_size = train_micro_batch_size_per_gpu * gradient_accumulation_steps * world";
    bool has_total = child(root, "train_batch_size"), has_micro = child(root, "train_micro_batch_size_per_gpu");
    bool has_accum = child(root, "gradient_accumulation_steps");
    int64_t model_parallel = (int64_t)cfg->tensor_parallel * cfg->pipeline_parallel;
    if (cfg->world % model_parallel != 0)
        return DATA_ERR(err, "a world size divisible by tensor_model_parallel_size x pipeline_model_parallel_size",
                        "start a multiple of tp x pp ranks (mixpar run -n N): the rest are data-parallel replicas",
                        "%d ranks, tensor_model_parallel_size %d x pipeline_model_parallel_size %d = %lld", cfg->world,
                        cfg->tensor_parallel, cfg->pipeline_parallel, (long long)model_parallel);
    /* world in the rule is the data-parallel ranks: tp x pp ranks share one replica's batch */
    int64_t W = cfg->world / model_parallel, total = cfg->train_batch_size, micro = cfg->micro_batch,
            accum = cfg->grad_accum;
    if (!has_total && !has_micro)
        return DATA_ERR(err, "train_batch_size or train_micro_batch_size_per_gpu", rule,
                        "neither (gradient_accumulation_steps alone does not give a batch size)");
    if (has_total && !has_micro) {
        /* DeepSpeed: accumulation defaults to 1 when only the total is given. */
        if (!has_accum) accum = 1;
        if (total % (accum * W) != 0)
            return DATA_ERR(err, rule, "make train_batch_size a multiple of the product",
                            "train_batch_size %lld is not a multiple of gradient_accumulation_steps %lld * world %lld",
                            (long long)total, (long long)accum, (long long)W);
        micro = total / (accum * W);
    } else if (has_micro && !has_total) {
        if (!has_accum) accum = 1;
        total = micro * accum * W;
        if (total > INT_MAX)
            return DATA_ERR(err, "a train_batch_size below 2^31", rule, "%lld * %lld * %lld = %lld", (long long)micro,
                            (long long)accum, (long long)W, (long long)total);
    } else if (!has_accum) {
        if (total % (micro * W) != 0)
            return DATA_ERR(err, rule, "make train_batch_size a multiple of the product",
                            "train_batch_size %lld is not a multiple of train_micro_batch_size_per_gpu %lld * world %lld",
                            (long long)total, (long long)micro, (long long)W);
        accum = total / (micro * W);
    } else if (total != micro * accum * W) {
        return DATA_ERR(err, rule, "give any two of the three and the third is inferred",
                        "train_batch_size %lld but train_micro_batch_size_per_gpu %lld * gradient_accumulation_steps "
                        "%lld * world %lld = %lld",
                        (long long)total, (long long)micro, (long long)accum, (long long)W,
                        (long long)(micro * accum * W));
    }
    cfg->train_batch_size = (int)total;
    cfg->micro_batch = (int)micro;
    cfg->grad_accum = (int)accum;
    return true;
}

static bool resolve_precision_and_zero(train_config *cfg, const cJSON *root, data_err *err) {
    /* The recipe itself (and every conflict between the ways of asking for one) is amp/setup.c's. */
    amp_setup setup;
    if (!amp_recipe_from_config(cfg, &setup, err)) return false;
    /* A dynamic scale can never fall below its floor: a floor above the first scale is a typo. */
    double initial = ldexp(1.0, cfg->fp16.initial_scale_power);
    if (cfg->fp16.loss_scale == 0 && cfg->fp16.min_loss_scale > initial)
        return DATA_ERR(err, "fp16.min_loss_scale <= 2^fp16.initial_scale_power", NULL,
                        "fp16.min_loss_scale %g above the initial scale 2^%d = %g", cfg->fp16.min_loss_scale,
                        cfg->fp16.initial_scale_power, initial);
    /* DeepSpeed: overlap_comm defaults to true for stage 3 only. */
    if (!child(child(root, "zero_optimization"), "overlap_comm")) cfg->zero.overlap_comm = cfg->zero.stage == 3;
    if (child(root, "fsdp")) {
        if (cfg->zero.stage != 0)
            return DATA_ERR(err, "either an \"fsdp\" section or zero_optimization.stage 1-3, not both", NULL,
                            "\"fsdp\" with zero_optimization.stage %d", cfg->zero.stage);
        cfg->fsdp.enabled = true;
        cfg->zero.overlap_comm = true; /* FSDP always overlaps (its streams); the thread needs a safe communicator */
        if (cfg->fsdp.sharding_strategy == FSDP_HYBRID_SHARD &&
            (cfg->fsdp.hybrid_shard_size < 1 || cfg->world % cfg->fsdp.hybrid_shard_size != 0))
            return DATA_ERR(err, "fsdp.hybrid_shard_size dividing the world size with HYBRID_SHARD", NULL,
                            "hybrid_shard_size %d with %d ranks", cfg->fsdp.hybrid_shard_size, cfg->world);
    } else if (cfg->zero.stage == 3) { /* DeepSpeed's stage 3: FSDP's FULL_SHARD, prefetching when asked */
        cfg->fsdp.enabled = true;
        cfg->fsdp.sharding_strategy = FSDP_FULL_SHARD;
        cfg->fsdp.forward_prefetch = cfg->zero.stage3_prefetch_bucket_size > 0;
        cfg->fsdp.backward_prefetch = cfg->zero.stage3_prefetch_bucket_size > 0 ? 0 : 1;
    }
    /* Horovod's fusion is plain data parallel: a fused buffer is allreduced whole, in fp32 or 16 bits. */
    if (cfg->comm.fusion && (cfg->zero.stage != 0 || cfg->fsdp.enabled || cfg->comm.hook > DDP_HOOK_BF16))
        return DATA_ERR(err, "communication.fusion with zero_optimization.stage 0, no fsdp, and hook allreduce, fp16 or bf16",
                        "tensor fusion packs whole tensors for one allreduce; ZeRO and FSDP reduce-scatter shards",
                        "communication.fusion with stage %d%s, hook \"%s\"", cfg->zero.stage,
                        cfg->fsdp.enabled ? " (fsdp)" : "", ddp_hook_names[cfg->comm.hook]);
    if (cfg->zero.offload_optimizer != OFFLOAD_NONE && cfg->zero.stage == 0)
        return DATA_ERR(err, "zero_optimization.offload_optimizer with stage 1, 2 or 3",
                        "ZeRO-Offload offloads the partition ZeRO gives each rank, as DeepSpeed requires: set "
                        "zero_optimization.stage to 1 or 2 (on one rank the partition is the whole model)",
                        "offload_optimizer.device \"%s\" with zero_optimization.stage 0",
                        offload_names[cfg->zero.offload_optimizer]);
    return true;
}

static bool missing(data_err *err, const char *path, const char *what) {
    return DATA_ERR(err, what, NULL, "%s: missing", path);
}

/* The model: a preset (if any) under the fields the file gives. A field the preset derives by the
 * architecture's rule (kv_heads = heads, ffn = the default size for the width) stays derived, so
 * overriding channels of gpt2-124m gives ffn = 4 * channels, not 3072. */
static bool resolve_model(train_config *cfg, const cJSON *root, data_err *err) {
    const cJSON *obj = child(root, "model");
    if (!obj) return missing(err, "model", "a \"model\" section: {\"preset\": \"gpt2-124m\"} or the fields");
    model_config *m = &cfg->model.model;
    plan_model p = {0};
    bool preset = child(obj, "preset") != NULL;
    if (preset && !plan_preset_find(cfg->model.preset, &p)) {
        char names[512];
        size_t used = 0;
        names[0] = '\0';
        for (int i = 0; i < plan_preset_count() && used < sizeof names; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", plan_preset_at(i)->name);
        return DATA_ERR(err, "model.preset: a preset model", names, "model.preset: \"%s\" is not one", cfg->model.preset);
    }
    if (preset) {
        int arch = -1;
        for (int a = 0; arch_names[a]; a++)
            if (arch_plan[a] == p.arch) arch = a;
        MP_ASSERT(arch >= 0, "preset %s has an architecture the model does not know", p.name);
        if (child(obj, "arch") && (int)m->arch != arch)
            return DATA_ERR(err, "model.arch equal to the preset's", "drop model.arch or the preset",
                            "model.arch \"%s\" but preset %s is %s", arch_names[m->arch], p.name, arch_names[arch]);
        m->arch = (model_arch)arch;
        /* Fields the file does not give come from the preset (every preset value fits an int). */
        static const struct {
            const char *key;
            size_t offset;
            size_t preset_offset;
        } from_preset[] = {
            {"layers", offsetof(model_config, L), offsetof(plan_model, layers)},
            {"channels", offsetof(model_config, C), offsetof(plan_model, hidden)},
            {"heads", offsetof(model_config, NH), offsetof(plan_model, heads)},
            {"context", offsetof(model_config, maxT), offsetof(plan_model, context)},
            {"vocab", offsetof(model_config, V), offsetof(plan_model, vocab)},
        };
        for (int i = 0; i < COUNT(from_preset); i++)
            if (!child(obj, from_preset[i].key))
                *(int *)((char *)m + from_preset[i].offset) = (int)*(const uint64_t *)((const char *)&p +
                                                                                      from_preset[i].preset_offset);
        if (!child(obj, "tied")) m->tied = p.tied_head;
    } else {
        static const char *const required[][2] = {
            {"arch", "model.arch: \"gpt2\" or \"llama\" (or a model.preset)"},
            {"layers", "model.layers: the number of transformer blocks"},
            {"channels", "model.channels: the width C"},
            {"heads", "model.heads: the attention heads"},
            {"context", "model.context: the longest sequence"},
        };
        for (int i = 0; i < COUNT(required); i++)
            if (!child(obj, required[i][0])) {
                char path[64];
                join_path(path, sizeof path, "model", required[i][0]);
                return missing(err, path, required[i][1]);
            }
        if (!child(obj, "tied")) m->tied = plan_arch_get(arch_plan[m->arch])->tied_head;
    }
    plan_arch pa = arch_plan[m->arch];
    if (!child(obj, "kv_heads")) m->KVH = preset && p.kv_heads != p.heads ? (int)p.kv_heads : m->NH;
    if (!child(obj, "ffn"))
        m->F = preset && p.ffn != plan_default_ffn(p.arch, p.hidden) ? (int)p.ffn
                                                                      : (int)plan_default_ffn(pa, (uint64_t)m->C);
    cfg->model.vocab_from_data = !child(obj, "vocab") && !preset;
    if (!child(obj, "norm_eps")) m->norm_eps = 1e-5f;
    if (m->arch == MODEL_LLAMA && !child(obj, "rope_theta")) m->rope_theta = 10000.0f;

    /* The shapes must fit together. */
    if (m->arch == MODEL_GPT2 && child(obj, "rope_theta"))
        return DATA_ERR(err, "model.rope_theta only for arch \"llama\"", "GPT-2 learns its positions",
                        "model.rope_theta with arch \"gpt2\"");
    if (m->C % m->NH != 0)
        return DATA_ERR(err, "model.channels a multiple of model.heads", NULL, "channels %d, heads %d", m->C, m->NH);
    if (m->KVH > m->NH || m->NH % m->KVH != 0)
        return DATA_ERR(err, "model.kv_heads dividing model.heads", "grouped-query attention shares each K/V head "
                        "among heads / kv_heads query heads", "heads %d, kv_heads %d", m->NH, m->KVH);
    if (m->arch == MODEL_GPT2 && m->KVH != m->NH)
        return DATA_ERR(err, "model.kv_heads equal to model.heads for arch \"gpt2\"",
                        "grouped-query attention is an arch \"llama\" feature", "heads %d, kv_heads %d", m->NH, m->KVH);
    if (m->arch == MODEL_LLAMA && (m->C / m->NH) % 2 != 0)
        return DATA_ERR(err, "an even head size channels / heads for arch \"llama\"",
                        "rotary embeddings turn pairs of channels", "channels %d / heads %d = %d", m->C, m->NH,
                        m->C / m->NH);
    if (m->Vp && m->V && m->Vp < m->V)
        return DATA_ERR(err, "model.padded_vocab >= model.vocab", NULL, "padded_vocab %d, vocab %d", m->Vp, m->V);
    return true;
}

static bool resolve_data_and_train(train_config *cfg, const cJSON *root, data_err *err) {
    const cJSON *data = child(root, "data"), *train = child(root, "train");
    if (!data || !child(data, "dataset")) return missing(err, "data.dataset", "data.dataset: a dataset name such as \"poetry\"");
    if (!dataset_find(cfg->data.dataset)) {
        char names[512];
        size_t used = 0;
        names[0] = '\0';
        for (int i = 0; i < dataset_count() && used < sizeof names; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", dataset_at(i)->name);
        return DATA_ERR(err, "data.dataset: a dataset of `mixpar data list`", names, "data.dataset: \"%s\"",
                        cfg->data.dataset);
    }
    if (!cfg->data.dir[0]) return DATA_ERR(err, "data.dir: a directory", NULL, "data.dir: \"\"");
    if (!child(data, "seq_len")) cfg->data.seq_len = cfg->model.model.maxT;
    if (cfg->data.seq_len > cfg->model.model.maxT)
        return DATA_ERR(err, "data.seq_len <= model.context", "the model has no positions beyond its context",
                        "seq_len %d, context %d", cfg->data.seq_len, cfg->model.model.maxT);
    if (cfg->sequence_parallel && cfg->tensor_parallel > 1 && cfg->data.seq_len % cfg->tensor_parallel != 0)
        return DATA_ERR(err, "data.seq_len divisible by tensor_model_parallel_size under sequence_parallel",
                        "sequence parallel gives each tp rank seq_len / tp positions of every sequence (Megatron-LM "
                        "asserts the same): change data.seq_len or set sequence_parallel false",
                        "seq_len %d, tensor_model_parallel_size %d", cfg->data.seq_len, cfg->tensor_parallel);
    if (cfg->data.sampler == DATA_SAMPLER_GLOBAL)
        for (const char *const *k = (const char *const[]){"drop_last", "workers", NULL}; *k; k++)
            if (child(data, *k))
                return DATA_ERR(err, "data.sampler \"distributed\" with data.drop_last or data.workers",
                                "the global sampler neither pads nor prefetches; set data.sampler=distributed",
                                "data.%s with data.sampler \"global\"", *k);
    if (!train || !child(train, "steps")) return missing(err, "train.steps", "train.steps: the optimizer steps to take");
    /* The run name becomes a directory under runs/: one plain path component. */
    if (!cfg->train.run_name[0]) snprintf(cfg->train.run_name, sizeof cfg->train.run_name, "run");
    const char *name = cfg->train.run_name;
    bool plain = strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
              *c == '_' || *c == '.'))
            plain = false;
    if (!plain)
        return DATA_ERR(err, "train.run_name: letters, digits, '-', '_' and '.' only", "it names a directory",
                        "train.run_name: \"%s\"", name);
    if (!cfg->train.run_dir[0]) {
        int n = snprintf(cfg->train.run_dir, sizeof cfg->train.run_dir, "runs/%s", name);
        MP_ASSERT(n > 0 && (size_t)n < sizeof cfg->train.run_dir, "run_name fits run_dir");
    }
    return true;
}

/* The optimizer and the scheduler are read by optim/. A scheduler that decays needs its length: when the
 * block does not say, it is the run's length, train.steps. */
static bool resolve_optim(train_config *cfg, const cJSON *root, data_err *err) {
    const cJSON *opt = child(root, "optimizer");
    if (!opt)
        return DATA_ERR(err, "an \"optimizer\" block",
                        "e.g. \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}}", "optimizer: missing");
    cfg->optimizer = optim_config_from_json(opt);
    const cJSON *sched = child(root, "scheduler");
    if (!sched) {
        cfg->scheduler = lr_schedule_constant(cfg->optimizer.h.lr);
        return true;
    }
    cJSON *copy = cJSON_Duplicate(sched, true);
    MP_ASSERT(copy, "out of memory copying the scheduler block");
    cJSON *params = cJSON_GetObjectItemCaseSensitive(copy, "params");
    if (!params) params = cJSON_AddObjectToObject(copy, "params");
    if (cJSON_IsObject(params) && !cJSON_GetObjectItemCaseSensitive(params, "total_steps") &&
        !cJSON_GetObjectItemCaseSensitive(params, "total_num_steps"))
        cJSON_AddNumberToObject(params, "total_num_steps", (double)cfg->train.steps);
    cfg->scheduler = lr_schedule_from_json(copy, cfg->optimizer.h.lr);
    cJSON_Delete(copy);
    return true;
}

/* ================================================================ entry points */

bool config_parse(const cJSON *root, int world, train_config *cfg, data_err *err) {
    MP_ASSERT(world >= 1, "world %d", world);
    set_defaults(cfg, world);
    if (!cJSON_IsObject(root)) {
        char found[128];
        return DATA_ERR(err, "a JSON object {...} at the top of the config", NULL, "%s",
                        describe(root, found, sizeof found));
    }
    if (!parse_section(root, &top_section, "", cfg, err)) return false;
    if (!resolve_batch(cfg, root, err) || !resolve_precision_and_zero(cfg, root, err) || !resolve_model(cfg, root, err) ||
        !resolve_data_and_train(cfg, root, err) || !resolve_optim(cfg, root, err))
        return false;
    return true;
}

static char *read_text_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *bigger = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL;
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    bool failed = ferror(f);
    fclose(f);
    if (!buf || failed) {
        free(buf);
        errno = failed ? EIO : EFBIG;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* "configs/tiny-poetry.json" -> "tiny-poetry". */
static void base_name(const char *path, char *out, size_t len) {
    const char *slash = strrchr(path, '/');
    snprintf(out, len, "%s", slash ? slash + 1 : path);
    size_t n = strlen(out);
    if (n > 5 && strcmp(out + n - 5, ".json") == 0) out[n - 5] = '\0';
}

bool config_load(const char *path, const char *const *sets, int nsets, int world, train_config *cfg,
                 data_err *err) {
    size_t len = 0;
    char *text = read_text_file(path, &len);
    if (!text)
        return DATA_ERR(err, "a readable JSON config file", "the ready configs are in configs/", "cannot read '%s': %s",
                        path, strerror(errno));
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, true); /* the NUL ends it: nothing may follow */
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        int line = 1, col = 1;
        for (size_t i = 0; i < at; i++) {
            if (text[i] == '\n') line++, col = 1;
            else col++;
        }
        free(text);
        return DATA_ERR(err, "valid JSON (no comments, no trailing commas)", NULL,
                        "%s: invalid JSON at line %d, column %d (byte offset %zu)", path, line, col, at);
    }
    free(text);
    bool ok = true;
    for (int i = 0; ok && i < nsets; i++) ok = config_set(root, sets[i], err);
    /* The run is named after its file unless the file (or a --set) names it. */
    cJSON *train = cJSON_GetObjectItemCaseSensitive(root, "train");
    if (ok && cJSON_IsObject(train) && !cJSON_GetObjectItemCaseSensitive(train, "run_name")) {
        char name[128];
        base_name(path, name, sizeof name);
        cJSON_AddStringToObject(train, "run_name", name);
    }
    ok = ok && config_parse(root, world, cfg, err);
    cJSON_Delete(root);
    return ok;
}

bool config_set(cJSON *root, const char *assignment, data_err *err) {
    const char *expected = "an override key.path=value, e.g. optimizer.params.lr=3e-4";
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment) return DATA_ERR(err, expected, NULL, "'%s'", assignment);
    char key[512];
    size_t klen = (size_t)(eq - assignment);
    if (klen >= sizeof key) return DATA_ERR(err, expected, NULL, "a key of %zu bytes", klen);
    memcpy(key, assignment, klen);
    key[klen] = '\0';
    if (!cJSON_IsObject(root)) return DATA_ERR(err, "a config object to override", NULL, "'%s'", assignment);
    cJSON *obj = root;
    char *segment = key;
    for (;;) {
        char *dot = strchr(segment, '.');
        if (dot) *dot = '\0';
        if (!*segment) return DATA_ERR(err, expected, "no empty parts between dots", "'%s'", assignment);
        if (!dot) break;
        cJSON *next = cJSON_GetObjectItemCaseSensitive(obj, segment);
        if (!next) next = cJSON_AddObjectToObject(obj, segment);
        else if (!cJSON_IsObject(next)) {
            char found[128];
            return DATA_ERR(err, "an object on the path of the override", NULL, "'%s': %.*s is %s", assignment,
                            (int)(dot - key), key, describe(next, found, sizeof found));
        }
        *dot = '.';
        obj = next;
        segment = dot + 1;
    }
    const char *value = eq + 1;
    cJSON *parsed = cJSON_ParseWithOpts(value, NULL, true);
    if (!parsed) parsed = cJSON_CreateString(value);
    MP_ASSERT(parsed, "out of memory for an override");
    if (cJSON_GetObjectItemCaseSensitive(obj, segment)) cJSON_ReplaceItemInObjectCaseSensitive(obj, segment, parsed);
    else cJSON_AddItemToObject(obj, segment, parsed);
    return true;
}

bool config_data_path(const train_config *cfg, const char *file, char *out, int out_len) {
    int n = snprintf(out, (size_t)out_len, "%s/%s/%s", cfg->data.dir, cfg->data.dataset, file);
    return n > 0 && n < out_len;
}

bool config_load_vocab(train_config *cfg, data_err *err) {
    char path[2048];
    if (!config_data_path(cfg, "vocab.json", path, sizeof path))
        return DATA_ERR(err, "a data path below 2048 bytes", NULL, "%s/%s", cfg->data.dir, cfg->data.dataset);
    tokenizer t;
    if (!tokenizer_load(&t, path, err)) return false;
    uint32_t V = t.vocab_size;
    tokenizer_free(&t);
    model_config *m = &cfg->model.model;
    if (cfg->model.vocab_from_data) {
        m->V = (int)V;
        if (m->Vp && m->Vp < m->V)
            return DATA_ERR(err, "model.padded_vocab >= the dataset's vocabulary", NULL, "padded_vocab %d, %s has %u",
                            m->Vp, path, V);
        return true;
    }
    if ((uint32_t)m->V < V)
        return DATA_ERR(err, "model.vocab at least the dataset's vocabulary", "drop model.vocab to take the dataset's",
                        "model.vocab %d, but %s has %u tokens", m->V, path, V);
    return true;
}

/* ================================================================ writing back */

/* The shortest decimal that reads back as the same float: 1e-05, not 9.99999974737875e-06. */
static cJSON *float_number(float x) {
    char buf[32];
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x) break;
    }
    return cJSON_CreateRaw(buf);
}

static void add_field(cJSON *obj, const field_spec *f, const train_config *cfg) {
    const char *src = (const char *)cfg + f->offset;
    switch (f->kind) {
    case FK_INT: cJSON_AddNumberToObject(obj, f->key, *(const int *)src); break;
    case FK_LONG: cJSON_AddNumberToObject(obj, f->key, (double)*(const long *)src); break;
    case FK_U64:
    case FK_BYTES: cJSON_AddNumberToObject(obj, f->key, (double)*(const uint64_t *)src); break;
    case FK_DOUBLE: cJSON_AddNumberToObject(obj, f->key, *(const double *)src); break;
    case FK_FLOAT: cJSON_AddItemToObject(obj, f->key, float_number(*(const float *)src)); break;
    case FK_BOOL: cJSON_AddBoolToObject(obj, f->key, *(const bool *)src); break;
    case FK_STRING: cJSON_AddStringToObject(obj, f->key, src); break;
    case FK_ENUM: cJSON_AddStringToObject(obj, f->key, f->names[*(const int *)src]); break;
    case FK_SECTION:
    case FK_BLOCK: break;
    }
}

/* Every field of a section, except those skip() leaves out. */
static cJSON *section_json(const section_spec *s, const train_config *cfg, bool (*skip)(const train_config *, const char *)) {
    cJSON *obj = cJSON_CreateObject();
    for (int i = 0; i < s->nfields; i++) {
        const field_spec *f = &s->fields[i];
        if (skip && skip(cfg, f->key)) continue;
        if (f->kind == FK_SECTION) cJSON_AddItemToObject(obj, f->key, section_json(f->sub, cfg, skip));
        else add_field(obj, f, cfg);
    }
    return obj;
}

/* The distributed sampler's options only where it is the sampler. */
static bool skip_data_field(const train_config *cfg, const char *key) {
    return cfg->data.sampler == DATA_SAMPLER_GLOBAL && (strcmp(key, "drop_last") == 0 || strcmp(key, "workers") == 0);
}

/* The model is written field by field (no preset), and without what the file left to others: vocab
 * until it is known, padded_vocab unless set, rope_theta for GPT-2. */
static bool skip_model_field(const train_config *cfg, const char *key) {
    const model_config *m = &cfg->model.model;
    return strcmp(key, "preset") == 0 || (strcmp(key, "vocab") == 0 && m->V == 0) ||
           (strcmp(key, "padded_vocab") == 0 && m->Vp == 0) ||
           (strcmp(key, "rope_theta") == 0 && m->arch != MODEL_LLAMA);
}

static cJSON *optimizer_json(const optim_config *o) {
    const optim_hparams *h = &o->h;
    cJSON *obj = cJSON_CreateObject();
    cJSON_AddStringToObject(obj, "type", optim_info_of(o->kind)->name);
    cJSON *p = cJSON_AddObjectToObject(obj, "params");
    cJSON_AddNumberToObject(p, "lr", h->lr);
    cJSON_AddNumberToObject(p, "weight_decay", h->weight_decay);
    if (o->kind == OPTIM_SGD || o->kind == OPTIM_MOMENTUM) {
        cJSON_AddNumberToObject(p, "momentum", h->momentum);
        cJSON_AddNumberToObject(p, "dampening", h->dampening);
        cJSON_AddBoolToObject(p, "nesterov", h->nesterov);
    } else {
        double betas[2] = {h->beta1, h->beta2};
        cJSON_AddItemToObject(p, "betas", cJSON_CreateDoubleArray(betas, 2));
        cJSON_AddNumberToObject(p, "eps", h->eps);
    }
    /* DeepSpeed reads "Adam" as AdamW unless told otherwise. */
    if (o->kind == OPTIM_ADAM) cJSON_AddBoolToObject(p, "adam_w_mode", false);
    if (o->kind == OPTIM_LAMB) {
        cJSON_AddBoolToObject(p, "grad_averaging", h->grad_averaging);
        cJSON_AddNumberToObject(p, "min_coeff", h->min_trust);
        if (isfinite(h->max_trust)) cJSON_AddNumberToObject(p, "max_coeff", h->max_trust);
    }
    return obj;
}

/* In our own names, which take every value as it is (no DeepSpeed ratios or minimums). */
static cJSON *scheduler_json(const lr_schedule *s) {
    cJSON *obj = cJSON_CreateObject();
    cJSON_AddStringToObject(obj, "type", lr_kind_name(s->kind));
    cJSON *p = cJSON_AddObjectToObject(obj, "params");
    cJSON_AddNumberToObject(p, "lr", s->peak);
    cJSON_AddNumberToObject(p, "warmup_start_lr", s->start);
    cJSON_AddNumberToObject(p, "min_lr", s->end);
    cJSON_AddNumberToObject(p, "warmup_steps", (double)s->warmup_steps);
    cJSON_AddNumberToObject(p, "total_steps", (double)s->total_steps);
    cJSON_AddStringToObject(p, "warmup_type", s->ramp == LR_RAMP_LOG ? "log" : "linear");
    return obj;
}

cJSON *config_to_json(const train_config *cfg) {
    cJSON *root = cJSON_CreateObject();
    MP_ASSERT(root, "out of memory");
    for (int i = 0; i < top_section.nfields; i++) {
        const field_spec *f = &top_section.fields[i];
        if (strcmp(f->key, "optimizer") == 0) cJSON_AddItemToObject(root, f->key, optimizer_json(&cfg->optimizer));
        else if (strcmp(f->key, "scheduler") == 0) cJSON_AddItemToObject(root, f->key, scheduler_json(&cfg->scheduler));
        else if (f->sub == &model_section)
            cJSON_AddItemToObject(root, f->key, section_json(f->sub, cfg, skip_model_field));
        else if (f->sub == &data_section)
            cJSON_AddItemToObject(root, f->key, section_json(f->sub, cfg, skip_data_field));
        else if (f->sub == &fsdp_section && !(cfg->fsdp.enabled && cfg->zero.stage == 0))
            continue; /* only a run that asked for FSDP by its section has one (stage 3 says it by itself) */
        else if (f->kind == FK_SECTION) cJSON_AddItemToObject(root, f->key, section_json(f->sub, cfg, NULL));
        else add_field(root, f, cfg);
    }
    return root;
}

char *config_dump(const train_config *cfg) {
    cJSON *root = config_to_json(cfg);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    MP_ASSERT(text, "out of memory printing the config");
    return text;
}
