/* amp_reduce.c: gradients on a 16-bit wire under mixed precision (lab 17): the ranks' fp16/bf16 values averaged in fp32, rounded once. */
#include "dist/amp_reduce.h"

#include "base/error.h"
#include "base/lab.h"
#include "fp/convert.h"

#include <string.h>

void amp_reduce_narrow16(uint16_t *dst, const float *src, size_t n, comm_dtype dt) {
    MP_ASSERT(dt == COMM_FP16 || dt == COMM_BF16, "a 16-bit wire is fp16 or bf16, not %s", comm_dtype_name(dt));
    if (dt == COMM_FP16) fp_f32_to_f16(dst, src, n);
    else fp_f32_to_bf16(dst, src, n);
}

void amp_reduce_widen16(float *dst, const uint16_t *src, size_t n, comm_dtype dt) {
    MP_ASSERT(dt == COMM_FP16 || dt == COMM_BF16, "a 16-bit wire is fp16 or bf16, not %s", comm_dtype_name(dt));
    if (dt == COMM_FP16) fp_f16_to_f32(dst, src, n);
    else fp_bf16_to_f32(dst, src, n);
}

void amp_reduce_mean16(uint16_t *out, const uint16_t *in, size_t p, size_t n, comm_dtype dt, float *acc, float *wide) {
    MP_ASSERT(p >= 1, "an average over %zu ranks", p);
    if (n == 0) return;
    /* LAB 17 BEGIN the 16-bit reduction: widen every rank's values, add in fp32 in rank order, divide by p once, round once */
    memset(acc, 0, n * sizeof *acc);
    for (size_t j = 0; j < p; j++) {
        amp_reduce_widen16(wide, in + j * n, n, dt); /* rank j's values, exact in fp32 */
        for (size_t i = 0; i < n; i++) acc[i] += wide[i];
    }
    for (size_t i = 0; i < n; i++) acc[i] /= (float)p; /* the average: divided once, here, and nowhere else */
    amp_reduce_narrow16(out, acc, n, dt);               /* the only rounding to 16 bits */
    /* LAB 17 END */
}
