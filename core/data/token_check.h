/* token_check.h: a token file checked against the sha256 its dataset's info.json records, before training reads it. */
#ifndef MIXPAR_DATA_TOKEN_CHECK_H
#define MIXPAR_DATA_TOKEN_CHECK_H

#include "data/data_err.h"
#include "data/tokens.h"

#include <stdbool.h>

/* A token file that changed after its dataset was built (a flipped byte still inside the vocabulary passes
 * tokfile_open's checks) would train silently on other data. So when info.json beside the file records the
 * file ("files": {"train.tokens": {"bytes": N, "sha256": "..."}}, dataset.h), its size and then the sha256 of
 * its bytes must match; a mismatch names the file, the recorded and the found size or digest, and the fix.
 *
 * Hashing a large file on every start would cost seconds per GB, so a match is remembered in a stamp beside
 * the file, ".NAME.verified": the digest with the file's device, inode, size, mtime and ctime. Any write
 * to the file changes its ctime (which no one can set back), a rebuild gives it a new inode: the stamp then
 * no longer fits and the file is hashed again. A directory where the stamp cannot be written (read-only
 * data) is simply hashed each time.
 *
 * Without info.json, or without an entry for this file in it (a token file made by hand, an llm.c shard),
 * there is nothing to check against and it returns true. An info.json that is not JSON is refused. Returns
 * false with *err filled, or exits 2 when err is NULL. */
bool tokfile_check_recorded(const tokfile *f, data_err *err);

/* The same, opening the file first: tokfile_open, then the check (the file is closed on failure). */
tokfile *tokfile_open_checked(const char *path, data_err *err);

#endif
