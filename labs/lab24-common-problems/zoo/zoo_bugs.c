/* zoo_bugs.c: the bug zoo's small programs (lab 24): four bugs that live in user code, not in a config. Each runs
 * on the real core (its tagged allocator, its event writer, its communicator over real MPI ranks) and has a
 * --fixed form with the one-line fix.
 *
 *     zoo_bugs leak RUN_DIR [--fixed]      a training loop that keeps every step's logits (memory grows each step)
 *     zoo_bugs oob [--fixed]               an off-by-one write past a buffer (build with -fsanitize=address)
 *     zoo_bugs desync RUN_DIR [--fixed]    under mpirun: ranks decide to skip a step on their own (found_inf not
 *                                          agreed), so one replica steps with an inf and the others do not
 *     zoo_bugs skip-collective [--fixed]   under mpirun: rank 1 skips one allreduce; rank 0 waits for it
 * Events go to RUN_DIR/events.rank<R>.jsonl in the trainer's format (core/base/EVENTS.md): `mixpar doctor` reads them. */
#include "base/events.h"
#include "base/mem.h"
#include "comm/comm.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STEPS = 60, LOGITS = 16 * 1024 }; /* 16 Ki floats of logits a step: 64 KiB */

/* FNV-1a over n floats, as the trainer's param_hash. */
static uint64_t hash_floats(const float *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n * sizeof *p; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* The leak: an evaluation hook that keeps each step's logits "for a report at the end" (PyTorch's classic
 * `history.append(loss)` keeps the tensor and its graph; here a buffer). Fixed: keep the one number it needs. */
static int run_leak(const char *dir, bool fixed) {
    ev_writer *ev = ev_open(dir, 0);
    float *kept[STEPS] = {0};
    double report = 0;
    for (int step = 1; step <= STEPS; step++) {
        float *logits = mem_alloc(LOGITS * sizeof *logits, MEM_ACT, "step logits");
        double sum = 0;
        for (int i = 0; i < LOGITS; i++) sum += logits[i] = sinf((float)(i + step));
        report += sum / LOGITS;
        if (fixed) mem_free(logits);     /* the fix: the number is kept, the buffer freed */
        else kept[step - 1] = logits;    /* the bug: the whole buffer is kept */
        ev_begin(ev, "step");
        ev_int(ev, "step", step);
        ev_end(ev);
        ev_mem(ev, step);
    }
    printf("leak: %d steps, report %.6f, act bytes now %zu\n", STEPS, report, mem_current(MEM_ACT));
    for (int i = 0; i < STEPS; i++) mem_free(kept[i]);
    ev_close(ev);
    return 0;
}

/* The out-of-bounds write: counts of n token ids, with the loop bound off by one. */
static int run_oob(bool fixed) {
    int n = 1000;
    int *counts = mem_alloc((size_t)n * sizeof *counts, MEM_OTHER, "token counts");
    int last = fixed ? n - 1 : n; /* the bug: `i <= n` */
    for (int i = 0; i <= last; i++) counts[i] = i;
    printf("oob: wrote counts[0..%d] of %d\n", last, n);
    mem_free(counts);
    return 0;
}

/* Data parallel SGD on a replicated vector: every rank computes a gradient, the ranks average it, every rank
 * updates its replica. At step 5 rank 1's gradient holds an inf (a bad batch). The average then holds it on every
 * rank; a rank that decided on its own flag (found before the reduction) applies it. Fixed: the flag is reduced
 * (max over ranks) before anyone decides. */
static int run_desync(const char *dir, bool fixed, comm_t *world) {
    enum { N = 4096 };
    int rank = comm_rank(world);
    ev_writer *ev = ev_open(dir, rank);
    ev_begin(ev, "run");
    ev_int(ev, "world", comm_size(world));
    ev_end(ev);
    float *w = mem_alloc(N * sizeof *w, MEM_PARAM, "weights"), *g = mem_alloc(N * sizeof *g, MEM_GRAD, "grads");
    for (int i = 0; i < N; i++) w[i] = 0.01f * (float)(i % 97);
    for (int step = 1; step <= 10; step++) {
        for (int i = 0; i < N; i++) g[i] = w[i] - 0.5f + 0.01f * (float)rank;
        if (step == 5 && rank == 1) g[7] = INFINITY;
        float found = 0; /* this rank's own finding */
        for (int i = 0; i < N; i++) found = isfinite(g[i]) ? found : 1;
        if (fixed) comm_allreduce(world, &found, &found, 1, COMM_FP32, COMM_MAX, COMM_ALGO_NATIVE);
        comm_allreduce(world, g, g, N, COMM_FP32, COMM_AVG, COMM_ALGO_NATIVE);
        bool skip = found != 0;
        if (!skip)
            for (int i = 0; i < N; i++) w[i] -= 0.1f * g[i];
        char hex[24];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash_floats(w, N));
        double loss = 0;
        for (int i = 0; i < N; i++) loss += 0.5 * (w[i] - 0.5) * (w[i] - 0.5) / N;
        ev_begin(ev, "step");
        ev_int(ev, "step", step);
        ev_num(ev, "loss", loss);
        ev_bool(ev, "skipped", skip);
        ev_str(ev, "param_hash", hex);
        ev_end(ev);
    }
    printf("desync: rank %d finished 10 steps, weights hash %016llx\n", rank, (unsigned long long)hash_floats(w, N));
    mem_free(w);
    mem_free(g);
    ev_close(ev);
    return 0;
}

/* Two allreduces a step; rank 1 skips the second one at step 3 ("nothing to log on this rank"). */
static int run_skip_collective(bool fixed, comm_t *world) {
    int rank = comm_rank(world);
    float grad[256], stats[2];
    for (int step = 1; step <= 5; step++) {
        for (int i = 0; i < 256; i++) grad[i] = (float)(rank + i);
        comm_allreduce(world, grad, grad, 256, COMM_FP32, COMM_AVG, COMM_ALGO_NATIVE);
        stats[0] = grad[0];
        stats[1] = (float)step;
        if (fixed || !(rank == 1 && step == 3)) comm_allreduce(world, stats, stats, 2, COMM_FP32, COMM_SUM, COMM_ALGO_NATIVE);
        if (rank == 0) printf("skip-collective: step %d done\n", step);
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *usage = "usage: zoo_bugs leak RUN_DIR|oob|desync RUN_DIR|skip-collective [--fixed]\n";
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    bool fixed = strcmp(argv[argc - 1], "--fixed") == 0;
    const char *what = argv[1], *dir = argc > 2 && strcmp(argv[2], "--fixed") != 0 ? argv[2] : NULL;
    if (!strcmp(what, "leak") && dir) return run_leak(dir, fixed);
    if (!strcmp(what, "oob")) return run_oob(fixed);
    if ((!strcmp(what, "desync") && dir) || !strcmp(what, "skip-collective")) {
        comm_t *world = comm_init(&argc, &argv);
        int rc = what[0] == 'd' ? run_desync(dir, fixed, world) : run_skip_collective(fixed, world);
        comm_finalize(world);
        return rc;
    }
    fputs(usage, stderr);
    return 2;
}
