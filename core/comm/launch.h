/* launch.h: starting a program on N ranks with mpirun: the argument list, and running it (mixpar run, tests). */
#ifndef MIXPAR_COMM_LAUNCH_H
#define MIXPAR_COMM_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int ranks;            /* -n, >= 1 */
    const char *hostfile; /* NULL: every rank on this machine */
    double timeout_s;     /* > 0: stop mpirun (and so its ranks) after this long; 0: wait for ever */
    bool enable_recovery; /* mpirun --enable-recovery: a dead rank does not end the job (for failure tests) */
    bool quiet;           /* mpirun -q: leave out mpirun's own explanations of a failed job */
} comm_launch_opts;

/* mpirun's full path from PATH (or MIXPAR_MPIRUN), or NULL when there is none. */
const char *comm_launch_mpirun(void);

/* The mpirun command that runs program_argv (NULL-terminated) on o->ranks ranks, into out (cap entries,
 * NULL-terminated); returns the number of arguments. Adds --allow-run-as-root when run as root,
 * --oversubscribe when the ranks outnumber this machine's cores (and no hostfile says otherwise), and
 * -x for each MIXPAR_*, OMP_*, OPENBLAS_* variable so ranks on other machines see them too. The strings
 * stay valid until the next call. */
int comm_launch_argv(const comm_launch_opts *o, char *const *program_argv, char **out, int cap);

/* The environment settings under which a job on this machine alone (no hostfile) starts about twice as fast,
 * as "NAME=value" strings into out (cap entries, NULL-terminated; static strings); returns how many. Each is left
 * out when the environment already sets that variable, so a user's own choice stands; a job with a hostfile gets
 * none. comm_launch_run sets them for mpirun, and mixpar run --dry-run prints them before the command. */
int comm_launch_local_env(const comm_launch_opts *o, const char **out, int cap);

/* Runs the command, waits, and returns its exit code (128 + signal when killed by one; 124 when
 * o->timeout_s passed first, after stopping it). When mpirun itself crashes (SIGSEGV, SIGBUS, SIGABRT) after
 * the ranks have exited (OpenMPI/PMIx can fault in PMIx_server_finalize while it shuts down after a rank's
 * failure), the code is the ranks' own, as mpirun would have reported it: the first rank's to exit non-zero, or 0
 * when every rank exited 0. A rank's code is recorded when it exits (comm_launch_record_exit). Likewise when mpirun
 * hangs in its shutdown: once every rank of this machine's job has been gone for 10 s, mpirun is stopped and the
 * ranks' code reported. With output != NULL, stdout and stderr are collected
 * into *output (malloc'd, NUL-terminated, at most 1 MiB kept); else they go to this process's. */
int comm_launch_run(const comm_launch_opts *o, char *const *program_argv, char **output);

/* The number of cores this process may run on (its CPU affinity), for the oversubscribe decision. */
int comm_launch_cores(void);

/* Ties this rank's life to its launcher: under OpenMPI, SIGKILL when mpirun (or the orted daemon) exits, even
 * by kill -9, and an exit now when it is already gone. comm_init calls it; nothing happens outside mpirun. */
void comm_launch_die_with_launcher(void);

/* Under comm_launch_run (MIXPAR_RANK_STATUS_DIR set), records this rank's exit code when it exits (exit() or a
 * return from main; not a signal) for the launcher to read. comm_init calls it; nothing happens elsewhere. */
void comm_launch_record_exit(void);

/* Stops the program (exit 2) with an explanation when it was started torchrun-style (WORLD_SIZE > 1, with
 * RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) rather than by mpirun, or with torchrun-style variables that do
 * not agree (launch_env.h names the variable); does nothing when none is set or WORLD_SIZE=1. Call it only
 * when not under mpirun. comm_init and mixpar run call it. */
void comm_launch_refuse_torchrun(void);

#endif
