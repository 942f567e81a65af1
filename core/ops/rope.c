/* rope.c: rotary position embedding: rotate q/k channel pairs by position-dependent angles, and back (lab 21 writes
 * the frequencies, the rotation and its backward). */
#include "ops/rope.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/mem.h"
#include "ops/parallel.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

double rope_frequency(int i, int HS, double theta) {
    /* LAB 21 BEGIN RoPE frequency of pair i: theta^(-2i/HS), in double */
    return pow(theta, -2.0 * i / HS);
    /* LAB 21 END */
}

/* cos and sin tables (T, HS/2). Angles are computed in double: at t = 4096 and freq 1, an angle
 * rounded to float would be off by 2e-4 radians (lab 21 measures what bf16 would do). */
static void rope_tables(float *cosines, float *sines, int T, int HS, float theta) {
    const int half = HS / 2;
    for (int i = 0; i < half; i++) {
        double freq = rope_frequency(i, HS, theta);
        for (int t = 0; t < T; t++) {
            double angle = t * freq;
            cosines[(size_t)t * half + i] = (float)cos(angle);
            sines[(size_t)t * half + i] = (float)sin(angle);
        }
    }
}

/* One head at one position, forward: each pair (x[i], x[i + half]) rotated by the angle whose cos and sin are
 * cs[i], sn[i]. */
static inline void rope_rotate_head(float *restrict x, const float *restrict cs, const float *restrict sn, int half) {
    /* LAB 21 BEGIN RoPE forward: rotate each pair (x[i], x[i + half]) by its angle */
#pragma omp simd
    for (int i = 0; i < half; i++) {
        float x1 = x[i], x2 = x[i + half];
        x[i] = x1 * cs[i] - x2 * sn[i];
        x[i + half] = x1 * sn[i] + x2 * cs[i];
    }
    /* LAB 21 END */
}

/* One head at one position, backward: dx holds the gradient at the rotated pair; on return the gradient at the
 * pair before the rotation. */
static inline void rope_unrotate_head(float *restrict dx, const float *restrict cs, const float *restrict sn,
                                      int half) {
    /* LAB 21 BEGIN RoPE backward: the Jacobian of a rotation is the rotation, so apply its transpose */
#pragma omp simd
    for (int i = 0; i < half; i++) {
        float d1 = dx[i], d2 = dx[i + half];
        dx[i] = d1 * cs[i] + d2 * sn[i];
        dx[i + half] = -d1 * sn[i] + d2 * cs[i];
    }
    /* LAB 21 END */
}

/* Every q and k head of every position: rotated forward, or the gradient taken back through the rotation. */
static void rope_apply(float *qkv, int B, int T, int NH, int KVH, int HS, float theta, bool backward) {
    MP_ASSERT(HS > 0 && HS % 2 == 0, "RoPE needs an even head size, got HS=%d", HS);
    MP_ASSERT(NH > 0 && KVH > 0 && NH % KVH == 0, "RoPE needs KVH dividing NH: NH=%d KVH=%d", NH, KVH);
    MP_ASSERT(theta > 1.0f, "RoPE theta must be > 1, got %g", theta);
    const int half = HS / 2, row = (NH + 2 * KVH) * HS, rotated_heads = NH + KVH; /* q heads, then k heads */
    float *cosines = mem_alloc((size_t)T * half * sizeof(float), MEM_OTHER, "rope cos table");
    float *sines = mem_alloc((size_t)T * half * sizeof(float), MEM_OTHER, "rope sin table");
    rope_tables(cosines, sines, T, HS, theta);
#pragma omp parallel for collapse(2) schedule(static) if (ops_worth_threads((long)B * T * rotated_heads * HS))
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const float *cs = cosines + (size_t)t * half, *sn = sines + (size_t)t * half;
            for (int h = 0; h < rotated_heads; h++) {
                float *x = qkv + ((size_t)b * T + t) * row + (size_t)h * HS;
                if (backward) rope_unrotate_head(x, cs, sn, half);
                else rope_rotate_head(x, cs, sn, half);
            }
        }
    }
    mem_free(sines);
    mem_free(cosines);
}

void rope_forward(float *qkv, int B, int T, int NH, int KVH, int HS, float theta) {
    rope_apply(qkv, B, T, NH, KVH, HS, theta, false);
}

void rope_backward(float *dqkv, int B, int T, int NH, int KVH, int HS, float theta) {
    rope_apply(dqkv, B, T, NH, KVH, HS, theta, true);
}
