/* cmd_comm_bench.c: `mixpar comm-bench`: nccl-tests-style timing of collectives per algorithm and message
 * size (time, algbw, busbw, wrong elements), then an alpha-beta fit per algorithm and the ring/tree crossover. */
#include "cli/commands.h"

#include "base/clock.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/parse.h"
#include "comm/comm.h"
#include "fp/convert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The collectives comm-bench times, with nccl-tests' bus-bandwidth factor: busbw = algbw x factor(p) is
 * the bandwidth each link must carry for the collective to run at algbw, so it can be compared with the
 * hardware's link bandwidth whatever p is (nccl-tests doc/PERFORMANCE.md). */
typedef struct {
    comm_op op;
    const char *factor_text;
    double (*factor)(int p);
} bench_op;

static double factor_allreduce(int p) { return 2.0 * (p - 1) / p; }
static double factor_gather(int p) { return (double)(p - 1) / p; }
static double factor_one(int p) { return p > 1 ? 1.0 : 0.0; }

static const bench_op OPS[] = {
    {COMM_OP_ALLREDUCE, "2(p-1)/p", factor_allreduce},
    {COMM_OP_ALLGATHER, "(p-1)/p", factor_gather},
    {COMM_OP_REDUCE_SCATTER, "(p-1)/p", factor_gather},
    {COMM_OP_BROADCAST, "1", factor_one},
};
enum { NOPS = sizeof OPS / sizeof OPS[0] };
static const comm_algo ALGOS[] = {COMM_ALGO_RING, COMM_ALGO_TREE, COMM_ALGO_RHD, COMM_ALGO_CHAIN, COMM_ALGO_NATIVE,
                                  COMM_ALGO_HIER};
enum { NALGOS = sizeof ALGOS / sizeof ALGOS[0], MAX_SIZES = 64 };

typedef struct {
    bool op_on[NOPS];
    bool algo_on[NALGOS];
    double min_bytes, max_bytes;
    int iters, warmup;
    double budget_s; /* at most about this long timing one size */
    comm_dtype dt;
    int ranks_per_node; /* the hierarchical allreduce's nodes; 0: not asked for (then "all" leaves it out) */
} bench_args;

/* One (op, algo) series: the measured points, for the fit. */
typedef struct {
    int op, algo;
    int n;
    double bytes[MAX_SIZES], seconds[MAX_SIZES];
} series;

static void usage(FILE *out) {
    fprintf(out,
            "usage: mixpar comm-bench [--op OP] [--algo ALGO] [--min BYTES] [--max BYTES] [--iters N]\n"
            "                         [--warmup N] [--budget SECONDS] [--dtype fp32|fp16|bf16|int32]\n"
            "                         [--ranks-per-node K]\n"
            "\n"
            "Times collectives on every rank of the job (start it with mixpar run -n N -- mixpar comm-bench ...)\n"
            "for message sizes from --min to --max, doubling, and prints an nccl-tests-style table:\n"
            "  size     bytes of the whole array (allreduce, broadcast: the buffer; allgather: the gathered\n"
            "           result; reduce_scatter: the input), count = its elements\n"
            "  time     average per call, slowest rank (us)\n"
            "  algbw    size / time (GB/s, 1e9 bytes)\n"
            "  busbw    algbw x factor: allreduce 2(p-1)/p, allgather and reduce_scatter (p-1)/p, broadcast 1\n"
            "  #wrong   elements that differ from the exactly known result, summed over ranks\n"
            "then fits t = alpha + size / beta per algorithm (least squares on relative error) and says where\n"
            "ring allreduce overtakes tree.\n"
            "\n"
            "  --op OP        allreduce, allgather, reduce_scatter, broadcast or all (default allreduce)\n"
            "  --algo ALGOS   ring, tree, rhd, chain, native, hierarchical, all, or a list: ring,native (default\n"
            "                 all; hierarchical is in all only with --ranks-per-node); ops skip algorithms they lack\n"
            "  --ranks-per-node K  the hierarchical allreduce's nodes: K consecutive ranks each, the last one\n"
            "                 maybe fewer (lab 26; default: MIXPAR_RANKS_PER_NODE, else one node)\n"
            "  --min, --max   sizes such as 8, 64K, 16M (K/M/G are 1024-based; default 8 and 64M)\n"
            "  --iters N      timed calls per size (default 20), fewer for large sizes when --budget says so\n"
            "  --warmup N     untimed calls first (default 3, at least 1)\n"
            "  --budget S     aim to time each size for at most S seconds (default 0.5)\n"
            "  --dtype T      element type (default fp32); fp16/bf16 reductions run in fp32 (twice the bytes)\n");
}

static double parse_size_arg(const char *flag, const char *s) {
    double v;
    if (!parse_bytes(s, &v) || v < 1 || v > 16.0 * (1ull << 30) || v != floor(v))
        mp_usage_error("comm-bench", "%s takes a size in bytes such as 8, 64K or 16M (up to 16G), not '%s'", flag, s);
    return v;
}

static int parse_int_arg(const char *flag, const char *s, int lo, int hi) {
    int64_t v;
    if (!parse_i64(s, &v) || v < lo || v > hi)
        mp_usage_error("comm-bench", "%s takes a whole number from %d to %d, not '%s'", flag, lo, hi, s);
    return (int)v;
}

static void parse_args(int argc, char **argv, bench_args *a) {
    *a = (bench_args){.min_bytes = 8, .max_bytes = 64.0 * (1 << 20), .iters = 20, .warmup = 3, .budget_s = 0.5,
                      .dt = COMM_FP32};
    const char *op = "allreduce", *algo = "all";
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc) mp_usage_error("comm-bench", "unknown option '%s' or missing value", f);
        const char *v = argv[++i];
        if (strcmp(f, "--op") == 0) op = v;
        else if (strcmp(f, "--algo") == 0) algo = v;
        else if (strcmp(f, "--min") == 0) a->min_bytes = parse_size_arg(f, v);
        else if (strcmp(f, "--max") == 0) a->max_bytes = parse_size_arg(f, v);
        else if (strcmp(f, "--iters") == 0) a->iters = parse_int_arg(f, v, 1, 1000000);
        else if (strcmp(f, "--warmup") == 0) a->warmup = parse_int_arg(f, v, 1, 1000000);
        else if (strcmp(f, "--ranks-per-node") == 0) a->ranks_per_node = parse_int_arg(f, v, 1, 1 << 20);
        else if (strcmp(f, "--budget") == 0) {
            if (!parse_double(v, &a->budget_s) || !(a->budget_s > 0) || a->budget_s > 3600)
                mp_usage_error("comm-bench", "--budget takes seconds (0 < S <= 3600), not '%s'", v);
        } else if (strcmp(f, "--dtype") == 0) {
            int dt = comm_dtype_from_name(v);
            if (dt < 0 || dt == COMM_INT64) mp_usage_error("comm-bench", "--dtype takes fp32, fp16, bf16 or int32, not '%s'", v);
            a->dt = (comm_dtype)dt;
        } else {
            mp_usage_error("comm-bench", "unknown option '%s'", f);
        }
    }
    if (a->min_bytes > a->max_bytes) mp_usage_error("comm-bench", "--min (%.0f) is larger than --max (%.0f)", a->min_bytes, a->max_bytes);
    bool any = false;
    for (int k = 0; k < NOPS; k++) {
        a->op_on[k] = strcmp(op, "all") == 0 || strcmp(op, comm_op_name(OPS[k].op)) == 0;
        any |= a->op_on[k];
    }
    if (!any) mp_usage_error("comm-bench", "--op takes allreduce, allgather, reduce_scatter, broadcast or all, not '%s'", op);
    /* --algo: all, or a comma-separated list such as ring,native */
    for (const char *p = algo; *p;) {
        size_t n = strcspn(p, ",");
        bool all = n == 3 && strncmp(p, "all", 3) == 0, known = all;
        for (int k = 0; k < NALGOS; k++) {
            const char *name = comm_algo_name(ALGOS[k]);
            bool in_all = ALGOS[k] != COMM_ALGO_HIER || a->ranks_per_node > 0;
            bool match = (all && in_all) || (strlen(name) == n && strncmp(p, name, n) == 0);
            a->algo_on[k] |= match;
            known |= match;
        }
        if (!known)
            mp_usage_error("comm-bench", "--algo takes ring, tree, rhd, chain, native, hierarchical, all or a list such as ring,native; "
                                         "not '%.*s'", (int)n, p);
        p += n + (p[n] == ',');
    }
    any = false;
    for (int k = 0; k < NALGOS; k++) any |= a->algo_on[k];
    if (!any) mp_usage_error("comm-bench", "--algo takes ring, tree, rhd, chain, native, hierarchical, all or a list such "
                                              "as ring,native");
}

/* ---------------------------------------------------------------- the data and its check */

/* Rank r's element i: a small integer, so every sum over ranks is exact in every type (bf16 holds
 * integers up to 256 exactly; |value| <= 7 and at most 36 ranks keep sums there). */
static int check_value(int rank, size_t i) { return (int)((i * 7 + (size_t)rank * 5) % 15) - 7; }

static void fill(void *buf, size_t count, comm_dtype dt, int rank, size_t first) {
    for (size_t i = 0; i < count; i++) {
        int v = check_value(rank, first + i);
        float f = (float)v;
        switch (dt) {
        case COMM_FP32: ((float *)buf)[i] = f; break;
        case COMM_FP16: fp_f32_to_f16((uint16_t *)buf + i, &f, 1); break;
        case COMM_BF16: fp_f32_to_bf16((uint16_t *)buf + i, &f, 1); break;
        default: ((int32_t *)buf)[i] = v; break;
        }
    }
}

static double element(const void *buf, size_t i, comm_dtype dt) {
    float f;
    switch (dt) {
    case COMM_FP32: return ((const float *)buf)[i];
    case COMM_FP16: fp_f16_to_f32(&f, (const uint16_t *)buf + i, 1); return f;
    case COMM_BF16: fp_bf16_to_f32(&f, (const uint16_t *)buf + i, 1); return f;
    default: return ((const int32_t *)buf)[i];
    }
}

static long long sum_over_ranks(int p, size_t i) {
    long long s = 0;
    for (int r = 0; r < p; r++) s += check_value(r, i);
    return s;
}

/* Elements of this rank's result that differ from the known answer. */
static long long count_wrong(comm_op op, const void *recv, size_t count, comm_dtype dt, int rank, int p) {
    long long wrong = 0;
    for (size_t i = 0; i < count; i++) {
        double want;
        switch (op) {
        case COMM_OP_ALLREDUCE: want = (double)sum_over_ranks(p, i); break;
        case COMM_OP_REDUCE_SCATTER: want = (double)sum_over_ranks(p, (size_t)rank * count + i); break;
        case COMM_OP_ALLGATHER: want = check_value((int)(i / (count / (size_t)p)), i % (count / (size_t)p)); break;
        default: want = check_value(0, i); break; /* broadcast from rank 0 */
        }
        wrong += element(recv, i, dt) != want;
    }
    return wrong;
}

/* ---------------------------------------------------------------- one measurement */

static void run_once(comm_t *c, comm_op op, comm_algo algo, const void *send, void *recv, size_t count, comm_dtype dt) {
    size_t per_rank = count / (size_t)comm_size(c);
    switch (op) {
    case COMM_OP_ALLREDUCE: comm_allreduce(c, send, recv, count, dt, COMM_SUM, algo); break;
    case COMM_OP_ALLGATHER: comm_allgather(c, send, recv, per_rank, dt, algo); break;
    case COMM_OP_REDUCE_SCATTER: comm_reduce_scatter(c, send, recv, per_rank, dt, COMM_SUM, algo); break;
    default: comm_broadcast(c, recv, count, dt, 0, algo); break;
    }
}

static long long max_over_ranks(comm_t *c, long long v) {
    int64_t x = v;
    comm_allreduce(c, &x, &x, 1, COMM_INT64, COMM_MAX, COMM_ALGO_NATIVE);
    return x;
}

static long long sum_ranks(comm_t *c, long long v) {
    int64_t x = v;
    comm_allreduce(c, &x, &x, 1, COMM_INT64, COMM_SUM, COMM_ALGO_NATIVE);
    return x;
}

/* Average seconds per call (slowest rank), after warm-up; the number of timed calls shrinks for large
 * messages so one size takes about budget_s. */
static double time_calls(comm_t *c, const bench_args *a, comm_op op, comm_algo algo, const void *send, void *recv,
                         size_t count) {
    comm_barrier(c);
    double t0 = mp_now();
    for (int i = 0; i < a->warmup; i++) run_once(c, op, algo, send, recv, count, a->dt);
    double per_call = (mp_now() - t0) / a->warmup;
    long long iters = a->iters;
    long long affordable = (long long)(a->budget_s / (per_call > 1e-9 ? per_call : 1e-9));
    if (affordable < iters) iters = affordable < 1 ? 1 : affordable;
    iters = -max_over_ranks(c, -iters); /* the smallest count any rank chose: all must agree */
    comm_barrier(c);
    t0 = mp_now();
    for (long long i = 0; i < iters; i++) run_once(c, op, algo, send, recv, count, a->dt);
    long long ns = (long long)((mp_now() - t0) / (double)iters * 1e9);
    return (double)max_over_ranks(c, ns) * 1e-9;
}

/* ---------------------------------------------------------------- fit */

/* t = alpha + bytes * inv_beta by least squares on the relative error (weights 1/t^2): plain least
 * squares would let the largest messages decide alpha too. A latency cannot be negative: when the free fit
 * says it is (large sizes only, where alpha drowns in the noise), alpha is held at 0, beta refitted, and
 * *bounded set. false when it has too few points. */
static bool fit_alpha_beta(const series *s, double *alpha, double *inv_beta, bool *bounded) {
    double sw = 0, sx = 0, sxx = 0, sy = 0, sxy = 0;
    for (int i = 0; i < s->n; i++) {
        double w = 1.0 / (s->seconds[i] * s->seconds[i]), x = s->bytes[i], y = s->seconds[i];
        sw += w, sx += w * x, sxx += w * x * x, sy += w * y, sxy += w * x * y;
    }
    double det = sw * sxx - sx * sx;
    if (s->n < 2 || !(fabs(det) > 0)) return false;
    *alpha = (sxx * sy - sx * sxy) / det;
    *inv_beta = (sw * sxy - sx * sy) / det;
    *bounded = *alpha < 0;
    if (*bounded) *alpha = 0, *inv_beta = sxy / sxx;
    return true;
}

static void format_bytes(double b, char *out, size_t cap) {
    static const char *const UNITS[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    while (b >= 1024 && u < 3) b /= 1024, u++;
    snprintf(out, cap, b == floor(b) ? "%.0f %s" : "%.1f %s", b, UNITS[u]);
}

static void report_fits(const series *all, int nseries, int p) {
    printf("#\n# alpha-beta fit per algorithm: t = alpha + size / beta (weighted least squares over the sizes)\n");
    printf("# %-15s %-12s %12s %12s %6s\n", "op", "algo", "alpha(us)", "beta(GB/s)", "sizes");
    const series *ring = NULL, *tree = NULL;
    double a_ring = 0, b_ring = 0, a_tree = 0, b_tree = 0;
    bool any_bounded = false;
    for (int k = 0; k < nseries; k++) {
        const series *s = &all[k];
        double alpha, inv_beta;
        bool bounded;
        if (!fit_alpha_beta(s, &alpha, &inv_beta, &bounded)) {
            printf("  %-15s %-12s %12s %12s %6d\n", comm_op_name(OPS[s->op].op), comm_algo_name(ALGOS[s->algo]), "n/a", "n/a",
                   s->n);
            continue;
        }
        char beta[32];
        if (inv_beta > 0) snprintf(beta, sizeof beta, "%.3f", 1.0 / inv_beta / 1e9);
        else snprintf(beta, sizeof beta, "n/a");
        char lat[32];
        snprintf(lat, sizeof lat, bounded ? "%.2f*" : "%.2f", alpha * 1e6);
        any_bounded |= bounded;
        printf("  %-15s %-12s %12s %12s %6d\n", comm_op_name(OPS[s->op].op), comm_algo_name(ALGOS[s->algo]), lat, beta,
               s->n);
        if (OPS[s->op].op == COMM_OP_ALLREDUCE && ALGOS[s->algo] == COMM_ALGO_RING) ring = s, a_ring = alpha, b_ring = inv_beta;
        if (OPS[s->op].op == COMM_OP_ALLREDUCE && ALGOS[s->algo] == COMM_ALGO_TREE) tree = s, a_tree = alpha, b_tree = inv_beta;
    }
    if (any_bounded)
        printf("# * these sizes cannot resolve the latency (the free fit gave alpha < 0): alpha held at 0; add small "
               "sizes (--min 8) to measure it\n");
    if (!ring || !tree || p < 2) return;
    /* Measured: the smallest size from which ring is faster than tree at every size measured. */
    int from = -1;
    for (int i = ring->n - 1; i >= 0 && i < tree->n && ring->seconds[i] < tree->seconds[i]; i--) from = i;
    char measured[96] = "ring allreduce is not faster than tree at the largest size measured", fitted[96], at[32];
    if (from >= 0) {
        format_bytes(ring->bytes[from], at, sizeof at);
        snprintf(measured, sizeof measured, "ring allreduce beats tree at every size from %s up (measured)", at);
    }
    /* The fitted lines a + n b cross at n* = (a_ring - a_tree) / (b_tree - b_ring) when that is positive. */
    double cross = (a_ring - a_tree) / (b_tree - b_ring);
    if (b_tree > b_ring && a_ring > a_tree) {
        format_bytes(cross, at, sizeof at);
        snprintf(fitted, sizeof fitted, "the fits cross at %s", at);
    } else if (a_ring <= a_tree && b_ring <= b_tree) {
        snprintf(fitted, sizeof fitted, "the ring's fit is below the tree's at every size");
    } else if (a_ring >= a_tree && b_ring >= b_tree) {
        snprintf(fitted, sizeof fitted, "the tree's fit is below the ring's at every size");
    } else {
        format_bytes(cross, at, sizeof at);
        snprintf(fitted, sizeof fitted, "the fits cross at %s, but the tree wins above it", at);
    }
    printf("# %s; %s\n", measured, fitted);
}

/* ---------------------------------------------------------------- main */

int cmd_comm_bench(int argc, char **argv) {
    bench_args a;
    parse_args(argc, argv, &a);
    comm_t *c = comm_init(NULL, NULL);
    if (a.ranks_per_node > 0) comm_set_ranks_per_node(c, a.ranks_per_node);
    const int p = comm_size(c), rank = comm_rank(c);
    const size_t elem = comm_dtype_size(a.dt);
    size_t max_count = (size_t)(a.max_bytes / (double)elem);
    if (max_count < 1) max_count = 1;
    void *send = mem_alloc(max_count * elem, MEM_COMM, "comm-bench send buffer");
    void *recv = mem_alloc(max_count * elem, MEM_COMM, "comm-bench receive buffer");
    if (rank == 0) {
        printf("# mixpar comm-bench: %d rank%s (%s backend), %s, %d timed calls per size (fewer past --budget %.2g s), "
               "%d warm-up\n", p, p == 1 ? "" : "s", comm_backend_name(c), comm_dtype_name(a.dt), a.iters, a.budget_s,
               a.warmup);
        int k = comm_ranks_per_node(c);
        bool hier_on = false;
        for (int j = 0; j < NALGOS; j++) hier_on |= a.algo_on[j] && ALGOS[j] == COMM_ALGO_HIER;
        if (hier_on)
            printf("# hierarchical: %d ranks per node, %d node%s\n", k > 0 && k < p ? k : p, k > 0 && k < p ? (p + k - 1) / k : 1,
                   k > 0 && k < p && (p + k - 1) / k > 1 ? "s" : "");
        if (p == 1) printf("# one rank: nothing crosses a link, busbw is 0 (launch with: mixpar run -n 4 -- mixpar comm-bench ...)\n");
        printf("# busbw factors for p = %d:", p);
        for (int k = 0; k < NOPS; k++)
            if (a.op_on[k]) printf(" %s %s = %.3g;", comm_op_name(OPS[k].op), OPS[k].factor_text, OPS[k].factor(p));
        printf("\n#\n# %-15s %-12s %12s %12s %6s %11s %12s %12s %7s\n", "op", "algo", "size(B)", "count", "type",
               "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
        fflush(stdout);
    }
    series *all = calloc(NOPS * NALGOS, sizeof *all);
    MP_ASSERT(all, "out of memory");
    int nseries = 0;
    long long total_wrong = 0;
    for (int k = 0; k < NOPS; k++) {
        if (!a.op_on[k]) continue;
        for (int j = 0; j < NALGOS; j++) {
            if (!a.algo_on[j] || !comm_algo_supported(OPS[k].op, ALGOS[j])) continue;
            series *s = &all[nseries++];
            s->op = k, s->algo = j;
            bool per_rank_blocks = OPS[k].op == COMM_OP_ALLGATHER || OPS[k].op == COMM_OP_REDUCE_SCATTER;
            for (double bytes = a.min_bytes; bytes <= a.max_bytes && s->n < MAX_SIZES; bytes *= 2) {
                size_t count = (size_t)(bytes / (double)elem);
                if (per_rank_blocks) count -= count % (size_t)p; /* whole blocks per rank */
                if (count == 0) continue;
                double seconds = time_calls(c, &a, OPS[k].op, ALGOS[j], send, recv, count);
                /* The check: known inputs, one more call, every element compared. */
                size_t send_count = OPS[k].op == COMM_OP_ALLGATHER ? count / (size_t)p : count;
                fill(send, send_count, a.dt, rank, 0);
                if (OPS[k].op == COMM_OP_BROADCAST) {
                    if (rank == 0) fill(recv, count, a.dt, 0, 0);
                    else memset(recv, 0, count * elem);
                } else {
                    memset(recv, 0, count * elem);
                }
                run_once(c, OPS[k].op, ALGOS[j], send, recv, count, a.dt);
                size_t result_count = OPS[k].op == COMM_OP_REDUCE_SCATTER ? count / (size_t)p : count;
                long long wrong = sum_ranks(c, count_wrong(OPS[k].op, recv, result_count, a.dt, rank, p));
                total_wrong += wrong;
                double size_b = (double)(count * elem), algbw = size_b / seconds / 1e9;
                s->bytes[s->n] = size_b;
                s->seconds[s->n] = seconds;
                s->n++;
                if (rank == 0) {
                    printf("  %-15s %-12s %12.0f %12zu %6s %11.2f %12.3f %12.3f %7lld\n", comm_op_name(OPS[k].op),
                           comm_algo_name(ALGOS[j]), size_b, count, comm_dtype_name(a.dt), seconds * 1e6, algbw,
                           algbw * OPS[k].factor(p), wrong);
                    fflush(stdout);
                }
            }
        }
    }
    if (rank == 0) {
        report_fits(all, nseries, p);
        printf("# %lld wrong element%s in all\n", total_wrong, total_wrong == 1 ? "" : "s");
    }
    free(all);
    mem_free(send);
    mem_free(recv);
    comm_finalize(c);
    return total_wrong ? 1 : 0;
}
