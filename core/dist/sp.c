/* sp.c: sequence parallel's collectives over the sequence on the tp group and the sum of the norms' partial gradients (dist/sp.h). */
#include "dist/sp.h"

#include "base/error.h"
#include "base/mem.h"
#include "dist/tp.h"

#include <string.h>

/* Copies between the sequence order (B,T,C) and the rank order (tp, B, T/tp, C), where block r holds rank
 * r's slice: from src in one order into dst in the other (seq_to_ranks: src is in sequence order). */
static void reorder(const float *src, float *dst, int tp, int B, int T, int C, bool seq_to_ranks) {
    size_t run = (size_t)(T / tp) * (size_t)C; /* one sequence's slice on one rank */
    for (int r = 0; r < tp; r++)
        for (int b = 0; b < B; b++) {
            size_t at_ranks = ((size_t)r * B + b) * run, at_seq = (size_t)b * T * C + (size_t)r * run;
            memcpy(dst + (seq_to_ranks ? at_ranks : at_seq), src + (seq_to_ranks ? at_seq : at_ranks),
                   run * sizeof(float));
        }
}

void sp_gather_sequence(comm_t *tp, const float *slice, float *full, int B, int T, int C) {
    int P = comm_size(tp);
    size_t n = (size_t)B * (size_t)(T / P) * (size_t)C;
    if (B == 1) { /* one sequence: rank order is sequence order */
        comm_allgather(tp, slice, full, n, COMM_FP32, COMM_ALGO_DEFAULT);
        return;
    }
    float *ranks = mem_alloc(n * (size_t)P * sizeof(float), MEM_COMM, "sequence-parallel all-gather");
    comm_allgather(tp, slice, ranks, n, COMM_FP32, COMM_ALGO_DEFAULT);
    reorder(ranks, full, P, B, T, C, false);
    mem_free(ranks);
}

void sp_reduce_scatter_sequence(comm_t *tp, const float *full, float *slice, int B, int T, int C) {
    int P = comm_size(tp);
    size_t n = (size_t)B * (size_t)(T / P) * (size_t)C;
    if (B == 1) {
        comm_reduce_scatter(tp, full, slice, n, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
        return;
    }
    float *ranks = mem_alloc(n * (size_t)P * sizeof(float), MEM_COMM, "sequence-parallel reduce-scatter");
    reorder(full, ranks, P, B, T, C, true);
    comm_reduce_scatter(tp, ranks, slice, n, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
    mem_free(ranks);
}

static void gather_cb(void *ctx, const float *slice, float *full, int B, int T, int C) {
    sp_gather_sequence(ctx, slice, full, B, T, C);
}
static void reduce_scatter_cb(void *ctx, const float *full, float *slice, int B, int T, int C) {
    sp_reduce_scatter_sequence(ctx, full, slice, B, T, C);
}

model_shard sp_model_shard(mesh_t *mesh, int first, int last) {
    model_shard sh = tp_model_shard(mesh, first, last);
    if (mesh->tp_size == 1) return sh;
    sh.sequence_parallel = true;
    sh.seq_gather = gather_cb;
    sh.seq_reduce_scatter = reduce_scatter_cb;
    return sh;
}

void sp_sum_partial_grads(comm_t *tp, model *m) {
    int count;
    const model_tensor *t = model_tensors(m, &count);
    size_t n = 0;
    for (int i = 0; i < count; i++)
        if (model_tensor_seq_partial(m, &t[i])) n += t[i].size;
    if (n == 0) return;
    float *packed = mem_alloc(n * sizeof(float), MEM_COMM, "sequence-parallel norm gradients"), *g = model_grads(m);
    size_t at = 0;
    for (int i = 0; i < count; i++)
        if (model_tensor_seq_partial(m, &t[i])) {
            memcpy(packed + at, g + t[i].offset, t[i].size * sizeof(float));
            at += t[i].size;
        }
    comm_allreduce(tp, packed, packed, n, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
    at = 0;
    for (int i = 0; i < count; i++)
        if (model_tensor_seq_partial(m, &t[i])) {
            memcpy(g + t[i].offset, packed + at, t[i].size * sizeof(float));
            at += t[i].size;
        }
    mem_free(packed);
}
