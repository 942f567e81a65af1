/* model.h: GPT-2 and LLaMA-style decoders on the CPU (fp32): config, parameter registry, forward, backward. */
#ifndef MIXPAR_MODEL_MODEL_H
#define MIXPAR_MODEL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp/hist.h"

/* Dimension letters (STYLE.md): B batch, T sequence, C channels, V vocabulary (Vp padded), L layers,
 * NH query heads, KVH key/value heads, HS = C/NH head size, F feed-forward hidden size. */

typedef enum {
    MODEL_GPT2,  /* LayerNorm, GELU MLP, learned positions, biases, tied head */
    MODEL_LLAMA, /* RMSNorm, SwiGLU MLP, rotary positions, no biases, optional grouped-query attention */
} model_arch;

typedef struct {
    model_arch arch;
    int V;            /* vocabulary size */
    int Vp;           /* padded vocabulary: rows of the embedding and of the logits (>= V) */
    int maxT;         /* context length: positions the model can see */
    int L, C, NH, KVH, F;
    bool tied;        /* output head shares the token embedding */
    float norm_eps;   /* 1e-5 */
    float rope_theta; /* LLaMA only: 10000 */
} model_config;

/* Fills in the derived and default fields (Vp, KVH, F, tied, eps, theta) of a config given arch, V,
 * maxT, L, C, NH (and optionally KVH, F, Vp when non-zero), and checks it; a bad config stops with a
 * message naming the field (exit 2). */
void model_config_complete(model_config *cfg);
const char *model_arch_name(model_arch arch);          /* "gpt2", "llama" */
int model_arch_from_name(const char *name);            /* -1 when unknown */

/* One named tensor in the flat parameter buffer. Layout is layer-major: embeddings, then each block's
 * tensors together, then the final norm and the head, so one layer's parameters (and gradients) are
 * one contiguous span: what DDP buckets, ZeRO shards and FSDP units slice. */
typedef struct {
    char name[48];       /* "wte", "h.3.qkvw" (block 3), "lnfw" */
    int ndim;
    int shape[2];        /* (rows, cols) for matrices, (n) for vectors */
    size_t offset;       /* in floats, into the parameter (and gradient) buffer */
    size_t size;         /* in floats */
    int layer;           /* -1 embeddings, 0..L-1 blocks, L final norm and head */
    bool decay;          /* weight decay applies (tensors of 2 or more dimensions) */
    bool frozen;         /* no gradient (PyTorch's requires_grad=False): model_freeze */
} model_tensor;

/* Called by forward and backward around each layer, so a parallel strategy can gather parameters
 * before a layer runs and hand its gradients to communication as soon as they are final. `layer` is
 * -1 (embeddings), 0..L-1 (blocks) or L (final norm and head). Any callback may be NULL. */
typedef struct {
    void (*before_forward)(void *ctx, int layer);
    void (*before_backward)(void *ctx, int layer);
    void (*grads_ready)(void *ctx, int layer);
    void *ctx;
} model_hooks;

typedef struct model model;

/* Floats a model of this (completed) config holds, without allocating it (for memory checks). */
size_t model_count_params(const model_config *cfg);
model *model_create(const model_config *cfg);          /* parameters (MEM_PARAM) and gradients (MEM_GRAD) */
void model_free(model *m);
const model_config *model_get_config(const model *m);

/* The registry. model_tensor_find returns NULL when no tensor has that name. */
const model_tensor *model_tensors(const model *m, int *count);
const model_tensor *model_tensor_find(const model *m, const char *name);
size_t model_num_params(const model *m);               /* floats in the buffer (padded vocabulary rows included) */
size_t model_num_params_unpadded(const model *m);      /* what papers count: V, not Vp, rows */
void model_layer_span(const model *m, int layer, size_t *offset, size_t *size); /* floats of one layer */
float *model_params(model *m);
float *model_grads(model *m);

/* GPT-2 initialisation: weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0, norm
 * gains 1, padded vocabulary rows 0. Same seed, same weights on every machine. */
void model_init(model *m, uint64_t seed);

void model_set_hooks(model *m, const model_hooks *hooks);

/* Freezes the tensors matching pattern: a full name ("wpe", "h.0.ln1w") or a prefix ending in '*'
 * ("h.0.*"). A frozen tensor's gradient is zero when its layer's grads_ready hook runs (so data parallel
 * averages zeros) and the optimizer leaves it alone (train/step.h), weight decay included. Backward still
 * computes through it: the inputs' gradients need it. Returns the number of tensors matched. */
int model_freeze(model *m, const char *pattern);
int model_count_frozen(const model *m);
/* What backward calls when a layer's gradients are final: zeroes the frozen ones, then the hook. */
void model_grads_ready(model *m, int layer);

/* Forward over a (B,T) batch of tokens. With targets (B,T) (-1 = ignored) returns the mean loss over
 * counted positions and keeps what backward needs; without (targets NULL) returns 0 and leaves the
 * logits for sampling. Activations are allocated (MEM_ACT) at the first call and grown when B*T grows. */
float model_forward(model *m, const int *inputs, const int *targets, int B, int T);
/* Gradients of the mean loss of the last forward, ADDED to the gradient buffer (so micro-batches
 * accumulate; call model_zero_grad first). `loss_scale` multiplies the loss before backward (1 for
 * plain training; the loss scaler's value under mixed precision). */
void model_backward(model *m, float loss_scale);
void model_zero_grad(model *m);
/* Logits of position t of sequence b from the last forward: Vp floats, the first V meaningful. */
const float *model_logits(model *m, int b, int t);
/* Mixed precision (storage of activations in 2 bytes, 16-bit or fp8 matmuls): model/model_lowp.h. */

/* Exponent histograms of the activations forward keeps, per layer (hists[layer + 1], L + 2 of them, -1
 * the embeddings' output, L the final norm and the logits), taken in fp32 before any rounding to a low
 * format, so they show what each format would flush. Forward adds to them while set; NULL stops. */
void model_collect_act_hist(model *m, fp_hist *hists);

/* Bytes of activations the model holds for a (B,T) batch (what forward would allocate). */
size_t model_activation_bytes(const model_config *cfg, int B, int T);

#endif
