/* test_ckpt_sharded.c: Criterion tests of core/train/ckpt_sharded: range algebra, round trips across layouts (resharding), every validation with its message, atomic saves. */
#include "unit_files.h"
#include "train/ckpt_sharded.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- range algebra */

Test(ckpt_ranges, coalesce_merges_continuations_and_keeps_order) {
    ckpt_range r[] = {{10, 5}, {15, 5}, {0, 3}, {3, 0}, {3, 2}, {40, 1}, {20, 1}};
    int n = ckpt_ranges_coalesce(r, 7);
    cr_assert_eq(n, 4, "got %d ranges", n);
    cr_expect(r[0].offset == 10 && r[0].n == 10, "[10,15)+[15,20) -> [10,20), got [%zu,+%zu)", r[0].offset, r[0].n);
    cr_expect(r[1].offset == 0 && r[1].n == 5, "[0,3)+[3,5) around an empty range -> [0,5)");
    cr_expect(r[2].offset == 40 && r[3].offset == 20, "a range that does not continue the last stays apart, in order");
    cr_expect_eq(ckpt_ranges_floats(r, n), 17);
}

static bool partition(const ckpt_range *a, int na, const ckpt_range *b, int nb, size_t total, data_err *err) {
    const ckpt_range *lists[] = {a, b};
    int counts[] = {na, nb};
    return ckpt_ranges_partition(lists, counts, 2, total, "shard", err);
}

Test(ckpt_ranges, partition_accepts_interleaved_unsorted_lists) {
    ckpt_range a[] = {{60, 40}, {0, 10}}, b[] = {{10, 50}};
    data_err err;
    cr_expect(partition(a, 2, b, 1, 100, &err), "%s", err.found);
}

Test(ckpt_ranges, partition_names_a_hole) {
    ckpt_range a[] = {{0, 10}}, b[] = {{12, 88}};
    data_err err;
    cr_assert_not(partition(a, 1, b, 1, 100, &err));
    cr_expect(strstr(err.found, "floats [10, 12) are in no shard"), "got: %s", err.found);
}

Test(ckpt_ranges, partition_names_an_overlap_and_both_shards) {
    ckpt_range a[] = {{0, 60}}, b[] = {{50, 50}};
    data_err err;
    cr_assert_not(partition(a, 1, b, 1, 100, &err));
    cr_expect(strstr(err.found, "floats [50, 60) are in shards 0 and 1"), "got: %s", err.found);
}

Test(ckpt_ranges, partition_names_a_short_cover_and_a_range_past_total) {
    ckpt_range a[] = {{0, 50}}, b[] = {{50, 40}};
    data_err err;
    cr_assert_not(partition(a, 1, b, 1, 100, &err));
    cr_expect(strstr(err.found, "floats [90, 100) are in no shard"), "got: %s", err.found);
    ckpt_range c[] = {{50, 60}};
    cr_assert_not(partition(a, 1, c, 1, 100, &err));
    cr_expect(strstr(err.found, "shard 1 has floats [50, 110), past total 100"), "got: %s", err.found);
}

/* ---------------------------------------------------------------- a saved checkpoint */

enum { TOTAL = 1000, SAVED_WORLD = 3 };

/* Three shards of an uneven, unsorted layout (ZeRO's order: the end of the buffer first). */
static const ckpt_range saved0[] = {{700, 300}, {0, 5}};
static const ckpt_range saved1[] = {{400, 300}, {5, 95}};
static const ckpt_range saved2[] = {{100, 300}};
static const ckpt_range *const saved[SAVED_WORLD] = {saved0, saved1, saved2};
static const int nsaved[SAVED_WORLD] = {2, 2, 1};

/* Buffer b's value at float i: distinct in every buffer and every position. */
static float value(int b, size_t i) { return (float)(b * 100000 + (int)i) + 0.25f; }

typedef struct {
    char *root, dir[600];
} fixture;

/* Writes every rank's shard from this process, then commits: a 3-rank checkpoint with params, m, v. */
static void save_three(fixture *fx, const char *step) {
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp", fx->dir);
    cr_assert_eq(mkdir(tmp, 0755), 0, "mkdir %s", tmp);
    ckpt_shard_info info[SAVED_WORLD];
    const char *names[] = {"params", "optim.m", "optim.v"};
    for (int r = 0; r < SAVED_WORLD; r++) {
        size_t n = ckpt_ranges_floats(saved[r], nsaved[r]);
        float *data[3];
        ckpt_shard_buffer bufs[3];
        for (int b = 0; b < 3; b++) {
            data[b] = malloc(n * sizeof(float));
            size_t at = 0;
            for (int i = 0; i < nsaved[r]; i++)
                for (size_t k = 0; k < saved[r][i].n; k++) data[b][at++] = value(b, saved[r][i].offset + k);
            bufs[b] = (ckpt_shard_buffer){names[b], data[b]};
        }
        data_err err;
        cr_assert(ckpt_sharded_write_shard(tmp, r, SAVED_WORLD, saved[r], nsaved[r], bufs, 3, &info[r], &err), "%s",
                  err.found);
        for (int b = 0; b < 3; b++) free(data[b]);
    }
    ckpt_meta meta[] = {{"step", step}, {"config", "{\"a\": 1}"}};
    data_err err;
    cr_assert(ckpt_sharded_commit(fx->dir, tmp, TOTAL, names, 3, info, SAVED_WORLD, meta, 2, &err), "%s", err.found);
    for (int r = 0; r < SAVED_WORLD; r++) ckpt_shard_info_free(&info[r]);
}

static fixture setup(void) {
    fixture fx = {.root = unit_tmpdir("ckpt-sharded")};
    snprintf(fx.dir, sizeof fx.dir, "%s/checkpoint.sharded", fx.root);
    save_three(&fx, "30");
    return fx;
}

/* Reads the caller's ranges of every buffer and checks each float against the saved value. */
static void expect_layout(const char *dir, const ckpt_range *ranges, int n, const char *what) {
    data_err err;
    ckpt_sharded *s = ckpt_sharded_open(dir, &err);
    cr_assert_not_null(s, "%s: %s", what, err.found);
    size_t floats = ckpt_ranges_floats(ranges, n);
    const char *names[] = {"params", "optim.m", "optim.v"};
    float *data[3];
    ckpt_shard_buffer bufs[3];
    for (int b = 0; b < 3; b++) {
        data[b] = calloc(floats + 1, sizeof(float));
        bufs[b] = (ckpt_shard_buffer){names[2 - b], data[b]}; /* asked for in another order than saved */
    }
    cr_assert(ckpt_sharded_read(s, TOTAL, ranges, n, bufs, 3, &err), "%s: %s", what, err.found);
    for (int b = 0; b < 3; b++) {
        size_t at = 0;
        for (int i = 0; i < n; i++)
            for (size_t k = 0; k < ranges[i].n; k++, at++) {
                float want = value(2 - b, ranges[i].offset + k);
                cr_assert_eq(data[b][at], want, "%s: buffer %s float %zu: got %g, want %g", what, names[2 - b],
                             ranges[i].offset + k, data[b][at], want);
            }
        free(data[b]);
    }
    ckpt_sharded_close(s);
}

Test(ckpt_sharded, loads_on_the_world_that_wrote_it) {
    fixture fx = setup();
    for (int r = 0; r < SAVED_WORLD; r++) expect_layout(fx.dir, saved[r], nsaved[r], "same layout");
    unit_remove_tree(fx.root);
}

Test(ckpt_sharded, reshards_to_one_process_two_ranks_and_five_strided_ranks) {
    fixture fx = setup();
    ckpt_range whole[] = {{0, TOTAL}};
    expect_layout(fx.dir, whole, 1, "1 process");
    ckpt_range two0[] = {{0, 500}}, two1[] = {{500, 500}};
    expect_layout(fx.dir, two0, 1, "2 ranks, rank 0");
    expect_layout(fx.dir, two1, 1, "2 ranks, rank 1");
    /* Five ranks, each holding every fifth block of 37 (crossing every saved boundary), in reverse. */
    for (int r = 0; r < 5; r++) {
        ckpt_range mine[64];
        int n = 0;
        for (size_t lo = (size_t)r * 37; lo < TOTAL; lo += 5 * 37) {
            size_t n_here = lo + 37 <= TOTAL ? 37 : TOTAL - lo;
            mine[n++] = (ckpt_range){lo, n_here};
        }
        for (int i = 0; i < n / 2; i++) {
            ckpt_range t = mine[i];
            mine[i] = mine[n - 1 - i];
            mine[n - 1 - i] = t;
        }
        expect_layout(fx.dir, mine, n, "5 strided ranks");
    }
    unit_remove_tree(fx.root);
}

Test(ckpt_sharded, index_records_world_ranges_and_metadata) {
    fixture fx = setup();
    data_err err;
    ckpt_sharded *s = ckpt_sharded_open(fx.dir, &err);
    cr_assert_not_null(s, "%s", err.found);
    cr_expect_eq(ckpt_sharded_world(s), 3);
    cr_expect_eq(ckpt_sharded_total(s), TOTAL);
    cr_expect_eq(ckpt_sharded_buffer_count(s), 3);
    cr_expect_str_eq(ckpt_sharded_meta_get(s, "step"), "30");
    cr_expect_str_eq(ckpt_sharded_meta_get(s, "config"), "{\"a\": 1}");
    const ckpt_shard_info *sh = ckpt_sharded_shard(s, 1);
    cr_expect_str_eq(sh->file, "rank-00001-of-00003.safetensors");
    cr_expect(sh->nranges == 2 && sh->ranges[0].offset == 400 && sh->ranges[1].n == 95);
    const char *ok[] = {"optim.v", "params", "optim.m"}, *fewer[] = {"params"};
    cr_expect(ckpt_sharded_check_buffers(s, ok, 3, &err), "%s", err.found);
    cr_expect_not(ckpt_sharded_check_buffers(s, fewer, 1, &err));
    cr_expect(strstr(err.found, "holds params, optim.m, optim.v; this run needs params"), "got: %s", err.found);
    ckpt_sharded_close(s);
    /* A shard is a safetensors file any reader opens. */
    char path[700];
    snprintf(path, sizeof path, "%s/rank-00002-of-00003.safetensors", fx.dir);
    ckpt_file *f = ckpt_open(path, &err);
    cr_assert_not_null(f, "%s", err.found);
    cr_expect_eq(ckpt_entry_find(f, "optim.m")->shape[0], 300);
    cr_expect_str_eq(ckpt_meta_get(f, "shard_world"), "3");
    ckpt_close(f);
    unit_remove_tree(fx.root);
}

/* ---------------------------------------------------------------- bad input */

static void edit_index(const char *dir, const char *from, const char *to) {
    char path[700];
    snprintf(path, sizeof path, "%s/index.json", dir);
    size_t n;
    char *text = (char *)unit_read_file(path, &n);
    char *at = strstr(text, from);
    cr_assert_not_null(at, "index has no '%s'", from);
    char *out = malloc(n + strlen(to) + 1);
    snprintf(out, n + strlen(to) + 1, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    unit_write_file(path, out, strlen(out));
    free(text);
    free(out);
}

static void expect_open_fails(const char *dir, const char *pattern) {
    data_err err;
    ckpt_sharded *s = ckpt_sharded_open(dir, &err);
    cr_assert_null(s, "opened; expected an error with '%s'", pattern);
    char line[1200];
    cr_expect(strstr(data_err_line(&err, line, sizeof line), pattern), "expected '%s' in: %s", pattern, line);
}

Test(ckpt_sharded, missing_shard_is_named) {
    fixture fx = setup();
    char path[700];
    snprintf(path, sizeof path, "%s/rank-00001-of-00003.safetensors", fx.dir);
    cr_assert_eq(unlink(path), 0);
    expect_open_fails(fx.dir, "shard 'rank-00001-of-00003.safetensors' (rank 1 of 3) is missing");
    unit_remove_tree(fx.root);
}

Test(ckpt_sharded, truncated_shard_is_named_with_both_sizes) {
    fixture fx = setup();
    char path[700];
    snprintf(path, sizeof path, "%s/rank-00002-of-00003.safetensors", fx.dir);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(truncate(path, st.st_size - 100), 0);
    char want[200];
    snprintf(want, sizeof want, "is %lld bytes, the index says %lld", (long long)st.st_size - 100, (long long)st.st_size);
    expect_open_fails(fx.dir, want);
    unit_remove_tree(fx.root);
}

Test(ckpt_sharded, wrong_total_in_the_index_is_a_hole) {
    fixture fx = setup();
    edit_index(fx.dir, "\"total\": 1000", "\"total\": 1200");
    expect_open_fails(fx.dir, "floats [1000, 1200) are in no shard");
    unit_remove_tree(fx.root);
}

Test(ckpt_sharded, overlapping_ranges_in_the_index_are_named) {
    fixture fx = setup();
    edit_index(fx.dir, "\"floats\": 300, \"ranges\": [[100, 300]]", "\"floats\": 310, \"ranges\": [[90, 310]]");
    expect_open_fails(fx.dir, "floats [90, 100) are in shards 1 and 2");
    unit_remove_tree(fx.root);
}

Test(ckpt_sharded, floats_that_disagree_with_the_ranges_are_named) {
    fixture fx = setup();
    edit_index(fx.dir, "\"floats\": 300", "\"floats\": 301");
    expect_open_fails(fx.dir, "says 301 floats, its ranges hold 300");
    unit_remove_tree(fx.root);
}

Test(ckpt_sharded, bad_json_wrong_format_and_no_index_are_refused) {
    fixture fx = setup();
    edit_index(fx.dir, "\"world\": 3,", "\"world\": 3");
    expect_open_fails(fx.dir, "invalid JSON at byte offset");
    unit_remove_tree(fx.root);
    fx = setup();
    edit_index(fx.dir, "mixpar-sharded-1", "mixpar-sharded-9");
    expect_open_fails(fx.dir, "written by another version of mixpar");
    char path[700];
    snprintf(path, sizeof path, "%s/index.json", fx.dir);
    cr_assert_eq(unlink(path), 0);
    expect_open_fails(fx.dir, "a save that never finished leaves no index");
    snprintf(path, sizeof path, "%s/nothing-here", fx.root);
    expect_open_fails(path, "does not exist");
    unit_remove_tree(fx.root);
}

Test(ckpt_sharded, damaged_shard_fails_its_sha256_before_any_copy) {
    fixture fx = setup();
    char path[700];
    snprintf(path, sizeof path, "%s/rank-00000-of-00003.safetensors", fx.dir);
    size_t n;
    uint8_t *bytes = unit_read_file(path, &n);
    bytes[n - 7] ^= 0x40; /* a bit of optim.v's data: same size, valid header */
    unit_write_file(path, bytes, n);
    free(bytes);
    data_err err;
    ckpt_sharded *s = ckpt_sharded_open(fx.dir, &err);
    cr_assert_not_null(s, "the header is intact: %s", err.found);
    /* Rank 2's ranges touch only shard 2: it reads. */
    float got[300], untouched = -1;
    ckpt_shard_buffer buf = {"params", got};
    cr_expect(ckpt_sharded_read(s, TOTAL, saved2, 1, &buf, 1, &err), "%s", err.found);
    /* The whole buffer needs shard 0: refused, and nothing written. */
    float *all = malloc(TOTAL * sizeof(float));
    for (int i = 0; i < TOTAL; i++) all[i] = untouched;
    ckpt_range whole = {0, TOTAL};
    buf.data = all;
    cr_assert_not(ckpt_sharded_read(s, TOTAL, &whole, 1, &buf, 1, &err));
    cr_expect(strstr(err.found, "rank-00000-of-00003.safetensors' (rank 0) has sha256"), "got: %s", err.found);
    for (int i = 0; i < TOTAL; i++) cr_assert_eq(all[i], untouched, "float %d written before the checks passed", i);
    free(all);
    ckpt_sharded_close(s);
    unit_remove_tree(fx.root);
}

Test(ckpt_sharded, another_model_size_and_a_missing_buffer_are_refused) {
    fixture fx = setup();
    data_err err;
    ckpt_sharded *s = ckpt_sharded_open(fx.dir, &err);
    cr_assert_not_null(s);
    float x[10];
    ckpt_range r = {0, 10};
    ckpt_shard_buffer p = {"params", x}, master = {"master", x};
    cr_expect_not(ckpt_sharded_read(s, 999, &r, 1, &p, 1, &err));
    cr_expect(strstr(err.found, "buffers of 1000 floats, the model has 999"), "got: %s", err.found);
    cr_expect_not(ckpt_sharded_read(s, TOTAL, &r, 1, &master, 1, &err));
    cr_expect(strstr(err.found, "has no buffer 'master' (it holds params, optim.m, optim.v)"), "got: %s", err.found);
    ckpt_sharded_close(s);
    unit_remove_tree(fx.root);
}

Test(ckpt_sharded, missing_shard_exits_2_without_err, .exit_code = 2) {
    fixture fx = setup();
    unit_remove_when_exiting(fx.root);
    char path[700];
    snprintf(path, sizeof path, "%s/rank-00000-of-00003.safetensors", fx.dir);
    unlink(path);
    ckpt_sharded_open(fx.dir, NULL);
}

/* ---------------------------------------------------------------- atomic saves (one process) */

static bool save_one(const char *dir, float fill, const char *step, data_err *err) {
    float data[TOTAL];
    for (int i = 0; i < TOTAL; i++) data[i] = fill + (float)i;
    ckpt_range whole = {0, TOTAL};
    ckpt_shard_buffer buf = {"params", data};
    ckpt_meta meta = {"step", step};
    return ckpt_sharded_save(dir, NULL, TOTAL, &whole, 1, &buf, 1, &meta, 1, err);
}

static void expect_step(const char *dir, const char *step, float fill) {
    data_err err;
    ckpt_sharded *s = ckpt_sharded_open(dir, &err);
    cr_assert_not_null(s, "%s", err.found);
    cr_expect_str_eq(ckpt_sharded_meta_get(s, "step"), step);
    float data[TOTAL];
    ckpt_range whole = {0, TOTAL};
    ckpt_shard_buffer buf = {"params", data};
    cr_assert(ckpt_sharded_read(s, TOTAL, &whole, 1, &buf, 1, &err), "%s", err.found);
    cr_expect_eq(data[TOTAL - 1], fill + (float)(TOTAL - 1));
    ckpt_sharded_close(s);
}

Test(ckpt_sharded, a_new_save_replaces_the_old_and_leaves_no_temporaries) {
    char *root = unit_tmpdir("ckpt-sharded");
    char dir[600], tmp[700];
    snprintf(dir, sizeof dir, "%s/ck", root);
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    data_err err;
    cr_assert(save_one(dir, 1, "10", &err), "%s", err.found);
    expect_step(dir, "10", 1);
    /* A crashed save's leftovers in DIR.tmp are cleared by the next one. */
    cr_assert_eq(mkdir(tmp, 0755), 0);
    char junk[800];
    snprintf(junk, sizeof junk, "%s/rank-00007-of-00009.safetensors", tmp);
    unit_write_file(junk, "x", 1);
    cr_assert(save_one(dir, 2, "20", &err), "%s", err.found);
    expect_step(dir, "20", 2);
    struct stat st;
    cr_expect_neq(stat(tmp, &st), 0, "DIR.tmp is gone after a save");
    unit_remove_tree(root);
}

Test(ckpt_sharded, a_trailing_slash_names_the_same_directory) {
    char *root = unit_tmpdir("ckpt-sharded");
    char dir[600], slash[700], tmp_inside[800];
    snprintf(dir, sizeof dir, "%s/ck", root);
    snprintf(slash, sizeof slash, "%s/", dir);
    snprintf(tmp_inside, sizeof tmp_inside, "%s/.tmp", dir);
    data_err err;
    cr_assert(save_one(slash, 1, "10", &err), "%s", err.found);
    cr_assert(save_one(slash, 2, "20", &err), "%s", err.found);
    struct stat st;
    cr_expect_neq(stat(tmp_inside, &st), 0, "the temporary directory is DIR.tmp, beside DIR, not inside it");
    expect_step(dir, "20", 2);
    expect_step(slash, "20", 2);
    unit_remove_tree(root);
}

Test(ckpt_sharded, a_failed_save_leaves_the_previous_checkpoint) {
    char *root = unit_tmpdir("ckpt-sharded");
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ck", root);
    data_err err;
    cr_assert(save_one(dir, 1, "10", &err), "%s", err.found);
    ckpt_fail_stage stages[] = {CKPT_FAIL_CREATE, CKPT_FAIL_WRITE, CKPT_FAIL_SYNC, CKPT_FAIL_RENAME};
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        ckpt_inject_failure(stages[i]);
        cr_expect_not(save_one(dir, 5, "50", &err), "stage %zu: the save should fail", i);
        expect_step(dir, "10", 1);
    }
    ckpt_inject_failure(CKPT_FAIL_NONE);
    unit_remove_tree(root);
}

Test(ckpt_sharded, a_crash_between_the_fallback_renames_loads_dir_old) {
    char *root = unit_tmpdir("ckpt-sharded");
    char dir[600], old[700];
    snprintf(dir, sizeof dir, "%s/ck", root);
    snprintf(old, sizeof old, "%s.old", dir);
    data_err err;
    cr_assert(save_one(dir, 1, "10", &err), "%s", err.found);
    cr_assert_eq(rename(dir, old), 0); /* the state after the first of the two renames */
    cr_expect(ckpt_sharded_is_dir(dir));
    expect_step(dir, "10", 1);
    unit_remove_tree(root);
}
