/* lab30_util.h: helpers for the lab 30 tests: the MX conversion written out from the specification's formulas
 * (a second reading of OCP MX v1.0 section 6.3 and of NVFP4, on the core's format engine), and checked blocks. */
#ifndef LAB30_UTIL_H
#define LAB30_UTIL_H

#include "base/rng.h"
#include "fp/format.h"
#include "fp/half.h"
#include "fp/mx.h"
#include "mptest.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline const mx_format *lab30_fmt(const char *name) {
    const mx_format *f = mx_format_by_name(name);
    if (!f) mpt_fail_stop(__FILE__, __LINE__, "no MX format named %s", name);
    return f;
}

/* The spec's scale: shared_exp = floor(log2(amax)) - emax (ilogb is floor(log2) for any finite nonzero float). */
static inline uint8_t lab30_ref_scale(float amax, int emax) {
    if (isnan(amax) || isinf(amax)) return 0xFF;
    if (amax == 0) return 0;
    int e = ilogbf(amax) - emax;
    e = e < -127 ? -127 : e > 127 ? 127 : e;
    return (uint8_t)(e + 127);
}

/* The spec's element rounding: nearest even, saturating. */
static inline uint8_t lab30_ref_element(const mx_format *f, double v) {
    if (!f->fmt) {
        double q = nearbyint(v * 64);
        q = q > 127 ? 127 : q < -127 ? -127 : q;
        return (uint8_t)(int8_t)q;
    }
    return (uint8_t)fp_encode(f->fmt, (float)v, FP_ROUND_NEAREST_EVEN, 1, 0);
}

static inline double lab30_ref_decode(const mx_format *f, uint8_t c) {
    return f->fmt ? (double)fp_decode(f->fmt, c) : (double)(int8_t)c / 64;
}

/* A whole array the reference way: scales, codes and values (NVFP4 with the tensor scale). */
static inline void lab30_ref_quantize(const mx_format *f, const float *x, size_t n, uint8_t *scales, uint8_t *codes,
                                      float *values) {
    size_t k = (size_t)f->block;
    float ts = 1;
    if (f->scale == MX_SCALE_E4M3_TENSOR) {
        float a = 0;
        for (size_t i = 0; i < n; i++)
            if (isfinite(x[i])) a = fmaxf(a, fabsf(x[i]));
        ts = a / 2688.0f;
        if (!(ts > 0) || !isfinite(ts)) ts = 1;
    }
    for (size_t b = 0; b * k < n; b++) {
        size_t i0 = b * k, len = n - i0 < k ? n - i0 : k;
        float amax = 0;
        bool special = false;
        for (size_t i = i0; i < i0 + len; i++) {
            special |= !isfinite(x[i]);
            amax = fmaxf(amax, fabsf(x[i]));
        }
        double s;
        if (f->scale == MX_SCALE_E8M0) {
            scales[b] = special ? 0xFF : lab30_ref_scale(amax, f->emax);
            s = scales[b] == 0xFF ? NAN : ldexp(1.0, scales[b] - 127);
        } else {
            scales[b] = special ? 0x7F : (uint8_t)fp_encode(&FP_E4M3, amax / 6.0f / ts, FP_ROUND_NEAREST_EVEN, 1, 0);
            s = (double)(fp_decode(&FP_E4M3, scales[b]) * ts);
        }
        for (size_t i = i0; i < i0 + len; i++) {
            codes[i] = isnan(s) || s == 0 ? 0 : lab30_ref_element(f, f->scale == MX_SCALE_E8M0 ? x[i] / s : (double)(x[i] / (float)s));
            values[i] = (float)(lab30_ref_decode(f, codes[i]) * s);
        }
    }
}

/* mx_quantize and mx_dequantize of x against the reference: scales, codes and values bit for bit. Observes them
 * for the grader. Returns false (after one message) at the first difference. */
static inline bool lab30_same_as_reference(const char *file, int line, const mx_format *f, const float *x, size_t n,
                                           const char *what) {
    size_t nb = mx_nblocks(f, n);
    uint8_t *s = calloc(nb, 1), *c = calloc(n, 1), *rs = calloc(nb, 1), *rc = calloc(n, 1);
    float *v = calloc(n, sizeof(float)), *rv = calloc(n, sizeof(float)), ts = 0;
    mx_quantize(f, x, n, s, c, &ts);
    mx_dequantize(f, s, c, n, ts, v);
    lab30_ref_quantize(f, x, n, rs, rc, rv);
    bool ok = true;
    uint64_t h = 1469598103934665603ull;
    for (size_t b = 0; b < nb && ok; b++) {
        h = (h ^ s[b]) * 1099511628211ull;
        if (s[b] != rs[b]) {
            float amax = mx_amax(x + b * f->block, n - b * f->block < (size_t)f->block ? n - b * f->block : (size_t)f->block);
            mpt_fail(file, line,
                     "%s, %s: block %zu (largest |x| %.9g): scale byte expected 0x%02x, got 0x%02x\n      likely mistake: %s",
                     what, f->name, b, (double)amax, rs[b], s[b],
                     f->scale == MX_SCALE_E8M0
                         ? "shared_exp = floor(log2(amax)) - emax, clamped to [-127, 127], stored + 127; floor(log2) "
                           "exactly (frexpf: amax = m * 2^e, m in [0.5, 1), floor(log2) = e - 1); 0 for amax 0, "
                           "0xFF when the block holds inf or NaN"
                         : "block code = e4m3(amax / 6 / tensor_scale), nearest even, saturating");
            ok = false;
        }
    }
    for (size_t i = 0; i < n && ok; i++) {
        h = (h ^ c[i]) * 1099511628211ull;
        h = (h ^ fp_float_bits(v[i])) * 1099511628211ull;
        bool same_v = fp_float_bits(v[i]) == fp_float_bits(rv[i]) || (isnan(v[i]) && isnan(rv[i]));
        if (c[i] != rc[i] || !same_v) {
            mpt_fail(file, line,
                     "%s, %s: x[%zu] = %.9g (block %zu, scale byte 0x%02x)\n      expected: code 0x%02x, value %.9g\n"
                     "      got:      code 0x%02x, value %.9g\n      likely mistake: %s",
                     what, f->name, i, (double)x[i], i / f->block, s[i / f->block], rc[i], (double)rv[i], c[i],
                     (double)v[i],
                     c[i] != rc[i] ? (f->fmt ? "code = fp_encode(element format, x / X, nearest even, saturate = 1): "
                                               "values past the element's max clamp to it"
                                             : "MXINT8: round(x / X * 64) to nearest even, clamped to [-127, 127]")
                                   : "value = element value * the block's scale (2^(byte - 127); NaN for 0xFF)");
            ok = false;
        }
    }
    mpt_observe(file, line, h);
    mpt_check_cond(file, line, ok);
    free(s), free(c), free(rs), free(rc), free(v), free(rv);
    return ok;
}
#define SAME_AS_REFERENCE(f, x, n, what) lab30_same_as_reference(__FILE__, __LINE__, (f), (x), (n), (what))

/* The E8M0 byte mx_e8m0_for_amax gives, against the expected one. */
#define CHECK_E8M0(amax, emax, want, why) \
    do { \
        uint8_t got_ = mx_e8m0_for_amax((amax), (emax)); \
        mpt_observe(__FILE__, __LINE__, got_); \
        if (got_ != (want)) \
            mpt_fail(__FILE__, __LINE__, \
                     "mx_e8m0_for_amax(%.9g, emax %d)\n      expected: 0x%02x (%s)\n      got:      0x%02x\n" \
                     "      likely mistake: shared_exp = floor(log2(amax)) - emax, stored as shared_exp + 127 and " \
                     "clamped to [0, 254]; 0 for amax 0, 0xFF (NaN) for inf or NaN", \
                     (double)(amax), (emax), (want), (why), got_); \
    } while (0)

/* A random float in one of the binades [2^lo, 2^hi), random sign. */
static inline float lab30_random(mp_rng *r, int lo, int hi) {
    float m = 1.0f + mp_rng_uniform(r);
    return ldexpf(m, lo + (int)(mp_rng_u32(r) % (uint32_t)(hi - lo))) * (mp_rng_u32(r) & 1 ? -1.0f : 1.0f);
}

#endif
