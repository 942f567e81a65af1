/* run_lock.c: the run directory's lock (flock, held by every rank of a job) and removing stale temporaries. */
#include "train/run_lock.h"

#include "base/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The lock file: one line per rank, rank r's at r * LINE_BYTES, padded with spaces, so ranks write their own
 * without reading or coordinating. */
enum { LINE_BYTES = 160 };

static int lock_fd = -1; /* kept open (and so locked) until the process exits */

static bool make_dirs(const char *dir, data_err *err) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return DATA_ERR(err, "a run directory path shorter than 4096 bytes", NULL, "'%.64s...'", dir);
    for (char *p = path + 1;; p++) {
        bool end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return DATA_ERR(err, "a run directory that can be created", "set train.run_dir to a writable place",
                                "mkdir '%s': %s", path, strerror(errno));
            if (end) break;
            *p = '/';
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return DATA_ERR(err, "a run directory", "set train.run_dir to a directory", "'%s' exists and is not a directory",
                        dir);
    return true;
}

/* "pid 4242 on node1, rank 0 of 2, since 2025-03-01 10:00:00", padded to LINE_BYTES with a newline last. */
static void holder_line(char line[LINE_BYTES], int rank, int world) {
    char host[128] = "?", when[32] = "?";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    char text[LINE_BYTES + 64];
    int n = snprintf(text, sizeof text, "pid %ld on %s, rank %d of %d, since %s", (long)getpid(), host, rank, world,
                     when);
    if (n > LINE_BYTES - 1) n = LINE_BYTES - 1;
    memset(line, ' ', LINE_BYTES);
    memcpy(line, text, (size_t)n);
    line[LINE_BYTES - 1] = '\n';
}

/* The holders' lines from the lock file, joined with "; " (what a refused job names). */
static void read_holders(int fd, char *out, size_t len) {
    char buf[8192];
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    buf[got > 0 ? got : 0] = '\0';
    size_t at = 0;
    out[0] = '\0';
    for (char *line = strtok(buf, "\n"); line && at + 1 < len; line = strtok(NULL, "\n")) {
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\0')) n--;
        while (n > 0 && (*line == ' ' || *line == '\0')) line++, n--;
        if (n == 0) continue;
        at += (size_t)snprintf(out + at, len - at, "%s%.*s", at ? "; " : "", (int)n, line);
        if (at >= len) at = len - 1;
    }
    if (!out[0]) snprintf(out, len, "a process that has not written its line yet");
}

static bool write_line(int fd, int rank, int world, const char *path, data_err *err) {
    char line[LINE_BYTES];
    holder_line(line, rank, world);
    if (pwrite(fd, line, LINE_BYTES, (off_t)rank * LINE_BYTES) != LINE_BYTES)
        return DATA_ERR(err, "a writable run directory", NULL, "cannot write '%s': %s", path, strerror(errno));
    return true;
}

static bool refused(int fd, const char *run_dir, data_err *err) {
    char holders[400];
    read_holders(fd, holders, sizeof holders);
    return DATA_ERR(err, "a run directory no other job is using",
                    "wait for that job to end or stop it (kill the pids named), or give this run another train.run_dir",
                    "'%s' is in use by another job (%s/" RUN_LOCK_FILE "): %s", run_dir, run_dir, holders);
}

/* A file system without flock (some network mounts: ENOLCK, EOPNOTSUPP) cannot be locked; the run goes on, as it
 * did before there was a lock, with a warning that it is not protected. */
static bool no_locks_here(const char *path, int e) {
    fprintf(stderr, "mixpar: warning: cannot lock '%s' (flock: %s); nothing stops another job from using this run "
                    "directory at the same time\n", path, strerror(e));
    return true;
}

/* Rank 0's part: exclusive (no other job), its line, then shared (so its own ranks can join). */
static bool lock_first(const char *run_dir, const char *path, int world, data_err *err) {
    if (!make_dirs(run_dir, err)) return false;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return DATA_ERR(err, "a run directory where the lock file can be made", "set train.run_dir to a writable place",
                        "cannot open '%s': %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        bool ok = e == EWOULDBLOCK ? refused(fd, run_dir, err) : no_locks_here(path, e);
        close(fd);
        return ok;
    }
    if (ftruncate(fd, 0) != 0) {
        int e = errno;
        close(fd);
        return DATA_ERR(err, "a writable run directory", NULL, "cannot truncate '%s': %s", path, strerror(e));
    }
    if (!write_line(fd, 0, world, path, err)) {
        close(fd);
        return false;
    }
    /* flock converts by unlocking then locking: another job may take it in between, and then this one stops. */
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        bool ok = refused(fd, run_dir, err);
        close(fd);
        return ok;
    }
    lock_fd = fd;
    return true;
}

static bool lock_join(const char *run_dir, const char *path, int rank, int world, data_err *err) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644); /* O_CREAT: a run directory that is not shared */
    if (fd < 0)
        return DATA_ERR(err, "a run directory where the lock file can be opened", NULL, "cannot open '%s': %s", path,
                        strerror(errno));
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        int e = errno;
        bool ok = e == EWOULDBLOCK ? refused(fd, run_dir, err) : no_locks_here(path, e);
        close(fd);
        return ok;
    }
    if (!write_line(fd, rank, world, path, err)) {
        close(fd);
        return false;
    }
    lock_fd = fd;
    return true;
}

/* The message in the project's format (base/error.c), without exiting: the ranks exit together afterwards, so
 * that mpirun does not stop the one still printing. */
static void print_error(const data_err *e) {
    fflush(stdout);
    const char *file = e->file ? e->file : "core/train/run_lock.c", *core = strstr(file, "core/");
    fprintf(stderr, "mixpar: error (%s:%d)\n  expected: %s\n  found:    %s\n", core ? core + 5 : file, e->line,
            e->expected, e->found);
    if (e->hint[0]) fprintf(stderr, "  hint:     %s\n", e->hint);
    fflush(stderr);
}

bool run_lock_acquire(const char *run_dir, comm_t *c, data_err *err) {
    int rank = c ? comm_rank(c) : 0, world = c ? comm_size(c) : 1;
    MP_ASSERT(lock_fd < 0, "run_lock_acquire called twice");
    char path[4200];
    snprintf(path, sizeof path, "%s/" RUN_LOCK_FILE, run_dir);
    data_err mine = {0};
    int64_t first_ok = rank == 0 ? lock_first(run_dir, path, world, &mine) : 0;
    if (c) comm_broadcast(c, &first_ok, 1, COMM_INT64, 0, COMM_ALGO_NATIVE);
    bool ok = first_ok != 0;
    if (ok && rank != 0) ok = lock_join(run_dir, path, rank, world, &mine);
    int64_t me = ok, all_ok = ok;
    if (c) comm_allreduce(c, &me, &all_ok, 1, COMM_INT64, COMM_MIN, COMM_ALGO_NATIVE);
    if (all_ok) return true;
    if (lock_fd >= 0) close(lock_fd), lock_fd = -1;
    /* Who speaks: a rank that failed itself, with its reason; rank 0 when another rank failed. The others are
     * quiet (with err, they get a short reason). */
    bool speak = !ok && mine.found[0];
    if (ok && rank == 0) {
        DATA_ERR(&mine, "every rank able to take the run directory's lock", NULL,
                 "another rank could not lock '%s' (its message says why)", path);
        speak = true;
    } else if (!ok && !first_ok && rank != 0) {
        DATA_ERR(&mine, "rank 0 to take the run directory's lock", NULL, "rank 0 could not lock '%s'", path);
    } else if (ok) {
        DATA_ERR(&mine, "every rank able to take the run directory's lock", NULL, "another rank could not lock '%s'",
                 path);
    }
    if (err) {
        *err = mine;
        return false;
    }
    if (speak) print_error(&mine);
    if (c) comm_barrier(c); /* everyone has printed before anyone exits */
    exit(EXIT_BAD_INPUT);
}

/* ---------------------------------------------------------------- stale temporaries */

/* "NAME.tmp.XXXXXX": what an atomic write (mkstemp) leaves when it is killed before its rename. */
static bool is_atomic_temporary(const char *name) {
    size_t n = strlen(name);
    if (n < 12 || memcmp(name + n - 11, ".tmp.", 5) != 0) return false;
    for (size_t i = n - 6; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') || (name[i] >= '0' && name[i] <= '9')))
            return false;
    return true;
}

static bool remove_file(const char *path, run_cleared *out, data_err *err) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? true : DATA_ERR(err, "a readable run directory", NULL,
                                                                         "stat '%s': %s", path, strerror(errno));
    if (unlink(path) != 0)
        return DATA_ERR(err, "stale temporary files that can be removed", "remove it yourself", "cannot remove '%s': %s",
                        path, strerror(errno));
    out->files++;
    out->bytes += (uint64_t)st.st_size;
    return true;
}

/* Removes the atomic-write temporaries in dir (all its regular files too when `whole`, then dir itself). */
static bool clear_dir(const char *dir, bool whole, run_cleared *out, data_err *err) {
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? true : DATA_ERR(err, "a readable run directory", NULL, "cannot open '%s': %s", dir,
                                                     strerror(errno));
    bool ok = true, all_gone = true;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        bool regular = lstat(path, &st) == 0 && S_ISREG(st.st_mode);
        if (regular && (whole || is_atomic_temporary(e->d_name))) ok = remove_file(path, out, err) && ok;
        else all_gone = false;
    }
    closedir(d);
    if (whole && !all_gone)
        return DATA_ERR(err, "only checkpoint files in a stale checkpoint directory", "move it away, or remove it yourself",
                        "'%s' holds something other than files; not removing it", dir);
    if (whole && ok && rmdir(dir) != 0)
        return DATA_ERR(err, "a stale checkpoint directory that can be removed", "remove it yourself",
                        "cannot remove '%s': %s", dir, strerror(errno));
    return ok;
}

bool run_clear_stale(const char *run_dir, run_cleared *out, data_err *err) {
    out->files = 0;
    out->bytes = 0;
    char sharded[4200], tmp[4300], old[4300], index[4400];
    snprintf(sharded, sizeof sharded, "%s/checkpoint.sharded", run_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", sharded);
    snprintf(old, sizeof old, "%s.old", sharded);
    snprintf(index, sizeof index, "%s/index.json", sharded);
    bool ok = clear_dir(run_dir, false, out, err);
    ok = clear_dir(sharded, false, out, err) && ok;
    ok = clear_dir(tmp, true, out, err) && ok;
    /* .old is stale only beside a complete checkpoint; alone, it is the checkpoint a resume loads. */
    if (access(index, F_OK) == 0) ok = clear_dir(old, true, out, err) && ok;
    return ok;
}
