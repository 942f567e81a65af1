/* roofline.h: the roofline model (屋顶线模型): a kernel's FLOPs and bytes against the machine's measured peaks (lab 23). */
#ifndef MIXPAR_PROF_ROOFLINE_H
#define MIXPAR_PROF_ROOFLINE_H

/* A kernel that does F FLOPs and moves M bytes has arithmetic intensity (算术强度) I = F / M FLOP/byte. On a
 * machine that can compute P FLOP/s and stream W bytes/s, it cannot run faster than
 *
 *     attainable = min(P, I * W)  FLOP/s          (Williams, Waterman, Patterson 2009)
 *
 * The two lines meet at the ridge point I* = P / W. Left of it (I < I*) the memory system is the limit: the
 * kernel is memory-bound (访存受限) and only moving fewer bytes speeds it up; at or right of it the arithmetic
 * units are: compute-bound (计算受限). A kernel measured in t seconds achieved F / t FLOP/s; its fraction of the
 * roof is how close it came to the fastest the roof allows:
 *
 *     fraction = max(F / P, M / W) / t             (= achieved / attainable when F > 0; defined for F = 0 too)
 *
 * P and W are measured on the machine, in the same run (prof_measure_roof): an sgemm as large as the model's
 * biggest, and a stream-like triad a[i] = b[i] + s * c[i] over arrays far larger than the caches. */

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    double peak_flops; /* P: FLOP/s */
    double bandwidth;  /* W: bytes/s */
} prof_roof;

typedef enum { PROF_MEMORY_BOUND, PROF_COMPUTE_BOUND } prof_bound;

typedef struct {
    double intensity;  /* F / M, FLOP per byte */
    double achieved;   /* F / t, FLOP/s */
    double attainable; /* min(P, I * W), FLOP/s */
    double fraction;   /* max(F / P, M / W) / t: 1 = on the roof */
    prof_bound bound;  /* memory-bound left of the ridge P / W, compute-bound at or right of it */
} prof_roofline;

const char *prof_bound_name(prof_bound b); /* "memory-bound", "compute-bound" */
double prof_ridge_point(const prof_roof *roof); /* P / W */

/* The roofline point of a kernel that did `flops` FLOPs and moved `bytes` bytes in `seconds`. Returns false, with
 * the reason in why[], for input that has no point: flops < 0, bytes <= 0, seconds <= 0, a roof <= 0, anything
 * not finite (out is left zero). */
bool prof_roofline_point(double flops, double bytes, double seconds, const prof_roof *roof, prof_roofline *out,
                         char *why, size_t why_len);

/* The computation behind prof_roofline_point, for inputs already checked. */
void prof_roofline_place(double flops, double bytes, double seconds, const prof_roof *roof, prof_roofline *out);

/* ------------------------------------------------------------------ the machine's roof */

/* The best of a few n x n x n sgemm calls (matmul_sgemm: the model's matmul path, on the OpenMP threads), in
 * FLOP/s. n = 1536 makes each call several GFLOP. */
double prof_measure_gemm_flops(int n);
/* The same measurement on the caller's n x n buffers (a and b read, c written): one warm-up call, then the best of
 * `timed` calls, in FLOP/s. For a caller whose own memory counts must not include the buffers. */
double prof_measure_gemm_flops_on(const float *a, const float *b, float *c, int n, int timed);
/* The best of a few triads a[i] = b[i] + s * c[i] over n floats each, counting 12 bytes per i (two reads, one
 * write), in bytes/s, on the OpenMP threads. */
double prof_measure_triad_bandwidth(long n);
/* Both, with the sizes the profiler uses (about half a second). */
void prof_measure_roof(prof_roof *out);

/* ------------------------------------------------------------------ exposed time */

typedef struct {
    double t0, t1;
} prof_interval;

/* Seconds of the `busy` intervals (communication calls) that no `cover` interval (compute spans) overlaps: the
 * communication a step waits for. Intervals may overlap each other and come in any order; those with t1 <= t0
 * count nothing. The arrays are reordered. */
double prof_exposed_seconds(prof_interval *busy, size_t nbusy, prof_interval *cover, size_t ncover);

#endif
