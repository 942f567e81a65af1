/* format.c: the generic format engine: encode/decode any small binary float format with RNE, RZ or stochastic rounding. */
#include "fp/format.h"

#include "fp/format_impl.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const fp_format FP_FP32 = {"fp32", 8, 23, 127, FP_SPECIALS_IEEE};
const fp_format FP_TF32 = {"tf32", 8, 10, 127, FP_SPECIALS_IEEE};
const fp_format FP_FP16 = {"fp16", 5, 10, 15, FP_SPECIALS_IEEE};
const fp_format FP_BF16 = {"bf16", 8, 7, 127, FP_SPECIALS_IEEE};
const fp_format FP_E4M3 = {"e4m3", 4, 3, 7, FP_SPECIALS_FN};
const fp_format FP_E5M2 = {"e5m2", 5, 2, 15, FP_SPECIALS_IEEE};

const fp_format *const FP_STANDARD_FORMATS[6] = {&FP_FP32, &FP_TF32, &FP_FP16, &FP_BF16, &FP_E4M3, &FP_E5M2};

const char FP_FORMAT_NAMES_HELP[] =
    "fp32, tf32, fp16, bf16, e4m3, e5m2, or eXmY (2<=X<=7, 0<=Y<=23: all patterns finite, e.g. e2m1, e3m2), "
    "e8mY (1<=Y<=23, IEEE), eXmYieee (2<=X<=8, 1<=Y<=23), eXmYfn (2<=X<=7: NaN only S.1..1.1..1)";

static const struct {
    const char *name;
    const fp_format *format;
} named_formats[] = {
    {"fp32", &FP_FP32}, {"tf32", &FP_TF32}, {"fp16", &FP_FP16}, {"bf16", &FP_BF16},
    {"e4m3", &FP_E4M3}, {"e5m2", &FP_E5M2}, {"fp8_e4m3", &FP_E4M3}, {"fp8_e5m2", &FP_E5M2},
};

/* ------------------------------------------------------------------ generic formats by name */

/* Generic formats live in a table filled once, so fp_format_by_name can hand out pointers that stay valid
 * and two lookups of one name give the same pointer. Index: [X-2][Y][suffix]. */
enum { GEN_MIN_E = 2, GEN_MAX_E = 8, GEN_MAX_M = 23, GEN_NAME_LEN = 16 };
typedef enum { SUFFIX_PLAIN, SUFFIX_IEEE, SUFFIX_FN, NSUFFIXES } name_suffix;
static const char *const suffix_text[NSUFFIXES] = {"", "ieee", "fn"};

static fp_format generic[GEN_MAX_E - GEN_MIN_E + 1][GEN_MAX_M + 1][NSUFFIXES];
static char generic_names[GEN_MAX_E - GEN_MIN_E + 1][GEN_MAX_M + 1][NSUFFIXES][GEN_NAME_LEN];
static pthread_once_t generic_once = PTHREAD_ONCE_INIT;

/* The specials a generic name gets, or -1 when that (X, Y, suffix) is not a format that fits in fp32
 * (an all-finite or fn top binade with X = 8 would reach 2^128; IEEE needs a mantissa bit for NaN). */
static int generic_specials(int ebits, int mbits, name_suffix suffix) {
    switch (suffix) {
    case SUFFIX_PLAIN:
        if (ebits == 8) return mbits >= 1 ? FP_SPECIALS_IEEE : -1;
        return FP_SPECIALS_NONE;
    case SUFFIX_IEEE: return mbits >= 1 ? FP_SPECIALS_IEEE : -1;
    case SUFFIX_FN: return ebits <= 7 ? FP_SPECIALS_FN : -1;
    default: return -1;
    }
}

static void fill_generic(void) {
    for (int e = GEN_MIN_E; e <= GEN_MAX_E; e++)
        for (int m = 0; m <= GEN_MAX_M; m++)
            for (int s = 0; s < NSUFFIXES; s++) {
                char *name = generic_names[e - GEN_MIN_E][m][s];
                snprintf(name, GEN_NAME_LEN, "e%dm%d%s", e, m, suffix_text[s]);
                int specials = generic_specials(e, m, (name_suffix)s);
                generic[e - GEN_MIN_E][m][s] = (fp_format){name, e, m, (1 << (e - 1)) - 1,
                                                            specials < 0 ? FP_SPECIALS_NONE : (fp_specials)specials};
            }
}

/* Reads a small decimal number at *p (1-2 digits, no sign, no leading zero), advancing *p. */
static int read_small_int(const char **p, int *out) {
    const char *s = *p;
    if (s[0] < '0' || s[0] > '9') return 0;
    int v = s[0] - '0', len = 1;
    if (s[1] >= '0' && s[1] <= '9') {
        if (s[0] == '0') return 0;
        v = v * 10 + (s[1] - '0');
        len = 2;
    }
    *out = v;
    *p = s + len;
    return 1;
}

const fp_format *fp_format_by_name(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof named_formats / sizeof named_formats[0]; i++)
        if (strcmp(name, named_formats[i].name) == 0) return named_formats[i].format;
    const char *p = name;
    int ebits, mbits;
    if (*p++ != 'e' || !read_small_int(&p, &ebits) || *p++ != 'm' || !read_small_int(&p, &mbits)) return NULL;
    int suffix = -1;
    for (int s = 0; s < NSUFFIXES; s++)
        if (strcmp(p, suffix_text[s]) == 0) suffix = s;
    if (suffix < 0 || ebits < GEN_MIN_E || ebits > GEN_MAX_E || mbits > GEN_MAX_M) return NULL;
    if (generic_specials(ebits, mbits, (name_suffix)suffix) < 0) return NULL;
    pthread_once(&generic_once, fill_generic);
    return &generic[ebits - GEN_MIN_E][mbits][suffix];
}

/* ------------------------------------------------------------------ encode / decode */

int fp_format_bits(const fp_format *f) { return 1 + f->ebits + f->mbits; }
uint32_t fp_max_bits(const fp_format *f) { return fpi_max_bits(f); }

uint32_t fp_encode(const fp_format *f, float x, fp_round mode, int saturate, uint32_t random_bits) {
    return fpi_encode(f, x, mode, saturate, random_bits);
}

float fp_decode(const fp_format *f, uint32_t bits) { return fp_float_from_bits(fpi_decode_bits(f, bits)); }

double fp_max(const fp_format *f) { return fp_decode(f, fp_max_bits(f)); }
double fp_min_normal(const fp_format *f) { return ldexp(1.0, 1 - f->bias); }
double fp_min_subnormal(const fp_format *f) { return ldexp(1.0, 1 - f->bias - f->mbits); }
double fp_epsilon(const fp_format *f) { return ldexp(1.0, -f->mbits); }

double fp_ulp(const fp_format *f, float x) {
    if (!isfinite(x)) return NAN;
    if (x == 0.0f) return fp_min_subnormal(f);
    int e;
    frexp(fabs((double)x), &e); /* |x| = m * 2^e, m in [0.5, 1): floor(log2|x|) = e - 1 */
    int binade = e - 1;
    if (binade < 1 - f->bias) binade = 1 - f->bias;
    if (binade > fpi_max_exponent(f)) binade = fpi_max_exponent(f);
    return ldexp(1.0, binade - f->mbits);
}

fp_class fp_classify_bits(const fp_format *f, uint32_t bits) {
    uint32_t magnitude = bits & fpi_magnitude_mask(f);
    uint32_t exponent_field = magnitude >> f->mbits;
    if (f->specials == FP_SPECIALS_IEEE && exponent_field == fpi_exp_all_ones(f))
        return (magnitude & ((1u << f->mbits) - 1u)) ? FP_CLASS_NAN : FP_CLASS_INF;
    if (f->specials == FP_SPECIALS_FN && magnitude == fpi_magnitude_mask(f)) return FP_CLASS_NAN;
    if (magnitude == 0) return FP_CLASS_ZERO;
    return exponent_field == 0 ? FP_CLASS_SUBNORMAL : FP_CLASS_NORMAL;
}

const char *fp_class_name(fp_class c) {
    static const char *const names[] = {"zero", "subnormal", "normal", "inf", "nan"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "?";
}

const char *fp_specials_name(fp_specials s) {
    static const char *const names[] = {"ieee", "fn", "none"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

const char *fp_round_name(fp_round r) {
    static const char *const names[] = {"nearest", "zero", "stochastic"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}
