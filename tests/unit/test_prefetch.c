/* test_prefetch.c: Criterion tests of the prefetching loader: the same batches in the same order with 0, 1 or
 * 2 workers (also when workers finish out of order), the batches the sampler says, and shutdown mid-epoch. */
#include "data/prefetch.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A token file of n tokens, token i = (i * 7 + 3) % 1000: every window is different. */
static tokfile *make_tokens(uint64_t n, char *path, size_t path_len) {
    snprintf(path, path_len, "/tmp/mixpar-test-prefetch-%d.tok", (int)getpid());
    uint32_t *t = malloc(n * sizeof *t);
    for (uint64_t i = 0; i < n; i++) t[i] = (uint32_t)((i * 7 + 3) % 1000);
    cr_assert(tokfile_write(path, t, n, 1000, NULL));
    free(t);
    return tokfile_open(path, NULL);
}

/* Busy work that depends on the batch number, so two workers finish batches out of order. */
static atomic_ulong prepared;
static void uneven_prepare(void *ctx, prefetch_batch *b, int B, int T) {
    (void)ctx;
    volatile uint64_t x = b->seq;
    long spins = (long)(b->seq % 3 == 0 ? 400000 : 1000);
    for (long i = 0; i < spins; i++) x = x * 6364136223846793005ULL + 1;
    b->inputs[0] ^= 0; /* the hook may touch its batch; the content must stay as read */
    (void)B;
    (void)T;
    atomic_fetch_add(&prepared, 1);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ULL;
    return h;
}

/* The hash of each of `count` batches from cfg.first_seq on. */
static void run_hashes(const tokfile *f, prefetch_config cfg, int count, uint64_t *hashes) {
    prefetch_loader *pl = prefetch_open(f, 0, f->token_count, &cfg, NULL);
    cr_assert_not_null(pl);
    for (int k = 0; k < count; k++) {
        cr_assert_eq(prefetch_next_seq(pl), cfg.first_seq + (uint64_t)k);
        const prefetch_batch *b = prefetch_next(pl);
        cr_assert_eq(b->seq, cfg.first_seq + (uint64_t)k, "batches come in sequence order");
        cr_assert_eq(b->epoch * prefetch_batches_per_epoch(pl) + b->batch, b->seq);
        size_t bt = (size_t)cfg.B * cfg.T;
        uint64_t h = fnv(1469598103934665603ULL, b->windows, (size_t)cfg.B * sizeof(uint64_t));
        h = fnv(h, b->inputs, bt * sizeof(int32_t));
        hashes[k] = fnv(h, b->targets, bt * sizeof(int32_t));
    }
    prefetch_free(pl);
}

Test(prefetch, same_batches_whatever_the_worker_count) {
    char path[128];
    tokfile *f = make_tokens(4001, path, sizeof path);
    /* 4000 windows of T=16 -> 250; on 3 ranks with padding, 84 per rank; B=5: 16 batches an epoch. */
    prefetch_config cfg = {.B = 5, .T = 16, .world = 3, .rank = 1, .shuffle = true, .seed = 9, .depth = 3,
                           .prepare = uneven_prepare};
    enum { COUNT = 40 }; /* two and a half epochs */
    uint64_t h[3][COUNT];
    for (int w = 0; w <= 2; w++) {
        cfg.workers = w;
        run_hashes(f, cfg, COUNT, h[w]);
    }
    for (int k = 0; k < COUNT; k++) {
        cr_assert_eq(h[1][k], h[0][k], "batch %d: 1 worker differs from 0 workers", k);
        cr_assert_eq(h[2][k], h[0][k], "batch %d: 2 workers differ from 0 workers", k);
    }
    cr_assert_neq(h[0][0], h[0][16], "epoch 1 starts with another batch than epoch 0 (set_epoch)");
    tokfile_close(f);
    unlink(path);
}

Test(prefetch, a_resumed_loader_continues_with_the_batch_that_came_next) {
    char path[128];
    tokfile *f = make_tokens(4001, path, sizeof path); /* 250 windows; 2 ranks: 125 each; B=6: 20 an epoch */
    prefetch_config cfg = {.B = 6, .T = 16, .world = 2, .rank = 0, .shuffle = true, .seed = 4, .depth = 3};
    enum { COUNT = 50 };
    for (int w = 0; w <= 2; w++) {
        uint64_t whole[COUNT], resumed[COUNT - 27];
        cfg.workers = w;
        cfg.first_seq = 0;
        run_hashes(f, cfg, COUNT, whole);
        cfg.first_seq = 27; /* epoch 1, batch 7 */
        run_hashes(f, cfg, COUNT - 27, resumed);
        for (int k = 27; k < COUNT; k++)
            cr_assert_eq(resumed[k - 27], whole[k], "workers=%d: batch %d after a resume at 27 differs", w, k);
    }
    tokfile_close(f);
    unlink(path);
}

Test(prefetch, batches_are_the_samplers_windows) {
    char path[128];
    tokfile *f = make_tokens(1001, path, sizeof path); /* T=8: 125 windows */
    prefetch_config cfg = {.B = 4, .T = 8, .world = 2, .rank = 1, .shuffle = true, .seed = 5, .workers = 2};
    prefetch_loader *pl = prefetch_open(f, 0, f->token_count, &cfg, NULL);
    cr_assert_eq(prefetch_n_windows(pl), 125);
    dist_sampler s;
    cr_assert(dist_sampler_init(&s, 125, 2, 1, true, 5, false, NULL));
    cr_assert_eq(prefetch_batches_per_epoch(pl), s.num_samples / 4); /* 63 / 4 = 15 */
    uint64_t mine[63];
    for (uint64_t epoch = 0; epoch < 2; epoch++) {
        dist_sampler_set_epoch(&s, epoch);
        dist_sampler_indices(&s, mine);
        for (uint64_t k = 0; k < 15; k++) {
            const prefetch_batch *b = prefetch_next(pl);
            cr_assert_eq(b->epoch, epoch);
            for (int r = 0; r < 4; r++) {
                uint64_t w = mine[k * 4 + (uint64_t)r];
                cr_assert_eq(b->windows[r], w);
                for (int t = 0; t < 8; t++) {
                    cr_assert_eq((uint32_t)b->inputs[r * 8 + t], tokfile_get(f, w * 8 + (uint64_t)t));
                    cr_assert_eq((uint32_t)b->targets[r * 8 + t], tokfile_get(f, w * 8 + (uint64_t)t + 1));
                }
            }
        }
    }
    prefetch_free(pl);
    tokfile_close(f);
    unlink(path);
}

Test(prefetch, shutdown_mid_epoch_and_before_any_batch) {
    char path[128];
    tokfile *f = make_tokens(20001, path, sizeof path);
    for (int w = 0; w <= 2; w++)
        for (int taken = 0; taken <= 3; taken += 3) {
            prefetch_config cfg = {.B = 8, .T = 32, .world = 1, .shuffle = true, .seed = 1, .workers = w, .depth = 2,
                                   .prepare = uneven_prepare};
            atomic_store(&prepared, 0);
            prefetch_loader *pl = prefetch_open(f, 0, f->token_count, &cfg, NULL);
            for (int k = 0; k < taken; k++) prefetch_next(pl);
            prefetch_free(pl); /* must return: workers blocked on a full queue or mid-batch are stopped */
            /* Workers run at most depth batches ahead of the last one taken. */
            cr_assert_leq(atomic_load(&prepared), (unsigned long)(taken + 2 + 1), "workers=%d taken=%d: prepared %lu",
                          w, taken, atomic_load(&prepared));
        }
    tokfile_close(f);
    unlink(path);
}

Test(prefetch, rejects_bad_configurations) {
    char path[128];
    tokfile *f = make_tokens(101, path, sizeof path);
    data_err err;
    prefetch_config ok = {.B = 2, .T = 10, .world = 1};
    prefetch_config c = ok;
    c.workers = 3;
    cr_assert_null(prefetch_open(f, 0, 101, &c, &err));
    c = ok;
    c.depth = 65;
    cr_assert_null(prefetch_open(f, 0, 101, &c, &err));
    c = ok;
    c.B = 11; /* 10 windows */
    cr_assert_null(prefetch_open(f, 0, 101, &c, &err));
    c = ok;
    c.world = 8; /* 2 windows per rank with padding, B = 2: fine; world 8 rank 8 is not */
    c.rank = 8;
    cr_assert_null(prefetch_open(f, 0, 101, &c, &err));
    cr_assert_null(prefetch_open(f, 0, 500, &ok, &err));
    tokfile_close(f);
    unlink(path);
}
