/* step.c: the optimizer step over a model's registry: accumulate, clip, update. */
#include "train/step.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/lab.h"
#include "base/mem.h"
#include "base/rng.h"
#include "fp/convert.h"
#include "model/model_lowp.h"
#include "prof/prof.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* No mixed precision, no agreement partner, no injected overflow: what train_step_set_amp and the trainer change. */
static void step_defaults(train_step *s) {
    s->amp = NULL;
    s->master = NULL;
    s->master_spans = NULL;
    s->found_inf_comm = NULL;
    s->inject_inf_at = -1;
    s->updates = 0;
    s->host_master = s->host_grads = NULL;
    s->host_spans = NULL;
    s->ordered_accumulation = false;
    s->accum_grads = NULL;
    const char *no_divide = getenv("MIXPAR_DEBUG_ACCUM_NO_DIVIDE");
    s->accum_no_divide = no_divide && *no_divide && strcmp(no_divide, "0") != 0;
}

/* What every layout starts from: the model, the optimizer, the clip, no sharding (the caller sets one). */
static void lay_out_common(train_step *s, model *m, const optim_config *opt, double grad_clip) {
    s->m = m;
    s->opt = *opt;
    s->grad_clip = grad_clip;
    s->ddp = NULL;
    s->zero = NULL;
    s->fsdp = NULL;
    step_defaults(s);
}

/* The spans over the whole model: one per registry tensor. */
static void lay_out_whole(train_step *s, model *m, const optim_config *opt, double grad_clip) {
    lay_out_common(s, m, opt, grad_clip);
    int n;
    const model_tensor *t = model_tensors(m, &n);
    s->nspans = n;
    s->spans = calloc((size_t)n, sizeof *s->spans);
    s->clips = calloc((size_t)n, sizeof *s->clips);
    MP_ASSERT(s->spans && s->clips, "out of memory");
    /* A frozen tensor keeps its span (the optimizer state stays laid out like the registry, which
     * checkpoints rely on) without weight decay: its gradient is always zero, so every optimizer here
     * leaves it exactly as it is, as long as it was frozen before the first step. */
    for (int i = 0; i < n; i++) {
        s->spans[i] = (optim_span){model_params(m) + t[i].offset, model_grads(m) + t[i].offset, t[i].size,
                                   t[i].decay && !t[i].frozen};
        s->clips[i] = (clip_span){model_grads(m) + t[i].offset, t[i].size};
    }
}

/* The spans over this rank's ZeRO shard. */
static void lay_out_shard(train_step *s, model *m, const optim_config *opt, double grad_clip, zero *z) {
    lay_out_common(s, m, opt, grad_clip);
    s->zero = z;
    zero_shard_spans(z, &s->spans, &s->clips, &s->nspans);
}

static size_t span_elems(const train_step *s) {
    size_t total = 0;
    for (int i = 0; i < s->nspans; i++) total += s->spans[i].n;
    return total;
}

void train_step_init(train_step *s, model *m, const optim_config *opt, double grad_clip) {
    lay_out_whole(s, m, opt, grad_clip);
    optim_state_init(&s->state, opt->kind, model_num_params(m));
}

void train_step_init_zero(train_step *s, model *m, const optim_config *opt, double grad_clip, zero *z) {
    lay_out_shard(s, m, opt, grad_clip, z);
    optim_state_init(&s->state, opt->kind, zero_shard_elems(z));
}

/* Written over s->spans only, whatever laid them out (the whole model, a ZeRO-1/2 shard, an FSDP shard), so
 * any sharding can offload. The state is allocated on the host from the start: nothing of it ever occupies
 * the device, not even for a moment (MEM_OPTIM's peak stays 0). */
static void offload_state(train_step *s, const optim_config *opt) {
    size_t total = span_elems(s);
    optim_state_init_tagged(&s->state, opt->kind, total, MEM_HOST);
    s->host_master = mem_alloc(total * sizeof(float), MEM_HOST, "offload.master");
    s->host_grads = mem_alloc(total * sizeof(float), MEM_HOST, "offload.grads");
    s->host_spans = calloc((size_t)s->nspans, sizeof *s->host_spans);
    MP_ASSERT(s->host_spans, "out of memory");
    size_t at = 0;
    for (int i = 0; i < s->nspans; i++) {
        size_t n = s->spans[i].n;
        memcpy(s->host_master + at, s->spans[i].param, n * sizeof(float));
        s->host_spans[i] = (optim_span){s->host_master + at, s->host_grads + at, n, s->spans[i].decay};
        at += n;
    }
}

void train_step_init_offload(train_step *s, model *m, const optim_config *opt, double grad_clip, zero *z) {
    if (z) lay_out_shard(s, m, opt, grad_clip, z);
    else lay_out_whole(s, m, opt, grad_clip);
    offload_state(s, opt);
}

void train_step_init_fsdp(train_step *s, model *m, const optim_config *opt, double grad_clip, fsdp *f, bool offload) {
    lay_out_common(s, m, opt, grad_clip);
    s->fsdp = f;
    fsdp_shard_spans(f, &s->spans, &s->clips, &s->nspans);
    if (offload) offload_state(s, opt);
    else optim_state_init(&s->state, opt->kind, fsdp_shard_elems(f));
}

/* The global norm from the shards: each rank's sum of squares, summed over ranks; then clipping of the
 * own shard. The same norm on every rank, so every rank makes the same skip decision. */
static double clip_sharded(train_step *s) {
    double norm;
    /* LAB 19 BEGIN the global norm from the shards: this rank's sum of squares, summed over the ranks in rank order */
    double local = 0;
    for (int i = 0; i < s->nspans; i++) local += clip_sum_squares(s->clips[i].data, s->clips[i].n);
    norm = clip_norm_finish(s->fsdp ? fsdp_sum_over_shards(s->fsdp, local) : zero_sum_over_ranks(s->zero, local));
    /* LAB 19 END */
    float scale = s->grad_clip > 0 ? clip_scale_for(norm, s->grad_clip) : 1.0f;
    if (scale != 1.0f)
        for (int i = 0; i < s->nspans; i++) clip_scale(s->clips[i].data, s->clips[i].n, scale);
    return norm;
}

void train_step_free(train_step *s) {
    mem_free(s->accum_grads);
    optim_state_free(&s->state);
    mem_free(s->master);
    free(s->master_spans);
    mem_free(s->host_master);
    mem_free(s->host_grads);
    free(s->host_spans);
    free(s->spans);
    free(s->clips);
}

/* ------------------------------------------------------------------ mixed precision */

/* Rounds n values in place to fp16 or bf16 (nearest even), or to bf16 stochastically with the random bits
 * of (seed, element index): what storing them in that format does. */
static void round_values(float *x, size_t n, const fp_format *fmt, bool stochastic, uint64_t seed) {
    enum { BLOCK = 4096 };
    long blocks = (long)((n + BLOCK - 1) / BLOCK);
#pragma omp parallel for schedule(static) if (blocks > 8)
    for (long k = 0; k < blocks; k++) {
        uint16_t tmp[BLOCK];
        size_t i = (size_t)k * BLOCK, len = n - i < BLOCK ? n - i : BLOCK;
        if (fmt == &FP_FP16) {
            fp_f32_to_f16(tmp, x + i, len);
            fp_f16_to_f32(x + i, tmp, len);
        } else {
            if (stochastic) fp_f32_to_bf16_stochastic(tmp, x + i, len, mp_hash32(seed, (uint64_t)k) ^ seed);
            else fp_f32_to_bf16(tmp, x + i, len);
            fp_bf16_to_f32(x + i, tmp, len);
        }
    }
}

/* The weights are stored low (fp16-o2, bf16-pure): the recipe's weight format; NULL when they are fp32. */
static const fp_format *low_weights(const train_step *s) {
    return s->amp && !s->amp->autocast && s->amp->weights != &FP_FP32 ? s->amp->weights : NULL;
}

void train_step_set_amp(train_step *s, amp_recipe recipe, const amp_scaler_config *scaler, bool stochastic_rounding,
                        uint64_t seed) {
    s->recipe = recipe;
    s->amp = amp_recipe_get(recipe);
    amp_scaler_init(&s->scaler, scaler);
    s->stochastic_rounding = stochastic_rounding;
    s->rounding_seed = seed;
    const fp_format *low = low_weights(s);
    if (!low) return;
    MP_ASSERT(!s->host_spans, "recipe %s keeps 16-bit weights: not with optimizer offload (the trainer refuses it)",
              s->amp->name);
    if (s->amp->master_fp32) {
        MP_ASSERT(!s->zero, "fp16-o2 master weights under ZeRO are not supported (the trainer refuses it)");
        size_t total = 0;
        for (int i = 0; i < s->nspans; i++) total += s->spans[i].n;
        s->master = mem_alloc(total * sizeof(float), MEM_MASTER, "fp32 master weights");
        s->master_spans = calloc((size_t)s->nspans, sizeof *s->master_spans);
        MP_ASSERT(s->master_spans, "out of memory");
        size_t at = 0;
        for (int i = 0; i < s->nspans; i++) {
            memcpy(s->master + at, s->spans[i].param, s->spans[i].n * sizeof(float));
            s->master_spans[i] = (optim_span){s->master + at, s->spans[i].grad, s->spans[i].n, s->spans[i].decay};
            at += s->spans[i].n;
        }
    }
    /* The working weights start as the rounding of the initial fp32 weights, on every rank alike (the
     * whole buffer, not only a ZeRO shard: the replicas must stay identical). */
    round_values(model_params(s->m), model_num_params(s->m), low, false, 0);
}

const optim_span *train_step_update_spans(const train_step *s) { return s->master_spans ? s->master_spans : s->spans; }

/* After an update: the working weights from what the optimizer wrote (lab 09). With a master copy
 * (fp16-o2) the optimizer updated the fp32 master and the model's working weights are its rounding,
 * remade from it every step; the master itself is never rounded, so updates smaller than half an ulp
 * of the working format add up in it. Without one (bf16-pure) the optimizer updated the working weights
 * in place and they are rounded back: to nearest, an update under half an ulp is lost; stochastically,
 * it survives on average. The random bits of step t, tensor i come from (rounding_seed, t, i): fresh at
 * every step and for every tensor, and the same again when a run is repeated or resumed. */
static void write_working_weights(train_step *s) {
    const fp_format *low = low_weights(s);
    if (!low) return;
    for (int i = 0; i < s->nspans; i++) {
        float *working = s->spans[i].param; /* (n) the model's weights, as the next forward reads them */
        size_t n = s->spans[i].n;
        /* LAB 09 BEGIN master weights: the working copy is the low-precision rounding of what the optimizer wrote */
        if (s->master_spans) memcpy(working, s->master_spans[i].param, n * sizeof(float));
        uint64_t random_bits = mp_hash32(s->rounding_seed + (uint64_t)s->updates, (uint64_t)i);
        round_values(working, n, low, s->stochastic_rounding, random_bits);
        /* LAB 09 END */
    }
}

void train_step_sync_working_weights(train_step *s) {
    if (s->host_spans)
        for (int i = 0; i < s->nspans; i++)
            memcpy(s->host_spans[i].param, s->spans[i].param, s->spans[i].n * sizeof(float));
    const fp_format *low = low_weights(s);
    if (!low) return;
    for (int i = 0; i < s->nspans; i++) {
        if (s->master_spans) memcpy(s->spans[i].param, s->master_spans[i].param, s->spans[i].n * sizeof(float));
        round_values(s->spans[i].param, s->spans[i].n, low, false, 0);
    }
}

/* Every rank must take the same decision: an update on some ranks and not on others makes the replicas
 * different forever (and under ZeRO, whose update ends in a collective, the ranks' collectives stop pairing
 * up: a hang, or an MPI error such as "message truncated").
 * Returns true on every rank of s->found_inf_comm when found_inf is true on at least one of them. The ranks'
 * own findings can differ: an inf can be in one rank's gradients only (ZeRO's shards, a tensor- or
 * pipeline-parallel rank's own layers, or MIXPAR_INJECT_INF), so each rank contributes its flag to one small
 * collective (comm/comm.h), which every rank enters at every step, whatever its own flag says. */
static bool agree_found_inf(train_step *s, bool found_inf) {
    if (!s->found_inf_comm || comm_size(s->found_inf_comm) == 1) return found_inf;
    /* LAB 17 BEGIN found_inf across ranks: a skip anywhere is a skip everywhere (MAX over the ranks) */
    /* One float per rank, 1 for "found inf/NaN"; the maximum over the ranks is 1 exactly when some rank found
     * one (PyTorch's ShardedGradScaler and Megatron reduce their found_inf tensors the same way). */
    float flag = found_inf ? 1.0f : 0.0f;
    comm_allreduce(s->found_inf_comm, &flag, &flag, 1, COMM_FP32, COMM_MAX, COMM_ALGO_NATIVE);
    return flag != 0.0f;
    /* LAB 17 END */
}

/* ------------------------------------------------------------------ ZeRO-Offload */

/* Copies bytes between device and host memory, counting them and the seconds they took. On this CPU build
 * both pools are in the same RAM and the copy is a memcpy; on a GPU it is a cudaMemcpy over PCIe (about
 * 25 GB/s on PCIe 4.0 x16 from pinned memory), which is where offload's cost lies. */
static void offload_copy(void *dst, const void *src, size_t bytes, size_t *counted, double *seconds) {
    double t0 = mp_now();
    memcpy(dst, src, bytes);
    *seconds += mp_now() - t0;
    *counted += bytes;
}

/* ZeRO-Offload's update (lab 18). On entry the device's gradients of the spans (s->spans[i].grad) are
 * final: reduced across ranks, unscaled, checked and clipped. The host holds, for the same spans end to end,
 * the fp32 master weights (s->host_spans[i].param), a gradient buffer (s->host_spans[i].grad) and the
 * optimizer state (s->state, laid out like the host spans). The update:
 *   1. copy each span's gradients device -> host, into its host span's gradient buffer (offload_copy,
 *      counted in st->d2h_bytes and st->copy_s);
 *   2. step the optimizer on the host spans with the host state (optim_step), timed into st->update_s;
 *   3. copy each host span's updated weights host -> device, into the span's weights (offload_copy,
 *      counted in st->h2d_bytes and st->copy_s), where the next forward reads them.
 * The host master is the only copy the optimizer writes; the device weights are its copy, so nothing is
 * lost between steps, and the result is bit for bit what optim_step on the device spans would give. */
static void offloaded_update(train_step *s, double lr, train_step_offload_stats *st) {
    /* LAB 18 BEGIN optimizer offload: gradients down to the host, the update on the host, the weights back up */
    for (int i = 0; i < s->nspans; i++)
        offload_copy((float *)s->host_spans[i].grad, s->spans[i].grad, s->spans[i].n * sizeof(float), &st->d2h_bytes,
                     &st->copy_s);
    double t0 = mp_now();
    optim_step(&s->opt, &s->state, s->host_spans, s->nspans, lr);
    st->update_s += mp_now() - t0;
    for (int i = 0; i < s->nspans; i++)
        offload_copy(s->spans[i].param, s->host_spans[i].param, s->spans[i].n * sizeof(float), &st->h2d_bytes,
                     &st->copy_s);
    /* LAB 18 END */
}

/* The optimizer's update of a step that is taken: optim_step over `update` (the spans, or their fp32 master
 * copy under fp16-o2) on the device, or with offload the host's update (then `update` is s->spans). */
static void optimizer_update(train_step *s, const optim_span *update, double lr, train_step_result *r) {
    if (s->host_spans) offloaded_update(s, lr, &r->offload);
    else optim_step(&s->opt, &s->state, update, s->nspans, lr);
}

static double clip_step_norm(train_step *s) {
    if (s->zero || s->fsdp) return clip_sharded(s);
    return s->grad_clip > 0 ? clip_grad_norm(s->clips, s->nspans, s->grad_clip) : clip_global_norm(s->clips, s->nspans);
}

/* The end of an AMP step. The gradients of all micro-batches are summed in s->clips (and, with DDP, already
 * averaged across the ranks: reduced while still scaled, when they are safe in a 16-bit allreduce); they
 * are still multiplied by the scale S. Lab 07's region finishes the step, in this order:
 *   1. unscale them once (amp_scaler_unscale: g *= 1/S, and found_inf in the same pass) -> r->found_inf_local;
 *   2. agree on found_inf with the other ranks (agree_found_inf);
 *   3. on finite gradients only: the global norm and the clip (clip_step_norm: of the unscaled gradients,
 *      so max_norm means what it says whatever S is) -> r->grad_norm (NAN on a skip), then optimizer_update
 *      over `update` (optim_step on the fp32 master copy under fp16-o2, the host's update under offload); on a
 *      skip nothing of the weights, the moments or the optimizer's step count changes;
 *   4. let the scaler react, once (amp_scaler_update with the agreed found_inf) -> r->update.
 * The caller then reads r->update.skipped and writes the working weights. */
static void amp_finish(train_step *s, train_step_result *r, double lr) {
    /* fp16-o2 / bf16-pure: gradients of low-precision weights are low-precision tensors. */
    const fp_format *low = low_weights(s);
    if (low)
        for (int i = 0; i < s->nspans; i++) round_values(s->clips[i].data, s->clips[i].n, low, false, 0);
    if (s->inject_inf_at == s->updates + s->scaler.skipped && s->nspans > 0) s->clips[0].data[0] = INFINITY;
    const optim_span *update = train_step_update_spans(s);
    /* LAB 07 BEGIN the AMP step: unscale once, agree on found_inf, clip the true gradients, step or skip, update S */
    /* 1. Unscale: g *= 1/S, and look for inf/NaN in the same pass (once per step). */
    r->found_inf_local = amp_scaler_unscale(&s->scaler, s->clips, s->nspans);
    /* 2. Every rank must make the same decision. */
    bool found_inf = agree_found_inf(s, r->found_inf_local);
    /* 3. Clip and step only on finite gradients; the norm is of the unscaled gradients, so max_norm means
     *    what it says whatever S is. A skipped step leaves weights, moments and the step count alone. */
    r->grad_norm = NAN;
    if (!found_inf) {
        r->grad_norm = clip_step_norm(s);
        optimizer_update(s, update, lr, r);
    }
    /* 4. The scaler learns from this step: grow after a clean interval, back off on an overflow. */
    r->update = amp_scaler_update(&s->scaler, found_inf);
    /* LAB 07 END */
    r->skipped = r->update.skipped;
    r->clipped = !r->skipped && s->grad_clip > 0 && r->grad_norm > s->grad_clip;
    if (!r->skipped) {
        write_working_weights(s);
        s->updates++;
        if (s->zero) zero_allgather_params(s->zero);
    }
}

/* Ordered accumulation (step.h): micro-batch k's gradients, computed alone, join the running sum; after the
 * last, the model's gradient buffer holds the sum. */
static void add_in_order(train_step *s, int k, bool last) {
    size_t n = model_num_params(s->m);
    float *g = model_grads(s->m);
    if (!s->accum_grads) s->accum_grads = mem_alloc(n * sizeof(float), MEM_GRAD, "ordered accumulation");
    float *acc = s->accum_grads;
    if (k == 0) {
        memcpy(acc, g, n * sizeof(float));
    } else {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++) acc[i] += g[i];
    }
    if (last) memcpy(g, acc, n * sizeof(float));
}

/* One micro-batch of (B, T) tokens: forward, then backward of its loss times loss_scale. Backward adds the
 * micro-batch's gradients to the model's gradient buffer (nothing is zeroed here), and under DDP it reduces the
 * buckets as they fill, unless DDP was told not to sync (ddp_set_sync). Returns its mean loss; timed into r. */
static float micro_batch(train_step *s, const int *inputs, const int *targets, int B, int T, float loss_scale,
                         train_step_result *r) {
    double t0 = mp_elapsed();
    PROF_BEGIN("forward");
    float loss = model_forward(s->m, inputs, targets, B, T);
    PROF_END("forward");
    double t1 = mp_elapsed();
    PROF_BEGIN("backward");
    model_backward(s->m, loss_scale);
    PROF_END("backward");
    r->backward_end = mp_elapsed();
    r->t_forward += t1 - t0;
    r->t_backward += r->backward_end - t1;
    return loss;
}

/* Gradient accumulation under data parallel (lab 16): `accum` micro-batches of (B, T) tokens, micro-batch k at
 * inputs + k*B*T (targets likewise), make one optimizer step. Each one's loss is multiplied by scale/accum, so the
 * gradients that backward adds up in the buffer are S times the mean over all the micro-batches, as one batch of
 * accum*B rows would give. DDP must reduce once per step, after the sum is complete: ddp_set_sync(s->ddp, false)
 * before every backward but the last (PyTorch's no_sync), true before the last, whose backward launches the
 * buckets. Returns the mean of the micro-batches' losses. */
static double accumulate_no_sync(train_step *s, const int *inputs, const int *targets, int B, int T, int accum,
                                 float scale, train_step_result *r) {
    const size_t per_micro = (size_t)B * T; /* tokens in one micro-batch */
    double loss_sum = 0;
    /* LAB 16 BEGIN gradient accumulation: each micro-batch's loss times S/accum, gradients added up, DDP reduces in the last backward only */
    for (int k = 0; k < accum; k++) {
        ddp_set_sync(s->ddp, k == accum - 1); /* no_sync on the micro-batches before the last */
        loss_sum += micro_batch(s, inputs + k * per_micro, targets + k * per_micro, B, T, scale / (float)accum, r);
    }
    /* LAB 16 END */
    return loss_sum / accum;
}

/* The micro-batches of one rank, of FSDP (which reduces in fsdp_finish) or of a step with one micro-batch: the
 * same sum, with nothing to hold back. Ordered accumulation (step.h) zeroes the buffer before each micro-batch and
 * adds it to a running sum by hand; MIXPAR_DEBUG_ACCUM_NO_DIVIDE (lab 24's zoo) leaves out the 1/accum. */
static double accumulate_locally(train_step *s, const int *inputs, const int *targets, int B, int T, int accum,
                                 float scale, train_step_result *r) {
    const size_t per_micro = (size_t)B * T;
    const bool ordered = s->ordered_accumulation && accum > 1 && !s->ddp && !s->zero && !s->fsdp;
    const float loss_scale = scale / (float)(s->accum_no_divide ? 1 : accum);
    if (s->ddp) ddp_set_sync(s->ddp, true);
    double loss_sum = 0;
    for (int k = 0; k < accum; k++) {
        if (ordered && k > 0) model_zero_grad(s->m);
        loss_sum += micro_batch(s, inputs + k * per_micro, targets + k * per_micro, B, T, loss_scale, r);
        if (ordered) add_in_order(s, k, k == accum - 1);
    }
    return loss_sum / accum;
}

train_step_result train_step_run(train_step *s, const int *inputs, const int *targets, int B, int T, int accum,
                                 double lr) {
    MP_ASSERT(accum >= 1, "accumulation steps %d", accum);
    train_step_result r = {0};
    float scale = s->amp ? amp_scaler_scale(&s->scaler) : 1.0f;
    model_zero_grad(s->m);
    if (s->fsdp) fsdp_zero_grad(s->fsdp);
    model_hold_weights(s->m, true); /* no update until the micro-batches are done: their weights are cast once */
    double mean_loss = s->ddp && accum > 1 ? accumulate_no_sync(s, inputs, targets, B, T, accum, scale, &r)
                                           : accumulate_locally(s, inputs, targets, B, T, accum, scale, &r);
    model_hold_weights(s->m, false);
    PROF_BEGIN("grad_sync_wait"); /* the gradients' communication that backward did not hide */
    if (s->ddp) ddp_finish(s->ddp);
    if (s->fsdp) fsdp_finish(s->fsdp);
    PROF_END("grad_sync_wait");
    r.loss = (float)mean_loss;
    double t0 = mp_now();
    PROF_BEGIN("optimizer");
    if (s->amp) {
        amp_finish(s, &r, lr);
    } else {
        r.grad_norm = clip_step_norm(s);
        r.clipped = s->grad_clip > 0 && r.grad_norm > s->grad_clip;
        r.skipped = !clip_norm_is_finite(r.grad_norm);
        r.update = (amp_update){.skipped = r.skipped, .scale = 1, .next_scale = 1, .status = AMP_SCALER_OK};
        if (!r.skipped) {
            optimizer_update(s, s->spans, lr, &r);
            s->updates++;
            if (s->zero) zero_allgather_params(s->zero); /* each rank updated its shard: make replicas whole */
        }
    }
    if (s->fsdp) fsdp_after_update(s->fsdp); /* gathered copies of the old weights (an evaluation's) go */
    if (s->zero) zero_release_gradients(s->zero); /* stage 2: the shards' gradients are used; none held now */
    PROF_END("optimizer");
    r.t_optimizer = mp_now() - t0;
    return r;
}
