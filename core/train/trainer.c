/* trainer.c: the training loop: build or open the data, plan memory, step, evaluate, sample, checkpoint. */
#include "train/trainer.h"

#include "amp/detect.h"
#include "amp/setup.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/parse.h"
#include "base/events.h"
#include "base/mem.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/textbuf.h"
#include "data/token_check.h"
#include "data/tokenizer.h"
#include "data/tokens.h"
#include "dist/ddp.h"
#include "dist/zero.h"
#include "fp/hist.h"
#include "model/model_lowp.h"
#include "ops/matmul_lowp.h"
#include "optim/decay.h"
#include "plan/gathered.h"
#include "plan/plan.h"
#include "train/checkpoint.h"
#include "train/ranks_agree.h"
#include "train/ckpt_sharded.h"
#include "train/mp_checkpoint.h"
#include "train/mp_step.h"
#include "train/sample.h"
#include "train/step.h"
#include "train/train_profile.h"
#include "train/train_data.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------ data */

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Builds the dataset the first time a run asks for it (cached under data.dir afterwards). */
static void ensure_dataset(const train_config *cfg, bool quiet) {
    char train_path[4096];
    if (!config_data_path(cfg, "train.tokens", train_path, sizeof train_path))
        MP_FAIL("a data path shorter than 4096 bytes", "data.dir '%s'", cfg->data.dir);
    char info_path[4096]; /* a built dataset whose training tokens are shards has no train.tokens */
    config_data_path(cfg, "info.json", info_path, sizeof info_path);
    if (file_exists(train_path) || file_exists(info_path)) return;
    const dataset_spec *spec = dataset_find(cfg->data.dataset);
    if (!spec)
        MP_FAIL_HINT("a dataset that exists or that mixpar can build", "'mixpar data list' shows what it can build",
                     "no %s, and no dataset named '%s' to build", train_path, cfg->data.dataset);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", cfg->data.dir, cfg->data.dataset);
    if (!quiet) printf("data: building '%s' into %s (first use; cached afterwards)\n", spec->name, dir);
    dataset_options dopt = dataset_default_options();
    dataset_result res;
    dataset_build(spec, dir, &dopt, &res, NULL);
}

static tokfile *open_tokens(const train_config *cfg, const char *name) {
    char path[4096];
    config_data_path(cfg, name, path, sizeof path);
    /* A dataset built with --shards has train-0000i-of-0000N.tokens instead: each shard checks its own sha256. */
    if (!file_exists(path)) return tokfile_open_set(path, NULL);
    return tokfile_open_checked(path, NULL); /* and against the sha256 info.json records */
}

/* Ranks on one machine split its cores, so OpenMP threads do not oversubscribe them. */
static void share_cores_between_local_ranks(void) {
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int ranks = local ? atoi(local) : 1;
    if (ranks <= 1) return;
    int cores = omp_get_num_procs() / ranks;
    omp_set_num_threads(cores > 0 ? cores : 1);
}

/* CPU seconds this process has used, all its threads together (getrusage: user + system). */
static double process_cpu_s(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* FNV-1a over the resolved config: ranks compare it to be sure they build the same model. */
static uint64_t config_hash(const train_config *cfg) {
    char *text = config_dump(cfg);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = text; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    free(text);
    return h;
}

/* FNV-1a over n bytes. MIXPAR_PARAM_HASH=1 writes the parameters' hash (replicas must agree) and the step's input
 * tokens' hash (data parallel ranks must not: each reads its own share) into every step event. */
static uint64_t fnv1a(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t params_hash(model *m) { return fnv1a(model_params(m), model_num_params(m) * sizeof(float)); }

/* ------------------------------------------------------------------ memory plan */

/* The bytes this run will hold, tag by tag, before any of it is allocated. */
static void check_memory(const train_config *cfg, const model_config *mc) {
    size_t n = model_count_params(mc);
    size_t params = n * sizeof(float), grads = n * sizeof(float);
    /* Offloaded, the optimizer state is in host memory: max_memory is the device's. */
    size_t optim = cfg->zero.offload_optimizer == OFFLOAD_CPU ? 0 : optim_state_bytes(cfg->optimizer.kind, n);
    size_t acts = model_activation_bytes(mc, cfg->micro_batch, cfg->data.seq_len);
    size_t total = params + grads + optim + acts;
    uint64_t limit = cfg->train.max_memory;
    if (!limit || total <= limit) return;
    char found[512];
    snprintf(found, sizeof found,
             "%.3f GB: params %.3f + grads %.3f + optimizer %.3f + activations %.3f (micro-batch %d x %d tokens) "
             "> max_memory %.3f GB",
             total / 1e9, params / 1e9, grads / 1e9, optim / 1e9, acts / 1e9, cfg->micro_batch, cfg->data.seq_len,
             limit / 1e9);
    MP_FAIL_HINT("a run that fits in train.max_memory",
                 "lower train_micro_batch_size_per_gpu (and raise gradient_accumulation_steps), shorten "
                 "data.seq_len, or choose a smaller model; 'mixpar plan' shows where the bytes go",
                 "%s", found);
}

/* ------------------------------------------------------------------ instrumentation */

/* One "hist" event per layer: the exponent histogram of its gradients and what each low-precision
 * format would do to them (the visualizer's underflow panel; labs 04 and 06). */
static void emit_hist(ev_writer *ev, long step, const char *tensor, int layer, const fp_hist *h, float scale) {
    int lo = 0, hi = -1;
    bool any = fp_hist_range(h, &lo, &hi);
    ev_begin(ev, "hist");
    ev_int(ev, "step", step);
    ev_str(ev, "tensor", tensor);
    ev_int(ev, "layer", layer);
    ev_str(ev, "format", "fp32");
    ev_num(ev, "scale", scale);
    ev_int(ev, "count", (long long)h->count);
    ev_int(ev, "zero", (long long)h->zeros);
    ev_int(ev, "nonfinite", (long long)fp_hist_nonfinite(h));
    ev_int(ev, "first_binade", any ? lo : 0);
    long long bins[FP_HIST_NBINS];
    int nb = any ? hi - lo + 1 : 0;
    for (int b = 0; b < nb; b++) bins[b] = (long long)fp_hist_bin(h, lo + b);
    ev_ints(ev, "bins", bins, (size_t)nb);
    ev_object_begin(ev, "targets");
    for (int t = 0; t < FP_HIST_NTARGETS; t++) {
        ev_object_begin(ev, fp_hist_target_name(t));
        ev_int(ev, "subnormal", (long long)h->target[t].subnormal);
        ev_int(ev, "underflow", (long long)h->target[t].underflow);
        ev_int(ev, "overflow", (long long)h->target[t].overflow);
        ev_object_end(ev);
    }
    ev_object_end(ev);
    ev_end(ev);
}

static void emit_gradient_histograms(ev_writer *ev, model *m, long step, float scale) {
    const model_config *c = model_get_config(m);
    for (int layer = -1; layer <= c->L; layer++) {
        size_t off, n;
        model_layer_span(m, layer, &off, &n);
        fp_hist h;
        fp_hist_clear(&h);
        fp_hist_add(&h, model_grads(m) + off, n, scale);
        emit_hist(ev, step, "grad", layer, &h, scale);
    }
}

/* One "rounding" event per layer: what rounding into the low format did to the values that went through
 * it since the last event (model_lowp.h): gradients entering the matmuls in backward (where fp16 without
 * a loss scale flushes them to zero) and activations stored in forward. */
static void emit_rounding(ev_writer *ev, model *m, long step) {
    int n;
    const model_layer_rounding *r = model_rounding(m, &n);
    for (int i = 0; i < n; i++) {
        ev_begin(ev, "rounding");
        ev_int(ev, "step", step);
        ev_int(ev, "layer", i - 1);
        ev_str(ev, "compute", model_compute_name(model_get_compute(m)));
        const struct { const char *name; const model_round_count *c; } parts[] = {{"grads", &r[i].grads},
                                                                                {"acts", &r[i].acts}};
        for (int p = 0; p < 2; p++) {
            ev_object_begin(ev, parts[p].name);
            ev_int(ev, "values", (long long)parts[p].c->values);
            ev_int(ev, "nonzero", (long long)parts[p].c->nonzero);
            ev_int(ev, "flushed", (long long)parts[p].c->flushed);
            ev_int(ev, "overflowed", (long long)parts[p].c->overflowed);
            ev_int(ev, "saturated", (long long)parts[p].c->saturated);
            ev_object_end(ev);
        }
        ev_end(ev);
    }
    model_rounding_reset(m);
}

/* The planner's name for an optimizer is the optimizer's own ("adamw"). */
static plan_optimizer plan_optimizer_for(optim_kind kind) {
    for (int o = 0; o < PLAN_NOPTIMIZERS; o++)
        if (strcmp(plan_optimizer_get((plan_optimizer)o)->name, optim_info_of(kind)->name) == 0) return (plan_optimizer)o;
    MP_ASSERT(false, "optimizer %s has no plan", optim_info_of(kind)->name);
    return PLAN_OPT_ADAMW;
}

/* Activations as the model keeps them (model/model.h, model_lowp.h): each block everything its backward reads
 * (selective: not the attention probabilities), in 2 bytes under a 16-bit compute mode; a checkpointed block only
 * its fp32 input, and one shared block of storage for forward and the recompute; outside the blocks the final
 * norm's and head's inputs and the fp32 logits; under 16-bit compute, fp32 scratch for one layer. */
static uint64_t run_activation_bytes(const train_config *cfg, const plan_model *pm, const plan_run *pr,
                                     model_compute compute) {
    bool sixteen_bit = compute == MODEL_COMPUTE_BF16 || compute == MODEL_COMPUTE_FP16 || compute == MODEL_COMPUTE_FP8;
    plan_run stored = *pr;
    stored.recompute = PLAN_RECOMPUTE_NONE;
    stored.recipe = sixteen_bit ? PLAN_RECIPE_BF16_MIXED : PLAN_RECIPE_FP32; /* only the activation format is read */
    uint64_t L = pm->layers, k = cfg->ckpt.every_k > 0 ? (uint64_t)cfg->ckpt.every_k : 1;
    uint64_t checkpointed = cfg->ckpt.policy == MODEL_RECOMPUTE_EVERY     ? L
                            : cfg->ckpt.policy == MODEL_RECOMPUTE_EVERY_K ? (L + k - 1) / k
                                                                          : 0;
    bool selective = cfg->ckpt.policy == MODEL_RECOMPUTE_SELECTIVE;
    uint64_t block = plan_block_activation_bytes(pm, &stored, !selective);
    uint64_t block_input = pr->seq * pr->batch * pm->hidden * 4;
    plan_activations whole;
    plan_activation_bytes(pm, &stored, &whole);
    uint64_t bytes = (L - checkpointed) * block + checkpointed * block_input + whole.outside;
    if (checkpointed) bytes += plan_block_activation_bytes(pm, &stored, true); /* the shared recompute block */
    if (sixteen_bit) bytes += plan_block_activation_bytes(pm, pr, true);        /* one layer's fp32 scratch */
    return bytes;
}

/* The terms the planner's model-state arithmetic (lab 01) leaves to the run, on one rank of plain or sharded data
 * parallel: activations stored in 16 bits with one layer's fp32 scratch under a 16-bit compute mode
 * (model/model_lowp.h), the cast cache of the weights (MEM_OTHER), and ZeRO-3 / FSDP FULL_SHARD's gathered units,
 * unreduced gradients and reduce buffers at their worst (plan/gathered.h). Model-parallel shards keep fp32
 * activation buffers and are planned by plan/parallel.c. */
static void add_run_terms(const train_config *cfg, const plan_model *pm, const plan_run *pr, plan_result *out) {
    amp_setup setup;
    data_err err;
    if (cfg->tensor_parallel > 1 || cfg->pipeline_parallel > 1 || !amp_recipe_from_config(cfg, &setup, &err)) return;
    model_compute compute = amp_model_precision(&setup).compute;
    out->bytes[MEM_ACT] = run_activation_bytes(cfg, pm, pr, compute);
    bool sharded = pr->zero_stage == 3 && cfg->fsdp.sharding_strategy == FSDP_FULL_SHARD;
    if (sharded) {
        plan_gather_run g = {.shard_group = pr->world,
                             .max_inflight = cfg->fsdp.limit_all_gathers ? 1 : (int)pm->layers,
                             .forward_prefetch = cfg->fsdp.forward_prefetch,
                             .backward_prefetch = cfg->fsdp.backward_prefetch == 0,
                             .overlap = cfg->zero.overlap_comm && pr->world > 1,
                             .cache_bytes = model_cast_cache_bytes(compute, true, pm->tied_head)};
        plan_gathered gathered;
        plan_gathered_bytes(pm, &g, &gathered);
        out->bytes[MEM_COMM] = gathered.comm;
        out->bytes[MEM_OTHER] = gathered.other;
    } else if (pr->zero_stage < 3) {
        out->bytes[MEM_OTHER] = (uint64_t)model_cast_cache_bytes(compute, false, pm->tied_head) * out->params;
    }
    out->total_bytes = 0;
    for (int tag = 0; tag < MEM_NTAGS; tag++)
        if (tag != MEM_HOST) out->total_bytes += out->bytes[tag];
}

/* The planner's prediction for this run, bytes per tag, in the run header: the visualizer's memory panel
 * draws it beside the allocator's measurements. */
void trainer_plan(const train_config *cfg, const model_config *mc, plan_result *out) {
    plan_model pm = {.arch = mc->arch == MODEL_LLAMA ? PLAN_ARCH_LLAMA : PLAN_ARCH_GPT2, .layers = (uint64_t)mc->L,
                     .hidden = (uint64_t)mc->C, .heads = (uint64_t)mc->NH, .kv_heads = (uint64_t)mc->KVH,
                     .ffn = (uint64_t)mc->F, .vocab = (uint64_t)mc->V, .context = (uint64_t)mc->maxT,
                     .tied_head = mc->tied};
    snprintf(pm.name, sizeof pm.name, "%s", cfg->train.run_name);
    plan_run pr = plan_run_defaults(&pm);
    pr.recipe = PLAN_RECIPE_FP32;
    pr.optimizer = plan_optimizer_for(cfg->optimizer.kind);
    pr.batch = (uint64_t)cfg->micro_batch;
    pr.seq = (uint64_t)cfg->data.seq_len;
    pr.dropout = false;
    if (cfg->world > 1 && cfg->fsdp.enabled) { /* FSDP shards everything over its shard group (NO_SHARD: none) */
        int group = cfg->fsdp.sharding_strategy == FSDP_HYBRID_SHARD ? cfg->fsdp.hybrid_shard_size
                    : cfg->fsdp.sharding_strategy == FSDP_NO_SHARD    ? 1
                                                                      : cfg->world;
        pr.zero_stage = group > 1 ? 3 : 0;
        pr.world = (uint64_t)group;
    } else if (cfg->world > 1 && cfg->zero.stage > 0) { /* the planner's ZeRO: model states split over the ranks */
        pr.zero_stage = cfg->zero.stage;
        pr.world = (uint64_t)cfg->world;
    }
    pr.offload = cfg->zero.offload_optimizer == OFFLOAD_CPU; /* master and optimizer state on the host */
    plan_compute(&pm, &pr, out);
    add_run_terms(cfg, &pm, &pr, out);
}

bool trainer_plan_config(const char *path, const char *const *sets, int nsets, int world, train_config *cfg,
                         plan_result *out, data_err *err) {
    if (!config_load(path, sets, nsets, world, cfg, err)) return false;
    if (cfg->model.model.V == 0 && !config_load_vocab(cfg, err)) return false;
    model_config mc = cfg->model.model;
    model_config_complete(&mc);
    trainer_plan(cfg, &mc, out);
    return true;
}

static void emit_plan(ev_writer *ev, const train_config *cfg, const model_config *mc) {
    plan_result r;
    trainer_plan(cfg, mc, &r);
    ev_object_begin(ev, "plan");
    for (int tag = 0; tag < MEM_NTAGS; tag++) ev_int(ev, mem_tag_name(tag), (long long)r.bytes[tag]);
    ev_object_end(ev);
}

/* ------------------------------------------------------------------ checkpoints */

typedef struct {
    ckpt_buffer buffers[3];
    int nbuffers;
} state_buffers;

/* The parameters and the optimizer state, whole: m and v are the state's own arrays, or under ZeRO
 * full-size buffers the shards are gathered into (or read into) around the checkpoint. */
static state_buffers state_of(train_step *ts, float *m, float *v) {
    state_buffers s = {.nbuffers = 1};
    size_t n = model_num_params(ts->m);
    /* fp16-o2: the fp32 master weights are the run's weights (the model holds their fp16 rounding). */
    s.buffers[0] = (ckpt_buffer){"", ts->master ? ts->master : model_params(ts->m), n};
    if (m) s.buffers[s.nbuffers++] = (ckpt_buffer){"optim.m.", m, n};
    if (v) s.buffers[s.nbuffers++] = (ckpt_buffer){"optim.v.", v, n};
    return s;
}

/* Under ZeRO: full-size buffers for the state the optimizer keeps (transient, MEM_OTHER), else NULL. */
static void full_state_buffers(train_step *ts, float **m, float **v) {
    size_t bytes = model_num_params(ts->m) * sizeof(float);
    *m = ts->state.m ? mem_alloc(bytes, MEM_OTHER, "zero.checkpoint.m") : NULL;
    *v = ts->state.v ? mem_alloc(bytes, MEM_OTHER, "zero.checkpoint.v") : NULL;
}

/* FSDP after reading a whole checkpoint into the model's buffer and m, v: each rank keeps its shards. */
static void fsdp_take_state(train_step *ts, const float *m, const float *v) {
    size_t owned = fsdp_shard_elems(ts->fsdp);
    float *packed = mem_alloc((owned ? owned : 1) * sizeof(float), MEM_OTHER, "fsdp.checkpoint.params");
    fsdp_take_shard(ts->fsdp, model_params(ts->m), packed);
    size_t at = 0;
    for (int i = 0; i < ts->nspans; i++) {
        memcpy(ts->spans[i].param, packed + at, ts->spans[i].n * sizeof(float));
        at += ts->spans[i].n;
    }
    mem_free(packed);
    if (m) fsdp_take_shard(ts->fsdp, m, ts->state.m);
    if (v) fsdp_take_shard(ts->fsdp, v, ts->state.v);
    mem_decommit(model_params(ts->m), 0, model_num_params(ts->m) * sizeof(float));
}

/* The metadata a checkpoint keeps beside the tensors: the config, the step, the optimizer's step, the
 * data position and the loss scaler. The strings live in `text` (config_json must be freed). */
typedef struct {
    ckpt_meta meta[5 + AMP_SCALER_NSTATE];
    int n;
    char *config_json;
    char step[32], optim_step[32], epoch[32], batch[32];
    amp_kv scaler[AMP_SCALER_NSTATE];
} checkpoint_meta;

static void checkpoint_meta_fill(checkpoint_meta *cm, train_step *ts, const train_config *cfg, long step,
                                 const train_data *td) {
    cm->config_json = config_dump(cfg);
    snprintf(cm->step, sizeof cm->step, "%ld", step);
    snprintf(cm->optim_step, sizeof cm->optim_step, "%ld", ts->state.step);
    loader_state at = train_data_position(td);
    snprintf(cm->epoch, sizeof cm->epoch, "%llu", (unsigned long long)at.epoch);
    snprintf(cm->batch, sizeof cm->batch, "%llu", (unsigned long long)at.batch);
    const ckpt_meta base[5] = {{"config", cm->config_json}, {"step", cm->step}, {"optim_step", cm->optim_step},
                               {"loader_epoch", cm->epoch}, {"loader_batch", cm->batch}};
    memcpy(cm->meta, base, sizeof base);
    cm->n = 5;
    if (ts->amp) /* the loss scale and its counters resume where they were */
        for (int i = 0, k = amp_scaler_save_state(&ts->scaler, cm->scaler); i < k; i++)
            cm->meta[cm->n++] = (ckpt_meta){cm->scaler[i].key, cm->scaler[i].value};
}

/* This rank's ZeRO or FSDP shard as checkpoint ranges, in the order its optimizer state lays them out
 * (free() them). */
static ckpt_range *shard_ckpt_ranges(const train_step *ts, int rank, int *count) {
    int n = ts->zero ? zero_shard_ranges(ts->zero, rank, NULL, NULL) : fsdp_shard_ranges(ts->fsdp, NULL, NULL);
    size_t *off = malloc((size_t)(n + 1) * sizeof *off), *len = malloc((size_t)(n + 1) * sizeof *len);
    ckpt_range *r = malloc((size_t)(n + 1) * sizeof *r);
    MP_ASSERT(off && len && r, "out of memory");
    if (ts->zero) zero_shard_ranges(ts->zero, rank, off, len);
    else fsdp_shard_ranges(ts->fsdp, off, len);
    for (int i = 0; i < n; i++) r[i] = (ckpt_range){off[i], len[i]};
    free(off);
    free(len);
    *count = n;
    return r;
}

/* Under ZeRO each rank writes its own shard of the parameters and of the optimizer state (which it
 * already holds in range order) into a sharded checkpoint (train/ckpt_sharded.h): no gather to rank 0. */
static void save_sharded(const char *dir, train_step *ts, comm_t *comm, int rank, const checkpoint_meta *cm,
                         ev_writer *ev, long step) {
    int n;
    ckpt_range *ranges = shard_ckpt_ranges(ts, rank, &n);
    if (ts->fsdp && !fsdp_saves_shard(ts->fsdp)) n = 0; /* a replica of a shard another rank saves */
    size_t floats = ckpt_ranges_floats(ranges, n);
    /* Its shard of the parameters, copied out (transient, MEM_OTHER): under ZeRO from the whole replica, under
     * FSDP from the shard's spans (the same ranges, in the same order). */
    float *params = mem_alloc((floats ? floats : 1) * sizeof(float), MEM_OTHER, "checkpoint.params.shard");
    if (ts->fsdp && n) {
        size_t at = 0;
        for (int i = 0; i < ts->nspans; at += ts->spans[i].n, i++)
            memcpy(params + at, ts->spans[i].param, ts->spans[i].n * sizeof(float));
    } else {
        const float *all = model_params(ts->m);
        for (size_t i = 0, at = 0; i < (size_t)n; at += ranges[i].n, i++)
            memcpy(params + at, all + ranges[i].offset, ranges[i].n * sizeof(float));
    }
    ckpt_shard_buffer bufs[3] = {{"params", params}};
    int nb = 1;
    if (ts->state.m) bufs[nb++] = (ckpt_shard_buffer){"optim.m", ts->state.m};
    if (ts->state.v) bufs[nb++] = (ckpt_shard_buffer){"optim.v", ts->state.v};
    ckpt_sharded_save(dir, comm, model_num_params(ts->m), ranges, n, bufs, nb, cm->meta, cm->n, NULL);
    mem_free(params);
    free(ranges);
    char shard[4300];
    snprintf(shard, sizeof shard, "%s/rank-%05d-of-%05d.safetensors", dir, rank, comm_size(comm));
    struct stat st;
    ev_begin(ev, "checkpoint");
    ev_int(ev, "step", step);
    ev_str(ev, "path", dir);
    ev_int(ev, "bytes", stat(shard, &st) == 0 ? (long long)st.st_size : -1);
    ev_int(ev, "shard", rank);
    ev_end(ev);
}

/* Every rank calls it. Under ZeRO every rank writes its shard (save_sharded); otherwise rank 0 writes one
 * complete file. */
static void save_checkpoint(const char *path, const char *sharded_dir, train_step *ts, const train_config *cfg,
                            long step, const train_data *td, ev_writer *ev, int rank, comm_t *comm) {
    checkpoint_meta cm;
    checkpoint_meta_fill(&cm, ts, cfg, step, td);
    if (ts->zero || ts->fsdp) {
        save_sharded(sharded_dir, ts, comm, rank, &cm, ev, step);
        free(cm.config_json);
        return;
    }
    int ntensors;
    const model_tensor *tensors = model_tensors(ts->m, &ntensors);
    state_buffers sb = state_of(ts, ts->state.m, ts->state.v);
    ckpt_save(path, tensors, ntensors, sb.buffers, sb.nbuffers, cm.meta, cm.n, NULL);
    free(cm.config_json);
    struct stat st;
    ev_begin(ev, "checkpoint");
    ev_int(ev, "step", step);
    ev_str(ev, "path", path);
    ev_int(ev, "bytes", stat(path, &st) == 0 ? (long long)st.st_size : -1);
    ev_end(ev);
}

/* The loss scaler's state from a checkpoint's metadata (keys "loss_scaler.*"). */
static void restore_scaler(train_step *ts, const ckpt_meta *meta, int nmeta, const char *path) {
    amp_kv kv[AMP_SCALER_NSTATE];
    int n = 0;
    for (int i = 0; i < nmeta && n < AMP_SCALER_NSTATE; i++) {
        if (strncmp(meta[i].key, "loss_scaler.", 12) != 0) continue;
        snprintf(kv[n].key, sizeof kv[n].key, "%s", meta[i].key);
        snprintf(kv[n].value, sizeof kv[n].value, "%s", meta[i].value);
        n++;
    }
    data_err err;
    if (!amp_scaler_load_state(&ts->scaler, kv, n, &err))
        MP_FAIL_HINT(err.expected, "resume with the precision settings the checkpoint was written with", "%s: %s", path,
                     err.found);
}

/* A whole number from a checkpoint's metadata; a missing or bad one stops with exit 2 naming it. */
static uint64_t meta_u64(const ckpt_meta *meta, int nmeta, const char *key, const char *path) {
    for (int i = 0; i < nmeta; i++) {
        if (strcmp(meta[i].key, key) != 0) continue;
        uint64_t v;
        if (!parse_u64(meta[i].value, &v))
            MP_FAIL("a whole number", "'%s': metadata '%s' is \"%s\"", path, key, meta[i].value);
        return v;
    }
    MP_FAIL("the metadata key in the checkpoint", "'%s' has no metadata '%s'", path, key);
    return 0;
}

/* After the tensors of a checkpoint (one file or shards) are in place: the loss scaler, the working weights
 * made from what was read, the optimizer's step and the data position from its metadata, entry i of
 * nmeta being meta_at(src, i). Returns the step. */
static long restore_progress(train_step *ts, train_data *td, const void *src, int nmeta,
                             ckpt_meta (*meta_at)(const void *src, int i), const char *path) {
    ckpt_meta *meta = malloc((size_t)(nmeta + 1) * sizeof *meta);
    MP_ASSERT(meta, "out of memory");
    for (int i = 0; i < nmeta; i++) meta[i] = meta_at(src, i);
    if (ts->amp) restore_scaler(ts, meta, nmeta, path);
    train_step_sync_working_weights(ts); /* the rounded working weights, or the offload's host master */
    ts->state.step = (long)meta_u64(meta, nmeta, "optim_step", path);
    train_data_restore(td, (loader_state){meta_u64(meta, nmeta, "loader_epoch", path),
                                          meta_u64(meta, nmeta, "loader_batch", path)});
    long step = (long)meta_u64(meta, nmeta, "step", path);
    free(meta);
    return step;
}
static ckpt_meta sharded_meta_at(const void *ck, int i) { return ckpt_sharded_meta_at(ck, i); }
static ckpt_meta file_meta_at(const void *f, int i) { return ckpt_meta_at(f, i); }

/* A sharded checkpoint, whatever world size wrote it: the parameters whole on every rank (every layout
 * here keeps full replicas), the optimizer state at this rank's ZeRO ranges, or whole without ZeRO. */
static long load_sharded(const char *dir, train_step *ts, train_data *td, comm_t *comm, int rank) {
    ckpt_sharded *ck = ckpt_sharded_open(dir, NULL);
    const char *names[3] = {"params"};
    ckpt_shard_buffer state[2];
    int ns = 0;
    if (ts->state.m) state[ns++] = (ckpt_shard_buffer){"optim.m", ts->state.m};
    if (ts->state.v) state[ns++] = (ckpt_shard_buffer){"optim.v", ts->state.v};
    for (int i = 0; i < ns; i++) names[1 + i] = state[i].name;
    ckpt_sharded_check_buffers(ck, names, 1 + ns, NULL);
    size_t total = model_num_params(ts->m);
    ckpt_range whole = {0, total};
    int n = 1;
    ckpt_range *ranges = ts->zero || ts->fsdp ? shard_ckpt_ranges(ts, rank, &n) : &whole;
    if (ts->fsdp) { /* the parameters at this rank's ranges only, into its shard's spans */
        size_t floats = ckpt_ranges_floats(ranges, n);
        float *packed = mem_alloc((floats ? floats : 1) * sizeof(float), MEM_OTHER, "checkpoint.params.shard");
        ckpt_shard_buffer params = {"params", packed};
        ckpt_sharded_read_all(ck, comm, total, ranges, n, &params, 1, NULL);
        size_t at = 0;
        for (int i = 0; i < ts->nspans; at += ts->spans[i].n, i++)
            memcpy(ts->spans[i].param, packed + at, ts->spans[i].n * sizeof(float));
        mem_free(packed);
    } else {
        ckpt_shard_buffer params = {"params", ts->master ? ts->master : model_params(ts->m)};
        ckpt_sharded_read_all(ck, comm, total, &whole, 1, &params, 1, NULL);
    }
    if (ns) ckpt_sharded_read_all(ck, comm, total, ranges, n, state, ns, NULL);
    if (ranges != &whole) free(ranges);
    long step = restore_progress(ts, td, ck, ckpt_sharded_meta_count(ck), sharded_meta_at, dir);
    ckpt_sharded_close(ck);
    return step;
}

/* Restores weights, optimizer state, the step and the data position; returns the step to continue from.
 * path is one file (any run's) or a sharded checkpoint's directory (any world size's). */
static long load_checkpoint(const char *path, train_step *ts, train_data *td, comm_t *comm, int rank) {
    struct stat st;
    if (ckpt_sharded_is_dir(path) || (stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
        return load_sharded(path, ts, td, comm, rank); /* a directory without an index is refused there */
    ckpt_file *f = ckpt_open(path, NULL);
    int ntensors;
    const model_tensor *tensors = model_tensors(ts->m, &ntensors);
    float *m = ts->state.m, *v = ts->state.v;
    if (ts->zero || ts->fsdp) full_state_buffers(ts, &m, &v); /* every rank reads the whole file, keeps its shard */
    if (ts->fsdp) {
        fsdp_after_update(ts->fsdp);
        mem_commit(model_params(ts->m), 0, model_num_params(ts->m) * sizeof(float));
    }
    state_buffers sb = state_of(ts, m, v);
    ckpt_read(f, tensors, ntensors, sb.buffers, sb.nbuffers, CKPT_STRICT, NULL);
    if (ts->zero) zero_load_state(ts->zero, &ts->state, m, v);
    if (ts->fsdp) fsdp_take_state(ts, m, v);
    if (ts->zero || ts->fsdp) {
        mem_free(m);
        mem_free(v);
    }
    long step = restore_progress(ts, td, f, ckpt_meta_count(f), file_meta_at, path);
    ckpt_close(f);
    return step;
}

/* --resume auto: the run's checkpoint, single file or sharded directory; when both are there (a run
 * resumed with another layout), the one of the later step. */
static const char *resume_auto(const char *single, const char *sharded) {
    bool has_single = file_exists(single), has_sharded = ckpt_sharded_is_dir(sharded) || file_exists(sharded);
    if (!has_single && !has_sharded)
        MP_FAIL_HINT("a checkpoint in the run directory for --resume auto", "train with train.checkpoint_interval > 0 first",
                     "neither '%s' nor '%s' exists", single, sharded);
    if (!has_single || !has_sharded) return has_single ? single : sharded;
    uint64_t step_single = 0, step_sharded = 0;
    ckpt_file *f = ckpt_open(single, NULL);
    ckpt_meta_u64(f, "step", &step_single, NULL);
    ckpt_close(f);
    ckpt_sharded *s = ckpt_sharded_open(sharded, NULL);
    ckpt_sharded_meta_u64(s, "step", &step_sharded, NULL);
    ckpt_sharded_close(s);
    return step_sharded > step_single ? sharded : single;
}

/* ------------------------------------------------------------------ printing */

static void format_duration(double s, char *out, size_t n) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(out, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(out, n, "%ld:%02ld", t / 60, t % 60);
}

/* Under FSDP every rank generates (each forward gathers every layer, so all must take part); `show` prints. */
static void print_sample(model *m, const tokenizer *tok, const train_config *cfg, long step, bool show) {
    const char *prompt = cfg->train.sample_prompt;
    int ntok = cfg->train.sample_tokens;
    size_t cap = strlen(prompt) + 1; /* every character takes at least one byte */
    uint32_t *ids = malloc(cap * sizeof(uint32_t));
    int64_t nprompt = tokenizer_encode(tok, prompt, strlen(prompt), true, ids, NULL, NULL);
    int *tokens = malloc(((size_t)(nprompt > 0 ? nprompt : 0) + ntok + 1) * sizeof(int));
    for (int64_t i = 0; i < nprompt; i++) tokens[i] = (int)ids[i];
    sample_options so = {.temperature = 0.8f, .top_k = 0, .seed = cfg->train.seed + (uint64_t)step};
    int n = sample_generate(m, tokens, (int)(nprompt > 0 ? nprompt : 0), ntok, &so);
    textbuf text = {0};
    for (int i = 0; i < n; i++) tokenizer_decode_token(tok, (uint32_t)tokens[i], &text);
    if (show) printf("sample at step %ld (temperature 0.8):\n  %s\n", step, text.data ? text.data : "");
    textbuf_free(&text);
    free(tokens);
    free(ids);
}

/* train.sample_prompt must be text of the vocabulary, as `mixpar sample --prompt` requires: refused before
 * training, not printed as replacement characters at the first sample. */
static void check_sample_prompt(const train_config *cfg, const tokenizer *tok, const char *vocab_path, comm_t *comm) {
    const char *prompt = cfg->train.sample_prompt;
    if (cfg->train.sample_interval <= 0 || !*prompt) return;
    size_t len = strlen(prompt);
    uint32_t *ids = malloc((len + 1) * sizeof *ids);
    MP_ASSERT(ids, "out of memory");
    data_err err;
    bool ok = tokenizer_encode(tok, prompt, len, false, ids, NULL, &err) >= 0;
    free(ids);
    if (!ok)
        RANKS_STOP(comm, err.expected, "change train.sample_prompt to text made of the characters in the run's "
                   "vocabulary, or set train.sample_interval=0 to train without samples",
                   "train.sample_prompt \"%s\": %s (vocabulary %s)", prompt, err.found, vocab_path);
}

/* ------------------------------------------------------------------ evaluation */

static float evaluate(model *m, loader *vl, int batches) {
    loader_reset(vl); /* the same validation batches every time, so evaluations compare */
    double sum = 0;
    for (int i = 0; i < batches; i++) {
        loader_next(vl);
        sum += model_forward(m, vl->inputs, vl->targets, vl->B, vl->T);
    }
    return (float)(sum / batches);
}

/* train.freeze: each comma-separated pattern must match at least one tensor. */
static void freeze_tensors(model *m, const train_config *cfg) {
    char list[sizeof cfg->train.freeze];
    snprintf(list, sizeof list, "%s", cfg->train.freeze);
    char *save = NULL;
    for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        while (*p == ' ') p++;
        if (!*p) continue;
        if (model_freeze(m, p) == 0)
            MP_FAIL_HINT("train.freeze: names of the model's tensors (or prefixes ending in '*')",
                         "'mixpar checkpoint info' on a checkpoint of this model lists its tensors: wte, wpe, h.0.qkvw, ...",
                         "'%s' matches no tensor", p);
    }
    if ((cfg->zero.stage > 0 || cfg->fsdp.enabled) && model_count_frozen(m) > 0)
        MP_FAIL("train.freeze empty with ZeRO or FSDP", "%d frozen tensors with stage %d%s", model_count_frozen(m),
                cfg->zero.stage, cfg->fsdp.enabled ? " (FSDP)" : "");
}

/* train.no_decay: the weight-decay groups left undecayed (optim/decay.h), set on the registry before the optimizer,
 * ZeRO or FSDP lay out their spans. Unset, the registry keeps model_create's rule (2 or more dimensions decay). */
static void apply_decay_groups(model *m, const train_config *cfg, bool quiet) {
    if (!cfg->train.no_decay[0]) return;
    unsigned no_decay = decay_groups_parse(cfg->train.no_decay);
    int n, decayed = 0;
    size_t decayed_params = 0, params = 0;
    const model_tensor *t = model_tensors(m, &n);
    for (int i = 0; i < n; i++) {
        bool decay = decay_applies(t[i].name, t[i].ndim, no_decay);
        model_set_decay(m, i, decay);
        decayed += decay;
        decayed_params += decay ? t[i].size : 0;
        params += t[i].size;
    }
    char groups[64];
    decay_groups_format(no_decay, groups, sizeof groups);
    if (!quiet)
        printf("weight decay: %d of %d tensors (%.1f%% of the parameters); not decayed: %s\n", decayed, n,
               100.0 * (double)decayed_params / (double)params, groups);
}

/* ------------------------------------------------------------------ mixed precision */

/* How the matmuls of this run multiply: "fp32 sgemm", "bf16 (avx512-bf16)", "fp16 (rounded, fp32 sgemm)". */
static const char *precision_matmul_path(const model *m) {
    switch (model_get_compute(m)) {
    case MODEL_COMPUTE_FP32: return "fp32 sgemm";
    case MODEL_COMPUTE_TF32: return "tf32 (rounded inputs, fp32 sgemm)";
    case MODEL_COMPUTE_FP8:
        return model_get_fp8_mx(m) ? "MXFP8 e4m3/e5m2, blocks of 32 with E8M0 scales (exact products on the fp32 sgemm)"
                                   : "fp8 e4m3/e5m2, delayed scaling (exact products on the fp32 sgemm)";
    case MODEL_COMPUTE_FP16: return "fp16 (exact products on the fp32 sgemm)";
    default: {
        static char path[64];
        const char *how = matmul_lowp_path(LOWP_BF16);
        if (strcmp(how, "decode+sgemm") == 0) return "bf16 (exact products on the fp32 sgemm)";
        snprintf(path, sizeof path, "bf16 (%s kernel)", how);
        return path;
    }
    }
}

/* MIXPAR_INJECT_INF=RANK:STEP[:NAME[@K]] puts an inf into rank RANK at step STEP (1-based). Without NAME, into
 * the first gradient value: a rank-local overflow, what lab 17 shows the ranks must agree about (mixed
 * precision only: the fp32 path has no found_inf step). With NAME, into element K (default 0) of a weight
 * ("h.0.fcprojw", before that step's forward, as a bad update or a bad checkpoint would leave it) or of a
 * forward activation ("h.1.fch", "encoded", "logits": model.h's names, as forward computes it): what the
 * trainer's scan for the first non-finite tensor must then name. */
typedef struct {
    const model *m;
    long step;               /* 0-based; -1: nothing to inject here */
    const model_tensor *weight; /* or NULL */
    char activation[48];     /* full name, or "" */
    size_t element;
    bool done;               /* the activation got its inf this step */
} fault_injection;

static bool activation_name_exists(const model *m, const char *full) {
    const model_config *c = model_get_config(m);
    if (strcmp(full, "encoded") == 0 || strcmp(full, "lnf") == 0 || strcmp(full, "logits") == 0) return true;
    int layer, used = 0;
    if (sscanf(full, "h.%d.%n", &layer, &used) != 1 || used == 0 || layer < 0 || layer >= c->L) return false;
    for (int i = 0; model_block_act_names[i]; i++)
        if (strcmp(full + used, model_block_act_names[i]) == 0) return true;
    return false;
}

static void parse_fault_injection(train_step *ts, int rank, bool sharded, fault_injection *fi) {
    memset(fi, 0, sizeof *fi);
    fi->step = -1;
    const char *spec = getenv("MIXPAR_INJECT_INF");
    if (!spec || !*spec) return;
    const char *form = "MIXPAR_INJECT_INF=RANK:STEP or RANK:STEP:NAME[@ELEMENT] (whole numbers, STEP from 1; NAME a "
                       "weight such as h.0.fcprojw or an activation such as h.0.fch)";
    int r, step, used = 0;
    if (sscanf(spec, "%d:%d%n", &r, &step, &used) != 2 || r < 0 || step < 1 || (spec[used] && spec[used] != ':'))
        MP_FAIL(form, "'%s'", spec);
    if (!spec[used]) { /* the gradient, as lab 17 uses it */
        if (!ts->amp)
            MP_FAIL_HINT("a mixed-precision recipe with MIXPAR_INJECT_INF=RANK:STEP",
                         "the fp32 path has no found_inf step; RANK:STEP:NAME injects into a weight or an activation "
                         "under any recipe", "MIXPAR_INJECT_INF with recipe fp32");
        if (r == rank) ts->inject_inf_at = step - 1;
        return;
    }
    char name[64];
    snprintf(name, sizeof name, "%s", spec + used + 1);
    char *at = strchr(name, '@');
    unsigned long long element = 0;
    if (at) {
        char *end;
        *at = 0;
        element = strtoull(at + 1, &end, 10);
        if (at[1] < '0' || at[1] > '9' || *end) MP_FAIL(form, "'%s': element '%s'", spec, at + 1);
    }
    const model_tensor *t = model_tensor_find(ts->m, name);
    if (!t && !activation_name_exists(ts->m, name))
        MP_FAIL_HINT(form, "'mixpar checkpoint info' lists the weights; the activations of block N are h.N.ln1, "
                     "h.N.qkv, h.N.att, h.N.atty, h.N.res2, h.N.ln2, h.N.fch, h.N.fch_act, h.N.res3, and encoded, "
                     "lnf, logits", "'%s': no weight or activation is called '%s'", spec, name);
    if (t && element >= t->size)
        MP_FAIL(form, "'%s': element %llu of %s, which has %zu", spec, element, name, t->size);
    if (t && sharded)
        MP_FAIL("MIXPAR_INJECT_INF into a weight with whole weights on every rank (not FSDP / ZeRO-3)", "'%s'", spec);
    if (r != rank) return;
    fi->m = ts->m;
    fi->step = step - 1;
    fi->weight = t;
    if (!t) snprintf(fi->activation, sizeof fi->activation, "%s", name);
    fi->element = (size_t)element;
}

/* The probe that puts the inf into the named activation, the first time forward computes it. */
static void inject_into_activation(void *ctx, int layer, const char *name, float *x, size_t n) {
    fault_injection *fi = ctx;
    char full[48];
    if (layer == -1) fi->done = false; /* "encoded" comes first: a new forward pass (the scan's too) */
    model_act_full_name(fi->m, layer, name, full, sizeof full);
    if (fi->done || n == 0 || strcmp(full, fi->activation) != 0) return;
    x[fi->element < n ? fi->element : n - 1] = INFINITY; /* the 16-bit path reports the logits a row at a time */
    fi->done = true;
}

/* Before step `step` (0-based) runs: the weight gets its inf, or the probe is set for the activation. */
static void inject_before_step(fault_injection *fi, train_step *ts, long step) {
    if (fi->step != step) return;
    if (fi->weight) {
        model_params(ts->m)[fi->weight->offset + fi->element] = INFINITY;
        if (ts->master) ts->master[fi->weight->offset + fi->element] = INFINITY; /* fp16-o2: the master too */
    } else {
        model_set_act_probe(ts->m, inject_into_activation, fi);
    }
}

static void inject_after_step(fault_injection *fi, train_step *ts, long step) {
    if (fi->step == step && !fi->weight) model_set_act_probe(ts->m, NULL, NULL);
}

/* A skipped step: a normal event under a dynamic scaler (the scale backs off), a diagnosis when nothing
 * can react (fixed scale, no scaler: a bf16 or fp32 NaN), and the end of the run when the scaler is out
 * of room (DeepSpeed's "already at minimum", PyTorch's vanished scale). */
static void diagnose_skip(ev_writer *ev, train_step *ts, const train_step_result *r, long step, double lr, bool quiet) {
    bool dynamic = ts->amp && r->update.status == AMP_SCALER_OK;
    if (dynamic) return;
    amp_nonfinite nf;
    bool bad = amp_find_nonfinite(ts->m, AMP_SCAN_GRADS, &nf);
    amp_diag_context ctx = {.step = step, .loss = r->loss, .lr = lr, .grad_clip = ts->grad_clip,
                            .recipe = ts->amp ? ts->recipe : AMP_RECIPE_FP32, .scaler = ts->amp ? &ts->scaler : NULL,
                            .update = &r->update};
    amp_diagnosis d;
    amp_diagnose(bad ? &nf : NULL, NULL, &ctx, &d);
    amp_diagnosis_emit(ev, &d);
    if (ts->amp && amp_scaler_status_is_fatal(r->update.status)) {
        ev_close(ev);
        fputs(d.message, stderr);
        amp_scaler_stop(&ts->scaler, &r->update, step);
    }
    if (!quiet) fputs(d.message, stderr);
}

/* What one step left behind that the non-finite check reads. */
typedef struct {
    const int *inputs, *targets; /* the step's micro-batches, accum x (B,T) */
    int B, T, accum;
    long start_step;             /* where this run started (the checkpoint's step when resumed) */
    long skipped_in_a_row;       /* skipped steps up to and including this one */
    int max_skipped_in_a_row;    /* train.max_consecutive_skips; 0: no limit */
} step_facts;

/* A NaN in the weights is never normal, and neither is a non-finite loss without a dynamic loss scaler, nor
 * a long run of skipped steps: each would only repeat until the last step (every step skipped, "loss nan ->
 * nan", exit 0). So: when the loss is not finite, scan the weights in forward order; unless fp16's dynamic
 * scaler explains it (finite weights, its overflow skips are how it finds its scale), run forward again with
 * a probe on every activation and stop the run (exit 2) naming the first bad weight or activation. Under
 * data parallel every rank gets here together (the loss is averaged, found_inf agreed), so a second forward
 * under FSDP gathers on all of them; rank 0 prints, the others stop silently once it has. */
static void stop_on_nonfinite(ev_writer *ev, train_step *ts, const train_step_result *r, long done, double lr,
                              const step_facts *f, comm_t *comm, int rank) {
    bool loss_bad = !isfinite(r->loss);
    bool too_many_skips = f->max_skipped_in_a_row > 0 && f->skipped_in_a_row >= f->max_skipped_in_a_row;
    if (!loss_bad && !too_many_skips) return;
    amp_nonfinite params;
    bool params_bad = !ts->fsdp && amp_find_nonfinite(ts->m, AMP_SCAN_PARAMS, &params);
    bool dynamic = ts->amp && ts->scaler.cfg.kind != AMP_SCALER_NONE && ts->scaler.cfg.kind != AMP_SCALER_STATIC;
    if (!params_bad && dynamic && !too_many_skips) return; /* an fp16 overflow: the scaler backs off */
    amp_bad_tensor act, first_act;
    bool act_bad = false;
    for (int k = 0; k < f->accum; k++) { /* every micro-batch on every rank: FSDP's gathers stay in step */
        size_t at = (size_t)k * f->B * f->T;
        if (amp_find_nonfinite_activation(ts->m, f->inputs + at, f->targets + at, f->B, f->T, &act) && !act_bad) {
            first_act = act;
            act_bad = true;
        }
    }
    amp_nonfinite grads;
    bool grads_bad = !params_bad && !act_bad && amp_find_nonfinite(ts->m, AMP_SCAN_GRADS, &grads);
    amp_diag_context ctx = {.step = done, .loss = r->loss, .lr = lr, .grad_clip = ts->grad_clip,
                            .recipe = ts->amp ? ts->recipe : AMP_RECIPE_FP32, .scaler = ts->amp ? &ts->scaler : NULL,
                            .update = &r->update, .start_step = f->start_step,
                            .activation = act_bad && !params_bad ? &first_act : NULL};
    amp_diagnosis d;
    amp_diagnose(grads_bad ? &grads : NULL, params_bad ? &params : NULL, &ctx, &d);
    amp_diagnosis_emit(ev, &d);
    ev_close(ev);
    char cause[160];
    if (too_many_skips && !loss_bad)
        snprintf(cause, sizeof cause, "%ld skipped steps in a row (train.max_consecutive_skips %d)",
                 f->skipped_in_a_row, f->max_skipped_in_a_row);
    else snprintf(cause, sizeof cause, "the loss is %g", (double)r->loss);
    char first[160] = "no weight or activation of this rank holds inf/NaN (see the diagnosis above)";
    if (grads_bad)
        snprintf(first, sizeof first, "weights and activations are finite; the first gradient to hold inf/NaN in "
                 "backward order is %s", grads.first.name);
    if (params_bad || act_bad) {
        const amp_bad_tensor *b = params_bad ? &params.first : &first_act;
        snprintf(first, sizeof first, "the first to hold inf/NaN in forward order is the %s %s (%s %d, element %llu)",
                 params_bad ? "weight" : "activation", b->name, b->layer < 0 ? "embeddings, layer" : "layer", b->layer,
                 (unsigned long long)b->first_offset);
    }
    bool several = comm && comm_size(comm) > 1;
    if (rank == 0) {
        fputs(d.message, stderr);
        mp_print_input_error(__FILE__, __LINE__, "finite weights, activations and loss (steps that train)",
                             params_bad && done == f->start_step + 1
                                 ? "the weights were bad before this run's first update: resume from an earlier "
                                   "checkpoint (or start afresh)"
                                 : "follow the diagnosis above; train.max_consecutive_skips sets how many skipped "
                                   "steps in a row are tolerated",
                             "step %ld: %s; %s", done, cause, first);
    }
    if (several) comm_barrier(comm); /* rank 0 has said it: now every rank may stop */
    exit(EXIT_BAD_INPUT);
}

/* ------------------------------------------------------------------ optimizer offload */

/* ZeRO-Offload (train/step.h) runs with ZeRO stage 1 or 2 (the config refuses stage 0) to the host's memory
 * ("cpu"), with weights kept in fp32 on the device (fp32 and the autocast recipes). */
static void check_offload(const train_config *cfg, const amp_setup *precision) {
    if (cfg->zero.offload_optimizer == OFFLOAD_NONE) return;
    if (cfg->zero.offload_optimizer == OFFLOAD_NVME)
        MP_FAIL_HINT("zero_optimization.offload_optimizer.device \"cpu\" or \"none\"",
                     "there is no NVMe tier here (ZeRO-Infinity's); \"cpu\" keeps the optimizer state in host memory",
                     "offload_optimizer.device \"nvme\"");
    const amp_recipe_info *r = amp_recipe_get(precision->recipe);
    if (!r->autocast && r->weights != &FP_FP32)
        MP_FAIL_HINT("offload_optimizer with fp32 weights on the device (recipe fp32, fp16 or bf16)",
                     "fp16-o2 and bf16-pure keep 16-bit weights, whose update the host would have to round; use the "
                     "autocast recipe of the same format (fp16.enabled or bf16.enabled, fp32 weights)",
                     "offload_optimizer.device \"cpu\" with recipe %s", r->name);
}

/* What offload keeps on the host, in the run's first lines: the bytes, and what crosses per step. */
static void print_offload(const train_step *ts, int world) {
    size_t elems = 0;
    for (int i = 0; i < ts->nspans; i++) elems += ts->spans[i].n;
    printf("offload: optimizer state and fp32 master on the host (%.1f MB%s: state %.1f, master %.1f, gradient "
           "buffer %.1f); copies per step: %.1f MB of gradients down, %.1f MB of weights up\n",
           mem_current(MEM_HOST) / 1e6, world > 1 ? " per rank" : "",
           optim_state_bytes(ts->state.kind, ts->state.n) / 1e6, elems * sizeof(float) / 1e6,
           elems * sizeof(float) / 1e6, elems * sizeof(float) / 1e6, elems * sizeof(float) / 1e6);
}

/* ------------------------------------------------------------------ model parallel (tp x pp > 1) */

/* What a tensor- or pipeline-parallel run does not do yet: refused before anything is built (exit 2). */
static void check_model_parallel(const train_config *cfg, const amp_setup *precision) {
    struct {
        bool refused;
        const char *what, *hint;
    } limits[] = {
        {precision->recipe != AMP_RECIPE_FP32 && precision->recipe != AMP_RECIPE_BF16 && precision->recipe != AMP_RECIPE_FP16,
         "precision recipe fp32, bf16 or fp16", "the shards compute under autocast with fp32 weights; bf16-pure, "
         "fp16-o2, tf32 and fp8 are not wired up for shards"},
        {cfg->zero.stage > 1 || cfg->fsdp.enabled, "zero_optimization.stage 0 or 1 and no fsdp section",
         "over the dp group gradients are allreduced and ZeRO-1 can shard the optimizer states; ZeRO-2/3 and "
         "FSDP are not wired up"},
        {cfg->zero.offload_optimizer != OFFLOAD_NONE, "no optimizer offload", "offload is not wired up for shards"},
        {cfg->train.freeze[0] != '\0', "no train.freeze", "freezing is not wired up for shards"},
        {cfg->comm.hook != 0, "communication.hook \"allreduce\"", "the dp group's gradients are averaged in fp32"},
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++)
        if (limits[i].refused)
            MP_FAIL_HINT(limits[i].what, limits[i].hint, "tensor_model_parallel_size %d x pipeline_model_parallel_size %d",
                         cfg->tensor_parallel, cfg->pipeline_parallel);
}

/* Training on a dp x tp x pp mesh (train/mp_step.h): each rank holds its shard; the dp group's ranks take
 * the rows of a data-parallel run on dp ranks; the step event and the progress line carry the loss of the
 * last stage, averaged over dp; evaluation runs forward through the pipeline (pp_evaluate). Samples and
 * histograms need the whole model on one rank: not run (the header says so). */
/* The validation loss through the pipeline: the eval_batches batches one rank's evaluate() reads. */
static float evaluate_pipeline(pp *pipe, loader *vl, int batches, int *inputs, int *targets) {
    loader_reset(vl);
    size_t n = (size_t)vl->B * vl->T;
    for (int i = 0; i < batches; i++) {
        loader_next(vl);
        memcpy(inputs + i * n, vl->inputs, n * sizeof(int));
        memcpy(targets + i * n, vl->targets, n * sizeof(int));
    }
    return pp_evaluate(pipe, inputs, targets, batches, vl->B, vl->T);
}

/* Every rank writes its shard of the model and of the optimizer state (train/mp_checkpoint.h) with the metadata
 * a data-parallel run's checkpoint has, so either trainer resumes it on any layout. */
static void save_model_parallel(mp_step *s, const char *dir, const train_config *cfg, long step, const train_data *td,
                                ev_writer *ev) {
    char *config_json = config_dump(cfg), steps[32], optim_step[32], epoch[32], batch[32], rows[32];
    snprintf(steps, sizeof steps, "%ld", step);
    snprintf(optim_step, sizeof optim_step, "%ld", mp_step_optim_state(s)->step);
    loader_state at = train_data_position(td);
    snprintf(epoch, sizeof epoch, "%llu", (unsigned long long)at.epoch);
    snprintf(batch, sizeof batch, "%llu", (unsigned long long)at.batch);
    snprintf(rows, sizeof rows, "%d", cfg->micro_batch * mp_step_mesh(s)->dp_size);
    ckpt_meta meta[6 + AMP_SCALER_NSTATE] = {{"config", config_json}, {"step", steps}, {"optim_step", optim_step},
                                             {"loader_epoch", epoch}, {"loader_batch", batch}, {"loader_rows", rows}};
    int nmeta = 6;
    amp_kv scaler_state[AMP_SCALER_NSTATE];
    if (mp_step_scaler(s)) /* the loss scale and its counters resume where they were */
        for (int i = 0, k = amp_scaler_save_state(mp_step_scaler(s), scaler_state); i < k; i++)
            meta[nmeta++] = (ckpt_meta){scaler_state[i].key, scaler_state[i].value};
    mp_checkpoint_save(s, dir, meta, nmeta, NULL);
    free(config_json);
    const mesh_t *mesh = mp_step_mesh(s);
    char shard[4300];
    snprintf(shard, sizeof shard, "%s/rank-%05d-of-%05d.safetensors", dir, mesh->rank, comm_size(mesh->world));
    struct stat st;
    ev_begin(ev, "checkpoint");
    ev_int(ev, "step", step);
    ev_str(ev, "path", dir);
    ev_int(ev, "bytes", stat(shard, &st) == 0 ? (long long)st.st_size : -1);
    ev_int(ev, "shard", mesh->rank);
    ev_end(ev);
}

static trainer_summary run_model_parallel(train_config *cfg, const model_config *mc, const tokfile *train_tokens,
                                          const tokfile *val_tokens, comm_t *comm, const trainer_options *opt,
                                          const amp_setup *precision, bool quiet) {
    trainer_summary sum = {.last_val_loss = NAN};
    int world = comm ? comm_size(comm) : 1, rank = comm ? comm_rank(comm) : 0;
    MP_ASSERT(comm, "tensor or pipeline parallel on one rank (the batch rule refuses it)");
    mp_layout lay = {.dp = world / (cfg->tensor_parallel * cfg->pipeline_parallel), .tp = cfg->tensor_parallel,
                     .pp = cfg->pipeline_parallel, .micro_batches = cfg->grad_accum,
                     .schedule = (pp_schedule)cfg->pipeline_schedule, .chunks = 1, .zero_stage = cfg->zero.stage,
                     .sequence_parallel = cfg->sequence_parallel};
    int per_chunk = cfg->layers_per_virtual_stage;
    if (per_chunk > 0) { /* Megatron: v = L / (pp x layers per virtual stage), exactly */
        if (mc->L % (lay.pp * per_chunk) != 0)
            MP_FAIL_HINT("model.layers divisible by pipeline_model_parallel_size x num_layers_per_virtual_pipeline_stage",
                         "each of the pp x v virtual stages gets the same number of blocks",
                         "%d layers, %d stages x %d layers per virtual stage", mc->L, lay.pp, per_chunk);
        lay.chunks = mc->L / (lay.pp * per_chunk);
    }
    char checkpoint_path[4200], sharded_path[4200];
    snprintf(checkpoint_path, sizeof checkpoint_path, "%s/checkpoint.safetensors", cfg->train.run_dir);
    snprintf(sharded_path, sizeof sharded_path, "%s/checkpoint.sharded", cfg->train.run_dir);
    const char *resume_from = !opt || !opt->resume        ? NULL
                              : strcmp(opt->resume, "auto") == 0 ? resume_auto(checkpoint_path, sharded_path)
                                                                 : opt->resume;
    ev_writer *ev = resume_from ? ev_open_append(cfg->train.run_dir, rank) : ev_open(cfg->train.run_dir, rank);
    mp_step *s = mp_step_create(comm, mc, &lay, &cfg->optimizer, cfg->gradient_clipping, cfg->train.seed, ev);
    mp_step_set_amp(s, precision->recipe, &precision->scaler);
    const amp_scaler *scaler = mp_step_scaler(s);
    const char *inject = getenv("MIXPAR_INJECT_INF"); /* RANK:STEP, as lab 17's: a gradient overflow on one rank */
    if (inject && *inject) {
        int r, at, used = 0;
        if (sscanf(inject, "%d:%d%n", &r, &at, &used) != 2 || inject[used] || r < 0 || at < 1)
            MP_FAIL("MIXPAR_INJECT_INF=RANK:STEP under tensor or pipeline parallel (whole numbers, STEP from 1)",
                    "'%s'", inject);
        if (!scaler)
            MP_FAIL_HINT("a mixed-precision recipe with MIXPAR_INJECT_INF=RANK:STEP", "the fp32 path has no found_inf step",
                         "MIXPAR_INJECT_INF with recipe fp32");
        if (r == rank) mp_step_inject_inf(s, at - 1);
    }
    mesh_t *mesh = mp_step_mesh(s);
    for (int j = 0; j < mp_step_chunks(s); j++)
        model_set_recompute(mp_step_model(s, j), (model_recompute)cfg->ckpt.policy, cfg->ckpt.every_k);
    const int B = cfg->micro_batch, T = cfg->data.seq_len, accum = cfg->grad_accum;
    train_data *td = train_data_open(cfg, train_tokens, B, T, mesh->dp); /* this dp rank's rows */
    long start = 0;
    if (resume_from) { /* any mesh's checkpoint, a data-parallel run's shards, or one file */
        mp_checkpoint_progress at;
        mp_checkpoint_load(s, resume_from, &at);
        /* A loader batch is micro-batch x dp rows: a mesh with another split of the same global batch (more
         * micro-batches of fewer rows) continues from the same row of the epoch. */
        uint64_t rows = (uint64_t)B * (uint64_t)mesh->dp_size, done_rows = at.loader_batch * at.loader_rows;
        if (at.loader_rows && at.loader_rows != rows) {
            if (done_rows % rows != 0)
                RANKS_STOP(comm, "a checkpoint whose data position falls on a whole loader batch of this run",
                           "resume with train_micro_batch_size_per_gpu x dp dividing the rows read so far",
                           "'%s' stopped after %llu rows of epoch %llu; this run's batches are %llu rows", resume_from,
                           (unsigned long long)done_rows, (unsigned long long)at.loader_epoch, (unsigned long long)rows);
            at.loader_batch = done_rows / rows;
        }
        train_data_restore(td, (loader_state){at.loader_epoch, at.loader_batch});
        start = at.step;
        if (start > cfg->train.steps)
            RANKS_STOP(comm, "train.steps at least the step of the checkpoint resumed from",
                       "raise train.steps (--set train.steps=N) to train on from the checkpoint",
                       "'%s' is at step %ld, train.steps is %ld: there is nothing to train", resume_from, start,
                       cfg->train.steps);
        if (rank == 0 && start == cfg->train.steps) /* even when quiet: a run that trains nothing says so */
            printf("resumed from %s at step %ld, which is train.steps: the run is already complete, nothing to "
                   "train (raise train.steps to train further)\n", resume_from, start);
        else if (!quiet) printf("resumed from %s at step %ld\n", resume_from, start);
    }
    const int *first = mp_step_stages(s);

    cJSON *config_tree = config_to_json(cfg);
    char *config_json = cJSON_PrintUnformatted(config_tree);
    cJSON_Delete(config_tree);
    ev_begin(ev, "run");
    ev_str(ev, "name", cfg->train.run_name);
    ev_int(ev, "world", world);
    ev_num(ev, "wall", mp_elapsed_origin_wall());
    ev_int(ev, "params", (long long)model_count_params(mc));
    ev_int(ev, "resumed_at", start);
    ev_object_begin(ev, "model_parallel");
    ev_int(ev, "dp", lay.dp);
    ev_int(ev, "tp", lay.tp);
    ev_int(ev, "pp", lay.pp);
    ev_str(ev, "schedule", pp_schedule_names[lay.schedule]);
    ev_int(ev, "micro_batches", lay.micro_batches);
    ev_int(ev, "zero_stage", lay.zero_stage);
    ev_bool(ev, "sequence_parallel", lay.sequence_parallel && lay.tp > 1);
    ev_int(ev, "dp_rank", mesh->dp_rank);
    ev_int(ev, "tp_rank", mesh->tp_rank);
    ev_int(ev, "stage", mesh->pp_rank);
    ev_int(ev, "chunks", lay.chunks);
    long long blocks[2 * 64];
    int nchunks = lay.chunks < 64 ? lay.chunks : 64;
    for (int j = 0; j < nchunks; j++) { /* chunk j is virtual stage j pp + stage */
        blocks[2 * j] = first[j * lay.pp + mesh->pp_rank];
        blocks[2 * j + 1] = first[j * lay.pp + mesh->pp_rank + 1];
    }
    ev_int(ev, "first_block", blocks[0]);
    ev_int(ev, "last_block", blocks[1]);
    if (lay.chunks > 1) ev_ints(ev, "chunk_blocks", blocks, (size_t)(2 * nchunks));
    ev_int(ev, "shard_params", (long long)mp_step_params(s));
    ev_object_end(ev);
    ev_object_begin(ev, "precision");
    ev_str(ev, "recipe", amp_recipe_get(precision->recipe)->name);
    ev_str(ev, "source", precision->source);
    ev_str(ev, "scaler", amp_scaler_kind_get(precision->scaler.kind)->name);
    ev_num(ev, "init_scale", precision->scaler.kind == AMP_SCALER_NONE ? 1 : precision->scaler.init_scale);
    ev_str(ev, "compute", model_compute_name(model_get_compute(mp_step_model(s, 0))));
    ev_object_end(ev);
    ev_json(ev, "config", config_json);
    ev_end(ev);
    free(config_json);
    /* After the run header: every call on the mesh's groups is a comm event naming its group (mixpar viz) */
    comm_t *const mesh_groups[] = {mesh->tp, mesh->dp, mesh->pp, mesh->mp, mesh->embed};
    for (size_t g = 0; g < sizeof mesh_groups / sizeof mesh_groups[0]; g++)
        if (mesh_groups[g]) comm_set_events(mesh_groups[g], ev);
    ev_mem(ev, 0);
    if (!quiet) {
        printf("model: %s, %zu parameters (L=%d, C=%d, heads %d/%d, context %d, vocab %d)\n", model_arch_name(mc->arch),
               model_count_params(mc), mc->L, mc->C, mc->NH, mc->KVH, mc->maxT, mc->V);
        printf("model parallel: dp %d x tp %d x pp %d on %d ranks (%s), schedule %s, %d micro-batches of %d x %d "
               "tokens per step per replica; %s' first blocks:", lay.dp, lay.tp, lay.pp, world,
               comm_backend_name(comm), pp_schedule_names[lay.schedule], accum, B, T,
               lay.chunks > 1 ? "virtual stages" : "stages");
        for (int st = 0; st <= lay.pp * lay.chunks; st++) printf(" %d", first[st]);
        printf("\n(samples and histograms are not run under model parallel)\n");
        if (cfg->train.checkpoint_interval > 0)
            printf("checkpoints every %ld steps: every rank's shard in %s/ (any mesh resumes it; 'mixpar checkpoint "
                   "consolidate' makes one file)\n", (long)cfg->train.checkpoint_interval, sharded_path);
        if (scaler) {
            char from[32] = "";
            if (scaler->cfg.kind != AMP_SCALER_NONE) snprintf(from, sizeof from, " from %g", scaler->scale);
            printf("precision: %s (%s); loss scaler %s%s; shards compute in %s\n", amp_recipe_get(precision->recipe)->name,
                   precision->source, amp_scaler_kind_get(precision->scaler.kind)->name, from,
                   model_compute_name(model_get_compute(mp_step_model(s, 0))));
        }
    }
    loader vl; /* every rank reads the same validation batches: the loss is the pipeline's, the same on all */
    loader_init(&vl, val_tokens, 0, val_tokens->token_count, B, T, LOADER_SEQUENTIAL, cfg->train.seed, NULL);
    size_t eval_tokens = (size_t)cfg->train.eval_batches * B * T;
    int *eval_inputs = malloc(eval_tokens * sizeof(int)), *eval_targets = malloc(eval_tokens * sizeof(int));
    MP_ASSERT(eval_inputs && eval_targets, "out of memory");
    size_t per_step = (size_t)accum * B * T;
    int *inputs = malloc(per_step * sizeof(int)), *targets = malloc(per_step * sizeof(int));
    MP_ASSERT(inputs && targets, "out of memory");
    /* train.profile: each rank's kernels and communication; the replica's tokens are shared by its tp x pp ranks */
    train_profile *profile = cfg->train.profile ? train_profile_start(cfg->train.run_dir, rank, world, mc, T,
                                                                      (double)per_step * lay.dp / world, NULL)
                                                : NULL;
    double t_start = mp_now();
    for (long step = start; step < cfg->train.steps; step++) {
        for (int k = 0; k < accum; k++) train_data_next(td, inputs + (size_t)k * B * T, targets + (size_t)k * B * T);
        double lr = lr_schedule_at(&cfg->scheduler, step), t0 = mp_now();
        train_profile_step_begin(profile);
        mp_step_result r = mp_step_run(s, inputs, targets, B, T, lr, step + 1);
        train_profile_step_end(profile);
        double dt = mp_now() - t0;
        const pp_stats *ps = pp_get_stats(mp_step_pipeline(s));
        if (step == start) sum.first_loss = r.loss;
        sum.last_loss = r.loss;
        ev_begin(ev, "step");
        ev_int(ev, "step", step + 1);
        ev_num(ev, "loss", r.loss);
        ev_num(ev, "lr", lr);
        ev_num(ev, "grad_norm", r.grad_norm);
        ev_num(ev, "scale", r.update.scale);
        ev_bool(ev, "skipped", r.skipped);
        if (scaler) {
            ev_num(ev, "next_scale", r.update.next_scale);
            ev_bool(ev, "found_inf_local", r.found_inf_local);
            ev_int(ev, "skipped_total", scaler->skipped);
        }
        ev_num(ev, "tokens_per_s", per_step * lay.dp / dt);
        ev_object_begin(ev, "pipeline");
        ev_num(ev, "bubble", ps->bubble);
        ev_num(ev, "bubble_schedule", ps->bubble_schedule);
        ev_num(ev, "bubble_formula", pp_bubble_formula(lay.pp, accum, lay.chunks));
        ev_int(ev, "in_flight", ps->max_in_flight);
        ev_int(ev, "act_bytes", (long long)ps->act_peak_bytes);
        ev_object_end(ev);
        ev_end(ev);
        long done = step + 1;
        if (!quiet && (done % cfg->train.log_interval == 0 || done == 1 || done == cfg->train.steps)) {
            char scale[48] = "";
            if (scaler && scaler->cfg.kind != AMP_SCALER_NONE) snprintf(scale, sizeof scale, " | scale %g", r.update.scale);
            printf("step %5ld/%ld | loss %.4f | lr %.2e | norm %6.3f%s%s | bubble %.2f (schedule %.2f) | %7.0f tok/s\n",
                   done, cfg->train.steps, r.loss, lr, r.grad_norm, r.skipped ? " (skipped: not finite)" : "", scale,
                   ps->bubble, ps->bubble_schedule, per_step * lay.dp / dt);
            fflush(stdout);
        }
        if (done % cfg->train.log_interval == 0) ev_mem(ev, done);
        if (cfg->train.eval_interval > 0 && (done % cfg->train.eval_interval == 0 || done == cfg->train.steps)) {
            sum.last_val_loss = evaluate_pipeline(mp_step_pipeline(s), &vl, cfg->train.eval_batches, eval_inputs,
                                                  eval_targets);
            ev_begin(ev, "eval");
            ev_int(ev, "step", done);
            ev_num(ev, "val_loss", sum.last_val_loss);
            ev_end(ev);
            if (!quiet) printf("eval at step %ld: validation loss %.4f\n", done, sum.last_val_loss);
        }
        if (cfg->train.checkpoint_interval > 0 &&
            (done % cfg->train.checkpoint_interval == 0 || done == cfg->train.steps))
            save_model_parallel(s, sharded_path, cfg, done, td, ev);
        sum.steps_done = done;
    }
    sum.seconds = mp_now() - t_start;
    train_profile_finish(profile);
    if (!quiet && sum.steps_done > 0)
        printf("trained %ld steps in %.1f s: loss %.4f -> %.4f\n", sum.steps_done, sum.seconds, sum.first_loss,
               sum.last_loss);
    free(inputs);
    free(targets);
    free(eval_inputs);
    free(eval_targets);
    loader_free(&vl);
    train_data_free(td);
    for (size_t g = 0; g < sizeof mesh_groups / sizeof mesh_groups[0]; g++)
        if (mesh_groups[g]) comm_set_events(mesh_groups[g], NULL);
    mp_step_free(s);
    ev_close(ev);
    return sum;
}

/* ------------------------------------------------------------------ the loop */

trainer_summary trainer_run(train_config *cfg, const trainer_options *opt) {
    trainer_summary sum = {.last_val_loss = NAN};
    bool quiet = opt && opt->quiet;
    amp_setup precision;
    amp_recipe_from_config(cfg, &precision, NULL); /* conflicts were refused when the config was parsed */
    if ((precision.recipe == AMP_RECIPE_FP16_O2 || precision.recipe == AMP_RECIPE_BF16_PURE) && cfg->fsdp.enabled)
        MP_FAIL_HINT("precision recipe fp32, fp16, bf16 or tf32 with FSDP / ZeRO-3",
                     "the shards hold the fp32 weights the optimizer updates; autocast casts each gathered layer",
                     "recipe %s with sharded parameters", amp_recipe_get(precision.recipe)->name);
    if (precision.recipe == AMP_RECIPE_FP16_O2 && cfg->zero.stage > 0)
        MP_FAIL_HINT("precision recipe fp16-o2 with zero_optimization.stage 0",
                     "ZeRO shards the fp32 master copy itself; use the fp16 recipe (fp32 weights, autocast) with ZeRO",
                     "recipe fp16-o2 with stage %d", cfg->zero.stage);
    if (cfg->zero.stage > 0 && !cfg->fsdp.enabled) {
        zero_check_stage(cfg->zero.stage);
        if (cfg->comm.hook != 0)
            MP_FAIL_HINT("communication.hook \"allreduce\" with zero_optimization.stage 1 or 2",
                         "ZeRO reduce-scatters the fp32 gradients itself; the compression hooks are for stage 0",
                         "communication.hook \"%s\" with stage %d", ddp_hook_names[cfg->comm.hook], cfg->zero.stage);
    }
    if (cfg->fsdp.enabled) {
        if (cfg->comm.hook != 0)
            MP_FAIL_HINT("communication.hook \"allreduce\" with FSDP / ZeRO-3",
                         "FSDP reduce-scatters the fp32 gradients itself; the compression hooks are for plain DDP",
                         "communication.hook \"%s\"", ddp_hook_names[cfg->comm.hook]);
    }
    if (cfg->comm.deterministic && (cfg->zero.stage > 0 || cfg->fsdp.enabled))
        MP_FAIL_HINT("communication.deterministic with plain data parallel (zero_optimization.stage 0, no fsdp)",
                     "the deterministic reduction is an allreduce in rank order; ZeRO and FSDP reduce-scatter",
                     "communication.deterministic with stage %d%s", cfg->zero.stage, cfg->fsdp.enabled ? " (FSDP)" : "");
    bool model_parallel = cfg->tensor_parallel * cfg->pipeline_parallel > 1;
    if (model_parallel) check_model_parallel(cfg, &precision);
    check_offload(cfg, &precision);
    bool offload = cfg->zero.offload_optimizer == OFFLOAD_CPU;
    if (cfg->train.threads > 0) omp_set_num_threads(cfg->train.threads);
    else share_cores_between_local_ranks();
    comm_t *comm = opt ? opt->comm : NULL;
    int rank = comm ? comm_rank(comm) : 0, world = comm ? comm_size(comm) : 1;
    MP_ASSERT(cfg->world == world, "config resolved for %d ranks, running on %d", cfg->world, world);
    if (rank != 0) quiet = true; /* one voice: rank 0 prints, samples and checkpoints */
    ranks_check_same_config(cfg, comm); /* before the data and the model, which differ when the configs do */
    if (rank == 0 && cfg->sequence_parallel && cfg->tensor_parallel == 1)
        fprintf(stderr, "mixpar: warning: sequence_parallel ignored: tensor_model_parallel_size is 1, so there is no "
                        "tp group to split the sequence over (Megatron-LM turns it off likewise)\n");
    if (rank == 0) ensure_dataset(cfg, quiet);
    if (comm) comm_barrier(comm); /* the others wait for the dataset rank 0 may be building */
    config_load_vocab(cfg, NULL);
    model_config mc = cfg->model.model;
    model_config_complete(&mc);
    const int B = cfg->micro_batch, T = cfg->data.seq_len, accum = cfg->grad_accum;
    check_memory(cfg, &mc);

    tokfile *train_tokens = open_tokens(cfg, "train.tokens"), *val_tokens = open_tokens(cfg, "val.tokens");
    char vocab_path[4096];
    config_data_path(cfg, "vocab.json", vocab_path, sizeof vocab_path);
    tokenizer tok;
    tokenizer_load(&tok, vocab_path, NULL);
    check_sample_prompt(cfg, &tok, vocab_path, comm);
    if (model_parallel) {
        sum = run_model_parallel(cfg, &mc, train_tokens, val_tokens, comm, opt, &precision, quiet);
        tokenizer_free(&tok);
        tokfile_close(train_tokens);
        tokfile_close(val_tokens);
        return sum;
    }
    /* With either sampler, the ranks' rows of a step are the rows one rank with B x world would take. */
    train_data *td = train_data_open(cfg, train_tokens, B, T, comm);
    loader vl;
    loader_init(&vl, val_tokens, 0, val_tokens->token_count, B, T, LOADER_SEQUENTIAL, cfg->train.seed, NULL);

    /* FSDP / ZeRO-3 on several ranks: the model's buffers are reserved, each rank keeps shards (dist/fsdp.h). */
    bool sharded = cfg->fsdp.enabled && world > 1;
    /* ZeRO-2 on several ranks: whole weights, gradients held only for the shard and the buckets in flight. */
    bool zero2 = world > 1 && !sharded && cfg->zero.stage == 2;
    model *m = sharded ? model_create_reserved(&mc) : zero2 ? model_create_sharded_grads(&mc) : model_create(&mc);
    apply_decay_groups(m, cfg, quiet);
    fsdp *fs = NULL;
    if (sharded) {
        fsdp_options fo = {.strategy = (fsdp_strategy)cfg->fsdp.sharding_strategy,
                           .shard_size = cfg->fsdp.hybrid_shard_size,
                           .forward_prefetch = cfg->fsdp.forward_prefetch,
                           .backward_prefetch = cfg->fsdp.backward_prefetch == 0,
                           .max_inflight = cfg->fsdp.limit_all_gathers ? 1 : mc.L,
                           .overlap = cfg->zero.overlap_comm};
        fs = fsdp_create(m, comm, &fo, config_hash(cfg), cfg->train.seed); /* draws the weights, keeps shards */
    } else {
        model_init(m, cfg->train.seed);
    }
    model_set_recompute(m, (model_recompute)cfg->ckpt.policy, cfg->ckpt.every_k);
    freeze_tensors(m, cfg);
    model_precision mp = amp_model_precision(&precision);
    model_set_precision(m, &mp);
    /* Counting what rounding flushes costs a pass; it is on when its events are asked for. */
    model_rounding_enable(m, cfg->train.hist_interval > 0);
    train_step ts;
    /* ZeRO shards over the data-parallel ranks; on one rank there is nothing to shard. */
    zero *zr = world > 1 && cfg->zero.stage > 0 && !sharded
                   ? zero_create(m, comm, cfg->zero.stage, (size_t)cfg->zero.reduce_bucket_size)
                   : NULL;
    if (fs) train_step_init_fsdp(&ts, m, &cfg->optimizer, cfg->gradient_clipping, fs, offload);
    else if (offload) train_step_init_offload(&ts, m, &cfg->optimizer, cfg->gradient_clipping, zr);
    else if (zr) train_step_init_zero(&ts, m, &cfg->optimizer, cfg->gradient_clipping, zr);
    else train_step_init(&ts, m, &cfg->optimizer, cfg->gradient_clipping);
    if (precision.recipe != AMP_RECIPE_FP32)
        train_step_set_amp(&ts, precision.recipe, &precision.scaler, precision.stochastic_rounding, cfg->train.seed);
    if (world > 1) ts.found_inf_comm = comm;
    ts.ordered_accumulation = cfg->comm.deterministic; /* one rank: micro-batches added as the chain adds ranks */
    fault_injection injection;
    parse_fault_injection(&ts, rank, fs != NULL, &injection);

    char checkpoint_path[4200], sharded_path[4200];
    snprintf(checkpoint_path, sizeof checkpoint_path, "%s/checkpoint.safetensors", cfg->train.run_dir);
    snprintf(sharded_path, sizeof sharded_path, "%s/checkpoint.sharded", cfg->train.run_dir);
    long step = 0;
    if (opt && opt->resume) {
        const char *from = strcmp(opt->resume, "auto") == 0 ? resume_auto(checkpoint_path, sharded_path) : opt->resume;
        step = load_checkpoint(from, &ts, td, comm, rank);
        if (step > cfg->train.steps)
            RANKS_STOP(comm, "train.steps at least the step of the checkpoint resumed from",
                       "raise train.steps (--set train.steps=N) to train on from the checkpoint, or resume from an "
                       "earlier one; a run does not go back",
                       "'%s' is at step %ld, train.steps is %ld: there is nothing to train", from, step,
                       cfg->train.steps);
        if (rank == 0 && step == cfg->train.steps) /* even when quiet: a run that trains nothing says so */
            printf("resumed from %s at step %ld, which is train.steps: the run is already complete, nothing to "
                   "train (raise train.steps to train further)\n", from, step);
        else if (!quiet) printf("resumed from %s at step %ld\n", from, step);
    }

    ev_writer *ev = step > 0 ? ev_open_append(cfg->train.run_dir, rank) : ev_open(cfg->train.run_dir, rank);
    cJSON *config_tree = config_to_json(cfg);
    char *config_json = cJSON_PrintUnformatted(config_tree);
    cJSON_Delete(config_tree);
    ev_begin(ev, "run");
    ev_str(ev, "name", cfg->train.run_name);
    ev_int(ev, "world", cfg->world);
    ev_num(ev, "wall", mp_elapsed_origin_wall());
    ev_int(ev, "params", (long long)model_num_params_unpadded(m));
    ev_int(ev, "resumed_at", step);
    emit_plan(ev, cfg, &mc);
    ev_object_begin(ev, "precision");
    ev_str(ev, "recipe", amp_recipe_get(precision.recipe)->name);
    ev_str(ev, "source", precision.source);
    ev_str(ev, "scaler", amp_scaler_kind_get(precision.scaler.kind)->name);
    ev_num(ev, "init_scale", precision.scaler.kind == AMP_SCALER_NONE ? 1 : precision.scaler.init_scale);
    ev_str(ev, "compute", model_compute_name(model_get_compute(m)));
    ev_str(ev, "matmul", precision_matmul_path(m));
    ev_object_end(ev);
    if (world > 1) {
        ev_object_begin(ev, "data_parallel");
        ev_int(ev, "bucket_elems", (long long)cfg->zero.reduce_bucket_size);
        ev_bool(ev, "overlap", cfg->zero.overlap_comm && comm_thread_safe_serialized(comm));
        ev_str(ev, "hook", ddp_hook_names[cfg->comm.hook]);
        if (cfg->comm.fusion) ev_int(ev, "fusion_threshold", (long long)cfg->comm.fusion_threshold);
        ev_int(ev, "zero_stage", zr ? zero_stage(zr) : fs ? 3 : 0);
        if (fs) {
            ev_str(ev, "fsdp", fsdp_strategy_names[cfg->fsdp.sharding_strategy]);
            ev_int(ev, "shard_size", fsdp_shard_size(fs));
        }
        ev_str(ev, "backend", comm_backend_name(comm));
        ev_object_end(ev);
    }
    ev_object_begin(ev, "data");
    ev_str(ev, "sampler", cfg->data.sampler == DATA_SAMPLER_GLOBAL ? "global" : "distributed");
    ev_int(ev, "batches_per_epoch", (long long)train_data_batches_per_epoch(td));
    ev_object_end(ev);
    ev_json(ev, "config", config_json);
    ev_end(ev);
    free(config_json);
    /* After the run header, so it stays the first line; DDP's comm events go to the same file. */
    ddp *dp = NULL;
    if (fs) fsdp_set_events(fs, cfg->train.run_dir);
    if (world > 1 && !fs) {
        /* deterministic: the chain allreduce adds the ranks' gradients in rank order, the same bits every run */
        ddp_options dopt = {.bucket_elems = (size_t)cfg->zero.reduce_bucket_size,
                            .algo = cfg->comm.deterministic ? COMM_ALGO_CHAIN : COMM_ALGO_DEFAULT,
                            .overlap = cfg->zero.overlap_comm, .events_dir = cfg->train.run_dir,
                            .hook = {.kind = (ddp_hook_kind)cfg->comm.hook, .topk_ratio = cfg->comm.topk_ratio,
                                     .powersgd_rank = cfg->comm.powersgd_rank, .seed = cfg->train.seed},
                            .fusion = cfg->comm.fusion, .fusion_elems = (size_t)(cfg->comm.fusion_threshold / sizeof(float))};
        if (zr) { /* DDP's buckets, reduce-scattered into shards instead of allreduced */
            dopt.bucket_elems = zero_bucket_elems(zr);
            dopt.reduce_bucket = zero_reduce_bucket;
            dopt.reduce_ctx = zr;
        }
        dp = ddp_create(m, comm, &dopt, config_hash(cfg));
        ts.ddp = dp;
        if (zero2) zero_shard_gradients(zr, dp); /* wraps DDP's hooks */
    }
    ev_mem(ev, step);

    char summary_line[256];
    optim_config_format(&cfg->optimizer, summary_line, sizeof summary_line);
    if (!quiet) {
        printf("model: %s, %zu parameters (L=%d, C=%d, heads %d/%d, context %d, vocab %d)\n", model_arch_name(mc.arch),
               model_num_params_unpadded(m), mc.L, mc.C, mc.NH, mc.KVH, mc.maxT, mc.V);
        printf("data: %s, %llu training tokens, %llu validation; batch %d x %d tokens x %d accumulation = %d tokens "
               "per step\n", cfg->data.dataset, (unsigned long long)train_tokens->token_count,
               (unsigned long long)val_tokens->token_count, B, T, accum, B * T * accum);
        char sampler_line[256];
        train_data_describe(td, sampler_line, sizeof sampler_line);
        printf("sampler: %s\n", sampler_line);
        printf("optimizer: %s; gradient clipping %g; %d threads%s\n", summary_line, cfg->gradient_clipping,
               omp_get_max_threads(), world > 1 ? " per rank" : "");
        if (precision.recipe != AMP_RECIPE_FP32) {
            char scale[64] = "";
            if (precision.scaler.kind != AMP_SCALER_NONE)
                snprintf(scale, sizeof scale, " from %g", precision.scaler.init_scale);
            printf("precision: %s (%s); loss scaler %s%s; matmuls %s\n", amp_recipe_get(precision.recipe)->name,
                   precision.source, amp_scaler_kind_get(precision.scaler.kind)->name, scale, precision_matmul_path(m));
        }
        if (fs)
            printf("%s: %d ranks (%s), shards of %d ranks, %zu parameters per rank, forward prefetch %s, backward "
                   "prefetch %s, overlap %s\n",
                   cfg->zero.stage == 3 ? "ZeRO stage 3 (FSDP FULL_SHARD)" : fsdp_strategy_names[cfg->fsdp.sharding_strategy],
                   world, comm_backend_name(comm), fsdp_shard_size(fs), fsdp_shard_elems(fs),
                   cfg->fsdp.forward_prefetch ? "on" : "off", cfg->fsdp.backward_prefetch == 0 ? "on" : "off",
                   cfg->zero.overlap_comm ? "on" : "off");
        else if (world > 1)
            printf("data parallel: %d ranks (%s), %s of %zu %s, overlap %s, hook %s, ZeRO stage %d%s\n",
                   world, comm_backend_name(comm), cfg->comm.fusion ? "Horovod tensor fusion, buffers" : "buckets",
                   cfg->comm.fusion ? (size_t)cfg->comm.fusion_threshold : (size_t)cfg->zero.reduce_bucket_size,
                   cfg->comm.fusion ? "bytes" : "elements",
                   cfg->zero.overlap_comm ? "on" : "off", zr ? "reduce-scatter" : ddp_hook_names[cfg->comm.hook],
                   cfg->zero.stage, zr ? " (optimizer state sharded)" : "");
        else if (cfg->zero.stage > 0 || cfg->fsdp.enabled)
            printf("%s on one rank: nothing to shard, %s\n", cfg->fsdp.enabled ? "FSDP" : "ZeRO",
                   offload ? "ZeRO-Offload of the whole model" : "plain training");
        if (offload) print_offload(&ts, world);
        printf("run: %s (events, %s)\n", cfg->train.run_dir,
               zr || fs ? "checkpoint.sharded/: a shard per rank, resumable on any world size" : "checkpoint");
        if (cfg->train.sample_interval > 0 && step == 0 && !fs) print_sample(m, &tok, cfg, 0, true);
    }
    bool all_sample = fs && !(opt && opt->quiet); /* FSDP: every rank generates alongside rank 0 */
    if (all_sample && cfg->train.sample_interval > 0 && step == 0) print_sample(m, &tok, cfg, 0, rank == 0);

    size_t per_step = (size_t)accum * B * T;
    int *inputs = malloc(per_step * sizeof(int)), *targets = malloc(per_step * sizeof(int));
    MP_ASSERT(inputs && targets, "out of memory");
    fp_hist *act_hists = calloc((size_t)mc.L + 2, sizeof *act_hists);
    MP_ASSERT(act_hists, "out of memory");
    train_profile *profile = cfg->train.profile ? train_profile_start(cfg->train.run_dir, rank, world, &mc, T,
                                                                      (double)B * T * accum, model_products_kernel16(m))
                                                : NULL;
    double t_start = mp_now(), recent = 0;
    bool hash_params = getenv("MIXPAR_PARAM_HASH") != NULL;
    long first = step, skipped_in_a_row = 0;
    for (; step < cfg->train.steps; step++) {
        double t_data = mp_elapsed(); /* getting the step's batches: a read, or a wait for the prefetch workers */
        for (int k = 0; k < accum; k++) {
            train_data_next(td, inputs + (size_t)k * B * T, targets + (size_t)k * B * T);
        }
        double t_data_end = mp_elapsed();
        double lr = lr_schedule_at(&cfg->scheduler, step);
        /* Activation histograms are taken during a histogram step's forward passes. */
        long next = step + 1;
        bool hist_step = cfg->train.hist_interval > 0 && (next % cfg->train.hist_interval == 0 || step == first);
        if (hist_step) {
            for (int l = 0; l < mc.L + 2; l++) fp_hist_clear(&act_hists[l]);
            model_collect_act_hist(m, act_hists);
        }
        double t0 = mp_elapsed(), cpu0 = process_cpu_s();
        comm_stats_t cs0 = {0};
        if (comm) comm_stats(comm, &cs0);
        inject_before_step(&injection, &ts, step);
        train_profile_step_begin(profile);
        train_step_result r = train_step_run(&ts, inputs, targets, B, T, accum, lr);
        train_profile_step_end(profile);
        if (comm && world > 1) /* report the loss of the global batch: the mean of the ranks' means */
            comm_allreduce(comm, &r.loss, &r.loss, 1, COMM_FP32, COMM_AVG, COMM_ALGO_NATIVE);
        double t1 = mp_elapsed(), dt = t1 - t0, cpu = process_cpu_s() - cpu0;
        recent = step == first ? dt : 0.9 * recent + 0.1 * dt;
        bool skipped = r.skipped;
        if (step == first) sum.first_loss = r.loss;
        sum.last_loss = r.loss;

        ev_begin(ev, "step");
        ev_int(ev, "step", step + 1);
        ev_num(ev, "loss", r.loss);
        ev_num(ev, "lr", lr);
        ev_num(ev, "grad_norm", r.grad_norm);
        ev_num(ev, "scale", r.update.scale);
        ev_bool(ev, "skipped", skipped);
        if (ts.amp) {
            ev_num(ev, "next_scale", r.update.next_scale);
            ev_bool(ev, "found_inf_local", r.found_inf_local);
            ev_int(ev, "skipped_total", ts.scaler.skipped);
        }
        ev_num(ev, "tokens_per_s", per_step / dt);
        ev_num(ev, "cpu_s", cpu);
        if (comm && world > 1) { /* how often this rank's waits found nothing done, and how many of those slept */
            comm_stats_t cs1;
            comm_stats(comm, &cs1);
            ev_int(ev, "idle_polls", (long long)(cs1.idle_polls - cs0.idle_polls));
            ev_int(ev, "sleeps", (long long)(cs1.sleeps - cs0.sleeps));
        }
        if (fs) { /* what this rank sent gathering weights and reducing gradients in this step */
            fsdp_stats fst;
            fsdp_get_stats(fs, &fst);
            ev_int(ev, "comm_bytes", (long long)(fst.gather_bytes + fst.reduce_bytes));
            ev_int(ev, "gather_bytes", (long long)fst.gather_bytes);
            ev_int(ev, "reduce_bytes", (long long)fst.reduce_bytes);
        }
        if (dp) { /* bytes this rank sent averaging this step's gradients (the hook's, from comm_stats) */
            ddp_stats ds;
            ddp_get_stats(dp, &ds);
            /* ZeRO adds the parameters' all-gather after the update */
            ev_int(ev, "comm_bytes", (long long)(ds.bytes_sent + (zr && !skipped ? zero_allgather_bytes(zr) : 0)));
        }
        if (offload) { /* what crossed between device and host memory this step, and what it cost */
            ev_object_begin(ev, "offload");
            ev_int(ev, "d2h_bytes", (long long)r.offload.d2h_bytes);
            ev_int(ev, "h2d_bytes", (long long)r.offload.h2d_bytes);
            ev_num(ev, "copy_s", r.offload.copy_s);
            ev_num(ev, "update_s", r.offload.update_s);
            ev_object_end(ev);
        }
        if (hash_params && !fs) { /* replicas must stay bit-identical: tests compare this across ranks */
            char hex[24];
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)params_hash(m));
            ev_str(ev, "param_hash", hex);
        }
        if (hash_params) {
            char hex[24];
            snprintf(hex, sizeof hex, "%016llx",
                     (unsigned long long)fnv1a(inputs, (size_t)accum * B * T * sizeof *inputs));
            ev_str(ev, "batch_hash", hex);
        }
        ev_end(ev);
        /* Forward and backward end where the last backward did (with one micro-batch, both spans are the real ones;
         * with several, each holds the micro-batches' total time, ending there); the optimizer ends with the step. */
        const double backward_start = r.backward_end - r.t_backward;
        const struct { const char *name; double a, b; } spans[] = {
            {"data", t_data, t_data_end}, {"forward", backward_start - r.t_forward, backward_start},
            {"backward", backward_start, r.backward_end}, {"optimizer", t1 - r.t_optimizer, t1}};
        for (int i = 0; i < 4; i++) {
            ev_begin(ev, "span");
            ev_str(ev, "name", spans[i].name);
            ev_int(ev, "step", step + 1);
            ev_num(ev, "t0", spans[i].a);
            ev_num(ev, "t1", spans[i].b);
            ev_end(ev);
        }

        long done = step + 1;
        bool log_now = !quiet && cfg->train.log_interval > 0 &&
                       (done % cfg->train.log_interval == 0 || done == first + 1 || done == cfg->train.steps);
        if (log_now) {
            char elapsed[32], eta[32];
            format_duration(mp_now() - t_start, elapsed, sizeof elapsed);
            format_duration(recent * (double)(cfg->train.steps - done), eta, sizeof eta);
            char scale[48] = "";
            if (ts.amp && ts.scaler.cfg.kind != AMP_SCALER_NONE) snprintf(scale, sizeof scale, " | scale %g", r.update.scale);
            double rate = per_step / dt; /* whole tokens, or two decimals when a step makes fewer than 100 */
            printf("step %5ld/%ld | loss %.4f | lr %.2e | norm %6.3f%s%s | %7.*f tok/s | %s elapsed | ETA %s\n", done,
                   cfg->train.steps, r.loss, lr, r.grad_norm, skipped ? " (skipped: not finite)" : "", scale,
                   rate < 100 ? 2 : 0, rate, elapsed, eta);
            fflush(stdout);
        }
        if (cfg->train.log_interval > 0 && done % cfg->train.log_interval == 0) ev_mem(ev, done);
        /* Under ZeRO only this rank's shard of the gradient buffer is averaged: no histograms of the rest. */
        bool hist_now = cfg->train.hist_interval > 0 && (done % cfg->train.hist_interval == 0 || done == first + 1);
        if (!zr && !fs && hist_now) emit_gradient_histograms(ev, m, done, r.update.scale);
        if (hist_now && ts.amp) emit_rounding(ev, m, done);
        if (hist_step) {
            for (int l = 0; l < mc.L + 2; l++) emit_hist(ev, done, "act", l - 1, &act_hists[l], 1.0f);
            model_collect_act_hist(m, NULL);
        }
        skipped_in_a_row = skipped ? skipped_in_a_row + 1 : 0;
        step_facts facts = {.inputs = inputs, .targets = targets, .B = B, .T = T, .accum = accum, .start_step = first,
                            .skipped_in_a_row = skipped_in_a_row,
                            .max_skipped_in_a_row = cfg->train.max_consecutive_skips};
        stop_on_nonfinite(ev, &ts, &r, done, lr, &facts, comm, rank); /* its forward again sees the injection */
        inject_after_step(&injection, &ts, step);
        if (skipped) diagnose_skip(ev, &ts, &r, done, lr, quiet);
        if (cfg->train.eval_interval > 0 && (done % cfg->train.eval_interval == 0 || done == cfg->train.steps)) {
            sum.last_val_loss = evaluate(m, &vl, cfg->train.eval_batches);
            ev_begin(ev, "eval");
            ev_int(ev, "step", done);
            ev_num(ev, "val_loss", sum.last_val_loss);
            ev_end(ev);
            if (!quiet) printf("eval at step %ld: validation loss %.4f\n", done, sum.last_val_loss);
        }
        if ((fs ? all_sample : !quiet) && cfg->train.sample_interval > 0 &&
            (done % cfg->train.sample_interval == 0 || done == cfg->train.steps))
            print_sample(m, &tok, cfg, done, !quiet);
        bool checkpoint_now = cfg->train.checkpoint_interval > 0 &&
                              (done % cfg->train.checkpoint_interval == 0 || done == cfg->train.steps);
        if (checkpoint_now && (rank == 0 || zr || fs))
            save_checkpoint(checkpoint_path, sharded_path, &ts, cfg, done, td, ev, rank, comm);
    }
    sum.steps_done = step - first;
    sum.seconds = mp_now() - t_start;
    ev_mem(ev, step);
    if (!quiet && sum.steps_done > 0)
        printf("trained %ld steps in %.1f s: loss %.4f -> %.4f%s\n", sum.steps_done, sum.seconds, sum.first_loss,
               sum.last_loss, cfg->train.checkpoint_interval > 0 ? "; checkpoint in the run folder" : "");

    train_profile_finish(profile);
    ddp_free(dp);
    zero_free(zr);
    fsdp_free(fs);
    ev_close(ev);
    free(inputs);
    free(targets);
    free(act_hists);
    train_step_free(&ts);
    model_free(m);
    train_data_free(td);
    loader_free(&vl);
    tokenizer_free(&tok);
    tokfile_close(train_tokens);
    tokfile_close(val_tokens);
    return sum;
}
