/* lab28_worker.c: the program lab 28's tests start on N ranks (build/labs/lab28_worker): Megatron's tensor-parallel
 * pieces of this tree's regions on a tp group of every rank, against the unsharded computation in double.
 *
 *   lab28_worker DIR SEED tp_linear N C H
 *     Y = (X A^T + a) B^T + b with A column-parallel (H/tp rows each) and B row-parallel (H/tp columns each),
 *     forward and backward (dX starts at 0.5: backward accumulates), dist/tp.h's four functions.
 *   lab28_worker DIR SEED vocab_ce N V VP SCALE
 *     model_vocab_parallel_loss and its backward on VP/tp vocabulary columns a rank (VP - V padding columns,
 *     about a sixth of the targets -1; rows 0 and 1 target the columns on either side of the first split), logits
 *     uniform in [-SCALE, SCALE).
 *
 * Every rank writes DIR/out.rank<R>: one line "ARRAY INDEX GOT WANT" for each element it computed (GOT its
 * float, WANT the unsharded value in double); the test compares them (lab28_run.h). Bad arguments: exit 2.
 *
 *   lab28_worker CONFIG RUN_DIR [key.path=value ...]
 *     (what lab 19's runner starts, lab19_run.h) one quiet training run of the core's trainer, built from this
 *     tree's regions, on a dp x tp x pp mesh when the overrides ask for one; every rank's events in RUN_DIR. */
#include "base/rng.h"
#include "comm/comm.h"
#include "dist/mesh.h"
#include "dist/tp.h"
#include "model/model.h"
#include "train/config.h"
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE *out;

static void put(const char *array, int i, float got, double want) { fprintf(out, "%s %d %.9g %.17g\n", array, i, got, want); }

static float *uniform(mp_rng *rng, size_t n, float scale) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = scale * (2 * mp_rng_uniform(rng) - 1);
    return x;
}

/* y (N, O) = x (N, I) w^T (+ b) in double */
static void linear(double *y, const double *x, const float *w, const float *b, int N, int I, int O) {
    for (int r = 0; r < N; r++)
        for (int o = 0; o < O; o++) {
            double s = b ? b[o] : 0;
            for (int i = 0; i < I; i++) s += x[(size_t)r * I + i] * w[(size_t)o * I + i];
            y[(size_t)r * O + o] = s;
        }
}

static void tp_linear(mesh_t *m, mp_rng *rng, int N, int C, int H) {
    int P = m->tp_size, t = m->tp_rank, Hl = H / P;
    float *A = uniform(rng, (size_t)H * C, 0.5f), *a = uniform(rng, H, 0.5f), *B = uniform(rng, (size_t)C * H, 0.5f);
    float *b = uniform(rng, C, 0.5f), *X = uniform(rng, (size_t)N * C, 1), *dY = uniform(rng, (size_t)N * C, 1);
    /* Unsharded, in double: Z = X A^T + a, Y = Z B^T + b; dZ = dY B, dX = 0.5 + dZ A, dA = dZ^T X, dB = dY^T Z. */
    double *Xd = malloc(sizeof(double) * N * C), *Z = malloc(sizeof(double) * N * H), *Y = malloc(sizeof(double) * N * C);
    for (int i = 0; i < N * C; i++) Xd[i] = X[i];
    linear(Z, Xd, A, a, N, C, H);
    linear(Y, Z, B, b, N, H, C);
    double *dZ = calloc((size_t)N * H, sizeof(double));
    for (int r = 0; r < N; r++)
        for (int h = 0; h < H; h++)
            for (int o = 0; o < C; o++) dZ[r * H + h] += (double)dY[r * C + o] * B[o * H + h];
    /* This rank's shards: rows t Hl .. of A and a, columns t Hl .. of B. */
    float *Al = A + (size_t)t * Hl * C, *al = a + t * Hl, *Bl = malloc(sizeof(float) * C * Hl);
    for (int o = 0; o < C; o++) memcpy(Bl + o * Hl, B + o * H + t * Hl, sizeof(float) * Hl);
    float *Zl = malloc(sizeof(float) * N * Hl), *Yt = malloc(sizeof(float) * N * C);
    float *dZl = calloc((size_t)N * Hl, sizeof(float)), *dX = malloc(sizeof(float) * N * C);
    float *dAl = calloc((size_t)Hl * C, sizeof(float)), *dal = calloc(Hl, sizeof(float));
    float *dBl = calloc((size_t)C * Hl, sizeof(float)), *db = calloc(C, sizeof(float));
    for (int i = 0; i < N * C; i++) dX[i] = 0.5f;
    tp_column_linear_forward(m->tp, Zl, X, Al, al, N, C, Hl);
    tp_row_linear_forward(m->tp, Yt, Zl, Bl, b, N, Hl, C);
    tp_row_linear_backward(m->tp, dZl, dBl, db, dY, Zl, Bl, N, Hl, C);
    tp_column_linear_backward(m->tp, dX, dAl, dal, dZl, X, Al, N, C, Hl);
    for (int i = 0; i < N * C; i++) put("Y", i, Yt[i], Y[i]);
    for (int i = 0; i < N * C; i++) {
        double want = 0.5;
        for (int h = 0; h < H; h++) want += dZ[(i / C) * H + h] * A[h * C + i % C];
        put("dX", i, dX[i], want);
    }
    for (int h = 0; h < Hl; h++)
        for (int c = 0; c < C; c++) {
            double want = 0;
            for (int r = 0; r < N; r++) want += dZ[r * H + t * Hl + h] * X[r * C + c];
            put("dA", h * C + c, dAl[h * C + c], want);
        }
    for (int o = 0; o < C; o++)
        for (int h = 0; h < Hl; h++) {
            double want = 0;
            for (int r = 0; r < N; r++) want += (double)dY[r * C + o] * Z[r * H + t * Hl + h];
            put("dB", o * Hl + h, dBl[o * Hl + h], want);
        }
    for (int o = 0; o < C; o++) {
        double want = 0;
        for (int r = 0; r < N; r++) want += dY[r * C + o];
        put("db", o, db[o], want);
    }
    free(A), free(a), free(B), free(b), free(X), free(dY), free(Xd), free(Z), free(Y), free(dZ), free(Bl), free(Zl);
    free(Yt), free(dZl), free(dX), free(dAl), free(dal), free(dBl), free(db);
}

static void vocab_ce(mesh_t *m, mp_rng *rng, int N, int V, int Vp, float scale) {
    int P = m->tp_size, t = m->tp_rank, Vl = Vp / P, v0 = t * Vl;
    float *logits = uniform(rng, (size_t)N * Vp, scale), *dloss = malloc(sizeof(float) * N);
    int *targets = malloc(sizeof(int) * N);
    for (int i = 0; i < N; i++) {
        targets[i] = mp_rng_u32(rng) % 6 == 0 ? -1 : (int)(mp_rng_u32(rng) % (uint32_t)V);
        dloss[i] = 1.0f / N;
    }
    /* the edges of the split, whatever the seed: rank 0's last column and rank 1's first */
    if (N > 1 && Vl < V) targets[0] = Vl - 1, targets[1] = Vl;
    float *mine = malloc(sizeof(float) * N * Vl), *lse = malloc(sizeof(float) * N), *losses = malloc(sizeof(float) * N);
    float *sums = malloc(sizeof(float) * N), *dlogits = malloc(sizeof(float) * N * Vl);
    for (int i = 0; i < N; i++) memcpy(mine + (size_t)i * Vl, logits + (size_t)i * Vp + v0, sizeof(float) * Vl);
    model_shard sh = tp_model_shard(m, 0, 0);
    model_vocab_parallel_loss(&sh, lse, losses, sums, mine, targets, N, Vl, v0, V);
    model_vocab_parallel_loss_backward(dlogits, mine, lse, targets, dloss, N, Vl, v0, V);
    for (int i = 0; i < N; i++) {
        const float *z = logits + (size_t)i * Vp;
        double mx = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        for (int v = 0; v < V; v++) s += exp((double)z[v] - mx);
        double want_lse = mx + log(s);
        put("lse", i, lse[i], want_lse);
        put("loss", i, losses[i], targets[i] < 0 ? 0.0 : want_lse - z[targets[i]]);
        for (int v = 0; v < Vl; v++) {
            int col = v0 + v;
            double g = targets[i] < 0 || col >= V ? 0.0 : (exp(z[col] - want_lse) - (col == targets[i])) * dloss[i];
            put("dlogits", i * Vl + v, dlogits[(size_t)i * Vl + v], g);
        }
    }
    free(logits), free(dloss), free(targets), free(mine), free(lse), free(losses), free(sums), free(dlogits);
}

static int arg(const char *s, int lo, int hi) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "lab28_worker: '%s' is not an integer in [%d, %d]\n", s, lo, hi);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv) {
    bool linear_mode = argc == 7 && strcmp(argv[3], "tp_linear") == 0;
    bool ce_mode = argc == 8 && strcmp(argv[3], "vocab_ce") == 0;
    if (!linear_mode && !ce_mode && argc >= 3 && strchr(argv[1], '.') && (argc == 3 || strchr(argv[3], '=')))
        return trainer_rank_worker("lab28_worker", argc, argv);
    if (!linear_mode && !ce_mode) {
        fprintf(stderr, "usage: lab28_worker DIR SEED tp_linear N C H | lab28_worker DIR SEED vocab_ce N V VP SCALE | "
                        "lab28_worker CONFIG RUN_DIR [key.path=value ...]\n");
        return 2;
    }
    comm_t *world = comm_init(&argc, &argv);
    int P = comm_size(world), rank = comm_rank(world);
    mesh_t *m = mesh_create(world, 1, P, 1);
    char path[4200];
    snprintf(path, sizeof path, "%s/out.rank%d", argv[1], rank);
    out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "lab28_worker: cannot write %s\n", path);
        return 2;
    }
    mp_rng rng;
    mp_rng_seed(&rng, strtoull(argv[2], NULL, 10)); /* the same seed on every rank: the same whole tensors */
    if (linear_mode) {
        int N = arg(argv[4], 1, 256), C = arg(argv[5], 1, 256), H = arg(argv[6], 1, 1024);
        if (H % P) fprintf(stderr, "lab28_worker: H %d is not a multiple of %d ranks\n", H, P), exit(2);
        tp_linear(m, &rng, N, C, H);
    } else {
        int N = arg(argv[4], 1, 256), V = arg(argv[5], 1, 4096), Vp = arg(argv[6], 1, 4096);
        float scale = strtof(argv[7], NULL);
        if (Vp % P || V > Vp) fprintf(stderr, "lab28_worker: VP %d must be >= V and a multiple of %d ranks\n", Vp, P), exit(2);
        vocab_ce(m, &rng, N, V, Vp, scale);
    }
    fclose(out);
    mesh_free(m);
    comm_finalize(world);
    return 0;
}
