/* tree.h: walking and copying the course tree (for the handout and the grading folder). */
#ifndef MIXPAR_GRADER_TREE_H
#define MIXPAR_GRADER_TREE_H

#include <stdbool.h>
#include <stddef.h>

/* Calls fn(relative_path, arg) for each regular file under root/dir whose name ends in one of the
 * suffixes (NULL-terminated list; NULL for all), in sorted order. Returns false if dir is unreadable. */
bool tree_walk(const char *root, const char *dir, const char *const *suffixes,
               void (*fn)(const char *relpath, void *arg), void *arg);

/* Copies src to dst (created), skipping the relative paths in `skip` (NULL-terminated; a trailing '*'
 * matches any suffix). Files keep their permission bits; symbolic links are copied as links. */
bool tree_copy(const char *src, const char *dst, const char *const *skip, char *err, size_t errlen);

/* rm -rf for folders the grader made itself: refuses paths that do not contain `must_contain`. */
bool tree_remove(const char *path, const char *must_contain);

#endif
