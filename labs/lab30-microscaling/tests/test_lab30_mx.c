/* test_lab30_mx.c: lab 30 visible tests of the MX conversion (core/fp/mx.c): the shared scale, the element rounding with
 * saturation, dequantize, whole blocks against the specification's formulas, a partial last block, NVFP4's two scales. */
#include "lab30_util.h"

/* shared_exp = floor(log2(amax)) - emax, stored + 127. */
MPT_TEST(mx_shared_scale_from_block_max) {
    CHECK_E8M0(1.0f, 8, 127 - 8, "E4M3, max 1.0: floor(log2 1) - 8 = -8; 1.0 / 2^-8 = 256 <= 448");
    CHECK_E8M0(448.0f, 8, 127, "E4M3, max 448 = 1.75 * 2^8: shared_exp 0");
    CHECK_E8M0(500.0f, 8, 127, "E4M3, max 500: floor(log2 500) = 8, shared_exp 0 (500 will saturate at 448)");
    CHECK_E8M0(0.99f, 8, 127 - 9, "E4M3, max 0.99: floor(log2 0.99) = -1, shared_exp -9");
    CHECK_E8M0(6.0f, 2, 127, "E2M1, max 6 = 1.5 * 2^2: shared_exp 0");
    CHECK_E8M0(1.0f, 15, 127 - 15, "E5M2, max 1.0: 0 - 15");
    CHECK_E8M0(28.0f, 4, 127, "E3M2, max 28 = 1.75 * 2^4");
    CHECK_E8M0(1.5f, 0, 127, "MXINT8 (emax 0), max 1.5: shared_exp 0");
    CHECK_E8M0(0.0f, 8, 0, "a block of zeros: byte 0 (2^-127), by this core's rule");
    CHECK_E8M0(INFINITY, 8, 0xFF, "an inf in the block: the NaN scale");
    CHECK_E8M0(NAN, 2, 0xFF, "a NaN in the block: the NaN scale");
    CHECK_E8M0(1e-40f, 8, 0, "a subnormal max, 2^-133: -133 - 8 = -141, clamped to -127");
    CHECK_E8M0(0x1.fffffep127f, 2, 127 + 125, "fp32's largest value: 127 - 2 = 125");
}

static void check_element(const char *f_name, float v, float want, const char *why) {
    const mx_format *f = lab30_fmt(f_name);
    uint8_t c = mx_element_encode(f, v);
    float got = (float)lab30_ref_decode(f, c);
    mpt_observe(__FILE__, __LINE__, c);
    if (got != want)
        mpt_fail(__FILE__, __LINE__,
                 "mx_element_encode(%s, %g)\n      expected: code for %g (%s)\n      got:      code 0x%02x = %g\n"
                 "      likely mistake: %s", f->name, (double)v, (double)want, why, c, (double)got,
                 isnan(got) || fabsf(got) > fabsf(want) ? "saturate: fp_encode(..., FP_ROUND_NEAREST_EVEN, 1, 0); values "
                                                          "past the max clamp to +-max (e4m3: never the NaN pattern)"
                                                        : "round to nearest, ties to the even code");
}

/* Nearest even, subnormals kept, saturation at the max. */
MPT_TEST(mx_element_nearest_even_and_saturating) {
    check_element("mxfp8-e4m3", 500.0f, 448.0f, "past 448: saturates (a plain e4m3 cast gives NaN)");
    check_element("mxfp8-e4m3", -1000.0f, -448.0f, "-1000 saturates to -448");
    check_element("mxfp8-e4m3", 0x1p-10f, 0.0f, "2^-10 is half of e4m3's smallest subnormal 2^-9: a tie, to even 0");
    check_element("mxfp8-e4m3", 0x1.8p-9f, 0x1p-8f, "1.5 * 2^-9: tie between 2^-9 (odd) and 2^-8 (even)");
    check_element("mxfp8-e5m2", 60000.0f, 57344.0f, "e5m2 saturates at 57344 (not inf)");
    check_element("mxfp4-e2m1", 7.0f, 6.0f, "e2m1 saturates at 6");
    check_element("mxfp4-e2m1", 5.0f, 4.0f, "5 is halfway between 4 (even) and 6 (odd)");
    check_element("mxfp4-e2m1", 2.5f, 2.0f, "2.5: halfway between 2 (even) and 3");
    check_element("mxfp4-e2m1", 0.25f, 0.0f, "0.25: halfway between 0 and the subnormal 0.5: to even 0");
    check_element("mxfp4-e2m1", 0.75f, 1.0f, "0.75: halfway between 0.5 (odd) and 1 (even)");
    check_element("mxfp6-e3m2", 30.0f, 28.0f, "e3m2 saturates at 28");
    check_element("mxfp6-e2m3", -8.0f, -7.5f, "e2m3 saturates at -7.5");
    check_element("mxint8", 0.5f, 0.5f, "0.5 * 64 = 32");
    check_element("mxint8", 1.0f / 128, 0.0f, "1/128 * 64 = 0.5: a tie, to even 0");
    check_element("mxint8", 3.0f / 128, 2.0f / 64, "1.5 steps: to even 2 steps");
    check_element("mxint8", 1.99f, 127.0f / 64, "1.99 * 64 = 127.36: 127");
    check_element("mxint8", -2.0f, -127.0f / 64, "-2 clamps to -127/64 (the code -128 is not produced)");
}

/* Every fp4 and fp6 code through mx_dequantize at scale 2^0 and 2^3; fp4's eight magnitudes by hand. */
MPT_TEST(mx_dequantize_every_fp4_fp6_code) {
    static const float fp4[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    static const char *const names[] = {"mxfp4-e2m1", "mxfp6-e2m3", "mxfp6-e3m2"};
    for (int n = 0; n < 3; n++) {
        const mx_format *f = lab30_fmt(names[n]);
        int ncodes = 1 << f->bits;
        uint8_t codes[64], scales[2] = {127, 130};
        float out[64];
        for (int shift = 0; shift < 2; shift++) {
            for (int c = 0; c < ncodes; c++) codes[c] = (uint8_t)c;
            /* 64 codes are two blocks of 32; both get the same scale */
            uint8_t s[2] = {scales[shift], scales[shift]};
            mx_dequantize(f, s, codes, (size_t)ncodes, 1.0f, out);
            for (int c = 0; c < ncodes; c++) {
                float want = ldexpf(fp_decode(f->fmt, (uint32_t)c), 3 * shift);
                if (n == 0) want = ldexpf((c & 8 ? -1 : 1) * fp4[c & 7], 3 * shift);
                MPT_OBSERVE(fp_float_bits(out[c]));
                if (fp_float_bits(out[c]) != fp_float_bits(want)) {
                    mpt_fail(__FILE__, __LINE__,
                             "%s code 0x%02x at scale byte %d (2^%d): expected %g, got %g\n      likely mistake: "
                             "value = mx_element_decode(code) * 2^(scale byte - 127), the scale of block i / k",
                             f->name, c, scales[shift], scales[shift] - 127, (double)want, (double)out[c]);
                    return;
                }
            }
        }
    }
}

/* A NaN scale makes its whole block NaN; a partial block uses its own scale byte. */
MPT_TEST(mx_dequantize_nan_scale_and_partial_block) {
    const mx_format *f = lab30_fmt("mxfp8-e4m3");
    uint8_t codes[40], scales[2] = {0xFF, 120};
    for (int i = 0; i < 40; i++) codes[i] = 0x38; /* e4m3 1.0 */
    float out[40];
    mx_dequantize(f, scales, codes, 40, 1.0f, out);
    int nan_count = 0;
    for (int i = 0; i < 32; i++) nan_count += isnan(out[i]);
    MPT_CHECK_EQ_I64(32, nan_count, "values of the block with scale 0xFF that decode to NaN (E8M0 0xFF is NaN)");
    for (int i = 32; i < 40; i++)
        MPT_CHECK_FLOAT_BITS(0x1p-7f, out[i], "the partial block (8 values) with scale byte 120: 1.0 * 2^-7");
    const mx_format *i8 = lab30_fmt("mxint8");
    uint8_t ic[3] = {0x80, 0x7F, 0x40}, is[1] = {128};
    mx_dequantize(i8, is, ic, 3, 1.0f, out);
    MPT_CHECK_FLOAT_BITS(-4.0f, out[0], "MXINT8 code 0x80 (-128 * 2^-6 = -2) at scale 2^1");
    MPT_CHECK_FLOAT_BITS(127.0f / 32, out[1], "MXINT8 code 0x7F (127/64) at scale 2^1");
    MPT_CHECK_FLOAT_BITS(2.0f, out[2], "MXINT8 code 0x40 (1.0) at scale 2^1");
}

/* Hand-worked blocks through mx_quantize + mx_dequantize. */
MPT_TEST(mx_blocks_hand_worked) {
    const mx_format *e4 = lab30_fmt("mxfp8-e4m3");
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i + 1) / 32; /* max 1.0: X = 2^-8; x / X = 8 (i + 1) */
    uint8_t s[1], c[32];
    float v[32];
    mx_quantize(e4, x, 32, s, c, NULL);
    MPT_CHECK_EQ_HEX(127 - 8, s[0], "scale byte of a block with max 1.0 in E4M3: 2^(0 - 8)");
    mx_dequantize(e4, s, c, 32, 1, v);
    /* 8(i+1) in e4m3: exact up to 128 (steps of 8 from 64 on), beyond 128 steps of 16: 136 -> 128 or 144 (tie: even) */
    MPT_CHECK_FLOAT_BITS(x[15], v[15], "16/32 = 0.5: 128 in e4m3, exact");
    MPT_CHECK_FLOAT_BITS(0.5f, v[16], "17/32: 136 lies halfway between 128 (even) and 144: 128");
    MPT_CHECK_FLOAT_BITS(144.0f / 256, v[17], "18/32: 144, exact");
    MPT_CHECK_FLOAT_BITS(160.0f / 256, v[18], "19/32: 152, halfway between 144 (odd) and 160 (even): 160");
    MPT_CHECK_FLOAT_BITS(1.0f, v[31], "the max, 1.0, is 256: exact");
    /* a block with a 1.9 * 2^k max: x / X = 486.4 > 448 saturates */
    x[31] = 1.9f;
    mx_quantize(e4, x, 32, s, c, NULL);
    mx_dequantize(e4, s, c, 32, 1, v);
    MPT_CHECK_EQ_HEX(127 - 8, s[0], "max 1.9: floor(log2 1.9) = 0, shared_exp -8");
    MPT_CHECK_FLOAT_BITS(448.0f / 256, v[31], "1.9 / 2^-8 = 486.4 saturates at 448: 1.75");
    /* all zeros, and an inf */
    memset(x, 0, sizeof x);
    mx_quantize(e4, x, 32, s, c, NULL);
    MPT_CHECK_EQ_HEX(0, s[0], "a block of zeros: scale byte 0");
    x[3] = INFINITY;
    mx_quantize(e4, x, 32, s, c, NULL);
    mx_dequantize(e4, s, c, 32, 1, v);
    MPT_CHECK(s[0] == 0xFF && isnan(v[0]) && isnan(v[3]), "a block with an inf: scale 0xFF, every value NaN; got scale "
              "0x%02x, v[0] %g, v[3] %g", s[0], (double)v[0], (double)v[3]);
}

/* dequantize(quantize(x)) == x for values the format represents (with one element in the top binade, so the scale
 * found is the one they were made with), in every format; random blocks against the specification's formulas. */
MPT_TEST(mx_round_trip_and_random_blocks) {
    mp_rng r;
    mp_rng_seed(&r, mpt_seed() ^ 30);
    for (int k = 0; k < MX_NFORMATS; k++) {
        const mx_format *f = &MX_FORMATS[k];
        if (f->scale != MX_SCALE_E8M0) continue;
        float x[64], v[64];
        uint8_t s[2], c[64];
        int e = (int)(mp_rng_u32(&r) % 40) - 20;
        for (int i = 0; i < 64; i++) {
            uint8_t code = (uint8_t)(mp_rng_u32(&r) & ((1u << f->bits) - 1));
            if (f->fmt && (isnan(fp_decode(f->fmt, code)) || isinf(fp_decode(f->fmt, code)))) code = 0;
            if (!f->fmt && code == 0x80) code = 0x81;
            if (i % 32 == 7) code = (uint8_t)(f->fmt ? fp_max_bits(f->fmt) : 0x7F); /* the top binade */
            x[i] = ldexpf((float)lab30_ref_decode(f, code), e);
        }
        mx_quantize(f, x, 64, s, c, NULL);
        mx_dequantize(f, s, c, 64, 1, v);
        int bad = -1;
        for (int i = 0; i < 64 && bad < 0; i++)
            if (fp_float_bits(v[i]) != fp_float_bits(x[i])) bad = i;
        MPT_CHECK(bad < 0, "%s: x[%d] = %g is representable (scale 2^%d) but came back as %g\n      likely mistake: "
                  "the largest value sits in the element's top binade, so the scale found is 2^%d: check the scale "
                  "choice and that exact elements are not rounded", f->name, bad, bad < 0 ? 0.0 : (double)x[bad], e,
                  bad < 0 ? 0.0 : (double)v[bad], e);
        float y[96];
        for (int i = 0; i < 96; i++) y[i] = lab30_random(&r, -12, 6) * (i % 5 == 0 ? 0.001f : 1.0f);
        y[40] = 0;
        if (!SAME_AS_REFERENCE(f, y, 96, "random blocks")) return;
    }
}

/* n = 70 is two blocks of 32 and a last block of 6: its scale comes from those 6 values alone. */
MPT_TEST(mx_partial_last_block) {
    const mx_format *f = lab30_fmt("mxfp4-e2m1");
    float x[70];
    for (int i = 0; i < 70; i++) x[i] = i < 64 ? 100.0f * (float)(i % 7 - 3) : 0.01f * (float)(i - 63);
    uint8_t s[3], c[70];
    float v[70];
    mx_quantize(f, x, 70, s, c, NULL);
    MPT_CHECK_EQ_U64(3, mx_nblocks(f, 70), "blocks of 70 values");
    MPT_CHECK_EQ_HEX((uint64_t)lab30_ref_scale(0.06f, 2), s[2], "the last block (6 values, max 0.06): floor(log2 0.06) - 2 = -7");
    mx_dequantize(f, s, c, 70, 1, v);
    MPT_CHECK_FLOAT_BITS(0x1p-7f * 6, v[69], "0.06 / 2^-7 = 7.68 saturates at 6: 6 * 2^-7");
    SAME_AS_REFERENCE(f, x, 70, "70 values");
}

/* NVFP4: tensor scale amax / 2688, block scale e4m3(amax_b / 6 / tensor_scale). */
MPT_TEST(nvfp4_two_level_scales) {
    MPT_CHECK_FLOAT_BITS(0.5f, mx_nvfp4_tensor_scale(1344.0f), "tensor amax 1344: 1344 / (6 * 448)");
    MPT_CHECK_FLOAT_BITS(1.0f, mx_nvfp4_tensor_scale(0.0f), "a tensor of zeros: tensor scale 1 (this core's rule)");
    MPT_CHECK_EQ_HEX(0x38, mx_nvfp4_block_scale(3.0f, 0.5f), "block amax 3, tensor scale 0.5: 3 / 6 / 0.5 = 1.0 (e4m3 0x38)");
    MPT_CHECK_EQ_HEX(0x7E, mx_nvfp4_block_scale(1344.0f, 0.5f), "the tensor's amax block: 448 (0x7E), e4m3's max");
    MPT_CHECK_EQ_HEX(0x7E, mx_nvfp4_block_scale(5000.0f, 0.5f), "past 448: saturates at 0x7E, never NaN");
    MPT_CHECK_EQ_HEX(0x3B, mx_nvfp4_block_scale(4.2f, 0.5f), "4.2 / 3 = 1.4: e4m3 rounds to 1.375 (0x3B)");
    MPT_CHECK_EQ_HEX(0x38, mx_nvfp4_block_scale(2.97f, 0.5f), "2.97 / 3 = 0.99: nearest e4m3 is 1.0 (0x38); "
                     "0.9375 (0x37) means the block scale was truncated, not rounded to nearest even");
    const mx_format *f = lab30_fmt("nvfp4");
    float x[40];
    mp_rng r;
    mp_rng_seed(&r, mpt_seed() ^ 4);
    for (int i = 0; i < 40; i++) x[i] = lab30_random(&r, -4, 4);
    x[5] = 1344.0f;
    SAME_AS_REFERENCE(f, x, 40, "40 values, one of 1344 (tensor scale 0.5)");
}
