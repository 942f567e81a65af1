/* test_fp_mx.c: Criterion tests of the MX block formats (fp/mx.h) as the core uses them: the format table against the
 * element formats, the row-blocked round trip against quantize + dequantize, the error metrics, and MXFP8 matmuls in
 * the model (model_precision.fp8_mx). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "fp/mx.h"
#include "model/model.h"
#include "model/model_lowp.h"

/* emax is the exponent of the element's largest value, and its largest value is what the table says. */
Test(fp_mx, table_matches_the_element_formats) {
    for (int k = 0; k < MX_NFORMATS; k++) {
        const mx_format *f = &MX_FORMATS[k];
        double max = f->fmt ? fp_max(f->fmt) : 127.0 / 64;
        cr_expect_eq(ilogb(max), f->emax, "%s: emax %d, largest element %g", f->name, f->emax, max);
        cr_expect_eq(f->fmt ? fp_format_bits(f->fmt) : 8, f->bits, "%s: element bits", f->name);
        cr_expect_eq(mx_format_by_name(f->name), f, "%s: found by name", f->name);
    }
    cr_expect_eq(mx_format_by_name("mxfp4"), mx_format_by_name("mxfp4-e2m1"));
    cr_expect_null(mx_format_by_name("mxfp5"));
    cr_expect_eq(fp_max(&MX_E2M1), 6.0);
    cr_expect_eq(fp_max(&MX_E2M3), 7.5);
    cr_expect_eq(fp_max(&MX_E3M2), 28.0);
}

/* mx_round_trip with rows of 48 (blocks restart at each row: 32 + 16) equals quantize + dequantize row by row. */
Test(fp_mx, round_trip_by_rows_matches_quantize_dequantize) {
    enum { ROWS = 5, ROW = 48, N = ROWS * ROW };
    float x[N], got[N], want[N];
    mp_rng r;
    mp_rng_seed(&r, 3);
    for (int i = 0; i < N; i++) x[i] = ldexpf(mp_rng_uniform(&r) - 0.5f, (int)(mp_rng_u32(&r) % 12) - 6);
    for (int k = 0; k < MX_NFORMATS; k++) {
        const mx_format *f = &MX_FORMATS[k];
        if (f->scale != MX_SCALE_E8M0) continue; /* NVFP4's tensor scale spans rows */
        mx_round_trip(f, x, got, N, ROW);
        for (int row = 0; row < ROWS; row++) {
            uint8_t s[2], c[ROW];
            mx_quantize(f, x + row * ROW, ROW, s, c, NULL);
            mx_dequantize(f, s, c, ROW, 1.0f, want + row * ROW);
        }
        cr_expect_eq(memcmp(got, want, sizeof got), 0, "%s: row-blocked round trip", f->name);
    }
}

Test(fp_mx, error_metrics) {
    const float x[4] = {1, -2, 0, 4}, y[4] = {1, -2, 0.5f, 3};
    mx_error e = mx_error_of(x, y, 4);
    cr_expect_float_eq(e.rel_error, sqrt(1.25 / 21), 1e-12);
    cr_expect_float_eq(e.snr_db, 10 * log10(21 / 1.25), 1e-9);
    cr_expect_eq(e.max_abs_error, 1.0);
    mx_error same = mx_error_of(x, x, 4);
    cr_expect(isinf(same.snr_db) && same.rel_error == 0);
}

enum { B = 2, T = 16, V = 128 };

static model *tiny(void) {
    model_config c = {.arch = MODEL_GPT2, .V = V, .maxT = T, .L = 2, .C = 32, .NH = 4, .tied = true};
    model_config_complete(&c);
    model *m = model_create(&c);
    model_init(m, 5);
    return m;
}

static float step(model *m, float *grads) {
    int in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) in[i] = (i * 7) % V, tg[i] = (i * 13 + 1) % V;
    model_zero_grad(m);
    float loss = model_forward(m, in, tg, B, T);
    model_backward(m, 1.0f);
    memcpy(grads, model_grads(m), model_num_params(m) * sizeof(float));
    return loss;
}

/* MXFP8 matmuls compute the fp32 function within fp8's precision, and differently from per-tensor fp8. */
Test(fp_mx, model_mxfp8_tracks_fp32) {
    model *m = tiny();
    size_t n = model_num_params(m);
    float *g32 = malloc(n * 4), *gmx = malloc(n * 4), *g8 = malloc(n * 4);
    float loss32 = step(m, g32);
    model_set_precision(m, &(model_precision){.compute = MODEL_COMPUTE_FP8, .fp8_mx = true});
    cr_assert(model_get_fp8_mx(m));
    float lossmx = step(m, gmx);
    model_set_precision(m, &(model_precision){.compute = MODEL_COMPUTE_FP8});
    step(m, g8); /* the first step sets the per-tensor scales */
    float loss8 = step(m, g8);
    double num = 0, den = 0, diff = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)gmx[i] - g32[i]) * ((double)gmx[i] - g32[i]);
        den += (double)g32[i] * g32[i];
        diff += gmx[i] != g8[i];
    }
    cr_expect(fabsf(lossmx - loss32) <= 1e-2f * loss32, "loss %.6f vs fp32 %.6f", lossmx, loss32);
    cr_expect(sqrt(num / den) < 0.2 && num > 0, "gradient relative error %.3g", sqrt(num / den));
    cr_expect(diff > n / 2, "MXFP8 and per-tensor fp8 gradients differ (%.0f of %zu); losses %.6f, %.6f", diff, n,
              lossmx, loss8);
    free(g32), free(gmx), free(g8);
    model_free(m);
}

/* Blocks of 32 along rows need rows that are multiples of 32: C = 48 is refused with exit 2. */
Test(fp_mx, model_mxfp8_needs_rows_of_32, .exit_code = 2) {
    model_config c = {.arch = MODEL_GPT2, .V = V, .maxT = T, .L = 1, .C = 48, .NH = 4, .tied = true};
    model_config_complete(&c);
    model *m = model_create(&c);
    model_set_precision(m, &(model_precision){.compute = MODEL_COMPUTE_FP8, .fp8_mx = true});
}
