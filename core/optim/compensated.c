/* compensated.c: Kahan-compensated bf16 weight updates, every operation rounded to bf16 (lab 09, part D). */
#include "optim/compensated.h"

#include "base/lab.h"
#include "fp/half.h"

#include <stdint.h>

/* Round to nearest even by adding 0x7fff plus the last kept bit and truncating; NaNs are quieted instead,
 * since adding could carry a NaN's payload into the exponent and make it an inf. (The same rounding as
 * fp/half.c's bf16_from_float, lab 03, written here on floats so this file does not depend on that lab.) */
float optim_round_bf16(float x) {
    uint32_t u = fp_float_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return fp_float_from_bits(u | 0x00400000u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return fp_float_from_bits(u & 0xffff0000u);
}

void optim_bf16_nearest_update(float *w, const float *update, size_t n) {
    for (size_t i = 0; i < n; i++) w[i] = optim_round_bf16(w[i] + optim_round_bf16(update[i]));
}

void optim_kahan_bf16_update(float *w, float *comp, const float *update, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float u = optim_round_bf16(update[i]); /* the update as a bf16 tensor holds it */
        /* LAB 09 BEGIN Kahan-compensated update: y = u - c, s = w + y, c = (s - w) - y, w = s, each rounded to bf16 */
        float y = optim_round_bf16(u - comp[i]);
        float s = optim_round_bf16(w[i] + y);
        comp[i] = optim_round_bf16(optim_round_bf16(s - w[i]) - y);
        w[i] = s;
        /* LAB 09 END */
    }
}
