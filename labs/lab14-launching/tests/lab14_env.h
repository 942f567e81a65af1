/* lab14_env.h: helpers for lab 14's tests: parse a made-up environment (no MPI, nothing launched) and check
 * either the fields that come out or the message that names the bad variable. */
#ifndef LAB14_ENV_H
#define LAB14_ENV_H

#include "mptest.h"
#include "comm/launch_env.h"

#include <stdio.h>
#include <string.h>

/* A full, consistent torchrun worker: rank 3 of 8, second of 4 on its machine. */
#define LAB14_TORCHRUN_OK "RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4", "MASTER_ADDR=node0", \
                          "MASTER_PORT=29500"

/* Parses vars (NULL-terminated) and requires success; the fields are in *e. */
static inline void lab14_parse_ok(char *const *vars, launch_env *e, const char *what) {
    char err[512] = "(untouched)";
    bool ok = launch_env_parse(vars, e, err, sizeof err);
    MPT_REQUIRE(ok, "%s: launch_env_parse refused a consistent environment with \"%s\"; it should return true",
                what, err);
}

/* Parses vars and requires a refusal whose message contains every string of needles (NULL-terminated):
 * the variable's name and the values that disagree, so the user knows what to fix. */
static inline void lab14_parse_fails(char *const *vars, const char *const *needles, const char *what) {
    launch_env e;
    char err[512] = "";
    bool ok = launch_env_parse(vars, &e, err, sizeof err);
    MPT_CHECK(!ok, "%s: launch_env_parse accepted it (kind %s, rank %d of %d); it should return false with a "
                   "message", what, launch_kind_name(e.kind), e.rank, e.world_size);
    if (ok) return;
    for (const char *const *n = needles; *n; n++)
        MPT_CHECK(strstr(err, *n) != NULL, "%s: the message \"%s\" should mention \"%s\"", what, err, *n);
}

#endif
