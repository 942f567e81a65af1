/* detect.c: inf/NaN scans in backward order, and the diagnosis that follows the course's debugging flow. */
#include "amp/detect.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/msgbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ scanning */

int amp_backward_order(const model *m, int *order) {
    int n;
    const model_tensor *t = model_tensors(m, &n);
    const model_config *c = model_get_config(m);
    int k = 0, wte = -1;
    /* Tied: wte is the LM head too, the first matmul backward meets (model_backward starts there). */
    if (c->tied)
        for (int i = 0; i < n; i++)
            if (strcmp(t[i].name, "wte") == 0) order[k++] = wte = i;
    /* Layers from the head (L) down to the embeddings (-1); within a layer the registry is in forward order,
     * so reversed it is the order backward computes the tensors' gradients. */
    for (int layer = c->L; layer >= -1; layer--)
        for (int i = n - 1; i >= 0; i--)
            if (t[i].layer == layer && i != wte) order[k++] = i;
    MP_ASSERT(k == n, "backward order covers %d of %d tensors", k, n);
    return k;
}

/* Counts the non-finite values of one tensor; false when it has none. */
static bool scan_tensor(const model_tensor *t, int index, const float *x, amp_bad_tensor *bad) {
    uint64_t nan = 0, posinf = 0, neginf = 0, first = 0;
    bool any = false;
    for (size_t i = 0; i < t->size; i++) {
        float v = x[i];
        if (isfinite(v)) continue;
        if (!any) first = i;
        any = true;
        if (isnan(v)) nan++;
        else if (v > 0) posinf++;
        else neginf++;
    }
    if (!any) return false;
    memset(bad, 0, sizeof *bad);
    bad->index = index;
    snprintf(bad->name, sizeof bad->name, "%s", t->name);
    bad->layer = t->layer;
    bad->size = t->size;
    bad->nan = nan;
    bad->posinf = posinf;
    bad->neginf = neginf;
    bad->first_offset = first;
    bad->first_value = x[first];
    return true;
}

/* Lab 09: the scan. Tensor k of the scan is tensors[order[k]], its values buf[offset .. offset + size);
 * scan_tensor counts one tensor. The first tensor found bad in this order is where it started. */
bool amp_scan_nonfinite(const model_tensor *tensors, const int *order, int n, const float *buf, amp_nonfinite *out) {
    amp_scan_what what = out->what;
    memset(out, 0, sizeof *out);
    out->what = what;
    out->ntensors = n;
    /* LAB 09 BEGIN the scan in the given order: totals over all tensors, the first and second bad tensor */
    for (int k = 0; k < n; k++) {
        const model_tensor *t = &tensors[order[k]];
        out->count += t->size;
        amp_bad_tensor bad;
        if (!scan_tensor(t, order[k], buf + t->offset, &bad)) continue;
        out->nan += bad.nan;
        out->posinf += bad.posinf;
        out->neginf += bad.neginf;
        if (out->nbad == 0) out->first = bad;
        else if (out->nbad == 1) out->second = bad;
        out->nbad++;
    }
    /* LAB 09 END */
    return out->nbad > 0;
}

bool amp_find_nonfinite(model *m, amp_scan_what what, amp_nonfinite *out) {
    int n;
    const model_tensor *t = model_tensors(m, &n);
    int *order = malloc((size_t)n * sizeof *order);
    MP_ASSERT(order, "out of memory");
    if (what == AMP_SCAN_GRADS) amp_backward_order(m, order);
    else
        for (int i = 0; i < n; i++) order[i] = i;
    out->what = what;
    bool bad = amp_scan_nonfinite(t, order, n, what == AMP_SCAN_GRADS ? model_grads(m) : model_params(m), out);
    out->first_is_tied =
        bad && what == AMP_SCAN_GRADS && model_get_config(m)->tied && strcmp(out->first.name, "wte") == 0;
    free(order);
    return bad;
}

/* The probe's state: the first activation found bad, and whether one was. */
typedef struct {
    const model *m;
    amp_bad_tensor *out;
    bool found;
    model_act_probe before; /* the probe that was set (a fault injection): it sees each activation first */
    void *before_ctx;
} activation_hunt;

static void check_activation(void *ctx, int layer, const char *name, float *x, size_t n) {
    activation_hunt *h = ctx;
    if (h->before) h->before(h->before_ctx, layer, name, x, n);
    if (h->found) return;
    model_tensor t = {.size = n, .layer = layer};
    model_act_full_name(h->m, layer, name, t.name, sizeof t.name);
    h->found = scan_tensor(&t, -1, x, h->out);
}

bool amp_find_nonfinite_activation(model *m, const int *inputs, const int *targets, int B, int T,
                                   amp_bad_tensor *out) {
    activation_hunt h = {.m = m, .out = out};
    h.before = model_get_act_probe(m, &h.before_ctx);
    model_set_act_probe(m, check_activation, &h);
    model_forward(m, inputs, targets, B, T);
    model_set_act_probe(m, h.before, h.before_ctx);
    return h.found;
}

/* ------------------------------------------------------------------ the diagnosis */


static const char *layer_name(int layer, char *buf, size_t len) {
    if (layer < 0) snprintf(buf, len, "embeddings");
    else snprintf(buf, len, "layer %d", layer);
    return buf;
}

static void say_tensor(msgbuf *t, const amp_bad_tensor *b) {
    char where[32];
    msgbuf_printf(t, "%s (%s): %llu NaN, %llu +inf, %llu -inf of %llu values; first at element %llu (%g)", b->name,
        layer_name(b->layer, where, sizeof where), (unsigned long long)b->nan, (unsigned long long)b->posinf,
        (unsigned long long)b->neginf, (unsigned long long)b->size, (unsigned long long)b->first_offset,
        (double)b->first_value);
}

void amp_diagnose(const amp_nonfinite *grads, const amp_nonfinite *params, const amp_diag_context *ctx,
                  amp_diagnosis *out) {
    memset(out, 0, sizeof *out);
    out->step = ctx->step;
    out->layer = -2;
    msgbuf t = {out->message, sizeof out->message, 0};
    const amp_recipe_info *recipe = amp_recipe_get(ctx->recipe);
    bool loss_bad = !isfinite(ctx->loss);
    bool grads_bad = grads && grads->nbad > 0, params_bad = params && params->nbad > 0;
    bool fatal_scale = ctx->update && amp_scaler_status_is_fatal(ctx->update->status);
    const amp_bad_tensor *act = ctx->activation;
    const amp_bad_tensor *named = params_bad ? &params->first : act ? act : grads_bad ? &grads->first : NULL;
    /* A bad weight at the run's first step was there before any update of this run: loaded with it. */
    bool loaded_bad = params_bad && ctx->step == ctx->start_step + 1;

    /* What: the most upstream fact wins. A bad weight makes the activations bad, then the loss, then every
     * gradient. */
    const char *what = params_bad ? "nonfinite_param"
                       : act ? "nonfinite_activation"
                       : loss_bad ? "nonfinite_loss"
                       : fatal_scale ? (ctx->update->status == AMP_SCALER_AT_MINIMUM ? "scale_at_minimum"
                                                                                      : "scale_vanished")
                       : grads_bad ? "nonfinite_grad"
                                   : "none";
    snprintf(out->what, sizeof out->what, "%s", what);
    if (named) {
        out->layer = named->layer;
        snprintf(out->tensor, sizeof out->tensor, "%s", named->name);
    }

    msgbuf_printf(&t, "step %ld: ", ctx->step);
    if (params_bad) {
        msgbuf_printf(&t, "weights hold inf/NaN, first ");
        say_tensor(&t, &params->first);
        if (loaded_bad && ctx->start_step > 0)
            msgbuf_printf(&t, "; %d of %d tensors are bad. They were bad before this run's first update: the "
                    "checkpoint it resumed from (step %ld) holds them. Resume from an earlier checkpoint.\n",
                params->nbad, params->ntensors, ctx->start_step);
        else if (loaded_bad)
            msgbuf_printf(&t, "; %d of %d tensors are bad. They were bad before the first update: the initialisation "
                    "wrote them.\n",
                params->nbad, params->ntensors);
        else
            msgbuf_printf(&t, "; %d of %d tensors are bad. An earlier update wrote them: a step with bad gradients "
                    "was not skipped, or an update overflowed the weights' format.\n",
                params->nbad, params->ntensors);
    } else if (act) {
        msgbuf_printf(&t, "the loss is %g and the weights are finite; run forward again, the first activation to hold "
                "inf/NaN is ",
            (double)ctx->loss);
        say_tensor(&t, act);
        msgbuf_printf(&t, ". The layer that computes it overflowed (or divided by zero): everything after it in "
                "forward order inherits it.\n");
    } else if (loss_bad) {
        msgbuf_printf(&t, "the loss is %g: the forward pass went bad before backward, so every gradient inherits it; "
                "the gradient scan cannot say more than that.\n",
            (double)ctx->loss);
    } else if (fatal_scale) {
        char buf[640];
        msgbuf_printf(&t, "%s.\n", amp_scaler_explain(ctx->scaler, ctx->update, buf, sizeof buf));
    } else if (!grads_bad) {
        msgbuf_printf(&t, "no inf or NaN found in the %s scanned.\n", grads ? "gradients" : "tensors");
    }
    if (grads_bad) {
        msgbuf_printf(&t, "1. gradients: in backward order the first to hold inf/NaN is ");
        say_tensor(&t, &grads->first);
        msgbuf_printf(&t, ". %d of %d gradient tensors are bad; those after it in backward order inherit it.",
                      grads->nbad, grads->ntensors);
        if (grads->first_is_tied && grads->nbad > 1)
            msgbuf_printf(&t, " wte is tied to the LM head: it collects the head's gradient first and the "
                    "embedding's last, so the NaN may have come in through the embedding; the next bad tensor is %s.",
                grads->second.name);
        msgbuf_printf(&t, "\n");
    } else {
        msgbuf_printf(&t, "1. gradients: %s.\n", grads ? "all finite" : "not scanned");
    }

    /* 2. learning rate and loss scale */
    msgbuf_printf(&t, "2. learning rate / loss scale: lr %g under recipe %s", ctx->lr, recipe->name);
    if (ctx->scaler && ctx->scaler->cfg.kind != AMP_SCALER_NONE) {
        msgbuf_printf(&t, " with a %s loss scale of %g (%ld skipped steps in a row).",
            amp_scaler_kind_get(ctx->scaler->cfg.kind)->name,
            (double)(ctx->update ? ctx->update->scale : ctx->scaler->scale), ctx->scaler->consecutive_skipped);
        if (fatal_scale || ctx->scaler->consecutive_skipped > 3)
            msgbuf_printf(&t, " The scale has been lowered again and again and the gradients still overflow: they are "
                    "exploding, not just too large for fp16. Lower the learning rate, or use bf16.\n");
        else
            msgbuf_printf(&t, " An occasional overflow is how a dynamic scaler probes for the largest safe scale: "
                    "one skipped step is normal, many in a row are not.\n");
    } else {
        msgbuf_printf(&t, ", no loss scale. Inf/NaN here is not an fp16 range problem; the usual cause is a learning "
                "rate too high for this model or batch (try it 3-10x lower, or a longer warmup).\n");
    }

    /* 3. clipping */
    if (ctx->grad_clip > 0)
        msgbuf_printf(&t, "3. clipping: on at a global norm of %g. It cannot repair inf/NaN (the norm itself is not "
                "finite), but it stops finite gradients from growing into an overflow.\n",
            ctx->grad_clip);
    else
        msgbuf_printf(&t, "3. clipping: off (gradient_clipping 0). Turn it on (\"gradient_clipping\": 1.0): a spike "
                "of large gradients then becomes a bounded step instead of an overflow.\n");

    /* 4. initialisation */
    if (loaded_bad)
        msgbuf_printf(&t, "4. initialisation: the weights were already bad at this run's first step (see above), so "
                "the weights it started from are the cause, not the learning rate or the data.\n");
    else if (ctx->step <= 1)
        msgbuf_printf(&t, "4. initialisation: this is the first step, so suspect the initial weights: too large a "
                "scale (GPT-2 uses N(0, 0.02), residual projections 0.02/sqrt(2L)), norm gains not 1, or a NaN in a "
                "loaded checkpoint.\n");
    else
        msgbuf_printf(&t, "4. initialisation: %ld steps ran before this one, so the initial weights are an unlikely "
                          "cause.\n",
            ctx->step - 1);

    /* 5. data */
    msgbuf_printf(&t, "5. data: if the above do not explain it, look at this step's batch: a corrupt shard, a "
            "sequence of one repeated token, an extreme outlier (`mixpar data decode` shows the text); run the same "
            "batch again in fp32 to see whether the precision or the data is at fault.\n");
}

void amp_diagnosis_emit(ev_writer *w, const amp_diagnosis *d) {
    ev_begin(w, "diagnosis");
    ev_int(w, "step", d->step);
    ev_str(w, "what", d->what);
    ev_int(w, "layer", d->layer);
    ev_str(w, "tensor", d->tensor);
    ev_str(w, "message", d->message);
    ev_end(w);
}
