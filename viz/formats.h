/* formats.h: where each number format keeps a value, binade by binade: normal, subnormal, rounded to zero, overflow. */
#ifndef MIXPAR_VIZ_FORMATS_H
#define MIXPAR_VIZ_FORMATS_H

/* A binade is [2^b, 2^(b+1)): the values with floor(log2|v|) = b. A format holds binade b
 *   as normal numbers        when min_normal <= b <= max_binade (full precision),
 *   as subnormal numbers     when min_subnormal <= b < min_normal (fewer mantissa bits: precision lost),
 *   not at all: rounded to 0 when b < min_subnormal (half of binade min_subnormal-1, the values above
 *                            2^(min_subnormal-1), round up to the smallest subnormal; the rest to 0),
 *   not at all: overflow     when b > max_binade (binade max_binade itself overflows above max + half an ulp).
 * These are the formats' exact limits (core/fp/format.h; checked against it in tests/unit/test_viz_model.c). */
typedef struct {
    const char *name;
    int min_subnormal; /* binade of the smallest subnormal */
    int min_normal;    /* binade of the smallest normal */
    int max_binade;    /* binade of the largest finite value */
    double max;        /* the largest finite value */
    int target;        /* its vz_target index in hist events, -1 for fp32 (the data's own format) */
} vz_format;

typedef enum { VZ_ZONE_NORMAL, VZ_ZONE_SUBNORMAL, VZ_ZONE_UNDERFLOW, VZ_ZONE_OVERFLOW, VZ_NZONES } vz_zone;
extern const char *const VZ_ZONE_NAMES[VZ_NZONES]; /* "normal", "subnormal", "rounds to 0", "overflow" */

/* fp32, bf16, fp16, e4m3, e5m2: the rows drawn under the histogram, widest range first. */
enum { VZ_NFORMATS = 5 };
extern const vz_format VZ_FORMATS[VZ_NFORMATS];

vz_zone vz_format_zone(const vz_format *f, int binade);
const vz_format *vz_format_by_name(const char *name); /* NULL when not one of the five */

#endif
