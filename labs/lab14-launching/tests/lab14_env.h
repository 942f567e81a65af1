/* lab14_env.h: helpers for lab 14's tests: parse a made-up environment (no MPI, nothing launched) and check
 * either the fields that come out or the message that names the bad variable. */
#ifndef LAB14_ENV_H
#define LAB14_ENV_H

#include "mptest.h"
#include "comm/launch_env.h"

#include <stdio.h>
#include <string.h>

#include "base/rng.h"

/* A full, consistent torchrun worker: rank 3 of 8, second of 4 on its machine. */
#define LAB14_TORCHRUN_OK "RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4", "MASTER_ADDR=node0", \
                          "MASTER_PORT=29500"

/* Parses vars (NULL-terminated) and requires success; the fields are in *e. */
static inline void lab14_parse_ok(char *const *vars, launch_env *e, const char *what) {
    char err[512] = "(untouched)";
    bool ok = launch_env_parse(vars, e, err, sizeof err);
    MPT_OBSERVE(ok);
    if (ok) { /* what the grader compares with the reference */
        MPT_OBSERVE((uint64_t)e->kind << 48 | (uint64_t)(uint32_t)e->rank << 24 | (uint32_t)e->world_size);
        MPT_OBSERVE((uint64_t)(uint32_t)e->local_rank << 32 | (uint32_t)e->local_world_size);
        MPT_OBSERVE((uint64_t)(uint32_t)e->master_port << 32 | (uint64_t)strlen(e->master_addr));
    }
    MPT_REQUIRE(ok, "%s: launch_env_parse refused a consistent environment with \"%s\"; it should return true",
                what, err);
}

/* Parses vars and requires a refusal whose message contains every string of needles (NULL-terminated):
 * the variable's name and the values that disagree, so the user knows what to fix. */
/* A consistent torchrun environment drawn from this grade's seed (index: which one), parsed, every field recorded
 * for the grader: a refusal alone is the same for every grade, so each refusal test also parses one of these. */
static inline void lab14_observe_a_drawn_environment(const char *file, int line, uint64_t index) {
    uint32_t h = mp_hash32(mpt_seed(), index);
    int world = 1 + (int)(h % 64), local_world = 1 + (int)((h >> 6) % 8), rank = (int)((h >> 9) % (uint32_t)world);
    if (local_world > world) local_world = world;
    int local_rank = rank % local_world, port = 1024 + (int)((h >> 16) % 60000);
    char v[6][64];
    snprintf(v[0], sizeof v[0], "RANK=%d", rank);
    snprintf(v[1], sizeof v[1], "WORLD_SIZE=%d", world);
    snprintf(v[2], sizeof v[2], "LOCAL_RANK=%d", local_rank);
    snprintf(v[3], sizeof v[3], "LOCAL_WORLD_SIZE=%d", local_world);
    snprintf(v[4], sizeof v[4], "MASTER_ADDR=node%u", h % 97);
    snprintf(v[5], sizeof v[5], "MASTER_PORT=%d", port);
    char *vars[] = {v[0], v[1], v[2], v[3], v[4], v[5], NULL};
    launch_env e;
    char err[512] = "";
    bool ok = launch_env_parse(vars, &e, err, sizeof err);
    mpt_observe(file, line, ok);
    if (!ok) return;
    mpt_observe(file, line, (uint64_t)e.kind << 48 | (uint64_t)(uint32_t)e.rank << 24 | (uint32_t)e.world_size);
    mpt_observe(file, line, (uint64_t)(uint32_t)e.local_rank << 32 | (uint32_t)e.local_world_size);
    mpt_observe(file, line, (uint64_t)(uint32_t)e.master_port << 32 | (uint64_t)strlen(e.master_addr));
}

static inline void lab14_parse_fails(char *const *vars, const char *const *needles, const char *what) {
    static uint64_t calls;
    lab14_observe_a_drawn_environment(__FILE__, __LINE__, calls++);
    launch_env e;
    char err[512] = "";
    bool ok = launch_env_parse(vars, &e, err, sizeof err);
    MPT_OBSERVE(ok);
    MPT_CHECK(!ok, "%s: launch_env_parse accepted it (kind %s, rank %d of %d); it should return false with a "
                   "message", what, launch_kind_name(e.kind), e.rank, e.world_size);
    if (ok) return;
    for (const char *const *n = needles; *n; n++)
        MPT_CHECK(strstr(err, *n) != NULL, "%s: the message \"%s\" should mention \"%s\"", what, err, *n);
}

#endif
