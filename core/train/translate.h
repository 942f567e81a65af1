/* translate.h: other frameworks' training settings (DeepSpeed, Megatron-LM, PyTorch FSDP, Horovod) as a mixpar config. */
#ifndef MIXPAR_TRAIN_TRANSLATE_H
#define MIXPAR_TRAIN_TRANSLATE_H

#include "data/data_err.h"

#include <stdbool.h>

struct cJSON;

/* Each framework's translator is a table of rules, one per setting the framework has: its name there, the
 * mixpar key it becomes and how the value converts, or why mixpar has no such setting. The input files:
 *
 *   deepspeed  the DeepSpeed JSON config (ds_config.json). Its keys are mostly mixpar's own (train/config.h).
 *   megatron   Megatron-LM's command-line arguments as pasted from a launch script: tokens separated by
 *              blanks or newlines, "\" line continuations and # comments ignored, quotes around a token
 *              removed. `--name value` or `--flag`; the launcher's words before (torchrun, pretrain_gpt.py,
 *              $VARS standing alone) are reported and skipped.
 *   fsdp       PyTorch FSDP's constructor arguments, one per line, `name: value` or `name=value`, # comments:
 *                  sharding_strategy: ShardingStrategy.HYBRID_SHARD
 *                  mixed_precision.param_dtype: torch.bfloat16      (MixedPrecision(param_dtype=...))
 *                  auto_wrap_policy: size_based_auto_wrap_policy
 *                  auto_wrap_policy.min_num_params: 100000000
 *                  cpu_offload.offload_params: True                 (CPUOffload(offload_params=True))
 *              Python spellings are read as such: True/False/None, torch.bfloat16, ShardingStrategy.X.
 *   horovod    Horovod's settings: environment lines (HOROVOD_FUSION_THRESHOLD=67108864, `export` allowed)
 *              and DistributedOptimizer's arguments (compression=fp16, backward_passes_per_step=2, op=Average)
 *              in the same line format, or a JSON object of the same names.
 *
 * A translation is a mixpar config fragment plus notes: every setting of the file that did not map, with
 * the reason ("zero_optimization.offload_param.device: parameter offload (ZeRO-Infinity) is not
 * implemented"). tr_finish lays the fragment over a base config (what the framework's file does not say:
 * the model for DeepSpeed, everything but communication for Horovod) and loads the result with the real
 * config loader (config_parse); a translated key the loader does not know (Megatron's model-parallel sizes
 * before mixpar has them) is listed as not yet runnable and left out, so what remains trains.
 *
 *     tr_result r;
 *     if (!tr_translate_file(TR_MEGATRON, "args.txt", &r, &err)) ... // bad file: err names key / offset
 *     tr_finish(&r, base, world);            // r.config: the loaded config's JSON; r.runnable, r.load_error
 *     for (int i = 0; i < r.nnotes; i++) r.notes[i].from, .reason
 *     tr_result_free(&r);
 */
typedef enum { TR_DEEPSPEED, TR_MEGATRON, TR_FSDP, TR_HOROVOD, TR_NFRAMEWORKS } tr_framework;

typedef enum {
    TR_VALUE,       /* the value as it is (a JSON value, or text read as JSON, else as a string) */
    TR_FIXED,       /* a fixed value (`arg`), whatever the input says: Megatron's flags */
    TR_RENAME,      /* a value renamed by the pairs in `arg`: "none=allreduce,fp16=fp16" */
    TR_CALL,        /* the rule's own conversion function */
    TR_UNSUPPORTED, /* no mixpar setting: `note` says why */
} tr_kind;

typedef struct tr_result tr_result;

typedef struct {
    const char *from;    /* the framework's name: "zero_optimization.stage", "--micro-batch-size" */
    const char *to;      /* the mixpar key; for TR_UNSUPPORTED the concept, in parentheses: "(NVMe offload)" */
    tr_kind kind;
    const char *arg;     /* TR_FIXED: the value; TR_RENAME: the pairs */
    /* TR_CALL: converts `value` (text) into r's config; false with err filled when the value is bad. */
    bool (*convert)(tr_result *r, const char *to, const char *value, data_err *err);
    const char *note;    /* TR_UNSUPPORTED: the reason; otherwise what a reader should know, or NULL */
    bool flag;           /* Megatron: an argument that takes no value */
} tr_rule;

typedef struct {
    const char *name;    /* "deepspeed" (the --from name) */
    const char *title;   /* "DeepSpeed" */
    const tr_rule *rules;
    int nrules;
} tr_table;

const tr_table *tr_table_get(tr_framework f);
int tr_framework_from_name(const char *name); /* -1 when unknown */

typedef enum { TR_NOTE_UNMAPPED, TR_NOTE_NOT_YET_RUNNABLE } tr_note_kind;

typedef struct {
    tr_note_kind kind;
    char from[96];       /* the setting as the file names it */
    char to[96];         /* the mixpar key it would be ("" when none) */
    char reason[256];
} tr_note;

struct tr_result {
    tr_framework framework;
    struct cJSON *config;  /* the fragment; after tr_finish, the config that loads (base + fragment) */
    int mapped;            /* settings mapped */
    tr_note *notes;
    int nnotes, cap;
    bool runnable;         /* tr_finish: the config loads */
    char load_error[800];  /* tr_finish: why it does not */
};

/* Translates a file; false with err (key or offset, what was expected) when the file cannot be read. */
bool tr_translate_file(tr_framework f, const char *path, tr_result *r, data_err *err);
/* The same from text in memory (`name` for messages). */
bool tr_translate_text(tr_framework f, const char *text, const char *name, tr_result *r, data_err *err);
/* Merges the fragment over base (may be NULL) and loads it for `world` ranks (see above). */
void tr_finish(tr_result *r, const struct cJSON *base, int world);
void tr_result_free(tr_result *r);

/* ---------------------------------------------------------------- pieces (tests, lab 27) */

/* Megatron-LM: the arguments tokens[0..n) through the table into r (lab 27). false with err for an argument
 * that needs a value and has none, or a value the rule refuses. */
bool tr_megatron_args(tr_result *r, char **tokens, int n, data_err *err);
/* One rule applied to a value (text): the mixpar key set in r->config, or a note for TR_UNSUPPORTED. */
bool tr_apply(tr_result *r, const tr_rule *rule, const char *from, const char *value, data_err *err);
/* The rule of a table named `from` (exactly), or NULL. */
const tr_rule *tr_find_rule(const tr_table *t, const char *from);
/* A text file (under 1 MiB, no NUL bytes), malloc'd; NULL with err. */
char *tr_read_text(const char *path, data_err *err);
/* A JSON object from text; false with err naming line, column and byte offset. */
bool tr_parse_json_text(const char *text, const char *name, struct cJSON **out, data_err *err);
/* Records a setting that did not map. */
void tr_add_note(tr_result *r, tr_note_kind kind, const char *from, const char *to, const char *reason);

#endif
