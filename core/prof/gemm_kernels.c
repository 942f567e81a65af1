/* gemm_kernels.c: what runs the fp32 matmuls (the core's AVX-512 kernel, or OpenBLAS and its kernel set), and whether the environment narrowed it. */
#include "prof/gemm_kernels.h"

#include "ops/gemm_f32.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* OpenBLAS picks its kernels when it loads: the set OPENBLAS_CORETYPE names when that is set, else one that
 * fits the CPU. Some machines pin a set for a whole fleet (this course's build machines set
 * OPENBLAS_CORETYPE=Haswell). On a CPU with AVX-512 that means 256-bit kernels at about half the sgemm rate of
 * OpenBLAS's AVX-512 ones (bench/README.md, "OpenBLAS's kernel set": 181-186 against 333-351 GFLOP/s on 2
 * cores). mixpar leaves the variable as it finds it, since whoever set it may want the same bits on every
 * machine; the benchmarks and the profiler say which set ran, so a figure is never read against the wrong roof.
 * On a CPU with AVX-512 the fp32 products no longer go to OpenBLAS at all: the core's own kernel (ops/gemm_f32.c)
 * runs 512-bit FMAs and gives the same bits on every such machine, so the pin costs nothing there. */

char *openblas_get_corename(void); /* OpenBLAS's own API (not part of CBLAS, so not in every cblas.h) */

/* OpenBLAS's x86-64 kernel sets that use no 512-bit vectors (its SkylakeX and Cooperlake sets do). */
static const char *const narrow_sets[] = {"Haswell",    "Zen",       "Sandybridge", "Excavator", "Steamroller",
                                          "Piledriver", "Bulldozer", "Barcelona",   "Nehalem",   "Penryn",
                                          "Dunnington", "Core2",     "Prescott",    "Atom",      "Nano"};

static bool cpu_runs_avx512_kernels(void) {
    __builtin_cpu_init(); /* __builtin_cpu_supports also checks that the OS saves the AVX-512 state */
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
}

static const char *pinned_set(void) {
    const char *pin = getenv("OPENBLAS_CORETYPE");
    return pin && *pin ? pin : NULL;
}

bool prof_gemm_kernels_pinned_narrow(void) {
    const char *set = openblas_get_corename();
    bool narrow = false;
    for (size_t i = 0; set && i < sizeof narrow_sets / sizeof *narrow_sets; i++)
        if (strcasecmp(set, narrow_sets[i]) == 0) narrow = true;
    return narrow && pinned_set() && cpu_runs_avx512_kernels() && !gemm_f32_available();
}

char *prof_describe_gemm_kernels(char *buf, size_t len) {
    const char *set = openblas_get_corename(), *pin = pinned_set();
    if (!set || !*set) set = "unknown";
    if (gemm_f32_available())
        snprintf(buf, len, "fp32 products: mixpar's AVX-512 kernel, not OpenBLAS (whose kernels here: %s%s%s)", set,
                 pin ? ", pinned by OPENBLAS_CORETYPE=" : ", its choice", pin ? pin : "");
    else if (prof_gemm_kernels_pinned_narrow())
        snprintf(buf, len,
                 "OpenBLAS kernels: %s, pinned by OPENBLAS_CORETYPE=%s; this CPU runs OpenBLAS's AVX-512 kernels "
                 "at about twice the sgemm rate (unset OPENBLAS_CORETYPE to use them)",
                 set, pin);
    else if (pin)
        snprintf(buf, len, "OpenBLAS kernels: %s (OPENBLAS_CORETYPE=%s)", set, pin);
    else
        snprintf(buf, len, "OpenBLAS kernels: %s (OpenBLAS's choice for this CPU)", set);
    return buf;
}
