/* test_viz_source.c: Criterion tests of the visualizer's event reader (viz/source.c) on crafted files: lines
 * that arrive in pieces, a truncated last line, malformed lines, unknown kinds, a newer schema, ranks whose
 * file appears later, a file truncated by a new run, bad run directories, and replay order. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../viz/model.h"
#include "../../viz/source.h"

static char dir[64];

static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/viz_source_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Appends text to events.rank<rank>.jsonl (mode "a"), or replaces it (mode "w"). */
static void write_rank(int rank, const char *mode, const char *text) {
    char path[128];
    snprintf(path, sizeof path, "%s/events.rank%d.jsonl", dir, rank);
    FILE *f = fopen(path, mode);
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* An event consumer that records what it was handed. */
typedef struct {
    int n;
    int ranks[64];
    char kinds[64][16];
    double t[64];
} seen_t;

static void record(void *ctx, int rank, const cJSON *ev) {
    seen_t *s = ctx;
    if (s->n >= 64) return;
    s->ranks[s->n] = rank;
    snprintf(s->kinds[s->n], sizeof s->kinds[0], "%s", vz_json_str(ev, "kind", "?"));
    s->t[s->n] = vz_json_num(ev, "t", -1);
    s->n++;
}

static const char STEP1[] = "{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":0.5,\"step\":1,\"loss\":7.5,\"lr\":0.001}\n";
static const char STEP2[] = "{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":1.0,\"step\":2,\"loss\":7.0,\"lr\":0.001}\n";

Test(viz_source, missing_empty_and_file_run_dirs_are_refused_with_a_reason, .init = make_dir, .fini = remove_dir) {
    vz_source s;
    char why[256];
    cr_expect_eq(vz_source_open(&s, "/nonexistent/run", why, sizeof why), -1);
    cr_expect(strstr(why, "does not exist") != NULL, "reason: %s", why);
    cr_expect_eq(vz_source_open(&s, dir, why, sizeof why), -1, "an empty directory has no event files");
    cr_expect(strstr(why, "no events.rank") != NULL, "reason: %s", why);
    write_rank(0, "w", STEP1);
    char file[128];
    snprintf(file, sizeof file, "%s/events.rank0.jsonl", dir);
    cr_expect_eq(vz_source_open(&s, file, why, sizeof why), -1);
    cr_expect(strstr(why, "not a directory") != NULL, "reason: %s", why);
    cr_expect_eq(vz_source_open(&s, dir, why, sizeof why), 0);
    vz_source_close(&s);
}

Test(viz_source, only_canonical_rank_file_names_count, .init = make_dir, .fini = remove_dir) {
    char path[128];
    const char *decoys[] = {"events.rank01.jsonl", "events.rank2.jsonl.tmp", "events.rankx.jsonl", "events.rank-1.jsonl"};
    for (size_t i = 0; i < sizeof decoys / sizeof decoys[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, decoys[i]);
        FILE *f = fopen(path, "w");
        fputs(STEP1, f);
        fclose(f);
    }
    vz_source s;
    char why[256];
    cr_expect_eq(vz_source_open(&s, dir, why, sizeof why), -1, "decoys are not rank files: %s", why);
    write_rank(3, "w", STEP1);
    cr_assert_eq(vz_source_open(&s, dir, why, sizeof why), 0);
    cr_expect_eq(s.nranks, 4, "rank 3's file makes ranks 0..3 known");
    cr_expect_not_null(s.files[3]);
    cr_expect_null(s.files[1]);
    vz_source_close(&s);
}

Test(viz_source, a_line_arriving_in_pieces_is_read_once_whole, .init = make_dir, .fini = remove_dir) {
    write_rank(0, "w", STEP1);
    write_rank(0, "a", "{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":1.0,\"st"); /* a writer caught mid-line */
    vz_source s;
    char why[256];
    cr_assert_eq(vz_source_open(&s, dir, why, sizeof why), 0);
    seen_t seen = {0};
    cr_expect_eq(vz_source_poll(&s, record, &seen), 1, "only the complete line is handed on");
    cr_expect_eq(s.files[0]->partial_len, strlen("{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":1.0,\"st"));
    cr_expect_eq(vz_source_poll(&s, record, &seen), 0, "nothing new");
    write_rank(0, "a", "ep\":2,\"loss\":7.0}\n");
    cr_expect_eq(vz_source_poll(&s, record, &seen), 1, "the rest of the line completes it");
    cr_expect_eq(seen.n, 2);
    cr_expect_float_eq(seen.t[1], 1.0, 1e-12);
    cr_expect_eq(s.malformed, 0, "a line read in two pieces is not malformed");
    vz_source_close(&s);
}

Test(viz_source, a_truncated_last_line_is_counted_and_skipped, .init = make_dir, .fini = remove_dir) {
    /* the cut leaves valid JSON text up to a number: it must still not be trusted */
    write_rank(0, "w", STEP1);
    write_rank(0, "a", "{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":1.0,\"step\":2,\"loss\":7.0}");
    vz_source s;
    char why[256];
    cr_assert_eq(vz_source_open(&s, dir, why, sizeof why), 0);
    seen_t seen = {0};
    vz_source_poll(&s, record, &seen);
    vz_source_finish(&s);
    cr_expect_eq(seen.n, 1);
    cr_expect_eq(s.truncated, 1);
    cr_expect_eq(s.malformed, 0);
    vz_source_close(&s);
}

Test(viz_source, malformed_lines_are_counted_not_fatal, .init = make_dir, .fini = remove_dir) {
    write_rank(0, "w", STEP1);
    write_rank(0, "a", "not json at all\n"
                       "[1,2,3]\n"
                       "{\"kind\":\"step\",\"t\":2}\n"             /* no version */
                       "{\"v\":\"1\",\"kind\":\"step\"}\n"         /* version not a number */
                       "{\"v\":1.5,\"kind\":\"step\"}\n"           /* version not whole */
                       "{\"v\":1,\"kind\":7}\n"                     /* kind not a string */
                       "\n   \n");                                  /* blank lines are not lines */
    write_rank(0, "a", STEP2);
    vz_source s;
    char why[256];
    cr_assert_eq(vz_source_open(&s, dir, why, sizeof why), 0);
    seen_t seen = {0};
    cr_expect_eq(vz_source_poll(&s, record, &seen), 2, "both good lines survive the bad ones between them");
    cr_expect_eq(s.malformed, 6);
    cr_expect_eq(s.lines, 8);
    vz_source_close(&s);
}

Test(viz_source, a_newer_schema_is_skipped_with_a_clear_note, .init = make_dir, .fini = remove_dir) {
    write_rank(0, "w", STEP1);
    write_rank(0, "a", "{\"v\":2,\"kind\":\"step\",\"rank\":0,\"t\":1.0,\"step\":2,\"loss_v2\":7.0}\n");
    write_rank(0, "a", "{\"v\":3,\"kind\":\"novel\",\"rank\":0,\"t\":1.5}\n");
    vz_source s;
    char why[256], note[256];
    cr_assert_eq(vz_source_open(&s, dir, why, sizeof why), 0);
    seen_t seen = {0};
    vz_source_poll(&s, record, &seen);
    cr_expect_eq(seen.n, 1, "only the version-1 event is interpreted");
    cr_expect_eq(s.newer, 2);
    cr_expect_eq(s.newest_version, 3);
    vz_source_version_note(&s, note, sizeof note);
    cr_expect(strstr(note, "schema version 3") && strstr(note, "knows version 1") && strstr(note, "rebuild"), "note: %s", note);
    vz_source_close(&s);
}

Test(viz_source, unknown_kinds_are_ignored_and_counted_by_the_model, .init = make_dir, .fini = remove_dir) {
    write_rank(0, "w", STEP1);
    write_rank(0, "a", "{\"v\":1,\"kind\":\"weather\",\"rank\":0,\"t\":0.7,\"sunny\":true}\n");
    write_rank(0, "a", STEP2);
    vz_source s;
    char why[256];
    cr_assert_eq(vz_source_open(&s, dir, why, sizeof why), 0);
    vz_model m;
    vz_model_init(&m);
    vz_source_poll(&s, vz_model_apply, &m);
    cr_expect_eq(m.unknown_kinds, 1);
    cr_expect_str_eq(m.last_unknown, "weather");
    cr_expect_eq(vz_model_nsteps(&m), 2, "the steps around it are kept");
    cr_expect_eq(s.malformed, 0, "an unknown kind is not malformed");
    vz_model_free(&m);
    vz_source_close(&s);
}

Test(viz_source, a_rank_file_that_appears_later_is_picked_up, .init = make_dir, .fini = remove_dir) {
    write_rank(0, "w", STEP1);
    vz_source s;
    char why[256];
    cr_assert_eq(vz_source_open(&s, dir, why, sizeof why), 0);
    vz_source_expect(&s, 2); /* the run header says world 2 */
    seen_t seen = {0};
    vz_source_poll(&s, record, &seen);
    cr_expect_eq(vz_source_files_present(&s), 1);
    cr_expect_eq(s.nranks, 2, "rank 1 is known and waited for");
    write_rank(1, "w", "{\"v\":1,\"kind\":\"span\",\"rank\":1,\"t\":0.2,\"name\":\"forward\",\"t0\":0.1,\"t1\":0.2}\n");
    cr_expect_eq(vz_source_poll(&s, record, &seen), 1);
    cr_expect_eq(vz_source_files_present(&s), 2);
    cr_expect_eq(seen.ranks[1], 1, "the event is tagged with its file's rank");
    vz_source_close(&s);
}

Test(viz_source, a_file_truncated_by_a_new_run_resets_the_reader, .init = make_dir, .fini = remove_dir) {
    write_rank(0, "w", STEP1);
    write_rank(0, "a", STEP2);
    vz_source s;
    char why[256];
    cr_assert_eq(vz_source_open(&s, dir, why, sizeof why), 0);
    seen_t seen = {0};
    cr_expect_eq(vz_source_poll(&s, record, &seen), 2);
    write_rank(0, "w", STEP1); /* a new run with the same name starts its stream over */
    cr_expect_eq(vz_source_poll(&s, record, &seen), VZ_SOURCE_RESET);
    memset(&seen, 0, sizeof seen);
    cr_expect_eq(vz_source_poll(&s, record, &seen), 1, "after the reset the new file is read from its start");
    cr_expect_float_eq(seen.t[0], 0.5, 1e-12);
    vz_source_close(&s);
}

Test(viz_source, replay_merges_ranks_in_time_order_across_a_resume, .init = make_dir, .fini = remove_dir) {
    write_rank(0, "w", "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0}\n"
                       "{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":2,\"step\":1}\n"
                       "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"resumed_at\":1}\n" /* a new process: t restarts */
                       "{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":1,\"step\":2}\n");
    write_rank(1, "w", "{\"v\":1,\"kind\":\"run\",\"rank\":1,\"t\":0.5}\n"
                       "{\"v\":1,\"kind\":\"step\",\"rank\":1,\"t\":1.5,\"step\":1}\n"
                       "bad line\n"
                       "{\"v\":1,\"kind\":\"step\",\"rank\":1,\"t\":2.5,\"step\":2}");   /* truncated */
    vz_source s;
    char why[256];
    cr_assert_eq(vz_source_open(&s, dir, why, sizeof why), 0);
    vz_replay r;
    vz_replay_load(&r, &s);
    cr_expect_eq(r.nlines, 6);
    cr_expect_eq(s.malformed, 1);
    cr_expect_eq(s.truncated, 1);
    double expect_t[] = {0, 0.5, 1.5, 2, 2, 3}; /* rank 0's resumed part continues from 2: 2+0, 2+1 */
    int expect_rank[] = {0, 1, 1, 0, 0, 0};
    for (size_t i = 0; i < r.nlines && i < 6; i++) {
        cr_expect_float_eq(r.lines[i].t, expect_t[i], 1e-12, "line %zu: t %g", i, r.lines[i].t);
        cr_expect_eq(r.lines[i].rank, expect_rank[i], "line %zu", i);
    }
    seen_t seen = {0};
    cr_expect_eq(vz_replay_until(&r, 1.0, record, &seen), 2);
    cr_expect(!vz_replay_done(&r));
    cr_expect_eq(vz_replay_until(&r, 100, record, &seen), 4);
    cr_expect(vz_replay_done(&r));
    vz_replay_free(&r);
    vz_source_close(&s);
}

Test(viz_source, number_fields_read_nan_and_inf_strings) {
    cJSON *ev = cJSON_Parse("{\"a\":\"nan\",\"b\":\"inf\",\"c\":\"-inf\",\"d\":2.5,\"e\":\"x\",\"f\":true}");
    cr_assert_not_null(ev);
    cr_expect(isnan(vz_json_num(ev, "a", 0)));
    cr_expect(isinf(vz_json_num(ev, "b", 0)) && vz_json_num(ev, "b", 0) > 0);
    cr_expect(isinf(vz_json_num(ev, "c", 0)) && vz_json_num(ev, "c", 0) < 0);
    cr_expect_float_eq(vz_json_num(ev, "d", 0), 2.5, 1e-12);
    cr_expect_float_eq(vz_json_num(ev, "e", 9), 9, 1e-12, "an unrelated string falls back");
    cr_expect_float_eq(vz_json_num(ev, "missing", 4), 4, 1e-12);
    cr_expect(vz_json_bool(ev, "f", false));
    cJSON_Delete(ev);
}
