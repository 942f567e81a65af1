/* test_comm_groups.c: sub-communicators and the process mesh under mpirun: comm_split against
 * MPI_Comm_split, every collective and every mixpar algorithm on a group against MPI's own on the same
 * group, the dp x tp x pp mesh's groups for every shape of the world, tagged non-blocking p2p between
 * pipeline stages, and events that name the group. tests/mpi/run.sh starts it on 1..8 ranks. Rank 0
 * prints one "ok - NAME (p=N)" or "not ok - NAME (p=N)" line per check. */
#include "base/events.h"
#include "base/rng.h"
#include "comm/comm.h"
#include "dist/mesh.h"
#include "dist/tp.h"
#include "ops/matmul.h"
#include "mpi_check.h"

#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- splits against MPI_Comm_split */

/* The splits every check runs on: (color, key) of world rank r. */
typedef struct {
    const char *name;
    int (*color)(int r);
    int (*key)(int r);
} split_rule;

static int parity(int r) { return r % 2; }
static int minus_rank(int r) { return -r; }
static int thirds(int r) { return r / 3; }
static int same_key(int r) { (void)r; return 0; }
static int mod3_but_1(int r) { return r == 1 ? COMM_UNDEFINED : r % 3; }
static int scrambled(int r) { return (r * 5) % 7; }

static const split_rule SPLITS[] = {
    {"by parity, reversed keys", parity, minus_rank},
    {"blocks of 3, equal keys (parent order)", thirds, same_key},
    {"by rank mod 3, scrambled keys, rank 1 undefined", mod3_but_1, scrambled},
};
enum { NSPLITS = sizeof SPLITS / sizeof SPLITS[0] };

/* The group as MPI makes it (MPI_COMM_NULL for COMM_UNDEFINED). */
static MPI_Comm mpi_split(const split_rule *s) {
    int color = s->color(rank);
    MPI_Comm ref;
    MPI_Comm_split(MPI_COMM_WORLD, color == COMM_UNDEFINED ? MPI_UNDEFINED : color, s->key(rank), &ref);
    return ref;
}

static void split_matches_mpi(const split_rule *s) {
    comm_t *sub = comm_split(world, s->color(rank), s->key(rank));
    MPI_Comm ref = mpi_split(s);
    if ((ref == MPI_COMM_NULL) != (sub == NULL)) {
        complain("comm_split gave %s, MPI_Comm_split %s", sub ? "a group" : "NULL", ref == MPI_COMM_NULL ? "none" : "a group");
    } else if (sub) {
        int ref_rank, ref_size;
        MPI_Comm_rank(ref, &ref_rank);
        MPI_Comm_size(ref, &ref_size);
        if (comm_rank(sub) != ref_rank || comm_size(sub) != ref_size)
            complain("rank %d of %d, MPI says %d of %d", comm_rank(sub), comm_size(sub), ref_rank, ref_size);
        MPI_Group g, gw;
        MPI_Comm_group(ref, &g);
        MPI_Comm_group(MPI_COMM_WORLD, &gw);
        for (int r = 0; r < ref_size; r++) {
            int wr;
            MPI_Group_translate_ranks(g, 1, &r, gw, &wr);
            if (comm_world_rank_of(sub, r) != wr)
                complain("group rank %d is world rank %d, comm_world_rank_of says %d", r, wr, comm_world_rank_of(sub, r));
        }
        MPI_Group_free(&g);
        MPI_Group_free(&gw);
        if (strcmp(comm_name(sub), "split") != 0) complain("an unnamed group is called '%s'", comm_name(sub));
    }
    comm_free(sub);
    if (ref != MPI_COMM_NULL) MPI_Comm_free(&ref);
}

/* ---------------------------------------------------------------- collectives on a group against MPI's */

static const size_t SIZES[] = {0, 1, 3, 1000, 20001};
enum { NSIZES = sizeof SIZES / sizeof SIZES[0] };

/* Every collective, with each of mixpar's algorithms and native, on `sub` vs MPI on `ref` (the same
 * group). Integer data must match bit for bit; random fp32 sums within 2 (p-1) u sum|x|. */
static void collectives_match_mpi(comm_t *sub, MPI_Comm ref) {
    int p = comm_size(sub), me = comm_rank(sub);
    static const comm_algo ALLREDUCE[] = {COMM_ALGO_RING, COMM_ALGO_TREE, COMM_ALGO_RHD, COMM_ALGO_CHAIN, COMM_ALGO_NATIVE};
    for (size_t a = 0; a < sizeof ALLREDUCE / sizeof ALLREDUCE[0]; a++)
        for (int k = 0; k < NSIZES; k++) {
            size_t n = SIZES[k];
            float *x = xmalloc(n * 4), *got = xmalloc(n * 4), *want = xmalloc(n * 4), *ax = xmalloc(n * 4), *asum = xmalloc(n * 4);
            int32_t *xi = xmalloc(n * 4), *gi = xmalloc(n * 4), *wi = xmalloc(n * 4);
            for (size_t i = 0; i < n; i++) xi[i] = (int32_t)small_int(k + 1, rank, i) * 1000003;
            comm_allreduce(sub, xi, gi, n, COMM_INT32, COMM_MAX, ALLREDUCE[a]);
            MPI_Allreduce(xi, wi, (int)n, MPI_INT32_T, MPI_MAX, ref);
            if (memcmp(gi, wi, n * 4)) complain("allreduce %s int32 max of %zu differs from MPI's", comm_algo_name(ALLREDUCE[a]), n);
            for (size_t i = 0; i < n; i++) x[i] = small_int(k + 2, rank, i);
            comm_allreduce(sub, x, got, n, COMM_FP32, COMM_SUM, ALLREDUCE[a]);
            MPI_Allreduce(x, want, (int)n, MPI_FLOAT, MPI_SUM, ref);
            if (memcmp(got, want, n * 4)) complain("allreduce %s fp32 sum of %zu integers differs from MPI's", comm_algo_name(ALLREDUCE[a]), n);
            for (size_t i = 0; i < n; i++) x[i] = uniform(k + 3, rank, i), ax[i] = fabsf(x[i]);
            comm_allreduce(sub, x, got, n, COMM_FP32, COMM_SUM, ALLREDUCE[a]);
            MPI_Allreduce(x, want, (int)n, MPI_FLOAT, MPI_SUM, ref);
            MPI_Allreduce(ax, asum, (int)n, MPI_FLOAT, MPI_SUM, ref);
            for (size_t i = 0; i < n; i++)
                if (fabs((double)got[i] - want[i]) > 2.0 * (p - 1) * 0x1p-24 * asum[i] * 1.0001) {
                    complain("allreduce %s fp32 random, count %zu element %zu: %.9g, MPI %.9g", comm_algo_name(ALLREDUCE[a]), n, i, got[i], want[i]);
                    break;
                }
            for (size_t i = 0; i < n; i++) x[i] = small_int(k + 2, rank, i); /* avg divides by the group's size */
            comm_allreduce(sub, x, got, n, COMM_FP32, COMM_AVG, ALLREDUCE[a]);
            MPI_Allreduce(x, want, (int)n, MPI_FLOAT, MPI_SUM, ref);
            for (size_t i = 0; i < n; i++)
                if (got[i] != want[i] / (float)p) {
                    complain("allreduce %s avg: %.9g, want %.9g (sum / group size %d)", comm_algo_name(ALLREDUCE[a]), got[i], want[i] / (float)p, p);
                    break;
                }
            free(x), free(got), free(want), free(ax), free(asum), free(xi), free(gi), free(wi);
        }
    for (comm_algo algo = COMM_ALGO_RING; algo <= COMM_ALGO_NATIVE; algo += COMM_ALGO_NATIVE - COMM_ALGO_RING)
        for (int k = 0; k < NSIZES; k++) {
            size_t n = SIZES[k], total = n * (size_t)p;
            float *send = xmalloc(total * 4), *got = xmalloc(total * 4), *want = xmalloc(total * 4);
            for (size_t i = 0; i < total; i++) send[i] = small_int(k + 5, rank, i);
            comm_reduce_scatter(sub, send, got, n, COMM_FP32, COMM_SUM, algo);
            MPI_Reduce_scatter_block(send, want, (int)n, MPI_FLOAT, MPI_SUM, ref);
            if (memcmp(got, want, n * 4)) complain("reduce_scatter %s of %zu per rank differs from MPI's", comm_algo_name(algo), n);
            comm_allgather(sub, send, got, n, COMM_FP32, algo);
            MPI_Allgather(send, (int)n, MPI_FLOAT, want, (int)n, MPI_FLOAT, ref);
            if (memcmp(got, want, total * 4)) complain("allgather %s of %zu per rank differs from MPI's", comm_algo_name(algo), n);
            free(send), free(got), free(want);
        }
    for (comm_algo algo = COMM_ALGO_TREE; algo <= COMM_ALGO_NATIVE; algo += COMM_ALGO_NATIVE - COMM_ALGO_TREE)
        for (int root = 0; root < p; root++) {
            size_t n = 1001;
            float *x = xmalloc(n * 4), *got = xmalloc(n * 4), *want = xmalloc(n * 4);
            for (size_t i = 0; i < n; i++) got[i] = want[i] = small_int(7, rank, i);
            comm_broadcast(sub, got, n, COMM_FP32, root, algo);
            MPI_Bcast(want, (int)n, MPI_FLOAT, root, ref);
            if (memcmp(got, want, n * 4)) complain("broadcast %s from group rank %d differs from MPI's", comm_algo_name(algo), root);
            for (size_t i = 0; i < n; i++) x[i] = small_int(8, rank, i);
            comm_reduce(sub, x, got, n, COMM_FP32, COMM_SUM, root, algo);
            MPI_Reduce(x, want, (int)n, MPI_FLOAT, MPI_SUM, root, ref);
            if (me == root && memcmp(got, want, n * 4)) complain("reduce %s to group rank %d differs from MPI's", comm_algo_name(algo), root);
            free(x), free(got), free(want);
        }
    for (int root = 0; root < p; root++) {
        size_t n = 100, total = n * (size_t)p;
        int32_t *all = xmalloc(total * 4), *mine = xmalloc(n * 4), *back = xmalloc(total * 4);
        for (size_t i = 0; i < total; i++) all[i] = (int32_t)(i * 3 + (size_t)root);
        comm_scatter(sub, me == root ? all : NULL, mine, n, COMM_INT32, root);
        if (mine[0] != (int32_t)((size_t)me * n * 3 + (size_t)root)) complain("scatter from group rank %d: block %d wrong", root, me);
        comm_gather(sub, mine, me == root ? back : NULL, n, COMM_INT32, root);
        if (me == root && memcmp(all, back, total * 4)) complain("gather to group rank %d does not give back the scatter", root);
        free(all), free(mine), free(back);
    }
    comm_barrier(sub);
}

/* Two levels: a split of a split still matches MPI's split of MPI's split, and knows its world ranks. */
static void nested_split_matches_mpi(void) {
    comm_t *half = comm_split(world, rank % 2, rank);
    MPI_Comm ref_half, ref;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &ref_half);
    int hr = comm_rank(half);
    comm_t *sub = comm_split(half, hr / 2, -hr);
    MPI_Comm_split(ref_half, hr / 2, -hr, &ref);
    int ref_rank, ref_size;
    MPI_Comm_rank(ref, &ref_rank);
    MPI_Comm_size(ref, &ref_size);
    if (comm_rank(sub) != ref_rank || comm_size(sub) != ref_size)
        complain("split of a split: rank %d of %d, MPI says %d of %d", comm_rank(sub), comm_size(sub), ref_rank, ref_size);
    int *wr = xmalloc(sizeof(int) * (size_t)ref_size);
    MPI_Allgather(&rank, 1, MPI_INT, wr, 1, MPI_INT, ref);
    for (int r = 0; r < ref_size; r++)
        if (comm_world_rank_of(sub, r) != wr[r]) complain("split of a split: rank %d is world rank %d, not %d", r, wr[r], comm_world_rank_of(sub, r));
    collectives_match_mpi(sub, ref);
    free(wr);
    comm_free(sub);
    comm_free(half);
    MPI_Comm_free(&ref);
    MPI_Comm_free(&ref_half);
}

/* ---------------------------------------------------------------- the mesh */

/* Every mesh shape of this world: coordinates in Megatron's order, each group's members in order, and
 * an allreduce over each group (real traffic) that sums the members' world ranks. */
static void mesh_groups_are_megatrons(int dp, int tp, int pp) {
    mesh_t *m = mesh_create(world, dp, tp, pp);
    if (m->tp_rank != rank % tp || m->dp_rank != rank / tp % dp || m->pp_rank != rank / (tp * dp))
        complain("coordinates (dp %d, tp %d, pp %d) for world rank %d", m->dp_rank, m->tp_rank, m->pp_rank, rank);
    if (mesh_world_rank(dp, tp, pp, m->dp_rank, m->tp_rank, m->pp_rank) != rank) complain("mesh_world_rank does not invert mesh_coords");
    struct {
        comm_t *c;
        const char *name;
        int size, my_index;
    } groups[] = {
        {m->tp, "tp", tp, m->tp_rank},
        {m->dp, "dp", dp, m->dp_rank},
        {m->pp, "pp", pp, m->pp_rank},
        {m->mp, "mp", tp * pp, m->pp_rank * tp + m->tp_rank},
    };
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        comm_t *c = groups[g].c;
        if (strcmp(comm_name(c), groups[g].name) || comm_size(c) != groups[g].size || comm_rank(c) != groups[g].my_index) {
            complain("group %s: named '%s', rank %d of %d (want %d of %d)", groups[g].name, comm_name(c), comm_rank(c),
                     comm_size(c), groups[g].my_index, groups[g].size);
            continue;
        }
        int64_t want_sum = 0;
        for (int i = 0; i < comm_size(c); i++) {
            /* member i: vary this group's axis, keep the others at this rank's coordinates */
            int d = m->dp_rank, t = m->tp_rank, s = m->pp_rank;
            if (g == 0) t = i;
            else if (g == 1) d = i;
            else if (g == 2) s = i;
            else s = i / tp, t = i % tp;
            int want = mesh_world_rank(dp, tp, pp, d, t, s);
            want_sum += want;
            if (comm_world_rank_of(c, i) != want)
                complain("group %s member %d is world rank %d, want %d", groups[g].name, i, comm_world_rank_of(c, i), want);
        }
        int64_t sum = rank;
        comm_allreduce(c, &sum, &sum, 1, COMM_INT64, COMM_SUM, COMM_ALGO_RING);
        if (sum != want_sum) complain("ring allreduce over %s sums world ranks to %lld, want %lld", groups[g].name, (long long)sum, (long long)want_sum);
    }
    mesh_free(m);
}

/* The same groups written out by hand for 8 ranks (Megatron's docs draw 2 x 2 x 2 so): each row is one
 * group, members in group order; rank r's group is the row that holds r. */
static const struct {
    int dp, tp, pp;
    const char *tp_groups, *dp_groups, *pp_groups, *mp_groups, *embed_groups; /* embed: "" on middle stages */
} MESH_BY_HAND[] = {
    {2, 2, 2, "0 1|2 3|4 5|6 7", "0 2|1 3|4 6|5 7", "0 4|1 5|2 6|3 7", "0 1 4 5|2 3 6 7", "0 4|1 5|2 6|3 7"},
    {1, 2, 4, "0 1|2 3|4 5|6 7", "0|1|2|3|4|5|6|7", "0 2 4 6|1 3 5 7", "0 1 2 3 4 5 6 7", "0 6|1 7"},
    {2, 4, 1, "0 1 2 3|4 5 6 7", "0 4|1 5|2 6|3 7", "0|1|2|3|4|5|6|7", "0 1 2 3|4 5 6 7", "0|1|2|3|4|5|6|7"},
    {1, 1, 8, "0|1|2|3|4|5|6|7", "0|1|2|3|4|5|6|7", "0 1 2 3 4 5 6 7", "0 1 2 3 4 5 6 7", "0 7"},
};

/* The row of `groups` ("a b|c d|...") that holds world rank r must be c's members in order. */
static void expect_group_by_hand(const comm_t *c, const char *groups, const char *what) {
    int members[8], n = 0, found = 0;
    for (const char *p = groups;; p++) {
        if (*p >= '0' && *p <= '9') {
            members[n] = (int)strtol(p, (char **)&p, 10), found |= members[n] == rank, n++;
            p--;
        } else if (*p == '|' || *p == '\0') {
            if (found) break;
            n = 0;
            if (!*p) break;
        }
    }
    if (!found || comm_size(c) != n) {
        complain("%s group has %d ranks, by hand %d", what, comm_size(c), found ? n : -1);
        return;
    }
    for (int i = 0; i < n; i++)
        if (comm_world_rank_of(c, i) != members[i]) complain("%s group member %d is world rank %d, by hand %d", what, i, comm_world_rank_of(c, i), members[i]);
}

static void mesh_groups_by_hand(void) {
    for (size_t k = 0; k < sizeof MESH_BY_HAND / sizeof MESH_BY_HAND[0]; k++) {
        mesh_t *m = mesh_create(world, MESH_BY_HAND[k].dp, MESH_BY_HAND[k].tp, MESH_BY_HAND[k].pp);
        expect_group_by_hand(m->tp, MESH_BY_HAND[k].tp_groups, "tp");
        expect_group_by_hand(m->dp, MESH_BY_HAND[k].dp_groups, "dp");
        expect_group_by_hand(m->pp, MESH_BY_HAND[k].pp_groups, "pp");
        expect_group_by_hand(m->mp, MESH_BY_HAND[k].mp_groups, "mp");
        bool end_stage = m->pp_rank == 0 || m->pp_rank == m->pp_size - 1;
        if (end_stage != (m->embed != NULL)) complain("stage %d: embed group %s", m->pp_rank, m->embed ? "present" : "missing");
        else if (m->embed) expect_group_by_hand(m->embed, MESH_BY_HAND[k].embed_groups, "embed");
        mesh_free(m);
        reportf("mesh dp=%d tp=%d pp=%d on 8 ranks: groups as written out by hand", MESH_BY_HAND[k].dp, MESH_BY_HAND[k].tp,
               MESH_BY_HAND[k].pp);
    }
}

/* A pipeline's traffic on the pp group: micro-batches' activations go forward stage by stage, tagged by
 * micro-batch, several in flight, received in the reverse order of sending; their gradients go back on
 * other tags. Then a ring (last stage -> first) of tagged messages, as interleaved schedules need. */
static void pipeline_p2p(int dp, int tp, int pp) {
    mesh_t *m = mesh_create(world, dp, tp, pp);
    enum { MICRO = 4, N = 3000, TAG_ACT = 100, TAG_GRAD = 200, TAG_RING = 300 };
    float *act = xmalloc(sizeof(float) * MICRO * N), *in = xmalloc(sizeof(float) * MICRO * N);
    int next = mesh_pp_next(m), prev = mesh_pp_prev(m);
    comm_request *sends[MICRO] = {0}, *recvs[MICRO] = {0};
    for (int mb = MICRO - 1; mb >= 0 && prev >= 0; mb--) recvs[mb] = comm_irecv(m->pp, in + mb * N, N, COMM_FP32, prev, TAG_ACT + mb);
    for (int mb = 0; mb < MICRO; mb++) {
        comm_wait(&recvs[mb]);
        for (int i = 0; i < N; i++) /* this stage's "layer": add (stage + 1) to what came in */
            act[mb * N + i] = (prev >= 0 ? in[mb * N + i] : (float)(mb * 1000 + i % 97 + m->dp_rank * 10 + m->tp_rank)) + (float)(m->pp_rank + 1);
        if (next >= 0) sends[mb] = comm_isend(m->pp, act + mb * N, N, COMM_FP32, next, TAG_ACT + mb);
    }
    comm_wait_all(sends, MICRO);
    for (int mb = 0; mb < MICRO; mb++)
        if (sends[mb]) complain("comm_wait_all left request %d set", mb);
    for (int mb = 0; mb < MICRO; mb++)
        for (int i = 0; i < N; i++) {
            float want = (float)(mb * 1000 + i % 97 + m->dp_rank * 10 + m->tp_rank) + (float)((m->pp_rank + 1) * (m->pp_rank + 2) / 2);
            if (act[mb * N + i] != want) {
                complain("stage %d micro-batch %d element %d: %g after the forward chain, want %g", m->pp_rank, mb, i, act[mb * N + i], want);
                mb = MICRO;
                break;
            }
        }
    /* Backward: the last stage starts; gradients carry the stage numbers they passed, on their own tags. */
    int64_t grad[MICRO], got[MICRO];
    for (int mb = 0; mb < MICRO; mb++) {
        recvs[mb] = next >= 0 ? comm_irecv(m->pp, &got[mb], 1, COMM_INT64, next, TAG_GRAD + mb) : NULL;
        if (next < 0) got[mb] = 0;
    }
    for (int mb = MICRO - 1; mb >= 0; mb--) {
        comm_wait(&recvs[mb]);
        grad[mb] = got[mb] * 10 + m->pp_rank + 1 + mb;
        sends[mb] = prev >= 0 ? comm_isend(m->pp, &grad[mb], 1, COMM_INT64, prev, TAG_GRAD + mb) : NULL;
    }
    for (int mb = 0; mb < MICRO; mb++) comm_wait(&sends[mb]);
    for (int mb = 0; mb < MICRO; mb++) {
        int64_t want = 0;
        for (int s = pp - 1; s >= m->pp_rank; s--) want = want * 10 + s + 1 + mb;
        if (grad[mb] != want) complain("stage %d micro-batch %d: gradient %lld, want %lld", m->pp_rank, mb, (long long)grad[mb], (long long)want);
    }
    /* Ring: every stage sends to the next, the last to the first. */
    int64_t token = m->rank, from = -1;
    comm_request *r = comm_irecv(m->pp, &from, 1, COMM_INT64, (m->pp_rank + pp - 1) % pp, TAG_RING);
    comm_request *s = comm_isend(m->pp, &token, 1, COMM_INT64, (m->pp_rank + 1) % pp, TAG_RING);
    comm_wait(&s);
    comm_wait(&r);
    int want_from = comm_world_rank_of(m->pp, (m->pp_rank + pp - 1) % pp);
    if (from != want_from) complain("ring on pp: got world rank %lld's token, want %d's", (long long)from, want_from);
    free(act), free(in);
    mesh_free(m);
}

/* ---------------------------------------------------------------- events, debug check on a group */

static void group_events(void) {
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/mixpar-comm-groups-%d", (int)getppid());
    ev_writer *w = ev_open(dir, rank);
    comm_t *tp = comm_split(world, rank / 2, rank);
    comm_set_name(tp, "tp");
    comm_set_events(tp, w);
    comm_set_debug(tp, true); /* a matched collective passes the agreement check on a group */
    float x = 1;
    comm_allreduce(tp, &x, &x, 1, COMM_FP32, COMM_SUM, COMM_ALGO_TREE);
    if (x != (float)comm_size(tp)) complain("allreduce of ones over tp gave %g", x);
    comm_set_events(tp, NULL);
    char path[300];
    snprintf(path, sizeof path, "%s", ev_path(w));
    ev_close(w);
    char want[128];
    int first = rank / 2 * 2;
    if (comm_size(tp) == 2) snprintf(want, sizeof want, "\"members\":[%d,%d]", first, first + 1);
    else snprintf(want, sizeof want, "\"members\":[%d]", first);
    FILE *f = fopen(path, "r");
    char line[1024] = "";
    if (!f || !fgets(line, sizeof line, f)) complain("no event written to %s", path);
    else if (!strstr(line, "\"group\":\"tp\"") || !strstr(line, want) || !strstr(line, "\"group_rank\":") ||
             !strstr(line, "\"op\":\"allreduce\""))
        complain("event without group tp and %s: %s", want, line);
    if (f) fclose(f);
    unlink(path);
    comm_free(tp);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) rmdir(dir);
}

/* ---------------------------------------------------------------- Megatron's tensor-parallel linear pair */

/* The MLP's two linears without the activation between them, Y = (X A^T + a) B^T + b, unsharded on every rank vs column-parallel A and
 * row-parallel B on the tp group: outputs and every gradient (dX, dA's and dB's shards, dbiases) within
 * fp32 tolerance of the unsharded layer's. */
static void tp_linear_pair_matches_unsharded(int dp, int tp_size, int pp) {
    mesh_t *m = mesh_create(world, dp, tp_size, pp);
    enum { N = 6, C = 8, H = 16 }; /* rows, model width, hidden width (split over tp) */
    int Hl = H / tp_size, t = m->tp_rank;
    /* Full weights, the same on every rank: A (H, C), a (H), B (C, H), b (C); input X (N, C), dY (N, C). */
    float A[H * C], a[H], B[C * H], b[C], X[N * C], dY[N * C];
    for (int i = 0; i < H * C; i++) A[i] = uniform(1, 0, (size_t)i), B[i] = uniform(2, 0, (size_t)i);
    for (int i = 0; i < H; i++) a[i] = uniform(3, 0, (size_t)i);
    for (int i = 0; i < C; i++) b[i] = uniform(4, 0, (size_t)i);
    for (int i = 0; i < N * C; i++) X[i] = uniform(5, m->dp_rank, (size_t)i), dY[i] = uniform(6, m->dp_rank, (size_t)i);
    /* Unsharded reference. */
    float Z[N * H], Y[N * C], dZ[N * H] = {0}, dX[N * C] = {0}, dA[H * C] = {0}, da[H] = {0}, dB[C * H] = {0}, db[C] = {0};
    /* dX starts non-zero: backward accumulates, and f's allreduce must not sum what dX already held. */
    for (int i = 0; i < N * C; i++) dX[i] = 0.5f;
    matmul_forward(Z, X, A, a, N, C, H);
    matmul_forward(Y, Z, B, b, N, H, C);
    matmul_backward(dZ, dB, db, dY, Z, B, N, H, C);
    matmul_backward(dX, dA, da, dZ, X, A, N, C, H);
    /* This rank's shards: rows t*Hl.. of A and a (columns of the output), columns t*Hl.. of B. */
    float Al[H * C], al[H], Bl[C * H];
    memcpy(Al, A + t * Hl * C, sizeof(float) * Hl * C);
    memcpy(al, a + t * Hl, sizeof(float) * Hl);
    for (int o = 0; o < C; o++) memcpy(Bl + o * Hl, B + o * H + t * Hl, sizeof(float) * Hl);
    float Zl[N * H], Yt[N * C], dZl[N * H] = {0}, dXt[N * C] = {0}, dAl[H * C] = {0}, dal[H] = {0}, dBl[C * H] = {0}, dbt[C] = {0};
    for (int i = 0; i < N * C; i++) dXt[i] = 0.5f;
    tp_column_linear_forward(m->tp, Zl, X, Al, al, N, C, Hl);
    tp_row_linear_forward(m->tp, Yt, Zl, Bl, b, N, Hl, C);
    tp_row_linear_backward(m->tp, dZl, dBl, dbt, dY, Zl, Bl, N, Hl, C);
    tp_column_linear_backward(m->tp, dXt, dAl, dal, dZl, X, Al, N, C, Hl);
    const float tol = 1e-5f;
#define CLOSE(got, want, n, what)                                                                                     \
    for (int i = 0; i < (n); i++)                                                                                     \
        if (fabsf((got)[i] - (want)[i]) > tol * (1 + fabsf((want)[i]))) {                                             \
            complain("tp=%d: %s[%d] = %.8g, unsharded %.8g", tp_size, what, i, (got)[i], (want)[i]);                 \
            break;                                                                                                    \
        }
    CLOSE(Yt, Y, N * C, "Y");
    for (int r = 0; r < N; r++) CLOSE(Zl + r * Hl, Z + r * H + t * Hl, Hl, "Z shard");
    CLOSE(dXt, dX, N * C, "dX");
    CLOSE(dAl, dA + t * Hl * C, Hl * C, "dA shard");
    CLOSE(dal, da + t * Hl, Hl, "da shard");
    for (int o = 0; o < C; o++) CLOSE(dBl + o * Hl, dB + o * H + t * Hl, Hl, "dB shard");
    CLOSE(dbt, db, C, "db");
#undef CLOSE
    mesh_free(m);
}

/* f and g, Megatron's conjugate pair: f is the identity forward and an allreduce backward; g the reverse. */
static void tp_conjugate_ops(void) {
    comm_t *tp = comm_split(world, 0, rank);
    float x[5], y[5];
    for (int i = 0; i < 5; i++) x[i] = y[i] = (float)(rank + i);
    tp_copy_to_region_forward(tp, x, 5);
    tp_reduce_from_region_backward(tp, y, 5);
    for (int i = 0; i < 5; i++)
        if (x[i] != (float)(rank + i) || y[i] != (float)(rank + i)) complain("f forward / g backward changed element %d", i);
    tp_copy_to_region_backward(tp, x, 5);
    tp_reduce_from_region_forward(tp, y, 5);
    for (int i = 0; i < 5; i++) {
        float want = (float)(nranks * (nranks - 1) / 2 + nranks * i);
        if (x[i] != want || y[i] != want) complain("f backward / g forward element %d: %g and %g, want the sum %g", i, x[i], y[i], want);
    }
    comm_free(tp);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
    start_under_mpirun(&argc, &argv, "test_comm_groups");
    for (int s = 0; s < NSPLITS; s++) {
        split_matches_mpi(&SPLITS[s]);
        reportf("comm_split %s: ranks, sizes and world ranks as MPI_Comm_split", SPLITS[s].name);
    }
    for (int s = 0; s < NSPLITS; s++) {
        comm_t *sub = comm_split(world, SPLITS[s].color(rank), SPLITS[s].key(rank));
        MPI_Comm ref = mpi_split(&SPLITS[s]);
        if (sub) collectives_match_mpi(sub, ref);
        comm_free(sub);
        if (ref != MPI_COMM_NULL) MPI_Comm_free(&ref);
        reportf("every collective and algorithm on groups split %s equals MPI's on the same group", SPLITS[s].name);
    }
    nested_split_matches_mpi();
    reportf("a split of a split: ranks, world ranks and every collective as MPI's");
    for (int pp = 1; pp <= nranks; pp++)
        for (int tp = 1; tp * pp <= nranks; tp++) {
            if (nranks % (tp * pp)) continue;
            int dp = nranks / (tp * pp);
            mesh_groups_are_megatrons(dp, tp, pp);
            reportf("mesh dp=%d tp=%d pp=%d: Megatron's rank order, tp/dp/pp/mp members, ring allreduce in each", dp, tp, pp);
            if (pp > 1) {
                pipeline_p2p(dp, tp, pp);
                reportf("mesh dp=%d tp=%d pp=%d: tagged non-blocking p2p of 4 micro-batches forward and back, ring", dp, tp, pp);
            }
        }
    if (nranks == 8) mesh_groups_by_hand();
    group_events();
    reportf("comm events on a group name it (group, group_rank, members); debug check passes on a group");
    tp_conjugate_ops();
    reportf("tp f (identity / allreduce) and g (allreduce / identity)");
    for (int tp = 1; tp <= 4 && tp <= nranks; tp *= 2) {
        if (nranks % tp) continue;
        tp_linear_pair_matches_unsharded(nranks / tp, tp, 1);
        reportf("tp=%d column-parallel + row-parallel linear: forward and backward equal the unsharded pair", tp);
    }
    comm_finalize(world);
    return failed_checks ? 1 : 0;
}
