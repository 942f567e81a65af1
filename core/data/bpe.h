/* bpe.h: a byte-level BPE tokenizer (byte pair encoding, GPT-2's scheme on UTF-8 bytes): training, encode, decode. */
#ifndef MIXPAR_DATA_BPE_H
#define MIXPAR_DATA_BPE_H

#include "data/data_err.h"
#include "data/textbuf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Ids 0..255 are the 256 byte values, so every input encodes (invalid UTF-8 included). Merge r (rank r) joins
 * the pair merges[r] = (left, right) into the new id 256 + r, whose bytes are left's bytes then right's:
 *     V = 256 + n_merges;   bytes(256 + r) = bytes(merges[r].left) ++ bytes(merges[r].right)
 *
 * Training (bpe_train) starts from the text's bytes as one sequence of ids (no pre-tokenization: the corpus is
 * Chinese poetry, which has no spaces between words; a merge may join a punctuation mark and a line break) and
 * repeats: count every adjacent pair of ids (overlapping ones too: "aaa" holds (a,a) twice), take the most
 * frequent pair, ties going to the smallest left id and then the smallest right id, give it the next id and
 * replace its occurrences left to right (non-overlapping: "aaa" becomes [aa, a]). It stops at vocab_size ids,
 * or earlier when no pair occurs twice (a merge of a pair seen once would shorten nothing else).
 *
 * Encoding (bpe_encode) starts from the bytes and repeatedly merges, everywhere in the sequence, the pair of
 * the lowest rank present, until no adjacent pair has a merge (as GPT-2's encoder does). Encoding the
 * training text therefore gives exactly the sequence training ended with. Decoding concatenates bytes. */
enum { BPE_BYTES = 256, BPE_MAX_VOCAB = 4096 };

typedef struct {
    uint32_t left, right;
} bpe_pair;

typedef struct {
    uint32_t vocab_size;    /* V = 256 + n_merges */
    uint32_t n_merges;
    bpe_pair *merges;       /* (n_merges): merge r makes id 256 + r */
    uint32_t *token_start;  /* (V + 1): token id's bytes are token_bytes[token_start[id] .. token_start[id + 1]) */
    uint8_t *token_bytes;
    uint64_t *rank_keys;    /* open-addressing table (rank_slots): key left * 2^32 + right + 1, 0 = empty */
    uint32_t *rank_values;  /* (rank_slots): the merge's rank */
    uint32_t rank_slots;    /* a power of two, at least twice n_merges */
} bpe_model;

/* A model from a merge list (each pair's ids < 256 + its rank, else the error names the rank). */
bool bpe_init(bpe_model *m, const bpe_pair *merges, uint32_t n_merges, data_err *err);
void bpe_free(bpe_model *m);

/* The rank of the merge of (left, right), or -1 when there is none (a hash-table look-up). */
int64_t bpe_rank(const bpe_model *m, uint32_t left, uint32_t right);

/* Trains on text[0..len) up to vocab_size ids (257 .. BPE_MAX_VOCAB). Returns false with *err on bad
 * arguments. The model may end with fewer ids (see above); m->vocab_size says how many. */
bool bpe_train(bpe_model *m, const uint8_t *text, size_t len, uint32_t vocab_size, data_err *err);

/* The most frequent adjacent pair of ids[0..n): counts is a zeroed (stride x stride) table (stride > every id)
 * for the counting, left as it is after (the caller clears it). Ties: smallest left, then smallest right.
 * Returns its count (0 when n < 2: no pair). */
uint64_t bpe_most_frequent_pair(const uint32_t *ids, size_t n, uint32_t stride, uint32_t *counts, bpe_pair *best);

/* Replaces each occurrence of pair in ids[0..n) by new_id, left to right without overlaps; returns the new n. */
size_t bpe_merge_pair(uint32_t *ids, size_t n, bpe_pair pair, uint32_t new_id);

/* Encodes text[0..len) into ids (room for len ids; a token is at least one byte). Returns the number of ids. */
size_t bpe_encode(const bpe_model *m, const uint8_t *text, size_t len, uint32_t *ids);

/* Appends the bytes of ids[0..n) to out. False (nothing more appended) at the first id >= V. */
bool bpe_decode(const bpe_model *m, const uint32_t *ids, size_t n, textbuf *out);

#endif
