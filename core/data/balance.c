/* balance.c: length-aware sharding: longest first to the least-loaded rank, and the max/mean imbalance measure. */
#include "data/balance.h"

#include "base/lab.h"
#include "base/mem.h"

#include <stdlib.h>

typedef struct {
    uint32_t length;
    size_t pos;
} length_at;

/* Longest first; equal lengths by position, so the order is total and the same on every machine. */
static int longest_first(const void *a, const void *b) {
    const length_at *x = a, *y = b;
    if (x->length != y->length) return x->length > y->length ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

void balance_longest_first(const uint32_t *lengths, size_t g, size_t *by_length) {
    if (g == 0) return;
    length_at *items = mem_alloc(g * sizeof *items, MEM_OTHER, "balance order");
    for (size_t p = 0; p < g; p++) items[p] = (length_at){lengths[p], p};
    qsort(items, g, sizeof *items, longest_first);
    for (size_t k = 0; k < g; k++) by_length[k] = items[k].pos;
    mem_free(items);
}

void balance_assign(const uint32_t *lengths, size_t g, int world, int *owner, uint64_t *tokens) {
    size_t *by_length = mem_alloc((g + 1) * sizeof *by_length, MEM_OTHER, "balance order");
    /* LAB 15 BEGIN length-aware sharding: longest first, each sample to the rank with the fewest tokens so far */
    balance_longest_first(lengths, g, by_length);
    for (int r = 0; r < world; r++) tokens[r] = 0;
    for (size_t k = 0; k < g; k++) {
        size_t p = by_length[k];
        int least = 0; /* the first rank with the smallest total: ties go to the lowest rank */
        for (int r = 1; r < world; r++)
            if (tokens[r] < tokens[least]) least = r;
        owner[p] = least;
        tokens[least] += lengths[p];
    }
    /* LAB 15 END */
    mem_free(by_length);
}

void balance_assign_strided(size_t g, int world, int *owner) {
    for (size_t p = 0; p < g; p++) owner[p] = (int)(p % (size_t)world);
}

void balance_rank_tokens(const uint32_t *lengths, const int *owner, size_t g, int world, uint64_t *tokens) {
    for (int r = 0; r < world; r++) tokens[r] = 0;
    for (size_t p = 0; p < g; p++) tokens[owner[p]] += lengths[p];
}

double balance_imbalance(const uint64_t *tokens, int world) {
    /* LAB 15 BEGIN the measure: the largest rank's tokens over the mean of all ranks */
    uint64_t most = 0;
    double sum = 0; /* in double: a sum of uint64 totals can pass 2^64 */
    for (int r = 0; r < world; r++) {
        sum += (double)tokens[r];
        if (tokens[r] > most) most = tokens[r];
    }
    if (sum == 0) return 1.0; /* no work: nobody waits */
    return (double)most / (sum / world);
    /* LAB 15 END */
}

bool balance_epoch(const uint32_t *lengths, const uint64_t *order, uint64_t n, int world, uint64_t global_batch,
                   bool balanced, int *owner, data_err *err) {
    if (n == 0) return DATA_ERR(err, "a dataset of at least one sample", NULL, "N = 0");
    if (world < 1) return DATA_ERR(err, "world >= 1", NULL, "world = %d", world);
    if (global_batch < 1)
        return DATA_ERR(err, "a global batch of at least 1 sample", "samples per step on all ranks together",
                        "global_batch = 0");
    for (uint64_t p = 0; p < n; p++)
        if (order[p] >= n)
            return DATA_ERR(err, "an order of sample indices below N", "pass the epoch's dist_sampler_order",
                            "order[%llu] = %llu with N = %llu", (unsigned long long)p, (unsigned long long)order[p],
                            (unsigned long long)n);
    uint64_t g_max = global_batch < n ? global_batch : n;
    uint32_t *batch = mem_alloc((size_t)g_max * sizeof *batch, MEM_OTHER, "balance batch");
    uint64_t *tokens = mem_alloc((size_t)world * sizeof *tokens, MEM_OTHER, "balance totals");
    for (uint64_t first = 0; first < n; first += g_max) {
        size_t g = (size_t)(n - first < g_max ? n - first : g_max);
        for (size_t p = 0; p < g; p++) batch[p] = lengths[order[first + p]];
        if (balanced) balance_assign(batch, g, world, owner + first, tokens);
        else balance_assign_strided(g, world, owner + first);
    }
    mem_free(batch);
    mem_free(tokens);
    return true;
}
