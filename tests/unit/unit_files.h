/* unit_files.h: file helpers the Criterion suites share: temporary folders, whole-file reads and writes. */
#ifndef MIXPAR_TESTS_UNIT_FILES_H
#define MIXPAR_TESTS_UNIT_FILES_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fresh folder /tmp/mixpar-test-<tag>-XXXXXX; free it with unit_remove_tree. */
static inline char *unit_tmpdir(const char *tag) {
    char tmpl[128];
    snprintf(tmpl, sizeof tmpl, "/tmp/mixpar-test-%s-XXXXXX", tag);
    cr_assert_not_null(mkdtemp(tmpl), "mkdtemp");
    return strdup(tmpl);
}

static inline void unit_remove_tree(char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
    free(dir);
}

/* Tests that end in exit(2) cannot clean up after themselves: this removes their files at exit. */
static char unit_exit_cleanup_path[600];
static inline void unit_cleanup_at_exit(void) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", unit_exit_cleanup_path);
    if (unit_exit_cleanup_path[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", unit_exit_cleanup_path);
}
static inline void unit_remove_when_exiting(const char *path) {
    snprintf(unit_exit_cleanup_path, sizeof unit_exit_cleanup_path, "%s", path);
    atexit(unit_cleanup_at_exit);
}

/* The whole file, NUL-terminated (so text can be used as a string); *n is its length. */
static inline uint8_t *unit_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "open %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)len + 1);
    cr_assert_eq(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    p[len] = 0;
    *n = (size_t)len;
    return p;
}

static inline void unit_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "create %s", path);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

#endif
