/* tokens.h: token files: mixpar's MXPTOK01 format (read and written) and llm.c's shards (read), memory-mapped. */
#ifndef MIXPAR_DATA_TOKENS_H
#define MIXPAR_DATA_TOKENS_H

#include "data/data_err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The MXPTOK01 layout: a 64-byte header, then token_count tokens of token_width bytes each, all little-endian.
 *
 *   offset  bytes  field
 *        0      8  magic "MXPTOK01" (the last two characters are the format version)
 *        8      4  token_width  u32: 2 (uint16 tokens) or 4 (uint32 tokens)
 *       12      4  vocab_size   u32: every token is < vocab_size; at most 65536 when token_width is 2
 *       16      8  token_count  u64: at least 1
 *       24     40  reserved: zero (room for later fields; a reader of version 01 rejects non-zero bytes)
 *       64      .  tokens
 *
 * So the file size is exactly 64 + token_count * token_width, and tokens start 64-byte aligned for mmap.
 *
 * MXPTOK02 is a shard (分片) of a larger token stream: the same header, with the reserved bytes put to use:
 *       24      4  shard_index  u32: this shard's place, 0 .. shard_count - 1
 *       28      4  shard_count  u32: shards in the set, at least 1
 *       32     32  sha256       of header bytes 0-31 then the tokens (bytes 64 to the end), checked on every
 *                               open: a changed byte anywhere in the file is caught
 * A set is named after the file it stands for: train.tokens as N shards is train-00000-of-0000N.tokens ...
 * train-0000{N-1}-of-0000N.tokens (tokfile_shard_name), read back in order as one stream (tokfile_open_set).
 *
 * llm.c's shards (dev/data/data_common.py) are read too: a header of 256 little-endian int32 (1024 bytes),
 * [0] magic, [1] version, [2] token count, then the tokens:
 *   magic 20240520 version 1: GPT-2, uint16 tokens, vocabulary 50257
 *   magic 20240801 version 7: LLaMA-3, uint32 tokens, vocabulary 128256
 */
#define TOKFILE_MAGIC "MXPTOK01"
#define TOKFILE_SHARD_MAGIC "MXPTOK02"
enum { TOKFILE_HEADER_BYTES = 64, TOKFILE_LLMC_HEADER_BYTES = 1024 };

typedef enum { TOKFILE_MIXPAR, TOKFILE_LLMC_GPT2, TOKFILE_LLMC_LLAMA3 } tokfile_format;

/* An open, validated token file. The tokens are read straight from the mapping. */
typedef struct {
    char path[4096];
    tokfile_format format;
    const char *format_name;  /* "mixpar MXPTOK01", "llm.c gpt-2 (magic 20240520 v1)", ... */
    uint32_t token_width;     /* bytes per token: 2 or 4 */
    uint32_t vocab_size;      /* V: every token is < V (for llm.c shards, the tokenizer's V) */
    uint64_t token_count;     /* N */
    uint64_t header_bytes;    /* where the tokens start */
    uint64_t file_bytes;
    uint32_t max_token;       /* the largest token in the file (found while validating) */
    const uint8_t *tokens;    /* (N * token_width) bytes, little-endian */
    void *map;                /* the whole file, mmap'ed read-only */
    uint32_t shard_index, shard_count; /* MXPTOK02: this shard of how many; else 0 of 0 */
    void *joined;             /* a set of shards read as one (tokfile_open_set): the tokens, on the heap */
} tokfile;

/* Opens, maps and validates a token file: the header, the size (must be exactly header + N * width) and
 * every token (< V; one pass, about memory bandwidth). Any mismatch is reported with its byte offset.
 * Returns NULL with *err filled, or (err == NULL) prints the error and exits 2. */
tokfile *tokfile_open(const char *path, data_err *err);
void tokfile_close(tokfile *f); /* NULL is fine */

/* Token i (i < N). */
static inline uint32_t tokfile_get(const tokfile *f, uint64_t i) {
    if (f->token_width == 2) {
        const uint8_t *p = f->tokens + 2 * i;
        return (uint32_t)p[0] | (uint32_t)p[1] << 8;
    }
    const uint8_t *p = f->tokens + 4 * i;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Copies tokens [start, start + n) into out as int32, the type the model's embedding lookup takes. */
void tokfile_read(const tokfile *f, uint64_t start, uint64_t n, int32_t *out);

/* The token width a vocabulary needs: 2 when every token fits in uint16 (V <= 65536), else 4. */
uint32_t tokfile_width_for_vocab(uint32_t vocab_size);

/* Writes tokens[0..n) as an MXPTOK01 file, atomically: into "<path>.tmp.<pid>", flushed and fsync'ed,
 * then renamed over path (and the directory fsync'ed), so a crash leaves either the old file or the
 * whole new one under the final name, never half of one. Every token must be < vocab_size, n >= 1.
 * Returns false with *err filled (or exits 2 when err == NULL). */
bool tokfile_write(const char *path, const uint32_t *tokens, uint64_t n, uint32_t vocab_size, data_err *err);

/* The 64-byte MXPTOK02 header of a shard: magic, width, vocab_size, token_count, index, count and the sha256 of
 * header bytes 0-31 followed by the payload (the token_count x width token bytes that follow the header). */
void tokfile_shard_header(uint8_t header[TOKFILE_HEADER_BYTES], uint32_t width, uint32_t vocab_size,
                          uint64_t token_count, uint32_t shard_index, uint32_t shard_count, const uint8_t *payload);

/* The name of shard i of n of the stream `path` stands for: "DIR/train.tokens" -> "DIR/train-00001-of-00004.tokens". */
void tokfile_shard_name(const char *path, uint32_t index, uint32_t count, char *out, size_t out_len);

/* Writes tokens[0..n) as shard `index` of `count` (MXPTOK02) at path, atomically as tokfile_write does. */
bool tokfile_write_shard(const char *path, const uint32_t *tokens, uint64_t n, uint32_t vocab_size, uint32_t index,
                         uint32_t count, data_err *err);

/* Opens the stream `path` stands for: the file itself when it exists, else its set of shards (shard 0 says how
 * many; each is opened and checked, and must be in its place with the same vocabulary), joined in order. NULL
 * with *err (or exit 2 when err is NULL) when neither is there or a shard is bad. */
tokfile *tokfile_open_set(const char *path, data_err *err);

/* Writes a whole file atomically the same way (used for vocab.json and info.json too). */
bool data_write_file_atomic(const char *path, const void *bytes, size_t n, data_err *err);

#endif
