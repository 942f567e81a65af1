/* encoder.c: token + position embedding lookup (forward) and the scatter-add of its gradient (backward). */
#include "ops/encoder.h"

#include "base/error.h"
#include "ops/parallel.h"

#include <stddef.h>

static void check_tokens(const int *tokens, int BT, int V) {
    for (int i = 0; i < BT; i++)
        MP_ASSERT(tokens[i] >= 0 && tokens[i] < V, "token %d at position %d is outside the vocabulary [0, %d)",
                  tokens[i], i, V);
}

void encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C, int V) {
    check_tokens(tokens, B * T, V);
#pragma omp parallel for collapse(2) schedule(static) if (ops_worth_threads((long)B * T * C))
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float *restrict out_bt = out + ((size_t)b * T + t) * C;
            const float *restrict token_row = wte + (size_t)tokens[b * T + t] * C;
            if (wpe) {
                const float *restrict pos_row = wpe + (size_t)t * C;
#pragma omp simd
                for (int c = 0; c < C; c++) out_bt[c] = token_row[c] + pos_row[c];
            } else {
#pragma omp simd
                for (int c = 0; c < C; c++) out_bt[c] = token_row[c];
            }
        }
    }
}

void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C, int V) {
    check_tokens(tokens, B * T, V);
    /* Each thread takes a slice [c0, c1) of the channels and walks all positions in order: two positions
     * with the same token add into the same dwte row, but never from two threads at once. */
#pragma omp parallel if (ops_worth_threads((long)B * T * C))
    {
        int c0, c1;
        ops_thread_range(C, OPS_SIMD_FLOATS, &c0, &c1);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float *restrict dout_bt = dout + ((size_t)b * T + t) * C;
                if (dwte) {
                    float *restrict dtoken = dwte + (size_t)tokens[b * T + t] * C;
#pragma omp simd
                    for (int c = c0; c < c1; c++) dtoken[c] += dout_bt[c];
                }
                if (dwpe) {
                    float *restrict dpos = dwpe + (size_t)t * C;
#pragma omp simd
                    for (int c = c0; c < c1; c++) dpos[c] += dout_bt[c];
                }
            }
        }
    }
}
