/* isa.c: the vector instruction level the ops/ kernels run with: detected once, overridable for tests and benchmarks. */
#include "ops/isa.h"

#include "base/error.h"

#include <stdlib.h>
#include <string.h>

static const char *const isa_names[OPS_ISA_COUNT] = {"base", "avx2", "avx512"};

/* -1 until the first call picks a level. Kernels read it from many threads, but it is written only by the
 * first call (made by the kernel before its parallel region) and by ops_isa_force between kernels. */
static int isa_chosen = -1;

const char *ops_isa_name(ops_isa level) { return level >= 0 && level < OPS_ISA_COUNT ? isa_names[level] : "?"; }

bool ops_isa_supported(ops_isa level) {
    switch (level) {
    case OPS_ISA_BASE: return true;
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    /* libgcc's check includes the operating system's consent (XCR0 says it saves the ymm / zmm state). */
    case OPS_ISA_AVX2: return __builtin_cpu_supports("avx2");
    case OPS_ISA_AVX512: return __builtin_cpu_supports("avx512f");
#endif
    default: return false;
    }
}

static ops_isa isa_widest(void) {
    ops_isa best = OPS_ISA_BASE;
    for (int level = OPS_ISA_BASE + 1; level < OPS_ISA_COUNT; level++)
        if (ops_isa_supported((ops_isa)level)) best = (ops_isa)level;
    return best;
}

ops_isa ops_isa_current(void) {
    if (isa_chosen >= 0) return (ops_isa)isa_chosen;
    ops_isa level = isa_widest();
    const char *want = getenv("MIXPAR_OPS_ISA");
    if (want && *want) {
        int asked = -1;
        for (int i = 0; i < OPS_ISA_COUNT; i++)
            if (strcmp(want, isa_names[i]) == 0) asked = i;
        if (asked < 0) MP_FAIL("MIXPAR_OPS_ISA one of base, avx2, avx512", "MIXPAR_OPS_ISA=%s", want);
        if (asked < (int)level) level = (ops_isa)asked; /* narrower only: a level the CPU lacks would crash */
    }
    isa_chosen = (int)level;
    return level;
}

bool ops_isa_force(ops_isa level) {
    if (!ops_isa_supported(level)) return false;
    isa_chosen = (int)level;
    return true;
}
