/* cmd_run.c: `mixpar run -n N -- PROGRAM ARGS`: start a program on N ranks through mpirun. */
#include "cli/commands.h"

#include "base/error.h"
#include "base/parse.h"
#include "comm/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: mixpar run -n N [--hostfile FILE] [--dry-run] -- PROGRAM [ARGS...]\n"
            "\n"
            "Starts PROGRAM on N ranks with OpenMPI's mpirun; each rank's comm_init() then finds the others.\n"
            "It adds what mpirun needs here: --allow-run-as-root when run as root, --oversubscribe when N is\n"
            "more than this machine's cores (%d), and -x for every MIXPAR_*, OMP_* and OPENBLAS_* variable so\n"
            "ranks on other machines see them too. The exit code is mpirun's: 0 when every rank exits 0.\n"
            "\n"
            "  -n, --ranks N      number of ranks (processes), >= 1\n"
            "  --hostfile FILE    machines to use, in mpirun's hostfile format (\"node1 slots=8\" per line)\n"
            "  --dry-run          print the mpirun command instead of running it\n"
            "  --enable-recovery  a rank that dies does not end the job; the others go on (and time out\n"
            "                     after MIXPAR_COMM_TIMEOUT). For failure drills: mpirun then exits 0\n"
            "\n"
            "examples:\n"
            "  mixpar run -n 4 -- build/mixpar comm-bench --op allreduce --algo all\n"
            "  MIXPAR_ALLREDUCE=ring mixpar run -n 2 -- build/mixpar train ...\n"
            "\n"
            "Slurm: skip mixpar run and let srun start the ranks; comm_init() recognises them (PMIX_RANK):\n"
            "  srun --mpi=pmix -N 2 --ntasks-per-node=8 build/mixpar comm-bench --op allreduce\n"
            "torchrun: a job started with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,\n"
            "MASTER_PORT) and no mpirun stops with an explanation: mixpar's ranks connect through MPI.\n",
            comm_launch_cores());
}

/* PROGRAM as given (a path with a slash) or found on PATH, as execvp would. */
static bool program_exists(const char *program) {
    struct stat st;
    if (strchr(program, '/')) return stat(program, &st) == 0 && S_ISREG(st.st_mode) && access(program, X_OK) == 0;
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) {
        size_t n = strcspn(p, ":");
        char full[4096];
        snprintf(full, sizeof full, "%.*s/%s", (int)n, p, program);
        if (n && stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0) return true;
        p += n + (p[n] == ':');
    }
    return false;
}

int cmd_run(int argc, char **argv) {
    comm_launch_opts o = {.ranks = 0};
    bool dry_run = false;
    int i = 0;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "-n") == 0 || strcmp(a, "--ranks") == 0 || strcmp(a, "-np") == 0) {
            int64_t n;
            if (i + 1 >= argc) mp_usage_error("run", "%s needs a number of ranks", a);
            if (!parse_i64(argv[++i], &n) || n < 1 || n > 4096)
                mp_usage_error("run", "the number of ranks must be a whole number from 1 to 4096, not '%s'", argv[i]);
            o.ranks = (int)n;
        } else if (strcmp(a, "--hostfile") == 0) {
            if (i + 1 >= argc) mp_usage_error("run", "--hostfile needs a file");
            o.hostfile = argv[++i];
            if (access(o.hostfile, R_OK) != 0) mp_usage_error("run", "cannot read the hostfile '%s'", o.hostfile);
        } else if (strcmp(a, "--dry-run") == 0) {
            dry_run = true;
        } else if (strcmp(a, "--enable-recovery") == 0) {
            o.enable_recovery = true;
        } else if (a[0] != '-') {
            mp_usage_error("run", "missing '--' before the program '%s': mixpar run -n N -- PROGRAM ARGS", a);
        } else {
            mp_usage_error("run", "unknown option '%s' (the program to run goes after --)", a);
        }
    }
    /* Under torchrun each of its workers would start a whole mpirun job of its own. */
    if (!getenv("OMPI_COMM_WORLD_SIZE")) comm_launch_refuse_torchrun();
    if (o.ranks == 0) mp_usage_error("run", "say how many ranks with -n N");
    if (i >= argc) mp_usage_error("run", "missing '--' before the program to run: mixpar run -n %d -- PROGRAM ARGS", o.ranks);
    char **program = argv + i + 1;
    if (!program[0]) mp_usage_error("run", "no program after '--'");
    if (!program_exists(program[0]))
        mp_usage_error("run", "program '%s' not found%s", program[0],
                       strchr(program[0], '/') ? " (or not executable)" : " on PATH (give its path, e.g. build/mixpar)");
    if (!comm_launch_mpirun())
        mp_usage_error("run", "mpirun is not on PATH: install OpenMPI (make deps installs openmpi-bin), or set "
                              "MIXPAR_MPIRUN to its path");
    if (dry_run) {
        char *cmd[512];
        comm_launch_argv(&o, program, cmd, (int)(sizeof cmd / sizeof cmd[0]));
        for (int k = 0; cmd[k]; k++) printf("%s%s", k ? " " : "", cmd[k]);
        printf("\n");
        return 0;
    }
    return comm_launch_run(&o, program, NULL);
}
