/* lab22_util.h: helpers for the lab 22 tests: a plain reference BPE (sorting the pairs each round, a linear search
 * for ranks), written independently of core/data/bpe.c, random bytes from the grade's seed, and scratch files. */
#ifndef LAB22_UTIL_H
#define LAB22_UTIL_H

#include "base/rng.h"
#include "data/bpe.h"
#include "data/sha256.h"
#include "data/tokens.h"
#include "mptest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline int lab22_cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Replaces (left, right) by id, left to right, no overlaps. */
static inline size_t lab22_ref_merge(uint32_t *ids, size_t n, uint32_t left, uint32_t right, uint32_t id) {
    size_t out = 0;
    for (size_t i = 0; i < n; i++)
        if (i + 1 < n && ids[i] == left && ids[i + 1] == right) ids[out++] = id, i++;
        else ids[out++] = ids[i];
    return out;
}

/* The reference training: each round sorts the pairs as keys left * 2^32 + right, so equal pairs sit together
 * and the first run of the largest length is the smallest (left, right) among the most frequent. Stops at
 * vocab ids or when no pair occurs twice. Returns the number of merges; ids_out (may be NULL, room for len)
 * receives the final sequence and *n_out its length. */
static inline uint32_t lab22_ref_train(const uint8_t *text, size_t len, uint32_t vocab, bpe_pair *merges, uint32_t *ids_out,
                                size_t *n_out) {
    uint32_t *ids = malloc((len + 1) * sizeof *ids);
    uint64_t *keys = malloc((len + 1) * sizeof *keys);
    for (size_t i = 0; i < len; i++) ids[i] = text[i];
    size_t n = len;
    uint32_t m = 0;
    while (BPE_BYTES + m < vocab && n >= 2) {
        for (size_t i = 0; i + 1 < n; i++) keys[i] = (uint64_t)ids[i] << 32 | ids[i + 1];
        qsort(keys, n - 1, sizeof *keys, lab22_cmp_u64);
        uint64_t best = 0, best_run = 0;
        for (size_t i = 0; i + 1 < n;) {
            size_t j = i;
            while (j + 1 < n && keys[j] == keys[i]) j++;
            if (j - i > best_run) best_run = j - i, best = keys[i];
            i = j;
        }
        if (best_run < 2) break;
        merges[m] = (bpe_pair){(uint32_t)(best >> 32), (uint32_t)best};
        n = lab22_ref_merge(ids, n, merges[m].left, merges[m].right, BPE_BYTES + m);
        m++;
    }
    if (ids_out) memcpy(ids_out, ids, n * sizeof *ids);
    if (n_out) *n_out = n;
    free(ids);
    free(keys);
    return m;
}

/* The reference encoding: the lowest rank present (found by a linear search of the merge list), everywhere. */
static inline size_t lab22_ref_encode(const bpe_pair *merges, uint32_t n_merges, const uint8_t *text, size_t len,
                               uint32_t *ids) {
    for (size_t i = 0; i < len; i++) ids[i] = text[i];
    size_t n = len;
    for (;;) {
        uint32_t lowest = UINT32_MAX;
        for (size_t i = 0; i + 1 < n; i++)
            for (uint32_t r = 0; r < n_merges && r < lowest; r++)
                if (merges[r].left == ids[i] && merges[r].right == ids[i + 1]) lowest = r;
        if (lowest == UINT32_MAX) return n;
        n = lab22_ref_merge(ids, n, merges[lowest].left, merges[lowest].right, BPE_BYTES + lowest);
    }
}

/* Trains the core's BPE and fails the test (with the expected and found lists) unless its merges are want's. */
static inline void lab22_check_merges(const char *file, int line, const char *what, const bpe_model *m, const bpe_pair *want,
                               uint32_t n_want) {
    mpt_observe(file, line, m->n_merges);
    for (uint32_t r = 0; r < m->n_merges; r++) mpt_observe(file, line, (uint64_t)m->merges[r].left << 32 | m->merges[r].right);
    uint32_t bad = UINT32_MAX;
    for (uint32_t r = 0; r < n_want && r < m->n_merges && bad == UINT32_MAX; r++)
        if (m->merges[r].left != want[r].left || m->merges[r].right != want[r].right) bad = r;
    if (bad == UINT32_MAX && m->n_merges == n_want) return;
    char exp[2048] = "", got[2048] = "";
    for (uint32_t r = 0, at = 0; r < n_want && at < sizeof exp - 32; r++)
        at += (uint32_t)snprintf(exp + at, sizeof exp - at, " (%u,%u)", want[r].left, want[r].right);
    for (uint32_t r = 0, at = 0; r < m->n_merges && at < sizeof got - 32; r++)
        at += (uint32_t)snprintf(got + at, sizeof got - at, " (%u,%u)", m->merges[r].left, m->merges[r].right);
    mpt_fail(file, line,
             "%s: merges (left,right) in rank order\n      expected %u:%s\n      got %u:     %s\n      likely mistake: %s",
             what, n_want, exp, m->n_merges, got,
             bad == UINT32_MAX ? "training must stop when no pair occurs twice (or at the vocabulary size)"
                               : "count every adjacent pair, overlapping ones too ('aaa' holds (a,a) twice); ties go "
                                 "to the smallest left id, then the smallest right id");
}
#define LAB22_CHECK_MERGES(what, m, want, n) lab22_check_merges(__FILE__, __LINE__, (what), (m), (want), (n))

/* n random bytes from this grade's seed, drawn from a few symbols so pairs repeat (alphabet <= 256). */
static inline void lab22_random_bytes(uint64_t stream, uint8_t *out, size_t n, uint32_t alphabet) {
    for (size_t i = 0; i < n; i++) out[i] = (uint8_t)(mp_hash32(mpt_seed() + stream, i) % alphabet * (256 / alphabet));
}

/* A scratch directory under $TMPDIR (or /tmp), made fresh. */
static inline const char *lab22_scratch(char *buf, size_t len) {
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, len, "%s/lab22-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    MPT_REQUIRE(mkdtemp(buf) != NULL, "cannot make a scratch directory %s", buf);
    return buf;
}

static inline uint8_t *lab22_read_file(const char *path, size_t *len) {
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

static inline void lab22_write_file(const char *path, const uint8_t *b, size_t len) {
    FILE *f = fopen(path, "wb");
    MPT_REQUIRE(f && fwrite(b, 1, len, f) == len, "cannot write %s", path);
    fclose(f);
}

static inline uint32_t lab22_u32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

#endif
