/* lab17_worker.c: the program lab 17's tests and experiment start on N ranks (build/labs/lab17_worker): a tiny
 * GPT-2 trained with fp16 AMP under DDP, with an inf put into chosen ranks' gradients at chosen steps.
 *
 *   lab17_worker run DIR STEPS INJECT [local] [hook=allreduce|fp16|bf16] [accum=K]
 *     (under mpirun) every rank builds the same model, wraps it in DDP (one bucket, the MPI library's
 *     allreduce, or the 16-bit hook), and trains STEPS steps of the AMP step (train_step_run: AdamW, clipping
 *     at 1.0, a PyTorch scaler from 2^10 that grows after 2 clean steps, so the scale moves) on its 2 rows of
 *     a global batch of 2 x world rows (K micro-batches each with accum=K). INJECT is "none" or a list
 *     RANK:STEP,RANK:STEP,... (steps from 1, one per rank, as MIXPAR_INJECT_INF): that rank finds an inf in
 *     its gradients at that step, after DDP averaged them, so the overflow is its own and nobody else's.
 *     The ranks agree on found_inf through train_step.found_inf_comm (your LAB 17 region), or, with "local",
 *     do not: found_inf_comm stays NULL, each rank trusts its own finding (the bug this lab is about).
 *     Each rank writes DIR/rank<R>.txt:
 *       world=W params=N
 *       step=S skipped=0|1 found_inf_local=0|1 scale=X next_scale=Y loss=L params=HASH
 *     HASH: FNV-1a of the weights' bytes after the step (equal hashes: bit-identical replicas).
 *
 *   lab17_worker reduce DIR fp16|bf16 N SEED
 *     (under mpirun) every rank makes its N 16-bit values (lab17_values.h), averages them over the ranks with the
 *     16-bit hook's reduction (hooks_lowp_allreduce: your amp_reduce_mean16 on the chunk this rank owns) and writes
 *     DIR/rank<R>.txt: "world=W n=N", then the N results as 4-digit hex bit patterns, one per line. */
#include "base/rng.h"
#include "comm/comm.h"
#include "dist/ddp.h"
#include "dist/hooks.h"
#include "model/model.h"
#include "model/model_lowp.h"
#include "train/step.h"
#include "lab17_values.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS_PER_RANK = 2, T = 16, MAX_RANKS = 16, SEED = 17 };

static _Noreturn void usage(const char *why) {
    fprintf(stderr, "lab17_worker: %s\nusage: lab17_worker run DIR STEPS none|RANK:STEP,... [local] "
                    "[hook=allreduce|fp16|bf16] [accum=K]\n       lab17_worker reduce DIR fp16|bf16 N SEED\n", why);
    exit(2);
}

static long arg_long(const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) usage("a number argument is out of range");
    return v;
}

/* The step (from 1) at which `rank` finds an inf, or 0, from "none" or "R:S,R:S". */
static long inject_step_of(const char *spec, int rank) {
    if (strcmp(spec, "none") == 0) return 0;
    long found = 0;
    for (const char *p = spec; *p;) {
        int r, s, used;
        if (sscanf(p, "%d:%d%n", &r, &s, &used) != 2 || r < 0 || s < 1) usage("INJECT is none or RANK:STEP,...");
        if (r == rank) found = s;
        p += used;
        if (*p == ',') p++;
        else if (*p) usage("INJECT is none or RANK:STEP,...");
    }
    return found;
}

/* FNV-1a of a float buffer's bytes. */
static uint64_t hash_floats(const float *x, size_t n) {
    const unsigned char *p = (const unsigned char *)x;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Micro-batch k of step `step` for `rank`: its ROWS_PER_RANK rows of the global batch, next-token targets. */
static void batch(int step, int k, int rank, int V, int *inputs, int *targets) {
    for (int r = 0; r < ROWS_PER_RANK; r++)
        for (int t = 0; t < T; t++) {
            uint64_t key = ((uint64_t)step * 97u + (uint64_t)k) * 1000003u + (uint64_t)(rank * ROWS_PER_RANK + r);
            inputs[r * T + t] = (int)(mp_hash32(key, (uint64_t)t) % (uint32_t)V);
            targets[r * T + t] = (int)(mp_hash32(key, (uint64_t)t + 1) % (uint32_t)V);
        }
}

static int run(comm_t *c, int argc, char **argv) {
    if (argc < 5) usage("run takes DIR STEPS INJECT");
    const char *dir = argv[2];
    const int steps = (int)arg_long(argv[3], 1, 1000);
    const int rank = comm_rank(c), world = comm_size(c);
    const long inject = inject_step_of(argv[4], rank);
    bool local = false;
    int accum = 1;
    ddp_hook_kind hook = DDP_HOOK_ALLREDUCE;
    for (int i = 5; i < argc; i++) {
        if (strcmp(argv[i], "local") == 0) local = true;
        else if (strncmp(argv[i], "accum=", 6) == 0) accum = (int)arg_long(argv[i] + 6, 1, 8);
        else if (strncmp(argv[i], "hook=", 5) == 0) {
            int h = ddp_hook_from_name(argv[i] + 5);
            if (h != DDP_HOOK_ALLREDUCE && h != DDP_HOOK_FP16 && h != DDP_HOOK_BF16) usage("hook is allreduce, fp16 or bf16");
            hook = (ddp_hook_kind)h;
        } else usage("unknown option");
    }
    if (world > MAX_RANKS) usage("too many ranks");

    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.txt", dir, rank);
    FILE *out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "lab17_worker: cannot write %s: %s\n", path, strerror(errno));
        return 2;
    }
    omp_set_num_threads(1); /* the ranks share this machine's cores */
    model_config cfg = {.arch = MODEL_GPT2, .V = 64, .maxT = T, .L = 2, .C = 32, .NH = 2};
    model_config_complete(&cfg);
    model *m = model_create(&cfg);
    model_init(m, SEED);
    model_set_precision(m, &(model_precision){.compute = MODEL_COMPUTE_FP16});
    const size_t P = model_num_params(m);
    fprintf(out, "world=%d params=%zu\n", world, P);
    fflush(out);

    ddp_options dopt = {.bucket_elems = 0, .algo = COMM_ALGO_NATIVE, .overlap = false, .hook = {.kind = hook}};
    ddp *d = ddp_create(m, c, &dopt, 0x17);
    train_step ts;
    optim_config opt = optim_config_default(OPTIM_ADAMW);
    train_step_init(&ts, m, &opt, 1.0);
    amp_scaler_config sc = amp_scaler_defaults(AMP_SCALER_PYTORCH);
    sc.init_scale = 1024;
    sc.growth_interval = 2;
    train_step_set_amp(&ts, AMP_RECIPE_FP16, &sc, false, SEED);
    ts.ddp = d;
    ts.found_inf_comm = local ? NULL : c; /* what the trainer does for world > 1; NULL: no agreement */
    ts.inject_inf_at = inject - 1;        /* 0-based step; -1: never */

    const int per = ROWS_PER_RANK * T;
    int *inputs = malloc((size_t)accum * per * sizeof(int)), *targets = malloc((size_t)accum * per * sizeof(int));
    if (!inputs || !targets) usage("out of memory");
    for (int s = 0; s < steps; s++) {
        for (int k = 0; k < accum; k++) batch(s, k, rank, cfg.V, inputs + k * per, targets + k * per);
        train_step_result r = train_step_run(&ts, inputs, targets, ROWS_PER_RANK, T, accum, 1e-3);
        fprintf(out, "step=%d skipped=%d found_inf_local=%d scale=%.9g next_scale=%.9g loss=%.9g params=%016llx\n",
                s + 1, r.skipped, r.found_inf_local, (double)r.update.scale, (double)r.update.next_scale,
                (double)r.loss, (unsigned long long)hash_floats(model_params(m), P));
        fflush(out);
    }
    free(inputs);
    free(targets);
    train_step_free(&ts);
    ddp_free(d);
    model_free(m);
    fclose(out);
    return 0;
}

static int reduce(comm_t *c, int argc, char **argv) {
    if (argc != 6) usage("reduce takes DIR fp16|bf16 N SEED");
    comm_dtype dt = strcmp(argv[3], "fp16") == 0 ? COMM_FP16 : strcmp(argv[3], "bf16") == 0 ? COMM_BF16 : COMM_FP32;
    if (dt == COMM_FP32) usage("the wire is fp16 or bf16");
    const size_t n = (size_t)arg_long(argv[4], 1, 1 << 20);
    const uint64_t seed = (uint64_t)arg_long(argv[5], 0, 1L << 40);
    const int rank = comm_rank(c);
    uint16_t *mine = malloc(n * sizeof *mine);
    float *x = malloc(n * sizeof *x);
    if (!mine || !x) usage("out of memory");
    lab17_worker_values(mine, n, dt, seed, rank);
    amp_reduce_widen16(x, mine, n, dt);
    hooks_lowp_allreduce(c, x, n, dt);
    amp_reduce_narrow16(mine, x, n, dt); /* exact: the hook's results are 16-bit values */
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.txt", argv[2], rank);
    FILE *out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "lab17_worker: cannot write %s: %s\n", path, strerror(errno));
        return 2;
    }
    fprintf(out, "world=%d n=%zu\n", comm_size(c), n);
    for (size_t i = 0; i < n; i++) fprintf(out, "%04x\n", mine[i]);
    fclose(out);
    free(mine);
    free(x);
    return 0;
}

int main(int argc, char **argv) {
    comm_t *c = comm_init(&argc, &argv);
    if (argc < 2) usage("no mode");
    int rc = strcmp(argv[1], "run") == 0      ? run(c, argc, argv)
           : strcmp(argv[1], "reduce") == 0 ? reduce(c, argc, argv)
                                            : (usage("unknown mode"), 2);
    comm_finalize(c);
    return rc;
}
