/* tokenizer.h: text <-> token ids: a byte tokenizer (V = 256), a UTF-8 character tokenizer and a byte-level BPE. */
#ifndef MIXPAR_DATA_TOKENIZER_H
#define MIXPAR_DATA_TOKENIZER_H

#include "data/bpe.h"
#include "data/data_err.h"
#include "data/textbuf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- UTF-8 */

/* Decodes one code point from s[0..len). Returns its length in bytes (1 to 4), or 0 when the bytes are
 * not valid UTF-8: a stray continuation byte, a truncated sequence, an overlong form, a surrogate
 * (U+D800..U+DFFF) or a value above U+10FFFF. */
int utf8_decode(const char *s, size_t len, uint32_t *cp);
/* Encodes a code point (<= U+10FFFF, not a surrogate) into out; returns its length (1 to 4). */
int utf8_encode(uint32_t cp, char out[4]);
/* The first invalid byte's offset, or -1 when all of s[0..len) is valid UTF-8. */
int64_t utf8_find_invalid(const char *s, size_t len);

/* ---------------------------------------------------------------- tokenizers */

typedef enum { TOKENIZER_BYTE, TOKENIZER_CHAR, TOKENIZER_BPE } tokenizer_kind;

/* A byte tokenizer maps each byte to its value (V = 256), so any input encodes and decodes exactly.
 * A character tokenizer maps each character (Unicode code point) of its vocabulary to an id; the
 * vocabulary is the set of characters of a corpus, sorted by code point (so building it twice gives the
 * same ids), followed by one <unk> id for characters it has not seen:
 *     ids 0 .. n_chars-1: chars[id];   id n_chars = unk_id: <unk>;   V = n_chars + 1.
 * A BPE tokenizer (data/bpe.h) starts from the 256 bytes and adds one id per merge learnt from a corpus; like
 * the byte tokenizer it encodes any bytes, invalid UTF-8 included, and has no <unk>. */
typedef struct {
    tokenizer_kind kind;
    uint32_t vocab_size; /* V */
    uint32_t n_chars;    /* char: characters in the vocabulary */
    uint32_t *chars;     /* char: (n_chars) the code point of each id, strictly ascending */
    uint32_t unk_id;     /* char: n_chars; byte, bpe: UINT32_MAX (there are no unknown bytes) */
    bpe_model *bpe;      /* bpe: the merges and the bytes of every token */
} tokenizer;

const char *tokenizer_kind_name(tokenizer_kind kind); /* "byte", "char", "bpe" */
int tokenizer_kind_from_name(const char *name);       /* -1 when unknown */

void tokenizer_init_byte(tokenizer *t);
/* The character vocabulary of text (which must be valid UTF-8: else the error names the byte offset). */
bool tokenizer_build_char(tokenizer *t, const char *text, size_t len, data_err *err);
/* A BPE vocabulary of up to vocab_size ids trained on text (any bytes; see data/bpe.h). */
bool tokenizer_build_bpe(tokenizer *t, const char *text, size_t len, uint32_t vocab_size, data_err *err);
void tokenizer_free(tokenizer *t);

/* The id of a code point in a character vocabulary, or -1 when it is not there (binary search). */
int64_t tokenizer_char_id(const tokenizer *t, uint32_t cp);

/* Encodes text into ids, which must have room for len ids (every token takes at least one byte).
 * A character the vocabulary lacks is an error naming it and its position (character index, line,
 * column, byte offset), unless map_unknown is set: then it becomes unk_id. Invalid UTF-8 is always an
 * error (with its byte offset) for a character tokenizer. Returns the number of ids, or -1 on error.
 * unknown_count (may be NULL) receives how many characters were mapped to <unk>. */
int64_t tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool map_unknown, uint32_t *ids,
                         uint64_t *unknown_count, data_err *err);

/* Appends the text of one id (<unk> decodes to U+FFFD, the replacement character). False when id >= V. */
bool tokenizer_decode_token(const tokenizer *t, uint32_t id, textbuf *out);

/* vocab.json: {"format": "mixpar-vocab-1", "kind": "char", "vocab_size": V, "unk_id": V-1,
 *              "tokens": ["\n", " ", "!", ..., "龘"]}            (tokens[id] is one character)
 *          or {"format": "mixpar-vocab-1", "kind": "byte", "vocab_size": 256}
 *          or {"format": "mixpar-vocab-1", "kind": "bpe", "vocab_size": V, "merges": [[l, r], ...]}
 *             (V - 256 merges in rank order; merge r makes id 256 + r; each id < 256 + r)
 * Saving is atomic; loading checks every field and names the key that is wrong. */
bool tokenizer_save(const tokenizer *t, const char *path, data_err *err);
bool tokenizer_load(tokenizer *t, const char *path, data_err *err);
/* The same as text (what tokenizer_save writes), for hashing; the caller frees the string with free(). */
char *tokenizer_to_json(const tokenizer *t);

#endif
