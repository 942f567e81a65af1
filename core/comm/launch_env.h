/* launch_env.h: what the launcher told this process (rank, world size, local rank, rendezvous), read from
 * OpenMPI's, torchrun's or Slurm's environment variables into one struct, with a message for each mistake. */
#ifndef MIXPAR_COMM_LAUNCH_ENV_H
#define MIXPAR_COMM_LAUNCH_ENV_H

#include <stdbool.h>
#include <stddef.h>

/* Which launcher's variables describe this process. Precedence, highest first:
 *   1. OpenMPI (mpirun): OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE. MPI is mixpar's transport, so when
 *      mpirun started the process its numbers are the ones comm_init will get; stray RANK/WORLD_SIZE left in
 *      a shell, or Slurm's allocation variables around an mpirun, do not count.
 *   2. torchrun-style: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. torchrun
 *      started under srun sets these per worker while SLURM_PROCID describes its agent, so these win.
 *   3. Slurm (srun): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID.
 *   4. none: a plain single process. */
typedef enum { LAUNCH_NONE, LAUNCH_OPENMPI, LAUNCH_TORCHRUN, LAUNCH_SLURM } launch_kind;

typedef struct {
    launch_kind kind;
    int rank;             /* in the world, 0 .. world_size-1 (0 for LAUNCH_NONE) */
    int world_size;       /* >= 1 */
    int local_rank;       /* on this machine; -1 when the launcher does not say */
    int local_world_size; /* ranks on this machine; -1 when the launcher does not say */
    char master_addr[256]; /* torchrun's rendezvous host; "" for the others */
    int master_port;      /* 1 .. 65535; -1 for the others */
} launch_env;

/* Parses a NULL-terminated "NAME=VALUE" list (environ, or a test's own list) into *out. Returns true when the
 * variables are consistent; else false with a message naming the variable, what was found and what was
 * expected written into err (errcap bytes, always NUL-terminated). Variables of a launcher that lost on
 * precedence are not checked. */
bool launch_env_parse(char *const *vars, launch_env *out, char *err, size_t errcap);

/* launch_env_parse of this process's environment; a bad launch stops the program with the message (exit 2). */
void launch_env_read(launch_env *out);

/* Whether any torchrun-style variable (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT) is in the list: the cheap test callers make before parsing. */
bool launch_env_has_torchrun(char *const *vars);

const char *launch_kind_name(launch_kind kind);

#endif
