/* tree.c: sorted directory walks, copies and guarded removal with plain POSIX calls. */
#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names in a directory (without . and ..); caller frees each and the array. */
static char **list_dir(const char *path, int *count) {
    *count = 0;
    DIR *d = opendir(path);
    if (!d) return NULL;
    char **names = NULL;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        names = realloc(names, (size_t)(*count + 1) * sizeof *names);
        names[(*count)++] = strdup(e->d_name);
    }
    closedir(d);
    if (*count) qsort(names, (size_t)*count, sizeof *names, cmp_str);
    return names;
}

static bool has_suffix(const char *name, const char *const *suffixes) {
    if (!suffixes) return true;
    size_t n = strlen(name);
    for (int i = 0; suffixes[i]; i++) {
        size_t s = strlen(suffixes[i]);
        if (n >= s && strcmp(name + n - s, suffixes[i]) == 0) return true;
    }
    return false;
}

bool tree_walk(const char *root, const char *dir, const char *const *suffixes,
               void (*fn)(const char *relpath, void *arg), void *arg) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    int n;
    char **names = list_dir(path, &n);
    if (!names && n == 0) {
        struct stat st;
        if (stat(path, &st) != 0) return false;
    }
    for (int i = 0; i < n; i++) {
        char rel[PATH_MAX], full[PATH_MAX];
        snprintf(rel, sizeof rel, "%s/%s", dir, names[i]);
        snprintf(full, sizeof full, "%s/%s", root, rel);
        struct stat st;
        if (lstat(full, &st) == 0) {
            if (S_ISDIR(st.st_mode)) tree_walk(root, rel, suffixes, fn, arg);
            else if (S_ISREG(st.st_mode) && has_suffix(names[i], suffixes)) fn(rel, arg);
        }
        free(names[i]);
    }
    free(names);
    return true;
}

static bool skipped(const char *rel, const char *const *skip) {
    for (int i = 0; skip && skip[i]; i++) {
        size_t n = strlen(skip[i]);
        if (n && skip[i][n - 1] == '*') {
            if (strncmp(rel, skip[i], n - 1) == 0) return true;
        } else if (strcmp(rel, skip[i]) == 0) {
            return true;
        }
    }
    return false;
}

static bool copy_file(const char *from, const char *to, mode_t mode) {
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) return false;
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode & 0777);
    if (out < 0) {
        close(in);
        return false;
    }
    char buf[1 << 16];
    ssize_t n;
    bool ok = true;
    while (ok && (n = read(in, buf, sizeof buf)) > 0) ok = write(out, buf, (size_t)n) == n;
    /* Keep the modification time, so make in a copy rebuilds only what was changed after copying. */
    struct stat st;
    if (ok && fstat(in, &st) == 0) {
        struct timespec times[2] = {st.st_atim, st.st_mtim};
        futimens(out, times);
    }
    close(in);
    return close(out) == 0 && ok;
}

static bool copy_dir(const char *src, const char *dst, const char *rel, const char *const *skip, char *err,
                     size_t errlen) {
    char from_dir[PATH_MAX], to_dir[PATH_MAX];
    snprintf(from_dir, sizeof from_dir, "%s%s%s", src, *rel ? "/" : "", rel);
    snprintf(to_dir, sizeof to_dir, "%s%s%s", dst, *rel ? "/" : "", rel);
    if (mkdir(to_dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", to_dir, strerror(errno));
        return false;
    }
    int n;
    char **names = list_dir(from_dir, &n);
    bool ok = true;
    for (int i = 0; i < n; i++) {
        char child[PATH_MAX], from[PATH_MAX], to[PATH_MAX];
        snprintf(child, sizeof child, "%s%s%s", rel, *rel ? "/" : "", names[i]);
        snprintf(from, sizeof from, "%s/%s", src, child);
        snprintf(to, sizeof to, "%s/%s", dst, child);
        struct stat st;
        if (ok && !skipped(child, skip) && lstat(from, &st) == 0) {
            if (S_ISDIR(st.st_mode)) {
                ok = copy_dir(src, dst, child, skip, err, errlen);
            } else if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t len = readlink(from, target, sizeof target - 1);
                if (len >= 0) {
                    target[len] = '\0';
                    unlink(to);
                    ok = symlink(target, to) == 0;
                }
            } else if (S_ISREG(st.st_mode)) {
                ok = copy_file(from, to, st.st_mode);
            }
            if (!ok && !*err) snprintf(err, errlen, "cannot copy %s to %s: %s", from, to, strerror(errno));
        }
        free(names[i]);
    }
    free(names);
    return ok;
}

bool tree_copy(const char *src, const char *dst, const char *const *skip, char *err, size_t errlen) {
    err[0] = '\0';
    return copy_dir(src, dst, "", skip, err, errlen);
}

static bool remove_recursive(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT;
    if (!S_ISDIR(st.st_mode)) return unlink(path) == 0;
    int n;
    char **names = list_dir(path, &n);
    bool ok = true;
    for (int i = 0; i < n; i++) {
        char child[PATH_MAX];
        snprintf(child, sizeof child, "%s/%s", path, names[i]);
        ok = remove_recursive(child) && ok;
        free(names[i]);
    }
    free(names);
    return rmdir(path) == 0 && ok;
}

bool tree_remove(const char *path, const char *must_contain) {
    if (!path[0] || strcmp(path, "/") == 0 || !strstr(path, must_contain)) return false;
    return remove_recursive(path);
}
