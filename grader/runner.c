/* runner.c: fork, sandbox, limit, exec, watch: where untrusted test code runs (and the grader's code does not).
 *
 * A test runs as the youngest of three processes:
 *     the grader -> a relay (its own process group, outside) -> init (pid 1 of new namespaces) -> the test
 * The relay unshares user (when not root), mount, PID, network, IPC and UTS namespaces, so init is pid 1 of
 * a PID namespace: when init exits, or is killed with the relay's group on a timeout, the kernel kills every
 * process left in that namespace, setsid() or not. Init builds a root of read-only binds (the system folders
 * and what the test needs, never the instructor's tree), a private /tmp, no network but loopback, drops to
 * an unprivileged user, starts the test and watches the resident memory of every process in the namespace.
 * It reports how the test ended on a status pipe the test never holds. Where the kernel refuses namespaces,
 * the test still runs in its own process group with limits, and runner_protections() says so. */
#include "runner.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    OUTPUT_CAP = 48 * 1024,
    OBSERVATIONS_CAP = 32 << 20,
    OBSERVATION_FD = 3,
    STATUS_FD = 4,
    /* As root, each sandbox runs as a user id of its own: SANDBOX_UID_BASE + the relay's pid (unique while the
     * test runs; pids stay below 2^22). RLIMIT_NPROC counts every task of a real user id on the machine, so a
     * shared id such as nobody's would let one test's processes, or another grade's running beside it, make a
     * correct test's fork fail. The base is in the range systemd and container tools leave unused. */
    SANDBOX_UID_BASE = 0x70000000,
    /* RLIMIT_NPROC counts threads too (an MPI rank has several): the process count itself is checked in the
     * namespace by init. */
    TASKS_PER_PROCESS = 8,
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* ---------------------------------------------------------------- what the kernel allows */

static int sandbox_level = -1; /* 0: process group and limits only; 1: namespaces as root; 2: in a user namespace */
static char protections[512];

static int unshare_flags(bool userns) {
    return (userns ? CLONE_NEWUSER : 0) | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
}

static bool write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    close(fd);
    return ok;
}

/* After unshare(CLONE_NEWUSER): this process is root in the new namespace, the grader's user outside. */
static bool map_user(uid_t uid, gid_t gid) {
    char line[64];
    write_file("/proc/self/setgroups", "deny");
    snprintf(line, sizeof line, "0 %u 1\n", (unsigned)uid);
    if (!write_file("/proc/self/uid_map", line)) return false;
    snprintf(line, sizeof line, "0 %u 1\n", (unsigned)gid);
    return write_file("/proc/self/gid_map", line);
}

static bool probe(bool userns) {
    uid_t uid = getuid();
    gid_t gid = getgid();
    pid_t pid = fork();
    if (pid == 0) {
        if (unshare(unshare_flags(userns)) != 0) _exit(1);
        if (userns && !map_user(uid, gid)) _exit(1);
        _exit(0);
    }
    int status;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

const char *runner_protections(void) {
    if (sandbox_level >= 0) return protections;
    const char *off = getenv("MIXPAR_GRADE_NO_SANDBOX"); /* for debugging the grader itself */
    if (off && *off) sandbox_level = 0;
    else if (geteuid() == 0 && probe(false)) sandbox_level = 1;
    else if (probe(true)) sandbox_level = 2;
    else sandbox_level = 0;
    if (sandbox_level == 1)
        snprintf(protections, sizeof protections,
                 "a user id of its own, PID/mount/network/IPC namespaces, read-only view, private /tmp, memory of the whole "
                 "process tree, time, CPU, processes, output");
    else if (sandbox_level == 2)
        snprintf(protections, sizeof protections,
                 "user namespace (no privileges), PID/mount/network/IPC namespaces, read-only view, private /tmp, "
                 "memory of the whole process tree, time, CPU, processes (counted in the namespace; no "
                 "RLIMIT_NPROC, which would count the grading user's own), output");
    else
        snprintf(protections, sizeof protections,
                 "process group, time, CPU, memory per process, output only: this kernel refuses namespaces%s, so "
                 "a test can read and write what the grader's user can",
                 off && *off ? " (MIXPAR_GRADE_NO_SANDBOX is set)" : "");
    return protections;
}

/* ---------------------------------------------------------------- inside: init of the sandbox */

static void status_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void status_report(const char *fmt, ...) {
    char line[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (write(STATUS_FD, line, (size_t)n) != n) { /* the grader then sees no status: a failed run */
    }
}

static _Noreturn void init_fail(const char *what) {
    status_report("setup %s: %s\n", what, strerror(errno));
    _exit(126);
}

static void mkdirs(const char *path, mode_t mode) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, mode);
            *p = '/';
        }
    mkdir(tmp, mode);
}

/* Binds host `from` at `root`/`to`, read-only, no devices, no set-uid. */
static void bind_ro(const char *root, const char *from, const char *to, bool is_file) {
    char target[4096];
    snprintf(target, sizeof target, "%s%s", root, to);
    if (is_file) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", target);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0', mkdirs(dir, 0755);
        int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) close(fd);
    } else {
        mkdirs(target, 0755);
    }
    if (mount(from, target, NULL, MS_BIND | MS_REC, NULL) != 0) init_fail(from);
    unsigned long ro = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV;
    if (mount(NULL, target, NULL, ro, NULL) != 0 && mount(NULL, target, NULL, ro & ~MS_NODEV, NULL) != 0)
        init_fail(to);
}

static void mount_tmpfs(const char *root, const char *to, const char *options) {
    char target[4096];
    snprintf(target, sizeof target, "%s%s", root, to);
    mkdirs(target, 0755);
    if (mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) init_fail(to);
}

static void loopback_up(void) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    close(s);
}

/* The new root: system folders, the spec's binds, /dev with a few devices, /proc of this namespace, /tmp. */
static void build_root(const char *newroot, const run_spec *spec) {
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) init_fail("private mounts");
    mkdirs(newroot, 0755);
    if (mount("tmpfs", newroot, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") != 0) init_fail("root tmpfs");
    static const char *const system_dirs[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                                              "/etc", "/opt", "/sys", NULL};
    for (int i = 0; system_dirs[i]; i++) {
        struct stat st;
        if (lstat(system_dirs[i], &st) != 0) continue;
        if (S_ISLNK(st.st_mode)) { /* /bin -> usr/bin on merged-/usr systems */
            char link[4096], target[4096];
            ssize_t n = readlink(system_dirs[i], target, sizeof target - 1);
            if (n <= 0) continue;
            target[n] = '\0';
            snprintf(link, sizeof link, "%s%s", newroot, system_dirs[i]);
            if (symlink(target, link) != 0) init_fail(system_dirs[i]);
        } else if (S_ISDIR(st.st_mode)) {
            bind_ro(newroot, system_dirs[i], system_dirs[i], false);
        }
    }
    mount_tmpfs(newroot, "/dev", "size=64k,mode=0755");
    static const char *const devices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", NULL};
    for (int i = 0; devices[i]; i++) {
        char target[4096];
        snprintf(target, sizeof target, "%s%s", newroot, devices[i]);
        int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
        if (fd >= 0) close(fd);
        if (mount(devices[i], target, NULL, MS_BIND, NULL) != 0) init_fail(devices[i]);
    }
    char size[64];
    snprintf(size, sizeof size, "size=%ldm,mode=1777", spec->memory_mb > 0 ? spec->memory_mb : 256);
    mount_tmpfs(newroot, "/dev/shm", size);
    mount_tmpfs(newroot, "/tmp", size);
    /* After /tmp: a tree under /tmp (a test suite's scratch copy) must not be hidden by the private one. */
    for (int i = 0; i < spec->nbinds; i++) {
        struct stat st;
        if (stat(spec->binds[i].host, &st) != 0) continue;
        bind_ro(newroot, spec->binds[i].host, spec->binds[i].inside ? spec->binds[i].inside : spec->binds[i].host,
                !S_ISDIR(st.st_mode));
    }
    char proc[4096];
    snprintf(proc, sizeof proc, "%s/proc", newroot);
    mkdirs(proc, 0555);
    if (mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) init_fail("/proc");
    char work[4096];
    snprintf(work, sizeof work, "%s%s", newroot, spec->workdir);
    mkdirs(work, 0755);
    if (chdir(newroot) != 0) init_fail("enter the new root");
    if (syscall(SYS_pivot_root, ".", ".") != 0) init_fail("pivot_root");
    if (umount2(".", MNT_DETACH) != 0) init_fail("detach the old root");
    if (chdir("/") != 0) init_fail("chdir /");
    mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

static void drop_privileges(int level, uid_t sandbox_id) {
    if (level == 1) {
        if (setgroups(0, NULL) != 0 || setresgid(sandbox_id, sandbox_id, sandbox_id) != 0 ||
            setresuid(sandbox_id, sandbox_id, sandbox_id) != 0)
            init_fail("become the sandbox's own user");
    } else if (level == 2) {
        /* A nested user namespace with no mapping: no capability over the mounts made above, so the read-only
         * binds stay read-only; outside it is still the grader's (unprivileged) user. */
        if (unshare(CLONE_NEWUSER) != 0) init_fail("drop capabilities");
    }
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

static void set_limit(int resource, rlim_t value) {
    struct rlimit r = {value, value};
    setrlimit(resource, &r);
}

static void apply_limits(const run_spec *spec, bool nproc) {
    set_limit(RLIMIT_CORE, 0);
    if (spec->memory_mb > 0) set_limit(RLIMIT_AS, (rlim_t)spec->memory_mb << 20);
    rlim_t cpu = (rlim_t)(spec->time_limit_s * 2 + 2);
    struct rlimit cpul = {cpu, cpu + 1};
    setrlimit(RLIMIT_CPU, &cpul);
    set_limit(RLIMIT_FSIZE, 64 << 20);
    if (nproc && spec->max_processes > 0)
        set_limit(RLIMIT_NPROC, (rlim_t)spec->max_processes * TASKS_PER_PROCESS);
}

/* Resident bytes and the number of processes in this PID namespace (init included), from its /proc. */
static void namespace_usage(long long *bytes, int *processes) {
    *bytes = 0;
    *processes = 0;
    DIR *d = opendir("/proc");
    if (!d) return;
    long page = sysconf(_SC_PAGESIZE);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[64], buf[128];
        snprintf(path, sizeof path, "/proc/%s/statm", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0) continue;
        buf[n] = '\0';
        long long size, resident;
        if (sscanf(buf, "%lld %lld", &size, &resident) == 2) *bytes += resident * page;
        (*processes)++;
    }
    closedir(d);
}

static _Noreturn void exec_test(const char *binary, const char *name, const char *seed, const run_spec *spec) {
    close(STATUS_FD);
    if (chdir(spec->workdir) != 0) {
        fprintf(stderr, "grader: cannot enter %s: %s\n", spec->workdir, strerror(errno));
        _exit(127);
    }
    static char *const env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp", "LANG=C.UTF-8",
                                "OMP_NUM_THREADS=2", NULL};
    execle(binary, binary, "--observe", name, seed, (char *)NULL, env);
    fprintf(stderr, "grader: cannot run %s: %s\n", binary, strerror(errno));
    _exit(127);
}

/* pid 1 of the sandbox: start the test, watch its memory, report how it ended. Exiting kills the rest. */
static _Noreturn void sandbox_init(const char *binary, const char *name, const char *seed, const run_spec *spec,
                                   const char *newroot, int level, uid_t sandbox_id) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    build_root(newroot, spec);
    loopback_up();
    sethostname("sandbox", 7);
    drop_privileges(level, sandbox_id);
    apply_limits(spec, level == 1);
    pid_t test = fork();
    if (test < 0) init_fail("fork the test");
    if (test == 0) exec_test(binary, name, seed, spec);
    long long limit = spec->memory_mb > 0 ? (long long)spec->memory_mb << 20 : 0;
    for (;;) {
        int status;
        pid_t done;
        while ((done = waitpid(-1, &status, WNOHANG)) > 0)
            if (done == test) {
                if (WIFSIGNALED(status)) status_report("signal %d\n", WTERMSIG(status));
                else status_report("exit %d\n", WEXITSTATUS(status));
                _exit(0); /* the kernel now kills whatever the test left behind */
            }
        long long bytes;
        int processes;
        namespace_usage(&bytes, &processes);
        if (limit && bytes > limit) {
            status_report("memory %lld\n", bytes);
            kill(-1, SIGKILL);
            _exit(0);
        }
        if (spec->max_processes > 0 && processes > spec->max_processes + 1) {
            status_report("processes %d\n", processes - 1);
            kill(-1, SIGKILL);
            _exit(0);
        }
        usleep(10000);
    }
}

/* ---------------------------------------------------------------- outside: the relay and the grader */

static _Noreturn void relay(const char *binary, const char *name, const char *seed, const run_spec *spec, int out_w,
                            int obs_w, int status_w, const char *newroot, int level) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    uid_t uid = getuid();
    gid_t gid = getgid();
    /* The pipes to their fixed numbers without clobbering one another; nothing else stays open. */
    int fds[3] = {fcntl(out_w, F_DUPFD, 10), fcntl(obs_w, F_DUPFD, 10), fcntl(status_w, F_DUPFD, 10)};
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(fds[0], 1);
    dup2(fds[0], 2);
    dup2(fds[1], OBSERVATION_FD);
    dup2(fds[2], STATUS_FD);
    for (int fd = STATUS_FD + 1; fd < 1024; fd++) close(fd);
    if (level == 0) {
        apply_limits(spec, false);
        pid_t test = fork();
        if (test == 0) exec_test(binary, name, seed, spec);
        int status;
        if (test < 0 || waitpid(test, &status, 0) != test) _exit(126);
        if (WIFSIGNALED(status)) status_report("signal %d\n", WTERMSIG(status));
        else status_report("exit %d\n", WEXITSTATUS(status));
        _exit(0);
    }
    uid_t sandbox_id = (uid_t)SANDBOX_UID_BASE + (uid_t)getpid(); /* before the new PID namespace */
    if (unshare(unshare_flags(level == 2)) != 0) {
        status_report("setup namespaces: %s\n", strerror(errno));
        _exit(126);
    }
    if (level == 2 && !map_user(uid, gid)) {
        status_report("setup user map: %s\n", strerror(errno));
        _exit(126);
    }
    pid_t init = fork();
    if (init == 0) sandbox_init(binary, name, seed, spec, newroot, level, sandbox_id);
    close(STATUS_FD);
    close(OBSERVATION_FD);
    close(1);
    close(2);
    int status;
    if (init < 0 || waitpid(init, &status, 0) != init) _exit(126);
    _exit(0);
}

typedef struct {
    char *s;
    size_t len, cap;
    bool truncated;
} capture;

static void capture_add(capture *c, const char *data, size_t n) {
    if (c->len + n > c->cap) {
        n = c->len < c->cap ? c->cap - c->len : 0;
        c->truncated = true;
    }
    if (!n) return;
    c->s = realloc(c->s, c->len + n + 1);
    memcpy(c->s + c->len, data, n);
    c->len += n;
    c->s[c->len] = '\0';
}

void run_observed(const char *binary, const char *name, const char *seed, const run_spec *spec, run_result *result) {
    memset(result, 0, sizeof *result);
    int level = runner_protections()[0] ? sandbox_level : 0;
    capture out = {.cap = OUTPUT_CAP}, obs = {.cap = OBSERVATIONS_CAP}, status_text = {.cap = 256};
    int out_pipe[2], obs_pipe[2], status_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) || pipe2(obs_pipe, O_CLOEXEC) || pipe2(status_pipe, O_CLOEXEC)) {
        result->output = strdup("grader: cannot create pipes\n");
        return;
    }
    /* The new root's mount point: an empty folder of the grader's, only ever mounted over inside the sandbox. */
    char newroot[4096];
    char cwd[2048];
    snprintf(newroot, sizeof newroot, "%s/build/grading/.sandbox-root", getcwd(cwd, sizeof cwd) ? cwd : ".");
    if (level > 0) mkdirs(newroot, 0755);
    double t0 = now_s();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) relay(binary, name, seed, spec, out_pipe[1], obs_pipe[1], status_pipe[1], newroot, level);
    close(out_pipe[1]);
    close(obs_pipe[1]);
    close(status_pipe[1]);
    if (pid < 0) {
        close(out_pipe[0]);
        close(obs_pipe[0]);
        close(status_pipe[0]);
        result->output = strdup("grader: fork failed\n");
        return;
    }
    setpgid(pid, pid); /* also from this side, so kill(-pid) works even if the relay has not run yet */

    struct pollfd pfd[3] = {{out_pipe[0], POLLIN, 0}, {obs_pipe[0], POLLIN, 0}, {status_pipe[0], POLLIN, 0}};
    capture *sinks[3] = {&out, &obs, &status_text};
    int status = 0;
    bool exited = false;
    static char buf[1 << 16];
    for (;;) {
        double left = spec->time_limit_s - (now_s() - t0);
        if (left <= 0) {
            result->timed_out = true;
            break;
        }
        int open_fds = 0;
        for (int i = 0; i < 3; i++) open_fds += pfd[i].fd >= 0;
        if (open_fds) {
            int ready = poll(pfd, 3, left > 0.05 ? 50 : (int)(left * 1000) + 1);
            if (ready < 0 && errno != EINTR) break;
            for (int i = 0; i < 3; i++) {
                if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                ssize_t got = read(pfd[i].fd, buf, sizeof buf);
                if (got <= 0) {
                    close(pfd[i].fd);
                    pfd[i].fd = -1;
                } else {
                    capture_add(sinks[i], buf, (size_t)got); /* past the cap: read and dropped, so nobody blocks */
                }
            }
        } else {
            usleep(2000);
        }
        if (!exited && waitpid(pid, &status, WNOHANG) == pid) exited = true;
        /* Done once the relay has exited and the status is in; pipes held open by a stray process don't count
         * (without namespaces one may survive: the group kill below gets it). */
        if (exited && pfd[2].fd < 0) break;
        if (exited && open_fds == 0) break;
    }
    kill(-pid, SIGKILL); /* the relay's group: with namespaces, killing init ends everything inside */
    if (!exited) waitpid(pid, &status, 0);
    /* What is left in the pipes after the end. */
    for (int i = 0; i < 3; i++) {
        if (pfd[i].fd < 0) continue;
        fcntl(pfd[i].fd, F_SETFL, O_NONBLOCK);
        ssize_t got;
        while ((got = read(pfd[i].fd, buf, sizeof buf)) > 0) capture_add(sinks[i], buf, (size_t)got);
        close(pfd[i].fd);
    }
    result->seconds = now_s() - t0;
    const char *st = status_text.s ? status_text.s : "";
    long long bytes;
    int code;
    if (result->timed_out) {
    } else if (sscanf(st, "exit %d", &code) == 1) {
        result->finished = true;
        result->exit_code = code;
    } else if (sscanf(st, "signal %d", &code) == 1) {
        result->finished = true;
        result->signal = code;
        result->exit_code = -1;
    } else if (sscanf(st, "memory %lld", &bytes) == 1) {
        result->out_of_memory = true;
    } else if (sscanf(st, "processes %d", &code) == 1) {
        result->signal = SIGKILL;
        result->exit_code = -1;
        capture_add(&out, "    too many processes at once (a fork loop?)\n", 47);
    } else {
        char note[512];
        int n = snprintf(note, sizeof note, "    grader: the sandbox did not start the test (%.*s)\n",
                         (int)strcspn(st, "\n"), st[0] ? st : "no status");
        capture_add(&out, note, (size_t)n);
        result->exit_code = 126;
    }
    result->output = out.s ? out.s : strdup("");
    result->output_len = out.len;
    result->output_truncated = out.truncated;
    result->observations = obs.s ? obs.s : strdup("");
    result->observations_len = obs.len;
    result->observations_truncated = obs.truncated;
    free(status_text.s);
}

void run_result_free(run_result *r) {
    free(r->output);
    free(r->observations);
    r->output = r->observations = NULL;
}

const char *run_ending(const run_result *r, double limit_s, long memory_mb, char *buf, size_t cap) {
    buf[0] = '\0';
    if (r->timed_out)
        snprintf(buf, cap, "TIMEOUT after %.0f s (likely an infinite loop); raise limits with MIXPAR_TIME_SCALE=3 if "
                 "your machine is slow", limit_s);
    else if (r->out_of_memory)
        snprintf(buf, cap, "memory limit of %ld MB exceeded (the test and every process it started, together)",
                 memory_mb);
    else if (r->signal == SIGXCPU || r->signal == SIGKILL)
        snprintf(buf, cap, "killed (%s): CPU time or memory limit exceeded (likely an infinite loop)",
                 strsignal(r->signal));
    else if (r->signal)
        snprintf(buf, cap, "crashed: %s (signal %d)%s", strsignal(r->signal), r->signal,
                 r->signal == SIGSEGV ? ": an out-of-bounds access or a NULL pointer? try the test under gdb" : "");
    else if (r->finished && r->exit_code == 127)
        snprintf(buf, cap, "the test binary could not be run");
    else if (r->finished && r->exit_code == 2 && r->output && strstr(r->output, "out of memory"))
        snprintf(buf, cap, "memory limit of %ld MB exceeded", memory_mb);
    return buf;
}
