/* checkpoint.c: safetensors checkpoints (atomic save, validated load) and llm.c GPT-2 checkpoint import/export. */
#include "train/checkpoint.h"

#include "data/textbuf.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/parse.h"

/* Tensors and header fields are copied between memory and file as they are: the host must be little-endian,
 * as both formats are. Every machine the course runs on (x86-64, arm64) is. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.c copies little-endian data in place: add byte swapping for this host"
#endif

#define CKPT_FORMAT "mixpar-ckpt-1"
#define CKPT_FORMAT_FAMILY "mixpar-ckpt-"
enum {
    CKPT_MAX_HEADER = 100 << 20, /* the reference implementation's limit on N */
    CKPT_MAX_DIMS = 8,
};
#define EXACT_U64 9007199254740992.0 /* 2^53: integers above this are not exact in a JSON double */

typedef unsigned long long ull; /* for printf */

/* ================================================================ atomic writes */

static ckpt_fail_stage injected_failure = CKPT_FAIL_NONE;

void ckpt_inject_failure(ckpt_fail_stage stage) { injected_failure = stage; }

/* True (with errno = EIO) when a test asked for a failure at this stage; the injection is then used up. */
static bool injected(ckpt_fail_stage stage) {
    if (injected_failure != stage) return false;
    injected_failure = CKPT_FAIL_NONE;
    errno = EIO;
    return true;
}

/* Where a writer is: its stream, the bytes written, the first error. */
typedef struct {
    FILE *f;
    uint64_t written;
    int error;           /* errno of the first failure; 0 while all is well */
    bool in_data;        /* past the header: CKPT_FAIL_WRITE applies from here */
} ckpt_out;

static bool out_write(ckpt_out *o, const void *p, size_t n) {
    if (o->error) return false;
    if (o->in_data && injected(CKPT_FAIL_WRITE)) {
        o->error = EIO;
        return false;
    }
    errno = 0;
    if (n && fwrite(p, 1, n, o->f) != n) {
        o->error = errno ? errno : EIO;
        return false;
    }
    o->written += n;
    return true;
}

typedef bool (*ckpt_write_fn)(ckpt_out *o, const void *ctx);

/* Writes `path` through a temporary file in its directory: create, write, flush, fsync, rename, fsync the
 * directory. Until the rename the old file is untouched; the rename swaps in the complete new one. On any
 * failure before it the temporary file is removed. */
static bool write_atomically(const char *path, ckpt_write_fn write_fn, const void *ctx, data_err *err) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp)
        return DATA_ERR(err, "a checkpoint path below 4080 bytes", NULL, "a path of %zu bytes", strlen(path));
    int fd = injected(CKPT_FAIL_CREATE) ? -1 : mkstemp(tmp);
    if (fd < 0)
        return DATA_ERR(err, "a writable directory for the checkpoint", "create the directory, or check its permissions",
                        "cannot create '%s': %s", tmp, strerror(errno));
    (void)fchmod(fd, 0644); /* mkstemp makes 0600; a checkpoint is an ordinary file */
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return DATA_ERR(err, "a writable checkpoint file", NULL, "cannot open '%s': %s", tmp, strerror(e));
    }
    ckpt_out o = {.f = f};
    const char *stage = "writing";
    bool ok = write_fn(&o, ctx);
    if (ok && fflush(f) != 0) ok = false, o.error = errno;
    if (ok && (injected(CKPT_FAIL_SYNC) || fsync(fd) != 0)) ok = false, o.error = errno, stage = "syncing";
    if (fclose(f) != 0 && ok) ok = false, o.error = errno;
    if (!ok) {
        unlink(tmp);
        return DATA_ERR(err, "room and a working device to write the checkpoint", "the file at the path is unchanged",
                        "%s '%s' failed after %llu bytes: %s", stage, tmp, (ull)o.written,
                        strerror(o.error ? o.error : EIO));
    }
    if (injected(CKPT_FAIL_RENAME) || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return DATA_ERR(err, "a path the checkpoint can be renamed to", "the file at the path is unchanged",
                        "renaming '%s' to '%s' failed: %s", tmp, path, strerror(e));
    }
    /* The rename is durable once the directory entry is: fsync the directory too. */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0 || fsync(dfd) != 0) {
        int e = errno;
        if (dfd >= 0) close(dfd);
        return DATA_ERR(err, "a directory that can be synced", "the new checkpoint is in place but may not survive a crash",
                        "syncing directory '%s' failed: %s", dir, strerror(e));
    }
    close(dfd);
    return true;
}

/* ================================================================ small helpers */

static void shape_text(const uint64_t *shape, int ndim, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%llu", i ? ", " : "", (ull)shape[i]);
    if (used < len) snprintf(buf + used, len - used, "]");
}

static void registry_shape(const model_tensor *t, uint64_t shape[2]) {
    shape[0] = (uint64_t)t->shape[0];
    shape[1] = t->ndim == 2 ? (uint64_t)t->shape[1] : 0;
}

/* A registry tensor is code, not input: a bad one is a bug in the caller. */
static void check_registry(const model_tensor *tensors, int ntensors, size_t floats, const char *what) {
    MP_ASSERT(ntensors >= 0 && (ntensors == 0 || tensors), "%s: registry of %d tensors", what, ntensors);
    for (int i = 0; i < ntensors; i++) {
        const model_tensor *t = &tensors[i];
        MP_ASSERT(t->name[0] && memchr(t->name, '\0', sizeof t->name), "%s: tensor %d has no name", what, i);
        MP_ASSERT(t->ndim == 1 || t->ndim == 2, "%s: tensor '%s' has %d dims", what, t->name, t->ndim);
        size_t n = (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
        MP_ASSERT(t->shape[0] >= 0 && (t->ndim == 1 || t->shape[1] >= 0) && n == t->size,
                  "%s: tensor '%s' has size %zu but its shape holds %zu", what, t->name, t->size, n);
        MP_ASSERT(t->offset <= floats && t->size <= floats - t->offset,
                  "%s: tensor '%s' at [%zu, %zu) outside a buffer of %zu floats", what, t->name, t->offset,
                  t->offset + t->size, floats);
    }
}

static void text_json_string(textbuf *t, const char *s) {
    cJSON *item = cJSON_CreateString(s);
    char *quoted = item ? cJSON_PrintUnformatted(item) : NULL;
    MP_ASSERT(quoted, "out of memory escaping a string");
    textbuf_puts(t, quoted);
    cJSON_free(quoted);
    cJSON_Delete(item);
}

/* ================================================================ saving */

/* Metadata a caller may write: non-NULL strings, each key once, and not 'format' (ours to write). */
static bool check_meta(const ckpt_meta *meta, int nmeta, data_err *err) {
    for (int i = 0; i < nmeta; i++) {
        if (!meta[i].key || !meta[i].value)
            return DATA_ERR(err, "metadata keys and values that are strings", NULL, "entry %d is NULL", i);
        if (strcmp(meta[i].key, "format") == 0)
            return DATA_ERR(err, "metadata keys other than 'format'", "ckpt_save writes 'format' itself",
                            "metadata key 'format'");
        for (int j = 0; j < i; j++)
            if (strcmp(meta[i].key, meta[j].key) == 0)
                return DATA_ERR(err, "each metadata key once", NULL, "metadata key '%s' given twice", meta[i].key);
    }
    return true;
}

/* The header's start: '{' and the metadata object; the tensor entries follow, each after a comma. */
static void header_begin(textbuf *h, const ckpt_meta *meta, int nmeta) {
    textbuf_puts(h, "{\"__metadata__\":{\"format\":\"" CKPT_FORMAT "\"");
    for (int i = 0; i < nmeta; i++) {
        textbuf_puts(h, ",");
        text_json_string(h, meta[i].key);
        textbuf_puts(h, ":");
        text_json_string(h, meta[i].value);
    }
    textbuf_puts(h, "}");
}

/* Closes the header and pads it; false (the buffer freed) when it is too big for readers. */
static bool header_end(textbuf *h, data_err *err) {
    textbuf_puts(h, "}");
    /* Spaces up to a multiple of 8, so the data (at 8 + N) is 8-byte aligned for readers that map it. */
    while (h->len % 8) textbuf_puts(h, " ");
    if (h->len <= CKPT_MAX_HEADER) return true;
    uint64_t len = h->len;
    textbuf_free(h);
    return DATA_ERR(err, "a header below 100 MB", "fewer or shorter metadata values", "a header of %llu bytes", (ull)len);
}

typedef struct {
    const model_tensor *tensors;
    int ntensors;
    const ckpt_buffer *buffers;
    int nbuffers;
    const char *header;  /* padded to a multiple of 8 */
    uint64_t header_len;
} save_job;

static bool write_safetensors(ckpt_out *o, const void *ctx) {
    const save_job *job = ctx;
    uint64_t n = job->header_len; /* little-endian host: the u64's bytes are the file's */
    if (!out_write(o, &n, 8) || !out_write(o, job->header, job->header_len)) return false;
    o->in_data = true;
    for (int b = 0; b < job->nbuffers; b++)
        for (int i = 0; i < job->ntensors; i++) {
            const model_tensor *t = &job->tensors[i];
            if (!out_write(o, job->buffers[b].data + t->offset, t->size * sizeof(float))) return false;
        }
    return true;
}

bool ckpt_save(const char *path, const model_tensor *tensors, int ntensors, const ckpt_buffer *buffers, int nbuffers,
               const ckpt_meta *meta, int nmeta, data_err *err) {
    MP_ASSERT(nbuffers >= 1 && buffers, "ckpt_save needs at least the parameter buffer");
    for (int b = 0; b < nbuffers; b++) {
        MP_ASSERT(buffers[b].prefix && buffers[b].data, "buffer %d has no prefix or data", b);
        check_registry(tensors, ntensors, buffers[b].floats, "ckpt_save");
        for (int c = 0; c < b; c++)
            MP_ASSERT(strcmp(buffers[b].prefix, buffers[c].prefix) != 0, "two buffers with prefix '%s'",
                      buffers[b].prefix);
    }
    if (!check_meta(meta, nmeta, err)) return false;

    /* The header, in registry order, buffer after buffer, every offset exact (printed as integers). */
    textbuf h = {0};
    header_begin(&h, meta, nmeta);
    uint64_t offset = 0;
    for (int b = 0; b < nbuffers; b++)
        for (int i = 0; i < ntensors; i++) {
            const model_tensor *t = &tensors[i];
            char key[256];
            int kn = snprintf(key, sizeof key, "%s%s", buffers[b].prefix, t->name);
            MP_ASSERT(kn > 0 && kn < (int)sizeof(((ckpt_entry *)0)->name), "tensor key '%s' too long", key);
            textbuf_puts(&h, ",");
            text_json_string(&h, key);
            uint64_t bytes = (uint64_t)t->size * sizeof(float);
            if (t->ndim == 2)
                textbuf_printf(&h, ":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%llu,%llu]}", t->shape[0],
                            t->shape[1], (ull)offset, (ull)(offset + bytes));
            else
                textbuf_printf(&h, ":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%llu,%llu]}", t->shape[0],
                            (ull)offset, (ull)(offset + bytes));
            offset += bytes;
        }
    if (!header_end(&h, err)) return false;
    save_job job = {tensors, ntensors, buffers, nbuffers, h.data, h.len};
    bool ok = write_atomically(path, write_safetensors, &job, err);
    textbuf_free(&h);
    return ok;
}

typedef struct {
    const ckpt_flat *tensors;
    int ntensors;
    const char *header;
    uint64_t header_len;
} flat_job;

static bool write_flat(ckpt_out *o, const void *ctx) {
    const flat_job *job = ctx;
    uint64_t n = job->header_len;
    if (!out_write(o, &n, 8) || !out_write(o, job->header, job->header_len)) return false;
    o->in_data = true;
    for (int i = 0; i < job->ntensors; i++)
        if (!out_write(o, job->tensors[i].data, job->tensors[i].floats * sizeof(float))) return false;
    return true;
}

bool ckpt_save_flat(const char *path, const ckpt_flat *tensors, int ntensors, const ckpt_meta *meta, int nmeta,
                    data_err *err) {
    for (int i = 0; i < ntensors; i++) {
        MP_ASSERT(tensors[i].name && (tensors[i].data || tensors[i].floats == 0), "flat tensor %d has no name or data", i);
        MP_ASSERT(strlen(tensors[i].name) < sizeof(((ckpt_entry *)0)->name), "tensor key '%s' too long", tensors[i].name);
        for (int j = 0; j < i; j++)
            MP_ASSERT(strcmp(tensors[i].name, tensors[j].name) != 0, "two flat tensors named '%s'", tensors[i].name);
    }
    if (!check_meta(meta, nmeta, err)) return false;
    textbuf h = {0};
    header_begin(&h, meta, nmeta);
    uint64_t offset = 0;
    for (int i = 0; i < ntensors; i++) {
        uint64_t bytes = tensors[i].floats * sizeof(float);
        textbuf_puts(&h, ",");
        text_json_string(&h, tensors[i].name);
        textbuf_printf(&h, ":{\"dtype\":\"F32\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}",
                       (ull)tensors[i].floats, (ull)offset, (ull)(offset + bytes));
        offset += bytes;
    }
    if (!header_end(&h, err)) return false;
    flat_job job = {tensors, ntensors, h.data, h.len};
    bool ok = write_atomically(path, write_flat, &job, err);
    textbuf_free(&h);
    return ok;
}

typedef struct {
    const void *bytes;
    size_t n;
} bytes_job;

static bool write_bytes(ckpt_out *o, const void *ctx) {
    const bytes_job *job = ctx;
    o->in_data = true;
    return out_write(o, job->bytes, job->n);
}

bool ckpt_write_bytes(const char *path, const void *bytes, size_t n, data_err *err) {
    bytes_job job = {bytes, n};
    return write_atomically(path, write_bytes, &job, err);
}

/* ================================================================ reading: the format */

struct ckpt_file {
    char path[4096];
    const uint8_t *map;
    uint64_t size;            /* bytes in the file */
    uint64_t data_start;      /* 8 + N */
    ckpt_entry *entries;      /* in the header's order */
    int nentries;
    int *by_name;             /* entry indices sorted by name */
    char **meta_keys, **meta_values;
    int nmeta;
};

/* safetensors' dtypes and their element sizes. */
static const struct {
    const char *name;
    unsigned bytes;
} dtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
              {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};

static unsigned dtype_bytes(const char *name) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(name, dtypes[i].name) == 0) return dtypes[i].bytes;
    return 0;
}

/* A whole number 0 .. 2^53 from JSON. */
static bool json_u64(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double x = v->valuedouble;
    if (!(x >= 0 && x <= EXACT_U64) || x != (double)(uint64_t)x) return false;
    *out = (uint64_t)x;
    return true;
}

void ckpt_close(ckpt_file *f) {
    if (!f) return;
    if (f->map) munmap((void *)f->map, f->size);
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->meta_keys);
    free(f->meta_values);
    free(f->entries);
    free(f->by_name);
    free(f);
}

/* Reports an error about file f, frees f and returns NULL. */
#define OPEN_FAIL(f, expected, hint, ...) (DATA_ERR(err, expected, hint, __VA_ARGS__), ckpt_close(f), (ckpt_file *)NULL)

/* Orders of entry indices, for qsort_r with the entries as its argument. */
static int by_begin(const void *a, const void *b, void *entries) {
    const ckpt_entry *base = entries;
    const ckpt_entry *x = &base[*(const int *)a], *y = &base[*(const int *)b];
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}
static int by_name(const void *a, const void *b, void *entries) {
    const ckpt_entry *base = entries;
    return strcmp(base[*(const int *)a].name, base[*(const int *)b].name);
}

/* One tensor entry of the header: {"dtype": ..., "shape": [...], "data_offsets": [begin, end]}. */
static bool parse_entry(const cJSON *v, ckpt_entry *e, const char *path, uint64_t data_bytes, uint64_t data_start,
                        data_err *err) {
    const char *expected = "a tensor entry {\"dtype\": \"F32\", \"shape\": [...], \"data_offsets\": [begin, end]}";
    if (strlen(v->string) >= sizeof e->name)
        return DATA_ERR(err, "tensor names below 128 bytes", NULL, "'%s': a tensor name of %zu bytes", path,
                        strlen(v->string));
    snprintf(e->name, sizeof e->name, "%s", v->string);
    if (!cJSON_IsObject(v)) return DATA_ERR(err, expected, NULL, "'%s': tensor '%s' is not an object", path, e->name);
    const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL;
    for (const cJSON *it = v->child; it; it = it->next) {
        const cJSON **slot = strcmp(it->string, "dtype") == 0 ? &dtype
                           : strcmp(it->string, "shape") == 0 ? &shape
                           : strcmp(it->string, "data_offsets") == 0 ? &offsets : NULL;
        if (!slot) return DATA_ERR(err, expected, NULL, "'%s': tensor '%s' has a field '%s'", path, e->name, it->string);
        if (*slot) return DATA_ERR(err, expected, NULL, "'%s': tensor '%s' repeats '%s'", path, e->name, it->string);
        *slot = it;
    }
    if (!dtype || !shape || !offsets)
        return DATA_ERR(err, expected, NULL, "'%s': tensor '%s' has no '%s'", path, e->name,
                        !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    unsigned elem = cJSON_IsString(dtype) && strlen(dtype->valuestring) < sizeof e->dtype ? dtype_bytes(dtype->valuestring) : 0;
    if (!elem)
        return DATA_ERR(err, "a safetensors dtype (F32, F16, BF16, ...)", NULL, "'%s': tensor '%s' has dtype %s", path,
                        e->name, cJSON_IsString(dtype) ? dtype->valuestring : "that is not a string");
    snprintf(e->dtype, sizeof e->dtype, "%s", dtype->valuestring);
    int ndim = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
    if (ndim < 0 || ndim > CKPT_MAX_DIMS)
        return DATA_ERR(err, "a shape of at most 8 whole numbers", NULL, "'%s': tensor '%s' shape is %s", path,
                        e->name, ndim < 0 ? "not an array" : "longer");
    e->ndim = ndim;
    /* Bytes = elem * product of the shape, refused before it can overflow. */
    uint64_t bytes = elem;
    int d = 0;
    for (const cJSON *it = shape->child; it; it = it->next, d++) {
        if (!json_u64(it, &e->shape[d]))
            return DATA_ERR(err, "a shape of whole numbers", NULL, "'%s': tensor '%s' shape[%d] is not one", path,
                            e->name, d);
        if (e->shape[d] && bytes > UINT64_MAX / e->shape[d])
            return DATA_ERR(err, "a tensor that fits in 2^64 bytes", NULL, "'%s': tensor '%s' shape overflows", path,
                            e->name);
        bytes *= e->shape[d];
    }
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 || !json_u64(offsets->child, &e->begin) ||
        !json_u64(offsets->child->next, &e->end) || e->begin > e->end)
        return DATA_ERR(err, "data_offsets [begin, end] with begin <= end", NULL,
                        "'%s': tensor '%s' data_offsets are not that", path, e->name);
    char sh[128];
    shape_text(e->shape, e->ndim, sh, sizeof sh);
    if (e->end - e->begin != bytes)
        return DATA_ERR(err, "data_offsets spanning dtype size x the shape's elements", NULL,
                        "'%s': tensor '%s' data_offsets [%llu, %llu] span %llu bytes, but %s %s needs %llu", path,
                        e->name, (ull)e->begin, (ull)e->end, (ull)(e->end - e->begin), e->dtype, sh, (ull)bytes);
    if (e->end > data_bytes)
        return DATA_ERR(err, "tensor data inside the file", "the file is truncated",
                        "'%s': tensor '%s' data_offsets [%llu, %llu] end at byte offset %llu, but the file ends at "
                        "byte offset %llu",
                        path, e->name, (ull)e->begin, (ull)e->end, (ull)(data_start + e->end),
                        (ull)(data_start + data_bytes));
    return true;
}

static bool parse_metadata(const cJSON *v, ckpt_file *f, data_err *err) {
    if (!cJSON_IsObject(v))
        return DATA_ERR(err, "__metadata__ as an object of strings", NULL, "'%s': __metadata__ is not an object", f->path);
    int n = cJSON_GetArraySize(v);
    f->meta_keys = calloc((size_t)n + 1, sizeof(char *));
    f->meta_values = calloc((size_t)n + 1, sizeof(char *));
    MP_ASSERT(f->meta_keys && f->meta_values, "out of memory");
    for (const cJSON *it = v->child; it; it = it->next) {
        if (!cJSON_IsString(it))
            return DATA_ERR(err, "__metadata__ values that are strings", NULL, "'%s': metadata '%s' is not a string",
                            f->path, it->string);
        for (int i = 0; i < f->nmeta; i++)
            if (strcmp(f->meta_keys[i], it->string) == 0)
                return DATA_ERR(err, "each metadata key once", NULL, "'%s': metadata '%s' appears twice", f->path,
                                it->string);
        f->meta_keys[f->nmeta] = strdup(it->string);
        f->meta_values[f->nmeta] = strdup(it->valuestring);
        MP_ASSERT(f->meta_keys[f->nmeta] && f->meta_values[f->nmeta], "out of memory");
        f->nmeta++;
    }
    const char *format = ckpt_meta_get(f, "format");
    if (format && strncmp(format, CKPT_FORMAT_FAMILY, strlen(CKPT_FORMAT_FAMILY)) == 0 && strcmp(format, CKPT_FORMAT) != 0)
        return DATA_ERR(err, "a checkpoint of format " CKPT_FORMAT, "it was written by another version of mixpar",
                        "'%s': format '%s'", f->path, format);
    return true;
}

ckpt_file *ckpt_open(const char *path, data_err *err) {
    ckpt_file *f = calloc(1, sizeof *f);
    MP_ASSERT(f, "out of memory");
    snprintf(f->path, sizeof f->path, "%s", path);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return OPEN_FAIL(f, "a readable checkpoint file", NULL, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return OPEN_FAIL(f, "a regular file", NULL, "'%s' is not one", path);
    }
    f->size = (uint64_t)st.st_size;
    if (f->size < 8) {
        close(fd);
        return OPEN_FAIL(f, "a safetensors file: an 8-byte header length, the header, the data",
                         "the file is truncated", "'%s' ends at byte offset %llu, inside the header length", path,
                         (ull)f->size);
    }
    void *map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return OPEN_FAIL(f, "a file that can be mapped", NULL, "mmap '%s': %s", path, strerror(errno));
    f->map = map;

    uint64_t n;
    memcpy(&n, f->map, 8);
    if (n == 0 || n > f->size - 8)
        return OPEN_FAIL(f, "a header length that fits in the file", "the file is truncated or not safetensors",
                         "'%s': header length %llu at byte offset 0, but only %llu bytes follow it", path, (ull)n,
                         (ull)(f->size - 8));
    if (n > CKPT_MAX_HEADER)
        return OPEN_FAIL(f, "a header below 100 MB", NULL, "'%s': header length %llu at byte offset 0", path, (ull)n);
    f->data_start = 8 + n;
    const char *text = (const char *)f->map + 8;
    if (text[0] != '{')
        return OPEN_FAIL(f, "a JSON object as the header", NULL, "'%s': byte 0x%02x at byte offset 8", path,
                         (unsigned)(uint8_t)text[0]);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, (size_t)n, &end, false);
    if (!root) {
        uint64_t at = end && end >= text && end <= text + n ? (uint64_t)(end - text) : 0;
        return OPEN_FAIL(f, "a valid JSON header", "the header is corrupt", "'%s': invalid JSON at byte offset %llu",
                         path, (ull)(8 + at));
    }
    for (const char *p = end; p < text + n; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') {
            cJSON_Delete(root);
            return OPEN_FAIL(f, "only spaces after the header's JSON", NULL, "'%s': byte 0x%02x at byte offset %llu",
                             path, (unsigned)(uint8_t)*p, (ull)(8 + (uint64_t)(p - text)));
        }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return OPEN_FAIL(f, "a JSON object as the header", NULL, "'%s': another JSON value", path);
    }

    int count = cJSON_GetArraySize(root);
    f->entries = calloc((size_t)count + 1, sizeof *f->entries);
    f->by_name = calloc((size_t)count + 1, sizeof *f->by_name);
    MP_ASSERT(f->entries && f->by_name, "out of memory for %d entries", count);
    uint64_t data_bytes = f->size - f->data_start;
    bool ok = true, seen_meta = false;
    for (const cJSON *it = root->child; ok && it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) {
            if (seen_meta) ok = DATA_ERR(err, "one __metadata__", NULL, "'%s': __metadata__ appears twice", path);
            else ok = parse_metadata(it, f, err);
            seen_meta = true;
        } else {
            ok = parse_entry(it, &f->entries[f->nentries], path, data_bytes, f->data_start, err);
            if (ok) f->nentries++;
        }
    }
    cJSON_Delete(root);
    if (!ok) {
        ckpt_close(f);
        return NULL;
    }

    /* The data must be the tensors laid end to end: sorted by offset, each begins where the last ended,
     * and the last ends at the end of the file. */
    int *order = malloc(((size_t)f->nentries + 1) * sizeof *order);
    MP_ASSERT(order, "out of memory");
    for (int i = 0; i < f->nentries; i++) order[i] = f->by_name[i] = i;
    qsort_r(order, (size_t)f->nentries, sizeof *order, by_begin, f->entries);
    qsort_r(f->by_name, (size_t)f->nentries, sizeof *f->by_name, by_name, f->entries);
    uint64_t next = 0;
    const ckpt_entry *prev = NULL;
    for (int k = 0; ok && k < f->nentries; k++) {
        const ckpt_entry *e = &f->entries[order[k]];
        if (e->begin < next)
            ok = DATA_ERR(err, "tensors whose data does not overlap", "the header is corrupt",
                          "'%s': tensor '%s' data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu] from byte "
                          "offset %llu",
                          path, e->name, (ull)e->begin, (ull)e->end, prev->name, (ull)prev->begin, (ull)prev->end,
                          (ull)(f->data_start + e->begin));
        else if (e->begin > next)
            ok = DATA_ERR(err, "tensors laid end to end, with no hole", "the header is corrupt",
                          "'%s': %llu unused bytes at byte offset %llu, before tensor '%s'", path,
                          (ull)(e->begin - next), (ull)(f->data_start + next), e->name);
        next = e->end;
        prev = e;
    }
    free(order);
    if (ok && next != data_bytes)
        ok = DATA_ERR(err, "a file that ends where its last tensor ends", "the file has bytes the header does not describe",
                      "'%s': %llu bytes after the last tensor, from byte offset %llu", path, (ull)(data_bytes - next),
                      (ull)(f->data_start + next));
    for (int k = 1; ok && k < f->nentries; k++)
        if (strcmp(f->entries[f->by_name[k]].name, f->entries[f->by_name[k - 1]].name) == 0)
            ok = DATA_ERR(err, "each tensor name once", NULL, "'%s': tensor '%s' appears twice", path,
                          f->entries[f->by_name[k]].name);
    if (!ok) {
        ckpt_close(f);
        return NULL;
    }
    return f;
}

const ckpt_entry *ckpt_entry_find(const ckpt_file *f, const char *name) {
    int lo = 0, hi = f->nentries - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const ckpt_entry *e = &f->entries[f->by_name[mid]];
        int c = strcmp(name, e->name);
        if (c == 0) return e;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

int ckpt_entry_count(const ckpt_file *f) { return f->nentries; }
const ckpt_entry *ckpt_entry_at(const ckpt_file *f, int i) {
    MP_ASSERT(i >= 0 && i < f->nentries, "entry %d of %d", i, f->nentries);
    return &f->entries[i];
}
uint64_t ckpt_data_start(const ckpt_file *f) { return f->data_start; }
uint64_t ckpt_file_bytes(const ckpt_file *f) { return f->size; }
const void *ckpt_entry_data(const ckpt_file *f, const ckpt_entry *e) { return f->map + f->data_start + e->begin; }

const char *ckpt_meta_get(const ckpt_file *f, const char *key) {
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}
int ckpt_meta_count(const ckpt_file *f) { return f->nmeta; }
ckpt_meta ckpt_meta_at(const ckpt_file *f, int i) {
    MP_ASSERT(i >= 0 && i < f->nmeta, "metadata %d of %d", i, f->nmeta);
    return (ckpt_meta){f->meta_keys[i], f->meta_values[i]};
}

bool ckpt_meta_u64(const ckpt_file *f, const char *key, uint64_t *out, data_err *err) {
    const char *v = ckpt_meta_get(f, key);
    if (!v) return DATA_ERR(err, "the metadata key in the checkpoint", NULL, "'%s' has no metadata '%s'", f->path, key);
    if (!parse_u64(v, out))
        return DATA_ERR(err, "a whole number", NULL, "'%s': metadata '%s' is \"%s\"", f->path, key, v);
    return true;
}

bool ckpt_meta_double(const ckpt_file *f, const char *key, double *out, data_err *err) {
    const char *v = ckpt_meta_get(f, key);
    if (!v) return DATA_ERR(err, "the metadata key in the checkpoint", NULL, "'%s' has no metadata '%s'", f->path, key);
    if (!parse_double(v, out))
        return DATA_ERR(err, "a number", NULL, "'%s': metadata '%s' is \"%s\"", f->path, key, v);
    return true;
}

/* ================================================================ reading: into the registry */

bool ckpt_read(const ckpt_file *f, const model_tensor *tensors, int ntensors, const ckpt_buffer *buffers, int nbuffers,
               unsigned flags, data_err *err) {
    MP_ASSERT(nbuffers >= 1 && buffers, "ckpt_read needs at least one buffer");
    for (int b = 0; b < nbuffers; b++) {
        MP_ASSERT(buffers[b].prefix && buffers[b].data, "buffer %d has no prefix or data", b);
        check_registry(tensors, ntensors, buffers[b].floats, "ckpt_read");
    }
    /* Every check first; the copy only when all pass. */
    const ckpt_entry **found = malloc(((size_t)nbuffers * (size_t)ntensors + 1) * sizeof *found);
    bool *used = calloc((size_t)f->nentries + 1, sizeof *used);
    MP_ASSERT(found && used, "out of memory");
    bool ok = true;
    for (int b = 0; ok && b < nbuffers; b++)
        for (int i = 0; ok && i < ntensors; i++) {
            const model_tensor *t = &tensors[i];
            char key[256];
            snprintf(key, sizeof key, "%s%s", buffers[b].prefix, t->name);
            const ckpt_entry *e = ckpt_entry_find(f, key);
            uint64_t want[2];
            registry_shape(t, want);
            char ws[64], fs[128];
            shape_text(want, t->ndim, ws, sizeof ws);
            if (!e) {
                ok = DATA_ERR(err, "every tensor of the model in the checkpoint",
                              "was it saved from another model or with another optimizer?",
                              "'%s': tensor '%s' %s is missing", f->path, key, ws);
                break;
            }
            shape_text(e->shape, e->ndim, fs, sizeof fs);
            if (strcmp(e->dtype, "F32") != 0)
                ok = DATA_ERR(err, "F32 tensors", "convert the checkpoint to fp32", "'%s': tensor '%s' has dtype %s",
                              f->path, key, e->dtype);
            else if (e->ndim != t->ndim || e->shape[0] != want[0] || (t->ndim == 2 && e->shape[1] != want[1]))
                ok = DATA_ERR(err, "the model's shape for each tensor", "the checkpoint is from a model of another size",
                              "'%s': tensor '%s' has shape %s in the file, %s in the model", f->path, key, fs, ws);
            found[b * ntensors + i] = e;
            used[e - f->entries] = true;
        }
    for (int k = 0; ok && !(flags & CKPT_ALLOW_EXTRA) && k < f->nentries; k++)
        if (!used[k])
            ok = DATA_ERR(err, "only the model's tensors in the checkpoint", "the checkpoint is from another model",
                          "'%s': tensor '%s' is in the file but not in the model", f->path, f->entries[k].name);
    if (ok)
        for (int b = 0; b < nbuffers; b++)
            for (int i = 0; i < ntensors; i++) {
                const ckpt_entry *e = found[b * ntensors + i];
                memcpy(buffers[b].data + tensors[i].offset, f->map + f->data_start + e->begin, e->end - e->begin);
            }
    free(found);
    free(used);
    return ok;
}

bool ckpt_load(const char *path, const model_tensor *tensors, int ntensors, const ckpt_buffer *buffers, int nbuffers,
               data_err *err) {
    ckpt_file *f = ckpt_open(path, err);
    if (!f) return false;
    bool ok = ckpt_read(f, tensors, ntensors, buffers, nbuffers, CKPT_STRICT, err);
    ckpt_close(f);
    return ok;
}

/* ================================================================ llm.c */

/* The sizes a tensor's shape is made of. */
typedef enum { LLMC_NONE, LLMC_C, LLMC_VP, LLMC_T } llmc_dim;

/* llm.c's 16 tensors, in file order: registry name, one per layer or not, shape (mult * dim, mult * dim);
 * a second dim of LLMC_NONE makes a vector. */
static const struct {
    const char *name;
    bool per_layer;
    int rows_mult;
    llmc_dim rows;
    int cols_mult;
    llmc_dim cols;
} llmc_tensors[] = {
    {"wte", false, 1, LLMC_VP, 1, LLMC_C},    {"wpe", false, 1, LLMC_T, 1, LLMC_C},
    {"ln1w", true, 1, LLMC_C, 0, LLMC_NONE},   {"ln1b", true, 1, LLMC_C, 0, LLMC_NONE},
    {"qkvw", true, 3, LLMC_C, 1, LLMC_C},      {"qkvb", true, 3, LLMC_C, 0, LLMC_NONE},
    {"attprojw", true, 1, LLMC_C, 1, LLMC_C},  {"attprojb", true, 1, LLMC_C, 0, LLMC_NONE},
    {"ln2w", true, 1, LLMC_C, 0, LLMC_NONE},   {"ln2b", true, 1, LLMC_C, 0, LLMC_NONE},
    {"fcw", true, 4, LLMC_C, 1, LLMC_C},       {"fcb", true, 4, LLMC_C, 0, LLMC_NONE},
    {"fcprojw", true, 1, LLMC_C, 4, LLMC_C},   {"fcprojb", true, 1, LLMC_C, 0, LLMC_NONE},
    {"lnfw", false, 1, LLMC_C, 0, LLMC_NONE},  {"lnfb", false, 1, LLMC_C, 0, LLMC_NONE},
};
enum { LLMC_NTENSORS = sizeof llmc_tensors / sizeof llmc_tensors[0], LLMC_HEADER_BYTES = CKPT_LLMC_HEADER_INTS * 4 };

static uint64_t llmc_dim_value(llmc_dim d, const ckpt_llmc_dims *dims) {
    switch (d) {
    case LLMC_C: return (uint64_t)dims->C;
    case LLMC_VP: return (uint64_t)dims->Vp;
    case LLMC_T: return (uint64_t)dims->maxT;
    case LLMC_NONE: break;
    }
    return 1;
}

/* Shape of one layer's slice of tensor k; returns its floats. */
static uint64_t llmc_shape(int k, const ckpt_llmc_dims *dims, uint64_t shape[2], int *ndim) {
    shape[0] = (uint64_t)llmc_tensors[k].rows_mult * llmc_dim_value(llmc_tensors[k].rows, dims);
    shape[1] = llmc_tensors[k].cols == LLMC_NONE ? 0
                                                 : (uint64_t)llmc_tensors[k].cols_mult * llmc_dim_value(llmc_tensors[k].cols, dims);
    *ndim = llmc_tensors[k].cols == LLMC_NONE ? 1 : 2;
    return shape[0] * (*ndim == 2 ? shape[1] : 1);
}

static void llmc_name(int k, int layer, char *out, size_t len) {
    if (llmc_tensors[k].per_layer) snprintf(out, len, "h.%d.%s", layer, llmc_tensors[k].name);
    else snprintf(out, len, "%s", llmc_tensors[k].name);
}

static bool llmc_dims_check(const ckpt_llmc_dims *d, const char *path, data_err *err) {
    /* Generous bounds that keep every size below 2^62 bytes. */
    if (d->maxT < 1 || d->V < 1 || d->L < 1 || d->NH < 1 || d->C < 1 || d->Vp < 1 || d->maxT > (1 << 20) ||
        d->Vp > (1 << 24) || d->L > 4096 || d->C > (1 << 20))
        return DATA_ERR(err, "llm.c dimensions maxT, V, L, NH, C, Vp >= 1 and of a plausible size", NULL,
                        "'%s': maxT %d, V %d, L %d, NH %d, C %d, Vp %d", path, d->maxT, d->V, d->L, d->NH, d->C, d->Vp);
    if (d->C % d->NH != 0)
        return DATA_ERR(err, "C a multiple of NH", NULL, "'%s': C %d, NH %d", path, d->C, d->NH);
    if (d->Vp < d->V) return DATA_ERR(err, "Vp >= V", NULL, "'%s': V %d, Vp %d", path, d->V, d->Vp);
    return true;
}

/* Every llm.c tensor in the registry with the same shape, and nothing else there. */
static bool llmc_match_registry(const model_tensor *tensors, int ntensors, const ckpt_llmc_dims *dims,
                                const model_tensor **slots, const char *path, data_err *err) {
    int matched = 0, s = 0;
    for (int k = 0; k < LLMC_NTENSORS; k++)
        for (int l = 0; l < (llmc_tensors[k].per_layer ? dims->L : 1); l++, s++) {
            char name[64];
            llmc_name(k, l, name, sizeof name);
            uint64_t shape[2];
            int ndim;
            llmc_shape(k, dims, shape, &ndim);
            const model_tensor *t = NULL;
            for (int i = 0; i < ntensors && !t; i++)
                if (strcmp(tensors[i].name, name) == 0) t = &tensors[i];
            char want[64];
            shape_text(shape, ndim, want, sizeof want);
            if (!t)
                return DATA_ERR(err, "a GPT-2 model with llm.c's tensors", "only GPT-2 models map onto llm.c's format",
                                "'%s': the model has no tensor '%s' %s", path, name, want);
            uint64_t have[2];
            registry_shape(t, have);
            char got[64];
            shape_text(have, t->ndim, got, sizeof got);
            if (t->ndim != ndim || have[0] != shape[0] || (ndim == 2 && have[1] != shape[1]))
                return DATA_ERR(err, "the model's shapes equal to the llm.c checkpoint's", NULL,
                                "'%s': tensor '%s' is %s in llm.c's layout, %s in the model", path, name, want, got);
            slots[s] = t;
            matched++;
        }
    if (matched != ntensors)
        for (int i = 0; i < ntensors; i++) {
            bool known = false;
            for (int j = 0; j < matched && !known; j++) known = slots[j] == &tensors[i];
            if (!known)
                return DATA_ERR(err, "a GPT-2 model with llm.c's tensors only", "llm.c's GPT-2 is tied, with biases",
                                "'%s': the model's tensor '%s' has no place in llm.c's format", path, tensors[i].name);
        }
    return true;
}

static int llmc_slot_count(const ckpt_llmc_dims *dims) {
    int n = 0;
    for (int k = 0; k < LLMC_NTENSORS; k++) n += llmc_tensors[k].per_layer ? dims->L : 1;
    return n;
}

/* Maps an llm.c file and checks its header; *size gets the file's bytes. */
static const uint8_t *llmc_map(const char *path, ckpt_llmc_dims *dims, uint64_t *size, data_err *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        DATA_ERR(err, "a readable llm.c checkpoint", NULL, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        DATA_ERR(err, "a regular file", NULL, "'%s' is not one", path);
        return NULL;
    }
    *size = (uint64_t)st.st_size;
    if (*size < LLMC_HEADER_BYTES) {
        close(fd);
        DATA_ERR(err, "llm.c's 1024-byte header (256 int32)", "the file is truncated",
                 "'%s' ends at byte offset %llu, inside the header", path, (ull)*size);
        return NULL;
    }
    void *map = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        DATA_ERR(err, "a file that can be mapped", NULL, "mmap '%s': %s", path, strerror(errno));
        return NULL;
    }
    int32_t h[8];
    memcpy(h, map, sizeof h);
    const char *fail = NULL;
    if (h[0] != CKPT_LLMC_MAGIC) {
        const char *hint = h[0] == 20240520 ? "that magic is an llm.c token file"
                         : h[0] == 20240527 ? "that magic is llm.c's optimizer state, not the model"
                         : h[0] == 20240327 ? "that magic is llm.c's debug state (test_gpt2)"
                                            : "not an llm.c model checkpoint";
        DATA_ERR(err, "magic 20240326 (an llm.c GPT-2 checkpoint) at byte offset 0", hint, "'%s': magic %d", path, h[0]);
        fail = "magic";
    } else if (h[1] == CKPT_LLMC_VERSION_BF16) {
        DATA_ERR(err, "version 3 (fp32) at byte offset 4", "bf16 checkpoints (version 5) are not supported yet; "
                 "write fp32 from llm.c (train_gpt2.c, or train_gpt2.cu built with PRECISION=FP32)",
                 "'%s': version 5 (bf16)", path);
        fail = "version";
    } else if (h[1] != CKPT_LLMC_VERSION_FP32) {
        DATA_ERR(err, "version 3 (fp32) at byte offset 4", NULL, "'%s': version %d", path, h[1]);
        fail = "version";
    } else {
        *dims = (ckpt_llmc_dims){.maxT = h[2], .V = h[3], .L = h[4], .NH = h[5], .C = h[6], .Vp = h[7]};
        if (!llmc_dims_check(dims, path, err)) fail = "dims";
    }
    if (fail) {
        munmap(map, *size);
        return NULL;
    }
    return map;
}

bool ckpt_llmc_read_dims(const char *path, ckpt_llmc_dims *dims, data_err *err) {
    uint64_t size;
    const uint8_t *map = llmc_map(path, dims, &size, err);
    if (!map) return false;
    munmap((void *)map, size);
    return true;
}

bool ckpt_llmc_import(const char *path, const model_tensor *tensors, int ntensors, float *params, size_t floats,
                      ckpt_llmc_dims *dims_out, data_err *err) {
    check_registry(tensors, ntensors, floats, "ckpt_llmc_import");
    ckpt_llmc_dims dims;
    uint64_t size;
    const uint8_t *map = llmc_map(path, &dims, &size, err);
    if (!map) return false;
    /* Where each slice lies in the file, and whether the file is exactly that long. */
    int nslots = llmc_slot_count(&dims);
    const model_tensor **slots = calloc((size_t)nslots, sizeof *slots);
    uint64_t *at = calloc((size_t)nslots, sizeof *at);
    MP_ASSERT(slots && at, "out of memory");
    bool ok = true;
    uint64_t offset = LLMC_HEADER_BYTES;
    for (int k = 0, s = 0; ok && k < LLMC_NTENSORS; k++)
        for (int l = 0; ok && l < (llmc_tensors[k].per_layer ? dims.L : 1); l++, s++) {
            uint64_t shape[2];
            int ndim;
            uint64_t bytes = 4 * llmc_shape(k, &dims, shape, &ndim);
            at[s] = offset;
            if (offset + bytes > size) {
                char name[64];
                llmc_name(k, l, name, sizeof name);
                ok = DATA_ERR(err, "every tensor the header describes", "the file is truncated",
                              "'%s' ends at byte offset %llu, but tensor '%s' needs bytes [%llu, %llu)", path,
                              (ull)size, name, (ull)offset, (ull)(offset + bytes));
            }
            offset += bytes;
        }
    if (ok && offset != size)
        ok = DATA_ERR(err, "a file that ends with its last tensor (lnfb)", "the header does not match the data",
                      "'%s': %llu bytes after byte offset %llu, where lnfb ends", path, (ull)(size - offset),
                      (ull)offset);
    ok = ok && llmc_match_registry(tensors, ntensors, &dims, slots, path, err);
    if (ok)
        for (int s = 0; s < nslots; s++) memcpy(params + slots[s]->offset, map + at[s], slots[s]->size * sizeof(float));
    if (ok && dims_out) *dims_out = dims;
    free(slots);
    free(at);
    munmap((void *)map, size);
    return ok;
}

typedef struct {
    const ckpt_llmc_dims *dims;
    const model_tensor **slots;
    int nslots;
    const float *params;
} llmc_job;

static bool write_llmc(ckpt_out *o, const void *ctx) {
    const llmc_job *job = ctx;
    int32_t header[CKPT_LLMC_HEADER_INTS] = {CKPT_LLMC_MAGIC, CKPT_LLMC_VERSION_FP32, job->dims->maxT, job->dims->V,
                                             job->dims->L,    job->dims->NH,          job->dims->C,    job->dims->Vp};
    if (!out_write(o, header, sizeof header)) return false;
    o->in_data = true;
    for (int s = 0; s < job->nslots; s++)
        if (!out_write(o, job->params + job->slots[s]->offset, job->slots[s]->size * sizeof(float))) return false;
    return true;
}

bool ckpt_llmc_export(const char *path, const model_tensor *tensors, int ntensors, const float *params, size_t floats,
                      const ckpt_llmc_dims *dims, data_err *err) {
    check_registry(tensors, ntensors, floats, "ckpt_llmc_export");
    if (!llmc_dims_check(dims, path, err)) return false;
    int nslots = llmc_slot_count(dims);
    const model_tensor **slots = calloc((size_t)nslots, sizeof *slots);
    MP_ASSERT(slots, "out of memory");
    llmc_job job = {dims, slots, nslots, params};
    bool ok = llmc_match_registry(tensors, ntensors, dims, slots, path, err) &&
              write_atomically(path, write_llmc, &job, err);
    free(slots);
    return ok;
}
