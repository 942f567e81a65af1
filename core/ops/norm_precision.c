/* norm_precision.c: layer norm mean and variance with every operation rounded to a chosen format (lab 25, part B). */
#include "ops/norm_precision.h"

#include "base/error.h"
#include "base/lab.h"

#include <math.h>

float norm_round(const fp_format *fmt, float x) {
    if (fmt == &FP_FP32) return x;
    return fp_decode(fmt, fp_encode(fmt, x, FP_ROUND_NEAREST_EVEN, 0, 0));
}

const char *norm_method_name(norm_method method) {
    static const char *const names[NORM_NMETHODS] = {"two-pass", "one-pass"};
    MP_ASSERT(method >= 0 && method < NORM_NMETHODS, "norm method %d", (int)method);
    return names[method];
}

void norm_stats_in_format(const float *x, size_t n, const fp_format *fmt, norm_method method, float eps,
                          norm_stats *out) {
    MP_ASSERT(n >= 1 && fmt, "statistics of %zu values", n);
    MP_ASSERT(method >= 0 && method < NORM_NMETHODS, "norm method %d", (int)method);
    const fp_format *f = fmt;
    float count = norm_round(f, (float)n); /* n itself, in the format (768 and 1024 are exact in fp16) */
    /* LAB 25 BEGIN norm statistics in a format: sums, mean and variance, every result rounded with norm_round */
    float s = 0, q = 0;
    if (method == NORM_TWO_PASS) {
        for (size_t i = 0; i < n; i++) s = norm_round(f, s + norm_round(f, x[i]));
        out->mean = norm_round(f, s / count);
        for (size_t i = 0; i < n; i++) {
            float d = norm_round(f, norm_round(f, x[i]) - out->mean);
            q = norm_round(f, q + norm_round(f, d * d));
        }
        out->var = norm_round(f, q / count);
    } else {
        for (size_t i = 0; i < n; i++) {
            float xi = norm_round(f, x[i]);
            s = norm_round(f, s + xi);
            q = norm_round(f, q + norm_round(f, xi * xi));
        }
        out->mean = norm_round(f, s / count);
        out->var = norm_round(f, norm_round(f, q / count) - norm_round(f, out->mean * out->mean));
    }
    /* LAB 25 END */
    out->rstd = 1.0f / sqrtf(out->var + eps);
}
