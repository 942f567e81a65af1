/* runner.c: fork, limit, exec, watch: the grader's per-test safety net (independent of any test framework). */
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { OUTPUT_CAP = 48 * 1024, VERDICT_FD = 3, TOKEN_FD = 4 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void make_token(char *token, size_t len) {
    unsigned char raw[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, raw, sizeof raw) != (ssize_t)sizeof raw) {
        /* No urandom: fall back to time and pid, still unknown to the test in advance. */
        unsigned long long x = (unsigned long long)(now_s() * 1e9) ^ ((unsigned long long)getpid() << 32);
        for (size_t i = 0; i < sizeof raw; i++) raw[i] = (unsigned char)(x >> (8 * (i % 8))) ^ (unsigned char)i;
    }
    if (fd >= 0) close(fd);
    for (size_t i = 0; i < sizeof raw && 2 * i + 2 < len; i++) snprintf(token + 2 * i, 3, "%02x", raw[i]);
}

typedef struct {
    char *s;
    size_t len;
    bool truncated;
} capture;

static void capture_add(capture *c, const char *data, size_t n) {
    if (c->len + n > OUTPUT_CAP) {
        n = c->len < OUTPUT_CAP ? OUTPUT_CAP - c->len : 0;
        c->truncated = true;
    }
    if (!n) return;
    c->s = realloc(c->s, c->len + n + 1);
    memcpy(c->s + c->len, data, n);
    c->len += n;
    c->s[c->len] = '\0';
}

static void capture_printf(capture *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void capture_printf(capture *c, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t saved = c->len;
    bool was = c->truncated;
    c->truncated = false;
    /* The grader's own notes always fit: they go past the cap if need be. */
    c->s = realloc(c->s, saved + (size_t)n + 1);
    memcpy(c->s + saved, buf, (size_t)n + 1);
    c->len = saved + (size_t)n;
    c->truncated = was;
}

static _Noreturn void child(const char *binary, const char *workdir, const char *name, double limit_s, long memory_mb,
                            int out_w, int verdict_w, int token_r) {
    setpgid(0, 0);
    struct rlimit core = {0, 0};
    setrlimit(RLIMIT_CORE, &core);
    struct rlimit mem = {(rlim_t)memory_mb << 20, (rlim_t)memory_mb << 20};
    setrlimit(RLIMIT_AS, &mem);
    rlim_t cpu = (rlim_t)(limit_s * 2 + 2);
    struct rlimit cpul = {cpu, cpu + 1};
    setrlimit(RLIMIT_CPU, &cpul);
    struct rlimit fsize = {64 << 20, 64 << 20};
    setrlimit(RLIMIT_FSIZE, &fsize);
    /* Move the pipes to their fixed numbers without clobbering one another. */
    int fds[3] = {fcntl(out_w, F_DUPFD, 10), fcntl(verdict_w, F_DUPFD, 10), fcntl(token_r, F_DUPFD, 10)};
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(fds[0], 1);
    dup2(fds[0], 2);
    dup2(fds[1], VERDICT_FD);
    dup2(fds[2], TOKEN_FD);
    for (int fd = 5; fd < 1024; fd++) close(fd);
    if (workdir && chdir(workdir) != 0) {
        fprintf(stderr, "grader: cannot enter %s\n", workdir);
        _exit(127);
    }
    execl(binary, binary, "--run", name, (char *)NULL);
    fprintf(stderr, "grader: cannot run %s: %s\n", binary, strerror(errno));
    _exit(127);
}

void run_test(const char *binary, const char *workdir, const char *name, double time_limit_s, long memory_mb,
              test_result *result) {
    memset(result, 0, sizeof *result);
    capture out = {0};
    char token[64] = "";
    make_token(token, sizeof token);
    int out_pipe[2], verdict_pipe[2], token_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) || pipe2(verdict_pipe, O_CLOEXEC) || pipe2(token_pipe, O_CLOEXEC)) {
        capture_printf(&out, "grader: cannot create pipes: %s\n", strerror(errno));
        result->output = out.s;
        return;
    }
    double t0 = now_s();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) child(binary, workdir, name, time_limit_s, memory_mb, out_pipe[1], verdict_pipe[1], token_pipe[0]);
    close(out_pipe[1]);
    close(verdict_pipe[1]);
    close(token_pipe[0]);
    if (pid < 0) {
        capture_printf(&out, "grader: fork failed: %s\n", strerror(errno));
        close(out_pipe[0]);
        close(verdict_pipe[0]);
        close(token_pipe[1]);
        result->output = out.s;
        return;
    }
    setpgid(pid, pid); /* also from this side, so kill(-pid) works even if the child has not run yet */
    char line[80];
    int n = snprintf(line, sizeof line, "%s\n", token);
    if (write(token_pipe[1], line, (size_t)n) != n) { /* the test then cannot pass: nothing more to do */
    }
    close(token_pipe[1]);

    char verdict[256] = "";
    size_t verdict_len = 0;
    int status = 0;
    bool exited = false;
    struct pollfd pfd[2] = {{out_pipe[0], POLLIN, 0}, {verdict_pipe[0], POLLIN, 0}};
    for (;;) {
        double left = time_limit_s - (now_s() - t0);
        if (left <= 0) {
            result->timed_out = true;
            break;
        }
        int wait_ms = left > 0.05 ? 50 : (int)(left * 1000) + 1;
        if (pfd[0].fd >= 0 || pfd[1].fd >= 0) {
            int ready = poll(pfd, 2, wait_ms);
            if (ready < 0 && errno != EINTR) break;
            for (int i = 0; i < 2; i++) {
                if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                char buf[4096];
                ssize_t got = read(pfd[i].fd, buf, sizeof buf);
                if (got <= 0) {
                    close(pfd[i].fd);
                    pfd[i].fd = -1;
                } else if (i == 0) {
                    capture_add(&out, buf, (size_t)got);
                } else if (verdict_len + (size_t)got < sizeof verdict) {
                    memcpy(verdict + verdict_len, buf, (size_t)got);
                    verdict_len += (size_t)got;
                    verdict[verdict_len] = '\0';
                }
            }
        } else {
            usleep(2000);
        }
        if (!exited && waitpid(pid, &status, WNOHANG) == pid) exited = true;
        /* Done once the test has exited and its pipes are drained (or held open only by a stray child). */
        if (exited) {
            bool more = false;
            for (int i = 0; i < 2; i++)
                if (pfd[i].fd >= 0) {
                    struct pollfd one = {pfd[i].fd, POLLIN, 0};
                    more |= poll(&one, 1, 0) > 0 && (one.revents & POLLIN);
                }
            if (!more) break;
        }
    }
    if (!exited) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    kill(-pid, SIGKILL); /* whatever the test left running */
    for (int i = 0; i < 2; i++)
        if (pfd[i].fd >= 0) close(pfd[i].fd);
    result->seconds = now_s() - t0;

    char expected[96];
    snprintf(expected, sizeof expected, "PASS %s\n", token);
    bool token_ok = strcmp(verdict, expected) == 0;
    if (out.truncated) capture_printf(&out, "    [output cut at %d KB]\n", OUTPUT_CAP / 1024);
    if (result->timed_out) {
        capture_printf(&out, "    TIMEOUT after %.0f s (likely an infinite loop); raise limits with "
                       "MIXPAR_TIME_SCALE=3 if your machine is slow\n", time_limit_s);
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        if (sig == SIGXCPU || sig == SIGKILL)
            capture_printf(&out, "    killed (%s): CPU time limit exceeded (likely an infinite loop)\n", strsignal(sig));
        else
            capture_printf(&out, "    crashed: %s (signal %d)%s\n", strsignal(sig), sig,
                           sig == SIGSEGV ? ": an out-of-bounds access or a NULL pointer? try the test under gdb" : "");
    } else if (WIFEXITED(status)) {
        int code = WEXITSTATUS(status);
        if (code == 0 && !token_ok)
            capture_printf(&out, "    the test process exited with code 0 before the test finished: does the code "
                           "call exit()? (a test passes only by returning normally)\n");
        else if (code == 86)
            ; /* LAB_TODO already said which function is missing */
        else if (code == 2 && strstr(out.s ? out.s : "", "out of memory"))
            capture_printf(&out, "    memory limit of %ld MB exceeded\n", memory_mb);
        else if (code == 127)
            capture_printf(&out, "    the test binary could not be run\n");
    }
    result->passed = !result->timed_out && exited && WIFEXITED(status) && WEXITSTATUS(status) == 0 && token_ok;
    result->output = out.s ? out.s : strdup("");
}
