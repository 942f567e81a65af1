/* tokens.c: opening (mmap + validation) and atomic writing of token files. */
#include "data/tokens.h"

#include "base/error.h"
#include "base/lab.h"
#include "data/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tokens are read from the mapping as native integers: the formats are little-endian, so is the host. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "token files are little-endian; port tokfile_get first");

#define HINT_REBUILD "rebuild the dataset: mixpar data build NAME --force (mixpar data list shows the names)"

/* llm.c's shard formats, as a table: what the magic at offset 0 means. */
static const struct {
    int32_t magic, version;
    uint32_t width, vocab_size;
    tokfile_format format;
    const char *name;
} llmc_formats[] = {
    {20240520, 1, 2, 50257, TOKFILE_LLMC_GPT2, "llm.c gpt-2 shard (magic 20240520 v1)"},
    {20240801, 7, 4, 128256, TOKFILE_LLMC_LLAMA3, "llm.c llama-3 shard (magic 20240801 v7)"},
};
enum { N_LLMC_FORMATS = sizeof llmc_formats / sizeof llmc_formats[0] };

static uint32_t read_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t read_u64(const uint8_t *p) { return (uint64_t)read_u32(p) | (uint64_t)read_u32(p + 4) << 32; }
static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* "4d 58 50 54 4f 4b 30 31 ('MXPTOK01')": the first bytes of a file, for a wrong-magic message. */
static void describe_bytes(const uint8_t *p, size_t n, char *out, size_t out_len) {
    size_t at = 0;
    for (size_t i = 0; i < n && at + 4 < out_len; i++) at += snprintf(out + at, out_len - at, "%s%02x", i ? " " : "", p[i]);
    if (at + 4 >= out_len) return;
    at += snprintf(out + at, out_len - at, " ('");
    for (size_t i = 0; i < n && at + 3 < out_len; i++) out[at++] = (p[i] >= 32 && p[i] < 127) ? (char)p[i] : '.';
    snprintf(out + at, out_len - at, "')");
}

/* The first token >= vocab, found only after the fast max pass says there is one. */
static bool report_bad_token(const tokfile *f, data_err *err) {
    for (uint64_t i = 0; i < f->token_count; i++) {
        uint32_t t = tokfile_get(f, i);
        if (t >= f->vocab_size)
            return DATA_ERR(err, "every token < vocab_size", HINT_REBUILD,
                            "token %u at index %llu (byte offset %llu) of '%s'; vocab_size is %u (%s)",
                            t, (unsigned long long)i, (unsigned long long)(f->header_bytes + i * f->token_width),
                            f->path, f->vocab_size,
                            f->format == TOKFILE_MIXPAR ? "header byte offset 12" : "fixed by the llm.c magic");
    }
    return true;
}

/* Largest token, one pass: a loop the compiler vectorises, so validation costs about a memory read. */
static uint32_t max_token(const tokfile *f) {
    uint32_t m = 0;
    if (f->token_width == 2) {
        const uint16_t *t = (const uint16_t *)f->tokens;
        for (uint64_t i = 0; i < f->token_count; i++) m = t[i] > m ? t[i] : m;
    } else {
        const uint32_t *t = (const uint32_t *)f->tokens;
        for (uint64_t i = 0; i < f->token_count; i++) m = t[i] > m ? t[i] : m;
    }
    return m;
}

/* The header of an MXPTOK01 file; the mapping holds at least TOKFILE_HEADER_BYTES. */
static bool parse_mixpar_header(tokfile *f, const uint8_t *h, data_err *err) {
    bool shard = memcmp(h + 6, "02", 2) == 0;
    if (memcmp(h + 6, "01", 2) != 0 && !shard)
        return DATA_ERR(err, "token file format version 01 or 02 (magic \"MXPTOK01\", or \"MXPTOK02\" for a shard)",
                        HINT_REBUILD, "version \"%.2s\" at byte offset 6 of '%s'; this mixpar reads versions 01 and 02",
                        (const char *)h + 6, f->path);
    f->format = TOKFILE_MIXPAR;
    f->format_name = shard ? "mixpar MXPTOK02 shard" : "mixpar MXPTOK01";
    f->header_bytes = TOKFILE_HEADER_BYTES;
    f->token_width = read_u32(h + 8);
    f->vocab_size = read_u32(h + 12);
    f->token_count = read_u64(h + 16);
    if (f->token_width != 2 && f->token_width != 4)
        return DATA_ERR(err, "token_width 2 or 4 (bytes per token)", HINT_REBUILD,
                        "token_width %u at byte offset 8 of '%s'", f->token_width, f->path);
    if (f->vocab_size == 0 || (f->token_width == 2 && f->vocab_size > 65536))
        return DATA_ERR(err, "vocab_size from 1 to 65536 for 2-byte tokens (any >= 1 for 4-byte tokens)", HINT_REBUILD,
                        "vocab_size %u at byte offset 12 of '%s' (token_width %u)", f->vocab_size, f->path,
                        f->token_width);
    if (shard) {
        f->shard_index = read_u32(h + 24);
        f->shard_count = read_u32(h + 28);
        if (f->shard_count == 0 || f->shard_index >= f->shard_count)
            return DATA_ERR(err, "shard_index < shard_count, shard_count >= 1 (byte offsets 24 and 28)", HINT_REBUILD,
                            "shard_index %u at byte offset 24, shard_count %u at byte offset 28 of '%s'",
                            f->shard_index, f->shard_count, f->path);
    }
    for (int i = 24; !shard && i < TOKFILE_HEADER_BYTES; i++)
        if (h[i] != 0)
            return DATA_ERR(err, "zero bytes in the reserved header space (offsets 24 to 63)", HINT_REBUILD,
                            "byte 0x%02x at byte offset %d of '%s'", h[i], i, f->path);
    if (f->token_count == 0)
        return DATA_ERR(err, "at least one token", HINT_REBUILD,
                        "token_count 0 at byte offset 16 of '%s': the file holds no tokens", f->path);
    return true;
}

/* The header of an llm.c shard whose magic matched llmc_formats[k]; the mapping holds 1024 bytes. */
static bool parse_llmc_header(tokfile *f, const uint8_t *h, int k, data_err *err) {
    int32_t version = (int32_t)read_u32(h + 4), count = (int32_t)read_u32(h + 8);
    if (version != llmc_formats[k].version)
        return DATA_ERR(err, "the version that goes with this llm.c magic", NULL,
                        "version %d at byte offset 4 of '%s'; magic %d is %s, version %d", version, f->path,
                        llmc_formats[k].magic, llmc_formats[k].name, llmc_formats[k].version);
    if (count <= 0)
        return DATA_ERR(err, "a token count of at least 1", NULL, "token count %d at byte offset 8 of '%s'", count,
                        f->path);
    f->format = llmc_formats[k].format;
    f->format_name = llmc_formats[k].name;
    f->header_bytes = TOKFILE_LLMC_HEADER_BYTES;
    f->token_width = llmc_formats[k].width;
    f->vocab_size = llmc_formats[k].vocab_size;
    f->token_count = (uint64_t)count;
    return true;
}

/* Which header the file starts with; checks the file holds all of it. */
static bool parse_header(tokfile *f, const uint8_t *h, data_err *err) {
    if (f->file_bytes >= 6 && memcmp(h, TOKFILE_MAGIC, 6) == 0) {
        if (f->file_bytes < TOKFILE_HEADER_BYTES)
            return DATA_ERR(err, "a 64-byte MXPTOK01 header", HINT_REBUILD,
                            "'%s' ends at byte offset %llu, inside the header (truncated)", f->path,
                            (unsigned long long)f->file_bytes);
        return parse_mixpar_header(f, h, err);
    }
    if (f->file_bytes >= 4) {
        int32_t magic = (int32_t)read_u32(h);
        for (int k = 0; k < N_LLMC_FORMATS; k++)
            if (magic == llmc_formats[k].magic) {
                if (f->file_bytes < TOKFILE_LLMC_HEADER_BYTES)
                    return DATA_ERR(err, "a 1024-byte llm.c header (256 int32)", NULL,
                                    "'%s' (magic %d, %s) ends at byte offset %llu, inside the header (truncated)",
                                    f->path, magic, llmc_formats[k].name, (unsigned long long)f->file_bytes);
                return parse_llmc_header(f, h, k, err);
            }
    }
    if (f->file_bytes < 8)
        return DATA_ERR(err, "a token file header (64 bytes, or 1024 for an llm.c shard)", HINT_REBUILD,
                        "'%s' has only %llu bytes: the header is truncated at byte offset %llu", f->path,
                        (unsigned long long)f->file_bytes, (unsigned long long)f->file_bytes);
    char seen[80];
    describe_bytes(h, 8, seen, sizeof seen);
    return DATA_ERR(err, "magic \"MXPTOK01\" (mixpar) or int32 20240520 / 20240801 (llm.c shards) at byte offset 0",
                    "is this a token file? mixpar data build NAME writes data/NAME/train.tokens and val.tokens",
                    "%s at byte offset 0 of '%s'", seen, f->path);
}

static bool check_size(const tokfile *f, data_err *err) {
    uint64_t need;
    if (__builtin_mul_overflow(f->token_count, (uint64_t)f->token_width, &need) ||
        __builtin_add_overflow(need, f->header_bytes, &need))
        need = UINT64_MAX;
    if (f->file_bytes == need) return true;
    char how[128];
    if (f->file_bytes < need)
        snprintf(how, sizeof how, "truncated: the data ends at byte offset %llu, %llu bytes short",
                 (unsigned long long)f->file_bytes, (unsigned long long)(need - f->file_bytes));
    else
        snprintf(how, sizeof how, "%llu extra bytes after byte offset %llu", (unsigned long long)(f->file_bytes - need),
                 (unsigned long long)need);
    return DATA_ERR(err, "file size = header + token_count x token_width", HINT_REBUILD,
                    "'%s' is %llu bytes; its header says %llu + %llu x %u = %llu (token count at byte offset %s): %s",
                    f->path, (unsigned long long)f->file_bytes, (unsigned long long)f->header_bytes,
                    (unsigned long long)f->token_count, f->token_width, (unsigned long long)need,
                    f->format == TOKFILE_MIXPAR ? "16" : "8", how);
}

/* A shard against the sha256 its header records at byte offset 32 (of header bytes 0-31, then the tokens). */
static bool check_shard_sha256(const tokfile *f, const uint8_t *h, data_err *err) {
    char want[65], found[65];
    uint8_t digest[32];
    sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, h, 32);
    sha256_update(&ctx, f->tokens, f->token_count * f->token_width);
    sha256_final(&ctx, digest);
    for (int i = 0; i < 32; i++) {
        snprintf(want + 2 * i, 3, "%02x", h[32 + i]);
        snprintf(found + 2 * i, 3, "%02x", digest[i]);
    }
    if (strcmp(want, found) == 0) return true;
    return DATA_ERR(err, "a shard with the sha256 its header records at byte offset 32",
                    "the shard changed after it was written (a flipped bit on disk or in a copy): rebuild it, "
                    "mixpar data build NAME --shards N --force",
                    "'%s': header bytes 0-31 and tokens (byte offsets %llu to %llu) have sha256 %s; the header "
                    "records %s", f->path, (unsigned long long)f->header_bytes, (unsigned long long)f->file_bytes,
                    found, want);
}

tokfile *tokfile_open(const char *path, data_err *err) {
    tokfile *f = calloc(1, sizeof *f);
    MP_ASSERT(f != NULL, "out of memory");
    snprintf(f->path, sizeof f->path, "%s", path);
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        free(f);
        DATA_ERR(err, "a readable token file", "mixpar data build NAME writes data/NAME/train.tokens and val.tokens",
                 "cannot open '%s': %s", path, strerror(e));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        free(f);
        DATA_ERR(err, "a regular file of tokens", NULL, "'%s' is not a regular file (a directory?)", path);
        return NULL;
    }
    f->file_bytes = (uint64_t)st.st_size;
    if (f->file_bytes == 0) {
        close(fd);
        free(f);
        DATA_ERR(err, "a token file header (64 bytes, or 1024 for an llm.c shard)", HINT_REBUILD,
                 "'%s' is empty (0 bytes): the header is truncated at byte offset 0", path);
        return NULL;
    }
    f->map = mmap(NULL, f->file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file open */
    if (f->map == MAP_FAILED) {
        free(f);
        DATA_ERR(err, "a token file that can be memory-mapped", NULL, "mmap of '%s' (%llu bytes) failed: %s", path,
                 (unsigned long long)st.st_size, strerror(e));
        return NULL;
    }
    const uint8_t *h = f->map;
    if (!parse_header(f, h, err) || !check_size(f, err)) {
        tokfile_close(f);
        return NULL;
    }
    f->tokens = h + f->header_bytes;
    if (f->shard_count > 0 && !check_shard_sha256(f, h, err)) {
        tokfile_close(f);
        return NULL;
    }
    /* Tokens are scanned in order: tell the kernel so it reads ahead. */
    madvise(f->map, f->file_bytes, MADV_SEQUENTIAL);
    f->max_token = max_token(f);
    if (f->max_token >= f->vocab_size) {
        report_bad_token(f, err);
        tokfile_close(f);
        return NULL;
    }
    madvise(f->map, f->file_bytes, MADV_NORMAL);
    return f;
}

void tokfile_close(tokfile *f) {
    if (!f) return;
    if (f->map && f->map != MAP_FAILED) munmap(f->map, f->file_bytes);
    free(f->joined);
    free(f);
}

void tokfile_read(const tokfile *f, uint64_t start, uint64_t n, int32_t *out) {
    MP_ASSERT(start <= f->token_count && n <= f->token_count - start, "tokens [%llu, %llu) of a file of %llu",
              (unsigned long long)start, (unsigned long long)(start + n), (unsigned long long)f->token_count);
    if (f->token_width == 2) {
        const uint16_t *t = (const uint16_t *)f->tokens + start;
        for (uint64_t i = 0; i < n; i++) out[i] = t[i];
    } else {
        const uint32_t *t = (const uint32_t *)f->tokens + start;
        for (uint64_t i = 0; i < n; i++) out[i] = (int32_t)t[i];
    }
}

uint32_t tokfile_width_for_vocab(uint32_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

/* ---------------------------------------------------------------- atomic writing */

/* Writes all of buf or fails (write(2) may write less than asked). */
static bool write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* An atomic writer: bytes go to a temporary file beside the target, which replaces it on commit. */
typedef struct {
    char tmp[4200];
    const char *path;
    int fd;
} atomic_file;

static bool atomic_begin(atomic_file *a, const char *path, data_err *err) {
    a->path = path;
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%d", path, (int)getpid());
    a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (a->fd < 0)
        return DATA_ERR(err, "a writable output directory", "check the --out directory exists and is writable",
                        "cannot create '%s': %s", a->tmp, strerror(errno));
    return true;
}

static bool atomic_fail(atomic_file *a, data_err *err, int e) {
    close(a->fd);
    unlink(a->tmp);
    return DATA_ERR(err, "room to write the file", "check free disk space and permissions", "writing '%s' failed: %s",
                    a->tmp, strerror(e));
}

/* fsync the data, rename over the target, fsync the directory so the rename itself is durable. */
static bool atomic_commit(atomic_file *a, data_err *err) {
    if (fsync(a->fd) != 0) return atomic_fail(a, err, errno);
    if (close(a->fd) != 0) {
        int e = errno;
        unlink(a->tmp);
        return DATA_ERR(err, "room to write the file", NULL, "closing '%s' failed: %s", a->tmp, strerror(e));
    }
    if (rename(a->tmp, a->path) != 0) {
        int e = errno;
        unlink(a->tmp);
        return DATA_ERR(err, "a file that can be renamed into place", NULL, "renaming '%s' to '%s' failed: %s", a->tmp,
                        a->path, strerror(e));
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", a->path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd); /* best effort: some filesystems refuse fsync on directories */
        close(dfd);
    }
    return true;
}

bool data_write_file_atomic(const char *path, const void *bytes, size_t n, data_err *err) {
    atomic_file a;
    if (!atomic_begin(&a, path, err)) return false;
    if (!write_all(a.fd, bytes, n)) return atomic_fail(&a, err, errno ? errno : EIO);
    return atomic_commit(&a, err);
}

/* Every token < vocab_size, and at least one: what a token file may hold. */
static bool check_tokens(const char *path, const uint32_t *tokens, uint64_t n, uint32_t vocab_size, data_err *err) {
    if (n == 0) return DATA_ERR(err, "at least one token to write", NULL, "0 tokens for '%s'", path);
    if (vocab_size == 0) return DATA_ERR(err, "a vocabulary of at least 1", NULL, "vocab_size 0 for '%s'", path);
    for (uint64_t i = 0; i < n; i++)
        if (tokens[i] >= vocab_size)
            return DATA_ERR(err, "every token < vocab_size", NULL, "token %u at index %llu for '%s'; vocab_size is %u",
                            tokens[i], (unsigned long long)i, path, vocab_size);
    return true;
}

/* tokens[0..n) narrowed to width bytes each, little-endian. */
static void narrow_tokens(const uint32_t *tokens, uint64_t n, uint32_t width, uint8_t *out) {
    for (uint64_t i = 0; i < n; i++)
        for (uint32_t b = 0; b < width; b++) out[i * width + b] = (uint8_t)(tokens[i] >> (8 * b));
}

bool tokfile_write(const char *path, const uint32_t *tokens, uint64_t n, uint32_t vocab_size, data_err *err) {
    if (!check_tokens(path, tokens, n, vocab_size, err)) return false;
    uint32_t width = tokfile_width_for_vocab(vocab_size);
    uint8_t header[TOKFILE_HEADER_BYTES] = {0};
    memcpy(header, TOKFILE_MAGIC, 8);
    put_u32(header + 8, width);
    put_u32(header + 12, vocab_size);
    put_u64(header + 16, n);

    atomic_file a;
    if (!atomic_begin(&a, path, err)) return false;
    if (!write_all(a.fd, header, sizeof header)) return atomic_fail(&a, err, errno ? errno : EIO);
    /* Narrow to the file's width a chunk at a time. */
    enum { CHUNK = 1 << 15 };
    uint8_t *chunk = malloc((size_t)CHUNK * width);
    MP_ASSERT(chunk != NULL, "out of memory");
    for (uint64_t at = 0; at < n; at += CHUNK) {
        uint64_t m = n - at < CHUNK ? n - at : CHUNK;
        narrow_tokens(tokens + at, m, width, chunk);
        if (!write_all(a.fd, chunk, m * width)) {
            free(chunk);
            return atomic_fail(&a, err, errno ? errno : EIO);
        }
    }
    free(chunk);
    return atomic_commit(&a, err);
}

/* ---------------------------------------------------------------- shards */

void tokfile_shard_header(uint8_t header[TOKFILE_HEADER_BYTES], uint32_t width, uint32_t vocab_size,
                          uint64_t token_count, uint32_t shard_index, uint32_t shard_count, const uint8_t *payload) {
    memset(header, 0, TOKFILE_HEADER_BYTES);
    /* LAB 22 BEGIN a shard's header: magic "MXPTOK02", width, vocab, count, index, shard count, then the sha256 of bytes 0-31 and the payload */
    memcpy(header, TOKFILE_SHARD_MAGIC, 8);
    put_u32(header + 8, width);
    put_u32(header + 12, vocab_size);
    put_u64(header + 16, token_count);
    put_u32(header + 24, shard_index);
    put_u32(header + 28, shard_count);
    sha256_ctx ctx; /* over the header's fields too, so a changed byte anywhere in the file is caught */
    sha256_init(&ctx);
    sha256_update(&ctx, header, 32);
    sha256_update(&ctx, payload, token_count * width);
    sha256_final(&ctx, header + 32);
    /* LAB 22 END */
}

/* The length of path without its extension ("DIR/train.tokens" -> "DIR/train"). */
static size_t stem_length(const char *path) {
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    return dot && (!slash || dot > slash) ? (size_t)(dot - path) : strlen(path);
}

void tokfile_shard_name(const char *path, uint32_t index, uint32_t count, char *out, size_t out_len) {
    size_t stem = stem_length(path);
    snprintf(out, out_len, "%.*s-%05u-of-%05u%s", (int)stem, path, index, count, path + stem);
}

bool tokfile_write_shard(const char *path, const uint32_t *tokens, uint64_t n, uint32_t vocab_size, uint32_t index,
                         uint32_t count, data_err *err) {
    if (!check_tokens(path, tokens, n, vocab_size, err)) return false;
    if (count == 0 || index >= count)
        return DATA_ERR(err, "a shard index below the shard count", NULL, "shard %u of %u for '%s'", index, count, path);
    uint32_t width = tokfile_width_for_vocab(vocab_size);
    uint8_t *file = malloc(TOKFILE_HEADER_BYTES + n * width);
    MP_ASSERT(file != NULL, "out of memory (a shard of %llu tokens)", (unsigned long long)n);
    narrow_tokens(tokens, n, width, file + TOKFILE_HEADER_BYTES);
    tokfile_shard_header(file, width, vocab_size, n, index, count, file + TOKFILE_HEADER_BYTES);
    bool ok = data_write_file_atomic(path, file, TOKFILE_HEADER_BYTES + n * width, err);
    free(file);
    return ok;
}

/* Shard i of the set, opened, checked and in its place (index i of count, the first one's width and vocabulary). */
static tokfile *open_shard(const char *path, uint32_t i, uint32_t count, const tokfile *first, data_err *err) {
    char name[4200];
    tokfile_shard_name(path, i, count, name, sizeof name);
    tokfile *s = tokfile_open(name, err);
    if (!s) return NULL;
    const char *wrong = s->shard_count == 0                  ? "an MXPTOK01 file, not a shard (MXPTOK02)"
                        : s->shard_index != i                 ? "another shard index (byte offset 24)"
                        : s->shard_count != count             ? "another shard count (byte offset 28)"
                        : first && s->vocab_size != first->vocab_size ? "another vocab_size (byte offset 12)"
                        : first && s->token_width != first->token_width ? "another token_width (byte offset 8)"
                                                                : NULL;
    if (!wrong) return s;
    DATA_ERR(err, "each shard in its place: index i of n, the vocabulary and width of shard 0",
             "rebuild the set: mixpar data build NAME --shards N --force",
             "'%s' has %s: shard %u of %u, vocab_size %u, width %u", name, wrong, s->shard_index, s->shard_count,
             s->vocab_size, s->token_width);
    tokfile_close(s);
    return NULL;
}

tokfile *tokfile_open_set(const char *path, data_err *err) {
    if (access(path, F_OK) == 0) return tokfile_open(path, err);
    /* Shard 0's name depends on the count, which only shard 0 knows: find it by pattern. */
    char pattern[4200];
    size_t stem = stem_length(path);
    snprintf(pattern, sizeof pattern, "%.*s-00000-of-[0-9][0-9][0-9][0-9][0-9]%s", (int)stem, path, path + stem);
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
        globfree(&g);
        DATA_ERR(err, "a token file, or a set of shards of it", HINT_REBUILD,
                 "cannot open '%s': no such file, and no shards of it (%s)", path, pattern);
        return NULL;
    }
    data_err first_err;
    tokfile *first = tokfile_open(g.gl_pathv[0], &first_err);
    globfree(&g);
    if (!first) {
        if (!err) data_err_exit(&first_err);
        *err = first_err;
        return NULL;
    }
    uint32_t count = first->shard_count;
    tokfile_close(first);
    first = open_shard(path, 0, count, NULL, err);
    if (!first) return NULL;
    tokfile *set = calloc(1, sizeof *set);
    MP_ASSERT(set != NULL, "out of memory");
    *set = *first;
    set->map = NULL;
    snprintf(set->path, sizeof set->path, "%s", path);
    set->format_name = "mixpar MXPTOK02 shards, joined";
    set->header_bytes = 0;
    set->token_count = 0;
    set->file_bytes = 0;
    set->max_token = 0;
    size_t cap = 0;
    for (uint32_t i = 0; i < count; i++) {
        tokfile *s = i == 0 ? first : open_shard(path, i, count, first, err);
        if (!s) {
            tokfile_close(first);
            tokfile_close(set);
            return NULL;
        }
        size_t bytes = s->token_count * s->token_width, at = set->token_count * set->token_width;
        if (at + bytes > cap) {
            cap = 2 * (at + bytes);
            set->joined = realloc(set->joined, cap);
            MP_ASSERT(set->joined != NULL, "out of memory joining shards");
        }
        memcpy((uint8_t *)set->joined + at, s->tokens, bytes);
        set->token_count += s->token_count;
        set->file_bytes += s->file_bytes;
        if (s->max_token > set->max_token) set->max_token = s->max_token;
        if (i > 0) tokfile_close(s);
    }
    tokfile_close(first);
    set->tokens = set->joined;
    return set;
}
