/* gemm_f32.c: fp32 matrix product on AVX-512: panels packed per block, an 8 x 48 FMA register tile, OpenMP threads. */
#include "ops/gemm_f32.h"

#include "base/error.h"
#include "base/mem.h"
#include "ops/gemm_avx512.h"
#include "ops/isa.h"
#include "ops/parallel.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

/* Why the core has its own fp32 product, beside OpenBLAS:
 *   - OpenBLAS runs the kernel set OPENBLAS_CORETYPE names. This course's build machines pin Haswell, 256-bit
 *     kernels, on CPUs with AVX-512: the fp32 products then ran at half of what the CPU can do (bench/README.md,
 *     "OpenBLAS's kernel set"). This kernel runs 512-bit FMAs wherever the CPU has them.
 *   - OpenBLAS's order of additions depends on its kernel set and blocking, so the same step gave different bits
 *     on different CPUs. Here every element is one defined chain of fused multiply-adds (gemm_f32.h), whatever the
 *     layout, the threads or the machine.
 * It is the same design as gemm_bf16.c's AVX512-BF16 engine, one fp32 value per 32-bit word instead of a pair:
 *
 *   MR x NR  the register tile: 8 rows of C x 48 columns = 8 x 3 accumulators of 16 lanes (24 of the 32 zmm
 *            registers), 3 for a row of B and one broadcast of A. Per k step: 3 vector loads of B, 8 broadcasts
 *            of A, 24 FMAs; 24 independent sums hide the FMA's latency (4 cycles, 2 a cycle).
 *   KC       values of k per block (GEMM_F32_KC): an A micro-panel (MR x KC, 12 KiB) stays in L1 while it meets
 *            every B micro-panel of the block.
 *   B block  columns per packed B block: as many whole panels as B_BLOCK_WORDS holds for the block's depth.
 *            Where A is read in place, 288 KiB (192 columns of KC): the block stays in L2 beside the rows of A
 *            and the strip of C that stream past it, even on a 1 MiB L2. Where A is packed (transposed), each
 *            column block packs A again, so the block is wider, 768 KiB: a weight gradient over 256 tokens takes
 *            GPT-2's 768 columns in one block, and A is packed once, not four times (the lm head's: +35%).
 * A not transposed (the forward's input, dinp's dout) is read in place: its rows are k-contiguous, and the tile
 * broadcasts A[r][k] from memory. Only B and a transposed A (a weight gradient's dout^T) are packed. Block sizes
 * measured on GPT-2's products: bench/README.md, "The core's own fp32 kernel". */
#define F32_TARGET __attribute__((target("avx512f")))
#define F32_INLINE __attribute__((always_inline)) inline

enum { MR = GEMM_MR, NR = GEMM_NR, NV = GEMM_NV, KC = GEMM_F32_KC };
enum { B_BLOCK_WORDS_A_IN_PLACE = 4 * NR * KC, B_BLOCK_WORDS_A_PACKED = 768 * 256 };
/* A panels packed together when A is transposed: 32 rows of C = 128 bytes of each row of memory, whole lines */
enum { A_PANELS_AT_ONCE = 4 };

/* ------------------------------------------------------------------ CPU check */

static bool kernel_wanted = true;

bool gemm_f32_available(void) {
    /* The ops/ kernels' level (ops/isa.h) is avx512 only where the CPU and the OS run AVX-512 F, and MIXPAR_OPS_ISA
     * can narrow it: below avx512 the products go to OpenBLAS (valgrind, for one, runs no AVX-512). */
    return kernel_wanted && ops_isa_current() == OPS_ISA_AVX512;
}

bool gemm_f32_use(bool use) {
    kernel_wanted = use;
    return gemm_f32_available();
}

static inline int min_int(int a, int b) { return a < b ? a : b; }
static inline int clamp_lines(int n, int most) { return n < 0 ? 0 : n > most ? most : n; }
static inline __mmask16 first_lanes(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* ------------------------------------------------------------------ packing
 *
 * A panel is W lines wide (W = MR for A, NR for B) and kc values deep: word [k * W + l] = element k of line l
 * (a row of A, a column of B). Lines past the matrix edge are zeros, so the tile never needs a ragged loop. */

/* B's panels from a k-contiguous source (B transposed: line l is row x0 + l of memory, its k values side by side),
 * `panels` panels of NR lines, xn of them real, values k0 .. k0+kc: a transpose of 16 x 16 words at a time. */
F32_TARGET static void pack_k_contiguous(float *dst, int panels, const float *src, int ld, int x0, int xn, int k0,
                                         int kc) {
    const size_t panel_words = (size_t)NR * kc;
    for (int l0 = 0; l0 < panels * NR; l0 += 16) {
        const int lines = clamp_lines(xn - l0, 16);
        float *panel = dst + (size_t)(l0 / NR) * panel_words + l0 % NR;
        for (int k = 0; k < kc; k += 16) {
            const int values = min_int(kc - k, 16);
            const __mmask16 mask = first_lanes(values);
            __m512i r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) {
                const float *row = src + (size_t)(x0 + l0 + i) * ld + k0 + k;
                /* 16 rows side by side are more streams than the hardware prefetcher follows: ask for each row's
                 * line 4 steps (256 bytes) ahead (a hint: never faults) */
                _mm_prefetch((const char *)(row + 64), _MM_HINT_T0);
                r[i] = i < lines ? _mm512_maskz_loadu_epi32(mask, row) : _mm512_setzero_si512();
            }
            transpose_16x16(r);
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                if (j < values) _mm512_storeu_si512(panel + (size_t)(k + j) * NR, r[j]);
        }
    }
}

/* `panels` panels of W lines (W = MR or NR), side by side in an x-contiguous source (row k of memory holds value k
 * of every line: B not transposed, or A transposed), xn of the lines real, values k0 .. k0+kc; panel q is written
 * at dst + q * panel_words. All the panels in one pass over the rows, so each row's cache lines are read once. */
F32_TARGET static void pack_x_contiguous(float *dst, size_t panel_words, int panels, const float *src, int ld, int x0,
                                         int xn, int k0, int kc, int W) {
    const int width = panels * W; /* a multiple of 16, or of W = 8 */
    for (int k = 0; k < kc; k++) {
        const float *row = src + (size_t)(k0 + k) * ld + x0;
        /* rows are ld apart, a stride the hardware prefetcher does not follow across pages: ask for the row 8
         * ahead, every line of it (a hint: never faults, even past the end) */
        for (int l = 0; l < width; l += 16) _mm_prefetch((const char *)(row + (size_t)8 * ld + l), _MM_HINT_T0);
        for (int l0 = 0; l0 < width; l0 += 16) {
            const __m512 v = _mm512_maskz_loadu_ps(first_lanes(clamp_lines(xn - l0, 16)), row + l0);
            float *out = dst + (size_t)(l0 / W) * panel_words + (size_t)k * W + l0 % W;
            if (W >= 16) _mm512_storeu_ps(out, v);
            else { /* W = 8: 8 lines of each of two panels */
                _mm256_storeu_ps(out, _mm512_castps512_ps256(v));
                if (l0 + 8 < width)
                    _mm256_storeu_ps(out + panel_words, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
            }
        }
    }
}

/* ------------------------------------------------------------------ the register tile */

/* C tile (mr x nr, mr <= MR, nr <= NR) at c (row stride ldc) from kc values of A and a packed B micro-panel
 * (word [k * NR + l]). A's value k of row r is a[r * a_row + k * a_step]: a packed micro-panel (a_row 1, a_step
 * MR) or A itself, not transposed (a_row its row stride, a_step 1). `first`: the first k block, whose sum is
 * added to the bias (or 0) and, when accumulating, to C; later blocks add to C. Inlined with a constant mr so
 * the row loop unrolls and the 8 x 3 accumulators live in registers. */
F32_TARGET static F32_INLINE void tile(const int mr, int kc, const float *a, const size_t a_row, const size_t a_step,
                                       const float *b, float *c, size_t ldc, int nr, bool first, bool accumulate,
                                       const float *bias) {
    __m512 acc[MR][NV];
    gemm_tile_start(mr, acc, c, ldc, first);
    for (int k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16), b2 = _mm512_load_ps(b + 32);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m512 ar = _mm512_set1_ps(a[r * a_row]);
            acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(ar, b2, acc[r][2]);
        }
        a += a_step;
        b += NR;
    }
    gemm_tile_store(mr, acc, c, ldc, nr, first, accumulate, bias);
}

/* The tile for A packed (a_row 1, a_step MR) and for A read in place (rows a_row floats apart, a_step 1), one
 * unrolled copy per row count. */
F32_TARGET static void tile_packed_a(int mr, int kc, const float *a, const float *b, float *c, size_t ldc, int nr,
                                     bool first, bool accumulate, const float *bias) {
#define PACKED_A(rows) tile(rows, kc, a, 1, MR, b, c, ldc, nr, first, accumulate, bias)
    GEMM_BY_ROWS(mr, PACKED_A)
#undef PACKED_A
}

F32_TARGET static void tile_direct_a(int mr, int kc, const float *a, size_t a_row, const float *b, float *c,
                                     size_t ldc, int nr, bool first, bool accumulate, const float *bias) {
#define DIRECT_A(rows) tile(rows, kc, a, a_row, 1, b, c, ldc, nr, first, accumulate, bias)
    GEMM_BY_ROWS(mr, DIRECT_A)
#undef DIRECT_A
}

/* ------------------------------------------------------------------ the product */

typedef struct {
    bool trans_a, trans_b;
    int M, N, K;
    const float *A, *B;
    int lda, ldb;
    const float *bias;
    bool accumulate;
    float *C;
    int ldc;
    int nc;                  /* columns per B block: whole panels, as many as its words allow */
    size_t b_block_words;    /* a thread's B block: nc (whole panels) x the deepest k block */
    size_t thread_words;     /* a thread's area: its B block and its A panels */
} gemm_job;

/* One thread's rectangle of C: rows [m_lo, m_hi) (m_lo a multiple of MR), columns [n_lo, n_hi). Loops in the
 * classic order: column block, k block (pack B once), row tile (A from L1), column tile (B from L2). */
F32_TARGET static void rectangle(const gemm_job *g, int m_lo, int m_hi, int n_lo, int n_hi, float *area) {
    float *b_block = area, *a_panels = area + g->b_block_words;
    for (int jc = n_lo; jc < n_hi; jc += g->nc) {
        const int nc = min_int(g->nc, n_hi - jc), panels = (nc + NR - 1) / NR;
        for (int pc = 0; pc < g->K; pc += KC) {
            const int kc = min_int(KC, g->K - pc);
            if (g->trans_b) pack_k_contiguous(b_block, panels, g->B, g->ldb, jc, nc, pc, kc);
            else pack_x_contiguous(b_block, (size_t)NR * kc, panels, g->B, g->ldb, jc, nc, pc, kc, NR);
            for (int ir = m_lo; ir < m_hi; ir += MR) {
                const int mr = min_int(MR, m_hi - ir);
                float *c_row = g->C + (size_t)ir * g->ldc + jc;
                const float *bias = g->bias ? g->bias + jc : NULL;
                if (!g->trans_a) {
                    const float *a = g->A + (size_t)ir * g->lda + pc;
                    for (int jr = 0; jr < nc; jr += NR)
                        tile_direct_a(mr, kc, a, (size_t)g->lda, b_block + (size_t)jr * kc, c_row + jr, (size_t)g->ldc,
                                      min_int(NR, nc - jr), pc == 0, g->accumulate, bias ? bias + jr : NULL);
                    continue;
                }
                /* A transposed: A_PANELS_AT_ONCE panels packed together, just before their tiles read them */
                const int slot = (ir - m_lo) / MR % A_PANELS_AT_ONCE;
                if (slot == 0) {
                    const int rows = min_int(A_PANELS_AT_ONCE * MR, m_hi - ir);
                    pack_x_contiguous(a_panels, (size_t)MR * kc, (rows + MR - 1) / MR, g->A, g->lda, ir, rows, pc, kc,
                                      MR);
                }
                const float *a = a_panels + (size_t)slot * MR * kc;
                for (int jr = 0; jr < nc; jr += NR)
                    tile_packed_a(mr, kc, a, b_block + (size_t)jr * kc, c_row + jr, (size_t)g->ldc, min_int(NR, nc - jr),
                                  pc == 0, g->accumulate, bias ? bias + jr : NULL);
            }
        }
    }
}

/* Grow-only packing areas, one per thread, kept between calls (a training step makes the same calls every
 * time). Sized by what the products need: at most a B block and A's panels, 816 KiB a thread. */
static float *packed_areas;
static size_t packed_areas_words;

void gemm_f32(bool trans_a, bool trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
              const float *bias, bool accumulate, float *C, int ldc) {
    MP_ASSERT(M >= 0 && N >= 0 && K >= 0, "gemm_f32 dims must be >= 0: M=%d N=%d K=%d", M, N, K);
    MP_ASSERT(gemm_f32_available(), "gemm_f32 called on a CPU without AVX-512");
    if (M == 0 || N == 0) return;
    if (K == 0) { /* an empty sum: only the base and the bias are left */
        gemm_empty_sum(M, N, bias, accumulate, C, ldc);
        return;
    }
    gemm_job g = {.trans_a = trans_a, .trans_b = trans_b, .M = M, .N = N, .K = K, .A = A, .B = B, .lda = lda,
                  .ldb = ldb, .bias = bias, .accumulate = accumulate, .C = C, .ldc = ldc};
    /* Split the wider side of C over the threads, as gemm_bf16 does; one thread below ~0.5 MFLOP, where starting
     * threads costs more than it saves. */
    const bool split_columns = N >= M;
    const int threads = (double)M * N * K >= (1 << 18) ? omp_get_max_threads() : 1;
    const int kc_most = min_int(KC, K);
    const int block_words = trans_a ? B_BLOCK_WORDS_A_PACKED : B_BLOCK_WORDS_A_IN_PLACE;
    g.nc = block_words / kc_most / NR * NR;
    const int columns_most = min_int(g.nc, (N + NR - 1) / NR * NR);
    g.b_block_words = (size_t)columns_most * kc_most;
    g.thread_words = (g.b_block_words + (size_t)A_PANELS_AT_ONCE * MR * kc_most + 15) / 16 * 16; /* 64-byte aligned */
    if (packed_areas_words < (size_t)threads * g.thread_words) {
        mem_free(packed_areas);
        packed_areas_words = (size_t)threads * g.thread_words;
        packed_areas = mem_alloc(packed_areas_words * sizeof(float), MEM_OTHER, "fp32 gemm: per-thread packed blocks");
    }
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        int lo, hi;
        if (split_columns) ops_thread_range(N, NR, &lo, &hi);
        else ops_thread_range(M, MR, &lo, &hi);
        if (hi > lo)
            rectangle(&g, split_columns ? 0 : lo, split_columns ? M : hi, split_columns ? lo : 0, split_columns ? hi : N,
                      packed_areas + (size_t)omp_get_thread_num() * g.thread_words);
    }
}
