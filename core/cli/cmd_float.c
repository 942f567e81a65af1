/* cmd_float.c: `mixpar float`: how values look and what they lose in fp32, tf32, fp16, bf16, e4m3, e5m2 and others. */
#include "base/error.h"
#include "base/parse.h"
#include "base/rng.h"
#include "cli/commands.h"
#include "fp/format.h"
#include "fp/half.h"
#include "fp/mx.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: mixpar float [options] VALUE...\n"
    "       mixpar float --formats | --table FORMAT | --spacing FORMAT\n"
    "       mixpar float --block MXFORMAT VALUE... | --block MXFORMAT --file PATH\n"
    "\n"
    "For each VALUE and each format: the bits (sign|exponent|mantissa), the hex pattern, the value it\n"
    "rounds to, the absolute and relative error, the spacing (ulp) of the format there, and a note on\n"
    "overflow, underflow and subnormals. Each format is rounded from the fp32 value of VALUE, the way a\n"
    "tensor is cast; errors are measured against VALUE as typed.\n"
    "VALUE: 0.1, -0, 1e-8, 65504, 0x1p-24 (hex float), inf, -inf, nan. Arguments that start with\n"
    "'--' are options; use '--' before values if you need to stop option parsing.\n"
    "\n"
    "options:\n"
    "  --format F        show format F (repeatable; default fp32 tf32 fp16 bf16 e4m3 e5m2)\n"
    "  --round MODE      nearest (default, ties to even), zero, stochastic\n"
    "  --seed N          random bits for stochastic rounding (default 1)\n"
    "  --saturate        clamp overflow to +-max instead of inf (or NaN for e4m3)\n"
    "  --lab03           fp16 and bf16 through fp/half.c (lab 03's regions: fp16_from_float, fp16_to_float,\n"
    "                    bf16_from_float, bf16_to_float) instead of the generic encoder; nearest rounding only\n"
    "  --formats         each format's bits, bias, max, min normal, min subnormal, epsilon\n"
    "  --table F         every bit pattern of F (at most 16 bits) with its value and class\n"
    "  --spacing F       'value relative_spacing' for every positive finite value of F (at most 19 bits),\n"
    "                    for plotting: relative spacing = ulp(value) / value\n"
    "  --block MX        quantize the VALUEs (or the numbers in --file) as one tensor in the block format MX\n"
    "                    (lab 30): each block's scale, the element codes, the values they decode to, and the\n"
    "                    error (relative error, SNR in dB) against fp32. MX: %s\n"
    "  --file PATH       with --block: whitespace-separated numbers read from PATH (at most 1,000,000)\n"
    "  --help            this text\n"
    "\n"
    "formats: %s\n"
    "\n"
    "examples:\n"
    "  mixpar float 0.1 65504 1e-8 nan\n"
    "  mixpar float --format fp16 --format bf16 --round stochastic --seed 7 0.1\n"
    "  mixpar float --table e4m3\n"
    "  mixpar float --spacing fp16 > fp16.dat\n"
    "  mixpar float --block mxfp8-e4m3 1 0.3 -500 1e-4\n";

enum { MAX_FORMATS = 32, TABLE_MAX_BITS = 16, SPACING_MAX_BITS = 19 };

typedef struct {
    const fp_format *formats[MAX_FORMATS];
    int nformats;
    fp_round round;
    uint64_t seed;
    int saturate;
    int lab03; /* fp16 and bf16 through fp/half.c (lab 03's regions) */
} float_options;

/* The formats lab 03 writes codecs for (fp/half.c): with --lab03 they replace fp_encode/fp_decode, so the
 * experiment shows the student's bits; the generic encoder is the reference they are tested against. */
static const struct {
    const fp_format *format;
    uint16_t (*encode)(float);
    float (*decode)(uint16_t);
} LAB03_CODECS[] = {{&FP_FP16, fp16_from_float, fp16_to_float}, {&FP_BF16, bf16_from_float, bf16_to_float}};

static int lab03_codec(const float_options *o, const fp_format *f) {
    if (!o->lab03) return -1;
    for (int i = 0; i < (int)(sizeof LAB03_CODECS / sizeof LAB03_CODECS[0]); i++)
        if (LAB03_CODECS[i].format == f) return i;
    return -1;
}

/* ------------------------------------------------------------------ argument parsing */

static const fp_format *format_arg(const char *option, const char *name) {
    const fp_format *f = fp_format_by_name(name);
    if (!f)
        MP_FAIL_HINT("a format name: fp32, tf32, fp16, bf16, e4m3, e5m2, or eXmY such as e3m2 or e2m1", FP_FORMAT_NAMES_HELP,
                     "%s '%s'", option, name);
    return f;
}

static const char *option_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) mp_usage_error("float", "%s needs a value", argv[*i]);
    *i += 1;
    return argv[*i];
}

static const fp_format *small_format(const char *option, const char *name, int max_bits) {
    const fp_format *f = format_arg(option, name);
    if (fp_format_bits(f) > max_bits)
        MP_FAIL_HINT("a format of at most 16 bits for --table, 19 for --spacing",
                     "listing every pattern of a wide format would print millions of lines; try fp16, bf16 or e4m3",
                     "%s %s (%d bits)", option, name, fp_format_bits(f));
    return f;
}

/* ------------------------------------------------------------------ printing helpers */

/* "s|eeeee|mmmmmmmmmm" for a pattern of f. */
static void bits_string(const fp_format *f, uint32_t bits, char *out) {
    int total = fp_format_bits(f), pos = 0;
    for (int b = total - 1; b >= 0; b--) {
        out[pos++] = (char)('0' + ((bits >> b) & 1u));
        if (b == f->ebits + f->mbits || (b == f->mbits && f->mbits > 0)) out[pos++] = '|';
    }
    out[pos] = '\0';
}

static void hex_string(const fp_format *f, uint32_t bits, char *out, size_t size) {
    int digits = (fp_format_bits(f) + 3) / 4;
    snprintf(out, size, "0x%0*x", digits, bits);
}

/* A value with enough digits to tell fp32 values apart; "2^k" alongside for exact powers of two is left to
 * the callers that want it. */
static void value_string(double v, char *out, size_t size) {
    if (isnan(v))
        snprintf(out, size, "nan");
    else if (isinf(v))
        snprintf(out, size, v < 0 ? "-inf" : "inf");
    else
        snprintf(out, size, "%.9g", v);
}

/* "2^-14" when v is a power of two, else "". */
static void power_of_two_string(double v, char *out, size_t size) {
    int e;
    double m = frexp(v, &e);
    if (m == 0.5)
        snprintf(out, size, "2^%d", e - 1);
    else
        out[0] = '\0';
}

/* ------------------------------------------------------------------ mixpar float VALUE */

/* What happened to a value in a format, as a short note. One row per situation, first match wins. */
typedef enum {
    NOTE_NAN_IN, NOTE_NAN_LOST, NOTE_INF_KEPT, NOTE_INF_TO_NAN, NOTE_INF_SATURATED, NOTE_OVERFLOW_INF,
    NOTE_OVERFLOW_NAN, NOTE_SATURATED, NOTE_UNDERFLOW, NOTE_SUBNORMAL, NOTE_EXACT, NOTE_ROUNDED, NOTE_ZERO,
} note_kind;

/* x is the fp32 value that was encoded, typed the value as typed (errors and exactness are against it). */
static note_kind classify_note(const fp_format *f, float x, double typed, uint32_t bits) {
    fp_class c = fp_classify_bits(f, bits);
    double decoded = fp_decode(f, bits);
    if (isnan(x)) return c == FP_CLASS_NAN ? NOTE_NAN_IN : NOTE_NAN_LOST;
    if (isinf(x)) return c == FP_CLASS_INF ? NOTE_INF_KEPT : c == FP_CLASS_NAN ? NOTE_INF_TO_NAN : NOTE_INF_SATURATED;
    if (c == FP_CLASS_INF) return NOTE_OVERFLOW_INF;
    if (c == FP_CLASS_NAN) return NOTE_OVERFLOW_NAN;
    /* Clamped only when the value lies past max's own rounding interval (65519 simply rounds to 65504). */
    double max = fp_max(f);
    if (fabs((double)x) >= max + fp_ulp(f, (float)max) / 2 && decoded != x) return NOTE_SATURATED;
    if (typed == 0) return NOTE_ZERO;
    if (c == FP_CLASS_ZERO) return NOTE_UNDERFLOW;
    if (c == FP_CLASS_SUBNORMAL) return NOTE_SUBNORMAL;
    return decoded == typed ? NOTE_EXACT : NOTE_ROUNDED;
}

static void note_string(const fp_format *f, note_kind kind, char *out, size_t size) {
    char a[32], b[32];
    value_string(fp_max(f), a, sizeof a);
    value_string(fp_min_subnormal(f), b, sizeof b);
    switch (kind) {
    case NOTE_NAN_IN: snprintf(out, size, "NaN stays NaN"); break;
    case NOTE_NAN_LOST: snprintf(out, size, "no NaN in %s: became max", f->name); break;
    case NOTE_INF_KEPT: snprintf(out, size, "inf stays inf"); break;
    case NOTE_INF_TO_NAN: snprintf(out, size, "no inf in %s: NaN", f->name); break;
    case NOTE_INF_SATURATED: snprintf(out, size, "inf saturated to max %s", a); break;
    case NOTE_OVERFLOW_INF: snprintf(out, size, "overflow: above max %s -> inf", a); break;
    case NOTE_OVERFLOW_NAN: snprintf(out, size, "overflow: above max %s -> NaN (no inf)", a); break;
    case NOTE_SATURATED: snprintf(out, size, "overflow: clamped to max %s", a); break;
    case NOTE_UNDERFLOW: snprintf(out, size, "underflow: rounds to 0 (min subnormal %s)", b); break;
    case NOTE_SUBNORMAL: {
        char n[32];
        value_string(fp_min_normal(f), n, sizeof n);
        snprintf(out, size, "subnormal (below min normal %s): fewer bits", n);
        break;
    }
    case NOTE_EXACT: snprintf(out, size, "exact"); break;
    case NOTE_ROUNDED: snprintf(out, size, "rounded"); break;
    case NOTE_ZERO: snprintf(out, size, "zero"); break;
    }
}

static void show_value(const float_options *o, const char *text, double typed, int value_index) {
    float x = (float)typed;
    char hex[16], value[32];
    hex_string(&FP_FP32, fp_float_bits(x), hex, sizeof hex);
    value_string(x, value, sizeof value);
    printf("%s  (fp32 %s = %.17g; rounding: %s%s%s)\n\n", text, hex, (double)x, fp_round_name(o->round),
           o->saturate ? ", saturating" : "", o->lab03 ? "; fp16 and bf16 by fp/half.c, lab 03's code" : "");
    printf("%-6s %-35s %-11s %-16s %-10s %-10s %-10s %s\n", "format", "bits (sign|exponent|mantissa)", "hex",
           "value", "abs error", "rel error", "ulp", "note");
    for (int k = 0; k < o->nformats; k++) {
        const fp_format *f = o->formats[k];
        uint32_t random_bits = mp_hash32(o->seed, (uint64_t)value_index * MAX_FORMATS + (uint64_t)k);
        int lab03 = lab03_codec(o, f);
        uint32_t bits = lab03 >= 0 ? LAB03_CODECS[lab03].encode(x) : fp_encode(f, x, o->round, o->saturate, random_bits);
        double decoded = lab03 >= 0 ? LAB03_CODECS[lab03].decode((uint16_t)bits) : fp_decode(f, bits);
        char bit_text[48], abs_err[24], rel_err[24], ulp[24], note[96];
        bits_string(f, bits, bit_text);
        hex_string(f, bits, hex, sizeof hex);
        value_string(decoded, value, sizeof value);
        if (isfinite(decoded) && isfinite(typed)) {
            double err = fabs(decoded - typed);
            snprintf(abs_err, sizeof abs_err, "%.3g", err);
            if (typed != 0)
                snprintf(rel_err, sizeof rel_err, "%.3g", err / fabs(typed));
            else
                snprintf(rel_err, sizeof rel_err, "-");
        } else {
            snprintf(abs_err, sizeof abs_err, "-");
            snprintf(rel_err, sizeof rel_err, "-");
        }
        double spacing = fp_ulp(f, x);
        if (isnan(spacing))
            snprintf(ulp, sizeof ulp, "-");
        else
            snprintf(ulp, sizeof ulp, "%.3g", spacing);
        note_string(f, classify_note(f, x, typed, bits), note, sizeof note);
        printf("%-6s %-35s %-11s %-16s %-10s %-10s %-10s %s\n", f->name, bit_text, hex, value, abs_err, rel_err, ulp,
               note);
    }
}

/* ------------------------------------------------------------------ --formats, --table, --spacing */

static void show_formats(const float_options *o) {
    printf("%-10s %4s %4s %4s %4s  %-24s %-24s %-24s %-18s %s\n", "format", "bits", "exp", "mant", "bias", "max",
           "min normal", "min subnormal", "epsilon", "specials");
    static const char *const specials_text[] = {
        [FP_SPECIALS_IEEE] = "inf + NaN at all-ones exponent",
        [FP_SPECIALS_FN] = "no inf; NaN only S.1..1.1..1",
        [FP_SPECIALS_NONE] = "none: every pattern finite",
    };
    for (int k = 0; k < o->nformats; k++) {
        const fp_format *f = o->formats[k];
        char max[32], normal[48], sub[48], eps[40], p2[16], v[32];
        value_string(fp_max(f), max, sizeof max);
        value_string(fp_min_normal(f), v, sizeof v);
        power_of_two_string(fp_min_normal(f), p2, sizeof p2);
        snprintf(normal, sizeof normal, "%s (%s)", v, p2);
        value_string(fp_min_subnormal(f), v, sizeof v);
        power_of_two_string(fp_min_subnormal(f), p2, sizeof p2);
        snprintf(sub, sizeof sub, "%s (%s)", v, p2);
        value_string(fp_epsilon(f), v, sizeof v);
        power_of_two_string(fp_epsilon(f), p2, sizeof p2);
        snprintf(eps, sizeof eps, "%s (%s)", v, p2);
        printf("%-10s %4d %4d %4d %4d  %-24s %-24s %-24s %-18s %s\n", f->name, fp_format_bits(f), f->ebits, f->mbits,
               f->bias, max, normal, sub, eps, specials_text[f->specials]);
    }
}

static void show_table(const fp_format *f) {
    printf("# every %s pattern: hex bits value class\n", f->name);
    uint32_t count = 1u << fp_format_bits(f);
    for (uint32_t bits = 0; bits < count; bits++) {
        char hex[16], bit_text[48], value[32];
        hex_string(f, bits, hex, sizeof hex);
        bits_string(f, bits, bit_text);
        value_string(fp_decode(f, bits), value, sizeof value);
        printf("%s %s %s %s\n", hex, bit_text, value, fp_class_name(fp_classify_bits(f, bits)));
    }
}

static void show_spacing(const float_options *o, const fp_format *f) {
    int lab03 = lab03_codec(o, f);
    printf("# %s: value relative_spacing (ulp(value)/value) for every positive finite value%s\n", f->name,
           lab03 >= 0 ? " (decoded by fp/half.c)" : "");
    for (uint32_t bits = 1; bits <= fp_max_bits(f); bits++) {
        double v = lab03 >= 0 ? LAB03_CODECS[lab03].decode((uint16_t)bits) : fp_decode(f, bits);
        printf("%.9g %.6g\n", v, fp_ulp(f, (float)v) / v);
    }
}

/* ------------------------------------------------------------------ MX block formats (lab 30) */

static void show_mx_formats(void) {
    printf("\n%-11s %-8s %4s %5s %5s  %-12s %s\n", "MX format", "element", "bits", "emax", "block", "scale", "about");
    for (int k = 0; k < MX_NFORMATS; k++) {
        const mx_format *f = &MX_FORMATS[k];
        printf("%-11s %-8s %4d %5d %5d  %-12s %s\n", f->name, f->element, f->bits, f->emax, f->block,
               f->scale == MX_SCALE_E8M0 ? "E8M0" : "E4M3 x fp32", f->about);
    }
}

/* The values quantized as one tensor in f: per block its scale, then each value, its code and what it decodes to. */
static void show_block(const mx_format *f, const float *x, size_t n) {
    size_t nb = mx_nblocks(f, n);
    uint8_t *scales = malloc(nb), *codes = malloc(n);
    float *back = malloc(n * sizeof(float)), tensor_scale = 1;
    MP_ASSERT(scales && codes && back, "out of memory for %zu values", n);
    mx_quantize(f, x, n, scales, codes, &tensor_scale);
    mx_dequantize(f, scales, codes, n, tensor_scale, back);
    printf("%s: %zu values in %zu block(s) of %d; element %s (%d bits), emax %d\n", f->name, n, nb, f->block,
           f->element, f->bits, f->emax);
    if (f->scale == MX_SCALE_E4M3_TENSOR) printf("tensor scale (fp32): %.9g\n", (double)tensor_scale);
    for (size_t b = 0; b < nb; b++) {
        if (f->scale == MX_SCALE_E8M0)
            if (scales[b] == MX_E8M0_NAN) printf("block %zu: scale 0xff = NaN (the block held inf or NaN)\n", b);
            else printf("block %zu: scale 0x%02x = 2^%d\n", b, scales[b], (int)scales[b] - MX_E8M0_BIAS);
        else
            printf("block %zu: scale 0x%02x = e4m3 %.9g (x tensor scale = %.9g)\n", b, scales[b],
                   (double)fp_decode(&FP_E4M3, scales[b]), (double)(fp_decode(&FP_E4M3, scales[b]) * tensor_scale));
        size_t end = (b + 1) * (size_t)f->block < n ? (b + 1) * (size_t)f->block : n;
        printf("  %5s %16s %6s %16s %12s\n", "i", "value", "code", "decoded", "rel error");
        for (size_t i = b * (size_t)f->block; i < end; i++)
            printf("  %5zu %16.9g   0x%02x %16.9g %12.3g\n", i, (double)x[i], codes[i], (double)back[i],
                   x[i] != 0 ? fabs(((double)back[i] - x[i]) / x[i]) : fabs((double)back[i]));
    }
    mx_error e = mx_error_of(x, back, n);
    printf("relative error %.4g   SNR %.2f dB   max |error| %.4g   flushed to zero %.2f%%\n", e.rel_error, e.snr_db,
           e.max_abs_error, 100 * e.flushed_share);
    free(scales), free(codes), free(back);
}

/* Whitespace-separated numbers of a file, for --block --file. */
static float *read_numbers(const char *path, size_t *n) {
    FILE *fp = fopen(path, "r");
    if (!fp) MP_FAIL_HINT("a readable file of numbers", "check the path", "--file '%s': %s", path, strerror(errno));
    size_t cap = 1024, count = 0;
    float *x = malloc(cap * sizeof(float));
    MP_ASSERT(x, "out of memory");
    char word[128];
    while (fscanf(fp, "%127s", word) == 1) {
        double v;
        if (!parse_double(word, &v)) {
            fclose(fp);
            MP_FAIL("numbers separated by spaces or newlines", "--file '%s': '%s' (number %zu)", path, word, count + 1);
        }
        if (count == 1000000) {
            fclose(fp);
            MP_FAIL("at most 1,000,000 numbers", "--file '%s' has more", path);
        }
        if (count == cap) {
            x = realloc(x, (cap *= 2) * sizeof(float));
            MP_ASSERT(x, "out of memory");
        }
        x[count++] = (float)v;
    }
    fclose(fp);
    *n = count;
    return x;
}

/* ------------------------------------------------------------------ entry point */

int cmd_float(int argc, char **argv) {
    float_options o = {.nformats = 0, .round = FP_ROUND_NEAREST_EVEN, .seed = 1, .saturate = 0};
    const char *values[256];
    int nvalues = 0, want_formats = 0, options_done = 0;
    const fp_format *table = NULL, *spacing = NULL;
    const mx_format *block = NULL;
    const char *file = NULL;
    static const struct {
        const char *name;
        fp_round mode;
    } rounding_modes[] = {{"nearest", FP_ROUND_NEAREST_EVEN}, {"zero", FP_ROUND_TOWARD_ZERO},
                          {"stochastic", FP_ROUND_STOCHASTIC}};

    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (options_done || strncmp(arg, "--", 2) != 0) {
            if (nvalues == (int)(sizeof values / sizeof values[0])) mp_usage_error("float", "at most 256 values");
            values[nvalues++] = arg;
        } else if (strcmp(arg, "--") == 0) {
            options_done = 1;
        } else if (strcmp(arg, "--help") == 0) {
            printf(usage_text, MX_FORMAT_NAMES_HELP, FP_FORMAT_NAMES_HELP);
            return 0;
        } else if (strcmp(arg, "--format") == 0) {
            const fp_format *f = format_arg(arg, option_value(argc, argv, &i));
            if (o.nformats == MAX_FORMATS) mp_usage_error("float", "at most %d --format options", MAX_FORMATS);
            o.formats[o.nformats++] = f;
        } else if (strcmp(arg, "--round") == 0) {
            const char *mode = option_value(argc, argv, &i);
            int found = 0;
            for (size_t r = 0; r < sizeof rounding_modes / sizeof rounding_modes[0]; r++)
                if (strcmp(mode, rounding_modes[r].name) == 0) {
                    o.round = rounding_modes[r].mode;
                    found = 1;
                }
            if (!found) MP_FAIL("--round nearest, zero or stochastic", "--round '%s'", mode);
        } else if (strcmp(arg, "--seed") == 0) {
            const char *seed = option_value(argc, argv, &i);
            if (!parse_u64(seed, &o.seed)) MP_FAIL("--seed followed by a non-negative integer", "--seed '%s'", seed);
        } else if (strcmp(arg, "--saturate") == 0) {
            o.saturate = 1;
        } else if (strcmp(arg, "--lab03") == 0) {
            o.lab03 = 1;
        } else if (strcmp(arg, "--formats") == 0) {
            want_formats = 1;
        } else if (strcmp(arg, "--block") == 0) {
            const char *name = option_value(argc, argv, &i);
            block = mx_format_by_name(name);
            if (!block) MP_FAIL_HINT("an MX format name", MX_FORMAT_NAMES_HELP, "--block '%s'", name);
        } else if (strcmp(arg, "--file") == 0) {
            file = option_value(argc, argv, &i);
        } else if (strcmp(arg, "--table") == 0) {
            table = small_format(arg, option_value(argc, argv, &i), TABLE_MAX_BITS);
        } else if (strcmp(arg, "--spacing") == 0) {
            spacing = small_format(arg, option_value(argc, argv, &i), SPACING_MAX_BITS);
        } else {
            mp_usage_error("float", "unknown option '%s'", arg);
        }
    }
    if (o.lab03 && (o.round != FP_ROUND_NEAREST_EVEN || o.saturate))
        MP_FAIL("--lab03 with nearest rounding and no --saturate (lab 03's codecs round to nearest even, overflow to inf)",
                "--lab03 with --round %s%s", fp_round_name(o.round), o.saturate ? " --saturate" : "");
    if (file && !block) mp_usage_error("float", "--file goes with --block MXFORMAT");
    if (file && nvalues > 0) mp_usage_error("float", "--block takes VALUEs or --file, not both");
    if (block && !file && nvalues == 0) mp_usage_error("float", "--block %s needs VALUEs or --file PATH", block->name);
    if (!want_formats && !table && !spacing && !block && nvalues == 0) {
        fprintf(stderr, usage_text, MX_FORMAT_NAMES_HELP, FP_FORMAT_NAMES_HELP);
        return 2;
    }
    /* Check every value before printing anything, so a typo does not leave half a report. */
    double parsed[256];
    for (int v = 0; v < nvalues; v++)
        if (!parse_double(values[v], &parsed[v]))
            MP_FAIL_HINT("a number such as 0.1, -0, 1e-8, 65504, 0x1p-24, inf or nan",
                         "options start with '--'; run 'mixpar float --help'", "'%s'", values[v]);
    if (o.nformats == 0)
        for (int k = 0; k < FP_NSTANDARD_FORMATS; k++) o.formats[o.nformats++] = FP_STANDARD_FORMATS[k];

    if (want_formats) show_formats(&o);
    if (want_formats) show_mx_formats();
    if (block) {
        size_t n = (size_t)nvalues;
        float *x = file ? read_numbers(file, &n) : malloc(n * sizeof(float));
        MP_ASSERT(x, "out of memory");
        for (int v = 0; !file && v < nvalues; v++) x[v] = (float)parsed[v];
        if (n == 0) mp_usage_error("float", "--file '%s' holds no numbers", file);
        show_block(block, x, n);
        free(x);
        return 0;
    }
    if (table) show_table(table);
    if (spacing) show_spacing(&o, spacing);
    for (int v = 0; v < nvalues; v++) {
        if (v > 0 || want_formats) printf("\n");
        show_value(&o, values[v], parsed[v], v);
    }
    return 0;
}
