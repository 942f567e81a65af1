/* compensated.h: Kahan-compensated updates of bf16 weights: a bf16 buffer keeps what each rounding dropped (lab 09). */
#ifndef MIXPAR_OPTIM_COMPENSATED_H
#define MIXPAR_OPTIM_COMPENSATED_H

/* Weights stored in bf16 with no fp32 master copy lose every update smaller than half an ulp: bf16 has
 * 8 significant bits, so a weight of 0.02 (ulp 2^-13 = 1.2e-4) ignores any update under 6.1e-5, and a
 * gain of 1.0 (ulp 2^-7) any update under 0.0039, step after step. Kahan summation keeps the part of each
 * update that the rounding dropped in a second bf16 tensor, the compensation c, and adds it back at the
 * next step; Zamirai et al. 2020 ("Revisiting BFloat16 Training") use it, with stochastic rounding as the
 * other remedy, to train with 16-bit units only and match fp32 accuracy. Per element, with every
 * operation's result rounded to bf16 (nearest even), as a bf16 unit computes it:
 *
 *     y = u - c            the update, corrected by what earlier roundings added too much (or too little)
 *     s = w + y            the new weight, rounded
 *     c = (s - w) - y      what this rounding added beyond y: the error, with its sign
 *     w = s
 *
 * (s - w) is exact when the update is small against w (Sterbenz: s and w within a factor of 2), so c is
 * exactly the rounding error of w + y, up to c's own rounding; the true sum of all updates is w - c
 * within about one ulp of c, and |c| stays below about half an ulp of w. Memory: 2 + 2 bytes per weight,
 * against 2 + 4 for bf16 weights with an fp32 master copy.
 *
 * The arrays hold bf16 values as fp32 numbers (the low 16 bits zero): what mixpar's bf16 weights are
 * (model_lowp.h); the update is rounded to bf16 before use, as a bf16 optimizer would produce it. */

#include <stddef.h>

/* w[i] += update[i] with Kahan compensation in bf16: w (n) the weights and comp (n) the compensation,
 * both bf16 values, updated in place (comp starts at 0); update (n) the step the optimizer wants, e.g.
 * -lr * m / (sqrt(v) + eps). A NaN or inf in the update makes that weight NaN or inf: nothing hides it. */
void optim_kahan_bf16_update(float *w, float *comp, const float *update, size_t n);

/* The same update without compensation: w[i] = bf16(w[i] + bf16(update[i])), round to nearest even.
 * What a bf16 weight gets when nothing keeps the dropped part (the baseline Kahan is compared with). */
void optim_bf16_nearest_update(float *w, const float *update, size_t n);

/* x rounded to the nearest bf16 value (ties to even), as an fp32 number; NaN stays NaN, overflow gives inf. */
float optim_round_bf16(float x);

#endif
