/* lab11_model.h: lab 11's own small model, shared by the worker and the tests: linear regression
 * y = w . x + bias on synthetic rows, with its closed-form gradient, so the lab needs no other lab's code. */
#ifndef LAB11_MODEL_H
#define LAB11_MODEL_H

#include "base/rng.h"

#include <stddef.h>
#include <stdint.h>

enum {
    LAB11_D = 8,               /* features per row */
    LAB11_P = LAB11_D + 1,     /* parameters: D weights, then the bias */
    LAB11_EVAL_ROWS = 256,     /* the fixed evaluation set the loss is reported on */
};
#define LAB11_EVAL_BASE (UINT64_C(1) << 40) /* row ids of the evaluation set: far from any training row */

/* A uniform float in [-1, 1] from (seed, index). */
static inline float lab11_uniform(uint64_t seed, uint64_t index) {
    return (float)(mp_hash32(seed, index) % 20001u) / 10000.0f - 1.0f;
}

/* Row `id` of the endless data set: features x (D) and target y = w* . x + bias* + small noise, with the
 * true parameters w*_i and bias* fixed numbers in [-1, 1]. */
static inline void lab11_row(uint64_t id, float *x, float *y) {
    float t = lab11_uniform(0x11b, LAB11_D); /* bias* */
    for (int i = 0; i < LAB11_D; i++) {
        x[i] = lab11_uniform(0x11a + id * 131u, (uint64_t)i);
        t += lab11_uniform(0x11b, (uint64_t)i) * x[i];
    }
    *y = t + 0.01f * lab11_uniform(0x11c, id);
}

/* grad (P) = the gradient of the mean over rows of 0.5 (w . x + bias - y)^2, over rows id0 .. id0+rows-1,
 * at parameters p (P): mean of (prediction - y) * (x, 1). Overwrites grad (the caller owns one buffer). */
static inline void lab11_gradient(const float *p, uint64_t id0, int rows, float *grad) {
    for (int i = 0; i < LAB11_P; i++) grad[i] = 0;
    for (int j = 0; j < rows; j++) {
        float x[LAB11_D], y, pred = p[LAB11_D];
        lab11_row(id0 + (uint64_t)j, x, &y);
        for (int i = 0; i < LAB11_D; i++) pred += p[i] * x[i];
        const float err = pred - y;
        for (int i = 0; i < LAB11_D; i++) grad[i] += err * x[i];
        grad[LAB11_D] += err;
    }
    for (int i = 0; i < LAB11_P; i++) grad[i] /= (float)rows;
}

/* The loss (mean of 0.5 err^2) on the evaluation set, in double. */
static inline double lab11_eval_loss(const float *p) {
    double sum = 0;
    for (int j = 0; j < LAB11_EVAL_ROWS; j++) {
        float x[LAB11_D], y;
        lab11_row(LAB11_EVAL_BASE + (uint64_t)j, x, &y);
        double pred = p[LAB11_D];
        for (int i = 0; i < LAB11_D; i++) pred += (double)p[i] * x[i];
        sum += 0.5 * (pred - y) * (pred - y);
    }
    return sum / LAB11_EVAL_ROWS;
}

/* Where a synchronous step's rows start: step s of a global batch of `rows` rows takes ids s*rows ..; rank r
 * with b rows each takes its slice s*rows + r*b .. */
static inline uint64_t lab11_sync_rows(int step, int rows, int rank, int b) {
    return (uint64_t)step * (uint64_t)rows + (uint64_t)rank * (uint64_t)b;
}

/* Where an asynchronous worker's t-th gradient's b rows start: each (worker, t) its own rows. */
static inline uint64_t lab11_async_rows(int worker, int t, int b) {
    return ((uint64_t)t * 64u + (uint64_t)worker) * (uint64_t)b + (UINT64_C(1) << 32);
}

#endif
