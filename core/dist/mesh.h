/* mesh.h: the process mesh of 3D parallelism: dp x tp x pp ranks, this rank's coordinates and its groups. */
#ifndef MIXPAR_DIST_MESH_H
#define MIXPAR_DIST_MESH_H

#include "comm/comm.h"

/* A mesh lays the world's ranks out on three axes: tensor parallel (tp, 张量并行: one layer's matrices
 * split over tp ranks), data parallel (dp, 数据并行: replicas that see different batches) and pipeline
 * parallel (pp, 流水线并行: consecutive layers on pp stages). dp x tp x pp = world size.
 *
 * Rank order: Megatron-LM's (megatron/core/parallel_state.py, RankGenerator with its default order
 * "tp-cp-ep-dp-pp" and cp = ep = 1): tp varies fastest, then dp, then pp:
 *
 *     world rank = pp_rank * (dp * tp) + dp_rank * tp + tp_rank
 *
 * so a tp group is tp consecutive ranks (on one node, where the fast links are: tp talks most), and a
 * pipeline stage is a contiguous block of dp * tp ranks. For 8 ranks as dp=2, tp=2, pp=2:
 *     tp groups {0,1} {2,3} {4,5} {6,7}      dp groups {0,2} {1,3} {4,6} {5,7}
 *     pp groups {0,4} {1,5} {2,6} {3,7}      mp groups (tp x pp) {0,1,4,5} {2,3,6,7}
 *
 * Groups (each a comm_t made by comm_split, named for events and messages):
 *   tp  "tp"  ranks with the same (dp, pp); rank in it = tp_rank. Megatron's f/g allreduces run here.
 *   dp  "dp"  ranks with the same (tp, pp); rank in it = dp_rank. Gradients are averaged here (ZeRO
 *             shards over it).
 *   pp  "pp"  ranks with the same (dp, tp); rank in it = pp_rank, so stage s sends activations to rank
 *             s + 1 of this group and gradients back to s - 1.
 *   mp  "mp"  model parallel: ranks with the same dp (tp x pp of them); rank in it = pp_rank * tp + tp_rank.
 *             One whole model replica: found_inf and the gradient norm are agreed here (then over dp).
 *   embed "embed"  Megatron's embedding group: the first and the last stage of this rank's pp group (one
 *             rank when pp = 1), where tied input and output embeddings live; their gradients are summed
 *             here so the two copies stay equal. NULL on the middle stages.
 *
 *     mesh_t *m = mesh_create(world, 2, 2, 2);     // dp, tp, pp; exits 2 unless 2*2*2 == world size
 *     comm_allreduce(m->tp, y, y, n, COMM_FP32, COMM_SUM, COMM_ALGO_DEFAULT);
 *     if (m->pp_rank + 1 < m->pp_size) comm_send(m->pp, act, n, COMM_FP32, m->pp_rank + 1, tag);
 *     mesh_free(m);
 *
 * The world is not owned: free the mesh before comm_finalize(world). */

typedef struct {
    comm_t *world;                 /* not owned */
    int dp_size, tp_size, pp_size; /* the shape; dp * tp * pp = world size */
    int rank;                      /* world rank */
    int dp_rank, tp_rank, pp_rank; /* this rank's coordinates */
    comm_t *tp, *dp, *pp, *mp;     /* this rank's groups (size 1 where the axis is 1) */
    comm_t *embed;                 /* first and last stage of this rank's pipeline; NULL on middle stages */
} mesh_t;

/* Makes the mesh: collective over world (every rank calls it with the same shape). Exits 2 with
 * expected/found/hint when a size is below 1 or dp * tp * pp is not the world size. */
mesh_t *mesh_create(comm_t *world, int dp, int tp, int pp);
void mesh_free(mesh_t *m);

/* The world rank at coordinates (dp_rank, tp_rank, pp_rank) of a dp x tp x pp mesh, and back. Pure
 * arithmetic (no mesh needed): for tests, planners and printing. */
int mesh_world_rank(int dp, int tp, int pp, int dp_rank, int tp_rank, int pp_rank);
void mesh_coords(int dp, int tp, int pp, int world_rank, int *dp_rank, int *tp_rank, int *pp_rank);

/* Pipeline neighbours in m->pp: the next and previous stage's rank, or -1 at the last and first stage. */
int mesh_pp_next(const mesh_t *m);
int mesh_pp_prev(const mesh_t *m);

#endif
