/* parallel.c: the planner's bytes per rank under tensor and pipeline parallelism (plan/parallel.h). */
#include "plan/parallel.h"

#include "base/error.h"

#include <string.h>

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static void check_split(const plan_model *m, const plan_run *run, const plan_parallel *par) {
    const struct {
        const char *what;
        uint64_t n;
    } split[] = {{"heads", m->heads}, {"kv heads", m->kv_heads}, {"ffn", m->ffn}};
    if (par->tp < 1 || par->pp < 1 || par->micro_batches < 1)
        MP_FAIL("--tp, --pp and --micro-batches of at least 1", "tp %llu, pp %llu, micro-batches %llu",
                (unsigned long long)par->tp, (unsigned long long)par->pp, (unsigned long long)par->micro_batches);
    for (size_t i = 0; i < sizeof split / sizeof split[0]; i++)
        if (split[i].n % par->tp != 0)
            MP_FAIL_HINT("--tp dividing the heads, the kv heads and the MLP size",
                         "tensor parallel splits attention by heads and the MLP by columns",
                         "%s = %llu with --tp %llu", split[i].what, (unsigned long long)split[i].n,
                         (unsigned long long)par->tp);
    if (par->sequence_parallel && run->seq % par->tp != 0)
        MP_FAIL_HINT("--seq divisible by --tp with --sp",
                     "sequence parallel gives each tp rank s/t positions of every sequence (Megatron-LM asserts the same)",
                     "--seq %llu, --tp %llu", (unsigned long long)run->seq, (unsigned long long)par->tp);
    if (par->course_model && (run->recompute != PLAN_RECOMPUTE_NONE || par->chunks > 1))
        MP_FAIL_HINT("--course-model with --recompute none and no --chunks",
                     "the course model's plan follows core/model's layout without recompute or model chunks",
                     "--recompute %s, --chunks %llu", plan_recompute_name(run->recompute),
                     (unsigned long long)par->chunks);
    if (m->layers < par->pp)
        MP_FAIL_HINT("at least as many layers as pipeline stages", "use a smaller --pp", "%llu layers, --pp %llu",
                     (unsigned long long)m->layers, (unsigned long long)par->pp);
    uint64_t v = par->chunks;
    if (v > 1 && (par->pp < 2 || par->micro_batches % par->pp != 0 || m->layers % (par->pp * v) != 0))
        MP_FAIL_HINT("interleaving with --pp >= 2, --micro-batches a multiple of --pp and layers a multiple of pp x v",
                     "Megatron's interleaved 1F1B runs micro-batches in groups of pp over pp x v equal virtual stages",
                     "--pp %llu, --micro-batches %llu, --chunks %llu, %llu layers", (unsigned long long)par->pp,
                     (unsigned long long)par->micro_batches, (unsigned long long)v, (unsigned long long)m->layers);
}

/* ------------------------------------------------------------------ the course's model (core/model) */

/* Rows of a tensor: the residual stream's (b s, or b s / t under sequence parallel) or the whole sequence's. */
typedef enum { ROWS_SLICE, ROWS_ALL } course_rows;
/* Its width per row on one tp rank. */
typedef enum { W_H, W_MEAN, W_ONE, W_QKV, W_ATT, W_SCORES, W_FC, W_F, W_VOCAB } course_width;
/* Where it exists: every stage, the last stage only, under sequence parallel only. */
typedef enum { ON_ANY, ON_HEAD, ON_SP } course_where;
typedef struct {
    const char *name;
    course_rows rows;
    course_width width;
    course_where where;
} course_tensor;

/* What one block keeps (core/model/model.c's layer_acts, in its order). */
static const course_tensor course_block[] = {
    {"ln1", ROWS_SLICE, W_H, ON_ANY},      {"ln1_mean", ROWS_SLICE, W_MEAN, ON_ANY}, {"ln1_rstd", ROWS_SLICE, W_ONE, ON_ANY},
    {"qkv", ROWS_ALL, W_QKV, ON_ANY},      {"atty", ROWS_ALL, W_ATT, ON_ANY},       {"att", ROWS_ALL, W_SCORES, ON_ANY},
    {"res2", ROWS_SLICE, W_H, ON_ANY},     {"ln2", ROWS_SLICE, W_H, ON_ANY},        {"ln2_mean", ROWS_SLICE, W_MEAN, ON_ANY},
    {"ln2_rstd", ROWS_SLICE, W_ONE, ON_ANY}, {"fch", ROWS_ALL, W_FC, ON_ANY},       {"fch_act", ROWS_ALL, W_F, ON_ANY},
    {"res3", ROWS_SLICE, W_H, ON_ANY},
};
/* What a micro-batch holds outside the blocks (global_acts): outputs, then backward's scratch. */
static const course_tensor course_outside[] = {
    {"encoded", ROWS_SLICE, W_H, ON_ANY},  {"lnf", ROWS_SLICE, W_H, ON_HEAD},     {"lnf_mean", ROWS_SLICE, W_MEAN, ON_HEAD},
    {"lnf_rstd", ROWS_SLICE, W_ONE, ON_HEAD}, {"logits", ROWS_ALL, W_VOCAB, ON_HEAD}, {"losses", ROWS_ALL, W_ONE, ON_HEAD},
    {"lse", ROWS_ALL, W_ONE, ON_HEAD},     {"proj", ROWS_ALL, W_H, ON_ANY},        {"dres", ROWS_SLICE, W_H, ON_ANY},
    {"dln", ROWS_ALL, W_H, ON_ANY},        {"datty", ROWS_ALL, W_ATT, ON_ANY},     {"dqkv", ROWS_ALL, W_QKV, ON_ANY},
    {"dfch", ROWS_ALL, W_FC, ON_ANY},      {"dfch_act", ROWS_ALL, W_F, ON_ANY},    {"dloss", ROWS_ALL, W_ONE, ON_ANY},
    {"seq_full", ROWS_ALL, W_H, ON_SP},    {"seq_part", ROWS_SLICE, W_H, ON_SP},
};

static uint64_t course_width_of(const plan_model *m, const plan_run *run, uint64_t t, course_width w) {
    const plan_arch_info *arch = plan_arch_get(m->arch);
    uint64_t h = m->hidden, kv = m->kv_heads * (m->hidden / m->heads), F = m->ffn;
    /* model.h's padding of the vocabulary: to a multiple of 64 from 1024 tokens on */
    uint64_t Vp = m->vocab >= 1024 ? ceil_div(m->vocab, 64) * 64 : m->vocab;
    switch (w) {
    case W_H: return h;
    case W_MEAN: return arch->norm_vectors == 2 ? 1 : 0; /* LayerNorm keeps its mean; RMSNorm none */
    case W_ONE: return 1;
    case W_QKV: return (h + 2 * kv) / t;
    case W_ATT: return h / t;
    case W_SCORES: return m->heads / t * run->seq; /* per token: its row of every local head's s x s map */
    case W_FC: return (arch->mlp_matrices - 1) * F / t; /* GELU's input; SwiGLU's gate and up */
    case W_F: return F / t;
    case W_VOCAB: return ceil_div(Vp, t);
    }
    return 0;
}

/* Bytes of a list of the course model's tensors for one micro-batch on one tp rank: fp32, each padded to
 * 16 floats (64 bytes), as the model lays them out. */
static uint64_t course_bytes(const course_tensor *list, size_t n, const plan_model *m, const plan_run *run,
                             const plan_parallel *par, bool head) {
    uint64_t t = par->tp, sb = run->seq * run->batch;
    bool sp = par->sequence_parallel && t > 1;
    uint64_t slice = sp ? run->batch * (run->seq / t) : sb, total = 0;
    for (size_t i = 0; i < n; i++) {
        const course_tensor *c = &list[i];
        if ((c->where == ON_HEAD && !head) || (c->where == ON_SP && !sp)) continue;
        uint64_t floats = (c->rows == ROWS_SLICE ? slice : sb) * course_width_of(m, run, t, c->width);
        total += ceil_div(floats, 16) * 16 * sizeof(float);
    }
    return total;
}

/* Activation bytes of one block and micro-batch on one tp rank, and of the block rebuilt under full recompute. */
static void block_acts(const plan_model *m, const plan_run *run, const plan_parallel *par, uint64_t *kept,
                       uint64_t *working) {
    const plan_arch_info *arch = plan_arch_get(m->arch);
    uint64_t t = par->tp, sb = run->seq * run->batch, h = m->hidden, kv = m->kv_heads * (m->hidden / m->heads);
    uint64_t act = plan_dtype_bytes(plan_recipe_get(run->recipe)->acts);
    /* sequence parallel splits what tensor parallel keeps whole (the norms' side) over the sequence too */
    uint64_t seq_split = par->sequence_parallel ? t : 1;
    uint64_t whole = 4 * sb * h / seq_split, split = (2 * sb * h + 2 * sb * kv + arch->mlp_matrices * sb * m->ffn) / t;
    uint64_t scores = m->heads * run->seq * run->seq * run->batch / t;
    uint64_t masks = run->dropout ? 2 * sb * h / seq_split : 0;
    uint64_t without = (whole + split) * act + masks;
    uint64_t with = without + (run->dropout ? 2 * scores * act + scores : scores * act);
    *working = 0;
    switch (run->recompute) {
    case PLAN_RECOMPUTE_SELECTIVE: *kept = without; break;
    case PLAN_RECOMPUTE_FULL: *kept = sb * h * act, *working = with; break;
    default: *kept = with; break;
    }
}

double plan_parallel_stages(const plan_model *m, const plan_run *run, const plan_parallel *par, plan_stage *stages) {
    check_split(m, run, par);
    const plan_arch_info *arch = plan_arch_get(m->arch);
    uint64_t t = par->tp, p = par->pp, h = m->hidden, mb = par->micro_batches, v = par->chunks > 1 ? par->chunks : 1;
    uint64_t sb = run->seq * run->batch, act = plan_dtype_bytes(plan_recipe_get(run->recipe)->acts);
    /* One block on one tp rank: norms and the row-parallel biases whole, the rest split. */
    uint64_t whole = 2 * arch->norm_vectors * h + (arch->linear_bias ? 2 * h : 0);
    uint64_t block = whole + (plan_block_params(m) - whole) / t;
    uint64_t vocab_rows = ceil_div(m->vocab, t) * h;
    uint64_t kept, working, seq_split = par->sequence_parallel ? t : 1;
    block_acts(m, run, par, &kept, &working);
    if (par->course_model) kept = course_bytes(course_block, sizeof course_block / sizeof course_block[0], m, run, par, false);
    uint64_t first = 0;
    for (uint64_t s = 0; s < p; s++) {
        plan_stage *st = &stages[s];
        memset(st, 0, sizeof *st);
        st->first_block = first;
        st->blocks = m->layers / p + (s < m->layers % p ? 1 : 0);
        first += st->blocks;
        st->params = st->blocks * block;
        uint64_t outside = 0; /* activations outside the blocks, per micro-batch */
        if (s == 0) {
            st->params += vocab_rows + (arch->learned_positions ? m->context * h : 0);
            outside += run->dropout ? sb * h / seq_split : 0; /* the embedding's dropout mask */
        }
        if (s == p - 1) {
            st->params += arch->norm_vectors * h + (!m->tied_head || p > 1 ? vocab_rows : 0);
            /* norm and head inputs (sequence parallel: the slice; the head's input is gathered again in
             * backward), fp32 logits */
            outside += 2 * sb * h * act / seq_split + 4 * sb * ceil_div(m->vocab, t);
        }
        if (par->course_model)
            outside = course_bytes(course_outside, sizeof course_outside / sizeof course_outside[0], m, run, par,
                                   s == p - 1);
        st->in_flight = par->gpipe ? mb : (p - s < mb ? p - s : mb);
        st->act_per_micro = st->blocks * kept + outside;
        plan_model_state_bytes(st->params, run, st->bytes);
        st->bytes[MEM_ACT] = st->in_flight * st->act_per_micro + working;
        if (v > 1) { /* chunk-micro-batches, each 1/v of the blocks; the ends' extras once */
            uint64_t warm = 2 * (p - s - 1) + (v - 1) * p + 1;
            st->in_flight = warm < mb * v ? warm : mb * v;
            st->bytes[MEM_ACT] = st->in_flight * (st->blocks * kept / v) + outside + working;
        }
        for (int tag = 0; tag < MEM_NTAGS; tag++)
            if (tag != MEM_HOST) st->total += st->bytes[tag];
    }
    return (double)(p - 1) / (double)(v * mb + p - 1);
}
