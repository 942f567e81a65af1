/* matmul_lowp.c: 16-bit-input matmuls with fp32 accumulation: the AVX512-BF16 path, the portable decode+sgemm path, the definition. */
#include "ops/matmul_lowp.h"

#include "base/error.h"
#include "base/mem.h"
#include "fp/convert.h"
#include "ops/gemm_bf16.h"
#include "ops/isa.h"
#include "ops/matmul.h"
#include "ops/parallel.h"

#include <stdlib.h>
#include <string.h>

void lowp_decode(float *dst, const uint16_t *src, size_t n, lowp_format fmt) {
    if (fmt == LOWP_BF16) fp_bf16_to_f32(dst, src, n);
    else fp_f16_to_f32(dst, src, n);
}

void lowp_encode(uint16_t *dst, const float *src, size_t n, lowp_format fmt) {
    if (fmt == LOWP_BF16) fp_f32_to_bf16(dst, src, n);
    else fp_f32_to_f16(dst, src, n);
}

/* Two grow-only fp32 scratch buffers for the widened operands (the weight and the activation side).
 * They belong to the calling thread's step: the model calls matmuls one at a time and each product
 * splits its own work over the OpenMP threads. */
typedef struct {
    float *data;
    size_t floats;
} scratch;
static scratch widened[3];

static float *scratch_get(int which, size_t floats) {
    scratch *s = &widened[which];
    if (s->floats < floats) {
        mem_free(s->data);
        s->data = mem_alloc(floats * sizeof(float), MEM_OTHER, "lowp matmul: widened operands");
        s->floats = floats;
    }
    return s->data;
}

static float *widen(int which, const uint16_t *src, size_t n, lowp_format fmt) {
    float *dst = scratch_get(which, n);
    lowp_decode(dst, src, n, fmt);
    return dst;
}

/* ---------------------------------------------------------------- which path
 *
 * bf16 on a CPU with AVX512_BF16: gemm_bf16.c multiplies the 16-bit operands directly, on AMX tiles
 * (TDPBF16PS) where the CPU has them, else with AVX-512 vectors (VDPBF16PS).
 * fp16 always takes decode+sgemm. AVX512_FP16 has no fp16 dot product that accumulates in fp32: its
 * VFMADD*PH multiply-adds round every partial sum to fp16 (11 significant bits, largest value 65504), so
 * a 768-term sum would lose most of its digits or overflow. Mixed precision needs fp32 accumulation, and
 * on a CPU that means widening fp16 to fp32 (exact, VCVTPH2PS) and an fp32 product. */
static bool force_portable;

void matmul_lowp_force_portable(bool portable) { force_portable = portable; }

static bool use_bf16_kernel(lowp_format fmt) { return fmt == LOWP_BF16 && !force_portable && gemm_bf16_available(); }

/* "amx-bf16" or "avx512-bf16" (gemm_bf16's engine), else "decode+sgemm" */
const char *matmul_lowp_path(lowp_format fmt) {
    return use_bf16_kernel(fmt) ? gemm_bf16_engine_name(gemm_bf16_engine_now()) : "decode+sgemm";
}

static void check_dims(int N, int C, int OC) {
    MP_ASSERT(N >= 0 && C >= 0 && OC >= 0, "matmul_lowp dims must be >= 0: N=%d C=%d OC=%d", N, C, OC);
}

OPS_ISA_INLINE float bf16_value(uint16_t bits) { /* exact: the 16 bits are the top half of an fp32 */
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* dbias (OC) += column sums of dout (N,OC), bf16, summed in fp32. Each thread owns a range of columns and
 * walks down the rows, 256 columns at a time in a local fp32 row (row-major reads, vectorizable); every
 * column is summed in row order, then added to dbias, as matmul_backward does, whatever the thread count.
 * The lanes of a vector are different columns, so every level of ops/isa.h gives the same floats; the widest
 * the CPU runs sums 16 columns per instruction instead of the baseline's 4. */
OPS_ISA_INLINE void bf16_column_sums_range(float *dbias, const uint16_t *dout, int N, int OC, int lo, int hi) {
    enum { CHUNK = 256 };
    float sum[CHUNK];
    for (int o0 = lo; o0 < hi; o0 += CHUNK) {
        const int width = hi - o0 < CHUNK ? hi - o0 : CHUNK;
        for (int j = 0; j < width; j++) sum[j] = 0.0f;
        for (int n = 0; n < N; n++) {
            const uint16_t *row = dout + (size_t)n * OC + o0;
#pragma omp simd
            for (int j = 0; j < width; j++) sum[j] += bf16_value(row[j]);
        }
        for (int j = 0; j < width; j++) dbias[o0 + j] += sum[j];
    }
}
OPS_ISA_CLONES(bf16_column_sums_range, (float *dbias, const uint16_t *dout, int N, int OC, int lo, int hi),
               (dbias, dout, N, OC, lo, hi));

static void bf16_column_sums(float *dbias, const uint16_t *dout, int N, int OC) {
    const ops_isa level = ops_isa_current();
#pragma omp parallel if (ops_worth_threads((long)N * OC))
    {
        int lo, hi;
        ops_thread_range(OC, OPS_SIMD_FLOATS, &lo, &hi);
        bf16_column_sums_range_isa[level](dbias, dout, N, OC, lo, hi);
    }
}

/* ---------------------------------------------------------------- forward and backward */

void matmul_lowp_forward(float *out, const uint16_t *inp, const uint16_t *weight, const float *bias, int N, int C,
                         int OC, lowp_format fmt) {
    check_dims(N, C, OC);
    if (use_bf16_kernel(fmt)) {
        /* out (N,OC) = inp (N,C) @ weight^T: weight is stored (OC,C), so op(B) is weight transposed. Both
         * operands have C contiguous, which is what VDPBF16PS's pairs along k want. */
        gemm_bf16(false, true, N, OC, C, inp, C, weight, C, bias, false, out, OC);
        return;
    }
    float *x = widen(0, inp, (size_t)N * C, fmt);
    float *w = widen(1, weight, (size_t)OC * C, fmt);
    matmul_forward(out, x, w, bias, N, C, OC);
}

static void backward(float *dinp, float *dweight, bool add_to_dweight, float *dbias, const uint16_t *dout,
                     const uint16_t *inp, const uint16_t *weight, int N, int C, int OC, lowp_format fmt) {
    check_dims(N, C, OC);
    if (use_bf16_kernel(fmt)) {
        if (dinp) /* dinp (N,C) = dout (N,OC) @ weight (OC,C), overwritten (OC = 0 gives zeros) */
            gemm_bf16(false, false, N, C, OC, dout, OC, weight, C, NULL, false, dinp, C);
        if (dweight) /* dweight (OC,C) += dout^T @ inp: op(A) is dout (N,OC) transposed */
            gemm_bf16(true, false, OC, C, N, dout, OC, inp, C, NULL, add_to_dweight, dweight, C);
        if (dbias) bf16_column_sums(dbias, dout, N, OC);
        return;
    }
    if (N == 0 || OC == 0) { /* no rows or no outputs: dinp is zeros, dweight and dbias gain nothing */
        if (dinp) memset(dinp, 0, (size_t)N * C * sizeof(float));
        if (dweight && !add_to_dweight) memset(dweight, 0, (size_t)OC * C * sizeof(float));
        return;
    }
    float *g = widen(2, dout, (size_t)N * OC, fmt);
    /* C = 0 leaves dinp and dweight empty (BLAS rejects a zero leading dimension), but dbias still sums dout */
    if (dinp && C > 0) /* dinp = dout @ weight, (N,OC) @ (OC,C); beta 0 overwrites */
        matmul_sgemm(false, false, N, C, OC, 1.0f, g, OC, widen(1, weight, (size_t)OC * C, fmt), C, 0.0f, dinp, C);
    if (dweight && C > 0) /* dweight += dout^T @ inp, (N,OC)^T @ (N,C) */
        matmul_sgemm(true, false, OC, C, N, 1.0f, g, OC, widen(0, inp, (size_t)N * C, fmt), C,
                     add_to_dweight ? 1.0f : 0.0f, dweight, C);
    if (dbias) {
#pragma omp parallel for schedule(static) if (ops_worth_threads((long)N * OC))
        for (int o = 0; o < OC; o++) {
            float sum = 0.0f;
            for (int n = 0; n < N; n++) sum += g[(size_t)n * OC + o];
            dbias[o] += sum;
        }
    }
}

void matmul_lowp_backward(float *dinp, float *dweight, float *dbias, const uint16_t *dout, const uint16_t *inp,
                          const uint16_t *weight, int N, int C, int OC, lowp_format fmt) {
    backward(dinp, dweight, true, dbias, dout, inp, weight, N, C, OC, fmt);
}

void matmul_lowp_backward_writing_dweight(float *dinp, float *dweight, float *dbias, const uint16_t *dout,
                                          const uint16_t *inp, const uint16_t *weight, int N, int C, int OC,
                                          lowp_format fmt) {
    backward(dinp, dweight, false, dbias, dout, inp, weight, N, C, OC, fmt);
}

/* ---------------------------------------------------------------- the definition */

static float *decoded_copy(const uint16_t *src, size_t n, lowp_format fmt) {
    float *dst = malloc((n ? n : 1) * sizeof(float));
    MP_ASSERT(dst, "out of memory");
    lowp_decode(dst, src, n, fmt);
    return dst;
}

void matmul_lowp_forward_ref(float *out, const uint16_t *inp, const uint16_t *weight, const float *bias, int N,
                             int C, int OC, lowp_format fmt) {
    float *x = decoded_copy(inp, (size_t)N * C, fmt), *w = decoded_copy(weight, (size_t)OC * C, fmt);
    matmul_forward_ref(out, x, w, bias, N, C, OC);
    free(x);
    free(w);
}

void matmul_lowp_backward_ref(float *dinp, float *dweight, float *dbias, const uint16_t *dout,
                              const uint16_t *inp, const uint16_t *weight, int N, int C, int OC, lowp_format fmt) {
    float *g = decoded_copy(dout, (size_t)N * OC, fmt);
    float *x = decoded_copy(inp, (size_t)N * C, fmt), *w = decoded_copy(weight, (size_t)OC * C, fmt);
    if (dinp) memset(dinp, 0, (size_t)N * C * sizeof(float));
    matmul_backward_ref(dinp, dweight, dbias, g, x, w, N, C, OC);
    free(g);
    free(x);
    free(w);
}
