/* cmd_run.c: `mixpar run -n N -- PROGRAM ARGS`: start a program on N ranks through mpirun. */
#include "cli/commands.h"

#include "base/error.h"
#include "base/mem.h"
#include "base/parse.h"
#include "comm/launch.h"
#include "dist/fsdp.h"
#include "model/model.h"
#include "train/trainer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A hostfile must be a regular file we can read: a directory (as root, access() says any path is readable)
 * would reach mpirun, whose parser stops with "input in flex scanner failed". */
static void check_hostfile(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) mp_usage_error("run", "cannot read the hostfile '%s': %s", path, strerror(errno));
    struct stat st;
    char byte;
    bool regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    bool readable = regular && (fread(&byte, 1, 1, f) == 1 || !ferror(f));
    fclose(f);
    if (!regular) mp_usage_error("run", "cannot read the hostfile '%s': not a regular file (expected lines like \"node1 slots=8\")", path);
    if (!readable) mp_usage_error("run", "cannot read the hostfile '%s': %s", path, strerror(errno));
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: mixpar run -n N [--hostfile FILE] [--dry-run] -- PROGRAM [ARGS...]\n"
            "\n"
            "Starts PROGRAM on N ranks with OpenMPI's mpirun; each rank's comm_init() then finds the others.\n"
            "It adds what mpirun needs here: --allow-run-as-root when run as root, --oversubscribe when N is\n"
            "more than this machine's cores (%d), and -x for every MIXPAR_*, OMP_* and OPENBLAS_* variable so\n"
            "ranks on other machines see them too. The exit code is mpirun's: 0 when every rank exits 0.\n"
            "The ranks die with their launcher: killing mixpar run or mpirun, even with kill -9, ends every rank\n"
            "(a parent-death signal on mpirun and on each rank), so none goes on writing the run directory.\n"
            "\n"
            "  -n, --ranks N      number of ranks (processes), >= 1\n"
            "  --hostfile FILE    machines to use, in mpirun's hostfile format (\"node1 slots=8\" per line)\n"
            "  --dry-run          print the mpirun command, after the settings a one-machine job starts with, instead of\n"
            "                     running it\n"
            "  --enable-recovery  a rank that dies does not end the job; the others go on (and time out\n"
            "                     after MIXPAR_COMM_TIMEOUT). For failure drills: mpirun then exits 0\n"
            "\n"
            "examples:\n"
            "  mixpar run -n 4 -- build/mixpar comm-bench --op allreduce --algo all\n"
            "  MIXPAR_ALLREDUCE=ring mixpar run -n 2 -- build/mixpar train ...\n"
            "\n"
            "Slurm: skip mixpar run and let srun start the ranks; comm_init() recognises them (PMIX_RANK):\n"
            "  srun --mpi=pmix -N 2 --ntasks-per-node=8 build/mixpar comm-bench --op allreduce\n"
            "Before starting `mixpar train` on this machine it checks the planner's bytes per rank times N\n"
            "against the memory available (MemAvailable) and refuses a run that cannot fit, with the plan\n"
            "and what would fit (MIXPAR_NO_MEMORY_CHECK=1 skips the check; MIXPAR_AVAILABLE_MEMORY=24GB\n"
            "checks against that size instead).\n"
            "\n"
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

/* Bytes of memory the system can give without swapping (/proc/meminfo's MemAvailable); 0 if unknown.
 * MIXPAR_AVAILABLE_MEMORY ("24GB") says it instead: for a check of a machine other than this one, and tests. */
static uint64_t available_memory(void) {
    const char *bad;
    uint64_t bytes = mem_system_available(&bad);
    if (bad) mp_usage_error("run", "MIXPAR_AVAILABLE_MEMORY must be a size such as 24GB or 64GiB, not '%s'", bad);
    return bytes;
}

static double gb(uint64_t bytes) { return (double)bytes / 1e9; }

/* `mixpar run -n N -- mixpar train ...` on this machine: the planner's bytes per rank (trainer_plan, what the run
 * header will record) times N against the memory available, before any rank starts. A run that cannot fit is
 * refused with the plan and what would fit (exit 2), instead of N ranks swapping or being killed while they
 * allocate. Anything the check cannot read (a config with errors, a vocabulary still to be built) is left to
 * the ranks, which report it themselves. */
static void check_train_fits(int ranks, char **program) {
    const char *base = strrchr(program[0], '/');
    base = base ? base + 1 : program[0];
    if (strcmp(base, "mixpar") != 0 || !program[1] || strcmp(program[1], "train") != 0) return;
    const char *env = getenv("MIXPAR_NO_MEMORY_CHECK");
    if (env && *env && strcmp(env, "0") != 0) return;
    const char *config = NULL, *sets[256];
    int nsets = 0;
    for (int i = 2; program[i] && program[i + 1]; i++) {
        if (strcmp(program[i], "--config") == 0) config = program[++i];
        else if (strcmp(program[i], "--set") == 0 && nsets < 256) sets[nsets++] = program[++i];
    }
    train_config cfg;
    data_err err; /* errors are the ranks' to report: here they only end the check */
    plan_result plan;
    if (!config || !trainer_plan_config(config, sets, nsets, ranks, &cfg, &plan, &err)) return;
    model_config mc = cfg.model.model;
    model_config_complete(&mc);
    uint64_t available = available_memory(), need = plan.total_bytes * (uint64_t)ranks;
    if (!available || need <= available) return;
    /* What full sharding would need: FSDP FULL_SHARD (ZeRO-3) over the same ranks. */
    train_config sharded = cfg;
    sharded.zero.stage = 0;
    sharded.fsdp.enabled = true;
    sharded.fsdp.sharding_strategy = FSDP_FULL_SHARD;
    plan_result alt;
    trainer_plan(&sharded, &mc, &alt);
    char hint[512];
    if (alt.total_bytes * (uint64_t)ranks <= available || cfg.fsdp.enabled)
        snprintf(hint, sizeof hint,
                 "%s: %.2f GB per rank, %.1f GB in all (`mixpar plan --zero all --world %d` compares the stages)",
                 cfg.fsdp.enabled ? "fewer ranks per machine, a smaller micro-batch or a smaller model"
                                  : "shard the model states with zero_optimization.stage 3 (or an fsdp section)",
                 gb(alt.total_bytes), gb(alt.total_bytes * (uint64_t)ranks), ranks);
    else
        snprintf(hint, sizeof hint, "even fully sharded it needs %.2f GB per rank: fewer ranks, a smaller micro-batch "
                 "or a smaller model", gb(alt.total_bytes));
    MP_FAIL_HINT("a run that fits in this machine's available memory (MIXPAR_NO_MEMORY_CHECK=1 skips this check)", hint,
                 "the plan needs %.2f GB per rank (weights %.2f, gradients %.2f, optimizer %.2f, activations %.2f, "
                 "gathered units and communication buffers %.2f, cast cache %.2f) x %d ranks = %.1f GB; %.1f GB available",
                 gb(plan.total_bytes), gb(plan.bytes[MEM_PARAM]), gb(plan.bytes[MEM_GRAD]),
                 gb(plan.bytes[MEM_OPTIM] + plan.bytes[MEM_MASTER]), gb(plan.bytes[MEM_ACT]), gb(plan.bytes[MEM_COMM]),
                 gb(plan.bytes[MEM_OTHER]), ranks, gb(need), gb(available));
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
            check_hostfile(o.hostfile);
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
    if (!o.hostfile) check_train_fits(o.ranks, program); /* one machine: every rank is here */
    if (dry_run) {
        char *cmd[512];
        const char *env[8];
        comm_launch_local_env(&o, env, (int)(sizeof env / sizeof env[0]));
        comm_launch_argv(&o, program, cmd, (int)(sizeof cmd / sizeof cmd[0]));
        for (int k = 0; env[k]; k++) printf("%s ", env[k]);
        for (int k = 0; cmd[k]; k++) printf("%s%s", k ? " " : "", cmd[k]);
        printf("\n");
        return 0;
    }
    return comm_launch_run(&o, program, NULL);
}
