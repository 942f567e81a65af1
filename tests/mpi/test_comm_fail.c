/* test_comm_fail.c: the communicator's failure paths under mpirun, one per run (tests/mpi/run.sh checks the
 * exit code, the message and the time taken):
 *   mismatch   rank 1 calls allreduce with one element fewer (run with MIXPAR_COMM_DEBUG=1)
 *   hang       rank 1 stops itself (SIGSTOP) before an allreduce; the others must time out
 *   kill       rank 1 kills itself (SIGKILL) before an allreduce
 *   size       rank 0 sends 10 elements, rank 1 receives 8
 *   bad-algo   an algorithm mixpar does not have for broadcast
 *   group-mismatch  on 4 ranks, the "tp" group of world ranks 2 and 3: rank 3 calls allreduce with one
 *              element fewer (MIXPAR_COMM_DEBUG=1): the message names the group and the world ranks
 *   group-hang on 4 ranks, world rank 3 stops itself; world rank 2, its tp partner, must time out naming
 *              the group, its world rank and the awaited peer's world rank
 *   bad-mesh   a 2 x 2 x 2 mesh on a world that is not 8 ranks: exit 2, expected/found/hint
 *   exit CODE  every rank finalizes and returns CODE (the launcher's record of the ranks' own exit codes) */
#include "comm/comm.h"
#include "dist/mesh.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    comm_t *world = comm_init(&argc, &argv);
    const int rank = comm_rank(world);
    const char *mode = argc > 1 ? argv[1] : "";
    float x[1000] = {0};
    if (strcmp(mode, "mismatch") == 0) {
        comm_allreduce(world, x, x, rank == 1 ? 999 : 1000, COMM_FP32, COMM_SUM, COMM_ALGO_RING);
    } else if (strcmp(mode, "hang") == 0 || strcmp(mode, "kill") == 0) {
        comm_barrier(world);
        if (rank == 1) raise(strcmp(mode, "hang") == 0 ? SIGSTOP : SIGKILL);
        comm_allreduce(world, x, x, 1000, COMM_FP32, COMM_SUM, COMM_ALGO_RING);
    } else if (strcmp(mode, "size") == 0) {
        if (rank == 0) comm_send(world, x, 10, COMM_FP32, 1, 0);
        if (rank == 1) comm_recv(world, x, 8, COMM_FP32, 0, 0);
    } else if (strcmp(mode, "bad-algo") == 0) {
        comm_broadcast(world, x, 10, COMM_FP32, 0, COMM_ALGO_RING);
    } else if (strcmp(mode, "group-mismatch") == 0 || strcmp(mode, "group-hang") == 0) {
        comm_t *tp = comm_split(world, rank / 2, rank);
        comm_set_name(tp, "tp");
        if (strcmp(mode, "group-mismatch") == 0) {
            comm_set_debug(tp, true);
            comm_allreduce(tp, x, x, rank == 3 ? 999 : 1000, COMM_FP32, COMM_SUM, COMM_ALGO_RING);
        } else {
            comm_barrier(world);
            if (rank == 3) raise(SIGSTOP);
            if (rank >= 2) comm_allreduce(tp, x, x, 1000, COMM_FP32, COMM_SUM, COMM_ALGO_RING);
        }
        comm_free(tp);
    } else if (strcmp(mode, "bad-mesh") == 0) {
        mesh_free(mesh_create(world, 2, 2, 2));
    } else if (strcmp(mode, "exit") == 0 && argc > 2) {
        /* every rank ends cleanly with this exit code (the launcher's record of the ranks' codes) */
        comm_barrier(world);
        comm_finalize(world);
        return atoi(argv[2]);
    } else {
        fprintf(stderr, "usage: test_comm_fail mismatch|hang|kill|size|bad-algo|group-mismatch|group-hang|bad-mesh|exit CODE\n");
        return 2;
    }
    printf("rank %d: the call returned\n", rank);
    comm_finalize(world);
    return 0;
}
