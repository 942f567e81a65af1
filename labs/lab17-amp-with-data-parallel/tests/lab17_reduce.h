/* lab17_reduce.h: what lab 17's 16-bit reduction tests share: the reference average of p ranks' 16-bit values
 * (widened, added in fp32 in rank order, divided once, rounded once), the wrong answers students' code gives and
 * what each means, and a check of amp_reduce_mean16 on given rows. */
#ifndef LAB17_REDUCE_H
#define LAB17_REDUCE_H

#include "mptest.h"

#include "base/rng.h"
#include "dist/amp_reduce.h"
#include "fp/half.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline float lab17_widen(uint16_t v, comm_dtype dt) {
    float f;
    amp_reduce_widen16(&f, &v, 1, dt);
    return f;
}
static inline uint16_t lab17_narrow(float x, comm_dtype dt) {
    uint16_t v;
    amp_reduce_narrow16(&v, &x, 1, dt);
    return v;
}

/* The ways to average p 16-bit values; the first is the contract, the others are mistakes, with what they mean. */
typedef enum { LAB17_RIGHT, LAB17_SUM16, LAB17_PREDIVIDE16, LAB17_NOT_DIVIDED, LAB17_DIVIDED_TWICE,
               LAB17_NARROW_THEN_DIVIDE, LAB17_NWAYS } lab17_way;

static const char *const lab17_way_means[LAB17_NWAYS] = {
    "the contract",
    "the running sum was kept in 16 bits (rounded after every addition): widen every value to fp32 and add there; "
    "fp16 overflows as soon as the sum passes 65504, bf16 loses all but 8 significant bits",
    "each value was divided by p and rounded to 16 bits before the sum (the pre-divide of PyTorch's fp16 hook, which "
    "sums in 16 bits on the wire): here the sum is in fp32, so divide the fp32 sum once, after it",
    "the sum was not divided by p: the hook's result is the average over the ranks, as DDP's allreduce is",
    "the sum was divided by p twice (once per value and once at the end, or p*p): divide once",
    "the fp32 sum was rounded to 16 bits before the division: fp16 overflows on a sum the average would not",
};

static inline uint16_t lab17_average(const uint16_t *in, size_t p, size_t n, size_t i, comm_dtype dt, lab17_way way) {
    float acc = 0;
    uint16_t acc16 = lab17_narrow(0.0f, dt);
    for (size_t j = 0; j < p; j++) {
        float v = lab17_widen(in[j * n + i], dt);
        acc += way == LAB17_PREDIVIDE16 ? lab17_widen(lab17_narrow(v / (float)p, dt), dt) : v;
        acc16 = lab17_narrow(lab17_widen(acc16, dt) + v, dt);
    }
    switch (way) {
    case LAB17_SUM16: return lab17_narrow(lab17_widen(acc16, dt) / (float)p, dt);
    case LAB17_PREDIVIDE16: return lab17_narrow(acc, dt);
    case LAB17_NOT_DIVIDED: return lab17_narrow(acc, dt);
    case LAB17_DIVIDED_TWICE: return lab17_narrow(acc / (float)p / (float)p, dt);
    case LAB17_NARROW_THEN_DIVIDE: return lab17_narrow(lab17_widen(lab17_narrow(acc, dt), dt) / (float)p, dt);
    default: return lab17_narrow(acc / (float)p, dt);
    }
}

/* got (n) against the contract's average of in (p, n); on the first mismatch, which wrong way got matches over
 * the whole array. Returns true when all n agree bit for bit. */
static inline bool lab17_check_average(const uint16_t *got, const uint16_t *in, size_t p, size_t n, comm_dtype dt,
                                       const char *what) {
    const char *name = dt == COMM_FP16 ? "fp16" : "bf16";
    for (size_t i = 0; i < n; i++) {
        uint16_t want = lab17_average(in, p, n, i, dt, LAB17_RIGHT);
        MPT_OBSERVE(got[i]);
        if (got[i] == want) continue;
        const char *means = "none of the usual mistakes gives these values: widen each rank's value, add in fp32 in "
                            "rank order (rank 0 first), divide the sum by p once, round to 16 bits once";
        for (int w = LAB17_SUM16; w < LAB17_NWAYS; w++) {
            size_t same = 0;
            for (size_t k = 0; k < n; k++) same += got[k] == lab17_average(in, p, n, k, dt, (lab17_way)w);
            if (same == n) {
                means = lab17_way_means[w];
                break;
            }
        }
        char values[160] = "";
        for (size_t j = 0; j < p && j < 5; j++) {
            size_t used = strlen(values);
            snprintf(values + used, sizeof values - used, "%s%.9g", j ? ", " : "", (double)lab17_widen(in[j * n + i], dt));
        }
        mpt_fail(__FILE__, __LINE__, "%s: element %zu of %zu, %zu ranks' %s values %s%s\n      expected: %.9g (0x%04x)\n"
                 "      got:      %.9g (0x%04x)\n      likely mistake: %s", what, i, n, p, name, values,
                 p > 5 ? ", ..." : "", (double)lab17_widen(want, dt), want, (double)lab17_widen(got[i], dt), got[i],
                 means);
        return false;
    }
    return true;
}

/* Runs amp_reduce_mean16 on in (p, n) and checks it. */
static inline bool lab17_mean16(const uint16_t *in, size_t p, size_t n, comm_dtype dt, const char *what) {
    uint16_t *out = malloc(n * sizeof *out);
    float *acc = malloc(n * sizeof *acc), *wide = malloc(n * sizeof *wide);
    MPT_REQUIRE(out && acc && wide, "out of memory");
    for (size_t i = 0; i < n; i++) acc[i] = wide[i] = NAN; /* scratch holds garbage, as the hook's does */
    amp_reduce_mean16(out, in, p, n, dt, acc, wide);
    bool ok = lab17_check_average(out, in, p, n, dt, what);
    free(out), free(acc), free(wide);
    return ok;
}

/* in (p, n): rank j's value i is fp16/bf16 of v(j, i) from the seed: normal values times 2^e with e spread over
 * [lo, hi] (scaled gradients span many binades). */
static inline void lab17_fill(uint16_t *in, size_t p, size_t n, comm_dtype dt, uint64_t seed, int lo, int hi) {
    mp_rng rng;
    mp_rng_seed(&rng, seed);
    for (size_t k = 0; k < p * n; k++) {
        int e = lo + (int)(mp_rng_u64(&rng) % (uint64_t)(hi - lo + 1));
        in[k] = lab17_narrow(ldexpf(mp_rng_normal(&rng), e), dt);
    }
}

#endif
