/* launch_env.c: reads the launcher's environment variables (OpenMPI, torchrun-style, Slurm) into a launch_env,
 * choosing one launcher by precedence and checking its numbers agree, so a bad launch gets a message naming
 * the variable instead of a hang or a job of lonely rank 0s. */
#include "comm/launch_env.h"

#include "base/error.h"
#include "base/lab.h"
#include "base/parse.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern char **environ;

static const char *const TORCHRUN_VARS[] = {"RANK",        "WORLD_SIZE",  "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                            "MASTER_ADDR", "MASTER_PORT"};
static const char *const OPENMPI_VARS[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
static const char *const SLURM_VARS[] = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *launch_kind_name(launch_kind kind) {
    static const char *const NAMES[] = {"none", "openmpi", "torchrun", "slurm"};
    return (unsigned)kind < COUNT(NAMES) ? NAMES[kind] : "?";
}

/* The value of NAME in vars ("NAME=VALUE" strings), or NULL when it is not there. The last one wins, as
 * with putenv. */
static const char *lookup(char *const *vars, const char *name) {
    const char *found = NULL;
    size_t n = strlen(name);
    for (char *const *v = vars; v && *v; v++)
        if (strncmp(*v, name, n) == 0 && (*v)[n] == '=') found = *v + n + 1;
    return found;
}

static bool any_set(char *const *vars, const char *const *names, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (lookup(vars, names[i])) return true;
    return false;
}

bool launch_env_has_torchrun(char *const *vars) { return any_set(vars, TORCHRUN_VARS, COUNT(TORCHRUN_VARS)); }

/* Writes the message and returns false, so checks read `return say(err, cap, ...)`. */
static bool say(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return false;
}

/* NAME as a whole number from min to max into *out; false with "NAME='VALUE': expected ..." when it is not
 * one, is negative, or is out of range. A missing NAME is the caller's business (*out untouched, true). */
static bool read_int(char *const *vars, const char *name, int64_t min, int64_t max, int *out, char *err, size_t cap) {
    const char *s = lookup(vars, name);
    int64_t v;
    if (!s) return true;
    if (!*s || !parse_i64(s, &v))
        return say(err, cap, "%s='%s': expected a whole number from %lld to %lld", name, s, (long long)min,
                   (long long)max);
    if (v < 0 && min >= 0) return say(err, cap, "%s=%s: a rank or count is never negative", name, s);
    if (v < min || v > max)
        return say(err, cap, "%s=%s: expected a whole number from %lld to %lld", name, s, (long long)min,
                   (long long)max);
    *out = (int)v;
    return true;
}

/* The names in names[0..count) not set in vars, as "A, B" into missing; returns how many. */
static int list_missing(char *const *vars, const char *const *names, size_t count, char *missing, size_t cap) {
    int n = 0;
    size_t used = 0;
    missing[0] = '\0';
    for (size_t i = 0; i < count; i++)
        if (!lookup(vars, names[i])) {
            used += (size_t)snprintf(missing + used, used < cap ? cap - used : 0, "%s%s", n ? ", " : "", names[i]);
            n++;
        }
    return n;
}

/* mpirun sets all four for every rank; they are trusted to agree but still checked for numbers. */
static bool parse_openmpi(char *const *vars, launch_env *e, char *err, size_t cap) {
    char missing[256];
    if (list_missing(vars, OPENMPI_VARS, 2, missing, sizeof missing))
        return say(err, cap, "OpenMPI variables without %s (mpirun sets OMPI_COMM_WORLD_RANK and _SIZE together)",
                   missing);
    if (!read_int(vars, "OMPI_COMM_WORLD_SIZE", 1, INT32_MAX, &e->world_size, err, cap) ||
        !read_int(vars, "OMPI_COMM_WORLD_RANK", 0, INT32_MAX, &e->rank, err, cap) ||
        !read_int(vars, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, INT32_MAX, &e->local_world_size, err, cap) ||
        !read_int(vars, "OMPI_COMM_WORLD_LOCAL_RANK", 0, INT32_MAX, &e->local_rank, err, cap))
        return false;
    if (e->rank >= e->world_size)
        return say(err, cap, "OMPI_COMM_WORLD_RANK=%d is not below OMPI_COMM_WORLD_SIZE=%d", e->rank, e->world_size);
    return true;
}

/* srun sets these per task; SLURM_NTASKS alone (an sbatch script's own shell) is one task of rank 0. */
static bool parse_slurm(char *const *vars, launch_env *e, char *err, size_t cap) {
    e->rank = 0;
    e->world_size = 1;
    if (!read_int(vars, "SLURM_NTASKS", 1, INT32_MAX, &e->world_size, err, cap) ||
        !read_int(vars, "SLURM_PROCID", 0, INT32_MAX, &e->rank, err, cap) ||
        !read_int(vars, "SLURM_LOCALID", 0, INT32_MAX, &e->local_rank, err, cap))
        return false;
    if (e->rank >= e->world_size)
        return say(err, cap, "SLURM_PROCID=%d is not below SLURM_NTASKS=%d", e->rank, e->world_size);
    return true;
}

/* torchrun's description of a worker. RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT must all be
 * there (a worker missing one cannot find the others, or would guess rank 0); LOCAL_WORLD_SIZE is checked
 * when present (older launchers leave it out). */
static bool parse_torchrun(char *const *vars, launch_env *e, char *err, size_t cap) {
    /* LAB 14 BEGIN torchrun variables: all present, numbers, ranks below their sizes, a usable rendezvous */
    static const char *const REQUIRED[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"};
    char missing[256];
    if (list_missing(vars, REQUIRED, COUNT(REQUIRED), missing, sizeof missing))
        return say(err, cap,
                   "torchrun-style launch variables incomplete: %s missing (a worker needs RANK, WORLD_SIZE, "
                   "LOCAL_RANK, MASTER_ADDR and MASTER_PORT together)",
                   missing);
    if (!read_int(vars, "WORLD_SIZE", 1, INT32_MAX, &e->world_size, err, cap) ||
        !read_int(vars, "RANK", 0, INT32_MAX, &e->rank, err, cap) ||
        !read_int(vars, "LOCAL_RANK", 0, INT32_MAX, &e->local_rank, err, cap) ||
        !read_int(vars, "LOCAL_WORLD_SIZE", 1, INT32_MAX, &e->local_world_size, err, cap) ||
        !read_int(vars, "MASTER_PORT", 1, 65535, &e->master_port, err, cap))
        return false;
    if (e->rank >= e->world_size)
        return say(err, cap, "RANK=%d is not below WORLD_SIZE=%d (ranks count 0 .. WORLD_SIZE-1)", e->rank,
                   e->world_size);
    if (e->local_world_size > e->world_size)
        return say(err, cap, "LOCAL_WORLD_SIZE=%d is more than WORLD_SIZE=%d", e->local_world_size, e->world_size);
    if (e->local_world_size > 0 && e->local_rank >= e->local_world_size)
        return say(err, cap, "LOCAL_RANK=%d is not below LOCAL_WORLD_SIZE=%d", e->local_rank, e->local_world_size);
    if (e->local_rank >= e->world_size)
        return say(err, cap, "LOCAL_RANK=%d is not below WORLD_SIZE=%d", e->local_rank, e->world_size);
    const char *addr = lookup(vars, "MASTER_ADDR");
    if (!*addr) return say(err, cap, "MASTER_ADDR is empty: expected the host name or address of rank 0");
    if (strlen(addr) >= sizeof e->master_addr)
        return say(err, cap, "MASTER_ADDR is %zu characters: expected a host name under %zu", strlen(addr),
                   sizeof e->master_addr);
    snprintf(e->master_addr, sizeof e->master_addr, "%s", addr);
    return true;
    /* LAB 14 END */
}

bool launch_env_parse(char *const *vars, launch_env *out, char *err, size_t errcap) {
    *out = (launch_env){.kind = LAUNCH_NONE, .rank = 0, .world_size = 1, .local_rank = -1, .local_world_size = -1,
                        .master_port = -1};
    if (errcap) err[0] = '\0';
    bool openmpi = any_set(vars, OPENMPI_VARS, COUNT(OPENMPI_VARS));
    bool torchrun = any_set(vars, TORCHRUN_VARS, COUNT(TORCHRUN_VARS));
    bool slurm = any_set(vars, SLURM_VARS, COUNT(SLURM_VARS));
    if (!openmpi && !torchrun && !slurm) return true; /* a plain process: rank 0 of 1 */
    launch_kind kind = LAUNCH_NONE;
    /* LAB 14 BEGIN precedence: which launcher's variables describe this process */
    if (openmpi) kind = LAUNCH_OPENMPI;       /* the transport's own launcher: comm_init will agree */
    else if (torchrun) kind = LAUNCH_TORCHRUN; /* per worker, even inside an srun step */
    else kind = LAUNCH_SLURM;
    /* LAB 14 END */
    out->kind = kind;
    switch (kind) {
    case LAUNCH_OPENMPI: return parse_openmpi(vars, out, err, errcap);
    case LAUNCH_TORCHRUN: return parse_torchrun(vars, out, err, errcap);
    case LAUNCH_SLURM: return parse_slurm(vars, out, err, errcap);
    case LAUNCH_NONE: break;
    }
    return true;
}

void launch_env_read(launch_env *out) {
    char err[512];
    if (!launch_env_parse(environ, out, err, sizeof err))
        MP_FAIL_HINT("launcher variables that agree (OpenMPI's, else torchrun-style, else Slurm's)",
                     "start the ranks with 'mixpar run -n N -- PROGRAM ARGS'; unset variables left over from "
                     "another job (env | grep -E '^(RANK|WORLD_SIZE|LOCAL_|MASTER_)')",
                     "%s", err);
}
