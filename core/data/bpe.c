/* bpe.c: byte-level BPE: the merge table, training by pair counts, encoding by merge rank, decoding to bytes. */
#include "data/bpe.h"

#include "base/error.h"
#include "base/lab.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the model */

static uint64_t pair_key(uint32_t left, uint32_t right) { return ((uint64_t)left << 32 | right) + 1; }

static uint32_t key_slot(uint64_t key, uint32_t slots) {
    key ^= key >> 33; /* a 64-bit mix (murmur3's finalizer), so consecutive ids spread over the table */
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (uint32_t)key & (slots - 1);
}

bool bpe_init(bpe_model *m, const bpe_pair *merges, uint32_t n_merges, data_err *err) {
    memset(m, 0, sizeof *m);
    if (n_merges > BPE_MAX_VOCAB - BPE_BYTES)
        return DATA_ERR(err, "at most 3840 merges (a vocabulary of at most 4096)", NULL, "%u merges", n_merges);
    for (uint32_t r = 0; r < n_merges; r++)
        if (merges[r].left >= BPE_BYTES + r || merges[r].right >= BPE_BYTES + r)
            return DATA_ERR(err, "each merge joins ids made before it (both < 256 + its rank)", NULL,
                            "merge %u joins (%u, %u); ids below %u exist at that rank", r, merges[r].left,
                            merges[r].right, BPE_BYTES + r);
    uint32_t V = BPE_BYTES + n_merges;
    m->vocab_size = V;
    m->n_merges = n_merges;
    m->merges = malloc((n_merges ? n_merges : 1) * sizeof *m->merges);
    m->token_start = malloc((V + 1) * sizeof *m->token_start);
    MP_ASSERT(m->merges && m->token_start, "out of memory");
    if (n_merges) memcpy(m->merges, merges, n_merges * sizeof *merges);
    /* Token lengths first (a merge's length is the sum of its parts'), then the bytes themselves. */
    uint32_t *len = malloc(V * sizeof *len);
    MP_ASSERT(len, "out of memory");
    uint64_t total = 0;
    for (uint32_t id = 0; id < V; id++) {
        len[id] = id < BPE_BYTES ? 1 : len[merges[id - BPE_BYTES].left] + len[merges[id - BPE_BYTES].right];
        m->token_start[id] = (uint32_t)total;
        total += len[id];
    }
    MP_ASSERT(total < UINT32_MAX, "BPE tokens of %llu bytes in all", (unsigned long long)total);
    m->token_start[V] = (uint32_t)total;
    m->token_bytes = malloc(total);
    MP_ASSERT(m->token_bytes, "out of memory");
    for (uint32_t id = 0; id < V; id++) {
        uint8_t *p = m->token_bytes + m->token_start[id];
        if (id < BPE_BYTES) *p = (uint8_t)id;
        else {
            bpe_pair pr = merges[id - BPE_BYTES];
            memcpy(p, m->token_bytes + m->token_start[pr.left], len[pr.left]);
            memcpy(p + len[pr.left], m->token_bytes + m->token_start[pr.right], len[pr.right]);
        }
    }
    free(len);
    /* The rank table: (left, right) -> rank, for encoding. */
    m->rank_slots = 16;
    while (m->rank_slots < 2 * n_merges) m->rank_slots *= 2;
    m->rank_keys = calloc(m->rank_slots, sizeof *m->rank_keys);
    m->rank_values = calloc(m->rank_slots, sizeof *m->rank_values);
    MP_ASSERT(m->rank_keys && m->rank_values, "out of memory");
    for (uint32_t r = 0; r < n_merges; r++) {
        uint64_t key = pair_key(merges[r].left, merges[r].right);
        uint32_t s = key_slot(key, m->rank_slots);
        while (m->rank_keys[s] != 0 && m->rank_keys[s] != key) s = (s + 1) & (m->rank_slots - 1);
        if (m->rank_keys[s] == key) {
            uint32_t first = m->rank_values[s];
            bpe_free(m);
            return DATA_ERR(err, "each pair merged once", NULL, "merge %u joins (%u, %u), as merge %u does", r,
                            merges[r].left, merges[r].right, first);
        }
        m->rank_keys[s] = key;
        m->rank_values[s] = r;
    }
    return true;
}

void bpe_free(bpe_model *m) {
    free(m->merges);
    free(m->token_start);
    free(m->token_bytes);
    free(m->rank_keys);
    free(m->rank_values);
    memset(m, 0, sizeof *m);
}

int64_t bpe_rank(const bpe_model *m, uint32_t left, uint32_t right) {
    if (m->n_merges == 0) return -1;
    uint64_t key = pair_key(left, right);
    for (uint32_t s = key_slot(key, m->rank_slots); m->rank_keys[s] != 0; s = (s + 1) & (m->rank_slots - 1))
        if (m->rank_keys[s] == key) return m->rank_values[s];
    return -1;
}

/* ---------------------------------------------------------------- training */

uint64_t bpe_most_frequent_pair(const uint32_t *ids, size_t n, uint32_t stride, uint32_t *counts, bpe_pair *best) {
    /* LAB 22 BEGIN count the adjacent pairs of ids and take the most frequent one, ties to the smallest (left, right) */
    uint64_t best_count = 0;
    for (size_t i = 0; i + 1 < n; i++) counts[(size_t)ids[i] * stride + ids[i + 1]]++;
    /* A second pass over the sequence visits every pair that occurs (a scan of the whole table would cost
     * stride^2 per merge); the tie-break makes the order of visits irrelevant. */
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t left = ids[i], right = ids[i + 1], c = counts[(size_t)left * stride + right];
        bool better = c > best_count ||
                      (c == best_count && (left < best->left || (left == best->left && right < best->right)));
        if (better) {
            best_count = c;
            *best = (bpe_pair){left, right};
        }
    }
    return best_count;
    /* LAB 22 END */
}

size_t bpe_merge_pair(uint32_t *ids, size_t n, bpe_pair pair, uint32_t new_id) {
    /* LAB 22 BEGIN replace each occurrence of the pair by new_id, left to right, without overlaps */
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && ids[i] == pair.left && ids[i + 1] == pair.right) {
            ids[out++] = new_id;
            i++; /* the right half is used up: "aaa" with (a,a) gives [aa, a] */
        } else {
            ids[out++] = ids[i];
        }
    }
    return out;
    /* LAB 22 END */
}

bool bpe_train(bpe_model *m, const uint8_t *text, size_t len, uint32_t vocab_size, data_err *err) {
    memset(m, 0, sizeof *m);
    if (vocab_size <= BPE_BYTES || vocab_size > BPE_MAX_VOCAB)
        return DATA_ERR(err, "a BPE vocabulary from 257 to 4096 ids (256 bytes + merges)", NULL, "vocab_size %u",
                        vocab_size);
    uint32_t stride = vocab_size, max_merges = vocab_size - BPE_BYTES, n_merges = 0;
    uint32_t *ids = malloc((len ? len : 1) * sizeof *ids);
    uint32_t *counts = calloc((size_t)stride * stride, sizeof *counts);
    bpe_pair *merges = malloc(max_merges * sizeof *merges);
    MP_ASSERT(ids && counts && merges, "out of memory (BPE training on %zu bytes, vocabulary %u)", len, vocab_size);
    for (size_t i = 0; i < len; i++) ids[i] = text[i];
    size_t n = len;
    while (n_merges < max_merges) {
        bpe_pair best = {0, 0};
        uint64_t count = bpe_most_frequent_pair(ids, n, stride, counts, &best);
        /* Clear what the counting touched: the pairs of the sequence, not the whole table. */
        for (size_t i = 0; i + 1 < n; i++) counts[(size_t)ids[i] * stride + ids[i + 1]] = 0;
        if (count < 2) break;
        MP_ASSERT(best.left < BPE_BYTES + n_merges && best.right < BPE_BYTES + n_merges,
                  "bpe_most_frequent_pair chose (%u, %u), ids that do not exist yet", best.left, best.right);
        merges[n_merges] = best;
        n = bpe_merge_pair(ids, n, best, BPE_BYTES + n_merges);
        n_merges++;
    }
    bool ok = bpe_init(m, merges, n_merges, err);
    free(ids);
    free(counts);
    free(merges);
    return ok;
}

/* ---------------------------------------------------------------- encode, decode */

size_t bpe_encode(const bpe_model *m, const uint8_t *text, size_t len, uint32_t *ids) {
    for (size_t i = 0; i < len; i++) ids[i] = text[i];
    size_t n = len;
    /* LAB 22 BEGIN apply the merges by rank: the lowest-ranked pair present, everywhere, until no pair has a merge */
    for (;;) {
        int64_t lowest = -1;
        for (size_t i = 0; i + 1 < n; i++) {
            int64_t r = bpe_rank(m, ids[i], ids[i + 1]);
            if (r >= 0 && (lowest < 0 || r < lowest)) lowest = r;
        }
        if (lowest < 0) break;
        n = bpe_merge_pair(ids, n, m->merges[lowest], BPE_BYTES + (uint32_t)lowest);
    }
    /* LAB 22 END */
    return n;
}

bool bpe_decode(const bpe_model *m, const uint32_t *ids, size_t n, textbuf *out) {
    /* LAB 22 BEGIN decode: the bytes of each token, concatenated */
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= m->vocab_size) return false;
        uint32_t start = m->token_start[ids[i]];
        textbuf_append(out, m->token_bytes + start, m->token_start[ids[i] + 1] - start);
    }
    return true;
    /* LAB 22 END */
}
