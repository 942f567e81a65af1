/* translate_tables.c: what DeepSpeed, Megatron-LM, PyTorch FSDP and Horovod call each setting, and its mixpar key. */
#include "train/translate_tables.h"

#include "amp/setup.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ================================================================ conversions */

/* A setting mixpar always has (or never needs): mapped, nothing to write. */
static bool implied(tr_result *r, const char *to, const char *value, data_err *err) {
    (void)r, (void)to, (void)value, (void)err;
    return true;
}

/* Megatron's --adam-beta1 / --adam-beta2: one entry of optimizer.params.betas (Megatron's defaults 0.9, 0.999). */
static bool adam_beta(tr_result *r, const char *to, const char *value, data_err *err) {
    char *end;
    double b = strtod(value, &end);
    if (*end || !(b >= 0 && b < 1)) return DATA_ERR(err, "a number in [0, 1)", NULL, "%s: \"%s\"", to, value);
    cJSON *opt = cJSON_GetObjectItemCaseSensitive(r->config, "optimizer");
    cJSON *params = cJSON_GetObjectItemCaseSensitive(opt, "params");
    cJSON *betas = cJSON_GetObjectItemCaseSensitive(params, "betas");
    double pair[2] = {0.9, 0.999};
    for (int i = 0; i < 2 && cJSON_GetArraySize(betas) == 2; i++) pair[i] = cJSON_GetArrayItem(betas, i)->valuedouble;
    pair[strcmp(to, "optimizer.params.betas[1]") == 0] = b;
    char text[96];
    snprintf(text, sizeof text, "[%.17g, %.17g]", pair[0], pair[1]);
    return tr_set(r, "optimizer.params.betas", text, err);
}

/* Megatron's --initial-loss-scale 65536 is DeepSpeed's initial_scale_power 16: a power of two. */
static bool initial_loss_scale(tr_result *r, const char *to, const char *value, data_err *err) {
    char *end;
    double s = strtod(value, &end);
    int e;
    if (*end || !(s >= 1) || frexp(s, &e) != 0.5 || e - 1 > 127)
        return DATA_ERR(err, "a power of two from 1 to 2^127", "fp16.initial_scale_power is its exponent",
                        "--initial-loss-scale %s", value);
    char text[16];
    snprintf(text, sizeof text, "%d", e - 1);
    return tr_set(r, to, text, err);
}

/* Megatron's --lr-warmup-fraction: warmup steps = fraction x the decay length (--lr-decay-iters, else
 * --train-iters), which must come before it. */
static bool warmup_fraction(tr_result *r, const char *to, const char *value, data_err *err) {
    char *end;
    double f = strtod(value, &end);
    if (*end || !(f >= 0 && f <= 1)) return DATA_ERR(err, "a fraction in [0, 1]", NULL, "--lr-warmup-fraction %s", value);
    const cJSON *sched = cJSON_GetObjectItemCaseSensitive(r->config, "scheduler");
    const cJSON *total = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sched, "params"), "total_steps");
    if (!cJSON_IsNumber(total))
        total = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r->config, "train"), "steps");
    if (!cJSON_IsNumber(total))
        return DATA_ERR(err, "--lr-decay-iters or --train-iters before --lr-warmup-fraction",
                        "the warmup is a fraction of the decay length", "--lr-warmup-fraction %s with neither before it",
                        value);
    char text[32];
    snprintf(text, sizeof text, "%.0f", floor(f * total->valuedouble));
    return tr_set(r, to, text, err);
}

/* FSDP's MixedPrecision(param_dtype=...): FSDP keeps the fp32 shards and computes in param_dtype, which is
 * PyTorch's autocast with that dtype (and a ShardedGradScaler for float16): lab 08's mapping checks it. */
static bool fsdp_param_dtype(tr_result *r, const char *to, const char *value, data_err *err) {
    (void)to;
    amp_setup setup;
    bool fp16 = strcmp(value, "float16") == 0 || strcmp(value, "half") == 0;
    if (!amp_recipe_from_torch(value, fp16, &setup, err)) return false;
    if (strcmp(value, "float32") == 0) return true;
    return tr_set(r, "precision.torch_autocast", value, err) &&
           tr_set(r, "precision.torch_grad_scaler", fp16 ? "true" : "false", err);
}

/* FSDP's reduce_dtype: mixpar's FSDP reduce-scatters fp32 gradients. */
static bool fsdp_reduce_dtype(tr_result *r, const char *to, const char *value, data_err *err) {
    (void)to, (void)err;
    if (strcmp(value, "float32") != 0 && strcmp(value, "null") != 0) {
        r->mapped--;
        tr_add_note(r, TR_NOTE_UNMAPPED, "mixed_precision.reduce_dtype", NULL,
                    "mixpar's FSDP reduce-scatters fp32 gradients; 16-bit reduction is a DDP hook "
                    "(communication.hook), which FSDP does not take");
    }
    return true;
}

/* FSDP's auto-wrap policy: mixpar's units are whole transformer blocks, transformer_auto_wrap_policy's. */
static bool fsdp_auto_wrap(tr_result *r, const char *to, const char *value, data_err *err) {
    (void)to, (void)err;
    if (strstr(value, "transformer") || strstr(value, "ModuleWrapPolicy")) return true;
    r->mapped--;
    tr_add_note(r, TR_NOTE_UNMAPPED, "auto_wrap_policy", NULL,
                "mixpar's FSDP units are whole transformer blocks (transformer_auto_wrap_policy); units by size are "
                "not implemented");
    return true;
}

/* FSDP's device_mesh (replicate, shard) for HYBRID_SHARD: the shard group's size. */
static bool fsdp_device_mesh(tr_result *r, const char *to, const char *value, data_err *err) {
    int replicate, shard;
    if (sscanf(value, " %*[[(] %d , %d", &replicate, &shard) != 2 || replicate < 1 || shard < 1)
        return DATA_ERR(err, "a 2-D mesh (replicate, shard), e.g. (2, 4)", NULL, "device_mesh: \"%s\"", value);
    char text[16];
    snprintf(text, sizeof text, "%d", shard);
    return tr_set(r, to, text, err);
}

/* Horovod's op: Average is what data parallel does; Sum and Adasum are other updates. */
static bool horovod_op(tr_result *r, const char *to, const char *value, data_err *err) {
    (void)to, (void)err;
    if (strcmp(value, "Average") == 0) return true;
    r->mapped--;
    tr_add_note(r, TR_NOTE_UNMAPPED, "op", NULL,
                "mixpar averages gradients over the ranks; Sum (a learning rate times world) and Adasum are not "
                "implemented");
    return true;
}

/* DeepSpeed's "pipeline" section (its PipelineModule and PipelineEngine settings). stages: a number of stages
 * is pipeline_model_parallel_size; "auto" (DeepSpeed's default: the PipelineModule's num_stages) says nothing. */
static bool ds_pipeline_stages(tr_result *r, const char *to, const char *value, data_err *err) {
    char *end;
    long n = strtol(value, &end, 10);
    if (*end == '\0' && n >= 1 && n <= 4096) return tr_set(r, to, value, err);
    if (strcmp(value, "auto") != 0)
        return DATA_ERR(err, "a number of stages from 1 to 4096, or \"auto\"", NULL, "pipeline.stages: \"%s\"", value);
    r->mapped--;
    tr_add_note(r, TR_NOTE_UNMAPPED, "pipeline.stages", to,
                "\"auto\" takes the stages from DeepSpeed's PipelineModule(num_stages=...): set "
                "pipeline_model_parallel_size");
    return true;
}

/* partition / partition_method: "parameters" balances the stages by parameter count, which is what mixpar's
 * pipeline does (dist/pp.h pp_balance_stages); the other methods have no mixpar setting. */
static bool ds_pipeline_partition(tr_result *r, const char *to, const char *value, data_err *err) {
    (void)to, (void)err;
    if (strcmp(value, "parameters") == 0) return true;
    r->mapped--;
    char from[64];
    snprintf(from, sizeof from, "pipeline.%s", strstr(to, "method") ? "partition_method" : "partition");
    tr_add_note(r, TR_NOTE_UNMAPPED, from, NULL,
                "mixpar balances the stages by parameters (DeepSpeed's \"parameters\"); \"uniform\", \"type:...\" "
                "and \"best\" have no setting here");
    return true;
}

/* activation_checkpoint_interval: 0 none, 1 every block (its input kept, rerun in backward). DeepSpeed's k > 1
 * checkpoints runs of k layers as one (keeping the first's input, rerunning all k): mixpar's every_k keeps
 * one block of k and the others whole, a different trade. */
static bool ds_pipeline_ckpt_interval(tr_result *r, const char *to, const char *value, data_err *err) {
    char *end;
    long k = strtol(value, &end, 10);
    if (*end || k < 0) return DATA_ERR(err, "a whole number >= 0", NULL, "pipeline.activation_checkpoint_interval: \"%s\"", value);
    if (k <= 1) return tr_set(r, to, k == 0 ? "\"none\"" : "\"every\"", err);
    r->mapped--;
    tr_add_note(r, TR_NOTE_UNMAPPED, "pipeline.activation_checkpoint_interval", to,
                "an interval above 1 reruns runs of k layers from one kept input; mixpar's every_k keeps 1 block in k "
                "checkpointed and the others whole (activation_checkpointing.policy every_k), a different trade");
    return true;
}

/* ================================================================ DeepSpeed: the keys are mostly mixpar's */

#define SAME(key) {key, key, TR_VALUE, NULL, NULL, NULL, false}
static const tr_rule deepspeed_rules[] = {
    SAME("train_batch_size"),
    SAME("train_micro_batch_size_per_gpu"),
    {"gradient_accumulation_steps", "gradient_accumulation_steps", TR_VALUE, NULL, NULL,
     "under pipeline parallel, the micro-batches a step runs through the pipeline (as DeepSpeed's PipelineEngine)",
     false},
    SAME("gradient_clipping"),
    {"pipeline.stages", "pipeline_model_parallel_size", TR_CALL, NULL, ds_pipeline_stages, NULL, false},
    {"pipeline.partition_method", "(partition_method)", TR_CALL, NULL, ds_pipeline_partition, NULL, false},
    {"pipeline.partition", "(partition)", TR_CALL, NULL, ds_pipeline_partition, NULL, false},
    {"pipeline.activation_checkpoint_interval", "activation_checkpointing.policy", TR_CALL, NULL,
     ds_pipeline_ckpt_interval, NULL, false},
    {"pipeline.seed_layers", "(per-layer seeds)", TR_UNSUPPORTED, NULL, NULL,
     "every stage draws the whole model's initial values in order and keeps its slice, so any mesh starts from the "
     "1-rank weights; no per-layer seeds", false},
    {"pipeline.pipe_partitioned", "(activations split over tp)", TR_UNSUPPORTED, NULL, NULL,
     "the hidden state sent between stages is whole (B,T,C) on every tensor-parallel rank, not split over them",
     false},
    {"pipeline.grad_partitioned", "(gradients split over tp)", TR_UNSUPPORTED, NULL, NULL,
     "the gradient sent back between stages is whole (B,T,C) on every tensor-parallel rank, not split over them",
     false},
    {"optimizer", "optimizer", TR_VALUE, NULL, NULL, "the block as it is: optim/ reads DeepSpeed's types", false},
    {"scheduler", "scheduler", TR_VALUE, NULL, NULL, "WarmupLR, WarmupDecayLR, WarmupCosineLR as DeepSpeed runs them", false},
    SAME("fp16.enabled"), SAME("fp16.loss_scale"), SAME("fp16.initial_scale_power"), SAME("fp16.loss_scale_window"),
    SAME("fp16.hysteresis"), SAME("fp16.consecutive_hysteresis"), SAME("fp16.min_loss_scale"), SAME("fp16.auto_cast"),
    SAME("bf16.enabled"),
    SAME("zero_optimization.stage"),
    SAME("zero_optimization.reduce_bucket_size"),
    SAME("zero_optimization.allgather_bucket_size"),
    SAME("zero_optimization.overlap_comm"),
    SAME("zero_optimization.contiguous_gradients"),
    SAME("zero_optimization.reduce_scatter"),
    SAME("zero_optimization.stage3_prefetch_bucket_size"),
    SAME("zero_optimization.stage3_param_persistence_threshold"),
    SAME("zero_optimization.offload_optimizer.device"),
    SAME("zero_optimization.offload_optimizer.pin_memory"),
    {"steps_per_print", "train.log_interval", TR_VALUE, NULL, NULL, NULL, false},
    {"zero_optimization.offload_param", "(parameter offload)", TR_UNSUPPORTED, NULL, NULL,
     "parameter offload (ZeRO-Infinity) is not implemented; zero_optimization.offload_optimizer is", false},
    {"zero_optimization.offload_optimizer.nvme_path", "(NVMe offload)", TR_UNSUPPORTED, NULL, NULL,
     "NVMe offload is not implemented", false},
    {"zero_optimization.offload_optimizer.buffer_count", "(NVMe offload)", TR_UNSUPPORTED, NULL, NULL,
     "NVMe offload is not implemented", false},
    {"zero_optimization.offload_optimizer.fast_init", "(NVMe offload)", TR_UNSUPPORTED, NULL, NULL,
     "NVMe offload is not implemented", false},
    {"zero_optimization.stage3_max_live_parameters", "(live-parameter budget)", TR_UNSUPPORTED, NULL, NULL,
     "mixpar's stage 3 holds at most one unit ahead (fsdp.limit_all_gathers) instead of a parameter budget", false},
    {"zero_optimization.stage3_max_reuse_distance", "(live-parameter budget)", TR_UNSUPPORTED, NULL, NULL,
     "mixpar's stage 3 frees every gathered unit after use; no reuse distance", false},
    {"zero_optimization.sub_group_size", "(optimizer sub-groups)", TR_UNSUPPORTED, NULL, NULL,
     "the optimizer steps each rank's whole shard at once; no sub-groups", false},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", "(16-bit checkpoint)", TR_UNSUPPORTED, NULL, NULL,
     "checkpoints hold fp32 weights (a sharded one per rank, train/ckpt_sharded.h)", false},
    {"wall_clock_breakdown", "(timing)", TR_UNSUPPORTED, NULL, NULL,
     "mixpar always writes span and comm events: mixpar trace RUN shows the breakdown", false},
    {"activation_checkpointing", "activation_checkpointing", TR_UNSUPPORTED, NULL, NULL,
     "mixpar's activation_checkpointing section has its own keys (policy, every_k)", false},
    {"communication_data_type", "communication.hook", TR_UNSUPPORTED, NULL, NULL,
     "16-bit gradient reduction is communication.hook (fp16, bf16) in mixpar", false},
    {"prescale_gradients", "(gradient pre-division)", TR_UNSUPPORTED, NULL, NULL,
     "mixpar divides the fp32 sum by the world once, after the reduction", false},
    {"gradient_predivide_factor", "(gradient pre-division)", TR_UNSUPPORTED, NULL, NULL,
     "mixpar divides the fp32 sum by the world once, after the reduction", false},
    {"amp", "(Apex AMP)", TR_UNSUPPORTED, NULL, NULL, "NVIDIA Apex's AMP levels: use fp16 / bf16 or precision.recipe", false},
    {"zero_allow_untested_optimizer", "(optimizer check)", TR_UNSUPPORTED, NULL, NULL,
     "every mixpar optimizer works with every ZeRO stage", false},
    {"tensorboard", "(monitoring)", TR_UNSUPPORTED, NULL, NULL, "events go to runs/NAME/ (mixpar viz, plot, trace)", false},
    {"wandb", "(monitoring)", TR_UNSUPPORTED, NULL, NULL, "events go to runs/NAME/ (mixpar viz, plot, trace)", false},
    {"flops_profiler", "(profiling)", TR_UNSUPPORTED, NULL, NULL, "mixpar plan estimates FLOPs; no profiler", false},
};

/* ================================================================ Megatron-LM: command-line arguments */

#define ARG(arg, key) {arg, key, TR_VALUE, NULL, NULL, NULL, false}
#define FLAG(arg, key, value, note) {arg, key, TR_FIXED, value, NULL, note, true}
#define NO_ARG(arg, concept, why) {arg, concept, TR_UNSUPPORTED, NULL, NULL, why, false}
#define NO_FLAG(arg, concept, why) {arg, concept, TR_UNSUPPORTED, NULL, NULL, why, true}
static const tr_rule megatron_rules[] = {
    ARG("--micro-batch-size", "train_micro_batch_size_per_gpu"),
    ARG("--global-batch-size", "train_batch_size"),
    ARG("--num-layers", "model.layers"),
    ARG("--hidden-size", "model.channels"),
    ARG("--num-attention-heads", "model.heads"),
    ARG("--num-query-groups", "model.kv_heads"),
    ARG("--ffn-hidden-size", "model.ffn"),
    ARG("--max-position-embeddings", "model.context"),
    ARG("--seq-length", "data.seq_len"),
    ARG("--norm-epsilon", "model.norm_eps"),
    ARG("--rotary-base", "model.rope_theta"),
    {"--position-embedding-type", "model.arch", TR_RENAME, "learned_absolute=gpt2,rope=llama", NULL,
     "learned positions: GPT-2's block; rope: LLaMA's", false},
    {"--normalization", "model.arch", TR_RENAME, "LayerNorm=gpt2,RMSNorm=llama", NULL, NULL, false},
    FLAG("--swiglu", "model.arch", "llama", "SwiGLU MLP: LLaMA's block"),
    FLAG("--untie-embeddings-and-output-weights", "model.tied", "false", NULL),
    NO_FLAG("--group-query-attention", "model.kv_heads", "implied by --num-query-groups (model.kv_heads)"),
    ARG("--lr", "optimizer.params.lr"),
    ARG("--min-lr", "scheduler.params.min_lr"),
    ARG("--weight-decay", "optimizer.params.weight_decay"),
    {"--adam-beta1", "optimizer.params.betas[0]", TR_CALL, NULL, adam_beta, NULL, false},
    {"--adam-beta2", "optimizer.params.betas[1]", TR_CALL, NULL, adam_beta, NULL, false},
    ARG("--adam-eps", "optimizer.params.eps"),
    {"--optimizer", "optimizer.type", TR_RENAME, "adam=AdamW,sgd=Momentum", NULL,
     "Megatron's adam decouples weight decay: AdamW", false},
    ARG("--clip-grad", "gradient_clipping"),
    ARG("--train-iters", "train.steps"),
    ARG("--lr-decay-iters", "scheduler.params.total_steps"),
    {"--lr-decay-style", "scheduler.type", TR_RENAME, "cosine=warmup_cosine,linear=warmup_linear,constant=warmup_constant",
     NULL, NULL, false},
    ARG("--lr-warmup-iters", "scheduler.params.warmup_steps"),
    {"--lr-warmup-fraction", "scheduler.params.warmup_steps", TR_CALL, NULL, warmup_fraction,
     "the fraction of --lr-decay-iters (else --train-iters)", false},
    FLAG("--fp16", "fp16.enabled", "true", NULL),
    FLAG("--bf16", "bf16.enabled", "true", NULL),
    ARG("--loss-scale", "fp16.loss_scale"),
    {"--initial-loss-scale", "fp16.initial_scale_power", TR_CALL, NULL, initial_loss_scale, "log2 of the scale", false},
    ARG("--min-loss-scale", "fp16.min_loss_scale"),
    ARG("--loss-scale-window", "fp16.loss_scale_window"),
    ARG("--hysteresis", "fp16.hysteresis"),
    FLAG("--use-distributed-optimizer", "zero_optimization.stage", "1",
         "fp32 master weights and optimizer state sharded over data parallel (between ZeRO-1 and 2): stage 1"),
    FLAG("--overlap-grad-reduce", "zero_optimization.overlap_comm", "true", NULL),
    ARG("--ddp-bucket-size", "zero_optimization.reduce_bucket_size"),
    FLAG("--recompute-activations", "activation_checkpointing.policy", "selective", NULL),
    {"--recompute-granularity", "activation_checkpointing.policy", TR_RENAME, "full=every,selective=selective", NULL, NULL,
     false},
    ARG("--seed", "train.seed"),
    ARG("--log-interval", "train.log_interval"),
    ARG("--eval-interval", "train.eval_interval"),
    ARG("--eval-iters", "train.eval_batches"),
    ARG("--save-interval", "train.checkpoint_interval"),
    ARG("--tensor-model-parallel-size", "tensor_model_parallel_size"),
    ARG("--pipeline-model-parallel-size", "pipeline_model_parallel_size"),
    FLAG("--sequence-parallel", "sequence_parallel", "true", NULL),
    ARG("--context-parallel-size", "context_parallel_size"), /* Megatron's context parallel: not in mixpar */
    ARG("--num-layers-per-virtual-pipeline-stage", "num_layers_per_virtual_pipeline_stage"),
    NO_ARG("--data-path", "data.dataset", "mixpar trains on its own datasets (data.dataset, `mixpar data list`)"),
    NO_ARG("--vocab-file", "data.dataset", "a mixpar dataset carries its vocabulary (vocab.json)"),
    NO_ARG("--merge-file", "data.dataset", "a mixpar dataset carries its vocabulary (vocab.json)"),
    NO_ARG("--tokenizer-type", "data.dataset", "a mixpar dataset carries its tokenizer"),
    NO_ARG("--split", "data.dataset", "a mixpar dataset has its train and validation files"),
    NO_ARG("--save", "train.run_dir", "checkpoints go to train.run_dir"),
    NO_ARG("--load", "(resume)", "resuming is mixpar train --resume PATH"),
    NO_ARG("--distributed-backend", "(backend)", "the backend is chosen at launch (mixpar run)"),
    NO_ARG("--hidden-dropout", "(dropout)", "mixpar's models have no dropout"),
    NO_ARG("--attention-dropout", "(dropout)", "mixpar's models have no dropout"),
    NO_ARG("--init-method-std", "(initialisation)", "mixpar initialises as GPT-2 does (std 0.02, scaled projections)"),
    NO_ARG("--transformer-impl", "(kernels)", "one implementation, mixpar's own"),
    NO_FLAG("--use-flash-attn", "(kernels)", "mixpar's attention is plain (recomputed in selective checkpointing)"),
    NO_FLAG("--disable-bias-linear", "model.arch", "bias-free linears come with model.arch llama"),
    NO_FLAG("--accumulate-allreduce-grads-in-fp32", "(gradient dtype)", "mixpar's gradients are always fp32"),
    NO_FLAG("--no-gradient-accumulation-fusion", "(kernels)", "no fused accumulation kernel to turn off"),
    NO_FLAG("--no-masked-softmax-fusion", "(kernels)", "no fused softmax kernel to turn off"),
    NO_ARG("--distributed-timeout-minutes", "(timeout)", "set MIXPAR_COMM_TIMEOUT (seconds) instead"),
};

/* ================================================================ PyTorch FSDP: constructor arguments */

static const tr_rule fsdp_rules[] = {
    {"sharding_strategy", "fsdp.sharding_strategy", TR_RENAME,
     "FULL_SHARD=FULL_SHARD,SHARD_GRAD_OP=SHARD_GRAD_OP,NO_SHARD=NO_SHARD,HYBRID_SHARD=HYBRID_SHARD", NULL, NULL, false},
    {"device_mesh", "fsdp.hybrid_shard_size", TR_CALL, NULL, fsdp_device_mesh, "HYBRID_SHARD's (replicate, shard) mesh",
     false},
    {"mixed_precision.param_dtype", "precision.torch_autocast", TR_CALL, NULL, fsdp_param_dtype,
     "compute in param_dtype from fp32 shards: autocast (lab 08's mapping)", false},
    {"mixed_precision.reduce_dtype", "(gradient reduction dtype)", TR_CALL, NULL, fsdp_reduce_dtype,
     "float32 only", false},
    {"mixed_precision.buffer_dtype", "(buffers)", TR_UNSUPPORTED, NULL, NULL,
     "mixpar's models have no buffers (no running statistics)", false},
    {"auto_wrap_policy", "(FSDP units)", TR_CALL, NULL, fsdp_auto_wrap,
     "units are whole transformer blocks (transformer_auto_wrap_policy)", false},
    {"auto_wrap_policy.min_num_params", "(FSDP units)", TR_UNSUPPORTED, NULL, NULL,
     "mixpar's FSDP units are whole transformer blocks; units by size are not implemented", false},
    {"backward_prefetch", "fsdp.backward_prefetch", TR_RENAME, "BACKWARD_PRE=BACKWARD_PRE,null=NONE", NULL, NULL, false},
    {"forward_prefetch", "fsdp.forward_prefetch", TR_VALUE, NULL, NULL, NULL, false},
    {"limit_all_gathers", "fsdp.limit_all_gathers", TR_VALUE, NULL, NULL, NULL, false},
    {"cpu_offload.offload_params", "(parameter offload)", TR_UNSUPPORTED, NULL, NULL,
     "parameter offload is not implemented; zero_optimization.offload_optimizer offloads the optimizer", false},
    {"sync_module_states", "(initial broadcast)", TR_CALL, NULL, implied,
     "always: every rank starts from rank 0's weights", false},
    {"use_orig_params", "(flat parameters)", TR_CALL, NULL, implied,
     "mixpar's units are flat buffers with named views already", false},
    {"device_id", "(device)", TR_CALL, NULL, implied, "one rank per process on the CPU", false},
};

/* ================================================================ Horovod: environment and DistributedOptimizer */

static const tr_rule horovod_rules[] = {
    {"HOROVOD_FUSION_THRESHOLD", "communication.fusion_threshold", TR_VALUE, NULL, NULL, "bytes; 0 turns fusion off",
     false},
    {"HOROVOD_CYCLE_TIME", "(fusion cycle)", TR_UNSUPPORTED, NULL, NULL,
     "mixpar sends a fusion buffer as soon as its last tensor is ready (the plan is fixed and the same on every "
     "rank), so there is no polling cycle", false},
    {"compression", "communication.hook", TR_RENAME, "none=allreduce,fp16=fp16", NULL,
     "hvd.Compression.fp16: the fp16 hook", false},
    {"backward_passes_per_step", "gradient_accumulation_steps", TR_VALUE, NULL, NULL, NULL, false},
    {"op", "(reduction)", TR_CALL, NULL, horovod_op, "Average", false},
    {"HOROVOD_HIERARCHICAL_ALLREDUCE", "(hierarchical allreduce)", TR_UNSUPPORTED, NULL, NULL,
     "mixpar's ranks are one host's processes: no node hierarchy", false},
    {"HOROVOD_TIMELINE", "(timeline)", TR_UNSUPPORTED, NULL, NULL,
     "comm events are always written: mixpar trace RUN is the timeline", false},
    {"HOROVOD_TIMELINE_MARK_CYCLES", "(timeline)", TR_UNSUPPORTED, NULL, NULL, "no cycles to mark", false},
    {"HOROVOD_AUTOTUNE", "(autotuning)", TR_UNSUPPORTED, NULL, NULL, "no autotuner: set the threshold", false},
    {"HOROVOD_CACHE_CAPACITY", "(response cache)", TR_UNSUPPORTED, NULL, NULL,
     "the fusion plan is made once, so nothing is negotiated or cached", false},
    {"HOROVOD_GPU_OPERATIONS", "(backend)", TR_UNSUPPORTED, NULL, NULL, "the backend is chosen at launch (mixpar run)",
     false},
    {"HOROVOD_CPU_OPERATIONS", "(backend)", TR_UNSUPPORTED, NULL, NULL, "the backend is chosen at launch (mixpar run)",
     false},
    {"gradient_predivide_factor", "(gradient pre-division)", TR_UNSUPPORTED, NULL, NULL,
     "mixpar divides the fp32 sum by the world once, after the reduction", false},
    {"sparse_as_dense", "(sparse gradients)", TR_UNSUPPORTED, NULL, NULL, "mixpar's gradients are dense", false},
};

const tr_table tr_deepspeed_table = {"deepspeed", "DeepSpeed", deepspeed_rules, COUNT(deepspeed_rules)};
const tr_table tr_megatron_table = {"megatron", "Megatron-LM", megatron_rules, COUNT(megatron_rules)};
const tr_table tr_fsdp_table = {"fsdp", "PyTorch FSDP", fsdp_rules, COUNT(fsdp_rules)};
const tr_table tr_horovod_table = {"horovod", "Horovod", horovod_rules, COUNT(horovod_rules)};
