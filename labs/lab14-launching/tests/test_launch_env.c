/* test_launch_env.c: lab 14 visible tests: torchrun-style variables parsed and checked (every mistake gets a
 * message naming the variable), and which launcher wins when several left their variables. In-process. */
#include "lab14_env.h"

MPT_TEST(torchrun_full_set_parsed) {
    char *vars[] = {"PATH=/usr/bin", LAB14_TORCHRUN_OK, NULL};
    launch_env e;
    lab14_parse_ok(vars, &e, "a full torchrun set");
    MPT_CHECK_EQ_I64(LAUNCH_TORCHRUN, e.kind, "kind (LAUNCH_TORCHRUN) when only torchrun's variables are set");
    MPT_CHECK_EQ_I64(3, e.rank, "rank from RANK=3");
    MPT_CHECK_EQ_I64(8, e.world_size, "world_size from WORLD_SIZE=8");
    MPT_CHECK_EQ_I64(1, e.local_rank, "local_rank from LOCAL_RANK=1");
    MPT_CHECK_EQ_I64(4, e.local_world_size, "local_world_size from LOCAL_WORLD_SIZE=4");
    MPT_CHECK_EQ_I64(29500, e.master_port, "master_port from MASTER_PORT=29500");
    MPT_CHECK(strcmp(e.master_addr, "node0") == 0, "master_addr should be \"node0\", got \"%s\"", e.master_addr);
}

MPT_TEST(torchrun_without_local_world_size) {
    char *vars[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=1234", NULL};
    launch_env e;
    lab14_parse_ok(vars, &e, "torchrun without LOCAL_WORLD_SIZE (older launchers leave it out)");
    MPT_CHECK_EQ_I64(LAUNCH_TORCHRUN, e.kind, "kind");
    MPT_CHECK_EQ_I64(2, e.world_size, "world_size from WORLD_SIZE=2");
    MPT_CHECK_EQ_I64(-1, e.local_world_size, "local_world_size when LOCAL_WORLD_SIZE is not set (-1: unknown)");
    MPT_CHECK_EQ_I64(1234, e.master_port, "master_port");
}

/* Each required variable left out in turn: the message names the one missing. Then several at once (a worker that
 * has only RANK and WORLD_SIZE): the message names every one missing, not just the first found. */
MPT_TEST(torchrun_missing_variables_named) {
    static const char *const ALL[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=h", "MASTER_PORT=29500"};
    static const char *const NAMES[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"};
    for (int skip = 0; skip < 5; skip++) {
        char *vars[6];
        int n = 0;
        for (int i = 0; i < 5; i++)
            if (i != skip) vars[n++] = (char *)ALL[i];
        vars[n] = NULL;
        const char *needles[] = {NAMES[skip], "missing", NULL};
        char what[64];
        snprintf(what, sizeof what, "torchrun variables without %s", NAMES[skip]);
        lab14_parse_fails(vars, needles, what);
    }
    char *two_only[] = {"RANK=0", "WORLD_SIZE=2", NULL};
    lab14_parse_fails(two_only, (const char *[]){"LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "missing", NULL},
                      "RANK and WORLD_SIZE only (name all three missing, not the first one found)");
}

MPT_TEST(torchrun_rank_not_below_world_size) {
    char *equal[] = {"RANK=4", "WORLD_SIZE=4", "LOCAL_RANK=0", "MASTER_ADDR=h", "MASTER_PORT=29500", NULL};
    lab14_parse_fails(equal, (const char *[]){"RANK=4", "WORLD_SIZE=4", NULL}, "RANK=4 with WORLD_SIZE=4");
    char *above[] = {"RANK=9", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", "MASTER_PORT=29500", NULL};
    lab14_parse_fails(above, (const char *[]){"RANK=9", "WORLD_SIZE=2", NULL}, "RANK=9 with WORLD_SIZE=2");
    char *last[] = {"RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=0", "MASTER_ADDR=h", "MASTER_PORT=29500", NULL};
    launch_env e;
    lab14_parse_ok(last, &e, "RANK=3 with WORLD_SIZE=4 (the last rank)");
    MPT_CHECK_EQ_I64(3, e.rank, "rank 3 of 4");
}

MPT_TEST(torchrun_non_numbers_and_negatives) {
    struct { const char *bad, *name; } cases[] = {
        {"RANK=abc", "RANK"},        {"RANK=-1", "RANK"},           {"WORLD_SIZE=0", "WORLD_SIZE"},
        {"WORLD_SIZE=two", "WORLD_SIZE"}, {"WORLD_SIZE=", "WORLD_SIZE"}, {"LOCAL_RANK=-2", "LOCAL_RANK"},
        {"LOCAL_RANK=1.5", "LOCAL_RANK"}, {"MASTER_PORT=70000", "MASTER_PORT"}, {"MASTER_PORT=0", "MASTER_PORT"},
        {"MASTER_PORT=http", "MASTER_PORT"}, {"LOCAL_WORLD_SIZE=0", "LOCAL_WORLD_SIZE"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        /* The good set first, the bad value after it: the last one wins, as with putenv. */
        char *vars[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=h", "MASTER_PORT=29500",
                        (char *)cases[k].bad, NULL};
        lab14_parse_fails(vars, (const char *[]){cases[k].name, NULL}, cases[k].bad);
    }
}

MPT_TEST(torchrun_local_rank_not_below_local_world_size) {
    char *vars[] = {"RANK=2", "WORLD_SIZE=8", "LOCAL_RANK=4", "LOCAL_WORLD_SIZE=4", "MASTER_ADDR=h",
                    "MASTER_PORT=29500", NULL};
    lab14_parse_fails(vars, (const char *[]){"LOCAL_RANK=4", "LOCAL_WORLD_SIZE=4", NULL},
                      "LOCAL_RANK=4 with LOCAL_WORLD_SIZE=4");
    char *no_lws[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=2", "MASTER_ADDR=h", "MASTER_PORT=29500", NULL};
    lab14_parse_fails(no_lws, (const char *[]){"LOCAL_RANK=2", NULL},
                      "LOCAL_RANK=2 with WORLD_SIZE=2 (no machine holds more ranks than the world)");
}

/* The rendezvous address: present is not enough, it must be usable. An empty MASTER_ADDR is refused; one of 255
 * characters fits launch_env's master_addr (256 bytes with the terminating 0) and is kept whole; one of 256 does not
 * fit and is refused, never cut short (a truncated host name would send the workers to the wrong machine). And a
 * one-machine job, LOCAL_WORLD_SIZE == WORLD_SIZE, is fine. */
MPT_TEST(torchrun_master_addr_empty_or_too_long) {
    char *empty[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=", "MASTER_PORT=29500", NULL};
    lab14_parse_fails(empty, (const char *[]){"MASTER_ADDR", NULL}, "MASTER_ADDR= (empty)");
    static char fits[16 + 255], too_long[16 + 256];
    launch_env e;
    snprintf(fits, sizeof fits, "MASTER_ADDR=%0255d", 7);
    snprintf(too_long, sizeof too_long, "MASTER_ADDR=%0256d", 7);
    char *ok[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", fits, "MASTER_PORT=29500", NULL};
    lab14_parse_ok(ok, &e, "a MASTER_ADDR of 255 characters with LOCAL_WORLD_SIZE == WORLD_SIZE (one machine)");
    MPT_CHECK(strlen(e.master_addr) == 255 && strcmp(e.master_addr, fits + strlen("MASTER_ADDR=")) == 0,
              "a MASTER_ADDR of 255 characters: expected it kept whole, got %zu characters", strlen(e.master_addr));
    MPT_CHECK_EQ_I64(2, e.local_world_size, "local_world_size from LOCAL_WORLD_SIZE=2 with WORLD_SIZE=2 (one machine)");
    char *bad[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", too_long, "MASTER_PORT=29500", NULL};
    lab14_parse_fails(bad, (const char *[]){"MASTER_ADDR", NULL},
                      "a MASTER_ADDR of 256 characters (master_addr holds 255 and the final 0: refuse it, never "
                      "truncate it)");
}

MPT_TEST(precedence_openmpi_over_torchrun) {
    /* mpirun started this process; RANK/WORLD_SIZE are left over from another job (even a bad one). */
    char *vars[] = {"RANK=7", "WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4",
                    "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=4", NULL};
    launch_env e;
    lab14_parse_ok(vars, &e, "OpenMPI's variables with stray torchrun ones");
    MPT_CHECK_EQ_I64(LAUNCH_OPENMPI, e.kind, "kind (mpirun's variables win: MPI is the transport)");
    MPT_CHECK_EQ_I64(1, e.rank, "rank from OMPI_COMM_WORLD_RANK, not RANK");
    MPT_CHECK_EQ_I64(4, e.world_size, "world_size from OMPI_COMM_WORLD_SIZE, not WORLD_SIZE");
}

MPT_TEST(precedence_torchrun_over_slurm) {
    /* torchrun inside an srun step: SLURM_PROCID describes torchrun's agent, RANK the worker. */
    char *vars[] = {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0", LAB14_TORCHRUN_OK, NULL};
    launch_env e;
    lab14_parse_ok(vars, &e, "torchrun's variables inside a Slurm step");
    MPT_CHECK_EQ_I64(LAUNCH_TORCHRUN, e.kind, "kind (torchrun's per-worker variables win over Slurm's)");
    MPT_CHECK_EQ_I64(3, e.rank, "rank from RANK=3, not SLURM_PROCID=1");
    MPT_CHECK_EQ_I64(8, e.world_size, "world_size from WORLD_SIZE=8, not SLURM_NTASKS=2");
}
