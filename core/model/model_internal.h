/* model_internal.h: what model.c and the low-precision path (model_lowp.c) share: the model's struct and layouts. */
#ifndef MIXPAR_MODEL_MODEL_INTERNAL_H
#define MIXPAR_MODEL_MODEL_INTERNAL_H

#include "model/model.h"
#include "model/model_lowp.h"

typedef struct {
    float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} layer_params;
typedef struct {
    float *wte, *wpe, *lnfw, *lnfb, *head;
} global_params;

/* What forward keeps for backward, per block. */
typedef struct {
    float *ln1;       /* (B,T,C) input of the qkv projection */
    float *ln1_mean;  /* (B,T) gpt2 only */
    float *ln1_rstd;  /* (B,T) */
    float *qkv;       /* (B,T,(NH+2*KVH)*HS), after RoPE for llama */
    float *atty;      /* (B,T,C) attention output, input of attproj */
    float *att;       /* (B,NH,T,T) softmax probabilities */
    float *res2;      /* (B,T,C) residual stream after attention */
    float *ln2;       /* (B,T,C) */
    float *ln2_mean;  /* (B,T) gpt2 only */
    float *ln2_rstd;  /* (B,T) */
    float *fch;       /* (B,T,F) gpt2: GELU input; (B,T,2F) llama: gate | up */
    float *fch_act;   /* (B,T,F) MLP activation, input of fcproj */
    float *res3;      /* (B,T,C) residual stream after the block */
} layer_acts;

typedef struct {
    float *encoded;   /* (B,T,C) */
    float *lnf;       /* (B,T,C) */
    float *lnf_mean;  /* (B,T) gpt2 only */
    float *lnf_rstd;  /* (B,T) */
    float *logits;    /* (B,T,Vp); backward overwrites it with dlogits */
    float *losses;    /* (B,T) */
    float *lse;       /* (B,T) */
    /* scratch, shared by all layers */
    float *proj;      /* (B,T,C) attproj/fcproj output before the residual add */
    float *dres;      /* (B,T,C) gradient of the residual stream */
    float *dln;       /* (B,T,C) */
    float *datty;     /* (B,T,C) */
    float *dqkv;      /* (B,T,QKV) */
    float *dfch;      /* (B,T,FC_IN) */
    float *dfch_act;  /* (B,T,F) */
    float *dloss;     /* (B,T) */
    /* sequence parallel only (NULL otherwise); the tensors above marked (B,T,C) that live on the residual
     * stream are (B,T/tp,C) there: encoded, lnf, dres, and every block's ln1, res2, ln2, res3 */
    float *seq_full;  /* (B,T,C) an all-gathered slice: a norm's output before a column-parallel matmul,
                       * or dres before a row-parallel matmul's backward */
    float *seq_part;  /* (B,T/tp,C) a reduce-scattered sum: a row-parallel output or an input gradient */
} global_acts;

typedef struct model_lowp model_lowp;

/* One micro-batch's activations and batch (model_use_act_slot swaps them in and out of the model). */
typedef struct {
    float *act_memory;
    size_t act_floats;
    int B, T;
    layer_acts *acts;
    global_acts ga;
    int *inputs, *targets;
    size_t batch_capacity;
    int counted;
    bool have_targets;
} model_act_slot;

/* The sizes this rank's shard computes with (the whole model's when it is not a shard). */
typedef struct {
    int NH, KVH, HS;    /* local query and key/value heads; head size */
    int QKV, ATT;       /* qkv rows (NH + 2 KVH) HS; attention output width NH HS */
    int FC, F;          /* fc rows (llama: 2F); MLP hidden size */
    int Vp, v0;         /* vocabulary rows held and the first one's index */
    int first, last;    /* blocks [first, last) */
    int seq_split;      /* sequence parallel: tp (the residual stream holds T/tp positions); 1 otherwise */
    int seq_rank;       /* this rank's slice of the sequence: positions [seq_rank T/seq_split, ...) */
    bool embed, head;   /* first stage, last stage */
} model_dims;

struct model {
    model_config cfg;
    model_tensor *tensors;
    int ntensors;
    size_t nparams;
    float *params, *grads;              /* (nparams) each */
    layer_params *layer_w, *layer_g;    /* (L) pointers into params / grads */
    global_params w, g;
    model_hooks hooks;
    /* activations for the current batch shape */
    float *act_memory;
    size_t act_floats;
    int B, T;
    layer_acts *acts;
    global_acts ga;
    int *inputs, *targets;              /* (B,T) copies of the last batch */
    size_t batch_capacity;              /* positions inputs and targets have room for */
    int counted;                        /* targets that are not -1 */
    bool have_targets;
    model_lowp *lowp;                   /* the mixed-precision path; NULL while the model runs fp32 */
    fp_hist *act_hists;                 /* (L + 2) activation histograms being collected, or NULL */
    model_act_probe act_probe;          /* told of every activation forward computes (model.h), or NULL */
    void *act_probe_ctx;
    bool recomputing;                   /* fp32 path: a block's forward is being rerun in backward */
    model_recompute recompute;          /* activation checkpointing policy (model.h) [none] */
    int recompute_k;                    /* every_k's k [1] */
    bool reserved;                      /* params and grads are reserved address space (model_create_reserved) */
    bool grads_reserved;                /* grads are (reserved, or model_create_sharded_grads) */
    bool matrix_grads_written;          /* model_set_matrix_grads_written */
    bool matrix_grads_stale;            /* model_zero_grad left the matrices (blocks, head) to backward */
    model_shard shard;                  /* what part of the whole model this is (model.h) */
    model_dims dims;                    /* its sizes */
    bool is_shard;                      /* tp > 1 or a block range */
    model_act_slot *slots;              /* saved activation slots (model_use_act_slot); NULL: only slot 0 */
    int nslots, slot;                   /* slots made, the one in use */
};


typedef enum { DIM_NONE, DIM_C, DIM_QKV, DIM_FC_IN, DIM_F, DIM_VP, DIM_MAXT, DIM_ATT } dim_kind;
int model_dim_size(const model_config *c, dim_kind d);
/* Checks a batch (sizes, token ranges; exit 2 naming the position) and keeps a copy of its tokens. */
void model_check_batch(model *m, const int *inputs, const int *targets, int B, int T);
void model_norm_forward(const model *m, float *out, float *mean, float *rstd, const float *inp, const float *w,
                        const float *b, int N);
void model_norm_backward(const model *m, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                         const float *w, const float *mean, const float *rstd, int N);
static inline void model_hook(void (*fn)(void *, int), void *ctx, int layer) {
    if (fn) fn(ctx, layer);
}

/* Forward computed n values of the activation `name` of a layer (a name of model.h's activation list):
 * adds them to the layer's histogram when one is being collected, and shows them to the probe when one
 * is set (it may change them). Call it before anything reads them, and not during a recompute. */
void model_act_computed(model *m, int layer, const char *name, float *x, size_t n);
/* What block l of m keeps under the model's policy. */
static inline model_keep model_keep_of(const model *m, int l) {
    return model_block_keeps(m->recompute, m->recompute_k, l);
}
/* fp32 path: refills what block `layer` did not keep (its whole forward from the stored input, or only
 * the attention probabilities), so that block's backward can run; nothing for a block that keeps all.
 * model_backward calls it right after before_backward(layer). */
void model_recompute_block(model *m, int layer);

/* model_lowp.c */
float model_lowp_forward(model *m, const int *inputs, const int *targets, int B, int T);
void model_lowp_backward(model *m, float loss_scale);
/* Whether the weight-gradient products of model_lowp_backward can write their matrices (the 16-bit kernel). */
bool model_lowp_can_write_matrix_grads(const model *m);
const float *model_lowp_logits(model *m, int b, int t);
void model_lowp_free(model_lowp *lp);
void model_lowp_drop_activations(model *m); /* frees the stored activations and the scratch (a new policy) */
/* Reserved models: the weight cache of params[offset, offset + n) made (committed and cast) or dropped. */
void model_lowp_cast_range(model *m, size_t offset, size_t n);
void model_lowp_drop_range(model *m, size_t offset, size_t n);
/* A shard's autocast (model_lowp.c, "autocast on a shard"): bf16 or fp16 on the fp32 path. The cast cache
 * made again from the weights (each forward); the cached, rounded copy of one of the model's parameters
 * (NULL for NULL); x rounded in place to the compute format (nothing while the model computes in fp32). */
void model_lowp_shard_cast(model *m);
const float *model_lowp_shard_weight(const model *m, const float *param);
void model_lowp_round(const model *m, float *x, size_t n);

#endif
