/* sample.h: generating text from a model: temperature and top-k sampling, seeded. */
#ifndef MIXPAR_TRAIN_SAMPLE_H
#define MIXPAR_TRAIN_SAMPLE_H

#include "base/rng.h"
#include "model/model.h"

#include <stdint.h>

typedef struct {
    float temperature; /* > 0; 1 samples the model's distribution, lower is greedier */
    int top_k;         /* sample among the k most likely tokens; 0 = all */
    uint64_t seed;
} sample_options;

/* Appends `ntokens` tokens to `tokens` (which holds `nprompt` prompt tokens and has room for
 * nprompt + ntokens). Each step runs the model over the last maxT tokens (no cache: the models here are
 * small) and draws the next token from softmax(logits / temperature), restricted to the top k. An empty
 * prompt starts from token 0. Returns the number of tokens now in `tokens`. */
int sample_generate(model *m, int *tokens, int nprompt, int ntokens, const sample_options *opt);

/* The index drawn from softmax(logits[0..V) / temperature) over the top k, using rng. */
int sample_from_logits(const float *logits, int V, float temperature, int top_k, mp_rng *rng);

#endif
