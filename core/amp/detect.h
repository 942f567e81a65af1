/* detect.h: finding inf/NaN in gradients and weights, naming the first tensor to go bad, and diagnosing why. */
#ifndef MIXPAR_AMP_DETECT_H
#define MIXPAR_AMP_DETECT_H

/* When a step's gradients hold inf or NaN, "which tensor?" is the first question, and the answer that
 * helps is the tensor where it started. Backward runs from the loss to the embeddings, and a non-finite
 * value spreads to everything computed after it: if the MLP of block 3 overflows, the gradients of
 * blocks 2, 1, 0 and the embeddings all inherit NaN. So the gradients are scanned in backward order
 * (the LM head first, then the final norm, the blocks from the last to the first, each block from its
 * MLP back to its first norm, the embeddings last), and the first tensor found with a non-finite value
 * is where it went wrong; everything after it in that order is collateral.
 *
 * One caveat, reported rather than hidden: with tied embeddings (GPT-2), wte is also the LM head. Its
 * gradient collects the head's contribution first and the embedding's last, so a bad wte is listed
 * first, but the NaN may have arrived through the embedding instead. When wte is first and other
 * tensors are bad too, the report names the next one as well (amp_nonfinite.second).
 *
 * Weights are scanned in forward (registry) order: a NaN weight was written by an earlier update (or
 * came with the checkpoint the run resumed from), and the forward pass spreads it from there. When the
 * weights are finite but the loss is not, a forward pass run again with a probe on every activation
 * names the first activation to go bad (amp_find_nonfinite_activation).
 *
 *     amp_nonfinite nf;
 *     if (amp_find_nonfinite(m, AMP_SCAN_GRADS, &nf)) {           // inf/NaN somewhere
 *         amp_diag_context ctx = {.step = step, .loss = loss, .lr = lr, .grad_clip = clip,
 *                                 .recipe = AMP_RECIPE_FP16, .scaler = &scaler, .update = &u};
 *         amp_diagnosis d;
 *         amp_diagnose(&nf, NULL, &ctx, &d);
 *         amp_diagnosis_emit(events, &d);                          // a "diagnosis" event
 *         fputs(d.message, stderr);
 *     }
 */

#include <stdbool.h>
#include <stdint.h>

#include "amp/policy.h"
#include "amp/scaler.h"
#include "base/events.h"
#include "model/model.h"

typedef enum { AMP_SCAN_GRADS, AMP_SCAN_PARAMS } amp_scan_what;

/* One tensor holding non-finite values. */
typedef struct {
    int index;                   /* in the registry */
    char name[48];               /* "h.3.fcprojw" */
    int layer;                   /* -1 embeddings, 0..L-1 blocks, L final norm and head */
    uint64_t size;               /* values in the tensor */
    uint64_t nan, posinf, neginf;
    uint64_t first_offset;       /* element index of its first non-finite value */
    float first_value;
} amp_bad_tensor;

typedef struct {
    amp_scan_what what;
    int ntensors;                /* tensors scanned */
    int nbad;                    /* tensors holding inf or NaN */
    uint64_t count;              /* values scanned */
    uint64_t nan, posinf, neginf;/* over all tensors */
    amp_bad_tensor first;        /* the first bad tensor in scan order (when nbad > 0) */
    amp_bad_tensor second;       /* the next one (when nbad > 1) */
    bool first_is_tied;          /* first is the tied wte: it may have inherited from the embedding path */
} amp_nonfinite;

/* Registry indices in backward order (see above); returns the count. order has room for every tensor. */
int amp_backward_order(const model *m, int *order);

/* Scans tensors[order[k]] of buf for k = 0..n-1 (the generic form: a shard, a hand-made registry). */
bool amp_scan_nonfinite(const model_tensor *tensors, const int *order, int n, const float *buf,
                        amp_nonfinite *out);
/* Scans the model's gradients (backward order) or weights (registry order). Returns nbad > 0. */
bool amp_find_nonfinite(model *m, amp_scan_what what, amp_nonfinite *out);

/* The activations of one forward pass over (B,T) inputs and targets, in forward order (model.h's reports:
 * the embeddings' output, each block from its first norm to its output, the final norm, the logits): the
 * first to hold inf/NaN is where the forward pass went bad, when the weights are finite. Fills *out (index
 * -1, the full name "h.0.fch") and returns true when one is found. It runs model_forward, so under FSDP every
 * rank must call it the same number of times. It sets the model's activation probe for that pass, calling
 * the probe set before (a fault injection) first, and puts that one back afterwards. */
bool amp_find_nonfinite_activation(model *m, const int *inputs, const int *targets, int B, int T,
                                   amp_bad_tensor *out);

/* What the diagnosis knows about the step. */
typedef struct {
    long step;
    float loss;                  /* the step's loss: non-finite means the forward pass went bad first */
    double lr;
    double grad_clip;            /* max global norm; 0 = clipping off */
    amp_recipe recipe;
    const amp_scaler *scaler;    /* NULL when none */
    const amp_update *update;    /* the scaler's decision for this step, or NULL */
    long start_step;             /* the step this run started from (a resumed checkpoint's step; 0 when fresh) */
    const amp_bad_tensor *activation; /* the first non-finite activation of a forward pass again, or NULL */
} amp_diag_context;

typedef struct {
    long step;
    char what[32];               /* nonfinite_param, nonfinite_activation, nonfinite_loss, nonfinite_grad,
                                  * scale_at_minimum, scale_vanished, none */
    int layer;                   /* of the tensor named; -2 when none is */
    char tensor[48];             /* "" when none */
    char message[3072];          /* the readable diagnosis, several lines */
} amp_diagnosis;

/* Builds the diagnosis, following the course's flow: which gradient went bad first -> learning rate and
 * loss scale -> clipping -> initialisation -> data; each step of the flow says what the facts of this
 * step suggest. grads and params may be NULL (not scanned). */
void amp_diagnose(const amp_nonfinite *grads, const amp_nonfinite *params, const amp_diag_context *ctx,
                  amp_diagnosis *out);
/* Writes it as a "diagnosis" event (step, what, layer, tensor, message). */
void amp_diagnosis_emit(ev_writer *w, const amp_diagnosis *d);

#endif
