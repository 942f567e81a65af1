/* lab09_observe.h: lab 09's region functions as its tests call them, each call's results recorded for the grader
 * (mptest.h), which compares them with the reference regions' on the same inputs. Include after the core headers. */
#ifndef LAB09_OBSERVE_H
#define LAB09_OBSERVE_H

#include "amp/detect.h"
#include "mptest.h"
#include "optim/compensated.h"

static inline void lab09_kahan_observed(const char *file, int line, float *w, float *comp, const float *update,
                                        size_t n) {
    optim_kahan_bf16_update(w, comp, update, n);
    mpt_observe_near_f32(file, line, w, w, (long)n, 0, 0);
    mpt_observe_near_f32(file, line, comp, comp, (long)n, 0, 0);
}
#define optim_kahan_bf16_update(w, comp, update, n) lab09_kahan_observed(__FILE__, __LINE__, (w), (comp), (update), (n))

static inline void lab09_observe_nonfinite(const char *file, int line, bool bad, const amp_nonfinite *nf) {
    mpt_observe(file, line, (uint64_t)bad << 40 | (uint64_t)(uint32_t)nf->ntensors << 20 | (uint32_t)nf->nbad);
    mpt_observe(file, line, nf->count);
    mpt_observe(file, line, nf->nan << 42 ^ nf->posinf << 21 ^ nf->neginf);
    if (nf->nbad > 0) {
        mpt_observe(file, line, (uint64_t)(uint32_t)nf->first.index << 32 | nf->first.first_offset);
        mpt_observe(file, line, nf->first.nan << 42 ^ nf->first.posinf << 21 ^ nf->first.neginf);
    }
    if (nf->nbad > 1) mpt_observe(file, line, (uint64_t)(uint32_t)nf->second.index << 32 | nf->second.first_offset);
}
static inline bool lab09_find_observed(const char *file, int line, model *m, amp_scan_what what, amp_nonfinite *nf) {
    bool bad = amp_find_nonfinite(m, what, nf);
    lab09_observe_nonfinite(file, line, bad, nf);
    return bad;
}
#define amp_find_nonfinite(m, what, nf) lab09_find_observed(__FILE__, __LINE__, (m), (what), (nf))
static inline bool lab09_scan_observed(const char *file, int line, const model_tensor *tensors, const int *order, int n,
                                       const float *buf, amp_nonfinite *nf) {
    bool bad = amp_scan_nonfinite(tensors, order, n, buf, nf);
    lab09_observe_nonfinite(file, line, bad, nf);
    return bad;
}
#define amp_scan_nonfinite(tensors, order, n, buf, nf) \
    lab09_scan_observed(__FILE__, __LINE__, (tensors), (order), (n), (buf), (nf))

#endif
