/* norm_table.c: lab 25's norm-statistics table: the mean and variance of rows of activations with a growing mean,
 * computed by norm_stats_in_format (your part B) in fp32, bf16 and fp16, two-pass and one-pass, against double.
 *
 * Each row has C values x = M + sigma * z with z ~ N(0, 1) (seeded), for several M/sigma; the table gives, per format
 * and method, how the variance came out: "ok" (within 1% of double), "xR" (R times the true value), "neg" (negative:
 * rstd is NaN and so is the normalised row), "inf"/"nan" (a sum overflowed). A TSV (one line per M/sigma, one column
 * per format and method: the relative error of the variance, 1e4 standing for inf, NaN or negative) is written for
 * the figure.
 *
 * usage: norm_table C TSV     (C: values per row, e.g. 768 for GPT-2 small, 128 for the tiny GPT) */
#include "base/error.h"
#include "base/rng.h"
#include "ops/norm_precision.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const float MEANS[] = {0, 1, 3, 10, 30, 100, 300, 1000, 3000, 10000};
enum { NMEANS = sizeof MEANS / sizeof *MEANS };
static const fp_format *const FORMATS[] = {&FP_FP32, &FP_BF16, &FP_FP16};
enum { NFORMATS = 3 };

/* "ok" (within 1%), "xR" (R times the true variance), or what went wrong; *rel is the relative error. */
static const char *verdict(float var, double exact, double *rel, char *buf, size_t len) {
    *rel = fabs((double)var - exact) / exact;
    if (isnan(var)) return "nan";
    if (isinf(var)) return "inf";
    if (var < 0) return "neg";
    if (*rel < 0.01) return "ok";
    double ratio = var / exact; /* how many times the true variance it came out */
    snprintf(buf, len, ratio < 100 ? "x%.3g" : "x%.1e", ratio);
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s C TSV\n", argv[0]);
        return 2;
    }
    char *end;
    long C = strtol(argv[1], &end, 10);
    if (*end || C < 2 || C > 65536) MP_FAIL("C, a whole number from 2 to 65536", "'%s'", argv[1]);
    FILE *tsv = fopen(argv[2], "w");
    if (!tsv) MP_FAIL("a writable TSV path", "cannot write %s", argv[2]);
    float *x = malloc((size_t)C * sizeof(float));
    MP_ASSERT(x, "out of memory");
    fprintf(tsv, "# M/sigma");
    for (int f = 0; f < NFORMATS; f++)
        for (int k = 0; k < NORM_NMETHODS; k++) fprintf(tsv, "\t%s_%s", FORMATS[f]->name, norm_method_name(k));
    fprintf(tsv, "\n");
    printf("rows of %ld values x = M + z, z ~ N(0, 1): the variance as each format and method computes it, against "
           "double\n(ok = within 1%%; xR = R times the true variance; neg = negative: rstd is NaN; inf/nan: a sum overflowed)\n\n", C);
    printf("%8s", "M/sigma");
    for (int f = 0; f < NFORMATS; f++)
        for (int k = 0; k < NORM_NMETHODS; k++) printf("  %5s %-8s", FORMATS[f]->name, norm_method_name(k));
    printf("\n");
    for (int r = 0; r < NMEANS; r++) {
        mp_rng rng;
        mp_rng_seed(&rng, 25 + (uint64_t)r);
        double sum = 0, ss = 0;
        for (long i = 0; i < C; i++) {
            x[i] = MEANS[r] + mp_rng_normal(&rng);
            sum += x[i];
        }
        double mean = sum / C;
        for (long i = 0; i < C; i++) ss += (x[i] - mean) * (x[i] - mean);
        double var = ss / C;
        char line[512], tsv_line[512];
        int at = snprintf(line, sizeof line, "%8g", (double)MEANS[r]);
        int tat = snprintf(tsv_line, sizeof tsv_line, "%g", (double)MEANS[r]);
        for (int f = 0; f < NFORMATS; f++)
            for (int k = 0; k < NORM_NMETHODS; k++) {
                norm_stats st;
                norm_stats_in_format(x, (size_t)C, FORMATS[f], (norm_method)k, 1e-5f, &st);
                double rel;
                char buf[32];
                at += snprintf(line + at, sizeof line - (size_t)at, "  %-14s", verdict(st.var, var, &rel, buf, sizeof buf));
                tat += snprintf(tsv_line + tat, sizeof tsv_line - (size_t)tat, "\t%.6g",
                                isfinite(st.var) && st.var >= 0 ? fmin(fmax(rel, 1e-8), 1e4) : 1e4);
            }
        while (at > 0 && line[at - 1] == ' ') line[--at] = '\0';
        printf("%s\n", line); /* a whole row at a time: a row stopped by a LAB_TODO leaves no half line */
        fprintf(tsv, "%s\n", tsv_line);
    }
    free(x);
    fclose(tsv);
    return 0;
}
