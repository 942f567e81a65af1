/* straggler.c: uneven sample lengths on real ranks: per-rank tokens and compute time, strided vs balanced sharding (lab 15). */
#include "base/clock.h"
#include "base/error.h"
#include "base/events.h"
#include "base/mem.h"
#include "base/parse.h"
#include "comm/comm.h"
#include "data/balance.h"
#include "data/sampler.h"
#include "data/tokens.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* A sample is one entry of the corpus: its lines up to the blank line that ends it (a poem of the poetry
 * corpus: 15 to about 1,000 tokens). The token file keeps the blank lines, so the samples are the runs of
 * tokens between two consecutive newline tokens. */
typedef struct {
    uint64_t n;         /* samples */
    uint64_t *start;    /* (n) first token of each sample */
    uint32_t *length;   /* (n) its tokens, the newlines included */
    int32_t *tokens;    /* (token_count) the whole file */
    uint64_t token_count;
    uint32_t vocab;
} samples;

static void samples_load(const char *path, int32_t newline, samples *s) {
    tokfile *f = tokfile_open(path, NULL); /* a bad file: the message and exit 2 */
    memset(s, 0, sizeof *s);
    s->token_count = f->token_count;
    s->vocab = f->vocab_size;
    s->tokens = mem_alloc(f->token_count * sizeof *s->tokens, MEM_OTHER, "tokens");
    tokfile_read(f, 0, f->token_count, s->tokens);
    tokfile_close(f);
    s->start = mem_alloc((s->token_count + 1) * sizeof *s->start, MEM_OTHER, "sample starts");
    s->length = mem_alloc((s->token_count + 1) * sizeof *s->length, MEM_OTHER, "sample lengths");
    uint64_t begin = 0;
    for (uint64_t i = 0; i < s->token_count; i++) {
        bool ends = s->tokens[i] == newline && (i + 1 == s->token_count || s->tokens[i + 1] == newline);
        if (!ends) continue;
        if (i + 1 > begin) {
            s->start[s->n] = begin;
            s->length[s->n] = (uint32_t)(i + 1 - begin);
            s->n++;
        }
        while (i + 1 < s->token_count && s->tokens[i + 1] == newline) i++; /* the blank lines between entries */
        begin = i + 1;
    }
    if (s->n < 2)
        MP_FAIL_HINT("a token file of at least 2 entries (samples separated by a blank line)",
                     "use a corpus such as data/poetry/train.tokens (make lab15 builds it), or --newline TOKEN",
                     "'%s': %llu entries with newline token %d", path, (unsigned long long)s->n, newline);
}

static void samples_free(samples *s) {
    mem_free(s->tokens);
    mem_free(s->start);
    mem_free(s->length);
}

static double process_cpu_s(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static const char *const SHARDINGS[2] = {"strided", "balanced"};

/* --plan: no ranks, no model: every rank's tokens of each step and of the epoch under both shardings. */
static void plan(const samples *s, int world, uint64_t batch, uint64_t seed, uint64_t epoch) {
    uint64_t *order = mem_alloc(s->n * sizeof *order, MEM_OTHER, "order");
    int *owner = mem_alloc(s->n * sizeof *owner, MEM_OTHER, "owners");
    uint64_t *step_tokens = mem_alloc((size_t)world * sizeof *step_tokens, MEM_OTHER, "step tokens");
    uint64_t *epoch_tokens = mem_alloc((size_t)world * sizeof *epoch_tokens, MEM_OTHER, "epoch tokens");
    uint32_t *batch_len = mem_alloc((size_t)batch * sizeof *batch_len, MEM_OTHER, "batch lengths");
    uint64_t longest = 0, total = 0;
    for (uint64_t i = 0; i < s->n; i++) {
        total += s->length[i];
        if (s->length[i] > longest) longest = s->length[i];
    }
    uint64_t steps = (s->n + batch - 1) / batch;
    printf("%llu samples (%llu tokens, %.1f mean, longest %llu) on %d ranks, global batch %llu samples: %llu steps, "
           "epoch %llu, seed %llu\n\n", (unsigned long long)s->n, (unsigned long long)total, (double)total / (double)s->n,
           (unsigned long long)longest, world, (unsigned long long)batch, (unsigned long long)steps,
           (unsigned long long)epoch, (unsigned long long)seed);
    dist_sampler_order(s->n, true, seed, epoch, order);
    printf("%-9s %21s %21s %22s   tokens of each rank in the epoch\n", "sharding", "step max/mean (mean)",
           "step max/mean (worst)", "slowest-rank tokens");
    for (int b = 0; b < 2; b++) {
        balance_epoch(s->length, order, s->n, world, batch, b == 1, owner, NULL);
        double sum_ratio = 0, worst = 0;
        uint64_t sum_max = 0;
        for (int r = 0; r < world; r++) epoch_tokens[r] = 0;
        for (uint64_t first = 0; first < s->n; first += batch) {
            size_t g = (size_t)(s->n - first < batch ? s->n - first : batch);
            for (size_t p = 0; p < g; p++) batch_len[p] = s->length[order[first + p]];
            balance_rank_tokens(batch_len, owner + first, g, world, step_tokens);
            double ratio = balance_imbalance(step_tokens, world);
            sum_ratio += ratio;
            if (ratio > worst) worst = ratio;
            uint64_t most = 0;
            for (int r = 0; r < world; r++) {
                epoch_tokens[r] += step_tokens[r];
                if (step_tokens[r] > most) most = step_tokens[r];
            }
            sum_max += most;
        }
        printf("%-9s %21.3f %21.3f %22llu  ", SHARDINGS[b], sum_ratio / (double)steps, worst,
               (unsigned long long)sum_max);
        for (int r = 0; r < world; r++) printf(" %llu", (unsigned long long)epoch_tokens[r]);
        printf("\n");
    }
    printf("\nslowest-rank tokens: the sum over the steps of the largest rank's tokens, what a synchronous step waits "
           "for; the mean rank's is %.0f\n", (double)total / world);
    mem_free(order);
    mem_free(owner);
    mem_free(step_tokens);
    mem_free(epoch_tokens);
    mem_free(batch_len);
}

/* This rank's samples among positions first .. first+g of the order, packed back to back into inputs (when
 * not NULL). Returns their tokens; *count gets how many samples. */
static size_t pack(const samples *s, const uint64_t *order, const int *owner, uint64_t first, size_t g, int rank,
                   int *inputs, uint64_t *count) {
    size_t used = 0;
    *count = 0;
    for (size_t p = 0; p < g; p++) {
        if (owner[first + p] != rank) continue;
        const int32_t *src = s->tokens + s->start[order[first + p]];
        uint32_t len = s->length[order[first + p]];
        if (inputs)
            for (uint32_t k = 0; k < len; k++) inputs[used + k] = src[k];
        used += len;
        (*count)++;
    }
    return used;
}

/* The run: every rank trains the tiny GPT on its share of each global batch (its samples packed into rows
 * of T tokens), then the ranks average their gradients with an allreduce, as data parallel does. Each
 * step writes a "step" event: this rank's tokens, the compute's CPU and wall seconds and the wait at the
 * allreduce. First `steps` steps strided, then the same steps balanced, in the same run. */
static void run(const samples *s, comm_t *world_comm, const char *run_dir, uint64_t batch, uint64_t seed,
                uint64_t steps) {
    int world = comm_size(world_comm), rank = comm_rank(world_comm);
    enum { T = 64 };
    model_config cfg = {.arch = MODEL_GPT2, .V = (int)s->vocab, .maxT = T, .L = 4, .C = 128, .NH = 4};
    model_config_complete(&cfg);
    model *m = model_create(&cfg);
    model_init(m, seed);
    ev_writer *ev = ev_open(run_dir, rank);
    ev_begin(ev, "run");
    ev_str(ev, "name", "straggler");
    ev_int(ev, "world", world);
    ev_int(ev, "params", (long long)model_num_params(m));
    ev_int(ev, "global_batch", (long long)batch);
    ev_end(ev);
    uint64_t *order = mem_alloc(s->n * sizeof *order, MEM_OTHER, "order");
    int *owner = mem_alloc(s->n * sizeof *owner, MEM_OTHER, "owners");
    size_t cap = (size_t)s->token_count + 2 * T;
    int *inputs = mem_alloc(cap * sizeof *inputs, MEM_OTHER, "inputs");
    int *targets = mem_alloc(cap * sizeof *targets, MEM_OTHER, "targets");
    uint64_t per_epoch = (s->n + batch - 1) / batch, count;
    /* Pass 0 only finds the most rows this rank packs; one untimed forward and backward of that size then
     * allocates the activations, so that no timed step pays for growing them. Pass 1 is the measured run. */
    int most_rows = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && most_rows > 0) {
            memset(inputs, 0, (size_t)most_rows * T * sizeof *inputs);
            memset(targets, 0, (size_t)most_rows * T * sizeof *targets);
            model_forward(m, inputs, targets, most_rows, T);
            model_backward(m, 1.0f);
        }
        for (int b = 0; b < 2; b++)
            for (uint64_t step = 0; step < steps; step++) {
                uint64_t epoch = step / per_epoch, first = (step % per_epoch) * batch;
                if (step % per_epoch == 0) {
                    dist_sampler_order(s->n, true, seed, epoch, order);
                    balance_epoch(s->length, order, s->n, world, batch, b == 1, owner, NULL);
                }
                size_t g = (size_t)(s->n - first < batch ? s->n - first : batch);
                size_t used = pack(s, order, owner, first, g, rank, pass ? inputs : NULL, &count);
                int rows = (int)((used + T - 1) / T);
                if (pass == 0) {
                    if (rows > most_rows) most_rows = rows;
                    continue;
                }
                for (size_t k = 0; k < (size_t)rows * T; k++) {
                    if (k >= used) inputs[k] = 0;
                    targets[k] = k + 1 < used ? inputs[k + 1] : -1;
                }
                double t0 = mp_elapsed(), cpu0 = process_cpu_s(), loss = 0;
                model_zero_grad(m);
                if (rows > 0) {
                    loss = model_forward(m, inputs, targets, rows, T);
                    model_backward(m, 1.0f);
                }
                double t1 = mp_elapsed(), cpu = process_cpu_s() - cpu0;
                comm_allreduce(world_comm, model_grads(m), model_grads(m), model_num_params(m), COMM_FP32, COMM_AVG,
                               COMM_ALGO_NATIVE);
                double t2 = mp_elapsed();
                long long id = (long long)((uint64_t)b * steps + step + 1);
                ev_begin(ev, "span");
                ev_str(ev, "name", "forward_backward");
                ev_int(ev, "step", id);
                ev_num(ev, "t0", t0);
                ev_num(ev, "t1", t1);
                ev_end(ev);
                ev_begin(ev, "step");
                ev_int(ev, "step", id);
                ev_num(ev, "loss", loss);
                ev_str(ev, "sharding", SHARDINGS[b]);
                ev_int(ev, "samples", (long long)count);
                ev_int(ev, "tokens", (long long)used);
                ev_num(ev, "cpu_s", cpu);
                ev_num(ev, "compute_s", t1 - t0);
                ev_num(ev, "wait_s", t2 - t1);
                ev_end(ev);
            }
    }
    ev_close(ev);
    mem_free(order);
    mem_free(owner);
    mem_free(inputs);
    mem_free(targets);
    model_free(m);
}

int main(int argc, char **argv) {
    const char *data = "data/poetry/train.tokens", *run_dir = "runs/lab15/straggler";
    uint64_t batch = 32, seed = 0, epoch = 0, steps = 12;
    int64_t world = 4, newline = 0;
    bool plan_only = false;
    comm_t *comm = comm_init(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--data") && *v) data = argv[++i];
        else if (!strcmp(a, "--run-dir") && *v) run_dir = argv[++i];
        else if (!strcmp(a, "--plan")) plan_only = true;
        else if (!strcmp(a, "--world") && parse_i64(v, &world) && world >= 1 && world <= 1024) i++;
        else if (!strcmp(a, "--batch") && parse_u64(v, &batch) && batch >= 1 && batch <= 1u << 20) i++;
        else if (!strcmp(a, "--seed") && parse_u64(v, &seed)) i++;
        else if (!strcmp(a, "--epoch") && parse_u64(v, &epoch) && epoch <= 1000000) i++;
        else if (!strcmp(a, "--steps") && parse_u64(v, &steps) && steps >= 1 && steps <= 100000) i++;
        else if (!strcmp(a, "--newline") && parse_i64(v, &newline) && newline >= 0) i++;
        else {
            fprintf(stderr,
                    "usage: straggler [--data FILE] [--batch SAMPLES] [--seed S] [--newline TOKEN]\n"
                    "                 --plan [--world 1..1024] [--epoch E]   every rank's tokens, nothing run\n"
                    "                 [--steps 1..100000] [--run-dir DIR]    under mixpar run -n W: train, write events\n"
                    "  a sample is an entry of the token file (tokens up to a blank line); shardings: strided (the\n"
                    "  sampler's equal counts) and balanced (core/data/balance.h)\n"
                    "  bad or unknown argument: '%s'\n", a);
            comm_finalize(comm);
            return 2;
        }
    }
    samples s;
    samples_load(data, (int32_t)newline, &s);
    if (plan_only) plan(&s, (int)world, batch, seed, epoch);
    else run(&s, comm, run_dir, batch, seed, steps);
    samples_free(&s);
    comm_finalize(comm);
    return 0;
}
