/* loader_bench.c: batches/s of the prefetching loader with 0, 1 and 2 worker threads, when preparing a batch
 * costs a real tokenisation of text and the training step costs CPU time of its own. */
#include "base/clock.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/parse.h"
#include "data/prefetch.h"
#include "data/synth.h"
#include "data/textbuf.h"
#include "data/tokenizer.h"
#include "data/tokens.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The work a batch stands for. Preparing it (on a worker) encodes prep_bytes of English-like text with a
 * character tokenizer, as a loader that tokenises raw text on the fly would; the step (on the caller)
 * encodes step_bytes, standing in for forward and backward. Both are real CPU work, not sleeps, so they
 * compete for the cores as a real loader and a real step do. */
typedef struct {
    const tokenizer *tok;
    const char *text;
    size_t text_len, prep_bytes;
    atomic_ullong checksum; /* folds every id encoded, so the work cannot be optimised away */
} work_ctx;

/* Where the checksums go, so the compiler keeps the work. */
static volatile uint64_t work_sink;

static uint64_t encode_slice(const tokenizer *tok, const char *text, size_t text_len, size_t bytes, uint64_t seq) {
    if (bytes == 0) return 0;
    /* A slice starting at a line boundary, so it is whole UTF-8 characters (the text is ASCII anyway). */
    size_t start = (size_t)((seq * 7919u) % (text_len - bytes));
    uint32_t *ids = malloc(bytes * sizeof *ids);
    int64_t n = tokenizer_encode(tok, text + start, bytes, true, ids, NULL, NULL);
    uint64_t sum = 0;
    for (int64_t i = 0; i < n; i++) sum = sum * 31 + ids[i];
    free(ids);
    return sum;
}

static void prepare_batch(void *ctx, prefetch_batch *b, int B, int T) {
    work_ctx *w = ctx;
    (void)B;
    (void)T;
    atomic_fetch_add(&w->checksum, encode_slice(w->tok, w->text, w->text_len, w->prep_bytes, b->seq));
}

static void usage(void) {
    fprintf(stderr,
            "usage: loader_bench [--workers 0,1,2] [--batches N] [--prep-bytes BYTES] [--step-bytes BYTES]\n"
            "                    [--B N] [--T N] [--depth N]\n"
            "  batches/s of the prefetching loader (core/data/prefetch.h) for each worker count; preparing a\n"
            "  batch tokenises --prep-bytes of text, the step tokenises --step-bytes (default 256K each)\n");
    exit(2);
}

static uint64_t arg_u64(const char *flag, const char *v) {
    double x;
    if (!v || !parse_bytes(v, &x) || x < 0) MP_FAIL("a count such as 64 or 256K", "%s %s", flag, v ? v : "(missing)");
    return (uint64_t)x;
}

int main(int argc, char **argv) {
    const char *workers_list = "0,1,2";
    uint64_t batches = 60, prep_bytes = 256 * 1024, step_bytes = 256 * 1024, B = 8, T = 64, depth = 4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--workers") && v) workers_list = argv[++i];
        else if (!strcmp(a, "--batches")) batches = arg_u64(a, v), i++;
        else if (!strcmp(a, "--prep-bytes")) prep_bytes = arg_u64(a, v), i++;
        else if (!strcmp(a, "--step-bytes")) step_bytes = arg_u64(a, v), i++;
        else if (!strcmp(a, "--B")) B = arg_u64(a, v), i++;
        else if (!strcmp(a, "--T")) T = arg_u64(a, v), i++;
        else if (!strcmp(a, "--depth")) depth = arg_u64(a, v), i++;
        else usage();
    }
    if (batches < 1 || B < 1 || T < 1 || B > 4096 || T > 65536) MP_FAIL("--batches, --B, --T >= 1", "batches=%llu B=%llu T=%llu",
                                                                      (unsigned long long)batches, (unsigned long long)B,
                                                                      (unsigned long long)T);

    /* The text: the synthetic grammar, at least 4 MiB and more than one slice. */
    textbuf text = {0};
    size_t need = 4u << 20;
    if (prep_bytes * 2 > need) need = prep_bytes * 2;
    if (step_bytes * 2 > need) need = step_bytes * 2;
    for (uint64_t seed = 1; text.len < need; seed++) synth_grammar(seed, 20000, &text);
    tokenizer chars;
    if (!tokenizer_build_char(&chars, text.data, text.len, NULL)) return 2;

    /* The token file the loader reads: the text, byte-tokenised. */
    char path[128];
    snprintf(path, sizeof path, "/tmp/mixpar-loader-bench-%d.tok", (int)getpid());
    uint32_t *ids = malloc(text.len * sizeof *ids);
    for (size_t i = 0; i < text.len; i++) ids[i] = (unsigned char)text.data[i];
    tokfile_write(path, ids, text.len, 256, NULL);
    free(ids);
    tokfile *file = tokfile_open(path, NULL);
    unlink(path); /* the mapping stays valid */

    printf("loader_bench: B=%llu T=%llu, %llu batches per run, queue depth %llu, %ld cores online\n",
           (unsigned long long)B, (unsigned long long)T, (unsigned long long)batches, (unsigned long long)depth,
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("  prepare a batch: tokenise %llu bytes of text (worker); step: tokenise %llu bytes (caller)\n",
           (unsigned long long)prep_bytes, (unsigned long long)step_bytes);
    printf("%-8s %10s %10s %12s %14s\n", "workers", "batches/s", "ms/batch", "speedup", "step waits (s)");

    double base = 0;
    char list[64];
    snprintf(list, sizeof list, "%s", workers_list);
    for (char *tokp = strtok(list, ","); tokp; tokp = strtok(NULL, ",")) {
        int workers = atoi(tokp);
        work_ctx ctx = {.tok = &chars, .text = text.data, .text_len = text.len, .prep_bytes = prep_bytes};
        prefetch_config cfg = {.B = (int)B, .T = (int)T, .world = 1, .shuffle = true, .seed = 1, .workers = workers,
                               .depth = (int)depth, .prepare = prepare_batch, .prepare_ctx = &ctx};
        data_err err;
        prefetch_loader *pl = prefetch_open(file, 0, file->token_count, &cfg, &err);
        if (!pl) {
            char buf[1024];
            fprintf(stderr, "loader_bench: %s\n", data_err_line(&err, buf, sizeof buf));
            return 2;
        }
        uint64_t step_sum = 0;
        double t0 = mp_now();
        for (uint64_t k = 0; k < batches; k++) {
            const prefetch_batch *b = prefetch_next(pl);
            step_sum += encode_slice(&chars, text.data, text.len, step_bytes, b->seq + 1000003) + (uint64_t)b->inputs[0];
        }
        double secs = mp_now() - t0;
        double wait = prefetch_wait_seconds(pl);
        prefetch_free(pl);
        double rate = (double)batches / secs;
        if (base == 0) base = rate;
        printf("%-8d %10.1f %10.2f %11.2fx %14.3f\n", workers, rate, 1e3 * secs / (double)batches, rate / base, wait);
        work_sink ^= step_sum ^ atomic_load(&ctx.checksum);
    }
    tokfile_close(file);
    tokenizer_free(&chars);
    textbuf_free(&text);
    return 0;
}
