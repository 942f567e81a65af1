/* model.c: GPT-2 and LLaMA-style decoders: the parameter registry, initialisation, forward and backward. */
#include "model/model.h"
#include "model/model_internal.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/mem.h"
#include "base/rng.h"
#include "fp/hist.h"
#include "ops/attention.h"
#include "ops/crossentropy.h"
#include "ops/encoder.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"
#include "prof/kernel_costs.h"
#include "ops/residual.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ config */

static const char *const arch_names[] = {[MODEL_GPT2] = "gpt2", [MODEL_LLAMA] = "llama"};

const char *model_arch_name(model_arch arch) { return arch == MODEL_LLAMA ? "llama" : "gpt2"; }

int model_arch_from_name(const char *name) {
    for (int a = 0; a < 2; a++)
        if (strcmp(name, arch_names[a]) == 0) return a;
    return -1;
}

void model_config_complete(model_config *cfg) {
    if (cfg->arch != MODEL_GPT2 && cfg->arch != MODEL_LLAMA)
        MP_FAIL("model.arch gpt2 or llama", "architecture number %d", (int)cfg->arch);
    struct { const char *key; int value; int min; } sizes[] = {
        {"model.vocab", cfg->V, 2}, {"model.context", cfg->maxT, 1}, {"model.layers", cfg->L, 1},
        {"model.channels", cfg->C, 2}, {"model.heads", cfg->NH, 1}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].value < sizes[i].min || sizes[i].value > (1 << 24))
            MP_FAIL("a model size from its minimum to 2^24", "%s = %d", sizes[i].key, sizes[i].value);
    if (cfg->C % cfg->NH != 0)
        MP_FAIL_HINT("model.heads dividing model.channels", "choose heads so that channels / heads is whole",
                     "channels %d, heads %d", cfg->C, cfg->NH);
    if (cfg->KVH == 0) cfg->KVH = cfg->NH;
    if (cfg->KVH < 1 || cfg->NH % cfg->KVH != 0)
        MP_FAIL("model.kv_heads dividing model.heads", "heads %d, kv_heads %d", cfg->NH, cfg->KVH);
    if (cfg->arch == MODEL_GPT2 && cfg->KVH != cfg->NH)
        MP_FAIL_HINT("kv_heads equal to heads for gpt2", "grouped-query attention is a llama-style feature",
                     "heads %d, kv_heads %d", cfg->NH, cfg->KVH);
    if (cfg->arch == MODEL_LLAMA && (cfg->C / cfg->NH) % 2 != 0)
        MP_FAIL("an even head size for rotary embeddings", "head size %d", cfg->C / cfg->NH);
    if (cfg->F == 0) cfg->F = cfg->arch == MODEL_GPT2 ? 4 * cfg->C : ((8 * cfg->C / 3 + 63) / 64) * 64;
    if (cfg->F < 1) MP_FAIL("model.ffn >= 1", "%d", cfg->F);
    /* Padding the vocabulary to a multiple of 64 keeps the head's matmul on whole SIMD tiles (GPT-2:
     * 50257 -> 50304); the padded rows stay zero and their logits are ignored. */
    if (cfg->Vp == 0) cfg->Vp = cfg->V >= 1024 ? (cfg->V + 63) / 64 * 64 : cfg->V;
    if (cfg->Vp < cfg->V) MP_FAIL("model.padded_vocab >= model.vocab", "padded %d < vocab %d", cfg->Vp, cfg->V);
    if (cfg->norm_eps <= 0) cfg->norm_eps = 1e-5f;
    if (cfg->rope_theta <= 0) cfg->rope_theta = 10000.0f;
}

/* ------------------------------------------------------------------ the registry, as tables */

/* Sizes a tensor's dimensions can take. */
typedef enum { INIT_ZERO, INIT_ONE, INIT_NORMAL, INIT_RESIDUAL } init_kind;
enum { FOR_GPT2 = 1, FOR_LLAMA = 2, FOR_BOTH = 3 };
/* How tensor parallel splits a tensor (model.h): not at all; rows of the local heads' q, k and v
 * (column-parallel qkv); rows of the local MLP columns (column-parallel fc; llama's gate and up parts
 * each); input columns (row-parallel attproj, fcproj); vocabulary rows (wte, head). */
typedef enum { SPLIT_NONE, SPLIT_QKV_ROWS, SPLIT_FC_ROWS, SPLIT_COLS, SPLIT_VOCAB_ROWS } split_kind;

typedef struct {
    const char *name;
    size_t field; /* offset of the pointer in layer_params or global_params */
    dim_kind rows, cols;
    unsigned archs;
    init_kind init;
    split_kind split; /* under tensor parallel */
    bool seq_partial; /* under sequence parallel its gradient comes from this rank's tokens: summed over tp */
} tensor_spec;

#define LAYER_FIELD(f) offsetof(layer_params, f)
#define GLOBAL_FIELD(f) offsetof(global_params, f)
/* One block: "norm 1, attention, norm 2, MLP". For llama the norms are RMSNorm gains (no bias) and fcw
 * holds the SwiGLU gate and up projections stacked, (2F, C). */
static const tensor_spec layer_specs[] = {
    {"ln1w", LAYER_FIELD(ln1w), DIM_C, DIM_NONE, FOR_BOTH, INIT_ONE, SPLIT_NONE, true},
    {"ln1b", LAYER_FIELD(ln1b), DIM_C, DIM_NONE, FOR_GPT2, INIT_ZERO, SPLIT_NONE, true},
    {"qkvw", LAYER_FIELD(qkvw), DIM_QKV, DIM_C, FOR_BOTH, INIT_NORMAL, SPLIT_QKV_ROWS, false},
    {"qkvb", LAYER_FIELD(qkvb), DIM_QKV, DIM_NONE, FOR_GPT2, INIT_ZERO, SPLIT_QKV_ROWS, false},
    {"attprojw", LAYER_FIELD(attprojw), DIM_C, DIM_ATT, FOR_BOTH, INIT_RESIDUAL, SPLIT_COLS, false},
    {"attprojb", LAYER_FIELD(attprojb), DIM_C, DIM_NONE, FOR_GPT2, INIT_ZERO, SPLIT_NONE, false},
    {"ln2w", LAYER_FIELD(ln2w), DIM_C, DIM_NONE, FOR_BOTH, INIT_ONE, SPLIT_NONE, true},
    {"ln2b", LAYER_FIELD(ln2b), DIM_C, DIM_NONE, FOR_GPT2, INIT_ZERO, SPLIT_NONE, true},
    {"fcw", LAYER_FIELD(fcw), DIM_FC_IN, DIM_C, FOR_BOTH, INIT_NORMAL, SPLIT_FC_ROWS, false},
    {"fcb", LAYER_FIELD(fcb), DIM_FC_IN, DIM_NONE, FOR_GPT2, INIT_ZERO, SPLIT_FC_ROWS, false},
    {"fcprojw", LAYER_FIELD(fcprojw), DIM_C, DIM_F, FOR_BOTH, INIT_RESIDUAL, SPLIT_COLS, false},
    {"fcprojb", LAYER_FIELD(fcprojb), DIM_C, DIM_NONE, FOR_GPT2, INIT_ZERO, SPLIT_NONE, false},
};
enum { NLAYER_SPECS = sizeof layer_specs / sizeof layer_specs[0] };

static const tensor_spec embedding_specs[] = {
    {"wte", GLOBAL_FIELD(wte), DIM_VP, DIM_C, FOR_BOTH, INIT_NORMAL, SPLIT_VOCAB_ROWS, false},
    {"wpe", GLOBAL_FIELD(wpe), DIM_MAXT, DIM_C, FOR_GPT2, INIT_NORMAL, SPLIT_NONE, false},
};
static const tensor_spec top_specs[] = {
    {"lnfw", GLOBAL_FIELD(lnfw), DIM_C, DIM_NONE, FOR_BOTH, INIT_ONE, SPLIT_NONE, true},
    {"lnfb", GLOBAL_FIELD(lnfb), DIM_C, DIM_NONE, FOR_GPT2, INIT_ZERO, SPLIT_NONE, true},
    {"head", GLOBAL_FIELD(head), DIM_VP, DIM_C, FOR_BOTH, INIT_NORMAL, SPLIT_VOCAB_ROWS, false}, /* only when untied */
};

int model_dim_size(const model_config *c, dim_kind d) {
    int HS = c->C / c->NH;
    switch (d) {
    case DIM_C: return c->C;
    case DIM_QKV: return (c->NH + 2 * c->KVH) * HS;
    case DIM_FC_IN: return c->arch == MODEL_LLAMA ? 2 * c->F : c->F;
    case DIM_F: return c->F;
    case DIM_VP: return c->Vp;
    case DIM_MAXT: return c->maxT;
    case DIM_ATT: return c->NH * HS;
    default: return 0;
    }
}

/* ------------------------------------------------------------------ shards (model.h: model parallelism) */

model_shard model_shard_whole(const model_config *cfg) {
    return (model_shard){.tp_rank = 0, .tp_size = 1, .first = 0, .last = cfg->L};
}

void model_shard_check(const model_config *c, const model_shard *sh) {
    int tp = sh->tp_size;
    if (tp < 1 || sh->tp_rank < 0 || sh->tp_rank >= tp)
        MP_FAIL("a tensor parallel rank in [0, tensor_model_parallel_size)", "tp rank %d of %d", sh->tp_rank, tp);
    struct {
        const char *key;
        int n;
        const char *hint;
    } split[] = {
        {"model.heads", c->NH, "attention is split by heads: choose a tensor parallel size that divides the heads"},
        {"model.kv_heads", c->KVH, "key/value heads are split too (a query head and its kv head share a rank): "
                                   "choose a tensor parallel size that divides kv_heads"},
        {"model.ffn", c->F, "the MLP is split by hidden columns: choose a tensor parallel size that divides ffn"},
        {"model.padded_vocab", c->Vp, "the vocabulary is split by rows: set model.padded_vocab to a multiple of "
                                      "tensor_model_parallel_size"},
    };
    for (size_t i = 0; i < sizeof split / sizeof split[0]; i++)
        if (split[i].n % tp != 0)
            MP_FAIL_HINT("a tensor parallel size dividing every split dimension", split[i].hint,
                         "%s = %d is not divisible by tensor_model_parallel_size = %d", split[i].key, split[i].n, tp);
    MP_ASSERT(!sh->sequence_parallel || tp == 1 || (sh->seq_gather && sh->seq_reduce_scatter),
              "a sequence-parallel shard without its all-gather and reduce-scatter");
    if (sh->first < 0 || sh->last > c->L || sh->first >= sh->last)
        MP_FAIL_HINT("a pipeline stage of at least one block inside [0, model.layers)",
                     "use no more pipeline stages than model.layers", "blocks [%d, %d) of %d", sh->first, sh->last,
                     c->L);
}

/* The sizes a shard computes with. */
static model_dims dims_of(const model_config *c, const model_shard *sh) {
    int tp = sh->tp_size, HS = c->C / c->NH;
    model_dims d = {.NH = c->NH / tp, .KVH = c->KVH / tp, .HS = HS, .F = c->F / tp, .Vp = c->Vp / tp,
                    .first = sh->first, .last = sh->last, .embed = sh->first == 0, .head = sh->last == c->L};
    d.QKV = (d.NH + 2 * d.KVH) * HS;
    d.ATT = d.NH * HS;
    d.FC = c->arch == MODEL_LLAMA ? 2 * d.F : d.F;
    d.v0 = sh->tp_rank * d.Vp;
    d.seq_split = sh->sequence_parallel && tp > 1 ? tp : 1;
    d.seq_rank = d.seq_split > 1 ? sh->tp_rank : 0;
    return d;
}

static void describe(model *m, const model_config *cfg, const model_shard *sh);

/* A tensor's rows and columns on this shard. */
static int local_rows(const model *m, const tensor_spec *s) {
    switch (s->split) {
    case SPLIT_QKV_ROWS: return m->dims.QKV;
    case SPLIT_FC_ROWS: return m->dims.FC;
    case SPLIT_VOCAB_ROWS: return m->dims.Vp;
    default: return model_dim_size(&m->cfg, s->rows);
    }
}
static int local_cols(const model *m, const tensor_spec *s) {
    int cols = model_dim_size(&m->cfg, s->cols);
    return s->split == SPLIT_COLS ? cols / m->shard.tp_size : cols;
}

/* The rows of the whole tensor a shard keeps, as runs (start, n), in the order it stacks them. */
typedef struct {
    int start, n;
} row_run;
static int split_rows(const model *m, split_kind split, int rows, row_run out[3]) {
    const model_config *c = &m->cfg;
    const model_dims *d = &m->dims;
    int t = m->shard.tp_rank, HS = d->HS;
    switch (split) {
    case SPLIT_QKV_ROWS: /* q of the local heads, then their k, then their v */
        out[0] = (row_run){t * d->NH * HS, d->NH * HS};
        out[1] = (row_run){c->NH * HS + t * d->KVH * HS, d->KVH * HS};
        out[2] = (row_run){(c->NH + c->KVH) * HS + t * d->KVH * HS, d->KVH * HS};
        return 3;
    case SPLIT_FC_ROWS: /* gpt2: the local hidden columns; llama: those of the gate, then of the up part */
        out[0] = (row_run){t * d->F, d->F};
        if (c->arch != MODEL_LLAMA) return 1;
        out[1] = (row_run){c->F + t * d->F, d->F};
        return 2;
    case SPLIT_VOCAB_ROWS: out[0] = (row_run){d->v0, d->Vp}; return 1;
    default: out[0] = (row_run){0, rows}; return 1;
    }
}

/* This shard's slice of a whole tensor's values: full (rows, cols) -> local. */
static void take_slice(const model *m, split_kind split, const model_tensor *whole, const float *full, float *local) {
    int rows = whole->shape[0], cols = whole->ndim == 2 ? whole->shape[1] : 1;
    int nc = split == SPLIT_COLS ? cols / m->shard.tp_size : cols, c0 = split == SPLIT_COLS ? m->shard.tp_rank * nc : 0;
    row_run runs[3];
    int nruns = split_rows(m, split, rows, runs);
    size_t at = 0;
    for (int r = 0; r < nruns; r++)
        for (int row = runs[r].start; row < runs[r].start + runs[r].n; row++, at += (size_t)nc)
            memcpy(local + at, full + (size_t)row * cols + c0, (size_t)nc * sizeof(float));
}

static const tensor_spec *spec_of(const model_tensor *t);
static void build_registry(model *m, bool count_only);

/* The whole model's registry from a config alone (no buffers): what a checkpoint of any mesh maps to. */
model_tensor *model_whole_registry(const model_config *cfg, int *count) {
    model whole = {0};
    describe(&whole, cfg, NULL);
    build_registry(&whole, true);
    whole.tensors = calloc((size_t)whole.ntensors, sizeof *whole.tensors);
    MP_ASSERT(whole.tensors, "out of memory");
    build_registry(&whole, false);
    *count = whole.ntensors;
    return whole.tensors;
}

static const char *const split_names[] = {[SPLIT_NONE] = "replicated", [SPLIT_QKV_ROWS] = "qkv_head_rows",
                                          [SPLIT_FC_ROWS] = "ffn_rows", [SPLIT_COLS] = "cols",
                                          [SPLIT_VOCAB_ROWS] = "vocab_rows"};

const char *model_tensor_split_name(const model_tensor *t) {
    const tensor_spec *s = spec_of(t);
    return split_names[s ? s->split : SPLIT_NONE];
}

size_t model_tensor_whole_runs(const model *m, const model_tensor *t, size_t *start, size_t *len) {
    const tensor_spec *s = spec_of(t);
    split_kind split = s && m->shard.tp_size > 1 ? s->split : SPLIT_NONE;
    if (split == SPLIT_NONE) {
        if (start) start[0] = 0, len[0] = t->size;
        return 1;
    }
    int rows = model_dim_size(&m->cfg, s->rows), cols = t->ndim == 2 ? model_dim_size(&m->cfg, s->cols) : 1;
    int nc = split == SPLIT_COLS ? cols / m->shard.tp_size : cols, c0 = split == SPLIT_COLS ? m->shard.tp_rank * nc : 0;
    row_run runs[3];
    int nruns = split_rows(m, split, rows, runs);
    size_t k = 0;
    for (int r = 0; r < nruns; r++) {
        if (split != SPLIT_COLS) { /* whole rows: one run of rows x cols */
            if (start) start[k] = (size_t)runs[r].start * cols, len[k] = (size_t)runs[r].n * cols;
            k++;
            continue;
        }
        for (int row = runs[r].start; row < runs[r].start + runs[r].n; row++, k++)
            if (start) start[k] = (size_t)row * cols + c0, len[k] = (size_t)nc;
    }
    return k;
}

/* ------------------------------------------------------------------ activation checkpointing */

const char *const model_recompute_names[] = {[MODEL_RECOMPUTE_NONE] = "none", [MODEL_RECOMPUTE_EVERY] = "every",
                                             [MODEL_RECOMPUTE_EVERY_K] = "every_k",
                                             [MODEL_RECOMPUTE_SELECTIVE] = "selective", NULL};

const char *model_recompute_name(model_recompute r) {
    return r >= 0 && r < MODEL_NRECOMPUTES ? model_recompute_names[r] : "?";
}

int model_recompute_from_name(const char *name) {
    for (int r = 0; r < MODEL_NRECOMPUTES; r++)
        if (strcmp(name, model_recompute_names[r]) == 0) return r;
    return -1;
}

model_keep model_block_keeps(model_recompute policy, int k, int layer) {
    /* No recompute needs no lab 18 code: the default path runs before lab 18 is done. */
    if (policy == MODEL_RECOMPUTE_NONE) return MODEL_KEEP_ALL;
    MP_ASSERT(policy > 0 && policy < MODEL_NRECOMPUTES && layer >= 0 && (policy != MODEL_RECOMPUTE_EVERY_K || k >= 1),
              "recompute policy %d, k %d, layer %d", (int)policy, k, layer);
    /* LAB 18 BEGIN which blocks keep their activations under a policy: every block, every k-th block, selective */
    switch (policy) {
    case MODEL_RECOMPUTE_EVERY: return MODEL_KEEP_INPUT;
    case MODEL_RECOMPUTE_EVERY_K: return layer % k == 0 ? MODEL_KEEP_INPUT : MODEL_KEEP_ALL; /* blocks 0, k, 2k... */
    case MODEL_RECOMPUTE_SELECTIVE: return MODEL_KEEP_NO_SCORES;
    default: return MODEL_KEEP_ALL;
    }
    /* LAB 18 END */
}

/* ------------------------------------------------------------------ activations */

/* The sizes an activation tensor can have, in floats for a (B,T) batch. */
typedef enum { ACT_NC, ACT_STATS, ACT_ROWS, ACT_QKV, ACT_SCORES, ACT_FC_IN, ACT_F, ACT_ATT } act_size;

/* Sizes are this shard's (d): its heads, MLP columns (the whole model's when it is not a shard); the
 * residual stream's tensors and the norms' statistics its slice of the sequence under sequence parallel. */
static size_t act_floats(const model_config *c, const model_dims *d, int B, int T, act_size size) {
    size_t N = (size_t)B * T, Nl = (size_t)B * (T / d->seq_split);
    switch (size) {
    case ACT_NC: return Nl * c->C;
    case ACT_STATS: return c->arch == MODEL_GPT2 ? Nl : 0; /* LayerNorm's mean; RMSNorm keeps none */
    case ACT_ROWS: return Nl;
    case ACT_QKV: return N * d->QKV;
    case ACT_SCORES: return (size_t)B * d->NH * T * T;
    case ACT_FC_IN: return N * d->FC;
    case ACT_F: return N * d->F;
    case ACT_ATT: return N * d->ATT;
    }
    return 0;
}

/* What a block keeps for backward (layer_acts), in forward order, and what each tensor is to a recompute
 * policy: `boundary` marks the block's output on the residual stream (kept under every policy: it is the
 * next block's input, or the final norm's), `scores` the attention probabilities (what selective drops). */
typedef struct {
    size_t field; /* offset of the pointer in layer_acts */
    act_size size;
    bool boundary, scores;
} act_spec;
#define ACT_FIELD(f) offsetof(layer_acts, f)
static const act_spec layer_act_specs[] = {
    {ACT_FIELD(ln1), ACT_NC, false, false},      {ACT_FIELD(ln1_mean), ACT_STATS, false, false},
    {ACT_FIELD(ln1_rstd), ACT_ROWS, false, false}, {ACT_FIELD(qkv), ACT_QKV, false, false},
    {ACT_FIELD(atty), ACT_ATT, false, false},     {ACT_FIELD(att), ACT_SCORES, false, true},
    {ACT_FIELD(res2), ACT_NC, false, false},     {ACT_FIELD(ln2), ACT_NC, false, false},
    {ACT_FIELD(ln2_mean), ACT_STATS, false, false}, {ACT_FIELD(ln2_rstd), ACT_ROWS, false, false},
    {ACT_FIELD(fch), ACT_FC_IN, false, false},   {ACT_FIELD(fch_act), ACT_F, false, false},
    {ACT_FIELD(res3), ACT_NC, true, false},
};
enum { NLAYER_ACTS = sizeof layer_act_specs / sizeof layer_act_specs[0] };

/* n floats rounded up to a multiple of 16: every tensor starts on a 64-byte boundary. */
static size_t padded(size_t n) { return (n + 15) / 16 * 16; }

/* The next n floats of the block at `base` (NULL while only counting), kept 64-byte aligned. */
static float *take(float *base, size_t *used, size_t n) {
    float *p = base && n ? base + *used : NULL;
    *used += padded(n);
    return p;
}

/* The recompute buffers: one block's worth, shared by every block that does not keep a tensor itself.
 * Forward of such a block writes there (and the next such block overwrites it); its backward finds
 * there what model_recompute_block has just rebuilt. */
typedef struct {
    float *at[NLAYER_ACTS];
    bool taken[NLAYER_ACTS]; /* while only counting, `at` stays NULL: this says whether it was taken */
} recompute_buffers;

/* Lays the activations out in one block at `base` (or only counts when base is NULL) under a recompute
 * policy; returns floats, and where they go in *split (floats; may be NULL). */
static size_t layout_acts(const model_config *c, const model_dims *d, int B, int T, model_recompute policy, int k,
                          float *base, layer_acts *layers, global_acts *g, model_activation_split *split) {
    size_t N = (size_t)B * T, C = c->C, QKV = d->QKV, FC = d->FC, F = d->F, ATT = d->ATT;
    size_t Nl = (size_t)B * (T / d->seq_split), sp = d->seq_split > 1 ? 1 : 0; /* the slice's rows */
    size_t stats = c->arch == MODEL_GPT2 ? Nl : 0;
    size_t used = 0;
    recompute_buffers shared = {{NULL}, {false}};
    for (int l = d->first; l < d->last; l++) {
        layer_acts dummy, *a = base ? &layers[l] : &dummy; /* counting still walks a struct */
        model_keep keep = model_block_keeps(policy, k, l);
        for (int i = 0; i < NLAYER_ACTS; i++) {
            const act_spec *s = &layer_act_specs[i];
            float **slot = (float **)((char *)a + s->field);
            size_t n = act_floats(c, d, B, T, s->size);
            if (keep == MODEL_KEEP_ALL) {
                *slot = take(base, &used, n);
                continue;
            }
            /* LAB 18 BEGIN lay out a block that does not keep everything: its own floats for what it keeps, the one shared recompute buffer for the rest */
            bool own = keep == MODEL_KEEP_NO_SCORES ? !s->scores : s->boundary;
            if (!own && !shared.taken[i]) {
                shared.at[i] = take(base, &used, n);
                shared.taken[i] = true;
            }
            *slot = own ? take(base, &used, n) : shared.at[i];
            /* LAB 18 END */
        }
    }
    size_t in_blocks = used, recompute = 0;
    for (int i = 0; i < NLAYER_ACTS; i++)
        if (shared.taken[i]) recompute += padded(act_floats(c, d, B, T, layer_act_specs[i].size));
    global_acts dummy_g, *G = base ? g : &dummy_g;
#define TAKE(ptr, n) ((ptr) = take(base, &used, (n)))
    /* Only the last stage has the final norm, the logits (its vocabulary rows) and the loss. */
    size_t top = d->head ? 1 : 0;
    TAKE(G->encoded, Nl * C); TAKE(G->lnf, top * Nl * C); TAKE(G->lnf_mean, top * stats); TAKE(G->lnf_rstd, top * Nl);
    TAKE(G->logits, top * N * d->Vp); TAKE(G->losses, top * N); TAKE(G->lse, top * N);
    TAKE(G->proj, N * C); TAKE(G->dres, Nl * C); TAKE(G->dln, N * C); TAKE(G->datty, N * ATT);
    TAKE(G->dqkv, N * QKV); TAKE(G->dfch, N * FC); TAKE(G->dfch_act, N * F); TAKE(G->dloss, N);
    TAKE(G->seq_full, sp * N * C); TAKE(G->seq_part, sp * Nl * C);
#undef TAKE
    if (split)
        *split = (model_activation_split){.blocks = in_blocks - recompute, .recompute = recompute,
                                          .outside = used - in_blocks, .total = used};
    return used;
}

static void check_policy(model_recompute policy, int k) {
    if (policy < 0 || policy >= MODEL_NRECOMPUTES)
        MP_FAIL("a recompute policy: none, every, every_k or selective", "policy number %d", (int)policy);
    if (policy == MODEL_RECOMPUTE_EVERY_K && k < 1)
        MP_FAIL_HINT("every_k's k >= 1", "k = 1 checkpoints every block; k = 2 every other one",
                     "k = %d", k);
}

size_t model_activation_bytes_policy(const model_config *cfg, int B, int T, model_recompute policy, int k,
                                     model_activation_split *split) {
    check_policy(policy, k);
    model whole = {0};
    describe(&whole, cfg, NULL);
    size_t floats = layout_acts(&whole.cfg, &whole.dims, B, T, policy, k, NULL, NULL, NULL, split);
    if (split) {
        split->blocks *= sizeof(float);
        split->recompute *= sizeof(float);
        split->outside *= sizeof(float);
        split->total *= sizeof(float);
    }
    return floats * sizeof(float);
}

size_t model_activation_bytes(const model_config *cfg, int B, int T) {
    return model_activation_bytes_policy(cfg, B, T, MODEL_RECOMPUTE_NONE, 1, NULL);
}

/* ------------------------------------------------------------------ the model */

static void add_tensor(model *m, const char *name, int layer, int rows, int cols, bool count_only) {
    if (!count_only) {
        model_tensor *t = &m->tensors[m->ntensors];
        snprintf(t->name, sizeof t->name, "%s", name);
        t->ndim = cols ? 2 : 1;
        t->shape[0] = rows;
        t->shape[1] = cols;
        t->offset = m->nparams;
        t->size = (size_t)rows * (cols ? cols : 1);
        t->layer = layer;
        t->decay = t->ndim >= 2;
    }
    m->ntensors++;
    m->nparams += (size_t)rows * (cols ? cols : 1);
}

static bool spec_applies(const model_config *c, const tensor_spec *s) {
    if (!(s->archs & (c->arch == MODEL_GPT2 ? FOR_GPT2 : FOR_LLAMA))) return false;
    return !(strcmp(s->name, "head") == 0 && c->tied);
}

/* Visits the tensors this model holds, in layout order: the embeddings (first stage), its blocks, the top
 * (last stage). With tied embeddings a last stage without the embeddings holds wte's copy where an untied
 * head would be (layer L). */
typedef void (*layout_visit)(model *m, const tensor_spec *s, int layer, void *ctx);
static void walk_layout(model *m, layout_visit visit, void *ctx) {
    const model_config *c = &m->cfg;
    const model_dims *d = &m->dims;
    if (d->embed)
        for (size_t i = 0; i < sizeof embedding_specs / sizeof embedding_specs[0]; i++)
            if (spec_applies(c, &embedding_specs[i])) visit(m, &embedding_specs[i], -1, ctx);
    for (int l = d->first; l < d->last; l++)
        for (int i = 0; i < NLAYER_SPECS; i++)
            if (spec_applies(c, &layer_specs[i])) visit(m, &layer_specs[i], l, ctx);
    if (!d->head) return;
    for (size_t i = 0; i < sizeof top_specs / sizeof top_specs[0]; i++)
        if (spec_applies(c, &top_specs[i])) visit(m, &top_specs[i], c->L, ctx);
    if (c->tied && !d->embed) visit(m, &embedding_specs[0], c->L, ctx); /* wte's copy (pipeline parallel) */
}

static void registry_visit(model *m, const tensor_spec *s, int layer, void *ctx) {
    char name[48];
    if (layer >= 0 && layer < m->cfg.L) snprintf(name, sizeof name, "h.%d.%s", layer, s->name);
    else snprintf(name, sizeof name, "%s", s->name);
    add_tensor(m, name, layer, local_rows(m, s), local_cols(m, s), *(bool *)ctx);
}

/* Builds the registry in layout order. Run twice: count, then fill. */
static void build_registry(model *m, bool count_only) {
    m->ntensors = 0;
    m->nparams = 0;
    walk_layout(m, registry_visit, &count_only);
}

typedef struct {
    float *base;
    layer_params *layers;
    global_params *g;
    int k;
} bind_ctx;

static void bind_visit(model *m, const tensor_spec *s, int layer, void *ctx) {
    bind_ctx *b = ctx;
    char *owner = layer >= 0 && layer < m->cfg.L ? (char *)&b->layers[layer] : (char *)b->g;
    *(float **)(owner + s->field) = b->base + m->tensors[b->k++].offset;
}

/* Points the per-layer and global structs at the tensors of `base` (params or grads). */
static void bind_pointers(model *m, float *base, layer_params *layers, global_params *g) {
    memset(layers, 0, (size_t)m->cfg.L * sizeof *layers);
    memset(g, 0, sizeof *g);
    bind_ctx b = {base, layers, g, 0};
    walk_layout(m, bind_visit, &b);
    if (m->cfg.tied) g->head = g->wte;
}

/* A model struct that only describes: the config, the shard and its sizes (registries, counting). */
static void describe(model *m, const model_config *cfg, const model_shard *sh) {
    m->cfg = *cfg;
    model_config_complete(&m->cfg);
    m->shard = sh ? *sh : model_shard_whole(&m->cfg);
    m->dims = dims_of(&m->cfg, &m->shard);
    m->is_shard = m->shard.tp_size > 1 || m->shard.first > 0 || m->shard.last < m->cfg.L;
}

size_t model_count_params(const model_config *cfg) {
    model counter = {0};
    describe(&counter, cfg, NULL);
    build_registry(&counter, true);
    return counter.nparams;
}

typedef enum { LAYOUT_WHOLE, LAYOUT_RESERVED, LAYOUT_SHARDED_GRADS } buffer_layout;

static model *create(const model_config *cfg, const model_shard *sh, buffer_layout layout) {
    bool reserved = layout == LAYOUT_RESERVED;
    model *m = calloc(1, sizeof *m);
    MP_ASSERT(m, "out of memory");
    describe(m, cfg, sh);
    if (sh) model_shard_check(&m->cfg, &m->shard);
    build_registry(m, true);
    m->tensors = calloc((size_t)m->ntensors, sizeof *m->tensors);
    build_registry(m, false);
    m->reserved = reserved;
    m->grads_reserved = layout != LAYOUT_WHOLE;
    if (reserved) { /* what is gathered for a layer while it runs: communication buffers (dist/fsdp.h) */
        m->params = mem_reserve(m->nparams * sizeof(float), MEM_COMM, "gathered parameters");
        m->grads = mem_reserve(m->nparams * sizeof(float), MEM_COMM, "unreduced gradients");
    } else {
        m->params = mem_alloc(m->nparams * sizeof(float), MEM_PARAM, "model parameters");
        m->grads = layout == LAYOUT_SHARDED_GRADS
                       ? mem_reserve(m->nparams * sizeof(float), MEM_GRAD, "gradients (this rank's shard and buckets)")
                       : mem_alloc(m->nparams * sizeof(float), MEM_GRAD, "model gradients");
    }
    m->layer_w = calloc((size_t)m->cfg.L, sizeof *m->layer_w);
    m->layer_g = calloc((size_t)m->cfg.L, sizeof *m->layer_g);
    m->acts = calloc((size_t)m->cfg.L, sizeof *m->acts);
    MP_ASSERT(m->tensors && m->layer_w && m->layer_g && m->acts, "out of memory");
    bind_pointers(m, m->params, m->layer_w, &m->w);
    bind_pointers(m, m->grads, m->layer_g, &m->g);
    return m;
}

model *model_create(const model_config *cfg) { return create(cfg, NULL, LAYOUT_WHOLE); }
model *model_create_reserved(const model_config *cfg) { return create(cfg, NULL, LAYOUT_RESERVED); }
model *model_create_sharded_grads(const model_config *cfg) { return create(cfg, NULL, LAYOUT_SHARDED_GRADS); }
model *model_create_shard(const model_config *cfg, const model_shard *sh) { return create(cfg, sh, LAYOUT_WHOLE); }
const model_shard *model_get_shard(const model *m) { return &m->shard; }
bool model_is_shard(const model *m) { return m->is_shard; }
bool model_has_embedding(const model *m) { return m->dims.embed; }
bool model_has_head(const model *m) { return m->dims.head; }
bool model_is_reserved(const model *m) { return m->reserved; }
bool model_grads_are_reserved(const model *m) { return m->grads_reserved; }

void model_weights_arrived(model *m, size_t offset, size_t n) {
    if (m->lowp) model_lowp_cast_range(m, offset, n);
}

void model_weights_leaving(model *m, size_t offset, size_t n) {
    if (m->lowp) model_lowp_drop_range(m, offset, n);
}

void model_free(model *m) {
    if (!m) return;
    mem_free(m->params);
    mem_free(m->grads);
    mem_free(m->act_memory);
    for (int i = 0; i < m->nslots; i++)
        if (i != m->slot) {
            mem_free(m->slots[i].act_memory);
            free(m->slots[i].acts);
            free(m->slots[i].inputs);
            free(m->slots[i].targets);
        }
    free(m->slots);
    free(m->tensors);
    free(m->layer_w);
    free(m->layer_g);
    free(m->acts);
    free(m->inputs);
    free(m->targets);
    model_lowp_free(m->lowp);
    free(m);
}

const model_config *model_get_config(const model *m) { return &m->cfg; }

const model_tensor *model_tensors(const model *m, int *count) {
    *count = m->ntensors;
    return m->tensors;
}

const model_tensor *model_tensor_find(const model *m, const char *name) {
    for (int i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

size_t model_num_params(const model *m) { return m->nparams; }

size_t model_num_params_unpadded(const model *m) {
    size_t pad_rows = (size_t)(m->cfg.Vp - m->cfg.V) * (m->cfg.tied ? 1 : 2);
    return m->nparams - pad_rows * m->cfg.C;
}

void model_layer_span(const model *m, int layer, size_t *offset, size_t *size) {
    size_t begin = m->nparams, end = 0;
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i].layer == layer) {
            if (m->tensors[i].offset < begin) begin = m->tensors[i].offset;
            if (m->tensors[i].offset + m->tensors[i].size > end) end = m->tensors[i].offset + m->tensors[i].size;
        }
    MP_ASSERT(end > begin, "layer %d has no parameters (layers run from -1 to %d)", layer, m->cfg.L);
    *offset = begin;
    *size = end - begin;
}

float *model_params(model *m) { return m->params; }
float *model_grads(model *m) { return m->grads; }
void model_set_hooks(model *m, const model_hooks *hooks) { m->hooks = *hooks; }
model_hooks model_get_hooks(const model *m) { return m->hooks; }

void model_collect_act_hist(model *m, fp_hist *hists) { m->act_hists = hists; }

const char *const model_block_act_names[] = {"ln1", "qkv", "att", "atty", "res2", "ln2", "fch", "fch_act", "res3",
                                             NULL};

void model_set_act_probe(model *m, model_act_probe probe, void *ctx) {
    m->act_probe = probe;
    m->act_probe_ctx = ctx;
}

model_act_probe model_get_act_probe(const model *m, void **ctx) {
    if (ctx) *ctx = m->act_probe_ctx;
    return m->act_probe;
}

void model_act_full_name(const model *m, int layer, const char *name, char *out, size_t len) {
    if (layer >= 0 && layer < m->cfg.L) snprintf(out, len, "h.%d.%s", layer, name);
    else snprintf(out, len, "%s", name);
}

void model_act_computed(model *m, int layer, const char *name, float *x, size_t n) {
    if (m->act_probe) m->act_probe(m->act_probe_ctx, layer, name, x, n);
    if (m->act_hists) fp_hist_add(&m->act_hists[layer + 1], x, n, 1.0f);
}

int model_freeze(model *m, const char *pattern) {
    size_t len = strlen(pattern);
    bool prefix = len > 0 && pattern[len - 1] == '*';
    int matched = 0;
    for (int i = 0; i < m->ntensors; i++) {
        const char *name = m->tensors[i].name;
        bool match = prefix ? strncmp(name, pattern, len - 1) == 0 : strcmp(name, pattern) == 0;
        if (match) {
            m->tensors[i].frozen = true;
            matched++;
        }
    }
    return matched;
}

void model_set_decay(model *m, int i, bool decay) {
    MP_ASSERT(i >= 0 && i < m->ntensors, "tensor %d of %d", i, m->ntensors);
    m->tensors[i].decay = decay;
}

int model_count_frozen(const model *m) {
    int n = 0;
    for (int i = 0; i < m->ntensors; i++) n += m->tensors[i].frozen;
    return n;
}

void model_grads_ready(model *m, int layer) {
    for (int i = 0; i < m->ntensors; i++)
        if (m->tensors[i].frozen && m->tensors[i].layer == layer)
            memset(m->grads + m->tensors[i].offset, 0, m->tensors[i].size * sizeof(float));
    model_hook(m->hooks.grads_ready, m->hooks.ctx, layer);
}
/* x[0, n) = 0. Every thread zeroes its own slice: one core's memset reaches about half the machine's write
 * bandwidth (GPT-2 124M's 0.5 GB of gradients: 20.5 ms on one thread, 10.6 ms on two, on the 2-core course
 * machine), and the other threads would only wait for it. Small ranges stay on one thread. */
static void zero_floats(float *x, size_t n) {
#pragma omp parallel if (n >= ((size_t)1 << 20))
    {
        const size_t threads = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        const size_t lo = n * t / threads, hi = n * (t + 1) / threads;
        memset(x + lo, 0, (hi - lo) * sizeof(float));
    }
}

void model_zero_grad(model *m) {
    /* Reserved gradients read zero wherever they are not committed, and their strategy (dist/fsdp.c,
     * dist/zero.c) decommits all of them before the next step. */
    if (m->grads_reserved) return;
    /* On the 16-bit kernel each matrix of a block gets exactly one weight-gradient product a backward, and the
     * first backward after this writes it (model_lowp.c): zeroing them would be a pass over two thirds of GPT-2's
     * gradients, which the products would then read back only to add to zeros. The head's product writes the head
     * too, first in backward: a tied head's lookup gradient adds to it after (GPT-2's 154 MB, 5-7 ms a step). What
     * backward adds into is cleared: the norm gains, the biases, an untied embedding. */
    if (m->lowp && !m->is_shard && model_lowp_can_write_matrix_grads(m)) {
        const size_t head_offset = m->w.head ? (size_t)(m->w.head - m->params) : SIZE_MAX;
        for (int i = 0; i < m->ntensors; i++) {
            const model_tensor *t = &m->tensors[i];
            const bool written_by_head = t->offset == head_offset && t->size == (size_t)m->cfg.Vp * m->cfg.C;
            if ((t->ndim != 2 || t->layer < 0) && !written_by_head) zero_floats(m->grads + t->offset, t->size);
        }
        m->matrix_grads_stale = true;
        return;
    }
    zero_floats(m->grads, m->nparams);
}

/* The table row a registry tensor was made from (by its name's last part). */
static const tensor_spec *spec_of(const model_tensor *t) {
    const char *base = strrchr(t->name, '.');
    base = base ? base + 1 : t->name;
    for (int i = 0; i < NLAYER_SPECS; i++)
        if (strcmp(layer_specs[i].name, base) == 0) return &layer_specs[i];
    for (size_t i = 0; i < sizeof embedding_specs / sizeof embedding_specs[0]; i++)
        if (strcmp(embedding_specs[i].name, base) == 0) return &embedding_specs[i];
    for (size_t i = 0; i < sizeof top_specs / sizeof top_specs[0]; i++)
        if (strcmp(top_specs[i].name, base) == 0) return &top_specs[i];
    return NULL;
}

static init_kind init_of(const model_tensor *t) {
    const tensor_spec *s = spec_of(t);
    return s ? s->init : INIT_ZERO;
}

bool model_tensor_tp_replicated(const model *m, const model_tensor *t) {
    const tensor_spec *s = spec_of(t);
    return m->shard.tp_size == 1 || !s || s->split == SPLIT_NONE;
}

bool model_tensor_seq_partial(const model *m, const model_tensor *t) {
    const tensor_spec *s = spec_of(t);
    return m->dims.seq_split > 1 && s && s->seq_partial;
}

bool model_tensor_is_tied_copy(const model *m, const model_tensor *t) {
    return m->cfg.tied && !m->dims.embed && t->layer == m->cfg.L && strcmp(t->name, "wte") == 0;
}

/* A tensor's initial values (whole): the draws of model_init, in order. */
static void draw_values(const model_config *c, const model_tensor *t, float *p, mp_rng *rng) {
    /* Residual projections add into the stream once per layer and twice per block, so their
     * variance is scaled by 1/(2L) to keep the stream's variance flat with depth (GPT-2). */
    float residual_std = 0.02f / sqrtf(2.0f * c->L);
    init_kind kind = init_of(t);
    for (size_t j = 0; j < t->size; j++) {
        switch (kind) {
        case INIT_ZERO: p[j] = 0.0f; break;
        case INIT_ONE: p[j] = 1.0f; break;
        case INIT_NORMAL: p[j] = 0.02f * mp_rng_normal(rng); break;
        case INIT_RESIDUAL: p[j] = residual_std * mp_rng_normal(rng); break;
        }
    }
    /* Padded vocabulary rows are never a token and their logits are ignored: keep them zero. */
    if (t->shape[0] == c->Vp && t->ndim == 2)
        memset(p + (size_t)c->V * c->C, 0, (size_t)(c->Vp - c->V) * c->C * sizeof(float));
}

/* A shard draws the whole model's values tensor by tensor, in the whole model's order, and keeps its
 * slice of each: the same weights as one rank's model_init, split. */
static void init_shard(model *m, uint64_t seed) {
    model whole = {0};
    describe(&whole, &m->cfg, NULL);
    build_registry(&whole, true);
    whole.tensors = calloc((size_t)whole.ntensors, sizeof *whole.tensors);
    MP_ASSERT(whole.tensors, "out of memory");
    build_registry(&whole, false);
    size_t biggest = 0;
    for (int i = 0; i < whole.ntensors; i++) biggest = whole.tensors[i].size > biggest ? whole.tensors[i].size : biggest;
    float *full = malloc(biggest * sizeof(float));
    MP_ASSERT(full, "out of memory");
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (int i = 0; i < whole.ntensors; i++) {
        const model_tensor *t = &whole.tensors[i];
        draw_values(&m->cfg, t, full, &rng);
        const model_tensor *mine = model_tensor_find(m, t->name); /* "wte" is also the last stage's tied copy */
        if (mine) take_slice(m, spec_of(t)->split, t, full, m->params + mine->offset);
    }
    free(full);
    free(whole.tensors);
}

void model_init(model *m, uint64_t seed) { model_init_layerwise(m, seed, NULL, NULL, NULL); }

void model_init_layerwise(model *m, uint64_t seed, void (*before)(void *, int), void (*after)(void *, int), void *ctx) {
    /* A reserved model's weights are written only into spans a strategy committed (dist/fsdp.c does it). */
    MP_ASSERT(!m->reserved || (before && after), "model_init on a reserved model: initialise it through its strategy");
    if (m->is_shard) {
        MP_ASSERT(!before && !after, "layerwise initialisation of a model-parallel shard");
        init_shard(m, seed);
        return;
    }
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (int i = 0; i < m->ntensors; i++) {
        const model_tensor *t = &m->tensors[i];
        /* The registry is layer-major: a layer's tensors are consecutive, in the order of the random draws. */
        if (before && (i == 0 || m->tensors[i - 1].layer != t->layer)) before(ctx, t->layer);
        draw_values(&m->cfg, t, m->params + t->offset, &rng);
        if (after && (i == m->ntensors - 1 || m->tensors[i + 1].layer != t->layer)) after(ctx, t->layer);
    }
}

/* ------------------------------------------------------------------ forward */

void model_check_batch(model *m, const int *inputs, const int *targets, int B, int T) {
    if (T < 1 || T > m->cfg.maxT)
        MP_FAIL("a sequence length from 1 to the model's context", "T = %d (context %d)", T, m->cfg.maxT);
    if (B < 1) MP_FAIL("a batch size of at least 1", "B = %d", B);
    size_t N = (size_t)B * T;
    for (size_t i = 0; i < N; i++) {
        if (inputs && (inputs[i] < 0 || inputs[i] >= m->cfg.V))
            MP_FAIL("input tokens in [0, vocab)", "token %d at position %zu (vocab %d)", inputs[i], i, m->cfg.V);
        if (targets && (targets[i] < -1 || targets[i] >= m->cfg.V))
            MP_FAIL("targets in [-1, vocab)", "target %d at position %zu (vocab %d)", targets[i], i, m->cfg.V);
    }
    if (N > m->batch_capacity) {
        free(m->inputs);
        free(m->targets);
        m->inputs = malloc(N * sizeof(int));
        m->targets = malloc(N * sizeof(int));
        MP_ASSERT(m->inputs && m->targets, "out of memory");
        m->batch_capacity = N;
    }
    if (inputs) memcpy(m->inputs, inputs, N * sizeof(int));
    if (targets) memcpy(m->targets, targets, N * sizeof(int));
}

/* The fp32 activations for a (B,T) batch under the model's recompute policy: allocated at the first call,
 * grown when they need more room (a new policy frees them: model_set_recompute). */
static void ensure_acts(model *m, int B, int T) {
    if (m->act_memory && m->B == B && m->T == T) return;
    size_t floats = layout_acts(&m->cfg, &m->dims, B, T, m->recompute, m->recompute_k, NULL, NULL, NULL, NULL);
    if (floats > m->act_floats) {
        mem_free(m->act_memory);
        m->act_memory = mem_alloc(floats * sizeof(float), MEM_ACT, "activations");
        m->act_floats = floats;
    }
    layout_acts(&m->cfg, &m->dims, B, T, m->recompute, m->recompute_k, m->act_memory, m->acts, &m->ga, NULL);
    m->B = B;
    m->T = T;
}

void model_set_recompute(model *m, model_recompute policy, int k) {
    check_policy(policy, k);
    m->recompute = policy;
    m->recompute_k = policy == MODEL_RECOMPUTE_EVERY_K ? k : 1;
    /* The layout depends on the policy: lay it out again at the next forward, from an empty block, so
     * MEM_ACT shows the new policy's bytes and not the largest of the old and the new. */
    mem_free(m->act_memory);
    m->act_memory = NULL;
    m->act_floats = 0;
    m->B = m->T = 0;
    if (m->lowp) model_lowp_drop_activations(m);
    m->have_targets = false;
    for (int i = 0; i < m->nslots; i++) /* the other slots are laid out again at their next forward too */
        if (i != m->slot) {
            mem_free(m->slots[i].act_memory);
            m->slots[i].act_memory = NULL;
            m->slots[i].act_floats = 0;
            m->slots[i].B = m->slots[i].T = 0;
            m->slots[i].have_targets = false;
        }
}

/* ------------------------------------------------------------------ activation slots (pipeline parallel) */

static model_act_slot slot_of_model(const model *m) {
    return (model_act_slot){m->act_memory, m->act_floats, m->B, m->T, m->acts, m->ga, m->inputs, m->targets,
                            m->batch_capacity, m->counted, m->have_targets};
}

void model_use_act_slot(model *m, int slot) {
    MP_ASSERT(slot >= 0 && slot < 4096, "activation slot %d", slot);
    MP_ASSERT(!m->lowp || m->is_shard, "activation slots are on the fp32 path only (a shard's autocast runs there)");
    if (slot == m->slot) return;
    if (slot >= m->nslots) {
        int n = slot + 1;
        m->slots = realloc(m->slots, (size_t)n * sizeof *m->slots);
        MP_ASSERT(m->slots, "out of memory");
        for (int i = m->nslots; i < n; i++) {
            m->slots[i] = (model_act_slot){0};
            m->slots[i].acts = calloc((size_t)m->cfg.L, sizeof(layer_acts));
            MP_ASSERT(m->slots[i].acts, "out of memory");
        }
        if (m->nslots == 0) free(m->slots[0].acts); /* slot 0 is the model's own */
        m->nslots = n;
    }
    m->slots[m->slot] = slot_of_model(m);
    const model_act_slot *s = &m->slots[slot];
    m->act_memory = s->act_memory, m->act_floats = s->act_floats, m->B = s->B, m->T = s->T, m->acts = s->acts;
    m->ga = s->ga, m->inputs = s->inputs, m->targets = s->targets, m->batch_capacity = s->batch_capacity;
    m->counted = s->counted, m->have_targets = s->have_targets;
    m->slot = slot;
}

int model_act_slots(const model *m) { return m->nslots ? m->nslots : 1; }

model_recompute model_get_recompute(const model *m, int *k) {
    if (k) *k = m->recompute_k;
    return m->recompute;
}

void model_norm_forward(const model *m, float *out, float *mean, float *rstd, const float *inp, const float *w,
                         const float *b, int N) {
    if (m->cfg.arch == MODEL_GPT2) layernorm_forward(out, mean, rstd, inp, w, b, N, m->cfg.C);
    else rmsnorm_forward(out, rstd, inp, w, N, m->cfg.C, m->cfg.norm_eps);
}

void model_norm_backward(const model *m, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                          const float *w, const float *mean, const float *rstd, int N) {
    if (m->cfg.arch == MODEL_GPT2) layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, m->cfg.C);
    else rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, m->cfg.C);
}

/* fp32 path: an activation of block l was just computed; a recompute in backward reports nothing. */
static void report(model *m, int l, const char *name, float *x, size_t n) {
    if (!m->recomputing) model_act_computed(m, l, name, x, n);
}

/* ------------------------------------------------------------------ tensor parallel's conjugate points */

/* g (forward) and f's backward: x summed over the tp ranks. Nothing on one rank. */
static void tp_sum(model *m, float *x, size_t n) {
    if (m->shard.tp_size > 1) m->shard.tp_sum(m->shard.tp_ctx, x, n);
}

/* Autocast on a shard (model_lowp.c): the matmuls' weights as this forward reads them (the rounded cache),
 * and x rounded in place to the compute format. Both leave the fp32 path as it is when m->lowp is NULL. */
static const float *mm_weight(const model *m, const float *param) {
    return m->lowp ? model_lowp_shard_weight(m, param) : param;
}
static void rnd(const model *m, float *x, size_t n) { model_lowp_round(m, x, n); }

/* ------------------------------------------------------------------ sequence parallel (model.h) */

static bool seq_parallel(const model *m) { return m->dims.seq_split > 1; }
/* Rows of the residual stream on this rank: B T, or under sequence parallel its slice's B T/tp. */
static int slice_rows(const model *m) { return m->B * (m->T / m->dims.seq_split); }

/* Before a column-parallel matmul: its input x. Under sequence parallel x is this rank's slice
 * (B,T/tp,C), all-gathered over tp into the whole sequence (m->ga.seq_full); else x is whole already
 * (f's forward, the identity). */
static const float *gather_sequence(model *m, const float *x) {
    if (!seq_parallel(m)) return x;
    m->shard.seq_gather(m->shard.tp_ctx, x, m->ga.seq_full, m->B, m->T, m->cfg.C);
    return m->ga.seq_full;
}

/* A partial (B,T,C), one share per tp rank (a row-parallel output, a column-parallel input gradient, the
 * partial embeddings), summed over tp: in place by an allreduce (g's forward, f's backward) and returned;
 * under sequence parallel reduce-scattered instead, this rank's slice (B,T/tp,C) into `slice`, returned. */
static float *sum_over_tp(model *m, float *partial, float *slice) {
    if (!seq_parallel(m)) {
        tp_sum(m, partial, (size_t)m->B * m->T * m->cfg.C);
        return partial;
    }
    m->shard.seq_reduce_scatter(m->shard.tp_ctx, partial, slice, m->B, m->T, m->cfg.C);
    return slice;
}

/* Row-parallel: out (N, OC) = sum over tp of inp (N, K) @ weight^T (K this rank's input columns), then
 * the bias, once (g). On one rank matmul_forward itself. Returns the sum: out, or under sequence parallel
 * this rank's slice of it (m->ga.seq_part, (B,T/tp,OC)). OC is C. The product is the profiler's kernel `name`; the
 * sum over tp is communication, outside it. */
static float *row_parallel_forward(model *m, const char *name, float *out, const float *inp, const float *weight,
                                   const float *bias, int N, int K, int OC) {
    if (m->shard.tp_size == 1) {
        PROF_KERNEL(name, prof_cost_matmul_forward(N, K, OC), matmul_forward(out, inp, weight, bias, N, K, OC));
        return out;
    }
    PROF_KERNEL(name, prof_cost_matmul_forward(N, K, OC), matmul_forward(out, inp, weight, NULL, N, K, OC));
    float *sum = sum_over_tp(m, out, m->ga.seq_part);
    if (bias)
        for (int r = 0, rows = slice_rows(m); r < rows; r++)
            for (int o = 0; o < OC; o++) sum[(size_t)r * OC + o] += bias[o];
    return sum;
}

/* The residual stream's gradient as the row-parallel projections' backward reads it (B,T,C): dres itself;
 * under autocast a rounded copy (dln is free scratch there); under sequence parallel all-gathered into
 * seq_full (the backward of the forward's reduce-scatter), rounded under autocast. */
static const float *projection_grad(model *m) {
    global_acts *g = &m->ga;
    size_t NC = (size_t)m->B * m->T * m->cfg.C;
    if (seq_parallel(m)) {
        gather_sequence(m, g->dres);
        rnd(m, g->seq_full, NC);
        return g->seq_full;
    }
    if (!m->lowp) return g->dres;
    memcpy(g->dln, g->dres, NC * sizeof(float));
    rnd(m, g->dln, NC);
    return g->dln;
}

/* The residual stream entering block l (the stage's input for its first block). */
static const float *block_input(const model *m, int l) {
    return l > m->dims.first ? m->acts[l - 1].res3 : m->ga.encoded;
}

/* Block l's forward from `residual` (B,T,C) into m->acts[l] (its own tensors, or the shared recompute
 * buffers for what it does not keep). With to_output false it stops after the MLP activation: the
 * projection after it only makes the block's output, which is kept, so a recompute needs none of it.
 * Under tensor parallel the qkv and fc matmuls are column-parallel (this rank's heads and MLP columns),
 * attproj and fcproj row-parallel (g sums their outputs). */
static void block_forward(model *m, int l, const float *residual, bool to_output) {
    const model_config *c = &m->cfg;
    const model_dims *d = &m->dims;
    int B = m->B, T = m->T, N = B * T, C = c->C, HS = d->HS, Nl = slice_rows(m);
    const layer_params *w = &m->layer_w[l];
    layer_acts *a = &m->acts[l];
    float *proj = m->ga.proj, *sum;
    size_t NCl = (size_t)Nl * C; /* the residual stream: this rank's slice under sequence parallel */
    PROF_KERNEL("norm_fwd", prof_cost_norm_forward(Nl, C),
                model_norm_forward(m, a->ln1, a->ln1_mean, a->ln1_rstd, residual, w->ln1w, w->ln1b, Nl));
    rnd(m, a->ln1, NCl);
    report(m, l, "ln1", a->ln1, NCl);
    const float *ln1 = gather_sequence(m, a->ln1); /* communication: outside the kernel */
    PROF_KERNEL("matmul_fwd:qkv", prof_cost_matmul_forward(N, C, d->QKV),
                matmul_forward(a->qkv, ln1, mm_weight(m, w->qkvw), mm_weight(m, w->qkvb), N, C, d->QKV));
    rnd(m, a->qkv, (size_t)N * d->QKV);
    if (c->arch == MODEL_LLAMA) {
        rope_forward(a->qkv, B, T, d->NH, d->KVH, HS, c->rope_theta);
        rnd(m, a->qkv, (size_t)N * d->QKV);
    }
    report(m, l, "qkv", a->qkv, (size_t)N * d->QKV);
    PROF_KERNEL("attention_fwd", prof_cost_attention_forward(B, T, d->NH, HS),
                attention_forward(a->atty, a->att, a->qkv, B, T, d->NH, d->KVH, HS));
    rnd(m, a->att, (size_t)N * d->NH * T);
    rnd(m, a->atty, (size_t)N * d->ATT);
    report(m, l, "att", a->att, (size_t)N * d->NH * T);
    report(m, l, "atty", a->atty, (size_t)N * d->ATT);
    sum = row_parallel_forward(m, "matmul_fwd:attproj", proj, a->atty, mm_weight(m, w->attprojw),
                               mm_weight(m, w->attprojb), N, d->ATT, C);
    rnd(m, sum, NCl);
    PROF_KERNEL("residual_fwd", prof_cost_elementwise(NCl, 1, 2, 1), residual_forward(a->res2, residual, sum, (long)NCl));
    report(m, l, "res2", a->res2, NCl);
    PROF_KERNEL("norm_fwd", prof_cost_norm_forward(Nl, C),
                model_norm_forward(m, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w->ln2w, w->ln2b, Nl));
    rnd(m, a->ln2, NCl);
    report(m, l, "ln2", a->ln2, NCl);
    const float *ln2 = gather_sequence(m, a->ln2);
    PROF_KERNEL("matmul_fwd:fc", prof_cost_matmul_forward(N, C, d->FC),
                matmul_forward(a->fch, ln2, mm_weight(m, w->fcw), mm_weight(m, w->fcb), N, C, d->FC));
    rnd(m, a->fch, (size_t)N * d->FC);
    report(m, l, "fch", a->fch, (size_t)N * d->FC);
    if (c->arch == MODEL_GPT2)
        PROF_KERNEL("gelu_fwd", prof_cost_elementwise((double)N * d->F, 9, 1, 1), gelu_forward(a->fch_act, a->fch, (long)N * d->F));
    else PROF_KERNEL("swiglu_fwd", prof_cost_swiglu_forward(N, d->F), swiglu_forward(a->fch_act, a->fch, N, d->F));
    rnd(m, a->fch_act, (size_t)N * d->F);
    report(m, l, "fch_act", a->fch_act, (size_t)N * d->F);
    if (!to_output) return;
    sum = row_parallel_forward(m, "matmul_fwd:fcproj", proj, a->fch_act, mm_weight(m, w->fcprojw),
                               mm_weight(m, w->fcprojb), N, d->F, C);
    rnd(m, sum, NCl);
    PROF_KERNEL("residual_fwd", prof_cost_elementwise(NCl, 1, 2, 1), residual_forward(a->res3, a->res2, sum, (long)NCl));
    report(m, l, "res3", a->res3, NCl);
}

/* Vocab-parallel embedding: each tp rank adds the rows of the tokens in its vocabulary range, g sums the
 * partial embeddings (under sequence parallel a reduce-scatter: each rank keeps its slice of the
 * sequence), then the positions (whole on every rank) are added, the slice's own under sequence parallel. */
static void vocab_parallel_embed(model *m, const int *inputs, int B, int T) {
    const model_dims *d = &m->dims;
    int C = m->cfg.C, Tl = T / d->seq_split, t0 = d->seq_rank * Tl;
    float *partial = seq_parallel(m) ? m->ga.proj : m->ga.encoded; /* (B,T,C) */
    memset(partial, 0, (size_t)B * T * C * sizeof(float));
    for (int i = 0; i < B * T; i++) {
        int row = inputs[i] - d->v0;
        if (row >= 0 && row < d->Vp) memcpy(partial + (size_t)i * C, m->w.wte + (size_t)row * C, (size_t)C * sizeof(float));
    }
    float *out = sum_over_tp(m, partial, m->ga.encoded); /* (B,Tl,C) */
    if (m->w.wpe)
        for (int i = 0; i < B * Tl; i++)
            for (int k = 0; k < C; k++) out[(size_t)i * C + k] += m->w.wpe[(size_t)(t0 + i % Tl) * C + k];
}

/* Its backward from the whole sequence's gradient (under sequence parallel all-gathered from the slices,
 * the backward of the reduce-scatter): wpe's gradient is then whole on every tp rank, like wte's rows. */
static void vocab_parallel_embed_backward(model *m, int B, int T) {
    const model_dims *d = &m->dims;
    int C = m->cfg.C;
    const float *dout = gather_sequence(m, m->ga.dres);
    for (int i = 0; i < B * T; i++) {
        int row = m->inputs[i] - d->v0;
        if (row >= 0 && row < d->Vp)
            for (int k = 0; k < C; k++) m->g.wte[(size_t)row * C + k] += dout[(size_t)i * C + k];
        if (m->g.wpe)
            for (int k = 0; k < C; k++) m->g.wpe[(size_t)(i % T) * C + k] += dout[(size_t)i * C + k];
    }
}

/* Vocab-parallel cross-entropy (Megatron's, model.h): the row max, the sum of exp(z - max) and the
 * target's logit reduced over tp (max, sum, sum), so the logits are never gathered. */
void model_vocab_parallel_loss(const model_shard *sh, float *lse, float *losses, float *sums, const float *logits,
                               const int *targets, int N, int Vl, int v0, int V) {
    /* Columns of the real vocabulary this rank holds: Vl, fewer on the rank the padding starts in, 0 past it. */
    int held = v0 + Vl <= V ? Vl : V - v0 > 0 ? V - v0 : 0;
    /* LAB 28 BEGIN vocab-parallel cross-entropy: the row max (tp_max), the sum of exp(z - max) and the target's logit from its owner (tp_sum), then lse and the loss */
    float *row_max = lse, *target_logit = losses; /* (N) each: lse and losses are written from them below */
    bool split = sh->tp_size > 1;
    for (int i = 0; i < N; i++) {
        const float *z = logits + (size_t)i * Vl;
        float mx = -INFINITY;
        for (int v = 0; v < held; v++) mx = z[v] > mx ? z[v] : mx;
        row_max[i] = mx;
    }
    if (split) sh->tp_max(sh->tp_ctx, row_max, (size_t)N);
    for (int i = 0; i < N; i++) {
        const float *z = logits + (size_t)i * Vl;
        float sum = 0.0f;
        for (int v = 0; v < held; v++) sum += expf(z[v] - row_max[i]);
        sums[i] = sum;
        int y = targets[i] - v0;
        target_logit[i] = targets[i] >= 0 && y >= 0 && y < held ? z[y] : 0.0f;
    }
    if (split) {
        sh->tp_sum(sh->tp_ctx, sums, (size_t)N);
        sh->tp_sum(sh->tp_ctx, target_logit, (size_t)N);
    }
    for (int i = 0; i < N; i++) {
        lse[i] = row_max[i] + logf(sums[i]);
        losses[i] = targets[i] < 0 ? 0.0f : lse[i] - target_logit[i];
    }
    /* LAB 28 END */
}

void model_vocab_parallel_loss_backward(float *dlogits, const float *logits, const float *lse, const int *targets,
                                        const float *dloss, int N, int Vl, int v0, int V) {
    for (int i = 0; i < N; i++) {
        const float *z = logits + (size_t)i * Vl;
        float *dz = dlogits + (size_t)i * Vl;
        int y = targets[i];
        for (int v = 0; v < Vl; v++) {
            int col = v0 + v;
            dz[v] = y < 0 || col >= V ? 0.0f : expf(z[v] - lse[i]) * dloss[i] - (col == y ? dloss[i] : 0.0f);
        }
    }
}

float model_forward(model *m, const int *inputs, const int *targets, int B, int T) {
    return model_forward_stage(m, inputs, NULL, targets, B, T);
}

float model_forward_stage(model *m, const int *inputs, const float *hidden_in, const int *targets, int B, int T) {
    const model_dims *d = &m->dims;
    MP_ASSERT(d->embed ? inputs != NULL : hidden_in != NULL, "a stage's forward needs %s",
              d->embed ? "tokens" : "the previous stage's hidden state");
    model_check_batch(m, d->embed ? inputs : NULL, d->head ? targets : NULL, B, T);
    if (T % d->seq_split != 0)
        MP_FAIL_HINT("a sequence length divisible by tensor_model_parallel_size under sequence_parallel",
                     "sequence parallel gives each tp rank T/tp positions of every sequence: choose seq_len a "
                     "multiple of tensor_model_parallel_size, or set sequence_parallel false",
                     "T = %d with tensor_model_parallel_size %d", T, d->seq_split);
    if (m->lowp && !m->is_shard) return model_lowp_forward(m, inputs, targets, B, T);
    if (m->lowp) model_lowp_shard_cast(m); /* a shard's autocast: this forward's weights, rounded */
    ensure_acts(m, B, T);
    const model_config *c = &m->cfg;
    int N = B * T, C = c->C, Nl = slice_rows(m);
    size_t NCl = (size_t)Nl * C;
    global_acts *g = &m->ga;

    if (d->embed) {
        model_hook(m->hooks.before_forward, m->hooks.ctx, -1);
        if (m->shard.tp_size == 1)
            PROF_KERNEL("encoder_fwd", prof_cost_encoder_forward(N, C), encoder_forward(g->encoded, inputs, m->w.wte, m->w.wpe, B, T, C, c->V));
        else vocab_parallel_embed(m, inputs, B, T);
        model_act_computed(m, -1, "encoded", g->encoded, NCl);
    } else {
        memcpy(g->encoded, hidden_in, NCl * sizeof(float)); /* the stage's input, kept for backward */
    }
    for (int l = d->first; l < d->last; l++) {
        model_hook(m->hooks.before_forward, m->hooks.ctx, l);
        PROF_BEGIN("block_fwd");
        block_forward(m, l, block_input(m, l), true);
        PROF_END("block_fwd");
    }
    m->have_targets = d->head && targets != NULL;
    if (!d->head) {
        m->have_targets = true; /* backward runs from the next stage's gradient */
        return 0.0f;
    }
    const float *residual = block_input(m, d->last);
    model_hook(m->hooks.before_forward, m->hooks.ctx, c->L);
    PROF_KERNEL("norm_fwd", prof_cost_norm_forward(Nl, C),
                model_norm_forward(m, g->lnf, g->lnf_mean, g->lnf_rstd, residual, m->w.lnfw, m->w.lnfb, Nl));
    rnd(m, g->lnf, NCl);
    model_act_computed(m, c->L, "lnf", g->lnf, NCl);
    /* tp: column-parallel head (f before it: the identity forward; sequence parallel: the all-gather, as
     * Megatron gathers the sequence for the head), this rank's vocabulary columns */
    const float *lnf = gather_sequence(m, g->lnf); /* communication: outside the kernel */
    PROF_KERNEL("matmul_fwd:head", prof_cost_matmul_forward(N, C, d->Vp),
                matmul_forward(g->logits, lnf, mm_weight(m, m->w.head), NULL, N, C, d->Vp));
    rnd(m, g->logits, (size_t)N * d->Vp);
    model_act_computed(m, c->L, "logits", g->logits, (size_t)N * d->Vp);

    if (!targets) return 0.0f;
    if (m->shard.tp_size == 1)
        PROF_KERNEL("crossentropy_fwd", prof_cost_crossentropy_forward(N, c->V, c->Vp),
                    crossentropy_forward(g->losses, g->lse, g->logits, targets, N, c->V, c->Vp));
    else model_vocab_parallel_loss(&m->shard, m->ga.lse, m->ga.losses, m->ga.dloss, m->ga.logits, targets, N, d->Vp,
                                   d->v0, c->V);
    double sum = 0;
    m->counted = 0;
    for (int i = 0; i < N; i++)
        if (targets[i] >= 0) {
            sum += g->losses[i];
            m->counted++;
        }
    return m->counted ? (float)(sum / m->counted) : 0.0f;
}

size_t model_stage_floats(const model *m, int B, int T) {
    return (size_t)B * (size_t)(T / m->dims.seq_split) * (size_t)m->cfg.C;
}

const float *model_stage_output(const model *m) {
    MP_ASSERT(m->act_memory && !m->dims.head, "a stage output needs a forward on a stage that is not the last");
    return block_input(m, m->dims.last);
}

const float *model_logits(model *m, int b, int t) {
    if (m->lowp && !m->is_shard) return model_lowp_logits(m, b, t);
    MP_ASSERT(m->act_memory && m->dims.head && m->shard.tp_size == 1 && b >= 0 && b < m->B && t >= 0 && t < m->T,
              "logits of (%d, %d) outside the last batch (or on a shard without the whole head)", b, t);
    return m->ga.logits + ((size_t)b * m->T + t) * m->cfg.Vp;
}

/* ------------------------------------------------------------------ backward */

void model_recompute_block(model *m, int l) {
    model_keep keep = model_keep_of(m, l);
    if (keep == MODEL_KEEP_ALL) return;
    MP_ASSERT(m->act_memory && (!m->lowp || m->is_shard) && l >= 0 && l < m->cfg.L, "recompute of block %d without fp32 activations", l);
    m->recomputing = true;
    /* LAB 18 BEGIN recompute a block's forward before its backward: all of it from its stored input, or only the attention probabilities */
    const model_dims *d = &m->dims;
    layer_acts *a = &m->acts[l];
    if (keep == MODEL_KEEP_NO_SCORES) {
        /* att from the stored q, k, v (after RoPE); the attention output comes again too, into scratch */
        attention_forward(m->ga.proj, a->att, a->qkv, m->B, m->T, d->NH, d->KVH, d->HS);
    } else {
        block_forward(m, l, block_input(m, l), false);
    }
    /* LAB 18 END */
    if (keep == MODEL_KEEP_NO_SCORES) /* a shard's autocast stores the probabilities rounded, as forward did */
        rnd(m, m->acts[l].att, (size_t)m->B * m->T * m->dims.NH * m->T);
    m->recomputing = false;
}

void model_backward(model *m, float loss_scale) { model_backward_stage(m, loss_scale, NULL, NULL); }

void model_backward_stage(model *m, float loss_scale, const float *dhidden_out, float *dhidden_in) {
    MP_ASSERT(m->have_targets, "model_backward needs a forward pass with targets first");
    if (m->lowp && !m->is_shard) {
        model_lowp_backward(m, loss_scale);
        return;
    }
    const model_config *c = &m->cfg;
    const model_dims *d = &m->dims;
    MP_ASSERT(d->head || dhidden_out, "a stage that is not the last needs its output's gradient");
    int B = m->B, T = m->T, N = B * T, C = c->C, HS = d->HS, Nl = slice_rows(m);
    size_t NC = (size_t)N * C, NCl = (size_t)Nl * C; /* the whole sequence, the residual stream's slice */
    global_acts *g = &m->ga;
    float *dsum; /* a column-parallel input gradient summed over tp (f's backward): this rank's slice */

    if (d->head) {
        /* The loss is the mean over counted positions, so each one's gradient is scale / count. */
        float per_position = m->counted ? loss_scale / (float)m->counted : 0.0f;
        for (int i = 0; i < N; i++) g->dloss[i] = per_position;

        model_hook(m->hooks.before_backward, m->hooks.ctx, c->L);
        float *dlogits = g->logits; /* the logits are not needed again: overwrite them in place */
        if (m->shard.tp_size == 1)
            PROF_KERNEL("crossentropy_bwd", prof_cost_crossentropy_backward(N, c->V, c->Vp),
                        crossentropy_backward(dlogits, g->logits, g->lse, m->targets, g->dloss, N, c->V, c->Vp));
        else model_vocab_parallel_loss_backward(dlogits, g->logits, g->lse, m->targets, g->dloss, N, d->Vp, d->v0, c->V);
        rnd(m, dlogits, (size_t)N * d->Vp); /* autocast: a matmul's output gradient in its format */
        memset(g->dln, 0, NC * sizeof(float));
        const float *lnf = gather_sequence(m, g->lnf); /* communication: outside the kernel */
        PROF_KERNEL("matmul_bwd:head", prof_cost_matmul_backward(N, C, d->Vp),
                    matmul_backward(g->dln, m->g.head, NULL, dlogits, lnf, mm_weight(m, m->w.head), N, C, d->Vp));
        dsum = sum_over_tp(m, g->dln, g->seq_part); /* f's backward: the column-parallel head's input gradient */
        rnd(m, dsum, NCl);
        memset(g->dres, 0, NCl * sizeof(float));
        PROF_KERNEL("norm_bwd", prof_cost_norm_backward(Nl, C),
                    model_norm_backward(m, g->dres, m->g.lnfw, m->g.lnfb, dsum, block_input(m, d->last), m->w.lnfw,
                                        g->lnf_mean, g->lnf_rstd, Nl));
        model_grads_ready(m, c->L);
    } else {
        memcpy(g->dres, dhidden_out, NCl * sizeof(float));
    }

    /* dres holds dLoss/d(residual stream) at the block's output; each block adds its branches' share. */
    for (int l = d->last - 1; l >= d->first; l--) {
        PROF_BEGIN("block_bwd");
        model_hook(m->hooks.before_backward, m->hooks.ctx, l);
        model_recompute_block(m, l); /* after the hook: a ZeRO-3 gather there brings the weights it reads */
        const layer_params *w = &m->layer_w[l];
        layer_params *dw = &m->layer_g[l];
        layer_acts *a = &m->acts[l];
        const float *residual = block_input(m, l);
        /* Autocast: the residual's gradient enters each projection's backward rounded; sequence parallel:
         * all-gathered (projection_grad). */
        const float *dproj = projection_grad(m);
        /* MLP branch: res3 = res2 + fcproj(act(fc(norm2(res2)))) */
        memset(g->dfch_act, 0, (size_t)N * d->F * sizeof(float));
        PROF_KERNEL("matmul_bwd:fcproj", prof_cost_matmul_backward(N, d->F, C),
                    matmul_backward(g->dfch_act, dw->fcprojw, dw->fcprojb, dproj, a->fch_act, mm_weight(m, w->fcprojw),
                                    N, d->F, C));
        rnd(m, g->dfch_act, (size_t)N * d->F);
        memset(g->dfch, 0, (size_t)N * d->FC * sizeof(float));
        if (c->arch == MODEL_GPT2)
            PROF_KERNEL("gelu_bwd", prof_cost_elementwise((double)N * d->F, 14, 2, 2),
                        gelu_backward(g->dfch, a->fch, g->dfch_act, (long)N * d->F));
        else
            PROF_KERNEL("swiglu_bwd", prof_cost_swiglu_backward(N, d->F),
                        swiglu_backward(g->dfch, g->dfch_act, a->fch, N, d->F));
        rnd(m, g->dfch, (size_t)N * d->FC);
        memset(g->dln, 0, NC * sizeof(float));
        const float *ln2 = gather_sequence(m, a->ln2);
        PROF_KERNEL("matmul_bwd:fc", prof_cost_matmul_backward(N, C, d->FC),
                    matmul_backward(g->dln, dw->fcw, dw->fcb, g->dfch, ln2, mm_weight(m, w->fcw), N, C, d->FC));
        dsum = sum_over_tp(m, g->dln, g->seq_part); /* f's backward: fc is column-parallel */
        rnd(m, dsum, NCl);
        PROF_KERNEL("norm_bwd", prof_cost_norm_backward(Nl, C),
                    model_norm_backward(m, g->dres, dw->ln2w, dw->ln2b, dsum, a->res2, w->ln2w, a->ln2_mean, a->ln2_rstd, Nl));
        /* attention branch: res2 = res + attproj(attention(qkv(norm1(res)))) */
        dproj = projection_grad(m);
        memset(g->datty, 0, (size_t)N * d->ATT * sizeof(float));
        PROF_KERNEL("matmul_bwd:attproj", prof_cost_matmul_backward(N, d->ATT, C),
                    matmul_backward(g->datty, dw->attprojw, dw->attprojb, dproj, a->atty, mm_weight(m, w->attprojw), N,
                                    d->ATT, C));
        rnd(m, g->datty, (size_t)N * d->ATT);
        memset(g->dqkv, 0, (size_t)N * d->QKV * sizeof(float));
        PROF_KERNEL("attention_bwd", prof_cost_attention_backward(B, T, d->NH, HS),
                    attention_backward(g->dqkv, g->datty, a->qkv, a->att, B, T, d->NH, d->KVH, HS));
        if (c->arch == MODEL_LLAMA) rope_backward(g->dqkv, B, T, d->NH, d->KVH, HS, c->rope_theta);
        rnd(m, g->dqkv, (size_t)N * d->QKV);
        memset(g->dln, 0, NC * sizeof(float));
        const float *ln1 = gather_sequence(m, a->ln1);
        PROF_KERNEL("matmul_bwd:qkv", prof_cost_matmul_backward(N, C, d->QKV),
                    matmul_backward(g->dln, dw->qkvw, dw->qkvb, g->dqkv, ln1, mm_weight(m, w->qkvw), N, C, d->QKV));
        dsum = sum_over_tp(m, g->dln, g->seq_part); /* f's backward: qkv is column-parallel */
        rnd(m, dsum, NCl);
        PROF_KERNEL("norm_bwd", prof_cost_norm_backward(Nl, C),
                    model_norm_backward(m, g->dres, dw->ln1w, dw->ln1b, dsum, residual, w->ln1w, a->ln1_mean, a->ln1_rstd, Nl));
        model_grads_ready(m, l);
        PROF_END("block_bwd");
    }
    if (d->embed) {
        model_hook(m->hooks.before_backward, m->hooks.ctx, -1);
        if (m->shard.tp_size == 1)
            PROF_KERNEL("encoder_bwd", prof_cost_encoder_backward(N, C), encoder_backward(m->g.wte, m->g.wpe, g->dres, m->inputs, B, T, C, c->V));
        else vocab_parallel_embed_backward(m, B, T);
        model_grads_ready(m, -1);
    } else {
        MP_ASSERT(dhidden_in, "a stage that is not the first hands its input's gradient back");
        memcpy(dhidden_in, g->dres, NCl * sizeof(float));
    }
    m->have_targets = false; /* the logits now hold gradients: a second backward would be wrong */
}
