/* plan.c: the memory planner's arithmetic: parameter counts, model-state bytes under ZeRO, activation bytes. */
#include "plan/plan.h"

#include <string.h>

#include "base/error.h"
#include "base/lab.h"

/* Lab 01 is the seven regions below, one idea each. The tables they read (architectures, formats, recipes,
 * optimizers) are in tables.c; the checks that keep every product inside 64 bits are in check.c.
 * Letters as in plan.h: L h a g d F V T s b N Psi. */

/* ------------------------------------------------------------------ parameters */

uint64_t plan_block_params(const plan_model *m) {
    const plan_arch_info *arch = plan_arch_get(m->arch);
    uint64_t h = m->hidden, F = m->ffn;
    uint64_t kv = m->kv_heads * (m->hidden / m->heads); /* g*d: the width of K and of V */
    /* LAB 01 BEGIN parameters of one block: attention, MLP, norms, biases */
    /* Attention: W_q and W_o are h x h; W_k and W_v map h channels to g*d (h x h without GQA). */
    uint64_t attention = 2 * h * h + 2 * h * kv;
    /* MLP: GELU has up (h -> F) and down (F -> h); SwiGLU adds a gate (h -> F). */
    uint64_t mlp = arch->mlp_matrices * h * F;
    /* Two norms, each with norm_vectors vectors of h (LayerNorm: weight and bias; RMSNorm: weight). */
    uint64_t norms = 2 * arch->norm_vectors * h;
    /* One bias per output channel of each linear: q,k,v (h + 2*g*d), attention output (h), the
     * F-wide MLP matrices (F each), MLP down (h). */
    uint64_t biases = arch->linear_bias ? (h + 2 * kv) + h + (arch->mlp_matrices - 1) * F + h : 0;
    return attention + mlp + norms + biases;
    /* LAB 01 END */
}

uint64_t plan_model_params(const plan_model *m) {
    const plan_arch_info *arch = plan_arch_get(m->arch);
    uint64_t h = m->hidden, V = m->vocab, T = m->context, L = m->layers;
    /* LAB 01 BEGIN parameters of the model: embeddings, L blocks, final norm, output head */
    uint64_t token_embedding = V * h;
    uint64_t position_embedding = arch->learned_positions ? T * h : 0; /* rotary positions have no weights */
    uint64_t blocks = L * plan_block_params(m);
    uint64_t final_norm = arch->norm_vectors * h;
    uint64_t head = m->tied_head ? 0 : V * h; /* a tied head is the token embedding, counted once */
    return token_embedding + position_embedding + blocks + final_norm + head;
    /* LAB 01 END */
}

/* ------------------------------------------------------------------ model states */

void plan_bytes_per_param(plan_recipe recipe, plan_optimizer optimizer, uint64_t per_param[MEM_NTAGS]) {
    const plan_recipe_info *r = plan_recipe_get(recipe);
    unsigned states = plan_optimizer_get(optimizer)->states;
    memset(per_param, 0, MEM_NTAGS * sizeof per_param[0]);
    /* LAB 01 BEGIN bytes per parameter: working weights, gradients, fp32 master copy, optimizer states */
    per_param[MEM_PARAM] = plan_dtype_bytes(r->weights);
    per_param[MEM_GRAD] = plan_dtype_bytes(r->grads);
    /* The master copy exists only in the mixed recipes; it is always fp32: the optimizer updates it, and
     * an update smaller than half a 16-bit ulp would otherwise be lost. */
    per_param[MEM_MASTER] = r->master ? plan_dtype_bytes(PLAN_FP32) : 0;
    /* Each optimizer state is one more tensor of the parameter's shape (Adam: m and v). */
    per_param[MEM_OPTIM] = states * plan_dtype_bytes(r->states);
    /* LAB 01 END */
}

void plan_model_state_bytes(uint64_t params, const plan_run *run, uint64_t bytes[MEM_NTAGS]) {
    uint64_t per_param[MEM_NTAGS];
    plan_bytes_per_param(run->recipe, run->optimizer, per_param);
    memset(bytes, 0, MEM_NTAGS * sizeof bytes[0]);
    /* LAB 01 BEGIN ZeRO: which states a stage shards over the N ranks, and how many elements a rank keeps */
    /* Stage 1 (P_os) shards the optimizer states and the master weights, stage 2 (P_os+g) also the
     * gradients, stage 3 (P_os+g+p) also the working weights. */
    static const int sharded_from_stage[MEM_NTAGS] = {
        [MEM_PARAM] = 3, [MEM_GRAD] = 2, [MEM_MASTER] = 1, [MEM_OPTIM] = 1};
    /* A sharded state is one flat buffer padded to a multiple of N: each rank holds ceil(Psi/N). */
    uint64_t shard = (params + run->world - 1) / run->world;
    for (int tag = MEM_PARAM; tag <= MEM_OPTIM; tag++) {
        uint64_t held = run->zero_stage >= sharded_from_stage[tag] ? shard : params;
        bytes[tag] = held * per_param[tag];
    }
    /* LAB 01 END */
}

/* ------------------------------------------------------------------ activations */

uint64_t plan_block_activation_bytes(const plan_model *m, const plan_run *run, bool keep_scores) {
    const plan_arch_info *arch = plan_arch_get(m->arch);
    uint64_t s = run->seq, b = run->batch, h = m->hidden, a = m->heads, F = m->ffn;
    uint64_t kv = m->kv_heads * (m->hidden / m->heads); /* g*d */
    uint64_t act_bytes = plan_dtype_bytes(plan_recipe_get(run->recipe)->acts);
    bool dropout = run->dropout;
    /* LAB 01 BEGIN activations of one block: the tensors backward reads, in elements, then bytes */
    uint64_t sb = s * b; /* tokens in the micro-batch */
    /* Elements kept in the recipe's activation format (Korthikanti et al. 2022, section 4.1):
     *   inputs of the two norms                                       2 sbh
     *   attention: QKV-projection input, Q, K, V, output-proj input   3 sbh + 2 sb*g*d
     *   MLP: first input, then each F-wide tensor (GELU: its input and output; SwiGLU: gate, up, product)
     *                                                                 sbh + mlp_matrices * sbF
     * For GPT-2 (g*d = h, F = 4h) that is 16 sbh. */
    uint64_t elements = 2 * sb * h + (3 * sb * h + 2 * sb * kv) + (sb * h + arch->mlp_matrices * sb * F);
    /* Dropout keeps a 1-byte mask after attention and after the MLP: 2 sbh bytes. */
    uint64_t mask_bytes = dropout ? 2 * sb * h : 0;
    if (keep_scores) {
        /* The softmax probabilities, one s x s map per head: a s^2 b. With dropout, their dropped-out copy
         * (which multiplies V) and its mask are kept too; without, the probabilities multiply V themselves. */
        uint64_t scores = a * s * s * b;
        elements += dropout ? 2 * scores : scores;
        mask_bytes += dropout ? scores : 0;
    }
    /* 16-bit GPT-2 with dropout: 2 * (16 sbh + 2 as^2b) + (2 sbh + as^2b) = sbh(34 + 5as/h). */
    return elements * act_bytes + mask_bytes;
    /* LAB 01 END */
}

void plan_activation_bytes(const plan_model *m, const plan_run *run, plan_activations *out) {
    uint64_t sb = run->seq * run->batch, h = m->hidden, V = m->vocab, L = m->layers;
    uint64_t act_bytes = plan_dtype_bytes(plan_recipe_get(run->recipe)->acts);
    memset(out, 0, sizeof *out);
    /* LAB 01 BEGIN activations of the model: the recompute policy, then what lives outside the blocks */
    out->block_full = plan_block_activation_bytes(m, run, true);
    switch (run->recompute) {
    case PLAN_RECOMPUTE_NONE:
        out->block_kept = out->block_full;
        break;
    case PLAN_RECOMPUTE_SELECTIVE: /* drop the a s^2 b terms; rerun softmax(QK^T) in backward */
        out->block_kept = plan_block_activation_bytes(m, run, false);
        break;
    case PLAN_RECOMPUTE_FULL: /* keep the block's input (sbh); rebuild one block's full set at a time */
        out->block_kept = sb * h * act_bytes;
        out->working_set = out->block_full;
        break;
    default:
        break;
    }
    /* Outside the blocks: the final norm's input and the head's input (2 sbh elements), the embedding
     * dropout mask (sbh bytes), and the logits, which the softmax cross-entropy keeps in fp32 (4 sbV). */
    out->outside = 2 * sb * h * act_bytes + (run->dropout ? sb * h : 0) + 4 * sb * V;
    out->total = L * out->block_kept + out->working_set + out->outside;
    /* LAB 01 END */
}

/* ------------------------------------------------------------------ everything at once */

static void fail_on(bool ok, const plan_problem *why) {
    if (ok) return;
    if (why->hint[0]) MP_FAIL_HINT(why->expected, why->hint, "%s", why->found);
    MP_FAIL(why->expected, "%s", why->found);
}

/* ZeRO-Offload (plan.h): the optimizer's partition of master and states to the host, with a gradient buffer. */
static void move_to_host(uint64_t params, const plan_run *run, plan_result *out) {
    if (!run->offload) return;
    uint64_t partition = run->zero_stage >= 1 ? out->shard_elements : params;
    uint64_t fp32 = plan_dtype_bytes(PLAN_FP32);
    out->bytes[MEM_HOST] = partition * (fp32 /* master */ + fp32 /* gradients */) + out->bytes[MEM_OPTIM];
    out->bytes[MEM_MASTER] = 0;
    out->bytes[MEM_OPTIM] = 0;
}

static void fill_model_states(uint64_t params, const plan_run *run, plan_result *out) {
    out->params = params;
    out->shard_elements = (params + run->world - 1) / run->world;
    plan_bytes_per_param(run->recipe, run->optimizer, out->per_param);
    plan_model_state_bytes(params, run, out->bytes);
    move_to_host(params, run, out);
    out->model_state_bytes = 0;
    for (int tag = MEM_PARAM; tag <= MEM_OPTIM; tag++) out->model_state_bytes += out->bytes[tag];
    out->total_bytes = out->model_state_bytes;
}

void plan_compute_params(uint64_t params, const plan_run *run, plan_result *out) {
    plan_problem why;
    fail_on(plan_run_check(NULL, run, &why), &why);
    if (params == 0 || (double)params * 16 > 4.6e18)
        MP_FAIL("a parameter count from 1 to 2.8e17", "%llu", (unsigned long long)params);
    memset(out, 0, sizeof *out);
    fill_model_states(params, run, out);
}

void plan_compute(const plan_model *m, const plan_run *run, plan_result *out) {
    plan_problem why;
    fail_on(plan_run_check(m, run, &why), &why);
    memset(out, 0, sizeof *out);
    fill_model_states(plan_model_params(m), run, out);
    plan_activation_bytes(m, run, &out->act);
    out->has_activations = true;
    out->bytes[MEM_ACT] = out->act.total;
    out->total_bytes = out->model_state_bytes + out->act.total;
    if (run->zero_stage == 3) out->zero3_gather_bytes = plan_block_params(m) * out->per_param[MEM_PARAM];
}

/* ------------------------------------------------------------------ the compute budget */

void plan_training_budget(const plan_model *m, uint64_t seq, const plan_budget_in *in, plan_budget *out) {
    MP_ASSERT(m && in && out && seq >= 1 && in->gpus >= 1 && in->peak_flops > 0 && in->mfu > 0 && in->mfu <= 1 &&
              in->tokens >= 0, "a budget for %g GPUs at MFU %g", in ? in->gpus : 0, in ? in->mfu : 0);
    memset(out, 0, sizeof *out);
    out->params = plan_model_params(m);
    /* LAB 01 BEGIN compute budget: 6 N D + 12 L s h D FLOPs, Chinchilla's 20 tokens per parameter, time on G GPUs */
    double N = (double)out->params;
    out->tokens = in->tokens > 0 ? in->tokens : PLAN_CHINCHILLA_TOKENS_PER_PARAM * N;
    out->dense_flops = 6 * N * out->tokens;
    out->attention_flops = 12.0 * (double)m->layers * (double)seq * (double)m->hidden * out->tokens;
    out->total_flops = out->dense_flops + out->attention_flops;
    out->seconds = out->total_flops / (in->gpus * in->peak_flops * in->mfu);
    out->gpu_hours = out->seconds * in->gpus / 3600;
    out->days = out->seconds / 86400;
    /* LAB 01 END */
}
