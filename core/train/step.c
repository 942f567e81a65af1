/* step.c: the optimizer step over a model's registry: accumulate, clip, update. */
#include "train/step.h"

#include "base/clock.h"
#include "base/error.h"

#include <math.h>
#include <stdlib.h>

void train_step_init(train_step *s, model *m, const optim_config *opt, double grad_clip) {
    s->m = m;
    s->opt = *opt;
    s->grad_clip = grad_clip;
    s->ddp = NULL;
    s->zero = NULL;
    int n;
    const model_tensor *t = model_tensors(m, &n);
    s->nspans = n;
    s->spans = calloc((size_t)n, sizeof *s->spans);
    s->clips = calloc((size_t)n, sizeof *s->clips);
    MP_ASSERT(s->spans && s->clips, "out of memory");
    for (int i = 0; i < n; i++) {
        s->spans[i] = (optim_span){model_params(m) + t[i].offset, model_grads(m) + t[i].offset, t[i].size,
                                   t[i].decay};
        s->clips[i] = (clip_span){model_grads(m) + t[i].offset, t[i].size};
    }
    optim_state_init(&s->state, opt->kind, model_num_params(m));
}

void train_step_init_zero(train_step *s, model *m, const optim_config *opt, double grad_clip, zero *z) {
    s->m = m;
    s->opt = *opt;
    s->grad_clip = grad_clip;
    s->ddp = NULL;
    s->zero = z;
    zero_shard_spans(z, &s->spans, &s->clips, &s->nspans);
    optim_state_init(&s->state, opt->kind, zero_shard_elems(z));
}

/* The global norm from the shards: each rank's sum of squares, summed over ranks; then clipping of the
 * own shard. The same norm on every rank, so every rank makes the same skip decision. */
static double clip_sharded(train_step *s) {
    double local = 0;
    for (int i = 0; i < s->nspans; i++) local += clip_sum_squares(s->clips[i].data, s->clips[i].n);
    double norm = clip_norm_finish(zero_sum_over_ranks(s->zero, local));
    float scale = s->grad_clip > 0 ? clip_scale_for(norm, s->grad_clip) : 1.0f;
    if (scale != 1.0f)
        for (int i = 0; i < s->nspans; i++) clip_scale(s->clips[i].data, s->clips[i].n, scale);
    return norm;
}

void train_step_free(train_step *s) {
    optim_state_free(&s->state);
    free(s->spans);
    free(s->clips);
}

train_step_result train_step_run(train_step *s, const int *inputs, const int *targets, int B, int T, int accum,
                                 double lr) {
    MP_ASSERT(accum >= 1, "accumulation steps %d", accum);
    train_step_result r = {0};
    model_zero_grad(s->m);
    double loss_sum = 0;
    size_t per_micro = (size_t)B * T;
    for (int k = 0; k < accum; k++) {
        double t0 = mp_now();
        loss_sum += model_forward(s->m, inputs + k * per_micro, targets + k * per_micro, B, T);
        double t1 = mp_now();
        if (s->ddp) ddp_set_sync(s->ddp, k == accum - 1); /* no_sync on the micro-batches before the last */
        model_backward(s->m, 1.0f / (float)accum);
        r.t_forward += t1 - t0;
        r.t_backward += mp_now() - t1;
    }
    if (s->ddp) ddp_finish(s->ddp);
    r.loss = (float)(loss_sum / accum);
    double t0 = mp_now();
    if (s->zero) r.grad_norm = clip_sharded(s);
    else r.grad_norm = s->grad_clip > 0 ? clip_grad_norm(s->clips, s->nspans, s->grad_clip)
                                        : clip_global_norm(s->clips, s->nspans);
    r.clipped = s->grad_clip > 0 && r.grad_norm > s->grad_clip;
    if (clip_norm_is_finite(r.grad_norm)) {
        optim_step(&s->opt, &s->state, s->spans, s->nspans, lr);
        if (s->zero) zero_allgather_params(s->zero); /* each rank updated its shard: make replicas whole */
    }
    r.t_optimizer = mp_now() - t0;
    return r;
}
