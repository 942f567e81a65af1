/* launch.c: builds and runs the mpirun command behind `mixpar run` and the multi-rank tests. */
#include "comm/launch.h"

#include "comm/launch_env.h"

#include "base/error.h"
#include "base/parse.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Variables every rank should see even on another machine (mpirun passes the whole environment only to
 * ranks on this one). */
static const char *const EXPORTED_PREFIXES[] = {"MIXPAR_", "OMP_", "OPENBLAS_"};

static char *strings[512]; /* the argument strings of the last comm_launch_argv */
static int nstrings;

static char *keep(const char *s) {
    MP_ASSERT(nstrings < (int)(sizeof strings / sizeof strings[0]), "too many mpirun arguments");
    char *copy = strdup(s);
    MP_ASSERT(copy, "out of memory");
    return strings[nstrings++] = copy;
}

static bool executable_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

const char *comm_launch_mpirun(void) {
    static char found[4096];
    const char *forced = getenv("MIXPAR_MPIRUN");
    if (forced && *forced) return executable_file(forced) ? forced : NULL;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(found, sizeof found, "%.*s/mpirun", (int)n, p);
        if (n && executable_file(found)) return found;
        p += n + (p[n] == ':');
    }
    return NULL;
}

int comm_launch_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int comm_launch_argv(const comm_launch_opts *o, char *const *program_argv, char **out, int cap) {
    for (int i = 0; i < nstrings; i++) free(strings[i]);
    nstrings = 0;
    const char *mpirun = comm_launch_mpirun();
    MP_ASSERT(mpirun, "comm_launch_argv without mpirun on PATH (check comm_launch_mpirun first)");
    int n = 0;
#define ADD(s)                                                              \
    do {                                                                    \
        MP_ASSERT(n + 1 < cap, "mpirun command longer than %d arguments", cap); \
        out[n++] = keep(s);                                                 \
    } while (0)
    char ranks[32];
    snprintf(ranks, sizeof ranks, "%d", o->ranks);
    ADD(mpirun);
    ADD("-n");
    ADD(ranks);
    /* OpenMPI refuses to run as root unless told; containers and CI often are root. */
    if (geteuid() == 0) ADD("--allow-run-as-root");
    if (o->hostfile) {
        ADD("--hostfile");
        ADD(o->hostfile);
    } else if (o->ranks > comm_launch_cores()) {
        /* More ranks than cores: OpenMPI refuses unless told; the ranks then take turns on the cores
         * (mixpar's waits yield the core, so this works, slowly). */
        ADD("--oversubscribe");
    }
    if (o->enable_recovery) ADD("--enable-recovery");
    if (o->quiet) ADD("-q");
    for (char **e = environ; e && *e; e++)
        for (size_t k = 0; k < sizeof EXPORTED_PREFIXES / sizeof EXPORTED_PREFIXES[0]; k++)
            if (strncmp(*e, EXPORTED_PREFIXES[k], strlen(EXPORTED_PREFIXES[k])) == 0) {
                char name[256];
                snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
                ADD("-x");
                ADD(name);
                break;
            }
    for (int i = 0; program_argv[i]; i++) ADD(program_argv[i]);
#undef ADD
    out[n] = NULL;
    return n;
}

/* What an OpenMPI job on one machine spends its start on, and the setting that skips it. Measured on 2 cores
 * (mpirun and 2 ranks of a program that only starts MPI): 0.44 s and 0.28 CPU-s before, 0.20 s and 0.21 CPU-s
 * after. Between ranks of one machine MPI's messages go through shared memory either way. */
static const struct {
    const char *name, *value;
} LOCAL_ENV[] = {
    /* The UCX messaging layer probes for network hardware (about 0.15 s of waiting); ob1 is OpenMPI's own, and
     * carries messages between ranks of one machine through shared memory just the same. */
    {"OMPI_MCA_pml", "ob1"},
    /* PMIx's shared-memory store of the job's data: mpirun creates and clears a large segment for it; its hash
     * store keeps the little a one-machine job needs in each process. */
    {"PMIX_MCA_gds", "hash"},
    /* hwloc's discovery of PCI devices reads every device's configuration space; only the cores matter here. */
    {"HWLOC_COMPONENTS", "-pci,-linuxio"},
};

int comm_launch_local_env(const comm_launch_opts *o, const char **out, int cap) {
    static char settings[sizeof LOCAL_ENV / sizeof LOCAL_ENV[0]][64];
    int n = 0;
    for (size_t i = 0; !o->hostfile && i < sizeof LOCAL_ENV / sizeof LOCAL_ENV[0]; i++) {
        if (getenv(LOCAL_ENV[i].name)) continue;
        MP_ASSERT(n + 1 < cap, "more than %d settings", cap - 1);
        snprintf(settings[i], sizeof settings[i], "%s=%s", LOCAL_ENV[i].name, LOCAL_ENV[i].value);
        out[n++] = settings[i];
    }
    out[n] = NULL;
    return n;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* mixpar run's own signals go on to mpirun, which passes them to the ranks: stopping the launcher stops
 * the job instead of orphaning it. */
static volatile sig_atomic_t forward_to = 0;
static void forward_signal(int sig) {
    if (forward_to > 0) kill((pid_t)forward_to, sig);
}

/* Which machine and pid namespace this process sees: the boot id and the pid namespace's inode. A pid means
 * the same process only where this string is the same (ranks on other machines have other boot ids). */
static void launcher_machine(char *out, size_t len) {
    char boot[64] = "?", ns[64] = "?";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) snprintf(boot, sizeof boot, "?");
        boot[strcspn(boot, "\n")] = '\0';
        fclose(f);
    }
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    ns[n > 0 ? n : 0] = '\0';
    snprintf(out, len, "%s/%s", boot, ns);
}

/* A rank of a job mpirun started dies with it. mpirun kills its ranks when it stops normally, but a kill -9 of
 * mpirun (or of mixpar run, which takes mpirun with it) leaves them running, reparented, still writing the run
 * directory. PR_SET_PDEATHSIG makes the kernel send SIGKILL when the parent (mpirun on this machine, its orted
 * daemon on others) exits; the parent can die before the prctl, so the parent is read before it and read
 * again after it, and the launcher mixpar run recorded (MIXPAR_LAUNCHER_PID, on this machine) must still
 * exist. Called by comm_init under OpenMPI; does nothing elsewhere. */
void comm_launch_die_with_launcher(void) {
    if (!getenv("OMPI_COMM_WORLD_SIZE")) return;
    pid_t parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return; /* not Linux-like: nothing to lean on */
    bool gone = getppid() != parent;
    const char *pid_text = getenv("MIXPAR_LAUNCHER_PID"), *machine = getenv("MIXPAR_LAUNCHER_MACHINE");
    char here[160];
    launcher_machine(here, sizeof here);
    long launcher = pid_text ? strtol(pid_text, NULL, 10) : 0;
    if (!gone && launcher > 1 && machine && strcmp(machine, here) == 0)
        gone = kill((pid_t)launcher, 0) != 0 && errno == ESRCH;
    if (gone) {
        fprintf(stderr, "mixpar: the launcher of this rank (mpirun, pid %ld) is gone; stopping\n",
                launcher > 1 ? launcher : (long)parent);
        _exit(128 + SIGKILL);
    }
}

/* ---------------------------------------------------------------- the ranks' own exit codes */

enum { STATUS_DIR_MAX = 256 };
/* How long mpirun may outlive all of its ranks before mixpar run stops it (it normally exits within a second). */
static const double RANKS_GONE_GRACE_S = 10.0;
static char status_file[STATUS_DIR_MAX + 32];

static void write_exit_code(int code, void *unused) {
    (void)unused;
    FILE *f = fopen(status_file, "w");
    if (!f) return;
    fprintf(f, "%d\n", code);
    fclose(f);
}

void comm_launch_record_exit(void) {
    const char *dir = getenv("MIXPAR_RANK_STATUS_DIR"), *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!dir || !*dir || !rank || strlen(dir) > STATUS_DIR_MAX) return;
    int64_t r;
    if (!parse_i64(rank, &r) || r < 0 || r > 1 << 24) return;
    snprintf(status_file, sizeof status_file, "%s/rank%d", dir, (int)r);
    on_exit(write_exit_code, NULL); /* glibc: the handler is given exit()'s status, main's return included */
    /* and its pid, so the launcher can tell when every rank is gone (on this machine) */
    char pid_file[STATUS_DIR_MAX + 40];
    snprintf(pid_file, sizeof pid_file, "%s/rank%d.pid", dir, (int)r);
    FILE *f = fopen(pid_file, "w");
    if (f) {
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }
}

/* Is process pid gone: no such process, or a zombie its parent (mpirun) has not reaped? */
static bool process_gone(long pid) {
    if (kill((pid_t)pid, 0) != 0) return errno == ESRCH;
    char path[64], stat_text[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    size_t n = fread(stat_text, 1, sizeof stat_text - 1, f);
    fclose(f);
    stat_text[n] = '\0';
    const char *after_name = strrchr(stat_text, ')'); /* "pid (name) S ...": the name may hold spaces */
    return after_name && after_name[1] == ' ' && after_name[2] == 'Z';
}

/* Have all `ranks` ranks started here and ended? Each recorded its pid (comm_launch_record_exit); ranks on other
 * machines record theirs there, so a job with remote ranks never looks ended from here. */
static bool ranks_all_gone(const char *dir, int ranks) {
    for (int r = 0; r < ranks; r++) {
        char path[STATUS_DIR_MAX + 40];
        snprintf(path, sizeof path, "%s/rank%d.pid", dir, r);
        FILE *f = fopen(path, "r");
        long pid = 0;
        if (f) {
            if (fscanf(f, "%ld", &pid) != 1) pid = 0;
            fclose(f);
        }
        if (pid <= 1 || !process_gone(pid)) return false;
    }
    return true;
}

/* The code mpirun would have returned, from the ranks' records in dir. mpirun reports the first rank to fail and
 * then ends the others (they leave no record), so: the earliest non-zero record; 0 when every rank recorded 0;
 * -1 when there is nothing to go on (a rank died of a signal, or ran on another machine, and none failed by exit). */
static int ranks_exit_code(const char *dir, int ranks) {
    int found = 0, all_zero = 1;
    struct timespec first = {0, 0};
    for (int r = 0; r < ranks; r++) {
        char path[STATUS_DIR_MAX + 32];
        snprintf(path, sizeof path, "%s/rank%d", dir, r);
        FILE *f = fopen(path, "r");
        int code = -1;
        struct stat st;
        if (f) {
            if (fscanf(f, "%d", &code) != 1 || fstat(fileno(f), &st) != 0) code = -1;
            fclose(f);
        }
        if (code < 0 || code > 255) {
            all_zero = 0;
            continue;
        }
        if (code == 0) continue;
        all_zero = 0;
        if (!found || st.st_mtim.tv_sec < first.tv_sec ||
            (st.st_mtim.tv_sec == first.tv_sec && st.st_mtim.tv_nsec < first.tv_nsec)) {
            found = code;
            first = st.st_mtim;
        }
    }
    return found ? found : all_zero ? 0 : -1;
}

static void remove_status_dir(const char *dir, int ranks) {
    for (int r = 0; r < ranks; r++) {
        char path[STATUS_DIR_MAX + 40];
        snprintf(path, sizeof path, "%s/rank%d", dir, r);
        unlink(path);
        snprintf(path, sizeof path, "%s/rank%d.pid", dir, r);
        unlink(path);
    }
    rmdir(dir);
}

static bool launcher_crash(int status) {
    if (!WIFSIGNALED(status)) return false;
    int sig = WTERMSIG(status);
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGABRT;
}

static int exit_code(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

int comm_launch_run(const comm_launch_opts *o, char *const *program_argv, char **output) {
    char *argv[512];
    comm_launch_argv(o, program_argv, argv, (int)(sizeof argv / sizeof argv[0]));
    const char *local_env[8];
    comm_launch_local_env(o, local_env, (int)(sizeof local_env / sizeof local_env[0]));
    int pipefd[2] = {-1, -1};
    if (output && pipe(pipefd) != 0) MP_FAIL("a pipe for mpirun's output", "pipe: %s", strerror(errno));
    char machine[160];
    launcher_machine(machine, sizeof machine);
    pid_t launcher = getpid();
    const char *tmp = getenv("TMPDIR");
    char status_dir[STATUS_DIR_MAX];
    snprintf(status_dir, sizeof status_dir, "%s/mixpar-ranks-XXXXXX", tmp && *tmp && strlen(tmp) < 200 ? tmp : "/tmp");
    if (!mkdtemp(status_dir)) status_dir[0] = '\0'; /* then mpirun's own code is all there is */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) MP_FAIL("to start mpirun", "fork: %s", strerror(errno));
    if (pid == 0) {
        /* mpirun dies with this process, a kill -9 of mixpar run included: the kernel sends the parent-death
         * signal, SIGKILL, which nothing can catch, stop or delay (mpirun's own SIGTERM handling would need mpirun
         * to be running well); its ranks then die with it (comm_launch_die_with_launcher). The parent may have died
         * before the prctl: checked against the pid recorded before the fork. The ranks learn mpirun's pid (this
         * process's, kept by execv) to check the same. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher) _exit(128 + SIGKILL);
        char me[64];
        snprintf(me, sizeof me, "%ld", (long)getpid());
        setenv("MIXPAR_LAUNCHER_PID", me, 1);
        setenv("MIXPAR_LAUNCHER_MACHINE", machine, 1);
        if (status_dir[0]) setenv("MIXPAR_RANK_STATUS_DIR", status_dir, 1);
        for (int i = 0; local_env[i]; i++) putenv((char *)local_env[i]);
        if (output) {
            dup2(pipefd[1], 1);
            dup2(pipefd[1], 2);
            close(pipefd[0]);
            close(pipefd[1]);
        }
        execv(argv[0], argv);
        fprintf(stderr, "mixpar: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    struct sigaction forward = {.sa_handler = forward_signal}, saved[3];
    static const int FORWARDED[3] = {SIGINT, SIGTERM, SIGHUP};
    forward_to = pid;
    sigemptyset(&forward.sa_mask);
    for (int i = 0; i < 3; i++) sigaction(FORWARDED[i], &forward, &saved[i]);
    size_t len = 0, cap = 0;
    const size_t keep_max = 1 << 20;
    char *text = NULL;
    if (output) {
        close(pipefd[1]);
        cap = 4096;
        text = malloc(cap);
        MP_ASSERT(text, "out of memory");
    }
    double t0 = now_s(), t_exit = 0, t_checked = 0, t_all_gone = 0, t_hung = 0;
    int status = 0, signals_sent = 0;
    bool exited = false, pipe_open = output != NULL, timed_out = false, hung = false;
    while (!exited || pipe_open) {
        if (pipe_open) {
            struct pollfd pfd = {pipefd[0], POLLIN, 0};
            if (poll(&pfd, 1, 50) > 0) {
                char buf[4096];
                ssize_t got = read(pipefd[0], buf, sizeof buf);
                if (got <= 0) {
                    pipe_open = false;
                } else if (len + (size_t)got < keep_max) {
                    while (len + (size_t)got + 1 > cap) cap *= 2;
                    text = realloc(text, cap);
                    MP_ASSERT(text, "out of memory");
                    memcpy(text + len, buf, (size_t)got);
                    len += (size_t)got;
                }
            }
        } else {
            usleep(20000);
        }
        if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
            exited = true;
            t_exit = now_s();
        }
        /* Orphaned ranks could hold the pipe open after mpirun is gone; stop reading a moment later. */
        if (exited && pipe_open && now_s() - t_exit > 2.0) pipe_open = false;
        /* mpirun can hang in its own shutdown after every rank has ended (PMIx again): once all of them have
         * been gone for RANKS_GONE_GRACE_S, it is stopped and the ranks' own exit code reported. */
        if (!exited && status_dir[0] && !hung && now_s() - t_checked > 0.5) {
            t_checked = now_s();
            if (!ranks_all_gone(status_dir, o->ranks)) t_all_gone = 0;
            else if (t_all_gone == 0) t_all_gone = t_checked;
            else if (t_checked - t_all_gone > RANKS_GONE_GRACE_S) {
                hung = true;
                kill(pid, SIGTERM);
                t_hung = t_checked;
            }
        }
        if (!exited && hung && now_s() - t_hung > 3.0) {
            kill(pid, SIGKILL);
            t_hung = now_s();
        }
        if (!exited && o->timeout_s > 0 && now_s() - t0 > o->timeout_s + 3.0 * signals_sent) {
            /* SIGTERM first: mpirun then ends its ranks; SIGKILL if it does not go. */
            kill(pid, signals_sent == 0 ? SIGTERM : SIGKILL);
            signals_sent++;
            timed_out = true;
        }
    }
    for (int i = 0; i < 3; i++) sigaction(FORWARDED[i], &saved[i], NULL);
    forward_to = 0;
    if (output) {
        close(pipefd[0]);
        text[len] = '\0';
        *output = text;
    }
    int code = timed_out ? 124 : exit_code(status);
    if (status_dir[0] && hung && !timed_out) {
        int ranks_code = ranks_exit_code(status_dir, o->ranks);
        code = ranks_code >= 0 ? ranks_code : 128 + SIGKILL; /* a rank that left no code died of a signal */
        fprintf(stderr, "mixpar: mpirun was still running %.0f s after every rank had ended; stopped it; reporting "
                "the ranks' exit code, %d\n", RANKS_GONE_GRACE_S, code);
    } else if (status_dir[0]) {
        int ranks_code = launcher_crash(status) && !timed_out ? ranks_exit_code(status_dir, o->ranks) : -1;
        if (ranks_code >= 0) {
            fprintf(stderr, "mixpar: mpirun crashed (signal %d) after the ranks had exited; reporting the ranks' exit "
                    "code, %d\n", WTERMSIG(status), ranks_code);
            code = ranks_code;
        }
    }
    if (status_dir[0]) remove_status_dir(status_dir, o->ranks);
    return code;
}

/* torchrun-style launching. torchrun starts every rank itself and describes the job with
 *     RANK        -> this process's rank in the world       (mpirun: OMPI_COMM_WORLD_RANK)
 *     WORLD_SIZE  -> the number of ranks                    (mpirun: OMPI_COMM_WORLD_SIZE)
 *     LOCAL_RANK  -> the rank on this machine, picks a GPU  (mpirun: OMPI_COMM_WORLD_LOCAL_RANK)
 *     MASTER_ADDR, MASTER_PORT -> a TCP rendezvous on rank 0, where the ranks meet and exchange what
 *                    their transport needs (for NCCL: the ncclUniqueId that mixpar broadcasts over MPI)
 * mixpar's ranks find each other through MPI's runtime, which only mpirun (or srun --mpi=pmix) starts;
 * connecting MPI processes through MASTER_ADDR would need MPI_Comm_connect/accept or a TCP bootstrap of
 * our own, which mixpar does not have. So for now a torchrun-started job with more than one rank stops
 * here with an explanation, rather than running every rank as a lonely rank 0; variables that do not agree
 * (launch_env.c checks them) stop it with a message naming the variable. WORLD_SIZE=1 runs as one process. */
void comm_launch_refuse_torchrun(void) {
    if (!launch_env_has_torchrun(environ)) return;
    /* WORLD_SIZE=1 (RANK unset or 0): one process with nothing to connect, as a script run outside torchrun
     * with WORLD_SIZE=1 exported; it runs as it always has, whatever else is (not) set. */
    const char *ws = getenv("WORLD_SIZE"), *rank = getenv("RANK");
    if (ws && strcmp(ws, "1") == 0 && (!rank || strcmp(rank, "0") == 0)) return;
    launch_env e;
    launch_env_read(&e); /* inconsistent variables stop here, with a message naming the variable */
    if (e.kind != LAUNCH_TORCHRUN || e.world_size <= 1) return;
    MP_FAIL_HINT("a job started by mpirun (mixpar's ranks connect through MPI)",
                 "launch with 'mixpar run -n N -- PROGRAM ARGS' (mpirun underneath) or 'srun --mpi=pmix'; "
                 "torchrun-style variables map to mpirun's (RANK -> OMPI_COMM_WORLD_RANK, WORLD_SIZE -> "
                 "OMPI_COMM_WORLD_SIZE, LOCAL_RANK -> OMPI_COMM_WORLD_LOCAL_RANK) but mixpar cannot yet "
                 "rendezvous at MASTER_ADDR:MASTER_PORT",
                 "torchrun-style launch variables and no mpirun: RANK=%d WORLD_SIZE=%d LOCAL_RANK=%d "
                 "MASTER_ADDR=%s MASTER_PORT=%d",
                 e.rank, e.world_size, e.local_rank, e.master_addr, e.master_port);
}
