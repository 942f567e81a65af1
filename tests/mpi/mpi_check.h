/* mpi_check.h: what the multi-rank test programs share: each rank notes its first complaint in a check, and
 * rank 0 gathers them with plain MPI (not the code under test) and prints one "ok - NAME (p=N)" or
 * "not ok - NAME (p=N)" line with the failing ranks' complaints; and the test data every program draws.
 * Included by the one .c file of each program under tests/mpi/ (its state is that program's own). */
#ifndef MIXPAR_TESTS_MPI_CHECK_H
#define MIXPAR_TESTS_MPI_CHECK_H

#include "base/rng.h"
#include "comm/comm.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static comm_t *world;
static int rank, nranks;
static int failed_checks;
static char complaint[256]; /* this rank's first complaint in the running check */

/* Notes what went wrong on this rank; only the first complaint of a check is kept. */
static void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static void complain(const char *fmt, ...) {
    if (complaint[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(complaint, sizeof complaint, fmt, ap);
    va_end(ap);
}

/* Ends a check on every rank: rank 0 prints its line and up to three ranks' complaints. */
static void __attribute__((unused)) report(const char *name) {
    char *all = rank == 0 ? malloc(sizeof complaint * (size_t)nranks) : NULL;
    MPI_Gather(complaint, sizeof complaint, MPI_CHAR, all, sizeof complaint, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        int bad = 0;
        for (int r = 0; r < nranks; r++) bad += all[r * sizeof complaint] != 0;
        printf("%s - %s (p=%d)\n", bad ? "not ok" : "ok", name, nranks);
        for (int r = 0, shown = 0; r < nranks && shown < 3; r++)
            if (all[r * sizeof complaint]) printf("    rank %d: %s\n", r, all + r * sizeof complaint), shown++;
        fflush(stdout);
        failed_checks += bad != 0;
        free(all);
    }
    complaint[0] = '\0';
}

/* report() with the check's name formatted. */
static void reportf(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static void reportf(const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    report(name);
}

static void *__attribute__((unused)) xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return p;
}

/* Starts the program's world communicator; under anything but mpirun it says so and stops (exit 2). */
static void __attribute__((unused)) start_under_mpirun(int *argc, char ***argv, const char *program) {
    world = comm_init(argc, argv);
    rank = comm_rank(world);
    nranks = comm_size(world);
    if (strcmp(comm_backend_name(world), "mpi") != 0) {
        fprintf(stderr, "%s: run me under mpirun (backend is %s)\n", program, comm_backend_name(world));
        exit(2);
    }
}

/* Small integers: every sum over <= 8 ranks is exact in fp32, bf16 and fp16, in any order. */
static float __attribute__((unused)) small_int(uint64_t seed, int r, size_t i) {
    return (float)((int)(mp_hash32(seed * 1000003u + (uint64_t)r, i) % 17u) - 8);
}
/* Uniform in [-1, 1): sums round, so order matters. */
static float __attribute__((unused)) uniform(uint64_t seed, int r, size_t i) {
    return (float)(mp_hash32(seed * 7919u + (uint64_t)r, i) >> 8) * 0x1p-23f - 1.0f;
}

#endif
