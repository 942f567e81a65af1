/* ckpt_sharded.h: checkpoints of sharded runs (ZeRO, FSDP, dp x tp x pp meshes): one file per rank plus an index, loadable on another world size. */
#ifndef MIXPAR_TRAIN_CKPT_SHARDED_H
#define MIXPAR_TRAIN_CKPT_SHARDED_H

/* ---------------------------------------------------------------- the idea
 * A sharded run keeps each flat buffer (the parameters, Adam's m and v, an fp32 master copy) split over
 * its ranks: rank r holds some ranges [offset, offset + n) of every buffer, the same ranges for each
 * buffer, its pieces laid end to end in range order. Gathering all of that to rank 0 to write one file
 * costs rank 0 the memory of the whole model state and serialises the write; DeepSpeed and PyTorch's
 * distributed checkpoints write one file per rank instead. The complaint about those is that they load
 * only on the world size that wrote them. Here the index records which ranges each file holds, so a
 * reader asks for ITS ranges, whatever they are (another world size, another ZeRO stage, FSDP, one
 * process), and gets them from whichever files hold them: resharding is a range intersection. A tensor-
 * and pipeline-parallel run writes the same format, its slices expressed as ranges of the whole model's
 * buffer (train/mp_checkpoint.h), so it too reshards by range reads.
 *
 * ---------------------------------------------------------------- the directory
 *   DIR/index.json                           written last, by rank 0
 *   DIR/rank-00000-of-00004.safetensors      rank 0's pieces: one 1-D F32 tensor per buffer, named
 *   DIR/rank-00001-of-00004.safetensors      "params", "optim.m", "optim.v", "master", ... each of
 *   ...                                      length sum(n) over that rank's ranges
 *
 * index.json:
 *   {"format": "mixpar-sharded-1", "world": 4, "total": 1234567,
 *    "buffers": ["params", "optim.m", "optim.v"],
 *    "metadata": {"step": "30", "config": "{...}", "loader_epoch": "0", ...},   (as a single file's)
 *    "shards": [{"rank": 0, "file": "rank-00000-of-00004.safetensors", "bytes": 4938200,
 *                "sha256": "9f86d0...", "floats": 308640, "ranges": [[0, 308640]]}, ...]}
 *
 * "total" is the length of every flat buffer; the shards' ranges together cover [0, total) exactly once.
 * A shard file is an ordinary safetensors file (ckpt_open, `mixpar checkpoint info`, Python's
 * safetensors all read it); its metadata repeats the rank and world.
 *
 * ---------------------------------------------------------------- atomic saves
 * A crash at any moment leaves the previous complete checkpoint loadable:
 *   1. rank 0 empties DIR.tmp (files a crashed save left there) and creates it; a broadcast of the
 *      outcome is the barrier that lets the others write;
 *   2. every rank writes its shard into DIR.tmp (each file itself atomic and fsync'ed), then hashes it;
 *   3. the ranks' outcomes, ranges, sizes and hashes are all-gathered; if any rank failed, nobody goes on;
 *   4. rank 0 writes DIR.tmp/index.json (atomic, fsync'ed) and fsyncs DIR.tmp;
 *   5. rank 0 swaps DIR.tmp and DIR with one renameat2(RENAME_EXCHANGE), fsyncs the parent, and removes
 *      DIR.tmp (now the old checkpoint). The first save renames DIR.tmp to DIR. Where the file system
 *      cannot exchange, DIR is renamed to DIR.old, DIR.tmp to DIR, then DIR.old removed; a reader that
 *      finds no DIR but a DIR.old with an index (a crash between those renames) loads DIR.old;
 *   6. the outcome is broadcast, so every rank returns the same answer.
 * Until step 5 DIR is untouched; after it DIR is the complete new checkpoint. A DIR without index.json is
 * never a checkpoint.
 *
 * ---------------------------------------------------------------- loading
 * ckpt_sharded_open validates before anything is copied: the index's JSON and every field, the ranges
 * (inside [0, total), each float in exactly one shard: a hole or an overlap is named with its offset),
 * every shard file present, of the size the index says, with each buffer as an F32 tensor [floats].
 * ckpt_sharded_read then checks the caller's ranges and buffers against it, verifies the sha256 of each
 * shard it will read from, and only then copies. Errors name the directory, the shard file and what is
 * wrong, and stop with exit 2 when err is NULL. The copies are bytes: a reload is bit-identical.
 *
 * ---------------------------------------------------------------- usage
 * Saving, on every rank of a sharded run (ranges: this rank's; data: its pieces, concatenated):
 *
 *     ckpt_range mine[] = {{0, 1000}, {5000, 24}};
 *     ckpt_shard_buffer bufs[] = {{"params", params_shard}, {"optim.m", m}, {"optim.v", v}};
 *     ckpt_meta meta[] = {{"step", "30"}, {"config", config_json}};
 *     ckpt_sharded_save("run/checkpoint.sharded", comm, total, mine, 2, bufs, 3, meta, 2, NULL);
 *
 * Loading, on every rank, with this run's ranges (any layout):
 *
 *     ckpt_sharded *ck = ckpt_sharded_open("run/checkpoint.sharded", NULL);
 *     ckpt_sharded_check_buffers(ck, (const char *[]){"params", "optim.m", "optim.v"}, 3, NULL);
 *     ckpt_sharded_read_all(ck, comm, total, mine, nmine, bufs, 3, NULL);   (collective: all agree)
 *     step = ckpt_sharded_meta_get(ck, "step"); ...
 *     ckpt_sharded_close(ck);
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "data/data_err.h"
#include "train/checkpoint.h"

#define CKPT_SHARDED_FORMAT "mixpar-sharded-1"
#define CKPT_SHARDED_INDEX "index.json"

/* A piece of a flat buffer: floats [offset, offset + n). */
typedef struct {
    size_t offset, n;
} ckpt_range;

/* One buffer's data for a list of ranges: the pieces laid end to end in range order (sum of n floats). */
typedef struct {
    const char *name;   /* "params", "optim.m", "optim.v", "master": letters, digits, '.', '_' */
    float *data;        /* saving only reads it */
} ckpt_shard_buffer;

/* ---------------------------------------------------------------- range algebra
 * Pure functions, no files: what the loader checks and uses, exposed for tests and engines. */

/* Floats in a list of ranges (the length of a buffer's data for them). */
size_t ckpt_ranges_floats(const ckpt_range *r, int n);

/* Merges neighbours that continue each other (r[i].offset + r[i].n == r[i+1].offset) and drops empty
 * ranges, in place, keeping the order (so the concatenated data is unchanged); returns the new count. */
int ckpt_ranges_coalesce(ckpt_range *r, int n);

/* Checks that ranges of several lists (list k: lists[k], counts[k]) cover [0, total) exactly once; on
 * failure *err names the first float in a hole or in two lists ("floats [a, b) are in no shard",
 * "floats [a, b) are in shards 1 and 3") or a range past total. `what` names a list in messages
 * ("shard" for a checkpoint's ranks). */
bool ckpt_ranges_partition(const ckpt_range *const *lists, const int *counts, int nlists, size_t total,
                           const char *what, data_err *err);

/* ---------------------------------------------------------------- saving */

/* Collective over c (NULL: this process alone, rank 0 of 1): writes this rank's pieces of every buffer
 * and, once all ranks have, the index; atomically as described above. Every rank passes the same total,
 * buffer names (in the same order) and metadata (rank 0's is written); ranges are this rank's, in the
 * order of the data. Returns the same on every rank: false with *err filled (or exit 2 when err is NULL)
 * when any rank failed, naming it; DIR is then as it was. */
bool ckpt_sharded_save(const char *dir, comm_t *c, size_t total, const ckpt_range *ranges, int nranges,
                       const ckpt_shard_buffer *buffers, int nbuffers, const ckpt_meta *meta, int nmeta,
                       data_err *err);

/* The two halves of ckpt_sharded_save without a communicator, for tests and tools that write every
 * rank's shard from one process. write_shard writes rank `rank` of `world`'s file into tmpdir (which must
 * exist) and fills *out; commit writes tmpdir's index from all world outs (in rank order) and swaps
 * tmpdir into dir. */
typedef struct {
    char file[64];        /* "rank-00001-of-00004.safetensors" */
    uint64_t bytes;       /* the file's size */
    char sha256[65];      /* its digest, hex */
    ckpt_range *ranges;   /* coalesced, malloc'd: free with ckpt_shard_info_free */
    int nranges;
} ckpt_shard_info;

bool ckpt_sharded_write_shard(const char *tmpdir, int rank, int world, const ckpt_range *ranges, int nranges,
                              const ckpt_shard_buffer *buffers, int nbuffers, ckpt_shard_info *out, data_err *err);
bool ckpt_sharded_commit(const char *dir, const char *tmpdir, size_t total, const char *const *buffer_names,
                         int nbuffers, const ckpt_shard_info *shards, int world, const ckpt_meta *meta, int nmeta,
                         data_err *err);
void ckpt_shard_info_free(ckpt_shard_info *s);

/* ---------------------------------------------------------------- loading */

typedef struct ckpt_sharded ckpt_sharded;

/* Reads and validates DIR/index.json and every shard file's header (above); local, no communication.
 * NULL with *err filled (or exit 2). */
ckpt_sharded *ckpt_sharded_open(const char *dir, data_err *err);
void ckpt_sharded_close(ckpt_sharded *s); /* NULL is fine */

/* True when path is a directory with an index.json (or, after a crash mid-swap, only path.old has one):
 * what a reader tests to choose between a sharded checkpoint and a single file. */
bool ckpt_sharded_is_dir(const char *path);

/* Fails (naming both lists) unless the checkpoint holds exactly these buffers, in any order. */
bool ckpt_sharded_check_buffers(const ckpt_sharded *s, const char *const *names, int n, data_err *err);

/* Local: fills each buffer's data with the checkpoint's floats at the caller's ranges (any ranges inside
 * [0, total), in any order, pieces concatenated in that order), reading the intersecting pieces of
 * whichever shards hold them. total must be the checkpoint's (a model of another size is refused); a
 * buffer the checkpoint lacks is refused. Checks everything, including the sha256 of each shard it reads
 * from, before it writes a byte. */
bool ckpt_sharded_read(const ckpt_sharded *s, size_t total, const ckpt_range *ranges, int nranges,
                       const ckpt_shard_buffer *buffers, int nbuffers, data_err *err);
/* Checks shard r's sha256 against the index (once; reads remember it). What a read does first for each
 * shard it touches; `mixpar checkpoint info` does it for all. */
bool ckpt_sharded_verify(const ckpt_sharded *s, int r, data_err *err);
/* Collective ckpt_sharded_read: every rank reads its ranges, then all agree, so a shard that one rank
 * finds corrupt stops every rank (exit 2 or false everywhere) rather than leaving the others waiting. */
bool ckpt_sharded_read_all(const ckpt_sharded *s, comm_t *c, size_t total, const ckpt_range *ranges, int nranges,
                           const ckpt_shard_buffer *buffers, int nbuffers, data_err *err);

/* What the index says. */
const char *ckpt_sharded_dir(const ckpt_sharded *s);          /* the directory read (DIR, or DIR.old) */
int ckpt_sharded_world(const ckpt_sharded *s);
size_t ckpt_sharded_total(const ckpt_sharded *s);
int ckpt_sharded_buffer_count(const ckpt_sharded *s);
const char *ckpt_sharded_buffer_name(const ckpt_sharded *s, int i);
/* Shard r's file name, size and ranges (*n of them; valid until close). */
const ckpt_shard_info *ckpt_sharded_shard(const ckpt_sharded *s, int r);
/* Metadata (as in checkpoint.h): NULL when absent. */
const char *ckpt_sharded_meta_get(const ckpt_sharded *s, const char *key);
int ckpt_sharded_meta_count(const ckpt_sharded *s);
ckpt_meta ckpt_sharded_meta_at(const ckpt_sharded *s, int i);
bool ckpt_sharded_meta_u64(const ckpt_sharded *s, const char *key, uint64_t *out, data_err *err);

#endif
