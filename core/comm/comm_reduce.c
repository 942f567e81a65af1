/* comm_reduce.c: the element-wise reductions collectives apply to received data (sum, max, min). */
#include "comm/comm_internal.h"

#include "base/error.h"

#include <stdint.h>

/* max and min use (a > b ? a : b), as MPI_MAX and MPI_MIN do in OpenMPI, so results match the library's
 * bit for bit on ordinary data. The loops are plain so the compiler vectorises them (omp simd). */
#define DEFINE_REDUCE(T, NAME)                                                  \
    static void NAME(T *restrict inout, const T *restrict in, size_t n, comm_redop op) { \
        switch (op) {                                                            \
        case COMM_SUM:                                                           \
            _Pragma("omp simd") for (size_t i = 0; i < n; i++) inout[i] += in[i];  \
            break;                                                               \
        case COMM_MAX:                                                           \
            _Pragma("omp simd") for (size_t i = 0; i < n; i++) inout[i] = inout[i] > in[i] ? inout[i] : in[i]; \
            break;                                                               \
        case COMM_MIN:                                                           \
            _Pragma("omp simd") for (size_t i = 0; i < n; i++) inout[i] = inout[i] < in[i] ? inout[i] : in[i]; \
            break;                                                               \
        default: MP_ASSERT(0, "reduction %d reaches the kernels (avg is sum + scale)", (int)op);        \
        }                                                                        \
    }

DEFINE_REDUCE(float, reduce_f32)
DEFINE_REDUCE(int32_t, reduce_i32)
DEFINE_REDUCE(int64_t, reduce_i64)

void comm_reduce_local(void *inout, const void *in, size_t count, comm_dtype dt, comm_redop op) {
    switch (dt) {
    case COMM_FP32: reduce_f32(inout, in, count, op); break;
    case COMM_INT32: reduce_i32(inout, in, count, op); break;
    case COMM_INT64: reduce_i64(inout, in, count, op); break;
    default: MP_ASSERT(0, "%s data reaches the reduction kernels (fp16/bf16 are widened to fp32 first)", comm_dtype_name(dt));
    }
}

void comm_scale_fp32(float *x, size_t count, float divisor) {
    /* A division, not a multiplication by 1/p: x/3 rounds once, x*(1/3) twice. */
#pragma omp simd
    for (size_t i = 0; i < count; i++) x[i] /= divisor;
}
