/* parallel.c: the planner's bytes per rank under tensor and pipeline parallelism (plan/parallel.h). */
#include "plan/parallel.h"

#include "base/error.h"

#include <string.h>

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static void check_split(const plan_model *m, const plan_parallel *par) {
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

/* Activation bytes of one block and micro-batch on one tp rank, and of the block rebuilt under full recompute. */
static void block_acts(const plan_model *m, const plan_run *run, uint64_t t, uint64_t *kept, uint64_t *working) {
    const plan_arch_info *arch = plan_arch_get(m->arch);
    uint64_t sb = run->seq * run->batch, h = m->hidden, kv = m->kv_heads * (m->hidden / m->heads);
    uint64_t act = plan_dtype_bytes(plan_recipe_get(run->recipe)->acts);
    uint64_t whole = 4 * sb * h, split = (2 * sb * h + 2 * sb * kv + arch->mlp_matrices * sb * m->ffn) / t;
    uint64_t scores = m->heads * run->seq * run->seq * run->batch / t;
    uint64_t masks = run->dropout ? 2 * sb * h : 0;
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
    check_split(m, par);
    const plan_arch_info *arch = plan_arch_get(m->arch);
    uint64_t t = par->tp, p = par->pp, h = m->hidden, mb = par->micro_batches, v = par->chunks > 1 ? par->chunks : 1;
    uint64_t sb = run->seq * run->batch, act = plan_dtype_bytes(plan_recipe_get(run->recipe)->acts);
    /* One block on one tp rank: norms and the row-parallel biases whole, the rest split. */
    uint64_t whole = 2 * arch->norm_vectors * h + (arch->linear_bias ? 2 * h : 0);
    uint64_t block = whole + (plan_block_params(m) - whole) / t;
    uint64_t vocab_rows = ceil_div(m->vocab, t) * h;
    uint64_t kept, working;
    block_acts(m, run, t, &kept, &working);
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
            outside += run->dropout ? sb * h : 0; /* the embedding's dropout mask */
        }
        if (s == p - 1) {
            st->params += arch->norm_vectors * h + (!m->tied_head || p > 1 ? vocab_rows : 0);
            outside += 2 * sb * h * act + 4 * sb * ceil_div(m->vocab, t); /* norm and head inputs, fp32 logits */
        }
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
