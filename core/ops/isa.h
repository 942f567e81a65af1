/* isa.h: which vector instructions the ops/ kernels run with (AVX-512, AVX2 or baseline x86-64), chosen once per process from the CPU. */
#ifndef MIXPAR_OPS_ISA_H
#define MIXPAR_OPS_ISA_H

#include <stdbool.h>

/* The build targets baseline x86-64 (SSE2, 4 float lanes), so the binary runs on any x86-64 machine. The
 * exp-heavy kernels (softmax + cross-entropy, attention's softmax, GELU) are bound by arithmetic, not memory,
 * at that width: ops_expf takes ~1.6 ns per element per core in SSE2, ~0.65 in AVX2 and ~0.4 in AVX-512
 * (8 and 16 lanes, and blends instead of and/andnot/or for its selects). Those kernels are therefore compiled
 * once per level below, and each call runs the widest one the CPU (and the operating system, which must save
 * the wider registers) supports.
 *
 * Same results on every level: the wider copies are compiled WITHOUT fused multiply-add contraction
 * (fp-contract=off; the baseline has no FMA instruction, so nothing is contracted there either), so every
 * element of an elementwise kernel (GELU forward) is the same float on every level. Only sums across the
 * lanes of a vector (a softmax denominator) may differ in the last bits, because a loop of 16 lanes adds its
 * terms in another order than a loop of 4, and so may what is computed from them; each level is itself
 * deterministic and independent of the thread count. tests/unit/test_ops_isa.c checks both statements on
 * every level the CPU has. */
typedef enum { OPS_ISA_BASE, OPS_ISA_AVX2, OPS_ISA_AVX512, OPS_ISA_COUNT } ops_isa;

/* The level the kernels use now: the widest the CPU supports, unless ops_isa_force said otherwise or the
 * environment variable MIXPAR_OPS_ISA (base, avx2, avx512) asks for a narrower one at the first call. Below
 * avx512 the fp32 matmuls leave the core's AVX-512 kernel (ops/gemm_f32.h) for OpenBLAS as well. */
ops_isa ops_isa_current(void);
/* Whether this CPU and operating system can run `level`. */
bool ops_isa_supported(ops_isa level);
/* Use `level` from now on (benchmarks and tests compare the levels); false, and nothing changes, when the
 * CPU cannot run it. Not thread-safe: call it between kernels, not during one. */
bool ops_isa_force(ops_isa level);
/* "base", "avx2", "avx512". */
const char *ops_isa_name(ops_isa level);

/* OPS_ISA_CLONES(fn, (params), (args)) defines fn_isa[OPS_ISA_COUNT], a table of three copies of the
 * always-inline function `fn`, one compiled per level; call it as fn_isa[ops_isa_current()](args).
 * `fn` must not open an OpenMP parallel region itself (the region would be compiled for the baseline, whatever
 * the caller's level): the kernels start the region, and each thread calls its level's copy on its share.
 * `#pragma omp simd` loops inside `fn` are vectorised at each copy's width. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OPS_ISA_TARGET_AVX2 __attribute__((target("avx2"), optimize("fp-contract=off")))
#define OPS_ISA_TARGET_AVX512 __attribute__((target("avx512f"), optimize("fp-contract=off")))
#else /* elsewhere every level is the baseline build (ops_isa_supported says no to the others) */
#define OPS_ISA_TARGET_AVX2
#define OPS_ISA_TARGET_AVX512
#endif
/* OPS_ISA_LAB_CLONES, before a function's definition: GCC compiles the whole function, its OpenMP regions included,
 * once per level, and the program's loader picks the copy for the CPU (an ifunc). It is for the lab functions whose
 * bodies students write (lab 02's GELU and cross-entropy backward, linear backward and optimizer updates, lab 05's
 * unscale, lab 21's SwiGLU backward): their code stays a plain loop, and it still runs at the CPU's width (GELU and
 * cross-entropy backward: x4, bench/README.md). The same rule holds: no FMA contraction, so an elementwise loop
 * gives the baseline's bits on every CPU (tests/unit/test_ops_isa.c). Unlike the tables above, MIXPAR_OPS_ISA and
 * ops_isa_force do not narrow it. In a debugger or a perf profile the copy that ran shows as, for example,
 * gelu_backward.avx512f (and its OpenMP region as gelu_backward._omp_fn.0.avx512f); gdb's `break gelu_backward`
 * stops in every copy, and once in its resolver while the program loads (continue past that one). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OPS_ISA_LAB_CLONES __attribute__((target_clones("default", "avx2", "avx512f"), optimize("fp-contract=off")))
#else
#define OPS_ISA_LAB_CLONES
#endif
#define OPS_ISA_INLINE static inline __attribute__((always_inline))
#define OPS_ISA_CLONES(fn, params, args)                                                                       \
    static void fn##_base params { fn args; }                                                                  \
    static OPS_ISA_TARGET_AVX2 void fn##_avx2 params { fn args; }                                              \
    static OPS_ISA_TARGET_AVX512 void fn##_avx512 params { fn args; }                                          \
    static void(*const fn##_isa[OPS_ISA_COUNT]) params = {fn##_base, fn##_avx2, fn##_avx512}
/* The same, for an `fn` whose first parameter is `const ops_isa level`: each copy passes its own level, a
 * constant once `fn` is inlined, so `if (level == OPS_ISA_AVX512)` inside `fn` costs nothing and can pick
 * code written for that width. `params` and `args` leave the level out. */
#define OPS_ISA_ARGS_(...) __VA_ARGS__
#define OPS_ISA_CLONES_LEVEL(fn, params, args)                                                                 \
    static void fn##_base params { fn(OPS_ISA_BASE, OPS_ISA_ARGS_ args); }                                     \
    static OPS_ISA_TARGET_AVX2 void fn##_avx2 params { fn(OPS_ISA_AVX2, OPS_ISA_ARGS_ args); }                 \
    static OPS_ISA_TARGET_AVX512 void fn##_avx512 params { fn(OPS_ISA_AVX512, OPS_ISA_ARGS_ args); }           \
    static void(*const fn##_isa[OPS_ISA_COUNT]) params = {fn##_base, fn##_avx2, fn##_avx512}

#endif
