/* sha256.h: SHA-256 (FIPS 180-4), so dataset files can be checked with `sha256sum`. */
#ifndef MIXPAR_DATA_SHA256_H
#define MIXPAR_DATA_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t state[8];
    uint64_t total_bytes;
    uint8_t block[64];
    size_t block_len;
} sha256_ctx;

/* Streaming use:  sha256_init(&c); sha256_update(&c, p, n); ...; sha256_final(&c, digest); */
void sha256_init(sha256_ctx *ctx);
void sha256_update(sha256_ctx *ctx, const void *data, size_t len);
void sha256_final(sha256_ctx *ctx, uint8_t digest[32]);

/* One-shot helpers writing 64 lowercase hex digits and a NUL into hex (65 bytes). */
void sha256_hex(const void *data, size_t len, char hex[65]);
/* The digest of a whole file; returns 0, or -1 (errno set) when it cannot be read. */
int sha256_file_hex(const char *path, char hex[65]);

#endif
