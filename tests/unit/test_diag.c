/* test_diag.c: Criterion tests of the diagnosis rules (diag/diag.c, lab 24) on series with known answers, and of
 * the event reader's report of the first malformed line (viz/source.c), which `mixpar doctor` names by file:line. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../viz/source.h"
#include "base/mem.h"
#include "diag/diag.h"

Test(diag, divergence_nan_spike_and_healthy) {
    diag_divergence_rule rule = DIAG_DIVERGENCE_DEFAULT;
    diag_divergence d;
    double nan_at_3[5] = {3, 2.9, 2.8, NAN, 2.7};
    cr_expect(diag_find_divergence(nan_at_3, 5, &rule, &d) && d.kind == DIAG_NONFINITE && d.index == 3);
    double spike[10] = {2, 2, 2, 2, 2, 2, 3.01, 2, 2, 2};
    cr_expect(diag_find_divergence(spike, 10, &rule, &d) && d.kind == DIAG_SPIKE && d.index == 6 && d.reference == 2);
    double flat[10] = {2, 2, 2, 2, 2, 2, 3.0, 2, 2, 2}; /* exactly 1.5x: not above */
    cr_expect(!diag_find_divergence(flat, 10, &rule, &d) && d.index == -1 && d.kind == DIAG_HEALTHY);
}

Test(diag, leak_exact_line_and_flat_series) {
    diag_leak_rule rule = DIAG_LEAK_DEFAULT;
    diag_leak lk;
    double step[20], up[20], flat[20];
    for (int i = 0; i < 20; i++) step[i] = i, up[i] = 100 + 4096.0 * i, flat[i] = 5000 + (i % 2) * 64;
    cr_expect(diag_find_leak(step, up, 20, &rule, &lk));
    cr_expect_float_eq(lk.slope, 4096.0, 1e-9);
    cr_expect_eq(lk.first, 5);
    cr_expect(!diag_find_leak(step, flat, 20, &rule, &lk), "alternating 64 bytes: slope %g se %g", lk.slope, lk.slope_se);
}

Test(diag, desync_and_oom) {
    uint64_t h[2 * 3] = {1, 2, 3, 1, 2, 4};
    diag_desync ds;
    cr_expect(diag_find_desync(h, 2, 3, &ds) && ds.step_index == 2 && ds.rank == 1 && ds.expected == 3 && ds.got == 4);
    plan_result p = {0};
    p.bytes[MEM_GRAD] = 10, p.bytes[MEM_ACT] = 5, p.bytes[MEM_HOST] = 1000;
    diag_oom o;
    cr_expect(!diag_check_oom(&p, 14, &o) && o.need == 15 && o.biggest == MEM_GRAD && strstr(o.fix, "stage=2"));
}

static void ignore_event(void *ctx, int rank, const cJSON *event) { (void)ctx, (void)rank, (void)event; }

Test(diag, reader_names_the_first_malformed_line) {
    char dir[] = "/tmp/mixpar-test-diag-XXXXXX", path[256], why[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/events.rank0.jsonl", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":0}\n\n{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":1}\n"
          "oops\n{\"kind\":\"step\"}\n", f);
    fclose(f);
    static vz_source s;
    cr_assert_eq(vz_source_open(&s, dir, why, sizeof why), 0, "%s", why);
    vz_source_poll(&s, ignore_event, NULL);
    cr_expect_eq(s.files[0]->malformed, 2);
    cr_expect_eq(s.files[0]->first_malformed, 4, "'oops' is line 4 of the file (the blank line 2 counts)");
    vz_source_close(&s);
    unlink(path);
    rmdir(dir);
}
