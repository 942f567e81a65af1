/* fastmath.h: exp, sigmoid and tanh in plain float arithmetic that the compiler can vectorise inside kernel loops. */
#ifndef MIXPAR_OPS_FASTMATH_H
#define MIXPAR_OPS_FASTMATH_H

#include <stdint.h>
#include <string.h>

/* Why not expf/tanhf from libm? glibc's are scalar calls unless the build uses -ffast-math, so a loop
 * that calls them runs one element at a time. A GPT-2 124M step (B=4, T=64) takes tanh of 19 million
 * GELU inputs (forward and backward): about 180 ms at glibc's 9.7 ns per tanhf on the 2-core course
 * machine, against 22 ms for GELU's whole step with these (bench/ops_bench). These are a few multiplies
 * and adds with no branches and no calls, so a loop marked `#pragma omp simd` runs 4 to 16 lanes at once.
 *
 * Accuracy, checked by the ops_fastmath tests in tests/unit/test_ops_activations.c: ops_expf has a
 * relative error below 2e-7 over [-87.3, 88] (worst measured 8.3e-8, under 1 ulp); ops_sigmoidf and
 * ops_tanhf are within 3e-7 absolute (worst measured 1.8e-7). That is below the rounding noise of the
 * fp32 kernels that use them. */

/* exp(x) = 2^n * exp(r), with n = round(x / ln 2) and r = x - n ln 2 in [-ln2/2, ln2/2].
 * ln 2 is split into a high part with few mantissa bits (so n * LN2_HI is exact) and a small low part,
 * which keeps r accurate (Cody and Waite). exp(r) is a degree-6 polynomial (Cephes expf coefficients).
 * 2^n is written straight into the exponent field.
 * Range: inputs below ln(FLT_MIN) = -87.34 give 0 (exp would be subnormal; the kernels never need
 * those); inputs above 88 are clamped to 88 (exp(88) = 1.65e38, finite), +inf included: callers here
 * take exp of non-positive numbers (softmax) or feed it to 1/(1+e), where the clamp changes nothing
 * visible. NaN gives NaN, so an overflow upstream is not hidden.
 * The selects below become vector blends; GCC does that only with -fno-trapping-math (in the Makefile's
 * CFLAGS), since a blend computes both sides. */
static inline float ops_expf(float x) {
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f;       /* 355/512: n * ln2_hi is exact for |n| < 2^15 */
    const float ln2_lo = -2.12194440e-4f;    /* ln 2 - ln2_hi */
    const float round_magic = 12582912.0f;   /* 1.5 * 2^23: adding and subtracting it rounds to an integer */
    const float min_arg = -87.3365448f;      /* ln(FLT_MIN): 2^n stays a normal number down to here */
    float keep = x < min_arg ? 0.0f : 1.0f;
    float xc = x > 88.0f ? 88.0f : x;
    xc = xc < min_arg ? min_arg : xc;
    float n = (xc * log2e + round_magic) - round_magic;
    float r = xc - n * ln2_hi - n * ln2_lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* n is in [-126, 127] for every number. NaN stays NaN through all of the above, and converting NaN
     * to an integer is undefined (x86 gives INT_MIN), so NaN is sent to n = -127 here: the comparison is
     * false for NaN and true for every finite n. The exponent field is then 0 and scale is 0, and NaN
     * still comes out, through p. The shift is in unsigned arithmetic, which has no undefined cases. */
    float nc = n > -127.0f ? n : -127.0f;
    uint32_t bits = (uint32_t)((int32_t)nc + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale * keep;
}

/* 1 / (1 + exp(-x)): for x << 0 exp(-x) is clamped huge and the result is a tiny positive number, as it
 * should be; for x >> 0 it is exactly 1. */
static inline float ops_sigmoidf(float x) {
    return 1.0f / (1.0f + ops_expf(-x));
}

/* tanh(x) = 2 sigmoid(2x) - 1. Near 0 this loses relative (not absolute) accuracy: the absolute error
 * stays below 3e-7, which is what GELU needs (it uses 1 + tanh). */
static inline float ops_tanhf(float x) {
    return 2.0f * ops_sigmoidf(2.0f * x) - 1.0f;
}

#endif
