/* formats.c: the binade limits of fp32, bf16, fp16, e4m3 and e5m2, as data. */
#include "formats.h"

#include "model.h"

#include <string.h>

const char *const VZ_ZONE_NAMES[VZ_NZONES] = {"normal", "subnormal", "rounds to 0", "overflow"};

/*                 name    min subnormal   min normal   max binade  max                       hist target */
const vz_format VZ_FORMATS[VZ_NFORMATS] = {
    {"fp32", -149, -126, 127, 3.4028234663852886e38, -1},
    {"bf16", -133, -126, 127, 3.3895313892515355e38, VZ_TARGET_BF16},
    {"fp16", -24, -14, 15, 65504.0, VZ_TARGET_FP16},
    {"e4m3", -9, -6, 8, 448.0, VZ_TARGET_E4M3},
    {"e5m2", -16, -14, 15, 57344.0, VZ_TARGET_E5M2},
};

vz_zone vz_format_zone(const vz_format *f, int binade) {
    if (binade > f->max_binade) return VZ_ZONE_OVERFLOW;
    if (binade >= f->min_normal) return VZ_ZONE_NORMAL;
    if (binade >= f->min_subnormal) return VZ_ZONE_SUBNORMAL;
    return VZ_ZONE_UNDERFLOW;
}

const vz_format *vz_format_by_name(const char *name) {
    for (int i = 0; i < VZ_NFORMATS; i++)
        if (strcmp(VZ_FORMATS[i].name, name) == 0) return &VZ_FORMATS[i];
    return NULL;
}
