/* lab23_util.h: helpers for the lab 23 tests: a fake clock the tests set by hand, finding spans, reading a trace. */
#ifndef LAB23_UTIL_H
#define LAB23_UTIL_H

#include "mptest.h"
#include "prof/prof.h"
#include "prof/roofline.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The profiler reads this clock: tests move it, so no result depends on how fast the machine is. Values are
 * multiples of 1/8 s, exact in binary, so sums and differences are exact. */
typedef struct {
    double now;
} fake_clock;
static inline double fake_clock_read(void *ctx) { return ((fake_clock *)ctx)->now; }

/* The finished span called `name` (the k-th of that name, in the order they ended), or NULL. */
static inline const prof_span *lab23_span(const prof *p, const char *name, int k) {
    size_t n;
    const prof_span *s = prof_spans(p, &n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(s[i].name, name) == 0 && k-- == 0) return &s[i];
    return NULL;
}

/* A span's total and self time against the expected values (exact: the clock is in eighths). */
#define CHECK_TIMES(p, name, k, want_total, want_self, why) \
    lab23_check_times(__FILE__, __LINE__, (p), (name), (k), (want_total), (want_self), (why))
static inline bool lab23_check_times(const char *file, int line, const prof *p, const char *name, int k,
                                     double want_total, double want_self, const char *why) {
    const prof_span *s = lab23_span(p, name, k);
    if (!s) {
        mpt_fail(file, line, "no finished span '%s' (#%d) recorded: prof_end must record every span", name, k);
        return false;
    }
    mpt_observe_near(file, line, s->total, 0, 1e-12);
    mpt_observe_near(file, line, s->self, 0, 1e-12);
    if (s->total == want_total && s->self == want_self) return true;
    mpt_fail(file, line,
             "span '%s' from %g s to %g s (%s)\n      expected: total %g s, self %g s\n      got:      total %g s, "
             "self %g s\n      likely mistake: %s",
             name, s->t0, s->t1, why, want_total, want_self, s->total, s->self,
             s->total != want_total ? "total = t1 - t0 of the span itself"
             : s->self == s->total && want_self != want_total
                 ? "self = total - the children's time: each child adds its total to parent->child when it ends"
                 : "self = total - top->child, where child sums the totals of the direct children only (a grandchild "
                   "is already inside its parent's total)");
    return false;
}

/* The whole file as text (NULL if it cannot be read); the caller frees it. */
static inline char *lab23_slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    size_t got = text ? fread(text, 1, (size_t)n, f) : 0;
    if (text) text[got] = 0;
    fclose(f);
    return text;
}

/* A fresh path for a trace under /tmp. */
static inline void lab23_temp_path(char *out, size_t len, const char *what) {
    snprintf(out, len, "/tmp/lab23_%s_%d.json", what, (int)getpid());
}

/* A roofline point checked against the expected values (relative 1e-12) and its bound. */
#define CHECK_POINT(flops, bytes, secs, roof, want_i, want_att, want_frac, want_bound, why) \
    lab23_check_point(__FILE__, __LINE__, (flops), (bytes), (secs), (roof), (want_i), (want_att), (want_frac), \
                      (want_bound), (why))
static inline bool lab23_check_point(const char *file, int line, double flops, double bytes, double secs,
                                     const prof_roof *roof, double want_i, double want_att, double want_frac,
                                     prof_bound want_bound, const char *why) {
    prof_roofline pt;
    char err[256] = "";
    bool ok = prof_roofline_point(flops, bytes, secs, roof, &pt, err, sizeof err);
    if (!ok) {
        mpt_fail(file, line, "prof_roofline_point(%g, %g, %g) rejected valid input: %s", flops, bytes, secs, err);
        return false;
    }
    mpt_observe_near(file, line, pt.intensity, 1e-12, 0);
    mpt_observe_near(file, line, pt.attainable, 1e-12, 0);
    mpt_observe_near(file, line, pt.fraction, 1e-12, 0);
    mpt_observe(file, line, (uint64_t)pt.bound);
    bool near_i = fabs(pt.intensity - want_i) <= 1e-12 * fabs(want_i);
    bool near_a = fabs(pt.attainable - want_att) <= 1e-12 * fabs(want_att);
    bool near_f = fabs(pt.fraction - want_frac) <= 1e-12 * fabs(want_frac);
    bool near_ach = fabs(pt.achieved - flops / secs) <= 1e-12 * (flops / secs);
    if (near_i && near_a && near_f && near_ach && pt.bound == want_bound) return true;
    mpt_fail(file, line,
             "%g FLOPs, %g bytes in %g s on a roof of %g FLOP/s and %g B/s (ridge %g FLOP/B): %s\n"
             "      expected: intensity %.6g, attainable %.6g, fraction %.6g, achieved %.6g, %s\n"
             "      got:      intensity %.6g, attainable %.6g, fraction %.6g, achieved %.6g, %s\n"
             "      likely mistake: %s",
             flops, bytes, secs, roof->peak_flops, roof->bandwidth, roof->peak_flops / roof->bandwidth, why, want_i,
             want_att, want_frac, flops / secs, prof_bound_name(want_bound), pt.intensity, pt.attainable, pt.fraction,
             pt.achieved, prof_bound_name(pt.bound),
             !near_i ? "intensity = flops / bytes (FLOP per byte)"
             : !near_a ? "attainable = min(peak_flops, intensity * bandwidth)"
             : !near_f ? "fraction = max(flops / peak_flops, bytes / bandwidth) / seconds: the roof's shortest time "
                         "over the measured one"
             : !near_ach ? "achieved = flops / seconds"
                         : "compute-bound when intensity >= ridge (peak / bandwidth), memory-bound below it; exactly "
                           "at the ridge the kernel can reach the peak: compute-bound");
    return false;
}

#endif
