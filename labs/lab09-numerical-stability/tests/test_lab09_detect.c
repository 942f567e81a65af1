/* test_lab09_detect.c: lab 09 visible tests of part B, the scan for non-finite values (the loop of amp_scan_nonfinite in
 * core/amp/detect.c): faults injected into chosen gradients of a tiny GPT-2, and into a hand-made registry. */
#include "amp/detect.h"
#include "lab09_model.h"
#include "lab09_observe.h"

/* Registry index of a tensor by name (the test stops if there is none). */
static int tensor_index(model *m, const char *name) {
    int n;
    const model_tensor *t = model_tensors(m, &n);
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) return i;
    mpt_fail_stop(__FILE__, __LINE__, "the tiny model has no tensor %s", name);
}

static void expect_first(const amp_nonfinite *nf, const char *want, const char *what) {
    MPT_CHECK(nf->nbad > 0 && strcmp(nf->first.name, want) == 0,
              "%s\n      expected: first bad tensor %s\n      got:      %s (%d bad)\n      likely mistake: %s", what,
              want, nf->nbad > 0 ? nf->first.name : "(none)", nf->nbad,
              nf->nbad > 0 ? "walk the tensors as order[] lists them (tensors[order[k]]), not in registry order, and "
                             "keep the first bad one: later ones must not overwrite it"
                           : "a tensor with NaN or inf must be reported: count it (scan_tensor) and set first");
}

/* How backward spreads a fault: a NaN born in block 1's MLP reaches everything computed after it, which in
 * backward order is everything listed after h.1.fcw. The scan must name h.1.fcw, not wte (registry order would
 * find the embeddings first, and they are collateral). An untied model: its head comes first in backward. */
MPT_TEST(detect_names_the_first_bad_tensor_in_backward_order) {
    model *m = lab09_tiny_gpt2(false);
    int n, order[64];
    const model_tensor *t = model_tensors(m, &n);
    amp_backward_order(m, order);
    int origin = tensor_index(m, "h.1.fcw"), at = -1;
    for (int k = 0; k < n; k++)
        if (order[k] == origin) at = k;
    MPT_REQUIRE(at > 0, "h.1.fcw is in the backward order");
    float *g = model_grads(m);
    memset(g, 0, model_num_params(m) * sizeof(float));
    /* The origin: a NaN at element 37, an inf after it. Everything after it in backward order: one NaN each. */
    g[t[origin].offset + 37] = NAN;
    g[t[origin].offset + 40] = INFINITY;
    for (int k = at + 1; k < n; k++) g[t[order[k]].offset + t[order[k]].size / 2] = NAN;
    amp_nonfinite nf;
    bool bad = amp_find_nonfinite(m, AMP_SCAN_GRADS, &nf);
    MPT_REQUIRE(bad, "gradients with NaN and inf: amp_find_nonfinite must return true (nbad > 0); got nbad %d", nf.nbad);
    expect_first(&nf, "h.1.fcw", "a NaN that started in h.1.fcw and spread to every tensor after it in backward order");
    MPT_CHECK_EQ_I64(1, nf.first.layer, "first.layer (block 1)");
    MPT_CHECK_EQ_U64(37, nf.first.first_offset, "first.first_offset: the element of its first non-finite value");
    MPT_CHECK_EQ_U64(1, nf.first.nan, "first.nan");
    MPT_CHECK_EQ_U64(1, nf.first.posinf, "first.posinf");
    MPT_CHECK_EQ_I64(n - at, nf.nbad, "nbad: the origin and every tensor after it in backward order");
    MPT_CHECK(strcmp(nf.second.name, t[order[at + 1]].name) == 0,
              "second: the next bad tensor in backward order\n      expected: %s\n      got:      %s\n"
              "      likely mistake: set second when the second bad tensor is found (nbad == 1 at that moment)",
              t[order[at + 1]].name, nf.second.name);
    model_free(m);
}

/* The totals cover every tensor and every value, bad or not; a clean scan reports nothing. */
MPT_TEST(detect_counts_every_value) {
    model *m = lab09_tiny_gpt2(true);
    int n;
    const model_tensor *t = model_tensors(m, &n);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += t[i].size;
    float *g = model_grads(m);
    for (size_t i = 0; i < model_num_params(m); i++) g[i] = 1e-3f * (float)(i % 17) - 0.008f;
    amp_nonfinite nf;
    MPT_CHECK(!amp_find_nonfinite(m, AMP_SCAN_GRADS, &nf), "finite gradients: expected false, got %d bad tensors",
              nf.nbad);
    MPT_CHECK_EQ_U64(total, nf.count, "count: every value of every tensor scanned, even when all are finite");
    MPT_CHECK_EQ_I64(n, nf.ntensors, "ntensors");
    /* Faults in three tensors: 2 NaN, 3 +inf, 1 -inf in total. */
    int a = tensor_index(m, "h.0.qkvw"), b = tensor_index(m, "lnfw"), c = tensor_index(m, "wpe");
    g[t[a].offset] = NAN;
    g[t[a].offset + 5] = -INFINITY;
    g[t[b].offset + 3] = INFINITY;
    g[t[b].offset + 4] = INFINITY;
    g[t[c].offset + 1] = NAN;
    g[t[c].offset + 2] = INFINITY;
    MPT_REQUIRE(amp_find_nonfinite(m, AMP_SCAN_GRADS, &nf), "six non-finite values in three tensors: expected true");
    MPT_CHECK_EQ_I64(3, nf.nbad, "nbad");
    MPT_CHECK_EQ_U64(total, nf.count, "count: all values, including those after the bad tensors");
    MPT_CHECK_EQ_U64(2, nf.nan, "nan over all tensors");
    MPT_CHECK_EQ_U64(3, nf.posinf, "posinf over all tensors");
    MPT_CHECK_EQ_U64(1, nf.neginf, "neginf over all tensors");
    expect_first(&nf, "lnfw", "faults in lnfw (the final norm: early in backward), h.0.qkvw and wpe (the last)");
    model_free(m);
}

/* amp_scan_nonfinite on a registry made by hand: three tensors laid out in memory as A, B, C, scanned in the
 * order C, A, B. The first bad tensor is the first in that order, and each tensor's values start at its offset. */
MPT_TEST(detect_follows_the_order_it_is_given) {
    model_tensor reg[3] = {
        {.name = "A", .ndim = 1, .shape = {4}, .offset = 0, .size = 4, .layer = 0},
        {.name = "B", .ndim = 1, .shape = {6}, .offset = 4, .size = 6, .layer = 1},
        {.name = "C", .ndim = 1, .shape = {5}, .offset = 10, .size = 5, .layer = 2},
    };
    float buf[15] = {0};
    buf[4 + 2] = NAN;       /* B[2] */
    buf[10 + 4] = INFINITY; /* C[4] */
    int order[3] = {2, 0, 1};
    amp_nonfinite nf = {.what = AMP_SCAN_GRADS};
    MPT_REQUIRE(amp_scan_nonfinite(reg, order, 3, buf, &nf), "two bad tensors: expected true");
    MPT_CHECK(strcmp(nf.first.name, "C") == 0 && nf.first.index == 2,
              "order C, A, B with C and B bad\n      expected: first C (registry index 2)\n      got:      %s (index %d)\n"
              "      likely mistake: tensor k of the scan is tensors[order[k]], and index is order[k]",
              nf.first.name, nf.first.index);
    MPT_CHECK_EQ_U64(4, nf.first.first_offset, "C's first bad element: its values start at buf + C.offset");
    MPT_CHECK(strcmp(nf.second.name, "B") == 0, "second: expected B, got '%s'", nf.second.name);
    MPT_CHECK_EQ_U64(2, nf.second.first_offset, "B's first bad element");
    MPT_CHECK_EQ_U64(15, nf.count, "count");
    /* Only part of the registry: the order may list fewer tensors than exist. */
    int only_a[1] = {0};
    MPT_CHECK(!amp_scan_nonfinite(reg, only_a, 1, buf, &nf) && nf.count == 4,
              "scanning only A (clean, 4 values): expected false and count 4, got nbad %d, count %llu", nf.nbad,
              (unsigned long long)nf.count);
}
