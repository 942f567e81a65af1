/* mesh.c: the dp x tp x pp process mesh: coordinates in Megatron-LM's rank order and the groups, by comm_split. */
#include "dist/mesh.h"

#include "base/error.h"

#include <stdbool.h>
#include <stdlib.h>

int mesh_world_rank(int dp, int tp, int pp, int dp_rank, int tp_rank, int pp_rank) {
    (void)pp;
    return pp_rank * dp * tp + dp_rank * tp + tp_rank;
}

void mesh_coords(int dp, int tp, int pp, int world_rank, int *dp_rank, int *tp_rank, int *pp_rank) {
    (void)pp;
    *tp_rank = world_rank % tp;
    *dp_rank = world_rank / tp % dp;
    *pp_rank = world_rank / (tp * dp);
}

static comm_t *named_split(comm_t *world, int color, int key, const char *name) {
    comm_t *c = comm_split(world, color, key);
    MP_ASSERT(c, "comm_split gave no group for color %d", color);
    comm_set_name(c, name);
    return c;
}

mesh_t *mesh_create(comm_t *world, int dp, int tp, int pp) {
    int world_size = comm_size(world);
    if (dp < 1 || tp < 1 || pp < 1)
        MP_FAIL_HINT("data, tensor and pipeline parallel sizes of at least 1",
                     "a size of 1 switches that kind of parallelism off", "dp=%d tp=%d pp=%d", dp, tp, pp);
    if ((long long)dp * tp * pp != world_size)
        MP_FAIL_HINT("dp x tp x pp equal to the number of ranks",
                     "start as many ranks as dp x tp x pp (mixpar run -n N), or change the sizes so they multiply to N",
                     "dp=%d x tp=%d x pp=%d = %lld, but the world has %d rank%s", dp, tp, pp, (long long)dp * tp * pp,
                     world_size, world_size == 1 ? "" : "s");
    mesh_t *m = calloc(1, sizeof *m);
    MP_ASSERT(m, "out of memory for a mesh");
    m->world = world;
    m->dp_size = dp, m->tp_size = tp, m->pp_size = pp;
    m->rank = comm_rank(world);
    mesh_coords(dp, tp, pp, m->rank, &m->dp_rank, &m->tp_rank, &m->pp_rank);
    /* A group's color is the coordinates it shares, its key the coordinate that runs along it. */
    m->tp = named_split(world, m->pp_rank * dp + m->dp_rank, m->tp_rank, "tp");
    m->dp = named_split(world, m->pp_rank * tp + m->tp_rank, m->dp_rank, "dp");
    m->pp = named_split(world, m->dp_rank * tp + m->tp_rank, m->pp_rank, "pp");
    m->mp = named_split(world, m->dp_rank, m->pp_rank * tp + m->tp_rank, "mp");
    bool end_stage = m->pp_rank == 0 || m->pp_rank == pp - 1;
    m->embed = comm_split(world, end_stage ? m->dp_rank * tp + m->tp_rank : COMM_UNDEFINED, m->pp_rank);
    if (m->embed) comm_set_name(m->embed, "embed");
    return m;
}

void mesh_free(mesh_t *m) {
    if (!m) return;
    comm_free(m->tp);
    comm_free(m->dp);
    comm_free(m->pp);
    comm_free(m->mp);
    comm_free(m->embed);
    free(m);
}

int mesh_pp_next(const mesh_t *m) { return m->pp_rank + 1 < m->pp_size ? m->pp_rank + 1 : -1; }
int mesh_pp_prev(const mesh_t *m) { return m->pp_rank > 0 ? m->pp_rank - 1 : -1; }
