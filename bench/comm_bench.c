/* comm_bench.c: mixpar's ring allreduce against MPI_Allreduce for 4 MB to 256 MB messages, on 2 and 4 ranks
 * (busbw and the ratio). Started plainly (make bench), it launches itself under mpirun for each rank count. */
#include "base/clock.h"
#include "base/mem.h"
#include "comm/comm.h"
#include "comm/launch.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int RANK_COUNTS[] = {2, 4};
static const double SIZES_MB[] = {4, 16, 64, 256};
enum { NSIZES = sizeof SIZES_MB / sizeof SIZES_MB[0] };

/* Seconds per call, the slowest rank's average over `iters` calls after two warm-up calls. */
static double time_ring(comm_t *c, float *send, float *recv, size_t n, int iters) {
    for (int i = 0; i < 2; i++) comm_allreduce(c, send, recv, n, COMM_FP32, COMM_SUM, COMM_ALGO_RING);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = mp_now();
    for (int i = 0; i < iters; i++) comm_allreduce(c, send, recv, n, COMM_FP32, COMM_SUM, COMM_ALGO_RING);
    double t = (mp_now() - t0) / iters, worst;
    MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

static double time_mpi(float *send, float *recv, size_t n, int iters) {
    for (int i = 0; i < 2; i++) MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = mp_now();
    for (int i = 0; i < iters; i++) MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (mp_now() - t0) / iters, worst;
    MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

static int run_rank(void) {
    comm_t *c = comm_init(NULL, NULL);
    int p = comm_size(c), rank = comm_rank(c);
    size_t max_n = (size_t)(SIZES_MB[NSIZES - 1] * (1 << 20) / 4);
    float *send = mem_alloc(max_n * 4, MEM_COMM, "bench send"), *recv = mem_alloc(max_n * 4, MEM_COMM, "bench recv");
    for (size_t i = 0; i < max_n; i++) send[i] = (float)((i + (size_t)rank) % 7);
    const double factor = 2.0 * (p - 1) / p;
    if (rank == 0) {
        printf("%5s %9s %14s %14s %7s\n", "ranks", "size", "ring busbw", "MPI busbw", "ratio");
        fflush(stdout);
    }
    for (int k = 0; k < NSIZES; k++) {
        size_t n = (size_t)(SIZES_MB[k] * (1 << 20) / 4);
        int iters = SIZES_MB[k] >= 64 ? 3 : 8;
        /* Alternate the two, three times, and keep each one's best: other load on the machine hits both alike. */
        double ring = 1e30, mpi = 1e30;
        for (int round = 0; round < 3; round++) {
            double t = time_ring(c, send, recv, n, iters);
            if (t < ring) ring = t;
            t = time_mpi(send, recv, n, iters);
            if (t < mpi) mpi = t;
        }
        double bytes = (double)n * 4;
        if (rank == 0) {
            printf("%5d %6.0f MB %9.2f GB/s %9.2f GB/s %6.2fx\n", p, SIZES_MB[k], bytes / ring / 1e9 * factor,
                   bytes / mpi / 1e9 * factor, mpi / ring);
            fflush(stdout);
        }
    }
    mem_free(send);
    mem_free(recv);
    comm_finalize(c);
    return 0;
}

int main(int argc, char **argv) {
    if (getenv("OMPI_COMM_WORLD_SIZE")) return run_rank();
    (void)argc;
    if (!comm_launch_mpirun()) {
        printf("comm_bench: skipped: mpirun is not on PATH (make deps installs OpenMPI)\n");
        return 0;
    }
    printf("ring allreduce (mixpar, on send/recv) vs MPI_Allreduce, fp32; busbw = size / time x 2(p-1)/p\n");
    for (size_t i = 0; i < sizeof RANK_COUNTS / sizeof RANK_COUNTS[0]; i++) {
        comm_launch_opts o = {.ranks = RANK_COUNTS[i], .timeout_s = 600};
        char *program[] = {argv[0], NULL};
        int rc = comm_launch_run(&o, program, NULL);
        if (rc != 0) return rc;
    }
    return 0;
}
