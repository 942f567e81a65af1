/* mp_step.c: the 3D-parallel step: pipeline, tied-embedding and data-parallel gradient reductions, the mesh-wide norm and clip, the shard's optimizer update. */
#include "train/mp_step.h"

#include "base/error.h"
#include "dist/sp.h"
#include "dist/tp.h"
#include "model/model_lowp.h"
#include "optim/clip.h"
#include "prof/prof.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct mp_step {
    mesh_t *mesh;
    model **m;           /* (v) this rank's model chunks */
    int v;
    pp *pipe;
    int *first;          /* (pp v + 1) virtual stage boundaries */
    optim_config opt;
    optim_state state;
    optim_span *spans;   /* one per tensor of every chunk, chunk by chunk */
    bool *in_norm;       /* (spans) the tensor counts in the global norm on this rank */
    int nspans;
    double grad_clip;
    /* ZeRO-1 over dp: the optimizer updates the pieces of the tensors inside this dp rank's shard of each
     * chunk's flat buffer, then the dp group all-gathers the updated shards. */
    bool zero1;
    optim_span *update;  /* (nupdate) what the optimizer steps: spans, or their pieces in the shard */
    int nupdate;
    size_t *shard;       /* (v) elements of one dp rank's shard of chunk j (ceil(n_j / dp)) */
    float *gather;       /* (dp x the largest shard) the all-gather's buffer (MEM_COMM) */
    /* mixed precision (mp_step_set_amp) */
    const amp_recipe_info *amp; /* NULL: fp32 */
    amp_scaler scaler;
    clip_span *clips;    /* (v) each chunk's whole gradient buffer, for the unscale */
    long attempts;       /* mp_step_run calls so far */
    long inject_at;      /* mp_step_inject_inf's attempt, or -1 */
};

/* The sum of one double per rank, added in rank order on every rank (comm.h has no fp64: the doubles
 * travel as their 8 bytes; dist/zero.c's zero_sum_over_ranks does the same over its group). */
static double sum_over(comm_t *c, double local) {
    int n = comm_size(c);
    int64_t mine, *all = malloc((size_t)n * sizeof *all);
    MP_ASSERT(all, "out of memory");
    memcpy(&mine, &local, sizeof mine);
    comm_allgather(c, &mine, all, 1, COMM_INT64, COMM_ALGO_NATIVE);
    double total = 0;
    for (int r = 0; r < n; r++) {
        double x;
        memcpy(&x, &all[r], sizeof x);
        total += x;
    }
    free(all);
    return total;
}

mp_step *mp_step_create(comm_t *world, const model_config *cfg, const mp_layout *lay, const optim_config *opt,
                        double grad_clip, uint64_t seed, ev_writer *ev) {
    model_config mc = *cfg;
    model_config_complete(&mc);
    if (lay->micro_batches < 1)
        MP_FAIL("micro_batches >= 1", "micro_batches = %d", lay->micro_batches);
    if ((lay->tp > 1 || lay->zero_stage > 0) && opt->kind == OPTIM_LAMB)
        MP_FAIL_HINT("an elementwise optimizer with tensor_model_parallel_size > 1 or ZeRO",
                     "LAMB's trust ratio needs whole-tensor norms: use adamw, adam, momentum or sgd",
                     "optimizer LAMB with tensor_model_parallel_size = %d, ZeRO stage %d", lay->tp, lay->zero_stage);
    if (lay->zero_stage < 0 || lay->zero_stage > 1)
        MP_FAIL_HINT("zero_optimization.stage 0 or 1 with tensor or pipeline parallel",
                     "ZeRO-1 shards the optimizer states over the dp group; stages 2 and 3 are not wired up here",
                     "stage %d", lay->zero_stage);
    mp_step *s = calloc(1, sizeof *s);
    MP_ASSERT(s, "out of memory");
    s->v = lay->chunks > 1 ? lay->chunks : 1;
    int virtual_stages = lay->pp * s->v;
    pp_check_schedule(lay->schedule, lay->pp, lay->micro_batches, s->v);
    s->first = malloc((size_t)(virtual_stages + 1) * sizeof(int));
    s->m = calloc((size_t)s->v, sizeof *s->m);
    MP_ASSERT(s->first && s->m, "out of memory");
    /* Shapes first (exit 2 on every rank alike), then the groups. */
    if (lay->stage_blocks) pp_stages_from_list(&mc, virtual_stages, lay->stage_blocks, s->first);
    else pp_balance_stages(&mc, virtual_stages, s->first);
    s->mesh = mesh_create(world, lay->dp, lay->tp, lay->pp);
    for (int j = 0; j < s->v; j++) {
        int vs = j * lay->pp + s->mesh->pp_rank;
        model_shard sh = lay->sequence_parallel ? sp_model_shard(s->mesh, s->first[vs], s->first[vs + 1])
                                                : tp_model_shard(s->mesh, s->first[vs], s->first[vs + 1]);
        s->m[j] = model_create_shard(&mc, &sh);
        model_init(s->m[j], seed);
    }
    s->pipe = pp_create(s->mesh, s->m, s->v, lay->schedule, lay->micro_batches, ev);
    s->opt = *opt;
    s->grad_clip = grad_clip;
    for (int j = 0; j < s->v; j++) {
        int n;
        model_tensors(s->m[j], &n);
        s->nspans += n;
    }
    s->spans = calloc((size_t)s->nspans, sizeof *s->spans);
    s->in_norm = calloc((size_t)s->nspans, sizeof *s->in_norm);
    MP_ASSERT(s->spans && s->in_norm, "out of memory");
    int at = 0;
    for (int j = 0; j < s->v; j++) {
        int n;
        const model_tensor *t = model_tensors(s->m[j], &n);
        for (int i = 0; i < n; i++, at++) {
            s->spans[at] = (optim_span){model_params(s->m[j]) + t[i].offset, model_grads(s->m[j]) + t[i].offset,
                                        t[i].size, t[i].decay};
            s->in_norm[at] = (!model_tensor_tp_replicated(s->m[j], &t[i]) || s->mesh->tp_rank == 0) &&
                             !model_tensor_is_tied_copy(s->m[j], &t[i]);
        }
    }
    s->inject_at = -1;
    s->zero1 = lay->zero_stage == 1 && s->mesh->dp_size > 1;
    if (!s->zero1) {
        s->update = s->spans, s->nupdate = s->nspans;
        optim_state_init(&s->state, opt->kind, mp_step_params(s));
        return s;
    }
    /* ZeRO-1: this dp rank's shard [r z, r z + z) of each chunk's buffer, z = ceil(n / dp); the tensors'
     * pieces inside it keep their weight-decay flag. */
    int dp = s->mesh->dp_size, r = s->mesh->dp_rank;
    s->shard = calloc((size_t)s->v, sizeof *s->shard);
    s->update = calloc((size_t)s->nspans, sizeof *s->update);
    MP_ASSERT(s->shard && s->update, "out of memory");
    size_t owned = 0, biggest = 0;
    at = 0;
    for (int j = 0; j < s->v; j++) {
        size_t n = model_num_params(s->m[j]), z = (n + (size_t)dp - 1) / (size_t)dp;
        size_t lo = (size_t)r * z < n ? (size_t)r * z : n, hi = lo + z < n ? lo + z : n;
        s->shard[j] = z, biggest = z > biggest ? z : biggest;
        int count;
        const model_tensor *t = model_tensors(s->m[j], &count);
        for (int i = 0; i < count; i++, at++) {
            size_t a = t[i].offset > lo ? t[i].offset : lo, b = t[i].offset + t[i].size < hi ? t[i].offset + t[i].size : hi;
            if (a >= b) continue;
            s->update[s->nupdate++] = (optim_span){model_params(s->m[j]) + a, model_grads(s->m[j]) + a, b - a,
                                                   s->spans[at].decay};
            owned += b - a;
        }
    }
    s->gather = mem_alloc(biggest * (size_t)dp * sizeof(float), MEM_COMM, "zero1.gather");
    optim_state_init(&s->state, opt->kind, owned);
    return s;
}

/* ZeRO-1: every dp rank's updated shard of each chunk, gathered into every rank's weights. */
static void gather_shards(mp_step *s) {
    int r = s->mesh->dp_rank;
    for (int j = 0; j < s->v; j++) {
        size_t n = model_num_params(s->m[j]), z = s->shard[j], lo = (size_t)r * z;
        float *w = model_params(s->m[j]), *mine = s->gather + (size_t)r * z;
        memset(mine, 0, z * sizeof(float));
        if (lo < n) memcpy(mine, w + lo, (lo + z < n ? z : n - lo) * sizeof(float));
        comm_allgather(s->mesh->dp, mine, s->gather, z, COMM_FP32, COMM_ALGO_DEFAULT);
        memcpy(w, s->gather, n * sizeof(float)); /* the padding past n stays behind */
    }
}

void mp_step_free(mp_step *s) {
    if (!s) return;
    optim_state_free(&s->state);
    pp_free(s->pipe);
    for (int j = 0; j < s->v; j++) model_free(s->m[j]);
    mesh_free(s->mesh);
    free(s->m);
    free(s->spans);
    free(s->in_norm);
    if (s->zero1) free(s->update);
    free(s->shard);
    mem_free(s->gather);
    free(s->first);
    free(s->clips);
    free(s);
}

void mp_step_set_amp(mp_step *s, amp_recipe recipe, const amp_scaler_config *scaler) {
    const amp_recipe_info *info = amp_recipe_get(recipe);
    if (recipe == AMP_RECIPE_FP32) return;
    if (!info->autocast || info->fp8_matmul || (info->low != &FP_BF16 && info->low != &FP_FP16))
        MP_FAIL_HINT("precision recipe fp32, bf16 or fp16 with tensor or pipeline parallel",
                     "the shards compute under autocast with fp32 weights; recipes that store the weights low "
                     "(bf16-pure, fp16-o2) and tf32 / fp8 matmuls are not wired up for shards", "recipe %s",
                     info->name);
    model_precision prec = {.compute = info->low == &FP_FP16 ? MODEL_COMPUTE_FP16 : MODEL_COMPUTE_BF16};
    for (int j = 0; j < s->v; j++) model_set_precision(s->m[j], &prec);
    s->amp = info;
    amp_scaler_init(&s->scaler, scaler);
    s->clips = calloc((size_t)s->v, sizeof *s->clips);
    MP_ASSERT(s->clips, "out of memory");
    for (int j = 0; j < s->v; j++) s->clips[j] = (clip_span){model_grads(s->m[j]), model_num_params(s->m[j])};
}

amp_scaler *mp_step_scaler(mp_step *s) { return s->amp ? &s->scaler : NULL; }
void mp_step_inject_inf(mp_step *s, long attempt) { s->inject_at = attempt; }

mesh_t *mp_step_mesh(mp_step *s) { return s->mesh; }
int mp_step_chunks(const mp_step *s) { return s->v; }
model *mp_step_model(mp_step *s, int chunk) { return s->m[chunk]; }
pp *mp_step_pipeline(mp_step *s) { return s->pipe; }
const int *mp_step_stages(const mp_step *s) { return s->first; }

size_t mp_step_params(const mp_step *s) {
    size_t n = 0;
    for (int j = 0; j < s->v; j++) n += model_num_params(s->m[j]);
    return n;
}

/* The global norm of the gradients (each piece counted once over the mp group: tp x pp), the clip, the
 * optimizer on this rank's spans (ZeRO-1: its pieces, then the dp all-gather). Returns whether it stepped:
 * a non-finite norm (the same on every rank) skips. */
static bool clip_and_update(mp_step *s, mp_step_result *r, double lr) {
    double local = 0;
    for (int i = 0; i < s->nspans; i++)
        if (s->in_norm[i]) local += clip_sum_squares(s->spans[i].grad, s->spans[i].n);
    r->grad_norm = clip_norm_finish(sum_over(s->mesh->mp, local));
    if (!clip_norm_is_finite(r->grad_norm)) return false; /* the same norm on every rank: the same decision */
    float scale = s->grad_clip > 0 ? clip_scale_for(r->grad_norm, s->grad_clip) : 1.0f;
    r->clipped = scale != 1.0f;
    if (r->clipped)
        for (int j = 0; j < s->v; j++) clip_scale(model_grads(s->m[j]), model_num_params(s->m[j]), scale);
    optim_step(&s->opt, &s->state, s->update, s->nupdate, lr);
    if (s->zero1) gather_shards(s);
    return true;
}

/* The end of an AMP step (mp_step.h, "Mixed precision"): unscale, found_inf over the mesh, clip and step
 * or skip, the scaler's update. */
static void amp_finish(mp_step *s, mp_step_result *r, double lr) {
    if (s->inject_at == s->attempts && s->v > 0 && s->clips[0].n > 0) s->clips[0].data[0] = INFINITY;
    r->found_inf_local = amp_scaler_unscale(&s->scaler, s->clips, s->v);
    float flag = r->found_inf_local ? 1.0f : 0.0f; /* a skip anywhere on the mesh is a skip everywhere */
    comm_allreduce(s->mesh->world, &flag, &flag, 1, COMM_FP32, COMM_MAX, COMM_ALGO_NATIVE);
    bool found_inf = flag != 0.0f;
    r->grad_norm = NAN;
    if (!found_inf && !clip_and_update(s, r, lr)) found_inf = true; /* finite everywhere, yet an inf norm */
    r->update = amp_scaler_update(&s->scaler, found_inf);
    r->skipped = r->update.skipped;
}

mp_step_result mp_step_run(mp_step *s, const int *inputs, const int *targets, int B, int T, double lr, long step) {
    mp_step_result r = {0};
    mesh_t *mesh = s->mesh;
    for (int j = 0; j < s->v; j++) model_zero_grad(s->m[j]);
    float loss_scale = s->amp ? amp_scaler_scale(&s->scaler) : 1.0f;
    /* The profiler's phases (train.profile, lab 23): the schedule's forwards and backwards interleave, so they are one
     * span; the gradients' reductions after it are all exposed; then the update. */
    PROF_BEGIN("pipeline");
    r.loss = pp_run(s->pipe, inputs, targets, B, T, loss_scale, step);
    PROF_END("pipeline");
    PROF_BEGIN("grad_sync_wait");
    for (int j = 0; j < s->v; j++) sp_sum_partial_grads(mesh->tp, s->m[j]); /* nothing without sequence parallel */
    pp_sum_tied_grads(s->pipe);
    if (mesh->dp_size > 1) {
        for (int j = 0; j < s->v; j++)
            comm_allreduce(mesh->dp, model_grads(s->m[j]), model_grads(s->m[j]), model_num_params(s->m[j]),
                           COMM_FP32, COMM_AVG, COMM_ALGO_DEFAULT);
        comm_allreduce(mesh->dp, &r.loss, &r.loss, 1, COMM_FP32, COMM_AVG, COMM_ALGO_DEFAULT);
    }
    PROF_END("grad_sync_wait");
    PROF_BEGIN("optimizer");
    if (s->amp) {
        amp_finish(s, &r, lr);
    } else {
        r.skipped = !clip_and_update(s, &r, lr);
        r.update = (amp_update){.skipped = r.skipped, .scale = 1, .next_scale = 1, .status = AMP_SCALER_OK};
    }
    PROF_END("optimizer");
    s->attempts++;
    return r;
}

optim_state *mp_step_optim_state(mp_step *s) { return &s->state; }
const optim_span *mp_step_state_spans(const mp_step *s, int *count) {
    *count = s->nupdate;
    return s->update;
}
bool mp_step_zero1(const mp_step *s) { return s->zero1; }
