/* hooks.c: DDP communication hooks: fp32 allreduce, fp16/bf16 compression, top-k and PowerSGD with error feedback. */
#include "dist/hooks.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/mem.h"
#include "base/rng.h"
#include "dist/amp_reduce.h"
#include "fp/convert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const ddp_hook_names[] = {[DDP_HOOK_ALLREDUCE] = "allreduce", [DDP_HOOK_FP16] = "fp16",
                                      [DDP_HOOK_BF16] = "bf16", [DDP_HOOK_TOPK] = "topk",
                                      [DDP_HOOK_POWERSGD] = "powersgd", NULL};

int ddp_hook_from_name(const char *name) {
    for (int i = 0; i < DDP_NHOOKS; i++)
        if (name && strcmp(name, ddp_hook_names[i]) == 0) return i;
    return -1;
}

enum { LOWP_TAG = 16016 }; /* point-to-point tag of the 16-bit reduce-scatter */

typedef struct {
    size_t offset, rows, cols; /* a 2-D tensor PowerSGD compresses: (rows, cols) at offset */
    float *Q;                  /* (cols, r): warm start, kept across steps */
} psgd_matrix;

struct ddp_hook {
    ddp_hook_options opt;
    size_t nparams;
    float *residual;           /* (nparams) error feedback: what earlier steps did not send */
    psgd_matrix *mats;         /* PowerSGD's compressible matrices, by offset */
    int nmats;
    float *P;                  /* scratch (max rows, r) */
    void *scratch;             /* top-k's and the 16-bit hooks' buffers, grown on demand */
    size_t scratch_bytes;
};

static void *scratch(ddp_hook *h, size_t bytes) {
    if (bytes > h->scratch_bytes) {
        mem_free(h->scratch);
        h->scratch = mem_alloc(bytes, MEM_COMM, "comm hook scratch");
        h->scratch_bytes = bytes;
    }
    return h->scratch;
}

static int by_offset(const void *a, const void *b) {
    size_t x = ((const psgd_matrix *)a)->offset, y = ((const psgd_matrix *)b)->offset;
    return (x > y) - (x < y);
}

ddp_hook *ddp_hook_create(const ddp_hook_options *opt, const model_tensor *tensors, int ntensors, size_t nparams) {
    ddp_hook *h = calloc(1, sizeof *h);
    MP_ASSERT(h, "out of memory");
    h->opt = *opt;
    MP_ASSERT(opt->kind >= 0 && opt->kind < DDP_NHOOKS, "unknown hook %d", (int)opt->kind);
    if (h->opt.topk_ratio <= 0) h->opt.topk_ratio = 0.01;
    if (h->opt.powersgd_rank <= 0) h->opt.powersgd_rank = 1;
    MP_ASSERT(h->opt.topk_ratio <= 1, "topk_ratio %g is above 1", h->opt.topk_ratio);
    h->nparams = nparams;
    bool lossy = opt->kind == DDP_HOOK_TOPK || opt->kind == DDP_HOOK_POWERSGD;
    if (lossy && nparams) {
        h->residual = mem_alloc(nparams * sizeof(float), MEM_COMM, "error-feedback residual");
        memset(h->residual, 0, nparams * sizeof(float));
    }
    if (opt->kind == DDP_HOOK_POWERSGD) {
        size_t r = (size_t)h->opt.powersgd_rank, max_rows = 0;
        h->mats = calloc((size_t)(ntensors > 0 ? ntensors : 1), sizeof *h->mats);
        MP_ASSERT(h->mats, "out of memory");
        for (int i = 0; i < ntensors; i++) {
            const model_tensor *t = &tensors[i];
            if (t->ndim != 2) continue;
            size_t m = (size_t)t->shape[0], n = (size_t)t->shape[1];
            if (m * n != t->size || r * (m + n) >= m * n) continue; /* compressing would not pay */
            psgd_matrix *pm = &h->mats[h->nmats++];
            *pm = (psgd_matrix){t->offset, m, n, mem_alloc(n * r * sizeof(float), MEM_COMM, "PowerSGD Q")};
            /* The same pseudo-random start on every rank: Q's columns must agree before the first allreduce. */
            for (size_t j = 0; j < n * r; j++)
                pm->Q[j] = (float)mp_hash32(opt->seed ^ 0x51ed27u, t->offset + j) / 4294967296.0f * 2.0f - 1.0f;
            if (m > max_rows) max_rows = m;
        }
        qsort(h->mats, (size_t)h->nmats, sizeof *h->mats, by_offset); /* powersgd_reduce walks them in order */
        if (max_rows) h->P = mem_alloc(max_rows * r * sizeof(float), MEM_COMM, "PowerSGD P");
    }
    return h;
}

void ddp_hook_free(ddp_hook *h) {
    if (!h) return;
    for (int i = 0; i < h->nmats; i++) mem_free(h->mats[i].Q);
    free(h->mats);
    mem_free(h->P);
    mem_free(h->residual);
    mem_free(h->scratch);
    free(h);
}

const ddp_hook_options *ddp_hook_get_options(const ddp_hook *h) { return &h->opt; }
const float *ddp_hook_residual(const ddp_hook *h) { return h->residual; }

/* ------------------------------------------------------------------ 16-bit compression */

static void lowp_reduce(comm_t *c, float *x, size_t n, comm_dtype dt, void *buf) {
    size_t p = (size_t)comm_size(c), me = (size_t)comm_rank(c);
    size_t chunk = (n + p - 1) / p, total = chunk * p;
    /* buf: mine (total) | received (total) | acc (chunk floats) | wide (chunk floats) */
    uint16_t *mine = buf, *got = mine + total;
    float *acc = (float *)(got + total);
    amp_reduce_narrow16(mine, x, n, dt);
    memset(mine + n, 0, (total - n) * sizeof *mine);
    if (p == 1) {
        amp_reduce_widen16(x, mine, n, dt);
        return;
    }
    /* Reduce-scatter by point-to-point: rank j owns chunk j; everyone sends it their 16-bit piece. */
    comm_request **reqs = malloc(2 * p * sizeof *reqs);
    MP_ASSERT(reqs, "out of memory");
    size_t nreq = 0;
    for (size_t j = 0; j < p; j++) {
        if (j == me) continue;
        reqs[nreq++] = comm_irecv(c, got + j * chunk, chunk, dt, (int)j, LOWP_TAG);
        reqs[nreq++] = comm_isend(c, mine + j * chunk, chunk, dt, (int)j, LOWP_TAG);
    }
    for (size_t i = 0; i < nreq; i++) comm_wait(&reqs[i]);
    free(reqs);
    memcpy(got + me * chunk, mine + me * chunk, chunk * sizeof *got);
    /* The average of chunk `me` in fp32, rounded once (lab 17's region), then every chunk to every rank. */
    amp_reduce_mean16(mine + me * chunk, got, p, chunk, dt, acc, acc + chunk);
    comm_allgather(c, mine + me * chunk, mine, chunk, dt, COMM_ALGO_DEFAULT);
    amp_reduce_widen16(x, mine, n, dt);
}

static size_t lowp_scratch_bytes(comm_t *c, size_t n) {
    size_t p = (size_t)comm_size(c), chunk = (n + p - 1) / p;
    return 2 * chunk * p * sizeof(uint16_t) + 2 * chunk * sizeof(float);
}

void hooks_lowp_allreduce(comm_t *c, float *x, size_t n, comm_dtype dt) {
    MP_ASSERT(dt == COMM_FP16 || dt == COMM_BF16, "16-bit hooks take fp16 or bf16, not %s", comm_dtype_name(dt));
    void *buf = malloc(lowp_scratch_bytes(c, n) + 1);
    MP_ASSERT(buf, "out of memory");
    lowp_reduce(c, x, n, dt, buf);
    free(buf);
}

/* ------------------------------------------------------------------ top-k with error feedback */

size_t hooks_topk_count(size_t n, double ratio) {
    if (n == 0) return 0;
    double k = ceil(ratio * (double)n);
    if (k < 1) k = 1;
    return k >= (double)n ? n : (size_t)k;
}

static void swap_f(float *a, float *b) {
    float t = *a;
    *a = *b;
    *b = t;
}

float hooks_kth_magnitude(const float *x, size_t n, size_t k) {
    if (k == 0) return INFINITY;
    MP_ASSERT(k <= n, "k %zu > n %zu", k, n);
    float *a = malloc(n * sizeof *a);
    MP_ASSERT(a, "out of memory");
    for (size_t i = 0; i < n; i++) a[i] = fabsf(x[i]);
    /* Quickselect (Hoare's FIND) for position k-1 in descending order; expected O(n). */
    size_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        swap_f(&a[mid], &a[hi]);
        float pivot = a[hi];
        size_t store = lo;
        for (size_t i = lo; i < hi; i++)
            if (a[i] > pivot) swap_f(&a[i], &a[store++]);
        swap_f(&a[store], &a[hi]);
        if (store == want) break;
        if (store < want) lo = store + 1;
        else hi = store - 1;
    }
    float kth = a[want];
    free(a);
    return kth;
}

void hooks_topk_compress(const float *grad, float *residual, size_t n, size_t k, int32_t *index, float *value) {
    MP_ASSERT(k <= n, "top-k of %zu entries with k = %zu", n, k);
    /* (0, 0) pairs: harmless to add, and what stays if a NaN keeps fewer than k entries from qualifying. */
    memset(index, 0, k * sizeof *index);
    memset(value, 0, k * sizeof *value);
    /* LAB 16 BEGIN top-k selection with error feedback: acc = grad + residual, send the k largest |acc|, keep the rest */
    for (size_t i = 0; i < n; i++) residual[i] += grad[i]; /* the residual buffer now holds acc */
    float threshold = hooks_kth_magnitude(residual, n, k); /* at least k entries have |acc| >= threshold */
    size_t taken = 0;
    /* Strictly above the threshold first, then entries equal to it, lowest index first, until k. */
    for (size_t i = 0; i < n && taken < k; i++)
        if (fabsf(residual[i]) > threshold) {
            index[taken] = (int32_t)i;
            value[taken++] = residual[i];
        }
    for (size_t i = 0; i < n && taken < k; i++)
        if (fabsf(residual[i]) == threshold) {
            index[taken] = (int32_t)i;
            value[taken++] = residual[i];
        }
    for (size_t j = 0; j < taken; j++) residual[index[j]] = 0; /* sent: nothing of it stays behind */
    /* LAB 16 END */
}

static void topk_reduce(ddp_hook *h, comm_t *c, float *g, size_t lo, size_t n) {
    size_t p = (size_t)comm_size(c), k = hooks_topk_count(n, h->opt.topk_ratio);
    if (k == 0) return;
    /* scratch: my (index, value) and everyone's: (1 + p) * k of each */
    char *buf = scratch(h, (1 + p) * k * (sizeof(int32_t) + sizeof(float)));
    int32_t *my_index = (int32_t *)buf, *all_index = my_index + k;
    float *my_value = (float *)(all_index + p * k), *all_value = my_value + k;
    hooks_topk_compress(g, h->residual + lo, n, k, my_index, my_value);
    comm_allgather(c, my_index, all_index, k, COMM_INT32, COMM_ALGO_DEFAULT);
    comm_allgather(c, my_value, all_value, k, COMM_FP32, COMM_ALGO_DEFAULT);
    /* The average of the ranks' sparse vectors, summed in rank order so every rank gets the same bits. */
    memset(g, 0, n * sizeof *g);
    for (size_t r = 0; r < p; r++)
        for (size_t i = 0; i < k; i++) {
            int32_t at = all_index[r * k + i];
            MP_ASSERT(at >= 0 && (size_t)at < n, "rank %zu sent index %d outside the bucket (%zu)", r, (int)at, n);
            g[at] += all_value[r * k + i];
        }
    for (size_t i = 0; i < n; i++) g[i] /= (float)p;
}

/* ------------------------------------------------------------------ PowerSGD */

void hooks_orthonormalize(float *P, size_t m, size_t r) {
    for (size_t j = 0; j < r; j++) {
        double before = 0;
        for (size_t i = 0; i < m; i++) before += (double)P[i * r + j] * P[i * r + j];
        /* Subtract the projections on the columns before (modified Gram-Schmidt: one at a time). */
        for (size_t q = 0; q < j; q++) {
            double dot = 0;
            for (size_t i = 0; i < m; i++) dot += (double)P[i * r + j] * P[i * r + q];
            for (size_t i = 0; i < m; i++) P[i * r + j] -= (float)dot * P[i * r + q];
        }
        double norm = 0;
        for (size_t i = 0; i < m; i++) norm += (double)P[i * r + j] * P[i * r + j];
        /* A column (numerically) in the span of the ones before: what is left is rounding noise, which
         * normalising would blow up into a direction that is not orthogonal to them. Zero it instead (the
         * matrix has lower rank than r; the approximation loses nothing). */
        float inv = norm > 1e-10 * before && norm > 0 ? (float)(1.0 / sqrt(norm)) : 0.0f;
        for (size_t i = 0; i < m; i++) P[i * r + j] *= inv;
    }
}

void hooks_powersgd_step(comm_t *c, float *M, size_t m, size_t n, size_t r, float *P, float *Q, comm_algo algo) {
    /* LAB 16 BEGIN PowerSGD P/Q step: P = M Q, allreduce, orthonormalise, Q = M^T P, allreduce, M = P Q^T */
    for (size_t i = 0; i < m; i++) /* P (m, r) = M (m, n) Q (n, r) */
        for (size_t j = 0; j < r; j++) {
            double s = 0;
            for (size_t k = 0; k < n; k++) s += (double)M[i * n + k] * Q[k * r + j];
            P[i * r + j] = (float)s;
        }
    comm_allreduce(c, P, P, m * r, COMM_FP32, COMM_AVG, algo);
    hooks_orthonormalize(P, m, r);
    for (size_t k = 0; k < n; k++) /* Q (n, r) = M^T (n, m) P (m, r) */
        for (size_t j = 0; j < r; j++) {
            double s = 0;
            for (size_t i = 0; i < m; i++) s += (double)M[i * n + k] * P[i * r + j];
            Q[k * r + j] = (float)s;
        }
    comm_allreduce(c, Q, Q, n * r, COMM_FP32, COMM_AVG, algo);
    for (size_t i = 0; i < m; i++) /* M (m, n) = P Q^T: the rank-r average, the same on every rank */
        for (size_t k = 0; k < n; k++) {
            double s = 0;
            for (size_t j = 0; j < r; j++) s += (double)P[i * r + j] * Q[k * r + j];
            M[i * n + k] = (float)s;
        }
    /* LAB 16 END */
}

static void powersgd_reduce(ddp_hook *h, comm_t *c, float *grads, size_t lo, size_t hi, comm_algo algo) {
    size_t r = (size_t)h->opt.powersgd_rank, at = lo;
    /* Walk the bucket in order: uncompressed stretches between the matrices go as one fp32 allreduce. */
    for (int i = 0; i <= h->nmats; i++) {
        size_t start = i < h->nmats ? h->mats[i].offset : hi;
        if (start < lo) continue;
        if (start > hi) start = hi;
        if (start > at) comm_allreduce(c, grads + at, grads + at, start - at, COMM_FP32, COMM_AVG, algo);
        if (i == h->nmats || start >= hi) break;
        psgd_matrix *pm = &h->mats[i];
        size_t len = pm->rows * pm->cols;
        MP_ASSERT(pm->offset + len <= hi, "tensor at %zu crosses the bucket's end %zu", pm->offset, hi);
        float *g = grads + pm->offset, *e = h->residual + pm->offset;
        /* Error feedback: M = G + E; after the step G holds the approximation and E what it missed. */
        for (size_t j = 0; j < len; j++) g[j] += e[j];
        memcpy(e, g, len * sizeof *e);
        hooks_powersgd_step(c, g, pm->rows, pm->cols, r, h->P, pm->Q, algo);
        for (size_t j = 0; j < len; j++) e[j] -= g[j];
        at = pm->offset + len;
    }
}

/* ------------------------------------------------------------------ dispatch */

void ddp_hook_reduce(ddp_hook *h, comm_t *c, float *grads, size_t lo, size_t hi, comm_algo algo) {
    MP_ASSERT(lo <= hi && hi <= h->nparams, "bucket [%zu, %zu) outside the %zu gradients", lo, hi, h->nparams);
    size_t n = hi - lo;
    switch (h->opt.kind) {
    case DDP_HOOK_ALLREDUCE: comm_allreduce(c, grads + lo, grads + lo, n, COMM_FP32, COMM_AVG, algo); break;
    case DDP_HOOK_FP16:
    case DDP_HOOK_BF16:
        lowp_reduce(c, grads + lo, n, h->opt.kind == DDP_HOOK_FP16 ? COMM_FP16 : COMM_BF16,
                    scratch(h, lowp_scratch_bytes(c, n)));
        break;
    case DDP_HOOK_TOPK: topk_reduce(h, c, grads + lo, lo, n); break;
    case DDP_HOOK_POWERSGD: powersgd_reduce(h, c, grads, lo, hi, algo); break;
    default: MP_ASSERT(0, "unknown hook %d", (int)h->opt.kind);
    }
}
