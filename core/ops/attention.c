/* attention.c: causal self-attention forward (softmax probabilities saved) and backward, with grouped-query heads. */
#include "ops/attention.h"

#include "base/error.h"
#include "base/mem.h"
#include "ops/fastmath.h"
#include "ops/parallel.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

static void check_heads(int NH, int KVH, int HS) {
    MP_ASSERT(NH > 0 && KVH > 0 && HS > 0 && NH % KVH == 0,
              "attention needs NH > 0, KVH > 0 dividing NH, HS > 0: NH=%d KVH=%d HS=%d", NH, KVH, HS);
}

void attention_forward(float *out, float *att, const float *qkv, int B, int T, int NH, int KVH, int HS) {
    check_heads(NH, KVH, HS);
    const int row = (NH + 2 * KVH) * HS; /* floats per position in qkv */
    const int C = NH * HS;               /* floats per position in out */
    const int group = NH / KVH;          /* query heads per kv head */
    const float scale = 1.0f / sqrtf((float)HS);
#pragma omp parallel for collapse(3) schedule(static) if (ops_worth_threads((long)B * NH * T * T * HS / 2))
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const int kvh = h / group;
                const float *restrict q = qkv + ((size_t)b * T + t) * row + (size_t)h * HS;
                const float *k_base = qkv + (size_t)b * T * row + (size_t)(NH + kvh) * HS;
                const float *v_base = qkv + (size_t)b * T * row + (size_t)(NH + KVH + kvh) * HS;
                float *restrict p = att + (((size_t)b * NH + h) * T + t) * T;
                float *restrict o = out + ((size_t)b * T + t) * C + (size_t)h * HS;

                float max = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *restrict k = k_base + (size_t)t2 * row;
                    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                    for (int i = 0; i < HS; i++) dot += q[i] * k[i];
                    p[t2] = dot * scale;
                    max = p[t2] > max ? p[t2] : max;
                }
                float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                for (int t2 = 0; t2 <= t; t2++) {
                    p[t2] = ops_expf(p[t2] - max);
                    sum += p[t2];
                }
                const float inv_sum = 1.0f / sum; /* >= 1/(t+1): the max term contributes exp(0) = 1 */
#pragma omp simd
                for (int t2 = 0; t2 <= t; t2++) p[t2] *= inv_sum;
                for (int t2 = t + 1; t2 < T; t2++) p[t2] = 0.0f;

                memset(o, 0, (size_t)HS * sizeof *o);
                for (int t2 = 0; t2 <= t; t2++) {
                    const float *restrict v = v_base + (size_t)t2 * row;
                    const float a = p[t2];
#pragma omp simd
                    for (int i = 0; i < HS; i++) o[i] += a * v[i];
                }
            }
        }
    }
}

void attention_backward(float *dqkv, const float *dout, const float *qkv, const float *att, int B, int T, int NH,
                        int KVH, int HS) {
    check_heads(NH, KVH, HS);
    const int row = (NH + 2 * KVH) * HS;
    const int C = NH * HS;
    const int group = NH / KVH;
    const float scale = 1.0f / sqrtf((float)HS);
#pragma omp parallel if (ops_worth_threads((long)B * NH * T * T * HS / 2))
    {
        /* datt: the gradient at one row of probabilities, then (in place) at the scores. */
        float *datt = mem_alloc((size_t)T * sizeof(float), MEM_OTHER, "attention backward row");
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int kvh = 0; kvh < KVH; kvh++) {
                const size_t k_off = (size_t)(NH + kvh) * HS, v_off = (size_t)(NH + KVH + kvh) * HS;
                for (int h = kvh * group; h < (kvh + 1) * group; h++) {
                    for (int t = 0; t < T; t++) {
                        const size_t bt = (size_t)b * T + t;
                        const float *restrict q = qkv + bt * row + (size_t)h * HS;
                        float *restrict dq = dqkv + bt * row + (size_t)h * HS;
                        const float *restrict p = att + (((size_t)b * NH + h) * T + t) * T;
                        const float *restrict dy = dout + bt * C + (size_t)h * HS;

                        /* out = sum att * v:  datt[t2] = dy . v[t2],  dv[t2] += att[t2] * dy */
                        float p_datt = 0.0f; /* sum_t2 att[t2] * datt[t2], for the softmax backward */
                        for (int t2 = 0; t2 <= t; t2++) {
                            const float *restrict v = qkv + ((size_t)b * T + t2) * row + v_off;
                            float *restrict dv = dqkv + ((size_t)b * T + t2) * row + v_off;
                            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                            for (int i = 0; i < HS; i++) {
                                dot += dy[i] * v[i];
                                dv[i] += p[t2] * dy[i];
                            }
                            datt[t2] = dot;
                            p_datt += p[t2] * dot;
                        }
                        /* softmax: dscore[t2] = att[t2] * (datt[t2] - sum_j att[j] datt[j]); then the
                         * 1/sqrt(HS) scale; then score = q . k:  dq += dscore k,  dk += dscore q. */
                        for (int t2 = 0; t2 <= t; t2++) {
                            const float *restrict k = qkv + ((size_t)b * T + t2) * row + k_off;
                            float *restrict dk = dqkv + ((size_t)b * T + t2) * row + k_off;
                            const float dscore = p[t2] * (datt[t2] - p_datt) * scale;
#pragma omp simd
                            for (int i = 0; i < HS; i++) {
                                dq[i] += dscore * k[i];
                                dk[i] += dscore * q[i];
                            }
                        }
                    }
                }
            }
        }
        mem_free(datt);
    }
}
