/* test_viz_runs.c: Criterion tests of runs side by side (`mixpar viz RUN_A RUN_B`, viz/screen.c's
 * vz_draw_runs and viz/panel_loss.c's vz_panel_loss_runs) on virtual screens, against the shipped sample
 * runs (viz/samples/synthetic-addition: fp32, 200 steps; fp16-scale1: fp16, 100 steps): each run's header
 * row carries its own last loss, run B's marks stop at its last step's column, the underflow and memory
 * panels draw each run in its own part (the heat map only for the run that has rounding events, with the
 * run total summed from the file), and the parts are side by side or stacked by the screen's width. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../viz/cli.h"
#include "../../viz/panels.h"
#include "../../viz/screen.h"

static const vz_style PLAIN = {.color = false, .unicode = true};
static const char *const DIRS[2] = {"viz/samples/synthetic-addition", "viz/samples/fp16-scale1"};

static void reset(void *m) { vz_model_reset(m); }

static void load(vz_model *m, vz_source *src, const char *dir) {
    char why[512];
    cr_assert_eq(vz_source_open(src, dir, why, sizeof why), 0, "%s (run the tests from the repository root)", why);
    vz_model_init(m);
    vz_read_run(src, vz_model_apply, m, reset);
}

static SCREEN *screen(int rows, int cols) {
    cr_assert(vz_locale_utf8(true), "a UTF-8 locale (C.UTF-8) is needed");
    SCREEN *sp = vz_virtual_screen(rows, cols);
    cr_assert_not_null(sp, "no terminal description for the virtual screen");
    return sp;
}

static wchar_t cell(WINDOW *w, int y, int x) {
    cchar_t c;
    wchar_t wc[CCHARW_MAX + 1] = {0};
    attr_t a;
    short pair;
    cr_assert_neq(mvwin_wch(w, y, x, &c), ERR, "cell (%d, %d) outside the window", y, x);
    getcchar(&c, wc, &a, &pair, NULL);
    return wc[0];
}

/* Row y of the window as text (UTF-8), from column x0, width n. */
static void row_text(WINDOW *w, int y, int x0, int n, char *out, size_t len) {
    size_t o = 0;
    for (int x = x0; x < x0 + n && o + 5 < len; x++) {
        wchar_t c = cell(w, y, x);
        o += (size_t)wctomb(out + o, c ? c : L' ');
    }
    out[o] = '\0';
}

/* The last line of `kind` in a file: its "key":number. */
static double last_number(const char *path, const char *kind, const char *key) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    static char line[65536];
    char want[64], k[64];
    snprintf(want, sizeof want, "\"kind\":\"%s\"", kind);
    snprintf(k, sizeof k, "\"%s\":", key);
    double v = -1;
    while (fgets(line, sizeof line, f))
        if (strstr(line, want) && strstr(line, k)) v = strtod(strstr(line, k) + strlen(k), NULL);
    fclose(f);
    return v;
}

typedef struct {
    vz_model m[2];
    vz_source src[2];
    const vz_model *ms[2];
    const vz_source *srcs[2];
} two_runs;

static void load_two(two_runs *t) {
    for (int r = 0; r < 2; r++) {
        load(&t->m[r], &t->src[r], DIRS[r]);
        t->ms[r] = &t->m[r];
        t->srcs[r] = &t->src[r];
    }
}

static void free_two(two_runs *t) {
    for (int r = 0; r < 2; r++) {
        vz_model_free(&t->m[r]);
        vz_source_close(&t->src[r]);
    }
}

Test(viz_runs, loss_panel_overlays_both_runs_with_their_own_numbers_and_marks) {
    SCREEN *sp = screen(36, 120);
    two_runs t;
    load_two(&t);
    vz_view v;
    vz_view_init(&v);
    WINDOW *w = newwin(34, 120, 0, 0);
    vz_panel_loss_runs(w, t.ms, DIRS, 2, &v, &PLAIN);
    char *text = vz_window_text(w);
    char row[1024], want[128];
    for (int r = 0; r < 2; r++) {
        char path[256];
        snprintf(path, sizeof path, "%s/events.rank0.jsonl", DIRS[r]);
        double loss = last_number(path, "step", "loss");
        row_text(w, r, 0, 120, row, sizeof row);
        snprintf(want, sizeof want, "loss %.4f", loss);
        cr_expect(strncmp(row, r == 0 ? "A synthetic-addition (synthetic-addition, fp32, 1 rank)" :
                                        "B fp16-scale1 (synthetic-addition, fp16, 1 rank)", 40) == 0,
                  "row %d names run %c by directory, recipe and world: %s", r, 'A' + r, row);
        cr_expect(strstr(row, want) != NULL, "row %d shows its run's last loss (%s): %s", r, want, row);
    }
    /* the legend: A's line and validation, B's mark (no colour: its letter) */
    row_text(w, 3, 0, 120, row, sizeof row);
    cr_expect(strstr(row, "A train") && strstr(row, "A val") && strstr(row, "B B train"), "legend: %s\n%s", row, text);
    /* x runs over steps 1..200 (run A's); run B stops at step 100, the middle tick: no B right of it */
    int plot_x = 9, plot_w = 120 - 9, mid = plot_x + (plot_w - 1) / 2, bs_left = 0, bs_right = 0;
    for (int y = 4; y < 4 + 17; y++)
        for (int x = plot_x; x < 120; x++) {
            if (cell(w, y, x) != L'B') continue;
            if (x <= mid + 1) bs_left++;
            else bs_right++;
        }
    cr_expect_gt(bs_left, 50, "run B's loss drawn as B marks up to its step 100: %d\n%s", bs_left, text);
    cr_expect_eq(bs_right, 0, "and none beyond step 100 (column %d): %d\n%s", mid, bs_right, text);
    free(text);
    delwin(w);
    free_two(&t);
    vz_virtual_screen_end(sp);
}

Test(viz_runs, parts_side_by_side_when_wide_stacked_when_narrow) {
    int y, x, h, wd;
    vz_run_part(38, 160, 2, 1, &y, &x, &h, &wd);
    cr_expect(y == 0 && h == 38 && x == 80 && wd == 80, "160 columns: B on the right half (%d %d %d %d)", y, x, h, wd);
    vz_run_part(38, 100, 2, 1, &y, &x, &h, &wd);
    cr_expect(y == 19 && h == 19 && x == 0 && wd == 100, "100 columns: B below A (%d %d %d %d)", y, x, h, wd);
}

Test(viz_runs, underflow_parts_show_each_runs_own_heat_map) {
    SCREEN *sp = screen(40, 160);
    two_runs t;
    load_two(&t);
    vz_view v;
    vz_view_init(&v);
    v.panel = VZ_PANEL_UNDERFLOW;
    vz_draw_runs(stdscr, t.ms, t.srcs, DIRS, 2, &v, &PLAIN);
    char *text = vz_window_text(stdscr);
    /* block 0's run total in fp16-scale1, summed from its rounding events */
    FILE *f = fopen("viz/samples/fp16-scale1/events.rank0.jsonl", "r");
    cr_assert_not_null(f);
    static char line[65536];
    double flushed = 0, nonzero = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"kind\":\"rounding\"") || !strstr(line, "\"layer\":0,")) continue;
        const char *g = strstr(line, "\"grads\":");
        nonzero += strtod(strstr(g, "\"nonzero\":") + 10, NULL);
        flushed += strtod(strstr(g, "\"flushed\":") + 10, NULL);
    }
    fclose(f);
    char total[32];
    snprintf(total, sizeof total, "%.4f%%", 100 * flushed / nonzero);
    int heat_left = 0, heat_right = 0, divider = 0, total_right = 0;
    for (int y = 1; y < 39; y++) {
        char left[1024], right[1024];
        row_text(stdscr, y, 0, 79, left, sizeof left);
        row_text(stdscr, y, 80, 80, right, sizeof right);
        heat_left += strstr(left, "was flushed") != NULL;
        heat_right += strstr(right, "was flushed") != NULL;
        total_right += strncmp(right, " b0 ", 4) == 0 && strstr(right, total) != NULL;
        divider += cell(stdscr, y, 79) == L'\x2502';
    }
    cr_expect_eq(heat_left, 0, "fp32 run A has no heat map:\n%s", text);
    cr_expect_eq(heat_right, 1, "fp16 run B has one:\n%s", text);
    cr_expect_eq(total_right, 1, "with block 0's run total %s:\n%s", total, text);
    cr_expect_eq(divider, 38, "a line between the parts on every body row: %d\n%s", divider, text);
    cr_expect(strstr(text, " A  synthetic-addition (synthetic-addition, fp32, 1 rank)") &&
                  strstr(text, " B  fp16-scale1 (synthetic-addition, fp16, 1 rank)"),
              "each part is labelled:\n%s", text);
    free(text);
    free_two(&t);
    vz_virtual_screen_end(sp);
}

Test(viz_runs, memory_parts_show_each_runs_peak) {
    SCREEN *sp = screen(40, 160);
    two_runs t;
    load_two(&t);
    vz_view v;
    vz_view_init(&v);
    v.panel = VZ_PANEL_MEMORY;
    vz_draw_runs(stdscr, t.ms, t.srcs, DIRS, 2, &v, &PLAIN);
    char *text = vz_window_text(stdscr);
    for (int r = 0; r < 2; r++) {
        char want[64], b[24], row[1024];
        snprintf(want, sizeof want, "%12s", vz_fmt_bytes(t.m[r].ranks[0].mem.peak_total, b, sizeof b));
        bool found = false;
        for (int y = 1; y < 39 && !found; y++) {
            row_text(stdscr, y, r * 80, 79, row, sizeof row);
            found = strncmp(row, "total", 5) == 0 && strstr(row, want) != NULL;
        }
        cr_expect(found, "run %c's part shows its peak total %s:\n%s", 'A' + r, want, text);
    }
    /* one scale for both parts: B's smaller peak is a shorter bar, in proportion */
    int len[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        char row[1024];
        for (int y = 1; y < 39; y++) {
            row_text(stdscr, y, r * 80, 79, row, sizeof row);
            if (strncmp(row, "    peak", 8) != 0) continue;
            for (int x = r * 80 + 9; x < r * 80 + 79 && cell(stdscr, y, x) != L'\x2502'; x++) len[r] += cell(stdscr, y, x) != L' ';
            break;
        }
    }
    double ratio = (double)len[1] / len[0], want_ratio = t.m[1].ranks[0].mem.peak_total / t.m[0].ranks[0].mem.peak_total;
    cr_expect(len[0] > 0 && ratio < want_ratio + 0.05 && ratio > want_ratio - 0.05,
              "peak bars %d and %d columns: %.2f, as the peaks %.2f\n%s", len[0], len[1], ratio, want_ratio, text);
    free(text);
    free_two(&t);
    vz_virtual_screen_end(sp);
}

Test(viz_runs, one_run_draws_as_before) {
    SCREEN *sp = screen(30, 100);
    two_runs t;
    load_two(&t);
    vz_view v;
    vz_view_init(&v);
    vz_draw_runs(stdscr, t.ms, t.srcs, DIRS, 1, &v, &PLAIN);
    char *one = vz_window_text(stdscr);
    vz_draw_screen(stdscr, t.ms[0], t.srcs[0], &v, &PLAIN);
    char *before = vz_window_text(stdscr);
    cr_expect_str_eq(one, before);
    free(one);
    free(before);
    free_two(&t);
    vz_virtual_screen_end(sp);
}

/* ---------------------------------------------------------------- the step cursor */

static void keys(vz_view *v, const vz_model *m, const char *k) {
    for (; *k; k++) vz_view_key(v, m, *k);
}

Test(viz_runs, step_cursor_keys) {
    SCREEN *sp = screen(30, 100);
    vz_model m;
    vz_source src;
    load(&m, &src, DIRS[1]); /* fp16-scale1: steps 1..100 */
    vz_view v;
    vz_view_init(&v);
    v.panel = VZ_PANEL_UNDERFLOW;
    cr_expect_eq(v.cursor, -1, "the cursor follows the newest step at first");
    vz_view_key(&v, &m, KEY_LEFT);
    cr_expect_eq(v.cursor, 99, "left: one step before the newest (100): %lld", v.cursor);
    vz_view_key(&v, &m, KEY_RIGHT);
    vz_view_key(&v, &m, KEY_RIGHT);
    cr_expect_eq(v.cursor, 100, "right stops at the newest step: %lld", v.cursor);
    keys(&v, &m, "g42");
    cr_expect(v.entering && strcmp(v.entry, "42") == 0 && v.panel == VZ_PANEL_UNDERFLOW,
              "after g, digits are the step (4 does not switch to the memory panel)");
    vz_view_key(&v, &m, '\n');
    cr_expect(!v.entering && v.cursor == 42 && v.jump == 42, "Enter jumps to step 42: %lld", v.cursor);
    keys(&v, &m, "g500\n");
    cr_expect_eq(v.cursor, 100, "a step after the run's last is the last: %lld", v.cursor);
    keys(&v, &m, "g7\033");
    cr_expect(!v.entering && v.cursor == 100, "Esc cancels: %lld", v.cursor);
    vz_view_key(&v, &m, KEY_END);
    cr_expect_eq(v.cursor, -1, "End follows the newest step again");
    vz_view_key(&v, &m, ']');
    cr_expect_eq(v.scroll, 4, "] scrolls the binades in the underflow panel");
    vz_model_free(&m);
    vz_source_close(&src);
    vz_virtual_screen_end(sp);
}

Test(viz_runs, step_cursor_chooses_the_histogram_drawn) {
    SCREEN *sp = screen(36, 120);
    vz_model m;
    vz_source src;
    load(&m, &src, DIRS[1]);
    /* block 0's gradient histogram of step 30 (hist_interval 10: the newest at or before step 35) */
    FILE *f = fopen("viz/samples/fp16-scale1/events.rank0.jsonl", "r");
    cr_assert_not_null(f);
    static char line[65536];
    double count = 0, sub = 0, under = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "\"kind\":\"hist\"") && strstr(line, "\"step\":30,") && strstr(line, "\"tensor\":\"grad\"") &&
            strstr(line, "\"layer\":0,")) {
            count = strtod(strstr(line, "\"count\":") + 8, NULL);
            const char *fp16 = strstr(line, "\"fp16\":{");
            sub = strtod(strstr(fp16, "\"subnormal\":") + 12, NULL);
            under = strtod(strstr(fp16, "\"underflow\":") + 12, NULL);
        }
    fclose(f);
    cr_assert_gt(count, 0, "the sample has block 0's histogram of step 30");
    vz_view v;
    vz_view_init(&v);
    v.panel = VZ_PANEL_UNDERFLOW;
    v.layer = 0;
    v.cursor = 35;
    WINDOW *w = newwin(34, 120, 0, 0);
    vz_panel_underflow(w, &m, &v, &PLAIN);
    char *text = vz_window_text(w);
    cr_expect(strncmp(text, "gradient exponents: block 0, step 30 (cursor 35),", 49) == 0, "the title:\n%s", text);
    char want[64];
    snprintf(want, sizeof want, "> b0    %8.2f%% %8.2f%%", 100 * under / count, 100 * sub / count);
    cr_expect(strstr(text, want) != NULL, "block 0's row has step 30's fp16 shares (%s):\n%s", want, text);
    /* the arrow under step 35's column: steps 1..100 over 100 columns from column 7 */
    int rows = getmaxy(w), arrow = -1;
    for (int x = 0; x < 120; x++)
        if (cell(w, rows - 1, x) == L'\x2191') arrow = x;
    cr_expect_eq(arrow, 7 + 34, "the cursor's arrow in the skip row at step 35's column: %d\n%s", arrow, text);
    free(text);
    delwin(w);
    vz_model_free(&m);
    vz_source_close(&src);
    vz_virtual_screen_end(sp);
}

Test(viz_runs, no_size_crashes_any_panel_of_two_or_four_runs) {
    SCREEN *sp = screen(70, 240);
    two_runs t;
    load_two(&t);
    const vz_model *four[4] = {t.ms[0], t.ms[1], t.ms[0], t.ms[1]};
    const vz_source *srcs[4] = {t.srcs[0], t.srcs[1], t.srcs[0], t.srcs[1]};
    const char *dirs[4] = {DIRS[0], DIRS[1], DIRS[0], DIRS[1]};
    static const int SIZES[][2] = {{1, 1}, {19, 71}, {20, 72}, {24, 80}, {30, 100}, {36, 120}, {40, 160}, {70, 240}};
    for (size_t k = 0; k < sizeof SIZES / sizeof SIZES[0]; k++)
        for (int n = 2; n <= 4; n += 2)
            for (int p = 0; p < VZ_NPANELS; p++) {
                WINDOW *w = newwin(SIZES[k][0], SIZES[k][1], 0, 0);
                cr_assert_not_null(w);
                vz_view v;
                vz_view_init(&v);
                v.panel = (vz_panel)p;
                v.cursor = 50;
                v.help = p == 3;
                vz_draw_runs(w, four, srcs, dirs, n, &v, &PLAIN);
                char *text = vz_window_text(w);
                if (SIZES[k][1] < VZ_MIN_COLS)
                    cr_expect(strstr(text, "terminal too small") != NULL || SIZES[k][1] < 20, "%dx%d", SIZES[k][1], SIZES[k][0]);
                free(text);
                delwin(w);
            }
    free_two(&t);
    vz_virtual_screen_end(sp);
}

Test(viz_runs, stacked_underflow_parts_keep_the_heat_map) {
    SCREEN *sp = screen(30, 100);
    two_runs t;
    load_two(&t);
    vz_view v;
    vz_view_init(&v);
    v.panel = VZ_PANEL_UNDERFLOW;
    vz_draw_runs(stdscr, t.ms, t.srcs, DIRS, 2, &v, &PLAIN);
    char *text = vz_window_text(stdscr);
    const vz_rounding_total *b0 = vz_model_rounding_total(&t.m[1], 0);
    cr_assert_not_null(b0);
    char total[32];
    snprintf(total, sizeof total, "%.4f%%", vz_share_pct(b0->flushed, b0->nonzero));
    const char *part_b = strstr(text, " B  fp16-scale1");
    cr_assert_not_null(part_b, "run B's part below run A's:\n%s", text);
    cr_expect(strstr(part_b, "was flushed") && strstr(part_b, total), "B's heat map with block 0's total %s:\n%s", total, text);
    cr_expect(strstr(text, "binade") == NULL, "no histogram squeezed into 13 rows:\n%s", text);
    cr_expect(strstr(text, "no rounding events: this fp32 run") != NULL, "A (fp32) says why it has no heat map:\n%s", text);
    free(text);
    free_two(&t);
    vz_virtual_screen_end(sp);
}
