/* config.h: a training run's configuration, read from DeepSpeed-style JSON with mixpar's own model/data/train sections. */
#ifndef MIXPAR_TRAIN_CONFIG_H
#define MIXPAR_TRAIN_CONFIG_H

/* One JSON file describes a run. DeepSpeed's key names are used where DeepSpeed has the setting, so a
 * DeepSpeed config's batch, optimizer, scheduler, fp16/bf16 and ZeRO blocks read unchanged; three sections
 * of our own say what to train on:
 *
 *   {
 *     "train_micro_batch_size_per_gpu": 16,   "gradient_accumulation_steps": 1,   "gradient_clipping": 1.0,
 *     "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}},
 *     "scheduler": {"type": "warmup_cosine", "params": {"warmup_steps": 30, "min_lr": 1e-4}},
 *     "bf16": {"enabled": false},
 *     "zero_optimization": {"stage": 0},
 *     "model": {"arch": "gpt2", "layers": 4, "channels": 128, "heads": 4, "context": 64},
 *     "data":  {"dataset": "poetry", "seq_len": 64},
 *     "train": {"steps": 300, "eval_interval": 50, "run_name": "tiny-poetry"}
 *   }
 *
 * Every key is checked: an unknown key is an error that names its full path and the closest known key
 * ("model.chanels: unknown key; did you mean model.channels?"), a value of the wrong JSON type names the
 * path and the type expected, a value out of range names the path and the range. Nothing is guessed.
 *
 * The batch rule (DeepSpeed's): train_batch_size = train_micro_batch_size_per_gpu
 * * gradient_accumulation_steps * world, where world is the number of data-parallel ranks (the caller
 * knows it; the file does not). Given any two, the third is inferred; given only train_batch_size,
 * accumulation is 1; given only the micro-batch, accumulation is 1; all three must agree.
 *
 * Errors: the functions that can meet bad input take a data_err (data/data_err.h): with err == NULL they
 * print the message and exit 2 (what a command wants); otherwise they fill *err and return false (what a
 * test wants). One exception: problems inside the "optimizer" and "scheduler" blocks are reported by
 * optim/ (optim_config_from_json, lr_schedule_from_json), which always exit 2.
 *
 * Usage:
 *     const char *sets[] = {"optimizer.params.lr=3e-4", "train.steps=100"};
 *     train_config cfg;
 *     config_load("configs/tiny-poetry.json", sets, 2, world, &cfg, NULL);
 *     config_load_vocab(&cfg, NULL);            // model.vocab from data/poetry/vocab.json when absent
 *     model_config mc = cfg.model.model;       // then model_config_complete(&mc), model_create(&mc)
 *     cfg.model.model = *model_get_config(m);   // so that the dump holds the padded vocabulary too
 *     char *json = config_dump(&cfg);           // the resolved config, for the run header and checkpoints
 *
 * The dump writes train_batch_size, the micro-batch and the accumulation all three, so it parses back
 * only with the same world: resuming on another number of ranks means choosing which of the three to keep.
 */

#include <stdbool.h>
#include <stdint.h>

#include "data/data_err.h"
#include "data/loader.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

struct cJSON;

/* "fp16": DeepSpeed's keys and code defaults (deepspeed/runtime/precision_config.py; its docs disagree on
 * initial_scale_power and min_loss_scale, the code is what runs). Stored for the loss scaler. */
typedef struct {
    bool enabled;
    double loss_scale;           /* 0: dynamic scaling; > 0: this fixed scale */
    int initial_scale_power;     /* dynamic scaling starts at 2^initial_scale_power [16], 0..127 */
    int loss_scale_window;       /* clean steps before the scale doubles [1000] */
    int hysteresis;              /* overflows tolerated before the scale halves [2] */
    bool consecutive_hysteresis; /* refill hysteresis on every clean step [false] */
    double min_loss_scale;       /* the scale never goes below this [1] */
    bool auto_cast;              /* cast inputs to fp16 in forward [false] */
} config_fp16;

/* "bf16": {"enabled": true}. bf16 has fp32's exponent range, so no loss scaling. */
typedef struct {
    bool enabled;
} config_bf16;

/* "precision": mixpar's own section, the other ways to ask for a recipe (amp/setup.h maps them all; at most
 * one way may be used in a file, DeepSpeed's fp16/bf16 sections included) and the settings DeepSpeed's
 * sections have no key for. Empty strings and zeros mean "not given".
 *     "precision": {"recipe": "bf16-pure", "stochastic_rounding": true}
 *     "precision": {"keras_policy": "mixed_float16"}
 *     "precision": {"torch_autocast": "float16", "torch_grad_scaler": true, "loss_scaler": "pytorch",
 *                   "init_scale": 65536, "growth_interval": 2000}
 *     "precision": {"recipe": "fp8", "fp8_history": 16, "fp8_margin": 0, "fp8_scaling": true,
 *                   "fp8_mx": false}   (fp8_mx: MXFP8 blocks of 32 instead of per-tensor scales, lab 30) */
typedef struct {
    char recipe[16];                         /* fp32, tf32, fp16, fp16-o2, bf16, bf16-pure, fp8 */
    char keras_policy[24];                   /* float32, mixed_float16, mixed_bfloat16, bfloat16 */
    char torch_autocast[24];                 /* float16, bfloat16, float32 / none */
    bool torch_grad_scaler;
    char loss_scaler[16];                    /* none, static, pytorch, keras, deepspeed [the recipe's] */
    double init_scale;                       /* [the scaler kind's]; static: the scale */
    int growth_interval;                     /* [the scaler kind's] */
    bool stochastic_rounding;                /* bf16-pure: round updates stochastically [true] */
    int fp8_history;                         /* amax history length [16] */
    int fp8_margin;                          /* binades of headroom [0] */
    bool fp8_scaling;                        /* per-tensor delayed scaling; false casts with scale 1 [true] */
    bool fp8_mx;                             /* MXFP8 blocks of 32 with E8M0 scales instead (lab 30) [false] */
} config_precision;

typedef enum { OFFLOAD_NONE, OFFLOAD_CPU, OFFLOAD_NVME, OFFLOAD_NDEVICES } config_offload_device;

/* "zero_optimization": DeepSpeed's keys and defaults (deepspeed/runtime/zero/config.py). Sizes are in
 * elements, as DeepSpeed counts them. Stored for the ZeRO stages. */
typedef struct {
    int stage;                               /* 0 plain data parallel, 1 optimizer states, 2 + gradients,
                                              * 3 + parameters [0] */
    uint64_t reduce_bucket_size;             /* [5e8] */
    uint64_t allgather_bucket_size;          /* [5e8] read, not used: ZeRO-1/2 gather each bucket's updated
                                              * shard as its reduction's bucket (dist/zero.h) */
    bool overlap_comm;                       /* [true for stage 3, false otherwise] */
    bool contiguous_gradients;               /* [true] read, not used: gradients are always one flat buffer */
    bool reduce_scatter;                     /* [true] read, not used: ZeRO always reduce-scatters */
    uint64_t stage3_prefetch_bucket_size;    /* [5e7] */
    uint64_t stage3_param_persistence_threshold; /* [1e5] read so DeepSpeed configs load, not used: DeepSpeed
                                              * keeps tensors below it whole on every rank; mixpar's stage-3
                                              * units are whole blocks (dist/fsdp.h), each sharded with the
                                              * small tensors inside it */
    config_offload_device offload_optimizer; /* "offload_optimizer": {"device": "none" | "cpu" | "nvme"} */
    bool offload_pin_memory;                 /* "offload_optimizer": {"pin_memory": ...} [false] read, not used:
                                              * the CPU build has no device copies to pin for */
} config_zero;

/* "fsdp": PyTorch FSDP's options under their own names (dist/fsdp.h, lab 20). The section's presence turns
 * FSDP on (zero_optimization.stage must then be 0: two ways of sharding at once are refused);
 * zero_optimization.stage 3 is FSDP's FULL_SHARD under DeepSpeed's keys.
 *     "fsdp": {"sharding_strategy": "HYBRID_SHARD", "hybrid_shard_size": 2, "forward_prefetch": true} */
typedef struct {
    bool enabled;                            /* the section was given (or stage 3 asked for FULL_SHARD) */
    int sharding_strategy;                   /* fsdp_strategy: "FULL_SHARD" [default], "SHARD_GRAD_OP",
                                              * "NO_SHARD", "HYBRID_SHARD" */
    int hybrid_shard_size;                   /* HYBRID_SHARD: ranks per shard group, dividing the world [0: required] */
    bool forward_prefetch;                   /* [false, PyTorch's default] */
    int backward_prefetch;                   /* "BACKWARD_PRE" [default] or "NONE" */
    bool limit_all_gathers;                  /* at most one unit gathered ahead of the running one [true];
                                              * false: prefetch runs as far ahead as it likes */
} config_fsdp;

/* "communication": mixpar's own section (DeepSpeed has no such key): how data parallel averages the
 * gradients, a DDP communication hook (dist/hooks.h). Unknown hook names are an error naming
 * communication.hook and listing the known ones.
 *     "communication": {"hook": "topk", "topk_ratio": 0.01, "powersgd_rank": 2}
 *     "communication": {"fusion": true, "fusion_threshold": "64MiB", "hook": "fp16"}   (Horovod, lab 27) */
typedef struct {
    int hook;                                /* ddp_hook_kind: "allreduce" [default], "fp16", "bf16", "topk",
                                              * "powersgd" */
    double topk_ratio;                       /* topk: share of each bucket's entries sent, (0, 1] [0.01] */
    int powersgd_rank;                       /* powersgd: rank r of the approximation, 1..64 [1, PyTorch's] */
    bool deterministic;                      /* gradients added in rank order (comm/algo_chain.c), and on one
                                              * rank micro-batches added in order (train/step.h): bit for bit
                                              * the same whatever the bucket sizes; N ranks = 1 rank x N
                                              * micro-batches [false] */
    bool fusion;                             /* Horovod's tensor fusion instead of DDP's buckets (dist/fusion.h,
                                              * lab 27) [false] */
    uint64_t fusion_threshold;               /* bytes of one fusion buffer, HOROVOD_FUSION_THRESHOLD [64 MiB];
                                              * 0: every tensor reduced alone */
} config_comm;

/* "activation_checkpointing": DeepSpeed's section name with mixpar's own keys (model.h, lab 18):
 *     "activation_checkpointing": {"policy": "every_k", "every_k": 2}
 * DeepSpeed's keys in this section (partition_activations, cpu_checkpointing,
 * contiguous_memory_optimization, number_checkpoints, synchronize_checkpoint_boundary, profile) tune its
 * checkpoint() wrapper, which the model code calls around the blocks it chooses; mixpar's model chooses
 * the blocks itself from the policy, keeps one block's recompute buffers in its own contiguous layout,
 * has no model parallelism to partition over and offloads no activations (the optimizer's offload is
 * zero_optimization.offload_optimizer, lab 18 part D). So they are unknown keys here, with the error
 * naming the keys there are, rather than read and ignored. */
typedef struct {
    int policy;                              /* model_recompute: "none" [default], "every", "every_k",
                                              * "selective" */
    int every_k;                             /* every_k: blocks 0, k, 2k... are checkpointed, 1..4096 [2] */
} config_activation_checkpointing;

/* "model": either every field, or {"preset": "gpt2-124m"} (the planner's presets, plan/plan.h) with any
 * field overridden. model_config's fields are filled as far as the file says; Vp stays 0 unless
 * padded_vocab is given (model_config_complete pads it); V stays 0 when "vocab" is absent, until
 * config_load_vocab reads it from the dataset. */
typedef struct {
    char preset[40];                         /* "" when the model was given field by field */
    bool vocab_from_data;                    /* "vocab" was absent: V comes from the dataset */
    model_config model;                      /* arch, V, Vp, maxT (context), L, C, NH, KVH, F, tied, eps, theta */
} config_model;

/* Which training rows each data-parallel rank takes (train/train_data.h):
 *   global:      Megatron's pretraining sampler: every rank walks the same order of global batches of
 *                B x world windows (data/loader.h) and takes its own block of B rows, so N ranks x B see,
 *                row for row, what 1 rank x B x N accumulated micro-batches sees;
 *   distributed: PyTorch's DistributedSampler (data/sampler.h, lab 15): rank r takes positions r, r + world,
 *                ... of the epoch's order, padded or cut to equal shares, prepared ahead by worker threads
 *                (data/prefetch.h). A global batch holds the rows 1 rank x B x world would take with this
 *                sampler; which rank holds which differs from "global" (and its shuffle is its own). */
typedef enum { DATA_SAMPLER_GLOBAL, DATA_SAMPLER_DISTRIBUTED } data_sampler;

/* "data": {"dataset": "poetry", "dir": "data", "seq_len": 64, "order": "shuffle"}. Files are read from
 * <dir>/<dataset>/ (train.tokens, val.tokens, vocab.json), as `mixpar data build NAME` writes them. */
typedef struct {
    char dataset[64];
    char dir[1024];                          /* ["data"] */
    int seq_len;                             /* T of a batch [the model's context]; 1..context */
    loader_order order;                      /* "shuffle" [default] or "sequential" (data/loader.h) */
    data_sampler sampler;                    /* "global" [default] or "distributed" (above) */
    bool drop_last;                          /* distributed: cut the epoch's tail instead of padding [false] */
    int workers;                             /* distributed: threads preparing batches ahead, 0..2 [1] */
} config_data;

/* "train": the loop. Intervals count optimizer steps; 0 turns the periodic action off. */
typedef struct {
    long steps;                              /* optimizer steps to take (required) */
    int eval_interval;                       /* evaluate every this many steps [0: off] */
    int eval_batches;                        /* validation batches per evaluation [8] */
    int checkpoint_interval;                 /* checkpoint every this many steps [0: off] */
    char run_name[128];                      /* [the config file's name without .json; "run"] */
    char run_dir[1024];                      /* [runs/<run_name>] */
    uint64_t seed;                           /* initialisation and data order [1]; 0 .. 2^53 */
    int log_interval;                        /* a log line every this many steps [1] */
    int sample_interval;                     /* generate text every this many steps [0: off] */
    int hist_interval;                       /* per-layer gradient exponent histograms ("hist" events) every
                                              * this many steps [0: off] */
    int sample_tokens;                       /* tokens per sample [64] */
    char sample_prompt[512];                 /* [""] */
    uint64_t max_memory;                     /* bytes; "24GB", "80GiB" or a number [0: no limit] */
    int threads;                             /* OpenMP threads [0: the runtime's default] */
    char freeze[512];                        /* tensors to freeze, comma-separated names or prefixes ending
                                              * in '*' ("wpe,h.0.*"): no gradient, no update [""] */
    char no_decay[64];                       /* weight-decay groups left undecayed, "norm,bias,embedding"
                                              * (optim/decay.h) ["": the GPT-2 rule, tensors of 2 or more
                                              * dimensions decay] */
    int max_consecutive_skips;               /* this many skipped steps in a row stop the run (exit 2) after a
                                              * scan that names the first non-finite weight or activation; a
                                              * non-finite loss stops it at once except under fp16's dynamic
                                              * scaler, whose overflow skips are normal [32: the loss scale
                                              * halved 32 times; 0: off] */
    bool profile;                            /* profile every step: trace.rank<R>.json and profile.rank<R>.tsv
                                              * in the run folder (train/train_profile.h) [false] */
} config_train;

typedef struct {
    int world;                               /* data-parallel ranks, from the caller */
    int train_batch_size;                    /* sequences per optimizer step, all ranks together */
    int micro_batch;                         /* train_micro_batch_size_per_gpu: B of one forward */
    int grad_accum;                          /* gradient_accumulation_steps */
    double gradient_clipping;                /* global-norm clip; 0 = off (DeepSpeed's code default) */
    optim_config optimizer;                  /* "optimizer" (required) */
    lr_schedule scheduler;                   /* "scheduler" [constant at the optimizer's lr] */
    config_fp16 fp16;
    config_bf16 bf16;
    config_precision precision;              /* "precision" */
    config_zero zero;
    config_fsdp fsdp;                        /* "fsdp" */
    config_comm comm;                        /* "communication" */
    config_activation_checkpointing ckpt;    /* "activation_checkpointing" */
    config_model model;
    config_data data;
    config_train train;
    /* Model parallel, under Megatron-LM's key names (train/mp_step.h): world = dp x tp x pp ranks, and the
     * batch rule's world is the dp = world / (tp x pp) data-parallel ranks. Under pipeline parallel a step's
     * micro-batches are gradient_accumulation_steps (as DeepSpeed's PipelineEngine counts them): the
     * pipeline runs that many micro-batches of train_micro_batch_size_per_gpu rows per step. */
    int tensor_parallel;                     /* "tensor_model_parallel_size" [1] */
    int pipeline_parallel;                   /* "pipeline_model_parallel_size" [1] */
    bool sequence_parallel;                  /* "sequence_parallel" [false]: Megatron's sequence parallel over the
                                              * tp group (dist/sp.h); with tp 1 ignored with a warning, as
                                              * Megatron-LM does; data.seq_len must be divisible by tp */
    int pipeline_schedule;                   /* "pipeline_schedule": "gpipe", "1f1b" or "interleaved" [1f1b]
                                              * (dist/pp.h) */
    int layers_per_virtual_stage;            /* "num_layers_per_virtual_pipeline_stage": interleaved's blocks per
                                              * model chunk; v = layers / (pp x it) chunks per stage [0: none] */
} train_config;

/* Parses a config object. world >= 1. On success *cfg holds the resolved config. Keys that depend on
 * each other are resolved together: the batch rule; a scheduler without total_steps / total_num_steps
 * decays over train.steps; data.seq_len defaults to model.context. */
bool config_parse(const struct cJSON *root, int world, train_config *cfg, data_err *err);

/* Reads a JSON file, applies each "key.path=value" override in order (config_set), and parses it.
 * train.run_name defaults to the file's base name without ".json". */
bool config_load(const char *path, const char *const *sets, int nsets, int world, train_config *cfg,
                 data_err *err);

/* Applies one --set override to a JSON tree before it is parsed: "optimizer.params.lr=3e-4". The value
 * is read as JSON when it is valid JSON (numbers, true/false/null, "quoted", [arrays], {objects}),
 * otherwise it is taken as a string (train.run_name=exp1). Missing objects on the path are created;
 * stepping into a value that is not an object is an error naming the path. Whether the key is known is
 * checked when the tree is parsed, with the same messages as for a file. */
bool config_set(struct cJSON *root, const char *assignment, data_err *err);

/* The resolved config as JSON text (caller frees with free()). Parsing it again with the same world gives
 * the same train_config: every default is written out, the model field by field (no preset). */
char *config_dump(const train_config *cfg);
struct cJSON *config_to_json(const train_config *cfg);

/* <data.dir>/<data.dataset>/<file>, e.g. "data/poetry/train.tokens". False when it does not fit. */
bool config_data_path(const train_config *cfg, const char *file, char *out, int out_len);

/* Reads the dataset's vocab.json: sets model.V when "vocab" was absent; otherwise checks that the model's
 * vocabulary holds every token of the dataset (model.vocab >= the dataset's V). */
bool config_load_vocab(train_config *cfg, data_err *err);

/* Edit distance (insertions, deletions, substitutions, transpositions of neighbours) between two keys;
 * what "did you mean" ranks the known keys by. */
int config_key_distance(const char *a, const char *b);

#endif
