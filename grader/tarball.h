/* tarball.h: the submission archive: a plain ustar writer, and a reader that validates before trusting. */
#ifndef MIXPAR_GRADER_TARBALL_H
#define MIXPAR_GRADER_TARBALL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char path[256];  /* relative, normalised: no leading '/', no '..', no '.' components */
    char *data;      /* NUL-terminated contents */
    size_t size;
} tar_entry;

typedef struct {
    tar_entry *entries;
    int count;
} tar_archive;

/* Writes regular files (relative paths) into a ustar archive at `out_path`. */
bool tar_write(const char *out_path, const char *const *paths, const char *const *contents, int count, char *err,
               size_t errlen);

/* Reads an archive into memory without touching the file system. Rejects (false + message) absolute
 * paths, '..', links and devices, entries outside core/, MANIFEST and a lab's answers.md, compressed or truncated archives,
 * bad checksums, and files or totals over the size limits. */
bool tar_read(const char *path, tar_archive *out, char *err, size_t errlen);
const tar_entry *tar_find(const tar_archive *a, const char *path);
void tar_free(tar_archive *a);

#endif
