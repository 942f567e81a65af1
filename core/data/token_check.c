/* token_check.c: checking token files against info.json's sha256, with a stamp so each version is hashed once. */
#include "data/token_check.h"

#include "data/sha256.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void split_path(const char *path, char *dir, size_t dir_len, const char **name) {
    const char *slash = strrchr(path, '/');
    *name = slash ? slash + 1 : path;
    if (slash) snprintf(dir, dir_len, "%.*s", (int)(slash - path), path);
    else snprintf(dir, dir_len, ".");
    if (slash == path) snprintf(dir, dir_len, "/");
}

/* The stamp's line for the file as it is now. */
static void stamp_line(const struct stat *st, const char *sha, char *out, size_t len) {
    snprintf(out, len, "mixpar-verified-1 dev %llu ino %llu size %llu mtime %lld.%09ld ctime %lld.%09ld sha256 %s\n",
             (unsigned long long)st->st_dev, (unsigned long long)st->st_ino, (unsigned long long)st->st_size,
             (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec,
             sha);
}

static bool same_version(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static char *read_small_file(const char *path, size_t max, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max, f) : 0;
    bool whole = buf && feof(f) && !ferror(f);
    fclose(f);
    if (!whole) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

bool tokfile_check_recorded(const tokfile *f, data_err *err) {
    char dir[4096], info_path[4200], stamp_path[4400];
    const char *name;
    split_path(f->path, dir, sizeof dir, &name);
    snprintf(info_path, sizeof info_path, "%s/info.json", dir);
    size_t len;
    char *text = read_small_file(info_path, 16 << 20, &len);
    if (!text) {
        if (errno == ENOENT) return true; /* no dataset record: nothing to check against */
        return DATA_ERR(err, "a readable info.json beside the token file", NULL, "cannot read '%s': %s", info_path,
                        strerror(errno));
    }
    cJSON *info = cJSON_ParseWithLength(text, len);
    const char *bad = info ? NULL : cJSON_GetErrorPtr();
    long offset = bad && bad >= text && bad <= text + len ? (long)(bad - text) : 0;
    free(text);
    if (!info)
        return DATA_ERR(err, "info.json as JSON (the dataset's record, dataset.h)",
                        "rebuild the dataset: mixpar data build NAME --force --out DIR",
                        "'%s' is not valid JSON (near byte offset %ld)", info_path, offset);
    cJSON *entry = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(info, "files"), name);
    cJSON *bytes = cJSON_GetObjectItemCaseSensitive(entry, "bytes");
    cJSON *sha = cJSON_GetObjectItemCaseSensitive(entry, "sha256");
    if (!cJSON_IsString(sha) || strlen(sha->valuestring) != 64) {
        cJSON_Delete(info);
        return true; /* info.json does not record this file */
    }
    char want[65];
    snprintf(want, sizeof want, "%s", sha->valuestring);
    double want_bytes = cJSON_IsNumber(bytes) ? bytes->valuedouble : -1;
    cJSON *dataset = cJSON_GetObjectItemCaseSensitive(info, "name");
    char hint[512];
    snprintf(hint, sizeof hint,
             "the file changed after the dataset was built: rebuild it (mixpar data build %s --force --out %s), "
             "or put back the file the dataset wrote",
             cJSON_IsString(dataset) ? dataset->valuestring : "NAME", dir);
    cJSON_Delete(info);
    if (want_bytes >= 0 && (double)f->file_bytes != want_bytes)
        return DATA_ERR(err, "a token file of the size its info.json records", hint,
                        "'%s' has %llu bytes; %s records %.0f", f->path, (unsigned long long)f->file_bytes, info_path,
                        want_bytes);

    /* A stamp that fits the file as it is now: this version was hashed and matched. */
    snprintf(stamp_path, sizeof stamp_path, "%s/.%s.verified", dir, name);
    struct stat before, after;
    if (stat(f->path, &before) != 0)
        return DATA_ERR(err, "a token file that stays in place", NULL, "'%s' is gone: %s", f->path, strerror(errno));
    char line[512];
    stamp_line(&before, want, line, sizeof line);
    size_t stamp_len;
    char *stamp = read_small_file(stamp_path, 1024, &stamp_len);
    bool stamped = stamp && strcmp(stamp, line) == 0;
    free(stamp);
    if (stamped) return true;

    /* The mapping holds what tokfile_open validated: hash those bytes. */
    uint8_t digest[32];
    sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, f->map, f->file_bytes);
    sha256_final(&ctx, digest);
    char found[65];
    for (int i = 0; i < 32; i++) snprintf(found + 2 * i, 3, "%02x", digest[i]);
    if (strcmp(found, want) != 0)
        return DATA_ERR(err, "a token file with the sha256 its info.json records", hint,
                        "'%s' has sha256 %s; %s records %s", f->path, found, info_path, want);
    /* Remember it only if the file did not change while it was hashed. */
    if (stat(f->path, &after) == 0 && same_version(&before, &after)) {
        data_err ignored; /* read-only data: no stamp, the file is hashed each time */
        data_write_file_atomic(stamp_path, line, strlen(line), &ignored);
    }
    return true;
}

tokfile *tokfile_open_checked(const char *path, data_err *err) {
    tokfile *f = tokfile_open(path, err);
    if (f && !tokfile_check_recorded(f, err)) {
        tokfile_close(f);
        return NULL;
    }
    return f;
}
