/* rope.c: rotary position embedding: rotate q/k channel pairs by position-dependent angles, and back. */
#include "ops/rope.h"

#include "base/error.h"
#include "base/mem.h"
#include "ops/parallel.h"

#include <math.h>
#include <stddef.h>

/* cos and sin tables (T, HS/2). Angles are computed in double: at t = 4096 and freq 1, an angle
 * rounded to float would be off by 2e-4 radians. */
static void rope_tables(float *cosines, float *sines, int T, int HS, float theta) {
    const int half = HS / 2;
    for (int i = 0; i < half; i++) {
        double freq = pow((double)theta, -2.0 * i / HS);
        for (int t = 0; t < T; t++) {
            double angle = t * freq;
            cosines[(size_t)t * half + i] = (float)cos(angle);
            sines[(size_t)t * half + i] = (float)sin(angle);
        }
    }
}

/* Rotate every q and k head by +angle (direction = 1) or -angle (direction = -1). */
static void rope_rotate(float *qkv, int B, int T, int NH, int KVH, int HS, float theta, float direction) {
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
            const float *restrict cs = cosines + (size_t)t * half;
            const float *restrict sn = sines + (size_t)t * half;
            for (int h = 0; h < rotated_heads; h++) {
                float *restrict x = qkv + ((size_t)b * T + t) * row + (size_t)h * HS;
#pragma omp simd
                for (int i = 0; i < half; i++) {
                    float x1 = x[i], x2 = x[i + half], s = direction * sn[i];
                    x[i] = x1 * cs[i] - x2 * s;
                    x[i + half] = x1 * s + x2 * cs[i];
                }
            }
        }
    }
    mem_free(sines);
    mem_free(cosines);
}

void rope_forward(float *qkv, int B, int T, int NH, int KVH, int HS, float theta) {
    rope_rotate(qkv, B, T, NH, KVH, HS, theta, 1.0f);
}

void rope_backward(float *dqkv, int B, int T, int NH, int KVH, int HS, float theta) {
    rope_rotate(dqkv, B, T, NH, KVH, HS, theta, -1.0f);
}
