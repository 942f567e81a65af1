/* checkpoint.h: saving and loading training state as safetensors files, written atomically; llm.c GPT-2 import and export. */
#ifndef MIXPAR_TRAIN_CHECKPOINT_H
#define MIXPAR_TRAIN_CHECKPOINT_H

/* ---------------------------------------------------------------- the file
 * safetensors (huggingface/safetensors), all little-endian:
 *
 *   offset   bytes  field
 *        0       8  N: u64, the length of the JSON header
 *        8       N  the header: {"__metadata__": {"step": "300", ...},
 *                               "wte": {"dtype": "F32", "shape": [3072, 128], "data_offsets": [0, 1572864]}, ...}
 *                   padded with spaces so that the data starts at a multiple of 8
 *    8 + N       .  the data: each tensor's bytes at [8 + N + begin, 8 + N + end), row-major, no gaps
 *
 * A checkpoint holds one or more flat fp32 buffers laid out like the model's registry (model.h): the
 * parameters under the registry's names ("wte", "h.0.qkvw", ...), and buffers of the same length under a
 * prefix (Adam's moments as "optim.m.wte", "optim.v.wte", ...), in registry order, buffer after buffer.
 * The metadata is string to string: the resolved config (JSON text), the step, rng and data-loader state,
 * the loss scaler; ckpt_save adds "format": "mixpar-ckpt-1".
 *
 * Any safetensors reader opens these files (Python: safetensors.numpy.load_file), and ckpt_open reads any
 * safetensors file; ckpt_read then needs F32 tensors with the model's names and shapes.
 *
 * Saving is atomic: the file is written under a temporary name in the same directory, flushed, fsync'ed,
 * renamed over `path` and the directory fsync'ed, so a crash or a full disk at any moment leaves either
 * the old checkpoint or the new one at `path`, never a torn file.
 *
 * Loading validates everything before it writes a byte into the caller's buffers: the header length
 * against the file size, the JSON, each entry's dtype, shape and offsets (in bounds, matching the shape,
 * covering the data exactly with no overlap and no hole), then each expected tensor's presence, dtype and
 * shape against the registry, and tensors the model does not have. Each error names the tensor key or
 * the byte offset. The data is copied as bytes: what is loaded is bit-identical to what was saved.
 *
 * ---------------------------------------------------------------- the names (the contract with model.c)
 * A GPT-2 registry names its tensors, layer-major (one block's tensors together), with l = 0 .. L-1:
 *
 *   "wte"            (Vp, C)     token embedding (tied output head)
 *   "wpe"            (maxT, C)   position embedding
 *   "h.<l>.ln1w"     (C)         "h.<l>.ln1b"     (C)         first LayerNorm
 *   "h.<l>.qkvw"     (3*C, C)    "h.<l>.qkvb"     (3*C)       attention in-projection, q k v stacked
 *   "h.<l>.attprojw" (C, C)      "h.<l>.attprojb" (C)         attention out-projection
 *   "h.<l>.ln2w"     (C)         "h.<l>.ln2b"     (C)         second LayerNorm
 *   "h.<l>.fcw"      (4*C, C)    "h.<l>.fcb"      (4*C)       MLP up
 *   "h.<l>.fcprojw"  (C, 4*C)    "h.<l>.fcprojb"  (C)         MLP down
 *   "lnfw"           (C)         "lnfb"           (C)         final LayerNorm
 *
 * Weights are (out, in) row-major, as in llm.c. llm.c's file holds the same tensors tensor-major (all L
 * layers of ln1w, then all of ln1b, ...), so import and export move each layer's slice. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/data_err.h"
#include "model/model.h"

/* One metadata entry: both strings, as safetensors requires. */
typedef struct {
    const char *key;
    const char *value;
} ckpt_meta;

/* One flat buffer laid out like the registry: tensor t occupies data[t.offset .. t.offset + t.size). */
typedef struct {
    const char *prefix;   /* "" for the parameters, "optim.m." and "optim.v." for Adam's moments */
    float *data;          /* (floats); ckpt_save only reads it */
    size_t floats;        /* its length: at least the end of the registry's last tensor */
} ckpt_buffer;

/* Writes tensors x buffers and the metadata to `path`, atomically. Errors (the directory is missing or
 * not writable, the disk fills, a metadata key is repeated or reserved) leave any file at `path` as it
 * was. Returns false with *err filled, or exits 2 when err is NULL. */
bool ckpt_save(const char *path, const model_tensor *tensors, int ntensors, const ckpt_buffer *buffers, int nbuffers,
               const ckpt_meta *meta, int nmeta, data_err *err);

/* One 1-D F32 tensor of any length (a shard of a flat buffer, ckpt_sharded.h): no registry needed. */
typedef struct {
    const char *name;
    const float *data;
    uint64_t floats;
} ckpt_flat;

/* Writes the tensors (shape [floats] each, in this order) and the metadata to `path`, atomically, as
 * ckpt_save does; the same errors. */
bool ckpt_save_flat(const char *path, const ckpt_flat *tensors, int ntensors, const ckpt_meta *meta, int nmeta,
                    data_err *err);

/* Writes bytes to `path` with ckpt_save's atomic sequence (temporary file, fsync, rename, fsync of the
 * directory): for the small text files that go with checkpoints (a sharded checkpoint's index). */
bool ckpt_write_bytes(const char *path, const void *bytes, size_t n, data_err *err);

/* ---------------------------------------------------------------- reading */

/* One tensor entry of an open file. */
typedef struct {
    char name[128];
    char dtype[8];        /* "F32", "BF16", ... */
    int ndim;             /* 0 .. 8 */
    uint64_t shape[8];
    uint64_t begin, end;  /* byte offsets into the data, which starts at data_start in the file */
} ckpt_entry;

typedef struct ckpt_file ckpt_file;

/* Maps a safetensors file and validates its layout (see above). NULL with *err filled (or exit 2). */
ckpt_file *ckpt_open(const char *path, data_err *err);
void ckpt_close(ckpt_file *f); /* NULL is fine */

enum {
    CKPT_STRICT = 0,            /* every tensor of the file must be one the caller asked for */
    CKPT_ALLOW_EXTRA = 1 << 0,  /* ignore tensors the caller did not ask for (load parameters alone from
                                 * a checkpoint that also holds optimizer state) */
};

/* Checks that the file holds every buffer's tensors (prefix + registry name) as F32 with the registry's
 * shapes, and (unless CKPT_ALLOW_EXTRA) nothing else; then, and only then, copies them in. */
bool ckpt_read(const ckpt_file *f, const model_tensor *tensors, int ntensors, const ckpt_buffer *buffers, int nbuffers,
               unsigned flags, data_err *err);

/* Open, read strictly, close. */
bool ckpt_load(const char *path, const model_tensor *tensors, int ntensors, const ckpt_buffer *buffers, int nbuffers,
               data_err *err);

/* Metadata: the value of a key, or NULL when the file has none. */
const char *ckpt_meta_get(const ckpt_file *f, const char *key);
int ckpt_meta_count(const ckpt_file *f);
ckpt_meta ckpt_meta_at(const ckpt_file *f, int i);
/* A metadata value as a whole number or a double ("300", "0.5"); false with *err filled (exit 2 when
 * err is NULL) when the key is missing or the value is not one. */
bool ckpt_meta_u64(const ckpt_file *f, const char *key, uint64_t *out, data_err *err);
bool ckpt_meta_double(const ckpt_file *f, const char *key, double *out, data_err *err);

int ckpt_entry_count(const ckpt_file *f);
const ckpt_entry *ckpt_entry_at(const ckpt_file *f, int i);       /* in the header's order */
const ckpt_entry *ckpt_entry_find(const ckpt_file *f, const char *name); /* NULL when absent */
uint64_t ckpt_data_start(const ckpt_file *f);                     /* 8 + N */
uint64_t ckpt_file_bytes(const ckpt_file *f);
/* The bytes of an entry, in the mapped file (valid until ckpt_close). */
const void *ckpt_entry_data(const ckpt_file *f, const ckpt_entry *e);

/* ---------------------------------------------------------------- llm.c's GPT-2 checkpoints
 * llm.c (train_gpt2.c) writes a header of 256 little-endian int32 then the tensors:
 *   [0] magic 20240326, [1] version (3: fp32; 5: bf16), [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp;
 *   tensors in the order wte (Vp, C), wpe (maxT, C), ln1w (L, C), ln1b (L, C), qkvw (L, 3C, C), qkvb (L, 3C),
 *   attprojw (L, C, C), attprojb (L, C), ln2w (L, C), ln2b (L, C), fcw (L, 4C, C), fcb (L, 4C),
 *   fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C). */
enum { CKPT_LLMC_MAGIC = 20240326, CKPT_LLMC_VERSION_FP32 = 3, CKPT_LLMC_VERSION_BF16 = 5, CKPT_LLMC_HEADER_INTS = 256 };

typedef struct {
    int maxT, V, L, NH, C, Vp;
} ckpt_llmc_dims;

/* Reads and checks the header only: what a caller needs to build the model before importing. */
bool ckpt_llmc_read_dims(const char *path, ckpt_llmc_dims *dims, data_err *err);
/* Copies an llm.c fp32 checkpoint into params (laid out by the registry, which must hold exactly the GPT-2
 * names above with the file's shapes). Version 5 (bf16) is refused; a short file is refused with the byte
 * offset where it ends and the tensor that needed more. params is untouched on any error. */
bool ckpt_llmc_import(const char *path, const model_tensor *tensors, int ntensors, float *params, size_t floats,
                      ckpt_llmc_dims *dims, data_err *err);
/* Writes params as an llm.c version 3 checkpoint (atomically), readable by llm.c's train_gpt2.c. */
bool ckpt_llmc_export(const char *path, const model_tensor *tensors, int ntensors, const float *params, size_t floats,
                      const ckpt_llmc_dims *dims, data_err *err);

/* ---------------------------------------------------------------- for tests
 * Makes the next atomic write fail at one stage, as a full disk or a failing device would, so tests can
 * check that the old file survives a failure at each stage. The injection is used once, then cleared. */
typedef enum {
    CKPT_FAIL_NONE,
    CKPT_FAIL_CREATE,   /* creating the temporary file */
    CKPT_FAIL_WRITE,    /* the first write after the header */
    CKPT_FAIL_SYNC,     /* fsync of the temporary file */
    CKPT_FAIL_RENAME,   /* the rename over the old file */
} ckpt_fail_stage;
void ckpt_inject_failure(ckpt_fail_stage stage);

#endif
