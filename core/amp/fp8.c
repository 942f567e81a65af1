/* fp8.c: per-tensor delayed scaling for fp8: amax history, power-of-two scales, saturating casts. */
#include "amp/fp8.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/mem.h"
#include "fp/convert.h"

#include <math.h>
#include <string.h>

enum { CHUNK = 1024 }; /* floats converted per batch: the scaled copy lives on the stack */

void amp_fp8_init(amp_fp8_meta *m, const fp_format *format, int history_len, int margin, amp_amax_algo algo) {
    if (format != &FP_E4M3 && format != &FP_E5M2)
        MP_FAIL("an fp8 format: e4m3 or e5m2", "%s", format ? format->name : "(none)");
    if (history_len == 0) history_len = AMP_FP8_DEFAULT_HISTORY;
    if (history_len < 1 || history_len > AMP_FP8_MAX_HISTORY)
        MP_FAIL("an amax history length of 1 .. 4096", "%d", history_len);
    if (margin < 0 || margin > 64) MP_FAIL("a margin of 0 .. 64 binades", "%d", margin);
    if (algo != AMP_AMAX_MAX && algo != AMP_AMAX_MOST_RECENT) MP_FAIL("amax algorithm max or most_recent", "%d", algo);
    memset(m, 0, sizeof *m);
    m->format = format;
    m->history_len = history_len;
    m->margin = margin;
    m->algo = algo;
    m->history = mem_alloc((size_t)history_len * sizeof(float), MEM_OTHER, "fp8 amax history"); /* zeroed */
    m->newest = history_len - 1; /* the first record goes to index 0 */
    m->scale = 1;
    m->scale_inv = 1;
}

void amp_fp8_free(amp_fp8_meta *m) {
    mem_free(m->history);
    m->history = NULL;
}

float amp_fp8_scale_for_amax(float amax, double fmax, int margin, float previous) {
    /* LAB 25 BEGIN delayed scaling: scale = 2^(floor(log2(fmax / amax)) - margin); amax 0 or not finite keeps the scale */
    if (!(amax > 0) || !isfinite(amax)) return previous;
    /* floor(log2(r)) exactly, from the exponent: r = f * 2^e with f in [0.5, 1) gives e - 1. (The ratio of
     * two floats is never within a double's rounding of a power of two without being one.) */
    int e;
    frexp(fmax / (double)amax, &e);
    int exponent = e - 1 - margin;
    if (exponent < -126) exponent = -126; /* keep scale and 1/scale normal fp32 numbers */
    if (exponent > 127) exponent = 127;
    return ldexpf(1.0f, exponent);
    /* LAB 25 END */
}

float amp_fp8_history_amax(const amp_fp8_meta *m) {
    /* LAB 25 BEGIN amax history: the amax the next scale comes from, max over the window or the newest entry */
    if (m->algo == AMP_AMAX_MOST_RECENT) return m->history[m->newest];
    float a = 0;
    for (int i = 0; i < m->history_len; i++) a = fmaxf(a, m->history[i]);
    return a;
    /* LAB 25 END */
}

void amp_fp8_record_amax(amp_fp8_meta *m, float amax) {
    /* LAB 25 BEGIN amax history: a ring of history_len entries; the newest overwrites the oldest */
    m->newest = (m->newest + 1) % m->history_len;
    m->history[m->newest] = amax;
    /* LAB 25 END */
    m->recorded++;
}

void amp_fp8_update_scale(amp_fp8_meta *m) {
    m->scale = amp_fp8_scale_for_amax(amp_fp8_history_amax(m), fp_max(m->format), m->margin, m->scale);
    m->scale_inv = 1.0f / m->scale; /* exact: the scale is a power of two */
}

/* NaNs are passed over (fmaxf returns the other operand), as Transformer Engine's amax kernels do; an
 * inf makes the amax inf, which keeps the previous scale. */
float amp_fp8_amax(const float *x, size_t n) {
    float a = 0;
    for (size_t i = 0; i < n; i++) a = fmaxf(a, fabsf(x[i]));
    return a;
}

float amp_fp8_quantize(amp_fp8_meta *m, const float *x, uint8_t *q, size_t n) {
    float scaled[CHUNK], back[CHUNK];
    double fmax = fp_max(m->format);
    bool e4m3 = m->format == &FP_E4M3;
    m->saturated = m->underflowed = 0;
    for (size_t start = 0; start < n; start += CHUNK) {
        size_t k = n - start < CHUNK ? n - start : CHUNK; /* this batch: x[start .. start + k) */
        /* LAB 25 BEGIN saturating quantize: x * scale, count what lies beyond fmax, cast with saturation */
        for (size_t i = 0; i < k; i++) {
            scaled[i] = x[start + i] * m->scale;
            m->saturated += fabsf(scaled[i]) > fmax; /* NaN compares false */
        }
        if (e4m3) fp_f32_to_e4m3(q + start, scaled, k, 1);
        else fp_f32_to_e5m2(q + start, scaled, k, 1);
        /* LAB 25 END */
        if (e4m3) fp_e4m3_to_f32(back, q + start, k);
        else fp_e5m2_to_f32(back, q + start, k);
        for (size_t i = 0; i < k; i++) m->underflowed += back[i] == 0 && scaled[i] != 0;
    }
    /* Delayed: this cast used the scale the history gave before it; its own amax only joins the history,
     * for the scales of the casts after the next amp_fp8_update_scale. */
    float amax = amp_fp8_amax(x, n);
    amp_fp8_record_amax(m, amax);
    return amax;
}

void amp_fp8_dequantize(const fp_format *format, const uint8_t *q, float *x, size_t n, float scale_inv) {
    MP_ASSERT(format == &FP_E4M3 || format == &FP_E5M2, "fp8 format %s", format ? format->name : "(none)");
    if (format == &FP_E4M3) fp_e4m3_to_f32(x, q, n);
    else fp_e5m2_to_f32(x, q, n);
    for (size_t i = 0; i < n; i++) x[i] *= scale_inv;
}
