/* mx.c: microscaling block formats (OCP MX v1.0) and NVFP4: scale choice, element rounding, dequantize, errors. */
#include "fp/mx.h"

#include "base/lab.h"

#include <math.h>
#include <string.h>

/* OCP MX's 6- and 4-bit element formats: bias 2^(e-1) - 1, every pattern finite (no inf, no NaN). The
 * encoder is fp/format.c's, as for every other format. */
const fp_format MX_E3M2 = {"e3m2", 3, 2, 3, FP_SPECIALS_NONE};
const fp_format MX_E2M3 = {"e2m3", 2, 3, 1, FP_SPECIALS_NONE};
const fp_format MX_E2M1 = {"e2m1", 2, 1, 1, FP_SPECIALS_NONE};

const mx_format MX_FORMATS[MX_NFORMATS] = {
    {"mxfp8-e4m3", "e4m3", &FP_E4M3, 8, 8, 32, MX_SCALE_E8M0, "OCP MXFP8, e4m3 elements (max 448)"},
    {"mxfp8-e5m2", "e5m2", &FP_E5M2, 8, 15, 32, MX_SCALE_E8M0, "OCP MXFP8, e5m2 elements (max 57344)"},
    {"mxfp6-e3m2", "e3m2", &MX_E3M2, 6, 4, 32, MX_SCALE_E8M0, "OCP MXFP6, e3m2 elements (max 28)"},
    {"mxfp6-e2m3", "e2m3", &MX_E2M3, 6, 2, 32, MX_SCALE_E8M0, "OCP MXFP6, e2m3 elements (max 7.5)"},
    {"mxfp4-e2m1", "e2m1", &MX_E2M1, 4, 2, 32, MX_SCALE_E8M0, "OCP MXFP4, e2m1 elements (max 6)"},
    {"mxint8", "int8", NULL, 8, 0, 32, MX_SCALE_E8M0, "OCP MXINT8, two's complement x 2^-6 (max 1.984375)"},
    {"nvfp4", "e2m1", &MX_E2M1, 4, 2, 16, MX_SCALE_E4M3_TENSOR, "NVIDIA NVFP4: e4m3 block scale x fp32 tensor scale"},
};

const char MX_FORMAT_NAMES_HELP[] = "mxfp8-e4m3 mxfp8-e5m2 mxfp6-e3m2 mxfp6-e2m3 mxfp4-e2m1 (or mxfp4) mxint8 nvfp4";

const mx_format *mx_format_by_name(const char *name) {
    if (!name) return NULL;
    if (strcmp(name, "mxfp4") == 0) name = "mxfp4-e2m1";
    for (int i = 0; i < MX_NFORMATS; i++)
        if (strcmp(name, MX_FORMATS[i].name) == 0) return &MX_FORMATS[i];
    return NULL;
}

/* ---------------------------------------------------------------- the pieces */

uint8_t mx_e8m0_for_amax(float amax, int emax) {
    /* LAB 30 BEGIN the shared scale: E8M0 byte of floor(log2(amax)) - emax, clamped; 0 for zeros, 0xFF for inf/NaN */
    if (!isfinite(amax)) return MX_E8M0_NAN;
    if (amax == 0.0f) return 0;
    int e;
    frexpf(amax, &e); /* amax = m * 2^e with m in [0.5, 1): floor(log2(amax)) = e - 1, exactly */
    int shared_exp = e - 1 - emax;
    if (shared_exp < -MX_E8M0_BIAS) shared_exp = -MX_E8M0_BIAS;
    if (shared_exp > MX_E8M0_BIAS) shared_exp = MX_E8M0_BIAS;
    return (uint8_t)(shared_exp + MX_E8M0_BIAS);
    /* LAB 30 END */
}

float mx_e8m0_value(uint8_t e8m0) {
    return e8m0 == MX_E8M0_NAN ? NAN : ldexpf(1.0f, (int)e8m0 - MX_E8M0_BIAS);
}

uint8_t mx_element_encode(const mx_format *f, float v) {
    /* LAB 30 BEGIN one element: nearest even, saturating at +-max; MXINT8: round(v * 64) clamped to +-127 */
    if (!f->fmt) {
        float q = rintf(ldexpf(v, MX_INT8_FRACTION_BITS)); /* rintf: nearest even in the default rounding mode */
        if (isnan(q)) q = 0;
        if (q > 127) q = 127;
        if (q < -127) q = -127;
        return (uint8_t)(int8_t)q;
    }
    return (uint8_t)fp_encode(f->fmt, v, FP_ROUND_NEAREST_EVEN, 1, 0);
    /* LAB 30 END */
}

float mx_element_decode(const mx_format *f, uint8_t code) {
    if (!f->fmt) return ldexpf((float)(int8_t)code, -MX_INT8_FRACTION_BITS);
    return fp_decode(f->fmt, code);
}

float mx_nvfp4_tensor_scale(float amax) {
    /* LAB 30 BEGIN NVFP4's tensor scale: amax / (6 * 448), so that amax / 6 / scale lands at e4m3's 448 */
    float s = amax / (6.0f * 448.0f);
    if (!(s > 0) || !isfinite(s)) return 1.0f; /* zeros, no finite value, or an amax too small for fp32 */
    return s;
    /* LAB 30 END */
}

uint8_t mx_nvfp4_block_scale(float block_amax, float tensor_scale) {
    /* LAB 30 BEGIN NVFP4's block scale: amax / 6 / tensor_scale rounded to e4m3 (nearest even, saturating) */
    return (uint8_t)fp_encode(&FP_E4M3, block_amax / 6.0f / tensor_scale, FP_ROUND_NEAREST_EVEN, 1, 0);
    /* LAB 30 END */
}

/* ---------------------------------------------------------------- whole arrays */

size_t mx_nblocks(const mx_format *f, size_t n) { return (n + (size_t)f->block - 1) / (size_t)f->block; }

float mx_amax(const float *x, size_t n) {
    float amax = 0;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (!(a <= amax)) amax = isnan(a) ? INFINITY : a;
    }
    return amax;
}

/* The largest finite |x_i| (NVFP4's tensor scale looks past an inf or NaN: their blocks get the NaN scale). */
static float finite_amax(const float *x, size_t n) {
    float amax = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && fabsf(x[i]) > amax) amax = fabsf(x[i]);
    return amax;
}

enum { E4M3_NAN_CODE = 0x7F };

/* One block of len <= k values: its scale byte, and its codes. */
static uint8_t quantize_block(const mx_format *f, const float *x, size_t len, uint8_t *codes, float tensor_scale) {
    float amax = mx_amax(x, len);
    if (f->scale == MX_SCALE_E8M0) {
        uint8_t s = mx_e8m0_for_amax(amax, f->emax);
        if (s == MX_E8M0_NAN) {
            memset(codes, 0, len);
            return s;
        }
        for (size_t i = 0; i < len; i++) codes[i] = mx_element_encode(f, ldexpf(x[i], MX_E8M0_BIAS - (int)s));
        return s;
    }
    if (!isfinite(amax)) {
        memset(codes, 0, len);
        return E4M3_NAN_CODE;
    }
    uint8_t s = mx_nvfp4_block_scale(amax, tensor_scale);
    float block_scale = fp_decode(&FP_E4M3, s) * tensor_scale;
    for (size_t i = 0; i < len; i++) codes[i] = block_scale > 0 ? mx_element_encode(f, x[i] / block_scale) : 0;
    return s;
}

void mx_quantize(const mx_format *f, const float *x, size_t n, uint8_t *scales, uint8_t *codes, float *tensor_scale) {
    float ts = 1.0f;
    if (f->scale == MX_SCALE_E4M3_TENSOR) ts = mx_nvfp4_tensor_scale(finite_amax(x, n));
    if (tensor_scale) *tensor_scale = ts;
    size_t k = (size_t)f->block;
    for (size_t b = 0, i0 = 0; i0 < n; b++, i0 += k)
        scales[b] = quantize_block(f, x + i0, n - i0 < k ? n - i0 : k, codes + i0, ts);
}

void mx_dequantize(const mx_format *f, const uint8_t *scales, const uint8_t *codes, size_t n, float tensor_scale,
                   float *out) {
    size_t k = (size_t)f->block;
    for (size_t i = 0; i < n; i++) {
        /* LAB 30 BEGIN dequantize: the element's value times its block's scale (E8M0 2^(s-127), NaN for 0xFF; NVFP4 e4m3 x tensor) */
        uint8_t s = scales[i / k];
        float scale = f->scale == MX_SCALE_E8M0 ? mx_e8m0_value(s) : fp_decode(&FP_E4M3, s) * tensor_scale;
        out[i] = mx_element_decode(f, codes[i]) * scale;
        /* LAB 30 END */
    }
}

void mx_round_trip(const mx_format *f, const float *x, float *out, size_t n, size_t row) {
    if (row == 0) row = n;
    float ts = f->scale == MX_SCALE_E4M3_TENSOR ? mx_nvfp4_tensor_scale(finite_amax(x, n)) : 1.0f;
    size_t k = (size_t)f->block;
    uint8_t codes[MX_MAX_BLOCK];
    for (size_t r = 0; r < n; r += row)
        for (size_t i0 = r; i0 < r + row && i0 < n; i0 += k) {
            size_t end = r + row < n ? r + row : n, len = end - i0 < k ? end - i0 : k;
            uint8_t s = quantize_block(f, x + i0, len, codes, ts);
            mx_dequantize(f, &s, codes, len, ts, out + i0);
        }
}

mx_error mx_error_of(const float *x, const float *y, size_t n) {
    double signal = 0, noise = 0, max_abs = 0;
    size_t nonzero = 0, flushed = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)y[i] - (double)x[i];
        signal += (double)x[i] * x[i];
        noise += d * d;
        if (!(fabs(d) <= max_abs)) max_abs = fabs(d);
        nonzero += x[i] != 0;
        flushed += x[i] != 0 && y[i] == 0;
    }
    mx_error e = {.max_abs_error = max_abs, .flushed_share = nonzero ? (double)flushed / (double)nonzero : 0};
    e.rel_error = signal > 0 ? sqrt(noise / signal) : (noise > 0 ? INFINITY : 0);
    e.snr_db = noise > 0 ? 10 * log10(signal / noise) : (isnan(noise) ? NAN : INFINITY);
    if (isnan(noise)) e.rel_error = NAN;
    return e;
}
