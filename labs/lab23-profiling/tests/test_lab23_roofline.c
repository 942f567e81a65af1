/* test_lab23_roofline.c: lab 23 visible tests of part C, the roofline point (prof_roofline_place in
 * core/prof/roofline.c): kernels left of, right of and exactly at the ridge, and input that has no point. */
#include "lab23_util.h"

/* A roof of 2^40 FLOP/s and 2^36 B/s: the ridge is at 16 FLOP/byte, and every number below is exact. */
static const prof_roof ROOF = {0x1p40, 0x1p36};

MPT_TEST(roofline_memory_bound_below_the_ridge) {
    /* 4 FLOP/B: the roof there is 4 * 2^36 = 2^38; moving 2^30 bytes takes at least 2^-6 s; it took 2^-5 */
    CHECK_POINT(0x1p32, 0x1p30, 0x1p-5, &ROOF, 4, 0x1p38, 0.5, PROF_MEMORY_BOUND,
                "4 FLOP/B, left of the ridge at 16: the bandwidth line, half as fast as it allows");
    /* an element-wise op: 1 FLOP per 12 bytes, at the bandwidth roof exactly */
    CHECK_POINT(3.0 * 0x1p20, 36.0 * 0x1p20, 36.0 * 0x1p20 / 0x1p36, &ROOF, 1.0 / 12, 0x1p36 / 12, 1,
                PROF_MEMORY_BOUND, "a residual add: 1/12 FLOP/B, on the roof");
}

MPT_TEST(roofline_compute_bound_above_and_at_the_ridge) {
    /* 64 FLOP/B: the roof is the peak; 2^40 FLOPs take at least 1 s; it took 4 */
    CHECK_POINT(0x1p40, 0x1p34, 4, &ROOF, 64, 0x1p40, 0.25, PROF_COMPUTE_BOUND,
                "a large matmul, 64 FLOP/B, right of the ridge: a quarter of the peak");
    /* exactly 16 FLOP/B: both lines give 2^40 */
    CHECK_POINT(0x1p36, 0x1p32, 0x1p-4, &ROOF, 16, 0x1p40, 1, PROF_COMPUTE_BOUND,
                "exactly at the ridge, at the peak: compute-bound (intensity >= ridge)");
    /* just under the ridge */
    CHECK_POINT(15.0 * 0x1p32, 0x1p32, 1, &ROOF, 15, 15 * 0x1p36, 15.0 * 0x1p32 / 0x1p40 > 0x1p32 / 0x1p36
                                                                        ? 15.0 * 0x1p32 / 0x1p40 : 0x1p32 / 0x1p36,
                PROF_MEMORY_BOUND, "15 FLOP/B, one under the ridge: memory-bound");
}

MPT_TEST(roofline_rejects_bad_input) {
    prof_roofline pt;
    char why[256];
    struct { double flops, bytes, secs; prof_roof roof; const char *what; } bad[] = {
        {1, 0, 1, ROOF, "bytes 0"},        {1, 1, 0, ROOF, "seconds 0"},      {-1, 1, 1, ROOF, "negative FLOPs"},
        {1, 1, -2, ROOF, "negative time"}, {NAN, 1, 1, ROOF, "NaN FLOPs"},   {1, INFINITY, 1, ROOF, "infinite bytes"},
        {1, 1, 1, {0, 1}, "a roof of 0 FLOP/s"}, {1, 1, 1, {1, NAN}, "a NaN bandwidth"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = 0;
        bool ok = prof_roofline_point(bad[i].flops, bad[i].bytes, bad[i].secs, &bad[i].roof, &pt, why, sizeof why);
        MPT_CHECK(!ok && why[0], "%s: expected a rejection with a reason, got %s", bad[i].what, ok ? "a point" : "no reason");
    }
    /* and a copy kernel (0 FLOPs) is valid: intensity 0, memory-bound, its fraction from the bytes */
    CHECK_POINT(0, 0x1p30, 0x1p-4, &ROOF, 0, 0, 0.25, PROF_MEMORY_BOUND,
                "a copy: no FLOPs, 2^30 bytes in 2^-4 s against 2^-6 s on the roof");
}
