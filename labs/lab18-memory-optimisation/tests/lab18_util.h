/* lab18_util.h: shared helpers of lab 18's tests: small models, a batch, the tensors a block keeps for backward
 * (layer_acts) by name and size, and a bit-for-bit comparison of one block's activations that says what differs. */
#ifndef LAB18_UTIL_H
#define LAB18_UTIL_H

#include "mptest.h"

#include "base/mem.h"
#include "base/rng.h"
#include "model/model.h"
#include "model/model_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Small models with what a recompute must reproduce: several blocks, heads, GPT-2's LayerNorm and GELU, or
 * LLaMA's RMSNorm, SwiGLU, RoPE and grouped-query attention (4 query heads sharing 2 key/value heads). */
static inline model_config lab18_config(model_arch arch, int L) {
    model_config c = {.arch = arch, .V = 50, .maxT = 16, .L = L, .C = 32, .NH = 4};
    if (arch == MODEL_LLAMA) c.KVH = 2;
    model_config_complete(&c);
    return c;
}

static inline void lab18_batch(int *inputs, int *targets, int n, int V, uint64_t seed) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (int i = 0; i < n; i++) {
        inputs[i] = (int)(mp_rng_u32(&rng) % (unsigned)V);
        targets[i] = (int)(mp_rng_u32(&rng) % (unsigned)V);
    }
}

/* A model with a policy, after one forward pass with targets over a (B,T) batch of `seed`. */
static inline model *lab18_forward(const model_config *c, model_recompute policy, int k, int B, int T, uint64_t seed,
                                   float *loss) {
    model *m = model_create(c);
    model_init(m, 1234);
    model_set_recompute(m, policy, k);
    int *in = malloc(sizeof(int) * (size_t)B * T), *tg = malloc(sizeof(int) * (size_t)B * T);
    MPT_REQUIRE(in && tg, "out of memory");
    lab18_batch(in, tg, B * T, c->V, seed);
    float l = model_forward(m, in, tg, B, T);
    if (loss) *loss = l;
    free(in);
    free(tg);
    return m;
}

/* The tensors of layer_acts, what each is, and its floats for a (B,T) batch. */
typedef struct {
    const char *name;
    size_t field;
    int kind; /* 0 (B,T,C)  1 (B,T) gpt2 only  2 (B,T)  3 (B,T,QKV)  4 (B,NH,T,T)  5 (B,T,FC_IN)  6 (B,T,F) */
} lab18_tensor;

static const lab18_tensor lab18_tensors[] = {
    {"ln1", offsetof(layer_acts, ln1), 0},         {"ln1_mean", offsetof(layer_acts, ln1_mean), 1},
    {"ln1_rstd", offsetof(layer_acts, ln1_rstd), 2}, {"qkv", offsetof(layer_acts, qkv), 3},
    {"atty", offsetof(layer_acts, atty), 0},       {"att", offsetof(layer_acts, att), 4},
    {"res2", offsetof(layer_acts, res2), 0},       {"ln2", offsetof(layer_acts, ln2), 0},
    {"ln2_mean", offsetof(layer_acts, ln2_mean), 1}, {"ln2_rstd", offsetof(layer_acts, ln2_rstd), 2},
    {"fch", offsetof(layer_acts, fch), 5},         {"fch_act", offsetof(layer_acts, fch_act), 6},
    {"res3", offsetof(layer_acts, res3), 0},
};
enum { LAB18_NTENSORS = sizeof lab18_tensors / sizeof lab18_tensors[0], LAB18_QKV = 3, LAB18_ATT = 5, LAB18_RES3 = LAB18_NTENSORS - 1 };

static inline size_t lab18_floats(const model_config *c, int B, int T, int kind) {
    size_t N = (size_t)B * T, HS = (size_t)(c->C / c->NH);
    switch (kind) {
    case 0: return N * c->C;
    case 1: return c->arch == MODEL_GPT2 ? N : 0;
    case 2: return N;
    case 3: return N * (c->NH + 2 * c->KVH) * HS;
    case 4: return (size_t)B * c->NH * T * T;
    case 5: return N * (c->arch == MODEL_LLAMA ? 2 * c->F : c->F);
    default: return N * c->F;
    }
}

static inline float *lab18_tensor_of(model *m, int l, int i) {
    return *(float **)((char *)&m->acts[l] + lab18_tensors[i].field);
}

/* Block l's tensor i in `got` against `want` (a model without recompute), bit for bit. Returns true when equal. */
static inline bool lab18_same_tensor(model *want, model *got, int l, int i, int B, int T, const char *when) {
    const model_config *c = model_get_config(want);
    size_t n = lab18_floats(c, B, T, lab18_tensors[i].kind);
    if (n == 0) return true;
    const float *a = lab18_tensor_of(want, l, i), *b = lab18_tensor_of(got, l, i);
    if (!b) {
        mpt_fail(__FILE__, __LINE__, "%s: block %d's %s is NULL: every tensor backward reads needs floats, its own or "
                 "the shared recompute buffer's", when, l, lab18_tensors[i].name);
        return false;
    }
    mpt_observe_near_f32(__FILE__, __LINE__, b, b, (long)n, 0, 0); /* what the grader compares with the reference */
    size_t bad = 0, first = 0;
    for (size_t j = 0; j < n; j++)
        if (memcmp(&a[j], &b[j], sizeof(float)) != 0 && bad++ == 0) first = j;
    if (bad)
        mpt_fail(__FILE__, __LINE__, "%s: block %d's %s: %zu of %zu floats differ from the forward without recompute "
                 "(first at %zu: expected %.9g, got %.9g)", when, l, lab18_tensors[i].name, bad, n, first,
                 (double)a[first], (double)b[first]);
    return bad == 0;
}

/* Bytes the layout should take, from the shapes: a block keeping everything holds all 13 tensors, one keeping
 * no scores all but att, a checkpointed one only res3 (its output: the next block's input); plus one shared
 * copy of every tensor some block does not keep. Each tensor starts on a 64-byte boundary (16 floats). */
static inline size_t lab18_padded(size_t n) { return (n + 15) / 16 * 16; }

static inline size_t lab18_expected_bytes(const model_config *c, model_recompute policy, int k, int B, int T) {
    size_t own = 0, shared[LAB18_NTENSORS] = {0}, blocks_none = 0;
    for (int l = 0; l < c->L; l++) {
        model_keep keep = policy == MODEL_RECOMPUTE_NONE ? MODEL_KEEP_ALL
                          : policy == MODEL_RECOMPUTE_SELECTIVE ? MODEL_KEEP_NO_SCORES
                          : policy == MODEL_RECOMPUTE_EVERY || l % k == 0 ? MODEL_KEEP_INPUT : MODEL_KEEP_ALL;
        for (int i = 0; i < LAB18_NTENSORS; i++) {
            size_t n = lab18_padded(lab18_floats(c, B, T, lab18_tensors[i].kind));
            bool kept = keep == MODEL_KEEP_ALL || (keep == MODEL_KEEP_NO_SCORES && i != LAB18_ATT) || i == LAB18_RES3;
            if (kept) own += n;
            else shared[i] = n;
            blocks_none += n;
        }
    }
    for (int i = 0; i < LAB18_NTENSORS; i++) own += shared[i];
    size_t outside = model_activation_bytes(c, B, T) / 4 - blocks_none; /* the same under every policy */
    return (own + outside) * 4;
}

/* Spoils (NaN) what the checkpointed blocks of m do not keep, so a recompute that leaves a tensor alone shows. */
static inline void lab18_spoil_recompute_buffers(model *m, int B, int T) {
    const model_config *c = model_get_config(m);
    for (int l = 0; l < c->L; l++) {
        model_keep keep = model_keep_of(m, l);
        for (int i = 0; i < LAB18_NTENSORS && keep != MODEL_KEEP_ALL; i++) {
            if (i == LAB18_RES3 || (keep == MODEL_KEEP_NO_SCORES && i != LAB18_ATT)) continue;
            float *x = lab18_tensor_of(m, l, i);
            size_t n = lab18_floats(c, B, T, lab18_tensors[i].kind);
            for (size_t j = 0; x && j < n; j++) x[j] = NAN;
        }
    }
}

/* Recomputes the blocks of a model under `policy` from the last down, as backward does, and checks after
 * each that every tensor the block's backward reads is bit-identical to what the forward without recompute
 * kept. */
static inline void lab18_check_recompute(model_arch arch, int L, model_recompute policy, int k, int B, int T,
                                         const char *name) {
    model_config c = lab18_config(arch, L);
    model *base = lab18_forward(&c, MODEL_RECOMPUTE_NONE, 1, B, T, 17, NULL);
    model *m = lab18_forward(&c, policy, k, B, T, 17, NULL);
    lab18_spoil_recompute_buffers(m, B, T);
    for (int l = L - 1; l >= 0; l--) {
        model_recompute_block(m, l);
        char when[160];
        snprintf(when, sizeof when, "%s %s, after model_recompute_block(m, %d)", model_arch_name(arch), name, l);
        bool ok = true;
        for (int i = 0; i < LAB18_NTENSORS; i++) ok &= lab18_same_tensor(base, m, l, i, B, T, when);
        if (!ok) {
            mpt_fail(__FILE__, __LINE__, "hint: a checkpointed block reruns its forward from its input, which is block "
                     "%d's res3 (ga.encoded for block 0), not its own res3; selective reruns only the attention, from "
                     "the block's stored qkv", l - 1);
            break;
        }
    }
    model_free(m);
    model_free(base);
}

#endif
