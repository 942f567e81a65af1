/* test_viz_draw.c: Criterion tests of the visualizer's drawing (viz/screen.c, viz/panel_*.c) on virtual
 * screens (curses on /dev/null, sized by the test): cells are read back and checked: the fp16 and e4m3 zone
 * edges sit in the columns of their binades, the histogram's tallest bin reaches the top, comm overlapping
 * backward shows in the same columns, bars are proportional, the too-small screen appears below the minimum,
 * ASCII style writes ASCII only, and no size (1x1 to 240x70) crashes a panel. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../viz/formats.h"
#include "../../viz/panels.h"
#include "../../viz/screen.h"

static const vz_style UNICODE = {.color = false, .unicode = true};
static const vz_style ASCII = {.color = false, .unicode = false};

static void apply(vz_model *m, int rank, const char *json) {
    cJSON *ev = cJSON_Parse(json);
    cr_assert_not_null(ev, "test event is not JSON: %s", json);
    vz_model_apply(m, rank, ev);
    cJSON_Delete(ev);
}

static SCREEN *screen(int rows, int cols) {
    cr_assert(vz_locale_utf8(true), "a UTF-8 locale (C.UTF-8) is needed for the wide-character tests");
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

/* A run like the trainer's: header, a few steps, one layer's histogram with a known shape. */
static void sample_model(vz_model *m) {
    vz_model_init(m);
    apply(m, 0, "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"crafted\",\"world\":1,\"params\":1000,"
                "\"plan\":{\"param\":4000,\"grad\":4000,\"master\":0,\"optim\":8000,\"act\":4000,\"comm\":0,\"other\":0},"
                "\"config\":{\"model\":{\"layers\":2},\"train\":{\"steps\":10}}}");
    for (int s = 1; s <= 10; s++) {
        char buf[256];
        snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":%d,\"step\":%d,\"loss\":%g,\"lr\":0.001,"
                                  "\"scale\":1,\"skipped\":false,\"grad_norm\":1,\"tokens_per_s\":1000}", s, s, 5.0 - 0.25 * s);
        apply(m, 0, buf);
    }
    /* binades -40 .. -20: a peak of 1000 at -30 */
    apply(m, 0, "{\"v\":1,\"kind\":\"hist\",\"rank\":0,\"t\":10,\"step\":10,\"tensor\":\"grad\",\"layer\":0,\"format\":\"fp32\","
                "\"scale\":1,\"count\":2000,\"zero\":0,\"nonfinite\":0,\"first_binade\":-40,"
                "\"bins\":[1,2,4,8,16,32,64,128,256,512,1000,512,256,128,64,32,16,8,4,2,1],"
                "\"targets\":{\"fp16\":{\"subnormal\":400,\"underflow\":100,\"overflow\":0}}}");
}

Test(viz_draw, fp16_and_e4m3_zone_edges_sit_in_their_binade_columns) {
    SCREEN *sp = screen(28, 100);
    vz_model m;
    sample_model(&m);
    vz_view v;
    vz_view_init(&v);
    v.panel = VZ_PANEL_UNDERFLOW;
    v.layer = 0;
    vz_view_clamp(&v, &m);
    WINDOW *w = newwin(28, 100, 0, 0);
    vz_panel_underflow(w, &m, &v, &UNICODE);
    vz_underflow_layout L = vz_underflow_layout_for(&m, &v, 28, 100);
    cr_assert(L.lo <= -26 && L.hi >= 17, "the range shows fp16's edges: binades %d..%d", L.lo, L.hi);
    const wchar_t NORMAL = L'\x2588', SUBNORMAL = L'\x2592', ZERO = L'\x00b7', OVERFLOW = L'\x00d7';
    struct {
        const char *format;
        int binade;
        wchar_t glyph;
    } edges[] = {
        {"fp16", -25, ZERO}, {"fp16", -24, SUBNORMAL}, {"fp16", -15, SUBNORMAL}, {"fp16", -14, NORMAL},
        {"fp16", 15, NORMAL}, {"fp16", 16, OVERFLOW},   {"e4m3", -10, ZERO},     {"e4m3", -9, SUBNORMAL},
        {"e4m3", -6, NORMAL}, {"e4m3", 8, NORMAL},      {"e4m3", 9, OVERFLOW},   {"e5m2", -17, ZERO},
        {"e5m2", -16, SUBNORMAL}, {"bf16", -30, NORMAL}, {"fp32", 16, NORMAL},
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        int row = L.format_row + (int)(vz_format_by_name(edges[i].format) - VZ_FORMATS);
        int col = L.first_col + (edges[i].binade - L.lo);
        wchar_t got = cell(w, row, col);
        cr_expect_eq(got, edges[i].glyph, "%s binade %d (row %d, column %d): expected U+%04X, got U+%04X", edges[i].format,
                     edges[i].binade, row, col, (unsigned)edges[i].glyph, (unsigned)got);
    }
    /* the row label names the format */
    char label[8] = {0};
    mvwinnstr(w, L.format_row + 2, 0, label, 6);
    cr_expect(strstr(label, "fp16") != NULL, "row %d label: '%s'", L.format_row + 2, label);
    /* the axis label "-24" starts in binade -24's column */
    char axis[8] = {0};
    mvwinnstr(w, L.axis_row, L.first_col + (-24 - L.lo), axis, 3);
    cr_expect_str_eq(axis, "-24");
    vz_model_free(&m);
    delwin(w);
    vz_virtual_screen_end(sp);
}

Test(viz_draw, histogram_columns_follow_the_bins) {
    SCREEN *sp = screen(28, 100);
    vz_model m;
    sample_model(&m);
    vz_view v;
    vz_view_init(&v);
    v.layer = 0;
    vz_view_clamp(&v, &m);
    WINDOW *w = newwin(28, 100, 0, 0);
    vz_panel_underflow(w, &m, &v, &UNICODE);
    vz_underflow_layout L = vz_underflow_layout_for(&m, &v, 28, 100);
    int peak = L.first_col + (-30 - L.lo), bottom = L.hist_top + L.hist_rows - 1;
    cr_expect_eq(cell(w, L.hist_top, peak), L'\x2588', "the tallest bin fills its column to the top");
    cr_expect_eq(cell(w, L.hist_top, peak - 5), L' ', "binade -35 (32 values) does not reach the top");
    cr_expect_neq(cell(w, bottom, peak - 5), L' ', "but it has a bar");
    cr_expect_eq(cell(w, bottom, peak - 11), L' ', "binade -41 is empty");
    cr_expect_eq(cell(w, bottom, peak + 11), L' ', "binade -19 is empty");
    /* log scale: 32 values reach log(33)/log(1001) ~ 0.51 of the height */
    int rows_32 = 0;
    for (int r = 0; r < L.hist_rows; r++) rows_32 += cell(w, L.hist_top + r, peak - 5) != L' ';
    cr_expect(rows_32 >= L.hist_rows / 2 - 1 && rows_32 <= L.hist_rows / 2 + 1, "32 of 1000 fills %d of %d rows", rows_32,
              L.hist_rows);
    vz_model_free(&m);
    delwin(w);
    vz_virtual_screen_end(sp);
}

Test(viz_draw, underflow_shares_and_layer_table_show_the_event_counts) {
    SCREEN *sp = screen(28, 100);
    vz_model m;
    sample_model(&m);
    vz_view v;
    vz_view_init(&v);
    v.layer = 0;
    vz_view_clamp(&v, &m);
    WINDOW *w = newwin(28, 100, 0, 0);
    vz_panel_underflow(w, &m, &v, &UNICODE);
    char *text = vz_window_text(w);
    cr_assert_not_null(text);
    cr_expect(strstr(text, "fp16       5.00%     20.00%") != NULL, "100 of 2000 to zero, 400 subnormal:\n%s", text);
    cr_expect(strstr(text, "> b0        5.00%    20.00%") != NULL, "the chosen layer is marked:\n%s", text);
    cr_expect(strstr(text, "loss scale 1 at every step (fp32 run: no loss scaling); 0 of 10 steps skipped") != NULL, "%s", text);
    free(text);
    vz_model_free(&m);
    delwin(w);
    vz_virtual_screen_end(sp);
}

Test(viz_draw, comm_overlapping_backward_shares_its_columns) {
    SCREEN *sp = screen(30, 100);
    vz_model m;
    vz_model_init(&m);
    apply(&m, 0, "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"ddp\",\"world\":2}");
    for (int r = 0; r < 2; r++) {
        char buf[256];
        /* step 1 and 2: forward 0..1, backward 1..2, optimizer 2..2.2; allreduce of bucket 3 from 1.5 to 2.1 */
        for (int s = 0; s < 2; s++) {
            double o = 2.2 * s;
            snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"span\",\"rank\":%d,\"t\":%g,\"name\":\"forward\",\"step\":%d,\"t0\":%g,\"t1\":%g}", r, o + 1, s + 1, o, o + 1);
            apply(&m, r, buf);
            snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"span\",\"rank\":%d,\"t\":%g,\"name\":\"backward\",\"step\":%d,\"t0\":%g,\"t1\":%g}", r, o + 2, s + 1, o + 1, o + 2);
            apply(&m, r, buf);
            snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"comm\",\"rank\":%d,\"t\":%g,\"op\":\"allreduce\",\"algorithm\":\"ring\",\"bytes\":4000000,\"peer\":-1,\"t0\":%g,\"t1\":%g,\"bucket\":3,\"ranks\":2}", r, o + 2.1, o + 1.5, o + 2.1);
            apply(&m, r, buf);
            snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"span\",\"rank\":%d,\"t\":%g,\"name\":\"optimizer\",\"step\":%d,\"t0\":%g,\"t1\":%g}", r, o + 2.2, s + 1, o + 2.1, o + 2.2);
            apply(&m, r, buf);
        }
    }
    vz_view v;
    vz_view_init(&v);
    v.panel = VZ_PANEL_COMM;
    v.zoom = -1; /* the whole 4.4 s */
    vz_view_clamp(&v, &m);
    WINDOW *w = newwin(28, 100, 0, 0);
    vz_panel_comm(w, &m, &v, &UNICODE);
    char *text = vz_window_text(w);
    cr_assert_not_null(text);
    /* rows 2,3: rank 0 compute, comm; rows 4,5: rank 1 */
    int overlap = 0, comm_cells = 0;
    for (int x = 9; x < 100; x++) {
        wchar_t c = cell(w, 3, x);
        if (c != L'3') continue;
        comm_cells++;
        overlap += cell(w, 2, x) == L'B';
    }
    cr_expect_gt(comm_cells, 0, "bucket 3's allreduce is drawn as '3' on rank 0's comm row:\n%s", text);
    cr_expect_gt(overlap, comm_cells / 2, "most of it lies under backward ('B'): %d of %d cells\n%s", overlap, comm_cells, text);
    cr_expect_eq(cell(w, 5, 9 + 0), cell(w, 3, 9 + 0), "rank 1's comm row matches rank 0's");
    cr_expect(strstr(text, "allreduce       ring") != NULL, "the table names the collective:\n%s", text);
    cr_expect(strstr(text, "4.00 MB") != NULL, "bytes per call:\n%s", text);
    /* 4 MB in 0.6 s over 2 ranks: algbw 0.00667 GB/s, busbw the same (2(n-1)/n = 1) */
    cr_expect(strstr(text, "0.01 GB/s") != NULL, "bandwidth:\n%s", text);
    cr_expect(strstr(text, "from comm events: 4.00 MB over 2 ranks") != NULL, "the ring view uses the real allreduce:\n%s", text);
    free(text);
    vz_model_free(&m);
    delwin(w);
    vz_virtual_screen_end(sp);
}

Test(viz_draw, ring_view_labels_model_or_real) {
    SCREEN *sp = screen(30, 100);
    vz_model m;
    vz_model_init(&m);
    vz_view v;
    vz_view_init(&v);
    v.panel = VZ_PANEL_COMM;
    v.ring_ranks = 3;
    vz_view_clamp(&v, &m);
    vz_view_ring_tick(&v, &m); /* resets to 3 ranks */
    vz_view_ring_tick(&v, &m); /* step 1 done */
    WINDOW *w = newwin(28, 100, 0, 0);
    vz_panel_comm(w, &m, &v, &UNICODE);
    char *text = vz_window_text(w);
    cr_expect(strstr(text, "alpha-beta model") != NULL, "%s", text);
    cr_expect(strstr(text, "step 2/4 reduce-scatter") != NULL, "%s", text);
    /* after step 1 of 3 ranks, rank r holds 2 contributions in chunk r-1 and sends it */
    cr_expect(strstr(text, "rank 0  [1][1]<2>") != NULL, "%s", text);
    free(text);
    vz_model_free(&m);
    delwin(w);
    vz_virtual_screen_end(sp);
}

Test(viz_draw, memory_bars_are_proportional_to_bytes) {
    SCREEN *sp = screen(30, 100);
    vz_model m;
    vz_model_init(&m);
    apply(&m, 0, "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"mem\",\"world\":1,"
                 "\"plan\":{\"param\":1000,\"grad\":1000,\"master\":0,\"optim\":2000,\"act\":4000,\"comm\":0,\"other\":0}}");
    apply(&m, 0, "{\"v\":1,\"kind\":\"mem\",\"rank\":0,\"t\":1,\"step\":1,\"current\":{\"param\":1000,\"act\":1000},"
                 "\"peak\":{\"param\":1000,\"grad\":1000,\"optim\":2000,\"act\":4000},\"peak_total\":8000}");
    vz_view v;
    vz_view_init(&v);
    vz_view_clamp(&v, &m);
    WINDOW *w = newwin(28, 100, 0, 0);
    vz_panel_memory(w, &m, &v, &UNICODE);
    int count[128] = {0};
    for (int x = 0; x < 100; x++) {
        wchar_t c = cell(w, 3, x); /* the peak row */
        if (c < 128) count[c]++;
    }
    cr_expect_gt(count['A'], 0);
    cr_expect(abs(count['A'] - 2 * count['O']) <= 1 && abs(count['O'] - 2 * count['P']) <= 1 && abs(count['P'] - count['G']) <= 1,
              "act 4000, optim 2000, param 1000, grad 1000 bytes: %d A, %d O, %d P, %d G cells", count['A'], count['O'],
              count['P'], count['G']);
    char *text = vz_window_text(w);
    cr_expect(strstr(text, "act           1.00 kB      4.00 kB      4.00 kB       100%") != NULL, "%s", text);
    free(text);
    vz_model_free(&m);
    delwin(w);
    vz_virtual_screen_end(sp);
}

Test(viz_draw, memory_host_pool_is_its_own_line_outside_the_device_total) {
    SCREEN *sp = screen(30, 100);
    vz_model m;
    vz_model_init(&m);
    apply(&m, 0, "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"mem\",\"world\":1,"
                 "\"plan\":{\"param\":1000,\"grad\":1000,\"master\":0,\"optim\":0,\"act\":2000,\"comm\":0,\"other\":0,"
                 "\"host\":4000}}");
    apply(&m, 0, "{\"v\":1,\"kind\":\"mem\",\"rank\":0,\"t\":1,\"step\":1,\"current\":{\"param\":1000,\"act\":1000,"
                 "\"host\":4000},\"peak\":{\"param\":1000,\"grad\":1000,\"act\":2000,\"host\":4000},\"peak_total\":4000}");
    vz_view v;
    vz_view_init(&v);
    vz_view_clamp(&v, &m);
    WINDOW *w = newwin(28, 100, 0, 0);
    vz_panel_memory(w, &m, &v, &UNICODE);
    int hosts = 0, acts = 0;
    for (int y = 2; y < 5; y++)
        for (int x = 0; x < 100; x++) {
            hosts += cell(w, y, x) == 'H';
            acts += cell(w, y, x) == 'A';
        }
    cr_expect(acts > 0 && hosts == 0, "the bars are device memory: %d A cells, %d H cells", acts, hosts);
    char *text = vz_window_text(w);
    cr_expect(strstr(text, "total         2.00 kB      4.00 kB      4.00 kB       100%") != NULL, "%s", text);
    cr_expect(strstr(text, "host          4.00 kB      4.00 kB      4.00 kB       100%  (host memory, not in the total)") !=
              NULL, "%s", text);
    free(text);
    vz_model_free(&m);
    delwin(w);
    vz_virtual_screen_end(sp);
}

Test(viz_draw, too_small_screen_below_the_minimum_and_panels_at_it) {
    vz_model m;
    sample_model(&m);
    vz_view v;
    vz_view_init(&v);
    vz_view_clamp(&v, &m);
    SCREEN *sp = screen(VZ_MIN_ROWS - 1, VZ_MIN_COLS + 30);
    vz_draw_screen(stdscr, &m, NULL, &v, &UNICODE);
    char *text = vz_window_text(stdscr);
    cr_expect(strstr(text, "terminal too small") != NULL, "one row short:\n%s", text);
    cr_expect(strstr(text, "needs 72x20, have 102x19") != NULL, "%s", text);
    free(text);
    vz_virtual_screen_end(sp);

    sp = screen(VZ_MIN_ROWS, VZ_MIN_COLS);
    vz_draw_screen(stdscr, &m, NULL, &v, &UNICODE);
    text = vz_window_text(stdscr);
    cr_expect(strstr(text, "terminal too small") == NULL, "the minimum size fits:\n%s", text);
    cr_expect(strstr(text, "[1 Loss]") != NULL, "the tab bar:\n%s", text);
    cr_expect(strstr(text, "step 10/10  loss 2.5000") != NULL, "the loss header:\n%s", text);
    free(text);
    vz_virtual_screen_end(sp);
    vz_model_free(&m);
}

Test(viz_draw, ascii_style_writes_ascii_only) {
    vz_model m;
    sample_model(&m);
    SCREEN *sp = screen(30, 100);
    for (int p = 0; p < VZ_NPANELS; p++) {
        vz_view v;
        vz_view_init(&v);
        v.panel = (vz_panel)p;
        vz_view_clamp(&v, &m);
        vz_draw_screen(stdscr, &m, NULL, &v, &ASCII);
        for (int y = 0; y < 30; y++)
            for (int x = 0; x < 100; x++) {
                wchar_t c = cell(stdscr, y, x);
                cr_assert(c >= 0x20 && c < 0x7f, "panel %s: U+%04X at (%d, %d)", VZ_PANEL_NAMES[p], (unsigned)c, y, x);
            }
    }
    vz_virtual_screen_end(sp);
    vz_model_free(&m);
}

Test(viz_draw, every_panel_survives_every_size) {
    vz_model m;
    sample_model(&m);
    static const int SIZES[][2] = {{1, 1}, {3, 10}, {19, 71}, {20, 72}, {21, 73}, {24, 80}, {30, 100}, {45, 160}, {70, 240}};
    for (size_t i = 0; i < sizeof SIZES / sizeof SIZES[0]; i++) {
        SCREEN *sp = screen(SIZES[i][0], SIZES[i][1]);
        for (int p = 0; p < VZ_NPANELS; p++) {
            vz_view v;
            vz_view_init(&v);
            v.panel = (vz_panel)p;
            v.help = p == 0;
            vz_view_clamp(&v, &m);
            vz_draw_screen(stdscr, &m, NULL, &v, &UNICODE);
            char *text = vz_window_text(stdscr);
            cr_assert_not_null(text);
            free(text);
        }
        vz_virtual_screen_end(sp);
    }
    vz_model_free(&m);
}

Test(viz_draw, keys_switch_panels_layers_and_quit) {
    vz_model m;
    sample_model(&m);
    apply(&m, 0, "{\"v\":1,\"kind\":\"hist\",\"rank\":0,\"t\":10,\"step\":10,\"layer\":-1,\"first_binade\":-3,\"bins\":[1]}");
    vz_view v;
    vz_view_init(&v);
    vz_view_clamp(&v, &m);
    cr_expect_eq(v.layer, -1);
    cr_expect(vz_view_key(&v, &m, '\t'));
    cr_expect_eq(v.panel, VZ_PANEL_UNDERFLOW);
    vz_view_key(&v, &m, KEY_DOWN);
    vz_view_key(&v, &m, KEY_DOWN);
    cr_expect_eq(v.layer, 0, "layers stop at the last with a histogram");
    vz_view_key(&v, &m, '4');
    cr_expect_eq(v.panel, VZ_PANEL_MEMORY);
    vz_view_key(&v, &m, KEY_BTAB);
    cr_expect_eq(v.panel, VZ_PANEL_COMM);
    vz_view_key(&v, &m, ' ');
    cr_expect(v.paused);
    vz_view_key(&v, &m, 'h');
    cr_expect(v.help);
    vz_view_key(&v, &m, 'x');
    cr_expect(!v.help, "any key closes the help");
    cr_expect(!vz_view_key(&v, &m, 'q'));
    vz_model_free(&m);
}

Test(viz_draw, short_optimizer_and_data_spans_keep_a_column_beside_long_ones) {
    SCREEN *sp = screen(30, 100);
    vz_model m;
    vz_model_init(&m);
    apply(&m, 0, "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"short\",\"world\":1}");
    /* 8 steps of 180 ms: data 12 us, forward 60 ms, backward 119.6 ms, optimizer 0.35 ms; the 1.44 s on ~90
     * columns puts 16 ms in a column, so the optimizer and the next data wait share one with backward */
    const struct { const char *name; double t0, t1; } PHASES[] = {
        {"data", 0, 0.000012}, {"forward", 0.000012, 0.06}, {"backward", 0.06, 0.17965}, {"optimizer", 0.17965, 0.18}};
    for (int s = 0; s < 8; s++)
        for (int p = 0; p < 4; p++) {
            char buf[256];
            double o = 0.18 * s;
            snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"span\",\"rank\":0,\"t\":%.6f,\"name\":\"%s\",\"step\":%d,\"t0\":%.6f,\"t1\":%.6f}",
                     o + PHASES[p].t1, PHASES[p].name, s + 1, o + PHASES[p].t0, o + PHASES[p].t1);
            apply(&m, 0, buf);
        }
    vz_view v;
    vz_view_init(&v);
    v.panel = VZ_PANEL_COMM;
    v.zoom = -2; /* 4 x 3 periods: the whole run */
    vz_view_clamp(&v, &m);
    WINDOW *w = newwin(28, 100, 0, 0);
    vz_panel_comm(w, &m, &v, &UNICODE);
    char *text = vz_window_text(w);
    int optimizers = 0, data = 0;
    for (int x = 9; x < 100; x++) {
        optimizers += cell(w, 2, x) == L'O';
        data += cell(w, 2, x) == L'*';
    }
    cr_expect_eq(optimizers, 8, "every step's optimizer span shows its O: %d of 8\n%s", optimizers, text);
    cr_expect_eq(data, 8, "every step's data wait shows its *: %d of 8\n%s", data, text);
    free(text);
    vz_model_free(&m);
    delwin(w);
    vz_virtual_screen_end(sp);
}

Test(viz_draw, zero3_ring_view_shows_its_reduce_scatter_or_allgather_not_the_loss_allreduce) {
    SCREEN *sp = screen(30, 100);
    vz_model m;
    vz_model_init(&m);
    apply(&m, 0, "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"zero3\",\"world\":4}");
    for (int i = 0; i < 5; i++) {
        char buf[256];
        double o = i;
        snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"comm\",\"rank\":0,\"t\":%g,\"op\":\"allgather\",\"algorithm\":\"ring\",\"bytes\":2000000,\"peer\":-1,\"t0\":%g,\"t1\":%g,\"ranks\":4}", o + 0.2, o + 0.1, o + 0.2);
        apply(&m, 0, buf);
        snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"comm\",\"rank\":0,\"t\":%g,\"op\":\"reduce_scatter\",\"algorithm\":\"ring\",\"bytes\":1000000,\"peer\":-1,\"t0\":%g,\"t1\":%g,\"ranks\":4}", o + 0.5, o + 0.3, o + 0.5);
        apply(&m, 0, buf);
        for (int k = 0; k < 3; k++) { /* the loss allreduce: more calls, 4 bytes */
            snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"comm\",\"rank\":0,\"t\":%g,\"op\":\"allreduce\",\"algorithm\":\"ring\",\"bytes\":4,\"peer\":-1,\"t0\":%g,\"t1\":%g,\"ranks\":4}", o + 0.7, o + 0.6, o + 0.7);
            apply(&m, 0, buf);
        }
    }
    vz_view v;
    vz_view_init(&v);
    v.panel = VZ_PANEL_COMM;
    vz_view_clamp(&v, &m);
    vz_view_ring_tick(&v, &m); /* a fresh allgather: the 3 reduce-scatter steps are skipped */
    WINDOW *w = newwin(28, 100, 0, 0);
    vz_panel_comm(w, &m, &v, &UNICODE);
    char *text = vz_window_text(w);
    cr_expect(strstr(text, "ring allgather from comm events: 2.00 MB over 4 ranks") != NULL, "%s", text);
    cr_expect(strstr(text, "step 1/3 allgather") != NULL, "an allgather is 3 steps on 4 ranks:\n%s", text);
    cr_expect(strstr(text, "4 B over") == NULL, "not the loss allreduce:\n%s", text);
    cr_expect(strstr(text, "also: reduce_scatter ring (mixpar)") != NULL, "the reduce-scatter is named:\n%s", text);
    free(text);
    delwin(w);
    /* the same run with MPI's own allgather: no ring is drawn */
    apply(&m, 0, "{\"v\":1,\"kind\":\"comm\",\"rank\":0,\"t\":9,\"op\":\"allgather\",\"algorithm\":\"native\",\"bytes\":90000000,\"peer\":-1,\"t0\":8,\"t1\":9,\"ranks\":4}");
    w = newwin(28, 100, 0, 0);
    vz_panel_comm(w, &m, &v, &UNICODE);
    text = vz_window_text(w);
    cr_expect(strstr(text, "algorithm: native (MPI library)") != NULL, "%s", text);
    cr_expect(strstr(text, "rank 0  [") == NULL && strstr(text, "rank 0  <") == NULL, "no ring cells:\n%s", text);
    free(text);
    vz_model_free(&m);
    delwin(w);
    vz_virtual_screen_end(sp);
}

Test(viz_draw, rare_skips_in_a_long_run_do_not_mark_every_column) {
    SCREEN *sp = screen(30, 100);
    vz_model m;
    vz_model_init(&m);
    apply(&m, 0, "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"long\",\"world\":1,\"precision\":{\"recipe\":\"fp16\"},"
                "\"config\":{\"model\":{\"layers\":1},\"train\":{\"steps\":20000}}}");
    for (int s = 1; s <= 20000; s++) { /* one skip per 997 steps, the scale halving then growing back */
        char buf[256];
        bool skip = s % 997 == 0;
        snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":%d,\"step\":%d,\"loss\":1,\"lr\":0.001,"
                                  "\"scale\":%d,\"skipped\":%s,\"grad_norm\":1,\"tokens_per_s\":1}", s, s, s % 997 < 500 ? 32768 : 65536,
                 skip ? "true" : "false");
        apply(&m, 0, buf);
        if (s % 100 == 0) {
            snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"rounding\",\"rank\":0,\"t\":%d,\"step\":%d,\"layer\":0,\"compute\":\"fp16\","
                                      "\"grads\":{\"values\":1000,\"nonzero\":1000,\"flushed\":%d,\"overflowed\":0}}", s, s, s < 10000 ? 30 : 0);
            apply(&m, 0, buf);
        }
    }
    vz_view v;
    vz_view_init(&v);
    v.panel = VZ_PANEL_UNDERFLOW;
    vz_view_clamp(&v, &m);
    WINDOW *w = newwin(28, 100, 0, 0);
    vz_panel_underflow(w, &m, &v, &UNICODE);
    char *text = vz_window_text(w);
    /* rows from the bottom: skip (27), scale (26), b0 (25) */
    int crosses = 0, dots = 0, bars = 0, flushed = 0, none = 0;
    for (int x = 7; x < 90; x++) {
        crosses += cell(w, 27, x) == L'\x00d7';
        dots += cell(w, 27, x) == L'\x00b7';
        bars += cell(w, 26, x) != L' ';
        flushed += cell(w, 25, x) == L'\x2592'; /* 3% flushed: >= 1% */
        none += cell(w, 25, x) == L'\x00b7';
    }
    cr_expect_eq(crosses, 0, "20 skips in 20000 steps mark no column with x:\n%s", text);
    cr_expect_gt(dots, 10, "but each shows as a dot: %d\n%s", dots, text);
    cr_expect_eq(bars, 83, "the scale row is drawn in every column: %d\n%s", bars, text);
    cr_expect(flushed > 35 && none > 35, "the first half flushed 3%%, the second none: %d, %d\n%s", flushed, none, text);
    cr_expect(strstr(text, "1.4850%") != NULL, "b0's run total: 99 events x 30 of 200 x 1000 = 1.485%%:\n%s", text);
    free(text);
    vz_model_free(&m);
    delwin(w);
    vz_virtual_screen_end(sp);
}

/* Memory over time: the history chart of the rank in focus, the capacity line from the run header's
 * train.max_memory, and a tag whose peak passed the plan marked in its table row. */
Test(viz_draw, memory_history_capacity_line_and_tags_over_plan) {
    SCREEN *sp = screen(40, 160);
    vz_model m;
    vz_model_init(&m);
    apply(&m, 0, "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"crafted\",\"world\":1,\"params\":1000,"
                 "\"plan\":{\"param\":4000000,\"grad\":4000000,\"master\":0,\"optim\":8000000,\"act\":2000000,\"comm\":0,\"other\":0},"
                 "\"config\":{\"model\":{\"layers\":2},\"train\":{\"steps\":100,\"max_memory\":20000000}}}");
    for (int st = 0; st <= 100; st += 10) { /* act grows from 1 MB to 3 MB: over its 2 MB plan */
        char buf[512];
        double act = 1e6 + st * 2e4;
        snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"mem\",\"rank\":0,\"t\":%d,\"step\":%d,"
                 "\"current\":{\"param\":4000000,\"grad\":4000000,\"optim\":8000000,\"act\":%.0f},"
                 "\"peak\":{\"param\":4000000,\"grad\":4000000,\"optim\":8000000,\"act\":%.0f},\"peak_total\":%.0f}",
                 st, st, act, act, 16e6 + act);
        apply(&m, 0, buf);
    }
    cr_expect_eq(m.max_memory, 20e6, "max_memory read from the run header's config: %g", m.max_memory);
    cr_expect_eq(vz_model_mem_samples(&m, 0), 11);
    cr_expect(vz_model_over_plan(&m, 0, VZ_TAG_ACT) && !vz_model_over_plan(&m, 0, VZ_TAG_PARAM));
    vz_view v;
    vz_view_init(&v);
    v.panel = VZ_PANEL_MEMORY;
    WINDOW *w = newwin(38, 160, 0, 0);
    vz_panel_memory(w, &m, &v, &UNICODE);
    char *text = vz_window_text(w);
    cr_expect(strstr(text, "r0 MB over steps, capacity 20.0 MB") != NULL, "the history's title names the capacity:\n%s", text);
    cr_expect(strstr(text, "150% over plan") != NULL, "act at 3 MB against a 2 MB plan:\n%s", text);
    const char *param = strstr(text, "\nparam  ");
    cr_assert_not_null(param, "a param row:\n%s", text);
    const char *eol = strchr(param + 1, '\n'), *over = strstr(param + 1, "over plan");
    cr_expect(strstr(param, "100%") < eol && over > eol, "param at its plan is not marked:\n%s", text);
    /* the capacity (20 MB) is the chart's top: its line fills the first plot row, right of the y labels */
    int title_row = -1;
    for (int y = 0; y < 38 && title_row < 0; y++)
        if (cell(w, y, 70) == L'r' && cell(w, y, 71) == L'0') title_row = y;
    cr_assert_geq(title_row, 0, "the chart is right of the table at 160 columns:\n%s", text);
    int dots = 0, plot_x = 70 + 9;
    for (int x = plot_x; x < 160; x++) dots += cell(w, title_row + 1, x) == L'=';
    cr_expect_gt(dots, (160 - plot_x) * 9 / 10, "the capacity line across the top row (no colour: '='): %d cells\n%s", dots, text);
    /* the total climbs from 17 to 19 MB: it is drawn below the capacity, not on the top row alone */
    int below = 0;
    for (int y = title_row + 2; y < 38; y++)
        for (int x = plot_x; x < 160; x++) below += cell(w, y, x) >= 0x2800 && cell(w, y, x) <= 0x28ff;
    cr_expect_gt(below, 20, "the total and the tags below it:\n%s", text);
    free(text);
    delwin(w);
    vz_model_free(&m);
    vz_virtual_screen_end(sp);
}

Test(viz_draw, text_cut_short_ends_in_a_marker_padding_does_not) {
    SCREEN *sp = screen(5, 20);
    WINDOW *w = newwin(5, 20, 0, 0);
    cr_assert_not_null(w);
    int n = vz_text(w, 0, 0, 10, A_NORMAL, "%s", "loss 2.0110  val 2.0194");
    cr_expect_eq(n, 10);
    cr_expect_eq(cell(w, 0, 8), L'1', "the text up to the cut");
    cr_expect_eq(cell(w, 0, 9), L'>', "got '%lc': the last column says more was left out", (wint_t)cell(w, 0, 9));
    vz_text(w, 1, 0, 6, A_NORMAL, "%-12s", "abc"); /* only padding cut */
    cr_expect_eq(cell(w, 1, 5), L' ', "cutting spaces loses nothing: no marker");
    vz_text(w, 2, 15, 40, A_NORMAL, "%s", "window edge"); /* cut by the window, not maxw */
    cr_expect_eq(cell(w, 2, 19), L'>');
    delwin(w);
    endwin();
    delscreen(sp);
}
