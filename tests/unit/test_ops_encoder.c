/* test_ops_encoder.c: token + position embedding: exact lookups, repeated tokens, gradient check, determinism. */
#include "ops/encoder.h"
#include "ops/gradcheck.h"
#include "ops_testutil.h"

#include <omp.h>

Test(ops_encoder, forward_is_token_row_plus_position_row) {
    const int B = 2, T = 3, C = 5, V = 7;
    const int tokens[] = {6, 0, 6, 3, 3, 1};
    float *wte = tu_uniform(V * C, -1, 1, 1), *wpe = tu_uniform(T * C, -1, 1, 2), *out = tu_zeros(B * T * C);
    encoder_forward(out, tokens, wte, wpe, B, T, C, V);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                float expected = wte[tokens[b * T + t] * C + c] + wpe[t * C + c];
                cr_assert(out[(b * T + t) * C + c] == expected, "out[%d][%d][%d]", b, t, c);
            }
    encoder_forward(out, tokens, wte, NULL, B, T, C, V); /* RoPE models: no position table */
    for (int i = 0; i < B * T; i++)
        cr_assert(tu_bits_equal(out + i * C, wte + tokens[i] * C, C), "without wpe, row %d is the token row", i);
    free(wte), free(wpe), free(out);
}

Test(ops_encoder, backward_sums_repeated_tokens_and_positions) {
    const int B = 2, T = 3, C = 4, V = 5;
    const int tokens[] = {4, 4, 1, 4, 0, 1};
    float *dout = tu_uniform(B * T * C, -1, 1, 3), *dwte = tu_zeros(V * C), *dwpe = tu_zeros(T * C);
    encoder_backward(dwte, dwpe, dout, tokens, B, T, C, V);
    float *ewte = tu_zeros(V * C), *ewpe = tu_zeros(T * C);
    for (int i = 0; i < B * T; i++)
        for (int c = 0; c < C; c++) ewte[tokens[i] * C + c] += dout[i * C + c], ewpe[(i % T) * C + c] += dout[i * C + c];
    cr_expect(ops_compare("dwte", ewte, dwte, V * C, 0), "token 4 appears three times: its row sums three rows of dout");
    cr_expect(ops_compare("dwpe", ewpe, dwpe, T * C, 0));
    for (int c = 0; c < C; c++) cr_expect(dwte[2 * C + c] == 0 && dwte[3 * C + c] == 0, "unused tokens get no gradient");
    free(dout), free(dwte), free(dwpe), free(ewte), free(ewpe);
}

typedef struct {
    float *wte, *wpe, *out, *w;
    const int *tokens;
    int B, T, C, V;
} enc_ctx;

static double enc_loss(void *p) {
    enc_ctx *e = p;
    encoder_forward(e->out, e->tokens, e->wte, e->wpe, e->B, e->T, e->C, e->V);
    return tu_weighted_sum(e->w, e->out, (long)e->B * e->T * e->C);
}

Test(ops_encoder, backward_matches_finite_differences) {
    static const int tokens[] = {2, 5, 2, 0, 5, 5};
    enc_ctx e = {.tokens = tokens, .B = 2, .T = 3, .C = 5, .V = 6};
    e.wte = tu_uniform(e.V * e.C, -1, 1, 4);
    e.wpe = tu_uniform(e.T * e.C, -1, 1, 5);
    e.w = tu_uniform(e.B * e.T * e.C, -1, 1, 6);
    e.out = tu_zeros(e.B * e.T * e.C);
    float *dwte = tu_zeros(e.V * e.C), *dwpe = tu_zeros(e.T * e.C);
    encoder_backward(dwte, dwpe, e.w, e.tokens, e.B, e.T, e.C, e.V);
    ops_gradcheck_options opt = OPS_GRADCHECK_DEFAULTS; /* linear: rounding noise only */
    opt.rel_tol = 1e-3;
    cr_expect_eq(ops_gradcheck("encoder dwte", enc_loss, &e, e.wte, dwte, e.V * e.C, &opt).failed, 0);
    cr_expect_eq(ops_gradcheck("encoder dwpe", enc_loss, &e, e.wpe, dwpe, e.T * e.C, &opt).failed, 0);
    free(e.wte), free(e.wpe), free(e.w), free(e.out), free(dwte), free(dwpe);
}

Test(ops_encoder, backward_does_not_depend_on_thread_count) {
    const int B = 4, T = 32, C = 300, V = 4; /* big enough to run multi-threaded */
    int tokens[128];
    for (int i = 0; i < 128; i++) tokens[i] = (i * 7) % V;
    float *dout = tu_uniform(B * T * C, -1, 1, 7), *a = tu_zeros(V * C), *b = tu_zeros(V * C);
    omp_set_num_threads(1);
    encoder_backward(a, NULL, dout, tokens, B, T, C, V);
    omp_set_num_threads(2);
    encoder_backward(b, NULL, dout, tokens, B, T, C, V);
    cr_expect(tu_bits_equal(a, b, V * C), "dwte with 1 and 2 threads should be bit-identical");
    free(dout), free(a), free(b);
}

Test(ops_encoder, token_outside_vocabulary_is_an_internal_error, .exit_code = 3) {
    const int tokens[] = {0, 9};
    float wte[4] = {0}, out[4];
    encoder_forward(out, tokens, wte, NULL, 1, 2, 2, 2);
}
