/* roofline.c: roofline points of kernels, the machine's measured roof, and exposed communication time. */
#include "prof/roofline.h"

#include "base/clock.h"
#include "base/lab.h"
#include "base/mem.h"
#include "ops/matmul.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *prof_bound_name(prof_bound b) { return b == PROF_COMPUTE_BOUND ? "compute-bound" : "memory-bound"; }

double prof_ridge_point(const prof_roof *roof) { return roof->peak_flops / roof->bandwidth; }

void prof_roofline_place(double flops, double bytes, double seconds, const prof_roof *roof, prof_roofline *out) {
    /* LAB 23 BEGIN roofline point: intensity, attainable FLOP/s, fraction of the roof, memory- or compute-bound */
    /* The roof at this intensity is the lower of the two lines; the ridge P / W is where they meet, and a kernel
     * exactly on it reaches the peak, so it counts as compute-bound. The fraction compares the measured time
     * with the shortest the roof allows: the longer of computing F at P and moving M at W. */
    out->intensity = flops / bytes;
    out->achieved = flops / seconds;
    out->attainable = fmin(roof->peak_flops, out->intensity * roof->bandwidth);
    out->fraction = fmax(flops / roof->peak_flops, bytes / roof->bandwidth) / seconds;
    out->bound = out->intensity >= prof_ridge_point(roof) ? PROF_COMPUTE_BOUND : PROF_MEMORY_BOUND;
    /* LAB 23 END */
}

bool prof_roofline_point(double flops, double bytes, double seconds, const prof_roof *roof, prof_roofline *out,
                         char *why, size_t why_len) {
    memset(out, 0, sizeof *out);
    const char *bad = !isfinite(flops) || flops < 0       ? "flops must be a finite number >= 0"
                      : !isfinite(bytes) || !(bytes > 0)   ? "bytes must be a finite number > 0 (every kernel moves data)"
                      : !isfinite(seconds) || !(seconds > 0) ? "seconds must be a finite number > 0"
                      : !roof || !isfinite(roof->peak_flops) || !(roof->peak_flops > 0) ||
                                !isfinite(roof->bandwidth) || !(roof->bandwidth > 0)
                          ? "the roof's peak FLOP/s and bandwidth must be finite and > 0 (measure them)"
                          : NULL;
    if (bad) {
        if (why && why_len)
            snprintf(why, why_len, "%s (got flops %g, bytes %g, seconds %g, peak %g FLOP/s, bandwidth %g B/s)", bad,
                     flops, bytes, seconds, roof ? roof->peak_flops : NAN, roof ? roof->bandwidth : NAN);
        return false;
    }
    prof_roofline_place(flops, bytes, seconds, roof, out);
    return true;
}

/* ------------------------------------------------------------------ the machine's roof */

static float *filled(long n, float value, const char *what) {
    float *p = mem_alloc((size_t)n * sizeof(float), MEM_OTHER, what);
#pragma omp parallel for schedule(static) /* first touch by the threads that will stream it */
    for (long i = 0; i < n; i++) p[i] = value + (float)(i % 7);
    return p;
}

double prof_measure_gemm_flops_on(const float *a, const float *b, float *c, int n, int timed) {
    double best = INFINITY;
    for (int r = 0; r <= timed; r++) { /* the first call warms the caches and the threads: not counted */
        double t0 = mp_now();
        matmul_sgemm(false, true, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double t = mp_now() - t0;
        if (r > 0 && t < best) best = t;
    }
    return 2.0 * n * n * n / best;
}

double prof_measure_gemm_flops(int n) {
    float *a = filled((long)n * n, 0.5f, "peak a"), *b = filled((long)n * n, 0.25f, "peak b");
    float *c = filled((long)n * n, 0.0f, "peak c");
    double flops = prof_measure_gemm_flops_on(a, b, c, n, 3);
    mem_free(a);
    mem_free(b);
    mem_free(c);
    return flops;
}

double prof_measure_triad_bandwidth(long n) {
    float *a = filled(n, 0.0f, "triad a"), *b = filled(n, 1.0f, "triad b"), *c = filled(n, 2.0f, "triad c");
    const float s = 3.0f;
    double best = INFINITY;
    for (int r = 0; r < 6; r++) {
        double t0 = mp_now();
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        double t = mp_now() - t0;
        if (r > 0 && t < best) best = t;
    }
    volatile float keep = a[n / 2]; /* the result is used: the loop cannot be dropped */
    (void)keep;
    mem_free(a);
    mem_free(b);
    mem_free(c);
    return 12.0 * (double)n / best;
}

void prof_measure_roof(prof_roof *out) {
    out->peak_flops = prof_measure_gemm_flops(1536);
    out->bandwidth = prof_measure_triad_bandwidth(8L << 20); /* 3 arrays of 32 MiB */
}

/* ------------------------------------------------------------------ exposed time */

static int by_start(const void *a, const void *b) {
    double x = ((const prof_interval *)a)->t0, y = ((const prof_interval *)b)->t0;
    return (x > y) - (x < y);
}

/* Sorts and merges overlapping intervals in place; returns how many are left. Empty ones are dropped. */
static size_t merge(prof_interval *v, size_t n) {
    if (n == 0) return 0; /* v may be NULL then, which qsort may not be given */
    qsort(v, n, sizeof *v, by_start);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(v[i].t1 > v[i].t0)) continue;
        if (out > 0 && v[i].t0 <= v[out - 1].t1) {
            if (v[i].t1 > v[out - 1].t1) v[out - 1].t1 = v[i].t1;
        } else {
            v[out++] = v[i];
        }
    }
    return out;
}

double prof_exposed_seconds(prof_interval *busy, size_t nbusy, prof_interval *cover, size_t ncover) {
    nbusy = merge(busy, nbusy);
    ncover = merge(cover, ncover);
    double exposed = 0;
    size_t j = 0;
    for (size_t i = 0; i < nbusy; i++) {
        double at = busy[i].t0, end = busy[i].t1;
        while (j < ncover && cover[j].t1 <= at) j++;
        /* walk the cover intervals that reach into [at, end): the gaps between them are exposed */
        for (size_t k = j; k < ncover && cover[k].t0 < end && at < end; k++) {
            if (cover[k].t0 > at) exposed += cover[k].t0 - at;
            if (cover[k].t1 > at) at = cover[k].t1;
        }
        if (at < end) exposed += end - at;
    }
    return exposed;
}
