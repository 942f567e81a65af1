/* tp.c: Megatron-LM's tensor-parallel conjugate ops f and g and the column/row-parallel linear pair. */
#include "dist/tp.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/mem.h"
#include "ops/matmul.h"

#include <string.h>

void tp_copy_to_region_forward(comm_t *tp, float *x, size_t n) { (void)tp, (void)x, (void)n; }

void tp_copy_to_region_backward(comm_t *tp, float *x, size_t n) {
    comm_allreduce(tp, x, x, n, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
}

void tp_reduce_from_region_forward(comm_t *tp, float *x, size_t n) {
    comm_allreduce(tp, x, x, n, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
}

void tp_reduce_from_region_backward(comm_t *tp, float *x, size_t n) { (void)tp, (void)x, (void)n; }

void tp_column_linear_forward(comm_t *tp, float *out, const float *inp, const float *weight, const float *bias, int N,
                              int C, int OCl) {
    (void)tp; /* f's forward is the identity: the whole input is already on every tp rank */
    matmul_forward(out, inp, weight, bias, N, C, OCl);
}

void tp_column_linear_backward(comm_t *tp, float *dinp, float *dweight, float *dbias, const float *dout,
                               const float *inp, const float *weight, int N, int C, int OCl) {
    matmul_backward(NULL, dweight, dbias, dout, inp, weight, N, C, OCl);
    if (!dinp) return;
    size_t n = (size_t)N * (size_t)C;
    float *part = mem_alloc(n * sizeof(float), MEM_ACT, "tp column-parallel input gradient");
    /* LAB 28 BEGIN f's backward: this rank's share of dinp (dout @ its weight rows) into part, summed over tp, then added to dinp */
    /* This rank's part of dinp goes into a zeroed buffer, is summed over tp (f's backward), and only
     * then added: summing dinp itself would count what it already held P times. */
    memset(part, 0, n * sizeof(float));
    matmul_backward(part, NULL, NULL, dout, inp, weight, N, C, OCl);
    tp_copy_to_region_backward(tp, part, n);
    for (size_t i = 0; i < n; i++) dinp[i] += part[i];
    /* LAB 28 END */
    mem_free(part);
}

void tp_row_linear_forward(comm_t *tp, float *out, const float *inp, const float *weight, const float *bias, int N,
                           int Cl, int OC) {
    /* LAB 28 BEGIN g's forward: each rank's partial product over its input columns, summed over tp, the bias added once after the sum */
    matmul_forward(out, inp, weight, NULL, N, Cl, OC);
    tp_reduce_from_region_forward(tp, out, (size_t)N * (size_t)OC);
    if (!bias) return;
    for (int r = 0; r < N; r++)
        for (int o = 0; o < OC; o++) out[(size_t)r * OC + o] += bias[o];
    /* LAB 28 END */
}

void tp_row_linear_backward(comm_t *tp, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, int N, int Cl, int OC) {
    (void)tp; /* g's backward is the identity: dout is whole on every tp rank */
    matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, Cl, OC);
}

static void shard_sum(void *ctx, float *x, size_t n) {
    comm_allreduce(ctx, x, x, n, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
}
static void shard_max(void *ctx, float *x, size_t n) {
    comm_allreduce(ctx, x, x, n, COMM_FP32, COMM_MAX, COMM_ALGO_DEFAULT);
}

model_shard tp_model_shard(mesh_t *mesh, int first, int last) {
    return (model_shard){.tp_rank = mesh->tp_rank, .tp_size = mesh->tp_size, .first = first, .last = last,
                         .tp_sum = shard_sum, .tp_max = shard_max, .tp_ctx = mesh->tp};
}
