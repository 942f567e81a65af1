/* lab13_model.h: the models lab 13's worker trains and its tests reason about, and the batch every rank draws from. */
#ifndef LAB13_MODEL_H
#define LAB13_MODEL_H

#include "base/rng.h"
#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

/* The test model: small enough that a step takes milliseconds, deep enough (3 blocks) for several buckets. */
static inline model_config lab13_test_config(void) {
    model_config c = {.arch = MODEL_GPT2, .V = 32, .maxT = 8, .L = 3, .C = 16, .NH = 2};
    model_config_complete(&c);
    return c;
}
enum { LAB13_T = 8 };

/* The experiment's model: big enough (about 0.8M parameters) that moving gradients costs something. */
static inline model_config lab13_bench_config(void) {
    model_config c = {.arch = MODEL_GPT2, .V = 64, .maxT = 32, .L = 4, .C = 128, .NH = 4};
    model_config_complete(&c);
    return c;
}

/* The global batch of step `step`: `rows` sequences of T+1 tokens, the same on every rank; rank r of
 * world trains on rows r*b .. r*b+b-1 (b = rows / world). Inputs are tokens 0..T-1, targets 1..T. */
static inline void lab13_batch(int step, int rows, int T, int V, int *inputs, int *targets) {
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < T; t++) {
            uint64_t key = (uint64_t)step * 1000003u + (uint64_t)r;
            inputs[r * T + t] = (int)(mp_hash32(key, (uint64_t)t) % (uint32_t)V);
            targets[r * T + t] = (int)(mp_hash32(key, (uint64_t)t + 1) % (uint32_t)V);
        }
}

/* FNV-1a of a float buffer's bytes: equal hashes, bit-identical buffers. */
static inline uint64_t lab13_hash(const float *x, size_t n) {
    const unsigned char *p = (const unsigned char *)x;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

#endif
