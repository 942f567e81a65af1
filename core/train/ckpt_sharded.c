/* ckpt_sharded.c: sharded checkpoints: range algebra, per-rank shard files, the index, the atomic directory swap, validated resharding loads. */
#include "train/ckpt_sharded.h"

#include "base/error.h"
#include "base/parse.h"
#include "data/sha256.h"
#include "data/textbuf.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef unsigned long long ull; /* for printf */

#define FORMAT_FAMILY "mixpar-sharded-"
enum {
    MAX_WORLD = 1 << 20,
    MAX_BUFFERS = 16,
    MAX_INDEX_BYTES = 1 << 30, /* the config and a few ranges per rank: far below this */
};
#define EXACT_U64 9007199254740992.0 /* 2^53: integers above this are not exact in a JSON double */

/* ================================================================ range algebra */

size_t ckpt_ranges_floats(const ckpt_range *r, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += r[i].n;
    return total;
}

int ckpt_ranges_coalesce(ckpt_range *r, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].n == 0) continue;
        if (k > 0 && r[k - 1].offset + r[k - 1].n == r[i].offset) r[k - 1].n += r[i].n;
        else r[k++] = r[i];
    }
    return k;
}

/* A range and the list it came from, for sorting. */
typedef struct {
    size_t offset, n;
    int list;
} tagged_range;

static int by_offset(const void *a, const void *b) {
    const tagged_range *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->list < y->list ? -1 : x->list > y->list;
}

bool ckpt_ranges_partition(const ckpt_range *const *lists, const int *counts, int nlists, size_t total,
                           const char *what, data_err *err) {
    size_t count = 0;
    for (int k = 0; k < nlists; k++) count += (size_t)counts[k];
    tagged_range *all = malloc((count + 1) * sizeof *all);
    MP_ASSERT(all, "out of memory");
    size_t m = 0;
    bool ok = true;
    for (int k = 0; ok && k < nlists; k++)
        for (int i = 0; ok && i < counts[k]; i++) {
            const ckpt_range *r = &lists[k][i];
            if (r->offset > total || r->n > total - r->offset)
                ok = DATA_ERR(err, "ranges inside [0, total)", NULL, "%s %d has floats [%llu, %llu), past total %llu",
                              what, k, (ull)r->offset, (ull)r->offset + (ull)r->n, (ull)total);
            else if (r->n) all[m++] = (tagged_range){r->offset, r->n, k};
        }
    if (ok) qsort(all, m, sizeof *all, by_offset);
    size_t covered = 0; /* [0, covered) is covered exactly once so far */
    for (size_t i = 0; ok && i < m; i++) {
        if (all[i].offset > covered)
            ok = DATA_ERR(err, "ranges covering every float of the buffers exactly once", NULL,
                          "floats [%llu, %llu) are in no %s", (ull)covered, (ull)all[i].offset, what);
        else if (all[i].offset < covered) {
            size_t end = all[i].offset + all[i].n < covered ? all[i].offset + all[i].n : covered;
            ok = DATA_ERR(err, "ranges covering every float of the buffers exactly once", NULL,
                          "floats [%llu, %llu) are in %ss %d and %d", (ull)all[i].offset, (ull)end, what,
                          all[i - 1].list, all[i].list);
        }
        covered = all[i].offset + all[i].n;
    }
    if (ok && covered != total)
        ok = DATA_ERR(err, "ranges covering every float of the buffers exactly once", NULL,
                      "floats [%llu, %llu) are in no %s (the ranges end at %llu, total is %llu)", (ull)covered,
                      (ull)total, what, (ull)covered, (ull)total);
    free(all);
    return ok;
}

/* ================================================================ small helpers */

static bool buffer_name_ok(const char *name) {
    if (!name || !*name || strlen(name) >= 48) return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '_'))
            return false;
    return true;
}

static void shard_file_name(int rank, int world, char out[64]) {
    snprintf(out, 64, "rank-%05d-of-%05d.safetensors", rank, world);
}

static void join(char *out, size_t len, const char *dir, const char *name) { snprintf(out, len, "%s/%s", dir, name); }

static void json_string(textbuf *t, const char *s) {
    cJSON *item = cJSON_CreateString(s);
    char *quoted = item ? cJSON_PrintUnformatted(item) : NULL;
    MP_ASSERT(quoted, "out of memory escaping a string");
    textbuf_puts(t, quoted);
    cJSON_free(quoted);
    cJSON_Delete(item);
}

static bool fsync_path(const char *path, data_err *err) {
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return DATA_ERR(err, "a directory that can be synced", NULL, "syncing '%s' failed: %s", path, strerror(e));
    }
    close(fd);
    return true;
}

/* The parent of path, for the fsync that makes a rename durable. */
static void parent_of(const char *path, char *out, size_t len) {
    snprintf(out, len, "%s", path);
    char *slash = strrchr(out, '/');
    while (slash && slash > out && slash[1] == '\0') { /* "dir/" */
        *slash = '\0';
        slash = strrchr(out, '/');
    }
    if (!slash) snprintf(out, len, ".");
    else if (slash == out) out[1] = '\0';
    else *slash = '\0';
}

/* Removes a checkpoint directory: its files, then itself. It holds only files (shards, the index,
 * temporaries of an interrupted write); anything else is not ours to delete. */
static bool remove_checkpoint_dir(const char *dir, data_err *err) {
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return true;
        return DATA_ERR(err, "a checkpoint directory that can be listed", NULL, "cannot open '%s': %s", dir,
                        strerror(errno));
    }
    bool ok = true;
    for (struct dirent *e; ok && (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[4200];
        join(path, sizeof path, dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            ok = DATA_ERR(err, "only checkpoint files in a checkpoint directory", "move it away, or remove it yourself",
                          "'%s' is not a regular file; not removing '%s'", path, dir);
        else if (unlink(path) != 0)
            ok = DATA_ERR(err, "a checkpoint directory whose files can be removed", NULL, "cannot remove '%s': %s", path,
                          strerror(errno));
    }
    closedir(d);
    if (ok && rmdir(dir) != 0)
        ok = DATA_ERR(err, "a checkpoint directory that can be removed", NULL, "cannot remove '%s': %s", dir,
                      strerror(errno));
    return ok;
}

static void without_trailing_slash(const char *path, char *out, size_t len) {
    snprintf(out, len, "%s", path);
    for (size_t n = strlen(out); n > 1 && out[n - 1] == '/'; n--) out[n - 1] = '\0';
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool has_index(const char *dir) {
    char path[4200];
    join(path, sizeof path, dir, CKPT_SHARDED_INDEX);
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ================================================================ saving */

void ckpt_shard_info_free(ckpt_shard_info *s) {
    if (!s) return;
    free(s->ranges);
    s->ranges = NULL;
    s->nranges = 0;
}

static void check_buffers_arg(const ckpt_shard_buffer *buffers, int nbuffers) {
    MP_ASSERT(nbuffers >= 1 && nbuffers <= MAX_BUFFERS && buffers, "a sharded checkpoint holds 1 to %d buffers",
              MAX_BUFFERS);
    for (int b = 0; b < nbuffers; b++) {
        MP_ASSERT(buffer_name_ok(buffers[b].name), "buffer %d's name '%s' is not letters, digits, '.', '_'", b,
                  buffers[b].name ? buffers[b].name : "(null)");
        for (int c = 0; c < b; c++)
            MP_ASSERT(strcmp(buffers[b].name, buffers[c].name) != 0, "two buffers named '%s'", buffers[b].name);
    }
}

bool ckpt_sharded_write_shard(const char *tmpdir, int rank, int world, const ckpt_range *ranges, int nranges,
                              const ckpt_shard_buffer *buffers, int nbuffers, ckpt_shard_info *out, data_err *err) {
    check_buffers_arg(buffers, nbuffers);
    MP_ASSERT(rank >= 0 && rank < world && world <= MAX_WORLD, "rank %d of %d", rank, world);
    MP_ASSERT(nranges >= 0 && (ranges || nranges == 0), "no ranges");
    memset(out, 0, sizeof *out);
    size_t floats = ckpt_ranges_floats(ranges, nranges);
    ckpt_flat tensors[MAX_BUFFERS];
    for (int b = 0; b < nbuffers; b++) {
        MP_ASSERT(buffers[b].data || floats == 0, "buffer '%s' has no data", buffers[b].name);
        tensors[b] = (ckpt_flat){buffers[b].name, buffers[b].data, floats};
    }
    char rank_s[16], world_s[16];
    snprintf(rank_s, sizeof rank_s, "%d", rank);
    snprintf(world_s, sizeof world_s, "%d", world);
    ckpt_meta meta[] = {{"shard_rank", rank_s}, {"shard_world", world_s}};
    shard_file_name(rank, world, out->file);
    char path[4200];
    join(path, sizeof path, tmpdir, out->file);
    if (!ckpt_save_flat(path, tensors, nbuffers, meta, 2, err)) return false;
    struct stat st;
    if (stat(path, &st) != 0)
        return DATA_ERR(err, "the shard just written", NULL, "cannot stat '%s': %s", path, strerror(errno));
    out->bytes = (uint64_t)st.st_size;
    if (sha256_file_hex(path, out->sha256) != 0)
        return DATA_ERR(err, "the shard just written, readable", NULL, "cannot read '%s': %s", path, strerror(errno));
    out->ranges = malloc(((size_t)nranges + 1) * sizeof *out->ranges);
    MP_ASSERT(out->ranges, "out of memory");
    if (nranges) memcpy(out->ranges, ranges, (size_t)nranges * sizeof *ranges);
    out->nranges = ckpt_ranges_coalesce(out->ranges, nranges);
    return true;
}

/* index.json's text: fields one to a line, a shard per line, so a person can read and diff it. */
static void index_text(textbuf *t, size_t total, const char *const *names, int nbuffers, const ckpt_shard_info *shards,
                       int world, const ckpt_meta *meta, int nmeta) {
    textbuf_printf(t, "{\n  \"format\": \"%s\",\n  \"world\": %d,\n  \"total\": %llu,\n  \"buffers\": [",
                   CKPT_SHARDED_FORMAT, world, (ull)total);
    for (int b = 0; b < nbuffers; b++) {
        if (b) textbuf_puts(t, ", ");
        json_string(t, names[b]);
    }
    textbuf_puts(t, "],\n  \"metadata\": {");
    for (int i = 0; i < nmeta; i++) {
        textbuf_puts(t, i ? ",\n    " : "\n    ");
        json_string(t, meta[i].key);
        textbuf_puts(t, ": ");
        json_string(t, meta[i].value);
    }
    textbuf_puts(t, nmeta ? "\n  },\n  \"shards\": [" : "},\n  \"shards\": [");
    for (int r = 0; r < world; r++) {
        const ckpt_shard_info *s = &shards[r];
        textbuf_printf(t, "%s\n    {\"rank\": %d, \"file\": \"%s\", \"bytes\": %llu, \"sha256\": \"%s\", \"floats\": %llu, "
                          "\"ranges\": [",
                       r ? "," : "", r, s->file, (ull)s->bytes, s->sha256, (ull)ckpt_ranges_floats(s->ranges, s->nranges));
        for (int i = 0; i < s->nranges; i++)
            textbuf_printf(t, "%s[%llu, %llu]", i ? ", " : "", (ull)s->ranges[i].offset, (ull)s->ranges[i].n);
        textbuf_puts(t, "]}");
    }
    textbuf_puts(t, "\n  ]\n}\n");
}

/* Puts the complete tmpdir where dir was (see the header: exchange, or two renames). */
static bool swap_into_place(const char *dir, const char *tmpdir, data_err *err) {
    char parent[4096];
    parent_of(dir, parent, sizeof parent);
    if (!is_dir(dir)) {
        if (rename(tmpdir, dir) != 0)
            return DATA_ERR(err, "a checkpoint directory that can be renamed into place", NULL,
                            "renaming '%s' to '%s' failed: %s", tmpdir, dir, strerror(errno));
        return fsync_path(parent, err);
    }
    if (renameat2(AT_FDCWD, tmpdir, AT_FDCWD, dir, RENAME_EXCHANGE) == 0) {
        /* dir is the new checkpoint; tmpdir the old one, which nothing needs any more. */
        return fsync_path(parent, err) && remove_checkpoint_dir(tmpdir, err);
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return DATA_ERR(err, "a checkpoint directory that can be swapped into place", NULL,
                        "exchanging '%s' and '%s' failed: %s", tmpdir, dir, strerror(errno));
    /* No exchange on this file system: two renames; between them a reader falls back to dir.old. */
    char old[4200];
    snprintf(old, sizeof old, "%s.old", dir);
    if (!remove_checkpoint_dir(old, err)) return false;
    if (rename(dir, old) != 0)
        return DATA_ERR(err, "a checkpoint directory that can be renamed", NULL, "renaming '%s' to '%s' failed: %s", dir,
                        old, strerror(errno));
    if (rename(tmpdir, dir) != 0)
        return DATA_ERR(err, "a checkpoint directory that can be renamed into place", "the previous checkpoint is in DIR.old",
                        "renaming '%s' to '%s' failed: %s", tmpdir, dir, strerror(errno));
    return fsync_path(parent, err) && remove_checkpoint_dir(old, err);
}

static bool check_sharded_meta(const ckpt_meta *meta, int nmeta, data_err *err) {
    for (int i = 0; i < nmeta; i++) {
        if (!meta[i].key || !meta[i].value)
            return DATA_ERR(err, "metadata keys and values that are strings", NULL, "entry %d is NULL", i);
        if (strcmp(meta[i].key, "format") == 0)
            return DATA_ERR(err, "metadata keys other than 'format'", "the single file consolidated from it has its own",
                            "metadata key 'format'");
        for (int j = 0; j < i; j++)
            if (strcmp(meta[i].key, meta[j].key) == 0)
                return DATA_ERR(err, "each metadata key once", NULL, "metadata key '%s' given twice", meta[i].key);
    }
    return true;
}

bool ckpt_sharded_commit(const char *dir, const char *tmpdir, size_t total, const char *const *buffer_names,
                         int nbuffers, const ckpt_shard_info *shards, int world, const ckpt_meta *meta, int nmeta,
                         data_err *err) {
    MP_ASSERT(world >= 1 && world <= MAX_WORLD && nbuffers >= 1 && nbuffers <= MAX_BUFFERS, "world %d, %d buffers",
              world, nbuffers);
    if (!check_sharded_meta(meta, nmeta, err)) return false;
    /* What is written must load: the ranges must partition [0, total). */
    const ckpt_range **lists = malloc((size_t)world * sizeof *lists);
    int *counts = malloc((size_t)world * sizeof *counts);
    MP_ASSERT(lists && counts, "out of memory");
    for (int r = 0; r < world; r++) {
        lists[r] = shards[r].ranges;
        counts[r] = shards[r].nranges;
    }
    bool ok = ckpt_ranges_partition(lists, counts, world, total, "shard", err);
    free(lists);
    free(counts);
    if (!ok) return false;
    textbuf t = {0};
    index_text(&t, total, buffer_names, nbuffers, shards, world, meta, nmeta);
    char path[4200];
    join(path, sizeof path, tmpdir, CKPT_SHARDED_INDEX);
    ok = ckpt_write_bytes(path, t.data, t.len, err) && fsync_path(tmpdir, err) && swap_into_place(dir, tmpdir, err);
    textbuf_free(&t);
    return ok;
}

/* Empties (or creates) tmpdir for a new save. */
static bool prepare_tmpdir(const char *tmpdir, data_err *err) {
    if (!remove_checkpoint_dir(tmpdir, err)) return false;
    if (mkdir(tmpdir, 0755) != 0)
        return DATA_ERR(err, "a directory where the checkpoint can be written", "create the run directory, or check its "
                        "permissions", "cannot create '%s': %s", tmpdir, strerror(errno));
    return true;
}

/* One int64 from rank 0 to all (a barrier too); without a communicator, the value itself. */
static int64_t from_rank0(comm_t *c, int64_t v) {
    if (c) comm_broadcast(c, &v, 1, COMM_INT64, 0, COMM_ALGO_NATIVE);
    return v;
}

/* A rank that did not fail itself reports the one that did. */
static bool other_rank_failed(data_err *mine, int rank, const char *what, const char *dir) {
    return DATA_ERR(mine, "every rank's part of the sharded checkpoint", "that rank's message says why",
                    "rank %d %s ('%s')", rank, what, dir);
}

enum { HDR_OK, HDR_NRANGES, HDR_BYTES, HDR_SHA, HDR_WORDS = HDR_SHA + 4 };

bool ckpt_sharded_save(const char *dir_arg, comm_t *c, size_t total, const ckpt_range *ranges, int nranges,
                       const ckpt_shard_buffer *buffers, int nbuffers, const ckpt_meta *meta, int nmeta,
                       data_err *err) {
    check_buffers_arg(buffers, nbuffers);
    char dir[4096];
    without_trailing_slash(dir_arg, dir, sizeof dir); /* "ck/" must give "ck.tmp", not "ck/.tmp" */
    int rank = c ? comm_rank(c) : 0, world = c ? comm_size(c) : 1;
    data_err mine = {0};
    char tmpdir[4200];
    snprintf(tmpdir, sizeof tmpdir, "%s.tmp", dir);
    bool ok = true;
    /* 1. rank 0 prepares the temporary directory; the broadcast is the barrier. */
    int64_t prepared = 1;
    if (rank == 0) prepared = check_sharded_meta(meta, nmeta, &mine) && prepare_tmpdir(tmpdir, &mine);
    prepared = from_rank0(c, prepared);
    if (!prepared) ok = rank == 0 ? false : other_rank_failed(&mine, 0, "could not prepare the directory", tmpdir);
    /* 2. every rank writes its shard. */
    ckpt_shard_info info = {0};
    ckpt_shard_info *all = calloc((size_t)world, sizeof *all);
    int64_t *hdr = calloc((size_t)world * HDR_WORDS, sizeof *hdr);
    MP_ASSERT(all && hdr, "out of memory");
    if (ok) {
        bool wrote = ckpt_sharded_write_shard(tmpdir, rank, world, ranges, nranges, buffers, nbuffers, &info, &mine);
        /* 3. outcomes, sizes, hashes and ranges to every rank. */
        int64_t me[HDR_WORDS] = {wrote, info.nranges, (int64_t)info.bytes};
        if (wrote)
            for (int w = 0; w < 4; w++) {
                uint64_t word = 0;
                sscanf(info.sha256 + 16 * w, "%16llx", (ull *)&word);
                me[HDR_SHA + w] = (int64_t)word;
            }
        if (c) comm_allgather(c, me, hdr, HDR_WORDS, COMM_INT64, COMM_ALGO_NATIVE);
        else memcpy(hdr, me, sizeof me);
        for (int r = 0; ok && r < world; r++)
            if (!hdr[r * HDR_WORDS + HDR_OK])
                ok = r == rank ? false : other_rank_failed(&mine, r, "could not write its shard", tmpdir);
    }
    if (ok) {
        int64_t maxr = 0;
        for (int r = 0; r < world; r++) maxr = hdr[r * HDR_WORDS + HDR_NRANGES] > maxr ? hdr[r * HDR_WORDS + HDR_NRANGES] : maxr;
        size_t words = 2 * (size_t)(maxr > 0 ? maxr : 1);
        int64_t *send = calloc(words, sizeof *send), *recv = calloc(words * (size_t)world, sizeof *recv);
        MP_ASSERT(send && recv, "out of memory");
        for (int i = 0; i < info.nranges; i++) {
            send[2 * i] = (int64_t)info.ranges[i].offset;
            send[2 * i + 1] = (int64_t)info.ranges[i].n;
        }
        if (c) comm_allgather(c, send, recv, words, COMM_INT64, COMM_ALGO_NATIVE);
        else memcpy(recv, send, words * sizeof *send);
        for (int r = 0; r < world; r++) {
            ckpt_shard_info *s = &all[r];
            shard_file_name(r, world, s->file);
            s->bytes = (uint64_t)hdr[r * HDR_WORDS + HDR_BYTES];
            for (int w = 0; w < 4; w++)
                snprintf(s->sha256 + 16 * w, 17, "%016llx", (ull)(uint64_t)hdr[r * HDR_WORDS + HDR_SHA + w]);
            s->nranges = (int)hdr[r * HDR_WORDS + HDR_NRANGES];
            s->ranges = malloc(((size_t)s->nranges + 1) * sizeof *s->ranges);
            MP_ASSERT(s->ranges, "out of memory");
            for (int i = 0; i < s->nranges; i++)
                s->ranges[i] = (ckpt_range){(size_t)recv[r * words + 2 * i], (size_t)recv[r * words + 2 * i + 1]};
        }
        free(send);
        free(recv);
    }
    /* 4, 5. rank 0 writes the index and swaps the directory in; 6. everyone learns the outcome. */
    if (ok || prepared) {
        int64_t committed = ok;
        if (rank == 0 && ok) {
            const char *names[MAX_BUFFERS];
            for (int b = 0; b < nbuffers; b++) names[b] = buffers[b].name;
            committed = ckpt_sharded_commit(dir, tmpdir, total, names, nbuffers, all, world, meta, nmeta, &mine);
        }
        committed = from_rank0(c, committed);
        if (ok && !committed) ok = rank == 0 ? false : other_rank_failed(&mine, 0, "could not write the index", dir);
    }
    for (int r = 0; r < world; r++) ckpt_shard_info_free(&all[r]);
    ckpt_shard_info_free(&info);
    free(all);
    free(hdr);
    if (!ok) {
        if (!err) data_err_exit(&mine);
        *err = mine;
    }
    return ok;
}

/* ================================================================ loading */

/* A piece of the buffers that one shard holds: floats [offset, offset + n) at float `at` of its data. */
typedef struct {
    size_t offset, n, at;
    int shard;
} piece;

struct ckpt_sharded {
    char dir[4096];
    int world;
    size_t total;
    char **buffers;
    int nbuffers;
    char **meta_keys, **meta_values;
    int nmeta;
    ckpt_shard_info *shards;   /* world of them */
    ckpt_file **files;         /* each shard, open */
    bool *verified;            /* sha256 checked (by a read) */
    piece *pieces;             /* every range of every shard, by offset */
    size_t npieces;
};

void ckpt_sharded_close(ckpt_sharded *s) {
    if (!s) return;
    for (int b = 0; b < s->nbuffers; b++) free(s->buffers[b]);
    free(s->buffers);
    for (int i = 0; i < s->nmeta; i++) {
        free(s->meta_keys[i]);
        free(s->meta_values[i]);
    }
    free(s->meta_keys);
    free(s->meta_values);
    for (int r = 0; s->shards && r < s->world; r++) {
        ckpt_shard_info_free(&s->shards[r]);
        if (s->files) ckpt_close(s->files[r]);
    }
    free(s->shards);
    free(s->files);
    free(s->verified);
    free(s->pieces);
    free(s);
}

bool ckpt_sharded_is_dir(const char *path_arg) {
    char path[4096];
    without_trailing_slash(path_arg, path, sizeof path);
    if (has_index(path)) return true;
    if (is_dir(path)) return false;
    char old[4200];
    snprintf(old, sizeof old, "%s.old", path);
    return has_index(old);
}

/* A whole number 0 .. 2^53 from JSON. */
static bool json_u64(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double x = v->valuedouble;
    if (!(x >= 0 && x <= EXACT_U64) || x != (double)(uint64_t)x) return false;
    *out = (uint64_t)x;
    return true;
}

static bool hex64(const char *s) {
    if (strlen(s) != 64) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

static int by_piece_offset(const void *a, const void *b) {
    const piece *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

#define OPEN_FAIL(...) (DATA_ERR(err, __VA_ARGS__), cJSON_Delete(root), ckpt_sharded_close(s), (ckpt_sharded *)NULL)

/* Reads the index at s->dir into s; the JSON's fields, one by one. */
static bool parse_index(ckpt_sharded *s, const cJSON *root, const char *ipath, data_err *err) {
    const char *expected = "an index.json of format " CKPT_SHARDED_FORMAT
                           " {format, world, total, buffers, metadata, shards}";
    if (!cJSON_IsObject(root)) return DATA_ERR(err, expected, NULL, "'%s' is not a JSON object", ipath);
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(format))
        return DATA_ERR(err, expected, NULL, "'%s' has no \"format\" string", ipath);
    if (strcmp(format->valuestring, CKPT_SHARDED_FORMAT) != 0)
        return DATA_ERR(err, "a sharded checkpoint of format " CKPT_SHARDED_FORMAT,
                        strncmp(format->valuestring, FORMAT_FAMILY, strlen(FORMAT_FAMILY)) == 0
                            ? "it was written by another version of mixpar"
                            : NULL,
                        "'%s': format \"%s\"", ipath, format->valuestring);
    uint64_t world, total;
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(root, "world"), *t = cJSON_GetObjectItemCaseSensitive(root, "total");
    if (!json_u64(w, &world) || world < 1 || world > MAX_WORLD)
        return DATA_ERR(err, "\"world\": the number of ranks that wrote it, 1 .. 1048576", NULL,
                        "'%s': \"world\" is missing or not that", ipath);
    if (!json_u64(t, &total) || total < 1)
        return DATA_ERR(err, "\"total\": the floats in each flat buffer, a whole number >= 1", NULL,
                        "'%s': \"total\" is missing or not that", ipath);
    s->world = (int)world;
    s->total = (size_t)total;
    const cJSON *bufs = cJSON_GetObjectItemCaseSensitive(root, "buffers");
    int nb = cJSON_IsArray(bufs) ? cJSON_GetArraySize(bufs) : -1;
    if (nb < 1 || nb > MAX_BUFFERS)
        return DATA_ERR(err, "\"buffers\": a list of 1 to 16 buffer names", NULL, "'%s': \"buffers\" is not that", ipath);
    s->buffers = calloc((size_t)nb, sizeof *s->buffers);
    MP_ASSERT(s->buffers, "out of memory");
    for (const cJSON *it = bufs->child; it; it = it->next) {
        if (!cJSON_IsString(it) || !buffer_name_ok(it->valuestring))
            return DATA_ERR(err, "buffer names of letters, digits, '.' and '_'", NULL, "'%s': buffers[%d] is not one",
                            ipath, s->nbuffers);
        for (int b = 0; b < s->nbuffers; b++)
            if (strcmp(s->buffers[b], it->valuestring) == 0)
                return DATA_ERR(err, "each buffer name once", NULL, "'%s': buffer '%s' appears twice", ipath,
                                it->valuestring);
        s->buffers[s->nbuffers] = strdup(it->valuestring);
        MP_ASSERT(s->buffers[s->nbuffers], "out of memory");
        s->nbuffers++;
    }
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    if (!cJSON_IsObject(meta))
        return DATA_ERR(err, "\"metadata\": an object of strings", NULL, "'%s': \"metadata\" is not one", ipath);
    int nm = cJSON_GetArraySize(meta);
    s->meta_keys = calloc((size_t)nm + 1, sizeof(char *));
    s->meta_values = calloc((size_t)nm + 1, sizeof(char *));
    MP_ASSERT(s->meta_keys && s->meta_values, "out of memory");
    for (const cJSON *it = meta->child; it; it = it->next) {
        if (!cJSON_IsString(it))
            return DATA_ERR(err, "metadata values that are strings", NULL, "'%s': metadata '%s' is not a string", ipath,
                            it->string);
        for (int i = 0; i < s->nmeta; i++)
            if (strcmp(s->meta_keys[i], it->string) == 0)
                return DATA_ERR(err, "each metadata key once", NULL, "'%s': metadata '%s' appears twice", ipath,
                                it->string);
        s->meta_keys[s->nmeta] = strdup(it->string);
        s->meta_values[s->nmeta] = strdup(it->valuestring);
        MP_ASSERT(s->meta_keys[s->nmeta] && s->meta_values[s->nmeta], "out of memory");
        s->nmeta++;
    }
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(root, "shards");
    int ns = cJSON_IsArray(shards) ? cJSON_GetArraySize(shards) : -1;
    if (ns != s->world)
        return DATA_ERR(err, "\"shards\": one entry per rank of \"world\"", "the index is damaged or edited",
                        "'%s': world %d, %d shard entries", ipath, s->world, ns);
    s->shards = calloc((size_t)s->world, sizeof *s->shards);
    MP_ASSERT(s->shards, "out of memory");
    int r = 0;
    for (const cJSON *it = shards->child; it; it = it->next, r++) {
        ckpt_shard_info *sh = &s->shards[r];
        const char *shard_expected = "a shard entry {rank, file, bytes, sha256, floats, ranges: [[offset, n], ...]}";
        uint64_t rank, bytes, floats;
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(it, "file"), *sha = cJSON_GetObjectItemCaseSensitive(it, "sha256"),
                    *ranges = cJSON_GetObjectItemCaseSensitive(it, "ranges");
        if (!cJSON_IsObject(it) || !json_u64(cJSON_GetObjectItemCaseSensitive(it, "rank"), &rank) || rank != (uint64_t)r)
            return DATA_ERR(err, shard_expected, "entries in rank order", "'%s': shards[%d] has no \"rank\": %d", ipath,
                            r, r);
        if (!cJSON_IsString(file) || strlen(file->valuestring) >= sizeof sh->file || strchr(file->valuestring, '/') ||
            file->valuestring[0] == '.' || !*file->valuestring)
            return DATA_ERR(err, "a shard file name inside the checkpoint directory", NULL,
                            "'%s': shards[%d].file is missing or not a plain file name", ipath, r);
        snprintf(sh->file, sizeof sh->file, "%s", file->valuestring);
        if (!json_u64(cJSON_GetObjectItemCaseSensitive(it, "bytes"), &bytes) ||
            !json_u64(cJSON_GetObjectItemCaseSensitive(it, "floats"), &floats))
            return DATA_ERR(err, shard_expected, NULL, "'%s': shards[%d] (%s) has no whole \"bytes\" or \"floats\"",
                            ipath, r, sh->file);
        sh->bytes = bytes;
        if (!cJSON_IsString(sha) || !hex64(sha->valuestring))
            return DATA_ERR(err, "\"sha256\": 64 lowercase hex digits", NULL, "'%s': shards[%d] (%s) has no such sha256",
                            ipath, r, sh->file);
        snprintf(sh->sha256, sizeof sh->sha256, "%s", sha->valuestring);
        int nr = cJSON_IsArray(ranges) ? cJSON_GetArraySize(ranges) : -1;
        if (nr < 0) return DATA_ERR(err, shard_expected, NULL, "'%s': shards[%d] (%s) has no \"ranges\" list", ipath, r, sh->file);
        sh->ranges = malloc(((size_t)nr + 1) * sizeof *sh->ranges);
        MP_ASSERT(sh->ranges, "out of memory");
        for (const cJSON *p = ranges->child; p; p = p->next) {
            uint64_t off, n;
            if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || !json_u64(p->child, &off) ||
                !json_u64(p->child->next, &n))
                return DATA_ERR(err, "ranges as [offset, n] pairs of whole numbers", NULL,
                                "'%s': shards[%d] (%s) ranges[%d] is not one", ipath, r, sh->file, sh->nranges);
            sh->ranges[sh->nranges++] = (ckpt_range){(size_t)off, (size_t)n};
        }
        if (ckpt_ranges_floats(sh->ranges, sh->nranges) != floats)
            return DATA_ERR(err, "\"floats\": the sum of the shard's range lengths", "the index is damaged or edited",
                            "'%s': shards[%d] (%s) says %llu floats, its ranges hold %llu", ipath, r, sh->file,
                            (ull)floats, (ull)ckpt_ranges_floats(sh->ranges, sh->nranges));
        for (int q = 0; q < r; q++)
            if (strcmp(s->shards[q].file, sh->file) == 0)
                return DATA_ERR(err, "one file per shard", NULL, "'%s': shards %d and %d are both '%s'", ipath, q, r,
                                sh->file);
    }
    return true;
}

/* Checks shard r's file against the index and keeps it open. */
static bool open_shard(ckpt_sharded *s, int r, data_err *err) {
    const ckpt_shard_info *sh = &s->shards[r];
    char path[4200];
    join(path, sizeof path, s->dir, sh->file);
    struct stat st;
    if (stat(path, &st) != 0)
        return DATA_ERR(err, "every shard the index lists", "a shard was deleted or not copied with the rest",
                        "shard '%s' (rank %d of %d) is missing from '%s': %s", sh->file, r, s->world, s->dir,
                        strerror(errno));
    if ((uint64_t)st.st_size != sh->bytes)
        return DATA_ERR(err, "each shard of the size the index records", "the shard is truncated or from another save",
                        "shard '%s' (rank %d) in '%s' is %llu bytes, the index says %llu", sh->file, r, s->dir,
                        (ull)st.st_size, (ull)sh->bytes);
    ckpt_file *f = ckpt_open(path, err);
    if (!f) return false;
    s->files[r] = f;
    uint64_t floats = ckpt_ranges_floats(sh->ranges, sh->nranges);
    for (int b = 0; b < s->nbuffers; b++) {
        const ckpt_entry *e = ckpt_entry_find(f, s->buffers[b]);
        if (!e)
            return DATA_ERR(err, "every buffer of the index in every shard", NULL, "shard '%s' has no tensor '%s'", path,
                            s->buffers[b]);
        if (strcmp(e->dtype, "F32") != 0 || e->ndim != 1 || e->shape[0] != floats)
            return DATA_ERR(err, "each buffer as an F32 tensor of the shard's floats", "the shard is from another save",
                            "shard '%s': tensor '%s' is %s of %d dimensions, [%llu...], the index says F32 [%llu]",
                            path, s->buffers[b], e->dtype, e->ndim, (ull)(e->ndim ? e->shape[0] : 0), (ull)floats);
    }
    if (ckpt_entry_count(f) != s->nbuffers)
        for (int i = 0; i < ckpt_entry_count(f); i++) {
            bool known = false;
            for (int b = 0; b < s->nbuffers && !known; b++) known = strcmp(ckpt_entry_at(f, i)->name, s->buffers[b]) == 0;
            if (!known)
                return DATA_ERR(err, "only the index's buffers in a shard", NULL, "shard '%s' has a tensor '%s'", path,
                                ckpt_entry_at(f, i)->name);
        }
    return true;
}

ckpt_sharded *ckpt_sharded_open(const char *dir_arg, data_err *err) {
    ckpt_sharded *s = calloc(1, sizeof *s);
    MP_ASSERT(s, "out of memory");
    cJSON *root = NULL;
    char dir[4096];
    without_trailing_slash(dir_arg, dir, sizeof dir);
    /* A crash between the fallback's two renames leaves only dir.old complete (see the header). */
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    if (!is_dir(dir)) {
        char old[4200];
        snprintf(old, sizeof old, "%s.old", dir);
        if (!has_index(old))
            return OPEN_FAIL("a sharded checkpoint directory", NULL, "'%s' does not exist", dir);
        snprintf(s->dir, sizeof s->dir, "%s", old);
    }
    char ipath[4200];
    join(ipath, sizeof ipath, s->dir, CKPT_SHARDED_INDEX);
    FILE *f = fopen(ipath, "rb");
    if (!f)
        return OPEN_FAIL("a sharded checkpoint: a directory with index.json", "a save that never finished leaves no index",
                         "cannot open '%s': %s", ipath, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size > MAX_INDEX_BYTES) {
        fclose(f);
        return OPEN_FAIL("an index.json below 1 GB", NULL, "'%s' is larger, or cannot be read", ipath);
    }
    char *text = malloc((size_t)st.st_size + 1);
    MP_ASSERT(text, "out of memory");
    size_t got = fread(text, 1, (size_t)st.st_size, f);
    fclose(f);
    text[got] = '\0';
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(text, got, &end, false);
    if (!root) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        free(text);
        return OPEN_FAIL("index.json as valid JSON", "the index is damaged", "'%s': invalid JSON at byte offset %zu",
                         ipath, at);
    }
    free(text);
    if (!parse_index(s, root, ipath, err)) {
        cJSON_Delete(root);
        ckpt_sharded_close(s);
        return NULL;
    }
    cJSON_Delete(root);
    root = NULL;
    /* The ranges: every float of [0, total) in exactly one shard. */
    const ckpt_range **lists = malloc((size_t)s->world * sizeof *lists);
    int *counts = malloc((size_t)s->world * sizeof *counts);
    MP_ASSERT(lists && counts, "out of memory");
    for (int r = 0; r < s->world; r++) {
        lists[r] = s->shards[r].ranges;
        counts[r] = s->shards[r].nranges;
    }
    data_err perr;
    bool ok = ckpt_ranges_partition(lists, counts, s->world, s->total, "shard", &perr);
    free(lists);
    free(counts);
    if (!ok)
        return OPEN_FAIL(perr.expected, "the index is damaged or edited", "'%s' (total %llu): %s", ipath, (ull)s->total,
                         perr.found);
    /* Every file, its size and tensors. */
    s->files = calloc((size_t)s->world, sizeof *s->files);
    s->verified = calloc((size_t)s->world, sizeof *s->verified);
    MP_ASSERT(s->files && s->verified, "out of memory");
    for (int r = 0; r < s->world; r++)
        if (!open_shard(s, r, err)) {
            ckpt_sharded_close(s);
            return NULL;
        }
    /* The lookup table for reads: pieces by offset, each knowing where its data sits in its shard. */
    for (int r = 0; r < s->world; r++) s->npieces += (size_t)s->shards[r].nranges;
    s->pieces = malloc((s->npieces + 1) * sizeof *s->pieces);
    MP_ASSERT(s->pieces, "out of memory");
    size_t k = 0;
    for (int r = 0; r < s->world; r++) {
        size_t at = 0;
        for (int i = 0; i < s->shards[r].nranges; i++) {
            const ckpt_range *g = &s->shards[r].ranges[i];
            if (g->n) s->pieces[k++] = (piece){g->offset, g->n, at, r};
            at += g->n;
        }
    }
    s->npieces = k;
    qsort(s->pieces, s->npieces, sizeof *s->pieces, by_piece_offset);
    return s;
}

/* The piece holding float x (x < total: the pieces cover [0, total)). */
static const piece *piece_at(const ckpt_sharded *s, size_t x) {
    size_t lo = 0, hi = s->npieces;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->pieces[mid].offset <= x) lo = mid;
        else hi = mid;
    }
    return &s->pieces[lo];
}

static int buffer_index(const ckpt_sharded *s, const char *name) {
    for (int b = 0; b < s->nbuffers; b++)
        if (strcmp(s->buffers[b], name) == 0) return b;
    return -1;
}

bool ckpt_sharded_check_buffers(const ckpt_sharded *s, const char *const *names, int n, data_err *err) {
    char have[512] = "", want[512] = "";
    for (int b = 0; b < s->nbuffers; b++)
        snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", b ? ", " : "", s->buffers[b]);
    for (int i = 0; i < n; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? ", " : "", names[i]);
    bool same = n == s->nbuffers;
    for (int i = 0; same && i < n; i++) same = buffer_index(s, names[i]) >= 0;
    if (!same)
        return DATA_ERR(err, "a checkpoint with this run's buffers", "was it saved with another optimizer or recipe?",
                        "'%s' holds %s; this run needs %s", s->dir, have, want);
    return true;
}

bool ckpt_sharded_verify(const ckpt_sharded *s, int r, data_err *err) {
    MP_ASSERT(r >= 0 && r < s->world, "shard %d of %d", r, s->world);
    if (s->verified[r]) return true;
    char path[4200], hex[65];
    join(path, sizeof path, s->dir, s->shards[r].file);
    if (sha256_file_hex(path, hex) != 0)
        return DATA_ERR(err, "readable shards", NULL, "cannot read '%s': %s", path, strerror(errno));
    if (strcmp(hex, s->shards[r].sha256) != 0)
        return DATA_ERR(err, "each shard with the sha256 the index records", "the shard was damaged or replaced",
                        "shard '%s' (rank %d) has sha256 %.16s..., the index says %.16s...", path, r, hex,
                        s->shards[r].sha256);
    s->verified[r] = true;
    return true;
}

bool ckpt_sharded_read(const ckpt_sharded *s, size_t total, const ckpt_range *ranges, int nranges,
                       const ckpt_shard_buffer *buffers, int nbuffers, data_err *err) {
    check_buffers_arg(buffers, nbuffers);
    if (total != s->total)
        return DATA_ERR(err, "a checkpoint of this model's size", "was it saved from another model?",
                        "'%s' holds buffers of %llu floats, the model has %llu", s->dir, (ull)s->total, (ull)total);
    int idx[MAX_BUFFERS];
    for (int b = 0; b < nbuffers; b++) {
        idx[b] = buffer_index(s, buffers[b].name);
        if (idx[b] < 0) {
            char have[512] = "";
            for (int k = 0; k < s->nbuffers; k++)
                snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", k ? ", " : "", s->buffers[k]);
            return DATA_ERR(err, "every buffer this run needs in the checkpoint",
                            "was it saved with another optimizer or recipe?", "'%s' has no buffer '%s' (it holds %s)",
                            s->dir, buffers[b].name, have);
        }
    }
    for (int i = 0; i < nranges; i++)
        MP_ASSERT(ranges[i].offset <= total && ranges[i].n <= total - ranges[i].offset,
                  "range [%zu, %zu) outside [0, %zu)", ranges[i].offset, ranges[i].offset + ranges[i].n, total);
    /* The shards these ranges touch: their digests first, so nothing is copied from a damaged file. */
    bool *touch = calloc((size_t)s->world, sizeof *touch);
    MP_ASSERT(touch, "out of memory");
    for (int i = 0; i < nranges; i++)
        for (size_t x = ranges[i].offset, end = x + ranges[i].n; x < end;) {
            const piece *p = piece_at(s, x);
            touch[p->shard] = true;
            x = p->offset + p->n;
        }
    bool ok = true;
    for (int r = 0; ok && r < s->world; r++)
        if (touch[r]) ok = ckpt_sharded_verify(s, r, err);
    free(touch);
    if (!ok) return false;
    for (int b = 0; b < nbuffers; b++) {
        float *dst = buffers[b].data;
        for (int i = 0; i < nranges; i++)
            for (size_t x = ranges[i].offset, end = x + ranges[i].n; x < end;) {
                const piece *p = piece_at(s, x);
                size_t stop = p->offset + p->n < end ? p->offset + p->n : end;
                const ckpt_file *f = s->files[p->shard];
                const float *src = ckpt_entry_data(f, ckpt_entry_find(f, s->buffers[idx[b]]));
                memcpy(dst, src + p->at + (x - p->offset), (stop - x) * sizeof(float));
                dst += stop - x;
                x = stop;
            }
    }
    return true;
}

bool ckpt_sharded_read_all(const ckpt_sharded *s, comm_t *c, size_t total, const ckpt_range *ranges, int nranges,
                           const ckpt_shard_buffer *buffers, int nbuffers, data_err *err) {
    data_err mine = {0};
    bool ok = ckpt_sharded_read(s, total, ranges, nranges, buffers, nbuffers, &mine);
    int rank = c ? comm_rank(c) : 0, world = c ? comm_size(c) : 1;
    int64_t *all = calloc((size_t)world, sizeof *all), me = ok;
    MP_ASSERT(all, "out of memory");
    if (c) comm_allgather(c, &me, all, 1, COMM_INT64, COMM_ALGO_NATIVE);
    else all[0] = me;
    for (int r = 0; ok && r < world; r++)
        if (!all[r] && r != rank) ok = other_rank_failed(&mine, r, "could not read its part of the checkpoint", s->dir);
    free(all);
    if (!ok) {
        if (!err) data_err_exit(&mine);
        *err = mine;
    }
    return ok;
}

/* ================================================================ what the index says */

const char *ckpt_sharded_dir(const ckpt_sharded *s) { return s->dir; }
int ckpt_sharded_world(const ckpt_sharded *s) { return s->world; }
size_t ckpt_sharded_total(const ckpt_sharded *s) { return s->total; }
int ckpt_sharded_buffer_count(const ckpt_sharded *s) { return s->nbuffers; }
const char *ckpt_sharded_buffer_name(const ckpt_sharded *s, int i) {
    MP_ASSERT(i >= 0 && i < s->nbuffers, "buffer %d of %d", i, s->nbuffers);
    return s->buffers[i];
}
const ckpt_shard_info *ckpt_sharded_shard(const ckpt_sharded *s, int r) {
    MP_ASSERT(r >= 0 && r < s->world, "shard %d of %d", r, s->world);
    return &s->shards[r];
}

const char *ckpt_sharded_meta_get(const ckpt_sharded *s, const char *key) {
    for (int i = 0; i < s->nmeta; i++)
        if (strcmp(s->meta_keys[i], key) == 0) return s->meta_values[i];
    return NULL;
}
int ckpt_sharded_meta_count(const ckpt_sharded *s) { return s->nmeta; }
ckpt_meta ckpt_sharded_meta_at(const ckpt_sharded *s, int i) {
    MP_ASSERT(i >= 0 && i < s->nmeta, "metadata %d of %d", i, s->nmeta);
    return (ckpt_meta){s->meta_keys[i], s->meta_values[i]};
}

bool ckpt_sharded_meta_u64(const ckpt_sharded *s, const char *key, uint64_t *out, data_err *err) {
    const char *v = ckpt_sharded_meta_get(s, key);
    if (!v) return DATA_ERR(err, "the metadata key in the checkpoint's index", NULL, "'%s' has no metadata '%s'", s->dir, key);
    if (!parse_u64(v, out)) return DATA_ERR(err, "a whole number", NULL, "'%s': metadata '%s' is \"%s\"", s->dir, key, v);
    return true;
}
