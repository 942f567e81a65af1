/* mx.h: microscaling (MX) block formats (OCP MX v1.0: MXFP8, MXFP6, MXFP4, MXINT8) and NVFP4's two-level scales. */
#ifndef MIXPAR_FP_MX_H
#define MIXPAR_FP_MX_H

/* Per-tensor scaling (amp/fp8.h) gives a whole tensor one scale, so one outlier decides the range of every
 * value. Microscaling (块缩放, OCP "Microscaling Formats (MX) Specification" v1.0, Sept 2023) gives every
 * block of k consecutive values its own scale X, a power of two stored in E8M0 (an 8-bit exponent, bias
 * 127: values 2^-127 .. 2^127, 0xFF is NaN; no sign, no mantissa), and stores each value P_i in a narrow
 * element format; the block means  v_i = X * P_i.
 *
 *   name        element  bits  largest element    emax  block  scale
 *   mxfp8-e4m3  e4m3       8   448                   8     32  E8M0   (OCP FP8: no inf, S.1111.111 NaN)
 *   mxfp8-e5m2  e5m2       8   57344                15     32  E8M0   (IEEE-like inf and NaN)
 *   mxfp6-e3m2  e3m2       6   28                    4     32  E8M0   (no inf, no NaN)
 *   mxfp6-e2m3  e2m3       6   7.5                   2     32  E8M0
 *   mxfp4-e2m1  e2m1       4   6                     2     32  E8M0   (0 0.5 1 1.5 2 3 4 6)
 *   mxint8      int8       8   127/64 = 1.984375     0     32  E8M0   (two's complement, implicit 2^-6)
 *   nvfp4       e2m1       4   6                     2     16  E4M3 and one fp32 scale per tensor
 *
 * emax is the exponent of the element format's largest normal value (448 = 1.75 * 2^8: emax 8).
 *
 * Conversion of a block V_1..V_k from fp32 (spec section 6.3):
 *     shared_exp = floor(log2(max_i |V_i|)) - emax         clamped to E8M0's range [-127, 127]
 *     X          = 2^shared_exp
 *     P_i        = quantize(V_i / X)                        round to nearest even, subnormals kept,
 *                                                           beyond the element's max: saturate to +-max
 * The largest |V_i| / X lies in [2^emax, 2^(emax+1)), so it can pass the element's max (e4m3: a block
 * whose largest value is 1.9 * 2^k maps it to 486.4 > 448): such values are clamped (the spec lets an
 * implementation saturate; this one always does: an e4m3 element past 448 would otherwise be NaN).
 * Our rules for the cases the formula does not cover:
 *   - a block of zeros (max 0): scale byte 0 (2^-127), every element code 0;
 *   - a block with an inf or a NaN: scale byte 0xFF (NaN), every element code 0: the whole block
 *     decodes to NaN (the spec: a NaN scale makes every value of the block NaN);
 *   - MXINT8 encodes round(V/X * 64) clamped to [-127, 127], symmetric so that q(-x) = -q(x);
 *     the code 0x80 (-128, the value -2) is never produced but decodes to -2, as the spec's range says.
 *
 * NVFP4 (NVIDIA Blackwell): blocks of 16 e2m1 values, each block's scale an e4m3 number (not a power of
 * two), and one fp32 scale per tensor chosen so that the block scales fit e4m3's range:
 *     tensor_scale = amax(tensor) / (6 * 448)           (1 for a tensor of zeros or with no finite amax)
 *     block code   = e4m3(amax(block) / 6 / tensor_scale)   round to nearest even, saturating at 448
 *     s_b          = decode(block code) * tensor_scale
 *     P_i          = e2m1(V_i / s_b)                    (0 when s_b is 0: the block rounded to zero)
 *     v_i          = P_i * s_b
 *
 * Storage: one element code per byte (right-aligned, as fp_encode returns it; an fp4 code uses the low
 * 4 bits), one scale byte per block, so n values take n + ceil(n / k) bytes here; real hardware packs
 * two fp4 or four fp6 codes per byte. Any n works: the last block holds the n % k values left over and
 * its scale is chosen from them alone. */

#include <stddef.h>
#include <stdint.h>

#include "fp/format.h"

typedef enum { MX_SCALE_E8M0, MX_SCALE_E4M3_TENSOR } mx_scale_kind;

typedef struct {
    const char *name;        /* "mxfp8-e4m3" */
    const char *element;     /* "e4m3", "int8" */
    const fp_format *fmt;    /* the element format; NULL for int8 */
    int bits;                /* bits of one element */
    int emax;                /* exponent of the element's largest normal value */
    int block;               /* k: elements sharing one scale */
    mx_scale_kind scale;
    const char *about;
} mx_format;

enum { MX_NFORMATS = 7, MX_MAX_BLOCK = 32, MX_E8M0_BIAS = 127, MX_E8M0_NAN = 0xFF, MX_INT8_FRACTION_BITS = 6 };
extern const mx_format MX_FORMATS[MX_NFORMATS];
/* The element formats of the table not in fp/format.h's named set (OCP MX: every pattern is finite). */
extern const fp_format MX_E3M2, MX_E2M3, MX_E2M1;

/* Looks a format up by name ("mxfp8-e4m3", ..., "nvfp4"; also "mxfp4" for mxfp4-e2m1); NULL when unknown. */
const mx_format *mx_format_by_name(const char *name);
extern const char MX_FORMAT_NAMES_HELP[];

/* ---------------------------------------------------------------- the pieces (lab 30) */

/* The E8M0 scale byte for a block whose largest magnitude is amax: shared_exp + 127 with
 * shared_exp = floor(log2(amax)) - emax clamped to [-127, 127]; 0 for amax 0; 0xFF (NaN) for amax inf or NaN. */
uint8_t mx_e8m0_for_amax(float amax, int emax);
/* The value of an E8M0 byte: 2^(byte - 127), NaN for 0xFF. */
float mx_e8m0_value(uint8_t e8m0);
/* One element: v (already divided by the block's scale) to f's element code, round to nearest even,
 * saturating at +-max (MXINT8: round(v * 64) clamped to +-127). */
uint8_t mx_element_encode(const mx_format *f, float v);
/* The value of an element code (without the block's scale). */
float mx_element_decode(const mx_format *f, uint8_t code);
/* NVFP4: the per-tensor fp32 scale for a tensor whose largest magnitude is amax, and the e4m3 code of a
 * block's scale. */
float mx_nvfp4_tensor_scale(float amax);
uint8_t mx_nvfp4_block_scale(float block_amax, float tensor_scale);

/* ---------------------------------------------------------------- whole arrays */

size_t mx_nblocks(const mx_format *f, size_t n); /* ceil(n / k) */
/* The largest |x_i|; inf when some x_i is inf or NaN (so a block holding one gets the NaN scale). */
float mx_amax(const float *x, size_t n);
/* x (n) -> codes (n, one per byte) and scales (mx_nblocks bytes); NVFP4 also writes *tensor_scale
 * (pass NULL for the MX formats). */
void mx_quantize(const mx_format *f, const float *x, size_t n, uint8_t *scales, uint8_t *codes, float *tensor_scale);
/* codes and scales back to fp32 values out (n). tensor_scale: NVFP4's, ignored by the MX formats. */
void mx_dequantize(const mx_format *f, const uint8_t *scales, const uint8_t *codes, size_t n, float tensor_scale,
                   float *out);
/* out = dequantize(quantize(x)) one block at a time, with no scratch (out may be x). Blocks restart at
 * every row of `row` values (row 0: one row of n), as a GEMM's operand is blocked along its reduction
 * dimension. NVFP4's tensor scale is taken over the whole of x. */
void mx_round_trip(const mx_format *f, const float *x, float *out, size_t n, size_t row);

/* How far y is from x: relative error ||y - x||_2 / ||x||_2, SNR = 10 log10(sum x^2 / sum (y - x)^2) dB
 * (inf when y == x), the largest |y - x|, and the share of nonzero x that became 0. Sums in double; NaN
 * in y makes the errors NaN. */
typedef struct {
    double rel_error, snr_db, max_abs_error, flushed_share;
} mx_error;
mx_error mx_error_of(const float *x, const float *y, size_t n);

#endif
