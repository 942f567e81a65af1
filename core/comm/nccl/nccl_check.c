/* nccl_check.c: build/cuda/nccl_check: the NCCL backend end to end, one rank per GPU under mpirun:
 *     mixpar run -n 2 -- build/cuda/nccl_check
 * allreduce (fp32, bf16, avg), allgather, reduce_scatter, broadcast and a split, on device buffers,
 * compared with values known exactly. Without a GPU it says so and exits 0. */
#include "comm/comm.h"
#include "fp/convert.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void expect(int rank, const char *what, const float *got, size_t n, float (*want)(size_t i)) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != want(i)) {
            fprintf(stderr, "nccl_check: rank %d: %s: element %zu is %g, want %g\n", rank, what, i, got[i], want(i));
            failures++;
            return;
        }
}

static int P, R;
static float want_sum(size_t i) { (void)i; return (float)P * (P + 1) / 2; }
static float want_avg(size_t i) { (void)i; return (float)(P + 1) / 2; }
static float want_gathered(size_t i) { return (float)(i / 1000 + 1); }
static float want_root(size_t i) { (void)i; return 1.0f; }

int main(int argc, char **argv) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("nccl_check: skipped: no CUDA device on this machine (the NCCL backend compiled and linked)\n");
        return 0;
    }
    setenv("MIXPAR_COMM", "nccl", 1);
    comm_t *c = comm_init(&argc, &argv);
    P = comm_size(c), R = comm_rank(c);
    const size_t n = (size_t)1000 * P;
    float *host = malloc(n * sizeof(float)), *d = NULL, *d2 = NULL;
    uint16_t *host16 = malloc(n * 2), *d16 = NULL;
    cudaMalloc((void **)&d, n * sizeof(float));
    cudaMalloc((void **)&d2, n * sizeof(float));
    cudaMalloc((void **)&d16, n * 2);

    for (size_t i = 0; i < n; i++) host[i] = (float)(R + 1);
    cudaMemcpy(d, host, n * 4, cudaMemcpyHostToDevice);
    comm_allreduce(c, d, d2, n, COMM_FP32, COMM_SUM, COMM_ALGO_NATIVE);
    cudaMemcpy(host, d2, n * 4, cudaMemcpyDeviceToHost);
    expect(R, "allreduce fp32 sum", host, n, want_sum);

    comm_allreduce(c, d, d, n, COMM_FP32, COMM_AVG, COMM_ALGO_DEFAULT);
    cudaMemcpy(host, d, n * 4, cudaMemcpyDeviceToHost);
    expect(R, "allreduce fp32 avg in place", host, n, want_avg);

    for (size_t i = 0; i < n; i++) host[i] = (float)(R + 1);
    fp_f32_to_bf16(host16, host, n);
    cudaMemcpy(d16, host16, n * 2, cudaMemcpyHostToDevice);
    comm_allreduce(c, d16, d16, n, COMM_BF16, COMM_SUM, COMM_ALGO_NATIVE);
    cudaMemcpy(host16, d16, n * 2, cudaMemcpyDeviceToHost);
    fp_bf16_to_f32(host, host16, n);
    expect(R, "allreduce bf16 sum", host, n, want_sum);

    for (size_t i = 0; i < 1000; i++) host[i] = (float)(R + 1);
    cudaMemcpy(d, host, 1000 * 4, cudaMemcpyHostToDevice);
    comm_allgather(c, d, d2, 1000, COMM_FP32, COMM_ALGO_NATIVE);
    cudaMemcpy(host, d2, n * 4, cudaMemcpyDeviceToHost);
    expect(R, "allgather", host, n, want_gathered);

    for (size_t i = 0; i < n; i++) host[i] = (float)(R + 1);
    cudaMemcpy(d, host, n * 4, cudaMemcpyHostToDevice);
    comm_reduce_scatter(c, d, d2, 1000, COMM_FP32, COMM_SUM, COMM_ALGO_NATIVE);
    cudaMemcpy(host, d2, 1000 * 4, cudaMemcpyDeviceToHost);
    expect(R, "reduce_scatter", host, 1000, want_sum);

    for (size_t i = 0; i < n; i++) host[i] = R == 0 ? 1.0f : -1.0f;
    cudaMemcpy(d, host, n * 4, cudaMemcpyHostToDevice);
    comm_broadcast(c, d, n, COMM_FP32, 0, COMM_ALGO_NATIVE);
    cudaMemcpy(host, d, n * 4, cudaMemcpyDeviceToHost);
    expect(R, "broadcast from rank 0", host, n, want_root);

    comm_t *half = comm_split(c, R % 2, R);
    if (half) {
        comm_barrier(half);
        comm_free(half);
    }
    comm_barrier(c);
    if (R == 0)
        printf("nccl_check: %d rank%s on %d GPU%s: allreduce fp32/bf16/avg, allgather, reduce_scatter, broadcast, "
               "split: %s\n", P, P == 1 ? "" : "s", devices, devices == 1 ? "" : "s", failures ? "FAILED" : "ok");
    cudaFree(d), cudaFree(d2), cudaFree(d16);
    free(host), free(host16);
    comm_finalize(c);
    return failures ? 1 : 0;
}
