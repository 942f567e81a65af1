/* test_lab14_hidden.c: lab 14 hidden tests: Slurm alone, OpenMPI's own checks, leftover rendezvous variables,
 * an empty MASTER_ADDR, LOCAL_WORLD_SIZE above WORLD_SIZE, and a one-process torchrun job. */
#include "../../../labs/lab14-launching/tests/lab14_env.h"

MPT_TEST(slurm_alone_is_slurm) {
    char *vars[] = {"SLURM_PROCID=5", "SLURM_NTASKS=16", "SLURM_LOCALID=1", "HOME=/root", NULL};
    launch_env e;
    lab14_parse_ok(vars, &e, "srun's variables alone");
    MPT_CHECK_EQ_I64(LAUNCH_SLURM, e.kind, "kind (only Slurm's variables are set)");
    MPT_CHECK_EQ_I64(5, e.rank, "rank from SLURM_PROCID");
    MPT_CHECK_EQ_I64(16, e.world_size, "world_size from SLURM_NTASKS");
    MPT_CHECK_EQ_I64(1, e.local_rank, "local_rank from SLURM_LOCALID");
}

MPT_TEST(openmpi_rank_not_below_size) {
    char *vars[] = {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=2", "SLURM_PROCID=0", "SLURM_NTASKS=1", NULL};
    lab14_parse_fails(vars, (const char *[]){"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=2", NULL},
                      "OpenMPI rank 2 of 2 (OpenMPI's variables win over Slurm's, and are checked)");
}

MPT_TEST(torchrun_leftover_rendezvous_only) {
    /* A shell that once ran torchrun by hand: only MASTER_ADDR and MASTER_PORT remain. */
    char *vars[] = {"MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500", NULL};
    lab14_parse_fails(vars, (const char *[]){"RANK", "WORLD_SIZE", "LOCAL_RANK", "missing", NULL},
                      "MASTER_ADDR and MASTER_PORT with no RANK, WORLD_SIZE, LOCAL_RANK");
}

MPT_TEST(torchrun_empty_master_addr) {
    char *vars[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=", "MASTER_PORT=29500", NULL};
    lab14_parse_fails(vars, (const char *[]){"MASTER_ADDR", NULL}, "MASTER_ADDR set but empty");
}

MPT_TEST(torchrun_local_world_size_above_world_size) {
    char *vars[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=8", "MASTER_ADDR=h",
                    "MASTER_PORT=29500", NULL};
    lab14_parse_fails(vars, (const char *[]){"LOCAL_WORLD_SIZE=8", "WORLD_SIZE=2", NULL},
                      "LOCAL_WORLD_SIZE=8 with WORLD_SIZE=2");
}

MPT_TEST(torchrun_world_size_one) {
    char *vars[] = {"RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "MASTER_ADDR=localhost",
                    "MASTER_PORT=65535", NULL};
    launch_env e;
    lab14_parse_ok(vars, &e, "a one-process torchrun job");
    MPT_CHECK_EQ_I64(LAUNCH_TORCHRUN, e.kind, "kind");
    MPT_CHECK_EQ_I64(1, e.world_size, "world_size");
    MPT_CHECK_EQ_I64(65535, e.master_port, "master_port 65535 (the largest port)");
}
