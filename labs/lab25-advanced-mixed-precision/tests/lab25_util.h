/* lab25_util.h: helpers for the lab 25 tests: fp8 metadata with chosen settings, reference casts from the generic
 * format engine (fp/format.h), and a checked scale. */
#ifndef LAB25_UTIL_H
#define LAB25_UTIL_H

#include "amp/fp8.h"
#include "fp/format.h"
#include "fp/half.h"
#include "base/rng.h"
#include "mptest.h"
#include "ops/norm_precision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The scale for an amax, compared with the expected power of two; `why` is the arithmetic. */
#define CHECK_SCALE(amax, fmax, margin, previous, want, why) \
    lab25_check_scale(__FILE__, __LINE__, (amax), (fmax), (margin), (previous), (want), (why))
static inline bool lab25_check_scale(const char *file, int line, float amax, double fmax, int margin, float previous,
                                     float want, const char *why) {
    float got = amp_fp8_scale_for_amax(amax, fmax, margin, previous);
    mpt_observe(file, line, fp_float_bits(got)); /* what the grader compares with the reference */
    /* and the scale for an amax drawn from this grade's seed */
    static uint64_t calls;
    float drawn = ldexpf(1.0f + (float)(mp_hash32(mpt_seed(), calls) % 4096) / 4096.0f,
                         (int)(mp_hash32(mpt_seed(), calls + 1000) % 200) - 100);
    calls++;
    mpt_observe(file, line, fp_float_bits(amp_fp8_scale_for_amax(drawn, fmax, margin, previous)));
    if (fp_float_bits(got) == fp_float_bits(want)) return true;
    int e;
    bool power_of_two = isfinite(got) && got > 0 && frexpf(got, &e) == 0.5f;
    mpt_fail(file, line,
             "amp_fp8_scale_for_amax(amax %.9g, fmax %g, margin %d, previous %g)\n      expected: %.9g   (%s)\n"
             "      got:      %.9g\n      likely mistake: %s",
             (double)amax, fmax, margin, (double)previous, (double)want, why, (double)got,
             !(amax > 0) || !isfinite(amax)
                 ? "an amax of 0, inf or NaN says nothing about the tensor's range: return the previous scale"
             : !power_of_two ? "the scale is a power of two, 2^(floor(log2(fmax / amax)) - margin), not fmax / amax "
                               "itself: multiplying by a power of two adds no rounding"
                             : "scale = 2^(floor(log2(fmax / amax)) - margin), the exponent clamped to [-126, 127]; "
                               "compute floor(log2) exactly (frexp on the double ratio gives the exponent), not "
                               "with log2f, which can be off at exact powers of 2");
    return false;
}

/* The e4m3/e5m2 code a saturating cast of v gives (nearest even). */
static inline uint8_t lab25_code(const fp_format *fmt, float v) {
    return (uint8_t)fp_encode(fmt, v, FP_ROUND_NEAREST_EVEN, 1, 0);
}

/* x rounded to fmt, nearest even, overflow to inf: the rounding the norm statistics use. */
static inline float lab25_round(const fp_format *fmt, float x) {
    if (fmt == &FP_FP32) return x;
    return fp_decode(fmt, fp_encode(fmt, x, FP_ROUND_NEAREST_EVEN, 0, 0));
}

/* The statistics as norm_precision.h defines them, written out again: the reference the tests compare with. */
static inline void lab25_reference_stats(const float *x, size_t n, const fp_format *f, norm_method method,
                                         float *mean, float *var) {
    float cnt = lab25_round(f, (float)n), s = 0, q = 0;
    if (method == NORM_TWO_PASS) {
        for (size_t i = 0; i < n; i++) s = lab25_round(f, s + lab25_round(f, x[i]));
        *mean = lab25_round(f, s / cnt);
        for (size_t i = 0; i < n; i++) {
            float d = lab25_round(f, lab25_round(f, x[i]) - *mean);
            q = lab25_round(f, q + lab25_round(f, d * d));
        }
        *var = lab25_round(f, q / cnt);
    } else {
        for (size_t i = 0; i < n; i++) {
            float xi = lab25_round(f, x[i]);
            s = lab25_round(f, s + xi);
            q = lab25_round(f, q + lab25_round(f, xi * xi));
        }
        *mean = lab25_round(f, s / cnt);
        *var = lab25_round(f, lab25_round(f, q / cnt) - lab25_round(f, *mean * *mean));
    }
}

/* norm_stats_in_format against the reference, bit for bit (NaN matches NaN). */
static inline bool lab25_same_stats(const char *file, int line, const float *x, size_t n, const fp_format *f,
                                    norm_method method, const char *what) {
    float want_mean, want_var;
    lab25_reference_stats(x, n, f, method, &want_mean, &want_var);
    norm_stats got;
    norm_stats_in_format(x, n, f, method, 1e-5f, &got);
    mpt_observe(file, line, (uint64_t)fp_float_bits(got.mean) << 32 | fp_float_bits(got.var)); /* for the grader */
    bool same_mean = fp_float_bits(got.mean) == fp_float_bits(want_mean) || (isnan(got.mean) && isnan(want_mean));
    bool same_var = fp_float_bits(got.var) == fp_float_bits(want_var) || (isnan(got.var) && isnan(want_var));
    if (same_mean && same_var) return true;
    mpt_fail(file, line,
             "%s: %s statistics of %zu values in %s\n      expected: mean %.9g, var %.9g\n"
             "      got:      mean %.9g, var %.9g\n      likely mistake: %s",
             what, norm_method_name(method), n, f->name, (double)want_mean, (double)want_var, (double)got.mean,
             (double)got.var,
             !same_mean ? "round x[i] to the format, then every sum: s = norm_round(f, s + xi), left to right; "
                          "mean = norm_round(f, s / n)"
             : method == NORM_TWO_PASS ? "d = round(xi - mean), q = round(q + round(d * d)), var = round(q / n)"
                                       : "var = round(round(q / n) - round(mean * mean)), q summed as round(q + round(xi * xi))");
    return false;
}
#define SAME_STATS(x, n, f, method, what) lab25_same_stats(__FILE__, __LINE__, (x), (n), (f), (method), (what))

#endif
