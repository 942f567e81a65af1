/* mp_step.c: the 3D-parallel step: pipeline, tied-embedding and data-parallel gradient reductions, the mesh-wide norm and clip, the shard's optimizer update. */
#include "train/mp_step.h"

#include "base/error.h"
#include "dist/tp.h"
#include "optim/clip.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct mp_step {
    mesh_t *mesh;
    model *m;
    pp *pipe;
    int *first;          /* (pp + 1) stage boundaries */
    optim_config opt;
    optim_state state;
    optim_span *spans;   /* one per tensor of the shard */
    bool *in_norm;       /* (spans) the tensor counts in the global norm on this rank */
    int nspans;
    double grad_clip;
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
    if (lay->tp > 1 && opt->kind == OPTIM_LAMB)
        MP_FAIL_HINT("an elementwise optimizer with tensor_model_parallel_size > 1",
                     "LAMB's trust ratio needs whole-tensor norms: use adamw, adam, momentum or sgd",
                     "optimizer LAMB with tensor_model_parallel_size = %d", lay->tp);
    mp_step *s = calloc(1, sizeof *s);
    MP_ASSERT(s, "out of memory");
    s->first = malloc((size_t)(lay->pp + 1) * sizeof(int));
    MP_ASSERT(s->first, "out of memory");
    /* Shapes first (exit 2 on every rank alike), then the groups. */
    if (lay->stage_blocks) pp_stages_from_list(&mc, lay->pp, lay->stage_blocks, s->first);
    else pp_balance_stages(&mc, lay->pp, s->first);
    s->mesh = mesh_create(world, lay->dp, lay->tp, lay->pp);
    int stage = s->mesh->pp_rank;
    model_shard sh = tp_model_shard(s->mesh, s->first[stage], s->first[stage + 1]);
    s->m = model_create_shard(&mc, &sh);
    model_init(s->m, seed);
    s->pipe = pp_create(s->mesh, s->m, lay->schedule, lay->micro_batches, ev);
    s->opt = *opt;
    s->grad_clip = grad_clip;
    int n;
    const model_tensor *t = model_tensors(s->m, &n);
    s->nspans = n;
    s->spans = calloc((size_t)n, sizeof *s->spans);
    s->in_norm = calloc((size_t)n, sizeof *s->in_norm);
    MP_ASSERT(s->spans && s->in_norm, "out of memory");
    for (int i = 0; i < n; i++) {
        s->spans[i] = (optim_span){model_params(s->m) + t[i].offset, model_grads(s->m) + t[i].offset, t[i].size,
                                   t[i].decay};
        s->in_norm[i] = (!model_tensor_tp_replicated(s->m, &t[i]) || s->mesh->tp_rank == 0) &&
                        !model_tensor_is_tied_copy(s->m, &t[i]);
    }
    optim_state_init(&s->state, opt->kind, model_num_params(s->m));
    return s;
}

void mp_step_free(mp_step *s) {
    if (!s) return;
    optim_state_free(&s->state);
    pp_free(s->pipe);
    model_free(s->m);
    mesh_free(s->mesh);
    free(s->spans);
    free(s->in_norm);
    free(s->first);
    free(s);
}

mesh_t *mp_step_mesh(mp_step *s) { return s->mesh; }
model *mp_step_model(mp_step *s) { return s->m; }
pp *mp_step_pipeline(mp_step *s) { return s->pipe; }
const int *mp_step_stages(const mp_step *s) { return s->first; }

mp_step_result mp_step_run(mp_step *s, const int *inputs, const int *targets, int B, int T, double lr, long step) {
    mp_step_result r = {0};
    mesh_t *mesh = s->mesh;
    float *grads = model_grads(s->m);
    size_t n = model_num_params(s->m);
    model_zero_grad(s->m);
    r.loss = pp_run(s->pipe, inputs, targets, B, T, 1.0f, step);
    pp_sum_tied_grads(s->pipe);
    if (mesh->dp_size > 1) {
        comm_allreduce(mesh->dp, grads, grads, n, COMM_FP32, COMM_AVG, COMM_ALGO_DEFAULT);
        comm_allreduce(mesh->dp, &r.loss, &r.loss, 1, COMM_FP32, COMM_AVG, COMM_ALGO_DEFAULT);
    }
    /* The norm of the whole model's gradient: each piece counted once over the mp group (tp x pp). */
    double local = 0;
    for (int i = 0; i < s->nspans; i++)
        if (s->in_norm[i]) local += clip_sum_squares(s->spans[i].grad, s->spans[i].n);
    r.grad_norm = clip_norm_finish(sum_over(mesh->mp, local));
    r.skipped = !clip_norm_is_finite(r.grad_norm); /* the same norm on every rank: the same decision */
    if (r.skipped) return r;
    float scale = s->grad_clip > 0 ? clip_scale_for(r.grad_norm, s->grad_clip) : 1.0f;
    r.clipped = scale != 1.0f;
    if (r.clipped) clip_scale(grads, n, scale);
    optim_step(&s->opt, &s->state, s->spans, s->nspans, lr);
    return r;
}
