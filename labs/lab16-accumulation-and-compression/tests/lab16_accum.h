/* lab16_accum.h: what lab 16's accumulation tests share: a tiny fp32 GPT under DDP on one rank whose bucket
 * reduction the test watches (how often it runs, and what the gradient buffer holds when it does), and the
 * reference the test computes itself: micro-batch by micro-batch with model_forward/model_backward. */
#ifndef LAB16_ACCUM_H
#define LAB16_ACCUM_H

#include "lab16_util.h"

#include "base/mem.h"
#include "dist/ddp.h"
#include "model/model.h"
#include "train/step.h"

enum { LAB16_T = 16, LAB16_ROWS_MAX = 16, LAB16_ACCUM_MAX = 8, LAB16_REDUCES_MAX = 64 };

/* A DDP bucket reduction that also records: a copy of the gradients it was handed, per call. On one rank the
 * average over the ranks is the identity, so the gradients are left as they are. */
typedef struct {
    int calls;
    size_t n;                                /* the model's gradient count */
    float *seen[LAB16_REDUCES_MAX];          /* (n) the whole buffer as it was at call i (NULL past the cap) */
    size_t lo[LAB16_REDUCES_MAX], hi[LAB16_REDUCES_MAX]; /* the bucket of call i: only it is final then */
} lab16_watch;

static inline void lab16_watching_reduce(void *ctx, comm_t *c, float *grads, size_t lo, size_t hi, comm_algo algo) {
    lab16_watch *w = ctx;
    comm_allreduce(c, grads + lo, grads + lo, hi - lo, COMM_FP32, COMM_AVG, algo);
    if (w->calls < LAB16_REDUCES_MAX) {
        w->seen[w->calls] = malloc(w->n * sizeof(float));
        MPT_REQUIRE(w->seen[w->calls], "out of memory");
        memcpy(w->seen[w->calls], grads, w->n * sizeof(float));
        w->lo[w->calls] = lo;
        w->hi[w->calls] = hi;
    }
    w->calls++;
}

static inline void lab16_watch_reset(lab16_watch *w) {
    for (int i = 0; i < w->calls && i < LAB16_REDUCES_MAX; i++) free(w->seen[i]);
    w->calls = 0;
}

/* The same tiny GPT every time (seed 16), fp32. */
static inline model *lab16_model(void) {
    model_config cfg = {.arch = MODEL_GPT2, .V = 64, .maxT = LAB16_T, .L = 2, .C = 32, .NH = 2};
    model_config_complete(&cfg);
    model *m = model_create(&cfg);
    model_init(m, 16);
    return m;
}

/* rows (LAB16_ROWS_MAX, T) of tokens from the seed, and their next-token targets. */
static inline void lab16_batch(uint64_t seed, int rows, int *inputs, int *targets) {
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < LAB16_T; t++) {
            inputs[r * LAB16_T + t] = (int)(mp_hash32(seed + (uint64_t)r, (uint64_t)t) % 64u);
            targets[r * LAB16_T + t] = (int)(mp_hash32(seed + (uint64_t)r, (uint64_t)t + 1) % 64u);
        }
}

/* One train_step_run of `accum` micro-batches of B rows (the rows of inputs in order) through DDP on one rank with
 * one bucket per backward (bucket_elems elements, 0: one for the whole model), plain SGD with lr 0 so the weights
 * stay and the gradients are what the step left. The watch records every reduction. Returns the step's result. */
typedef struct {
    model *m;
    ddp *d;
    train_step ts;
    lab16_watch watch;
    comm_t *c;
} lab16_ddp_run;

static inline void lab16_ddp_open(lab16_ddp_run *run, size_t bucket_elems) {
    memset(run, 0, sizeof *run);
    run->c = lab16_world();
    run->m = lab16_model();
    run->watch.n = model_num_params(run->m);
    ddp_options o = {.bucket_elems = bucket_elems, .algo = COMM_ALGO_NATIVE, .overlap = false,
                     .reduce_bucket = lab16_watching_reduce, .reduce_ctx = &run->watch};
    run->d = ddp_create(run->m, run->c, &o, 0x16);
    optim_config opt = optim_config_default(OPTIM_SGD);
    train_step_init(&run->ts, run->m, &opt, 0);
    run->ts.ddp = run->d;
}

static inline train_step_result lab16_ddp_step(lab16_ddp_run *run, const int *inputs, const int *targets, int B,
                                               int accum) {
    lab16_watch_reset(&run->watch);
    return train_step_run(&run->ts, inputs, targets, B, LAB16_T, accum, 0.0);
}

static inline void lab16_ddp_close(lab16_ddp_run *run) {
    lab16_watch_reset(&run->watch);
    train_step_free(&run->ts);
    ddp_free(run->d);
    model_free(run->m);
    comm_finalize(run->c);
}

/* The reference, from the lab's own arithmetic: after micro-batch k (k = 1..accum) of B rows, the gradient
 * buffer of a fresh model that ran forward and backward on micro-batches 1..k, each with its loss times 1/accum.
 * partial: (accum, n). Returns the mean of the micro-batches' losses. */
static inline double lab16_reference(const int *inputs, const int *targets, int B, int accum, float *partial) {
    model *m = lab16_model();
    size_t n = model_num_params(m);
    model_zero_grad(m);
    double loss = 0;
    for (int k = 0; k < accum; k++) {
        loss += model_forward(m, inputs + (size_t)k * B * LAB16_T, targets + (size_t)k * B * LAB16_T, B, LAB16_T);
        model_backward(m, 1.0f / (float)accum);
        memcpy(partial + (size_t)k * n, model_grads(m), n * sizeof(float));
    }
    model_free(m);
    return loss / accum;
}

/* The largest |x[i]| and the largest |x[i] - y[i]|. */
static inline void lab16_compare(const float *x, const float *y, size_t n, double *largest, double *diff) {
    *largest = *diff = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(y[i]) > *largest) *largest = fabs(y[i]);
        if (fabs((double)x[i] - y[i]) > *diff || x[i] != x[i]) *diff = x[i] != x[i] ? INFINITY : fabs((double)x[i] - y[i]);
    }
}

/* got against the reference's full sum; on a mismatch, what got looks like: a multiple of it (a wrong 1/accum),
 * or one of the partial sums (micro-batches left out), or none. Writes the likely mistake into why. */
static inline void lab16_explain(const float *got, const float *partial, size_t n, int accum, char *why, size_t len) {
    const float *full = partial + (size_t)(accum - 1) * n;
    double dot = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        dot += (double)got[i] * full[i];
        norm += (double)full[i] * full[i];
    }
    double ratio = norm > 0 ? dot / norm : 0, largest, diff;
    for (int k = 0; k < accum - 1; k++) {
        lab16_compare(got, partial + (size_t)k * n, n, &largest, &diff);
        if (diff <= 1e-6 * largest) {
            snprintf(why, len, "the gradients are those of the first %d of the %d micro-batches: the buffer was "
                     "zeroed between micro-batches, or the step stopped early (backward adds into the buffer; "
                     "zero it only before the first)", k + 1, accum);
            return;
        }
    }
    static const struct { double off; const char *what; } scales[] = {
        {0, "the gradients are %.4g times the mean: each micro-batch's loss must be multiplied by S/accum "
            "(here 1/%d), not by S"},
        {-1, "the gradients are %.4g times the mean: the loss was divided by accum - 1, not by accum = %d"},
        {+1, "the gradients are %.4g times the mean: the loss was divided by accum + 1, not by accum = %d"},
    };
    for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
        double want = scales[s].off == 0 ? accum : (double)accum / (accum + scales[s].off);
        if (fabs(ratio - want) < 0.02 * want) {
            snprintf(why, len, scales[s].what, ratio, accum);
            return;
        }
    }
    snprintf(why, len, "the gradients are neither the mean over the %d micro-batches nor a multiple of it (best "
             "fit %.4g times): does micro-batch k read inputs + k*B*T?", accum, ratio);
}

/* ---------------------------------------------------------------- on real ranks */

enum { LAB16_MPI_STEPS = 4 };
typedef struct {
    double loss[3][LAB16_MPI_STEPS];
    unsigned long long bytes[3][LAB16_MPI_STEPS], params[3][LAB16_MPI_STEPS];
} lab16_mpi_run;

/* The worker's accum mode on `ranks` (2 or 3) ranks: LAB16_MPI_STEPS steps of `accum` micro-batches of b rows. */
static inline void lab16_mpi_accum(int ranks, int accum, int b, lab16_mpi_run *out) {
    char dir[64], a_steps[8], a_accum[8], a_b[8];
    snprintf(a_steps, sizeof a_steps, "%d", LAB16_MPI_STEPS);
    snprintf(a_accum, sizeof a_accum, "%d", accum);
    snprintf(a_b, sizeof a_b, "%d", b);
    char *args[] = {"accum", "DIR", a_steps, a_accum, a_b, NULL};
    char what[80];
    snprintf(what, sizeof what, "DDP training, %d micro-batch(es) of %d rows", accum, b);
    MPT_REQUIRE(ranks >= 2 && ranks <= 3, "test data: 2 or 3 ranks");
    lab16_launch(ranks, args, dir, sizeof dir, what);
    for (int k = 0; k < ranks; k++) {
        char path[128];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, k);
        FILE *f = fopen(path, "r");
        int world = 0, got = 0;
        long a = 0, bb = 0;
        if (f && fscanf(f, " world=%d accum=%ld b=%ld", &world, &a, &bb) == 3)
            for (int s = 0; s < LAB16_MPI_STEPS; s++) {
                int step;
                if (fscanf(f, " step=%d loss=%lf bytes=%llu params=%llx", &step, &out->loss[k][s], &out->bytes[k][s],
                           &out->params[k][s]) != 4)
                    break;
                got++;
            }
        if (f) fclose(f);
        unlink(path);
        MPT_REQUIRE(got == LAB16_MPI_STEPS, "%s: rank %d reported %d of %d steps", what, k, got, LAB16_MPI_STEPS);
    }
    rmdir(dir);
}

#endif
