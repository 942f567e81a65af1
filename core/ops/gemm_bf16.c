/* gemm_bf16.c: bf16 matrix product: pair-interleaved packing, an AMX (TDPBF16PS) tile and an AVX512-BF16 (VDPBF16PS) tile, OpenMP. */
#include "ops/gemm_bf16.h"

#include "base/error.h"
#include "base/mem.h"
#include "ops/parallel.h"
#include "ops/gemm_avx512.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* Two engines multiply bf16 pairs into fp32 on recent x86 CPUs; both treat each 32-bit word as a PAIR of
 * bf16 numbers along k (the summed index), the first in the low half:
 *
 *   VDPBF16PS (AVX512_BF16), a vector instruction: acc[i] += a[2i] * b[2i] + a[2i+1] * b[2i+1] for 16
 *     fp32 lanes, 32 multiply-adds. Its rate depends on the core, and bench/gemm_lowp measures it against
 *     fp32 FMA's on the machine at hand: on Intel Sapphire Rapids one issues every 2 cycles and occupies
 *     both FMA ports, 16 multiply-adds per cycle against fp32's 32, so it can only reach HALF of fp32's
 *     peak there (the tile below ran at ~95% of that instruction rate); on AMD Zen 5 (EPYC, family 26) two
 *     issue per cycle, TWICE fp32 FMA's rate (438 against 218 GFLOP/s per core, bench/README.md).
 *   TDPBF16PS (AMX_BF16, Intel only), a matrix instruction on tile registers (16 rows x 64 bytes): C (16 x 16
 *     fp32) += A (16 rows x 16 pairs) @ B (16 pairs x 16 columns), 8192 multiply-adds per instruction, one
 *     per 16 cycles: ~3.1 TFLOP/s per core on Sapphire Rapids, ~15 times fp32 FMA. This is the CPU's
 *     counterpart of a GPU's tensor core, and the engine used when the CPU and the kernel (Linux >= 5.16
 *     grants the 8 KiB tile state on request) allow it. At that rate GPT-2's products (N = 256 rows) are
 *     bound by memory, not arithmetic: reading the weight and writing the output take about as long as the
 *     tiles (the tile loop alone, on operands in L1, reaches ~90% of the peak; whole products reach 25-35%).
 *
 * Both flush subnormal inputs and outputs to zero and round to nearest even, whatever MXCSR says.
 *
 * In row-major memory the pairs are already in place along a row of a k-contiguous matrix; every other
 * layout is rearranged by the packing below. Only the functions marked GEMM_TARGET are compiled for
 * AVX-512 (the AMX instructions are inline assembly), so the rest of the build keeps generic flags, and
 * nothing here runs unless the CPU check said so. */
#define GEMM_TARGET __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl")))
#define GEMM_INLINE __attribute__((always_inline)) inline

/* Blocking, AVX512-BF16 engine (all in 32-bit words = one bf16 pair of k):
 *   MR x NR    the register tile: 8 rows of C x 48 columns = 8 x 3 accumulators of 16 lanes (24 of the 32
 *              zmm registers), 3 registers for a row of B and one broadcast of A. Per k-pair step it
 *              loads 3 vectors and 8 scalars and runs 24 VDPBF16PS; 24 independent sums hide the
 *              instruction's 8-cycle latency. 8 and 48 divide every GPT-2 shape (N = 256, C = 768,
 *              OC = 2304, 3072, 50304), so no tile is ragged there.
 *   KC2        pairs of k per block: an A micro-panel (MR x KC2 words, 12 KiB) stays in L1 while it meets
 *              every B micro-panel of the block; 384 pairs = 768 channels, so GPT-2's C = 768 is one block
 *              and C is written once. A k-contiguous A of even K (the forward's input, dinp's dout) is
 *              that micro-panel already, 8 rows of pairs: the tile broadcasts its pairs in place, and
 *              only B and a transposed A are packed.
 *   NC         columns per packed B block: NC x KC2 words = 576 KiB stays in the 2 MiB L2 while all the
 *              row tiles stream past it. The AVX512-BF16 engine takes half as many (NC_SHARING_L2, 288 KiB)
 *              when the product has several k blocks and A is not packed again for each column block: each
 *              k block after the first reads and writes the thread's strip of C, and on a 1 MiB L2 (AMD Zen 5)
 *              the full block, that strip and A do not fit together (GPT-2's dinp and its MLP projection:
 *              +5-10%). Where A is packed per column block (a weight gradient over many tokens) the narrower
 *              block would pack A twice as often, and the full one stays. There, a product with fewer than
 *              KC2 pairs of k (a weight gradient over 256 tokens: 128 pairs) fills the block's NC x KC2 words
 *              with more columns: GPT-2's 768 columns of C make one block, and A is packed once, not once per
 *              384 columns (the lm head's weight gradient: +5%).
 * AMX engine: a block of C is 2 x 2 tiles (32 x 32), from 2 A tiles and 2 B tiles: the 8 tile registers.
 * k advances 16 pairs (one tile depth) at a time; KC2 and NC are shared with the other engine (k blocks
 * of 128 or 256 pairs, which keep an A block and a B panel in L1 together, measured no faster). */
enum { MR = GEMM_MR, NR = GEMM_NR, NV = GEMM_NV, KC2 = 384, NC = 8 * NR, NC_SHARING_L2 = 4 * NR };
enum { AMX_MR = 32, AMX_NR = 32, AMX_KT = 16, AMX_KC2 = KC2 };
/* A panels the AVX512-BF16 engine packs together when it packs A itself (they fill the area of an AMX A block) */
enum { A_PANELS_AT_ONCE = AMX_MR / MR };

/* ------------------------------------------------------------------ CPU check */

/* AMX needs the operating system's consent: the tile data is 8 KiB of extra state per thread, which
 * Linux saves only for processes that ask (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA). The
 * permission is for the whole process, OpenMP threads included. */
static bool amx_usable(void) {
#if defined(__linux__) && defined(__x86_64__)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16")) return false;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}

static int best_engine = -1, engine_in_use = -1; /* benign races: every thread computes the same answer */

gemm_bf16_engine gemm_bf16_best(void) {
    if (best_engine < 0) {
        __builtin_cpu_init();
        /* __builtin_cpu_supports also checks that the OS saves the AVX-512 state (XCR0). The AMX engine
         * uses AVX-512 for packing, so it needs everything the other one does. */
        const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
        best_engine = !avx512 ? GEMM_BF16_NONE : amx_usable() ? GEMM_BF16_AMX : GEMM_BF16_AVX512;
    }
    return (gemm_bf16_engine)best_engine;
}

gemm_bf16_engine gemm_bf16_engine_now(void) {
    if (engine_in_use < 0) engine_in_use = gemm_bf16_best();
    return (gemm_bf16_engine)engine_in_use;
}

gemm_bf16_engine gemm_bf16_use(gemm_bf16_engine engine) {
    const gemm_bf16_engine best = gemm_bf16_best();
    engine_in_use = engine < best ? engine : best;
    return (gemm_bf16_engine)engine_in_use;
}

const char *gemm_bf16_engine_name(gemm_bf16_engine engine) {
    static const char *names[] = {[GEMM_BF16_NONE] = "none", [GEMM_BF16_AVX512] = "avx512-bf16",
                                  [GEMM_BF16_AMX] = "amx-bf16"};
    return engine >= GEMM_BF16_NONE && engine <= GEMM_BF16_AMX ? names[engine] : "?";
}

bool gemm_bf16_available(void) { return gemm_bf16_engine_now() != GEMM_BF16_NONE; }

/* ------------------------------------------------------------------ packing
 *
 * A packed panel is W columns wide (W = MR for A, NR for B) and kp pairs deep, stored pair by pair:
 * word [p * W + l] = (x[2p], x[2p+1]) of line l of the panel (a row of A, a column of B), the first
 * element in the low half as VDPBF16PS expects. Lines past the matrix edge and the missing partner of
 * an odd K are zeros, so the tile never needs a ragged loop over k, and zeros add nothing.
 *
 * Two source layouts reach a panel:
 *   k-contiguous: line l is a row of memory, src[(x0 + l) * ld + k] (A not transposed, B transposed).
 *     Each 32-bit word is already a pair; the panel is a transpose of 32-bit words, 16 x 16 at a time.
 *   x-contiguous: k is the row, src[k * ld + x0 + l] (A transposed, B not transposed). A pair comes from
 *     two rows, so rows 2p and 2p+1 are interleaved 16-bit element by element. */

/* `panels` panels of W lines each (panel q holds lines q * W .., xn of all the lines real, the rest zero) from a
 * k-contiguous source, pairs p0 .. p0+kp; panel q is written at dst + q * panel_words. 16 lines are
 * transposed at a time, so W = 8 panels go in twos: one transpose of 8 real rows would be half zeros. */
GEMM_TARGET static void pack_k_contiguous(uint32_t *dst, size_t panel_words, int panels, const uint16_t *src, int ld,
                                          int x0, int xn, int p0, int kp, int K, int W) {
    const int width = panels * W; /* lines, real or not: a multiple of 16, or W = 8 */
    for (int l0 = 0; l0 < width; l0 += 16) {
        const int lines = xn - l0 < 0 ? 0 : xn - l0 > 16 ? 16 : xn - l0;
        uint32_t *panel = dst + (size_t)(l0 / W) * panel_words + l0 % W;
        const bool two_panels = W < 16 && l0 + W < width; /* W = 8: lines 8..15 are the next panel's */
        for (int p = 0; p < kp; p += 16) {
            const int pairs = kp - p < 16 ? kp - p : 16;
            const int k = 2 * (p0 + p), elements = K - k < 32 ? K - k : 32;
            /* A masked load reads only `elements` bf16 values: the row's end is never overrun, and the
             * partner of an odd last element loads as zero. */
            const __mmask32 mask = elements >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << elements) - 1);
            __m512i r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) {
                const uint16_t *row = src + (size_t)(x0 + l0 + i) * ld + k;
                /* 16 rows walked side by side are more streams than the hardware prefetcher follows
                 * well: ask for each row's line 4 steps (256 bytes) ahead (a hint: never faults) */
                _mm_prefetch((const char *)(row + 128), _MM_HINT_T0);
                r[i] = i < lines ? _mm512_maskz_loadu_epi16(mask, row) : _mm512_setzero_si512();
            }
            transpose_16x16(r);
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                if (j < pairs) {
                    uint32_t *word = panel + (size_t)(p + j) * W;
                    if (W >= 16) _mm512_storeu_si512(word, r[j]);
                    else {
                        _mm256_storeu_si256((__m256i *)word, _mm512_castsi512_si256(r[j]));
                        if (two_panels) _mm256_storeu_si256((__m256i *)(word + panel_words), _mm512_extracti64x4_epi64(r[j], 1));
                    }
                }
        }
    }
}

/* `panels` panels of W lines each, side by side in the source (panel q holds lines q * W .. q * W + W - 1,
 * xn of all the lines real), from an x-contiguous source (row k of memory holds element k of every line);
 * panel q is written at dst + q * panel_words. All the panels are packed in one pass over the rows: each
 * row's cache lines are read once and used whole. (One narrow panel at a time reads 16 bytes of each line,
 * and rows a multiple of 512 bytes apart (GPT-2's 2304 bf16 = 9 x 512) all fall in 8 of L1's 64 sets, so the
 * lines are gone from L1 before the next panel needs the rest: packing an x-contiguous A took 10% of a weight
 * gradient's time.) */
GEMM_TARGET static void pack_x_contiguous(uint32_t *dst, size_t panel_words, int panels, const uint16_t *src, int ld,
                                          int x0, int xn, int p0, int kp, int K, int W) {
    /* word i of a result = (row0[l], row1[l]) for line l = i (the first 16 lines) or 16 + i (the next 16):
     * indices into the 64 elements of the two rows' 32 */
    static const uint16_t interleave[2][32] = {
        {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39, 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47},
        {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
         24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63}};
    const __m512i first_16 = _mm512_loadu_si512(interleave[0]), next_16 = _mm512_loadu_si512(interleave[1]);
    const int width = panels * W; /* lines, real or not: a multiple of 16, or W = 8 */
    for (int p = 0; p < kp; p++) {
        const int k = 2 * (p0 + p);
        const uint16_t *row0 = src + (size_t)k * ld + x0;
        const uint16_t *row1 = k + 1 < K ? row0 + ld : NULL; /* odd K: the last pair's partner is zero */
        /* Consecutive pairs are rows ld elements apart, a stride the hardware prefetcher does not follow across
         * pages: ask for the pair 8 ahead, every line of it (a hint: never faults, even past the end). */
        for (int l = 0; l < width; l += 32) {
            _mm_prefetch((const char *)(row0 + (size_t)16 * ld + l), _MM_HINT_T0);
            _mm_prefetch((const char *)(row0 + (size_t)17 * ld + l), _MM_HINT_T0);
        }
        _mm_prefetch((const char *)(row0 + (size_t)16 * ld + width - 1), _MM_HINT_T0);
        _mm_prefetch((const char *)(row0 + (size_t)17 * ld + width - 1), _MM_HINT_T0);
        for (int l0 = 0; l0 < width; l0 += 32) { /* 32 lines: 64 bytes of each row */
            const int lines = xn - l0 < 0 ? 0 : xn - l0 > 32 ? 32 : xn - l0;
            const __mmask32 mask = lines >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << lines) - 1);
            const __m512i a = _mm512_maskz_loadu_epi16(mask, row0 + l0);
            const __m512i b = row1 ? _mm512_maskz_loadu_epi16(mask, row1 + l0) : _mm512_setzero_si512();
            for (int h = 0; h < 2 && l0 + 16 * h < width; h++) {
                const __m512i words = _mm512_permutex2var_epi16(a, h ? next_16 : first_16, b);
                const int line = l0 + 16 * h;
                uint32_t *panel_row = dst + (size_t)(line / W) * panel_words + (size_t)p * W;
                if (W >= 16) _mm512_storeu_si512(panel_row + line % W, words); /* 16 lines of one panel */
                else { /* W = 8: 8 lines of each of two panels */
                    _mm256_storeu_si256((__m256i *)panel_row, _mm512_castsi512_si256(words));
                    if (line + 8 < width)
                        _mm256_storeu_si256((__m256i *)(panel_row + panel_words), _mm512_extracti64x4_epi64(words, 1));
                }
            }
        }
    }
}

/* `panels` panels of W lines (xn of all the lines real, the rest zero), lines x0 .., pairs p0 .. p0+kp;
 * panel q at dst + q * panel_words. */
GEMM_TARGET static void pack_panels(uint32_t *dst, size_t panel_words, int panels, const uint16_t *src, int ld,
                                    bool k_contiguous, int x0, int xn, int p0, int kp, int K, int W) {
    if (k_contiguous) pack_k_contiguous(dst, panel_words, panels, src, ld, x0, xn, p0, kp, K, W);
    else pack_x_contiguous(dst, panel_words, panels, src, ld, x0, xn, p0, kp, K, W);
}

/* ------------------------------------------------------------------ the AVX512-BF16 register tile */

/* C tile (mr x nr, mr <= MR, nr <= NR) at c (row stride ldc) from kp pairs of A and a packed B micro-panel
 * (word [p * NR + l]). A's pair p of row r is the 32-bit word at byte a + r * a_row + p * a_step: a packed
 * micro-panel (word [p * MR + r]: a_row 4, a_step 4 * MR) or A itself when it is k-contiguous (a_row its
 * row stride in bytes, a_step 4): the broadcast loads any address, so such an A needs no packing. `first`:
 * the first k block, where the tile starts from 0 (or C when accumulating) plus the bias; later blocks add
 * to C. Inlined with a constant mr so the row loop unrolls and the 8 x 3 accumulators live in registers. */
GEMM_TARGET static GEMM_INLINE void tile(const int mr, int kp, const char *a, const size_t a_row, const size_t a_step,
                                         const uint32_t *b, float *c, size_t ldc, int nr, bool first, bool accumulate,
                                         const float *bias) {
    __m512 acc[MR][NV];
    gemm_tile_start(mr, acc, c, ldc, first);
    for (int p = 0; p < kp; p++) {
        const __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 16),
                       b2 = (__m512bh)_mm512_load_si512(b + 32);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            int pair; /* (A[r][2p], A[r][2p+1]) */
            memcpy(&pair, a + r * a_row, sizeof pair);
            const __m512bh ar = (__m512bh)_mm512_set1_epi32(pair);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
            acc[r][2] = _mm512_dpbf16_ps(acc[r][2], ar, b2);
        }
        a += a_step;
        b += NR;
    }
    gemm_tile_store(mr, acc, c, ldc, nr, first, accumulate, bias);
}

/* The tile for A packed (a_row 4, a_step 4 * MR) and for A read in place (rows a_row bytes apart, a_step 4), one
 * unrolled copy per row count. */
GEMM_TARGET static void tile_packed_a(int mr, int kp, const uint32_t *a, const uint32_t *b, float *c, size_t ldc,
                                      int nr, bool first, bool accumulate, const float *bias) {
    const char *pairs = (const char *)a;
#define PACKED_A(rows) tile(rows, kp, pairs, 4, 4 * MR, b, c, ldc, nr, first, accumulate, bias)
    GEMM_BY_ROWS(mr, PACKED_A)
#undef PACKED_A
}

GEMM_TARGET static void tile_direct_a(int mr, int kp, const uint16_t *a, size_t a_row, const uint32_t *b, float *c,
                                      size_t ldc, int nr, bool first, bool accumulate, const float *bias) {
    const char *pairs = (const char *)a;
#define DIRECT_A(rows) tile(rows, kp, pairs, a_row, 4, b, c, ldc, nr, first, accumulate, bias)
    GEMM_BY_ROWS(mr, DIRECT_A)
#undef DIRECT_A
}

/* ------------------------------------------------------------------ the AMX tiles
 *
 * Layouts the tile loads read (a tile load takes 16 rows of 64 bytes, rows `stride` bytes apart):
 *   A: row m of C's block, 16 pairs of k per tile: row-major pairs, m by m. A k-contiguous A is that
 *      already; an x-contiguous A is interleaved like a B panel, then transposed 16 x 16.
 *   B: pair row p, 16 columns per tile: exactly a packed B panel (word [p * W + l]) with W = AMX_NR.
 * Both are padded with zero pairs to a multiple of AMX_KT, so every tile is full depth. */

/* The tile instructions as inline assembly. Unlike GCC 12's _tile_loadd, the loads say they read
 * memory ("memory" clobber), so the compiler cannot move the packing stores they depend on past them. */
#define TILE_LOAD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"((long)(stride)) : "memory")
#define TILE_STORE(t, base, stride) \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"((long)(stride)) : "memory")
#define TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
#define TILE_DPBF16PS(c, a, b) __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::) /* c += a @ b */

/* Palette 1 with all 8 tiles 16 rows x 64 bytes. The configuration is per thread, so every OpenMP thread
 * loads it before its first tile instruction and releases the tiles (back to the small XSAVE state)
 * when done. */
typedef struct __attribute__((packed, aligned(64))) {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} amx_config;

static void amx_start(void) {
    amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.bytes_per_row[t] = 64, cfg.rows[t] = 16;
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg) : "memory");
}

static void amx_stop(void) { __asm__ volatile("tilerelease" ::: "memory"); }

/* A block for AMX: rows m0 .. m0+mn (mn <= 32; rows past mn are zero), pairs p0 .. p0+kp, padded with zero
 * pairs to kp_pad (a multiple of 16), into dst with rows dst_ld words apart. */
GEMM_TARGET static void amx_pack_a(uint32_t *dst, int dst_ld, const uint16_t *src, int ld, bool k_contiguous, int m0,
                                   int mn, int p0, int kp, int kp_pad, int K) {
    if (k_contiguous) { /* a copy of each row's pairs, zero-filled past K (masked loads never overrun) */
        const int elements = K - 2 * p0 < 2 * kp ? K - 2 * p0 : 2 * kp;
        for (int r = 0; r < AMX_MR; r++) {
            uint32_t *d = dst + (size_t)r * dst_ld;
            const uint16_t *row = src + (size_t)(m0 + r) * ld + 2 * p0;
            for (int e = 0; e < 2 * kp_pad; e += 32) {
                const int count = r >= mn || elements - e <= 0 ? 0 : elements - e >= 32 ? 32 : elements - e;
                const __mmask32 mask = count >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << count) - 1);
                _mm512_storeu_si512(d + e / 2, count ? _mm512_maskz_loadu_epi16(mask, row + e) : _mm512_setzero_si512());
            }
        }
        return;
    }
    /* x-contiguous: 16 rows x 16 pairs at a time, interleaved as a W = 16 panel (word [p * 16 + l]), then
     * transposed so that each row's 16 pairs are contiguous */
    __attribute__((aligned(64))) uint32_t panel[16 * 16];
    for (int h = 0; h < AMX_MR; h += 16) {
        const int rows = mn - h <= 0 ? 0 : mn - h >= 16 ? 16 : mn - h;
        for (int pc = 0; pc < kp_pad; pc += 16) {
            const int pairs = kp - pc <= 0 ? 0 : kp - pc >= 16 ? 16 : kp - pc;
            if (rows > 0 && pairs > 0) pack_x_contiguous(panel, 0, 1, src, ld, m0 + h, rows, p0 + pc, pairs, K, 16);
            __m512i r[16];
#pragma GCC unroll 16
            for (int p = 0; p < 16; p++) r[p] = p < pairs && rows > 0 ? _mm512_load_si512(panel + 16 * p) : _mm512_setzero_si512();
            transpose_16x16(r);
#pragma GCC unroll 16
            for (int l = 0; l < 16; l++) _mm512_storeu_si512(dst + (size_t)(h + l) * dst_ld + pc, r[l]);
        }
    }
}

/* C block (mr x nr, at most 32 x 32) at c from an A block (2 tiles of 16 rows, rows a_stride bytes apart)
 * and a B panel (AMX_NR columns, ktiles x 16 pair rows). Full blocks move between C and the tiles
 * directly (the bias of the first k block comes in as a tile load with stride 0: 16 copies of one row);
 * edge blocks go through a 32 x 32 staging block with masked loads and stores. */
GEMM_TARGET static void amx_block(const uint32_t *a, size_t a_stride, const uint32_t *b, int ktiles, float *c,
                                  size_t ldc, int mr, int nr, bool first, bool accumulate, const float *bias,
                                  float *stage) {
    const bool add_c = !first || accumulate, add_bias = first && bias;
    const bool direct = mr == AMX_MR && nr == AMX_NR && !(add_c && add_bias);
    const size_t c_stride = ldc * sizeof(float);
    if (direct) {
        if (add_c) {
            TILE_LOAD(0, c, c_stride);
            TILE_LOAD(1, c + 16, c_stride);
            TILE_LOAD(2, c + 16 * ldc, c_stride);
            TILE_LOAD(3, c + 16 * ldc + 16, c_stride);
        } else if (add_bias) {
            TILE_LOAD(0, bias, 0);
            TILE_LOAD(1, bias + 16, 0);
            TILE_LOAD(2, bias, 0);
            TILE_LOAD(3, bias + 16, 0);
        } else {
            TILE_ZERO(0);
            TILE_ZERO(1);
            TILE_ZERO(2);
            TILE_ZERO(3);
        }
    } else {
        for (int r = 0; r < AMX_MR; r++)
            for (int v = 0; v < 2; v++) {
                const int cols = r >= mr ? 0 : nr - 16 * v >= 16 ? 16 : nr - 16 * v > 0 ? nr - 16 * v : 0;
                const __mmask16 mask = (__mmask16)((1u << cols) - 1);
                __m512 x = _mm512_setzero_ps();
                if (add_c) x = _mm512_maskz_loadu_ps(mask, c + (size_t)r * ldc + 16 * v);
                if (add_bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask, bias + 16 * v));
                _mm512_store_ps(stage + r * AMX_NR + 16 * v, x);
            }
        TILE_LOAD(0, stage, AMX_NR * 4);
        TILE_LOAD(1, stage + 16, AMX_NR * 4);
        TILE_LOAD(2, stage + 16 * AMX_NR, AMX_NR * 4);
        TILE_LOAD(3, stage + 16 * AMX_NR + 16, AMX_NR * 4);
    }
    const char *a_rows = (const char *)a;
    for (int t = 0; t < ktiles; t++) {
        TILE_LOAD(4, a_rows + (size_t)t * 64, a_stride);                /* rows 0..15, pairs 16t.. */
        TILE_LOAD(5, a_rows + 16 * a_stride + (size_t)t * 64, a_stride); /* rows 16..31 */
        TILE_LOAD(6, b + (size_t)t * AMX_KT * AMX_NR, AMX_NR * 4);      /* columns 0..15 */
        TILE_LOAD(7, b + (size_t)t * AMX_KT * AMX_NR + 16, AMX_NR * 4); /* columns 16..31 */
        TILE_DPBF16PS(0, 4, 6);
        TILE_DPBF16PS(1, 4, 7);
        TILE_DPBF16PS(2, 5, 6);
        TILE_DPBF16PS(3, 5, 7);
    }
    if (direct) {
        TILE_STORE(0, c, c_stride);
        TILE_STORE(1, c + 16, c_stride);
        TILE_STORE(2, c + 16 * ldc, c_stride);
        TILE_STORE(3, c + 16 * ldc + 16, c_stride);
        return;
    }
    TILE_STORE(0, stage, AMX_NR * 4);
    TILE_STORE(1, stage + 16, AMX_NR * 4);
    TILE_STORE(2, stage + 16 * AMX_NR, AMX_NR * 4);
    TILE_STORE(3, stage + 16 * AMX_NR + 16, AMX_NR * 4);
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < 2 && nr - 16 * v > 0; v++) {
            const int cols = nr - 16 * v >= 16 ? 16 : nr - 16 * v;
            _mm512_mask_storeu_ps(c + (size_t)r * ldc + 16 * v, (__mmask16)((1u << cols) - 1),
                                  _mm512_load_ps(stage + r * AMX_NR + 16 * v));
        }
}

/* ------------------------------------------------------------------ buffers */

/* Grow-only packing buffers, kept between calls (a training step makes the same calls every time):
 * the shared packed A (all rows, when the threads split the columns) and one area per thread for its
 * packed B block, its A block and (AMX) a staging block for ragged edges of C. */
static uint32_t *packed_a_shared, *packed_per_thread;
static size_t packed_a_shared_words, packed_per_thread_words;

/* per thread: the B block and an A block of the larger engine, then the staging block; a multiple of 16
 * words, so every area starts 64-byte aligned */
enum { THREAD_WORDS = NC * KC2 + AMX_MR * KC2 + AMX_MR * AMX_NR };

static uint32_t *grow(uint32_t **buf, size_t *have, size_t words, const char *what) {
    if (*have < words) {
        mem_free(*buf);
        *buf = mem_alloc(words * sizeof(uint32_t), MEM_OTHER, what);
        *have = words;
    }
    return *buf;
}

/* ------------------------------------------------------------------ the product */

typedef struct {
    bool trans_a, trans_b;
    int M, N, K, K2; /* K2 = pairs of k, the last one half zero when K is odd */
    int K2_amx;      /* K2 rounded up to whole AMX tiles */
    const uint16_t *A, *B;
    int lda, ldb;
    const float *bias;
    bool accumulate;
    float *C;
    int ldc;
    const uint32_t *a_packed; /* all of A packed (row block s at s * a_block_words), or NULL: per block */
    bool a_direct;            /* the AVX512-BF16 tile reads A in place (k-contiguous, even K): no packing */
    int nc;                   /* the AVX512-BF16 engine's columns per B block: NC, NC_SHARING_L2, or more for a short k */
    size_t a_block_words;
} gemm_job;

static inline int min_int(int a, int b) { return a < b ? a : b; }

/* One thread's rectangle of C: rows [m_lo, m_hi) (m_lo a multiple of MR), columns [n_lo, n_hi). Loops in
 * the classic order: column block, k block (pack B once), row tile (A from L1), column tile (B from L2). */
GEMM_TARGET static void rectangle_avx512(const gemm_job *g, int m_lo, int m_hi, int n_lo, int n_hi, uint32_t *area) {
    uint32_t *b_block = area, *a_panels = area + (size_t)NC * KC2;
    for (int jc = n_lo; jc < n_hi; jc += g->nc) {
        const int nc = min_int(g->nc, n_hi - jc);
        for (int pc = 0; pc < g->K2; pc += KC2) {
            const int kc2 = min_int(KC2, g->K2 - pc);
            pack_panels(b_block, (size_t)NR * kc2, (nc + NR - 1) / NR, g->B, g->ldb, g->trans_b, jc, nc, pc, kc2, g->K,
                        NR);
            for (int ir = m_lo; ir < m_hi; ir += MR) {
                const int mr = min_int(MR, m_hi - ir);
                float *c_row = g->C + (size_t)ir * g->ldc + jc;
                if (g->a_direct) {
                    const uint16_t *a = g->A + (size_t)ir * g->lda + 2 * (size_t)pc;
                    for (int jr = 0; jr < nc; jr += NR)
                        tile_direct_a(mr, kc2, a, (size_t)g->lda * sizeof(uint16_t), b_block + (size_t)jr * kc2,
                                      c_row + jr, (size_t)g->ldc, min_int(NR, nc - jr), pc == 0, g->accumulate,
                                      g->bias ? g->bias + jc + jr : NULL);
                    continue;
                }
                const uint32_t *a;
                if (g->a_packed) a = g->a_packed + (size_t)(ir / MR) * g->a_block_words + (size_t)pc * MR;
                else {
                    /* A_PANELS_AT_ONCE panels packed together: an x-contiguous A is then read in whole cache
                     * lines (32 rows of C = 64 bytes of each row of memory) */
                    const int slot = (ir - m_lo) / MR % A_PANELS_AT_ONCE;
                    if (slot == 0) {
                        const int rows = min_int(A_PANELS_AT_ONCE * MR, m_hi - ir);
                        pack_panels(a_panels, (size_t)MR * kc2, (rows + MR - 1) / MR, g->A, g->lda, !g->trans_a, ir,
                                    rows, pc, kc2, g->K, MR);
                    }
                    a = a_panels + (size_t)slot * MR * kc2;
                }
                for (int jr = 0; jr < nc; jr += NR)
                    tile_packed_a(mr, kc2, a, b_block + (size_t)jr * kc2, c_row + jr, (size_t)g->ldc,
                                  min_int(NR, nc - jr), pc == 0, g->accumulate, g->bias ? g->bias + jc + jr : NULL);
            }
        }
    }
}

/* The same loops for AMX: 32 x 32 blocks of C, k blocks padded to whole tiles. */
GEMM_TARGET static void rectangle_amx(const gemm_job *g, int m_lo, int m_hi, int n_lo, int n_hi, uint32_t *area) {
    uint32_t *b_block = area, *a_block = area + (size_t)NC * KC2;
    float *stage = (float *)(a_block + (size_t)AMX_MR * KC2);
    for (int jc = n_lo; jc < n_hi; jc += NC) {
        const int nc = min_int(NC, n_hi - jc);
        for (int pc = 0; pc < g->K2; pc += AMX_KC2) {
            const int kc2 = min_int(AMX_KC2, g->K2 - pc), kc2_pad = (kc2 + AMX_KT - 1) / AMX_KT * AMX_KT;
            for (int jr = 0; jr < nc; jr += AMX_NR) {
                uint32_t *panel = b_block + (size_t)jr * kc2_pad;
                pack_panels(panel, 0, 1, g->B, g->ldb, g->trans_b, jc + jr, min_int(AMX_NR, nc - jr), pc, kc2, g->K, AMX_NR);
                memset(panel + (size_t)kc2 * AMX_NR, 0, (size_t)(kc2_pad - kc2) * AMX_NR * sizeof(uint32_t));
            }
            for (int ir = m_lo; ir < m_hi; ir += AMX_MR) {
                const int mr = min_int(AMX_MR, m_hi - ir);
                const uint32_t *a = a_block;
                size_t a_stride = (size_t)kc2_pad * sizeof(uint32_t);
                if (g->a_packed) {
                    a = g->a_packed + (size_t)(ir / AMX_MR) * g->a_block_words + pc;
                    a_stride = (size_t)g->K2_amx * sizeof(uint32_t);
                } else amx_pack_a(a_block, kc2_pad, g->A, g->lda, !g->trans_a, ir, mr, pc, kc2, kc2_pad, g->K);
                float *c_row = g->C + (size_t)ir * g->ldc + jc;
                for (int jr = 0; jr < nc; jr += AMX_NR)
                    amx_block(a, a_stride, b_block + (size_t)jr * kc2_pad, kc2_pad / AMX_KT, c_row + jr, (size_t)g->ldc,
                              mr, min_int(AMX_NR, nc - jr), pc == 0, g->accumulate, g->bias ? g->bias + jc + jr : NULL,
                              stage);
            }
        }
    }
}

/* Group s of A's row blocks, packed whole (all k) for the engine: one block of 32 rows of tile-padded pairs
 * for AMX, or A_PANELS_AT_ONCE blocks of MR rows interleaved for VDPBF16PS (packed together, as in
 * rectangle_avx512). Block b lies at b * a_block_words. */
GEMM_TARGET static void pack_a_group(const gemm_job *g, bool amx, int s) {
    if (amx) {
        const int m0 = s * AMX_MR;
        amx_pack_a((uint32_t *)g->a_packed + (size_t)s * g->a_block_words, g->K2_amx, g->A, g->lda, !g->trans_a, m0,
                   min_int(AMX_MR, g->M - m0), 0, g->K2, g->K2_amx, g->K);
    } else {
        const int m0 = s * A_PANELS_AT_ONCE * MR, rows = min_int(A_PANELS_AT_ONCE * MR, g->M - m0);
        pack_panels((uint32_t *)g->a_packed + (size_t)s * A_PANELS_AT_ONCE * g->a_block_words, g->a_block_words,
                    (rows + MR - 1) / MR, g->A, g->lda, !g->trans_a, m0, rows, 0, g->K2, g->K, MR);
    }
}

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
               int ldb, const float *bias, bool accumulate, float *C, int ldc) {
    MP_ASSERT(M >= 0 && N >= 0 && K >= 0, "gemm_bf16 dims must be >= 0: M=%d N=%d K=%d", M, N, K);
    MP_ASSERT(gemm_bf16_available(), "gemm_bf16 called on a CPU without AVX512_BF16");
    if (M == 0 || N == 0) return;
    if (K == 0) { /* an empty sum: only the base and the bias are left */
        gemm_empty_sum(M, N, bias, accumulate, C, ldc);
        return;
    }
    const bool amx = gemm_bf16_engine_now() == GEMM_BF16_AMX;
    const int row_unit = amx ? AMX_MR : MR, col_unit = amx ? AMX_NR : NR;
    gemm_job g = {.trans_a = trans_a, .trans_b = trans_b, .M = M, .N = N, .K = K, .K2 = (K + 1) / 2, .A = A,
                  .B = B, .lda = lda, .ldb = ldb, .bias = bias, .accumulate = accumulate, .C = C, .ldc = ldc};
    g.K2_amx = (g.K2 + AMX_KT - 1) / AMX_KT * AMX_KT;
    g.a_block_words = amx ? (size_t)AMX_MR * g.K2_amx : (size_t)MR * g.K2;
    /* Split the wider side of C over the threads, as matmul_sgemm does. When the rows are split each thread
     * packs its own A blocks as it reaches them. When the columns are split every thread needs every row of
     * A: if a thread's columns make more than one B block, A is packed once, all threads together, instead of
     * once per thread and column block; if they make one block, each thread packs A once anyway, and packs it
     * as it goes, with no barrier, each group of panels just before its tiles read it (GPT-2's attn proj
     * weight gradient, 768 x 768 x 256: +4-10%). */
    const bool split_columns = N >= M;
    /* one thread below ~0.5 MFLOP, where starting threads costs more than it saves */
    const int threads = (double)M * N * K >= (1 << 18) ? omp_get_max_threads() : 1;
    const int row_blocks = (M + row_unit - 1) / row_unit;
    const int a_groups = amx ? row_blocks : (row_blocks + A_PANELS_AT_ONCE - 1) / A_PANELS_AT_ONCE;
    /* A k-contiguous A of even K is read in place by the AVX512-BF16 tile: its pairs are 32-bit words already
     * (an odd K would make the last pair's partner the next row's first element) */
    g.a_direct = !amx && !trans_a && K % 2 == 0;
    const int block_columns = g.K2 < KC2 ? NC * KC2 / g.K2 / NR * NR : NC; /* a short k's block: more columns */
    const int thread_columns = ((N + col_unit - 1) / col_unit + threads - 1) / threads * col_unit;
    if (split_columns && !g.a_direct && (amx || thread_columns > block_columns))
        g.a_packed = grow(&packed_a_shared, &packed_a_shared_words, (size_t)row_blocks * g.a_block_words,
                          "bf16 gemm: packed A");
    g.nc = g.K2 > KC2 && (g.a_direct || g.a_packed) ? NC_SHARING_L2 : NC;
    if (!g.a_direct && !g.a_packed) g.nc = block_columns; /* A packed per block */
    uint32_t *areas = grow(&packed_per_thread, &packed_per_thread_words, (size_t)threads * THREAD_WORDS,
                           "bf16 gemm: per-thread packed blocks");
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        if (g.a_packed) {
#pragma omp for schedule(static)
            for (int s = 0; s < a_groups; s++) pack_a_group(&g, amx, s);
            /* the implicit barrier of `omp for`: all of A is packed before any thread multiplies */
        }
        int lo, hi;
        uint32_t *area = areas + (size_t)omp_get_thread_num() * THREAD_WORDS;
        if (split_columns) ops_thread_range(N, col_unit, &lo, &hi);
        else ops_thread_range(M, row_unit, &lo, &hi);
        const int m_lo = split_columns ? 0 : lo, m_hi = split_columns ? M : hi;
        const int n_lo = split_columns ? lo : 0, n_hi = split_columns ? hi : N;
        if (hi > lo) {
            if (amx) {
                amx_start();
                rectangle_amx(&g, m_lo, m_hi, n_lo, n_hi, area);
                amx_stop();
            } else rectangle_avx512(&g, m_lo, m_hi, n_lo, n_hi, area);
        }
    }
}
