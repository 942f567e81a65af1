/* gemm_bf16.c: bf16 matrix product on AVX512_BF16: pair-interleaved packing, an 8x48 VDPBF16PS tile, OpenMP. */
#include "ops/gemm_bf16.h"

#include "base/error.h"
#include "base/mem.h"
#include "ops/parallel.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

/* The instruction. VDPBF16PS acc, a, b treats each 32-bit lane of a and b as a PAIR of bf16 numbers and
 * does acc[i] += a[2i] * b[2i] + a[2i+1] * b[2i+1] in fp32, for 16 lanes: 32 products per instruction.
 * So both operands must hold two consecutive k (the summed index) in each 32-bit word. In row-major
 * memory that is already so along a row of a k-contiguous matrix; every other layout is rearranged by
 * the packing below.
 *
 * Speed on this machine's cores (Sapphire Rapids class; bench/gemm_lowp measures it with a loop of
 * independent instructions): one VDPBF16PS issues every 2 cycles and occupies both FMA ports, while fp32
 * FMAs issue two per cycle: 16 multiply-adds per cycle against fp32's 32. So this kernel can reach only
 * HALF of fp32 sgemm's peak here, whatever the blocking (the tile runs at ~95% of that instruction rate).
 * What bf16 saves is memory: operands are half the bytes and nothing is widened to fp32 first.
 *
 * Only these functions are compiled for AVX-512 (the target attribute); the rest of the build keeps the
 * generic flags, and matmul_lowp.c calls here only after gemm_bf16_available(). */
#define GEMM_TARGET __attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl")))
#define GEMM_INLINE __attribute__((always_inline)) inline

/* Blocking (all in 32-bit words = one bf16 pair of k):
 *   MR x NR    the register tile: 8 rows of C x 48 columns = 8 x 3 accumulators of 16 lanes (24 of the 32
 *              zmm registers), 3 registers for a row of B and one broadcast of A. Per k-pair step it
 *              loads 3 vectors and 8 scalars and runs 24 VDPBF16PS: loads never limit the one port.
 *              8 and 48 divide every GPT-2 shape (N = 256, C = 768, OC = 2304, 3072, 50304), so no tile
 *              is ragged there.
 *   KC2        pairs of k per block: an A micro-panel (MR x KC2 words, 12 KiB) stays in L1 while it meets
 *              every B micro-panel of the block; 384 pairs = 768 channels, so GPT-2's C = 768 is one block
 *              and C is written once.
 *   NC         columns per packed B block: NC x KC2 words = 576 KiB stays in the 2 MiB L2 while all the
 *              row tiles stream past it. */
enum { MR = 8, NR = 48, NV = NR / 16, KC2 = 384, NC = 8 * NR };

/* ------------------------------------------------------------------ CPU check */

bool gemm_bf16_available(void) {
    static int known = -1; /* a benign race: every thread computes the same answer */
    if (known < 0) {
        __builtin_cpu_init();
        /* __builtin_cpu_supports also checks that the OS saves the AVX-512 state (XCR0). */
        known = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
    }
    return known;
}

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

/* Transpose 16 rows of 16 words in place: r[j] word i := old r[i] word j. Four rounds of shuffles within
 * and across the 128-bit lanes (16 x 4 = 64 shuffles for 256 words). */
GEMM_TARGET static GEMM_INLINE void transpose_16x16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; i++) { /* per lane: (a0 b0 a1 b1), (a2 b2 a3 b3) */
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) { /* per lane: column j of rows 4i..4i+3, j = 0..3 */
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    /* r[4g + j] lane L now holds column 4L + j of row group g; gather the four groups' lane L together */
    for (int j = 0; j < 4; j++) {
        __m512i x = _mm512_shuffle_i32x4(r[j], r[4 + j], _MM_SHUFFLE(2, 0, 2, 0));
        __m512i y = _mm512_shuffle_i32x4(r[j], r[4 + j], _MM_SHUFFLE(3, 1, 3, 1));
        __m512i z = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], _MM_SHUFFLE(2, 0, 2, 0));
        __m512i w = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], _MM_SHUFFLE(3, 1, 3, 1));
        t[j] = _mm512_shuffle_i32x4(x, z, _MM_SHUFFLE(2, 0, 2, 0));      /* column j      (lane 0) */
        t[8 + j] = _mm512_shuffle_i32x4(x, z, _MM_SHUFFLE(3, 1, 3, 1));  /* column 8 + j  (lane 2) */
        t[4 + j] = _mm512_shuffle_i32x4(y, w, _MM_SHUFFLE(2, 0, 2, 0));  /* column 4 + j  (lane 1) */
        t[12 + j] = _mm512_shuffle_i32x4(y, w, _MM_SHUFFLE(3, 1, 3, 1)); /* column 12 + j (lane 3) */
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* Store the first `words` (16 or 8) words of v at dst. */
GEMM_TARGET static GEMM_INLINE void store_words(uint32_t *dst, __m512i v, int words) {
    if (words >= 16) _mm512_storeu_si512(dst, v);
    else _mm512_mask_storeu_epi32(dst, (__mmask16)((1u << words) - 1), v);
}

/* Panel of W lines (xn of them real, the rest zero) from a k-contiguous source, pairs p0 .. p0+kp. */
GEMM_TARGET static void pack_k_contiguous(uint32_t *dst, const uint16_t *src, int ld, int x0, int xn, int p0, int kp,
                                          int K, int W) {
    for (int l0 = 0; l0 < W; l0 += 16) {
        const int lines = xn - l0 < 0 ? 0 : xn - l0 > 16 ? 16 : xn - l0;
        const int width = W - l0 < 16 ? W - l0 : 16;
        for (int p = 0; p < kp; p += 16) {
            const int pairs = kp - p < 16 ? kp - p : 16;
            const int k = 2 * (p0 + p), elements = K - k < 32 ? K - k : 32;
            /* A masked load reads only `elements` bf16 values: the row's end is never overrun, and the
             * partner of an odd last element loads as zero. */
            const __mmask32 mask = elements >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << elements) - 1);
            __m512i r[16];
            for (int i = 0; i < 16; i++) {
                const uint16_t *row = src + (size_t)(x0 + l0 + i) * ld + k;
                /* 16 rows walked side by side are more streams than the hardware prefetcher follows
                 * well: ask for each row's line 4 steps (256 bytes) ahead (a hint: never faults) */
                _mm_prefetch((const char *)(row + 128), _MM_HINT_T0);
                r[i] = i < lines ? _mm512_maskz_loadu_epi16(mask, row) : _mm512_setzero_si512();
            }
            transpose_16x16(r);
            for (int j = 0; j < pairs; j++) store_words(dst + (size_t)(p + j) * W + l0, r[j], width);
        }
    }
}

/* Panel of W lines (xn real) from an x-contiguous source (row k of memory holds element k of every line). */
GEMM_TARGET static void pack_x_contiguous(uint32_t *dst, const uint16_t *src, int ld, int x0, int xn, int p0, int kp,
                                          int K, int W) {
    /* word i of the result = (row0[i], row1[i]): 16-bit element 2i from the first source, 2i+1 from the second */
    static const uint16_t interleave[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                            8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i idx = _mm512_loadu_si512(interleave);
    for (int p = 0; p < kp; p++) {
        const int k = 2 * (p0 + p);
        const uint16_t *row0 = src + (size_t)k * ld + x0;
        const uint16_t *row1 = k + 1 < K ? row0 + ld : NULL; /* odd K: the last pair's partner is zero */
        for (int l0 = 0; l0 < W; l0 += 16) {
            const int lines = xn - l0 < 0 ? 0 : xn - l0 > 16 ? 16 : xn - l0;
            const __mmask16 mask = (__mmask16)((1u << lines) - 1);
            __m512i a = _mm512_zextsi256_si512(_mm256_maskz_loadu_epi16(mask, row0 + l0));
            __m512i b = row1 ? _mm512_zextsi256_si512(_mm256_maskz_loadu_epi16(mask, row1 + l0)) : _mm512_setzero_si512();
            store_words(dst + (size_t)p * W + l0, _mm512_permutex2var_epi16(a, idx, b), W - l0 < 16 ? W - l0 : 16);
        }
    }
}

GEMM_TARGET static void pack_panel(uint32_t *dst, const uint16_t *src, int ld, bool k_contiguous, int x0, int xn,
                                   int p0, int kp, int K, int W) {
    if (k_contiguous) pack_k_contiguous(dst, src, ld, x0, xn, p0, kp, K, W);
    else pack_x_contiguous(dst, src, ld, x0, xn, p0, kp, K, W);
}

/* ------------------------------------------------------------------ the register tile */

/* C tile (mr x nr, mr <= MR, nr <= NR) at c (row stride ldc) from kp pairs of a packed A micro-panel
 * (word [p * MR + r]) and B micro-panel (word [p * NR + l]). `first`: the first k block, where the tile
 * starts from 0 (or C when accumulating) plus the bias; later blocks add to C. Inlined with a constant
 * mr so the row loop unrolls and the 8 x 3 accumulators live in registers. */
GEMM_TARGET static GEMM_INLINE void tile(const int mr, int kp, const uint32_t *a, const uint32_t *b, float *c,
                                         size_t ldc, int nr, bool first, bool accumulate, const float *bias) {
    /* GCC's -O2 does not unroll the row loops completely on its own; without that the accumulators are
     * an array on the stack and every VDPBF16PS waits on a load and a store. */
    __m512 acc[MR][NV];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_ps();
    for (int p = 0; p < kp; p++) {
        const __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 16),
                       b2 = (__m512bh)_mm512_load_si512(b + 32);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m512bh ar = (__m512bh)_mm512_set1_epi32((int)a[r]); /* the pair (A[r][2p], A[r][2p+1]) */
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
            acc[r][2] = _mm512_dpbf16_ps(acc[r][2], ar, b2);
        }
        a += MR;
        b += NR;
    }
    __mmask16 mask[NV];
    __m512 add[NV]; /* what the first block adds besides the product: the bias */
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++) {
        const int cols = nr - 16 * v;
        mask[v] = cols >= 16 ? 0xFFFF : cols > 0 ? (__mmask16)((1u << cols) - 1) : 0;
        add[v] = first && bias ? _mm512_maskz_loadu_ps(mask[v], bias + 16 * v) : _mm512_setzero_ps();
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) {
            if (!mask[v]) continue;
            float *cp = c + (size_t)r * ldc + 16 * v;
            __m512 x = _mm512_add_ps(acc[r][v], add[v]);
            if (!first || accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], cp));
            _mm512_mask_storeu_ps(cp, mask[v], x);
        }
}

GEMM_TARGET static void tile_any(int mr, int kp, const uint32_t *a, const uint32_t *b, float *c, size_t ldc, int nr,
                                 bool first, bool accumulate, const float *bias) {
    switch (mr) { /* one unrolled copy per row count; only the last row tile of an odd M is short */
    case 8: tile(8, kp, a, b, c, ldc, nr, first, accumulate, bias); break;
    case 7: tile(7, kp, a, b, c, ldc, nr, first, accumulate, bias); break;
    case 6: tile(6, kp, a, b, c, ldc, nr, first, accumulate, bias); break;
    case 5: tile(5, kp, a, b, c, ldc, nr, first, accumulate, bias); break;
    case 4: tile(4, kp, a, b, c, ldc, nr, first, accumulate, bias); break;
    case 3: tile(3, kp, a, b, c, ldc, nr, first, accumulate, bias); break;
    case 2: tile(2, kp, a, b, c, ldc, nr, first, accumulate, bias); break;
    default: tile(1, kp, a, b, c, ldc, nr, first, accumulate, bias); break;
    }
}

/* ------------------------------------------------------------------ buffers */

/* Grow-only packing buffers, kept between calls (a training step makes the same calls every time):
 * the shared packed A (all rows, when the threads split the columns) and one area per thread for its
 * packed B block and A micro-panel. */
static uint32_t *packed_a_shared, *packed_per_thread;
static size_t packed_a_shared_words, packed_per_thread_words;

enum { THREAD_WORDS = NC * KC2 + MR * KC2 }; /* a multiple of 16 words: every area starts 64-byte aligned */

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
    const uint16_t *A, *B;
    int lda, ldb;
    const float *bias;
    bool accumulate;
    float *C;
    int ldc;
    const uint32_t *a_packed; /* all of A packed (row tile s at s * K2 * MR words), or NULL: pack per tile */
} gemm_job;

/* One thread's rectangle of C: rows [m_lo, m_hi) (m_lo a multiple of MR), columns [n_lo, n_hi). Loops in
 * the classic order: column block, k block (pack B once), row tile (A from L1), column tile (B from L2). */
GEMM_TARGET static void gemm_rectangle(const gemm_job *g, int m_lo, int m_hi, int n_lo, int n_hi, uint32_t *area) {
    uint32_t *b_block = area, *a_panel = area + (size_t)NC * KC2;
    for (int jc = n_lo; jc < n_hi; jc += NC) {
        const int nc = n_hi - jc < NC ? n_hi - jc : NC;
        for (int pc = 0; pc < g->K2; pc += KC2) {
            const int kc2 = g->K2 - pc < KC2 ? g->K2 - pc : KC2;
            for (int jr = 0; jr < nc; jr += NR)
                pack_panel(b_block + (size_t)jr * kc2, g->B, g->ldb, g->trans_b, jc + jr,
                           nc - jr < NR ? nc - jr : NR, pc, kc2, g->K, NR);
            for (int ir = m_lo; ir < m_hi; ir += MR) {
                const int mr = m_hi - ir < MR ? m_hi - ir : MR;
                const uint32_t *a = a_panel;
                if (g->a_packed) a = g->a_packed + (size_t)(ir / MR) * g->K2 * MR + (size_t)pc * MR;
                else pack_panel(a_panel, g->A, g->lda, !g->trans_a, ir, mr, pc, kc2, g->K, MR);
                float *c_row = g->C + (size_t)ir * g->ldc + jc;
                for (int jr = 0; jr < nc; jr += NR)
                    tile_any(mr, kc2, a, b_block + (size_t)jr * kc2, c_row + jr, (size_t)g->ldc,
                             nc - jr < NR ? nc - jr : NR, pc == 0, g->accumulate, g->bias ? g->bias + jc + jr : NULL);
            }
        }
    }
}

void gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
               int ldb, const float *bias, bool accumulate, float *C, int ldc) {
    MP_ASSERT(M >= 0 && N >= 0 && K >= 0, "gemm_bf16 dims must be >= 0: M=%d N=%d K=%d", M, N, K);
    MP_ASSERT(gemm_bf16_available(), "gemm_bf16 called on a CPU without AVX512_BF16");
    if (M == 0 || N == 0) return;
    if (K == 0) { /* an empty sum: only the base and the bias are left */
        if (accumulate && !bias) return;
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                float *c = C + (size_t)m * ldc + n;
                *c = (accumulate ? *c : 0.0f) + (bias ? bias[n] : 0.0f);
            }
        return;
    }
    gemm_job g = {.trans_a = trans_a, .trans_b = trans_b, .M = M, .N = N, .K = K, .K2 = (K + 1) / 2, .A = A,
                  .B = B, .lda = lda, .ldb = ldb, .bias = bias, .accumulate = accumulate, .C = C, .ldc = ldc};
    /* Split the wider side of C over the threads, as matmul_sgemm does. When the columns are split every
     * thread needs every row of A: pack A once, all threads together, instead of once per thread and
     * column block. When the rows are split each thread packs its own A tiles as it reaches them. */
    const bool split_columns = N >= M;
    /* one thread below ~0.5 MFLOP, where starting threads costs more than it saves */
    const int threads = (double)M * N * K >= (1 << 18) ? omp_get_max_threads() : 1;
    const int row_tiles = (M + MR - 1) / MR;
    if (split_columns)
        g.a_packed = grow(&packed_a_shared, &packed_a_shared_words, (size_t)row_tiles * g.K2 * MR,
                          "bf16 gemm: packed A");
    uint32_t *areas = grow(&packed_per_thread, &packed_per_thread_words, (size_t)threads * THREAD_WORDS,
                           "bf16 gemm: per-thread packed blocks");
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        if (split_columns) {
            uint32_t *a_all = (uint32_t *)g.a_packed;
#pragma omp for schedule(static)
            for (int s = 0; s < row_tiles; s++) {
                const int m0 = s * MR;
                pack_panel(a_all + (size_t)s * g.K2 * MR, A, lda, !trans_a, m0, M - m0 < MR ? M - m0 : MR, 0, g.K2, K,
                           MR);
            }
            /* the implicit barrier of `omp for`: all of A is packed before any thread multiplies */
        }
        int lo, hi;
        uint32_t *area = areas + (size_t)omp_get_thread_num() * THREAD_WORDS;
        if (split_columns) {
            ops_thread_range(N, NR, &lo, &hi);
            if (hi > lo) gemm_rectangle(&g, 0, M, lo, hi, area);
        } else {
            ops_thread_range(M, MR, &lo, &hi);
            if (hi > lo) gemm_rectangle(&g, lo, hi, 0, N, area);
        }
    }
}
