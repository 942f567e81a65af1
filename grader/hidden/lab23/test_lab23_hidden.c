/* test_lab23_hidden.c: lab 23 hidden tests: a random tree of spans against a model of it, a trace cut off mid-step
 * that still parses, a communication call's event, and random roofline points against the formula. */
#include "../../../labs/lab23-profiling/tests/lab23_util.h"
#include "base/rng.h"

/* ------------------------------------------------------------------ part A */

/* 200 random begin/advance/end moves up to 6 deep, the clock in eighths: each span's total and self against a
 * model that keeps its own stack. */
MPT_TEST(span_random_tree_against_a_model) {
    static const char *const names[] = {"a", "b", "c", "d", "e", "f"};
    fake_clock clk = {0};
    prof *p = prof_create(0, fake_clock_read, &clk);
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed());
    double t0[6], child[6];
    int depth = 0, ended = 0;
    for (int move = 0; move < 400 && ended < 200; move++) {
        unsigned r = mp_rng_u32(&rng) % 3;
        if ((r == 0 && depth < 6) || depth == 0) {
            t0[depth] = clk.now;
            child[depth] = 0;
            prof_begin(p, names[depth]);
            depth++;
        } else if (r == 1) {
            clk.now += (double)(1 + mp_rng_u32(&rng) % 8) / 8;
        } else {
            depth--;
            double total = clk.now - t0[depth], self = total - child[depth];
            if (depth > 0) child[depth - 1] += total;
            prof_end(p, names[depth]);
            size_t n;
            const prof_span *s = prof_spans(p, &n);
            MPT_OBSERVE_NEAR(s[n - 1].total, 0, 1e-12);
            MPT_OBSERVE_NEAR(s[n - 1].self, 0, 1e-12);
            if (s[n - 1].total != total || s[n - 1].self != self || s[n - 1].depth != depth) {
                mpt_fail(__FILE__, __LINE__,
                         "span '%s' at depth %d (end #%d)\n      expected: total %g, self %g, depth %d\n"
                         "      got:      total %g, self %g, depth %d\n      likely mistake: self = total minus the "
                         "totals of the direct children; a child adds its total to its parent when it ends",
                         names[depth], depth, ended, total, self, depth, s[n - 1].total, s[n - 1].self, s[n - 1].depth);
                prof_free(p);
                return;
            }
            ended++;
        }
    }
    prof_free(p);
}

/* ------------------------------------------------------------------ part B */

/* A run stopped in the middle of a step: the trace holds the flushed step and parses. */
MPT_TEST(trace_cut_mid_step_is_valid_json) {
    char path[128];
    lab23_temp_path(path, sizeof path, "cut");
    fake_clock clk = {2};
    prof *p = prof_create(0, fake_clock_read, &clk);
    prof_open_trace(p, path);
    prof_begin(p, "step");
    clk.now = 2.5;
    prof_kernel_begin(p, "k", (prof_cost){1, 1});
    clk.now = 3;
    prof_end(p, "k");
    prof_end(p, "step");
    prof_flush(p);
    prof_begin(p, "step"); /* the second step never ends: the run "crashes" here */
    prof_kernel_begin(p, "k", (prof_cost){1, 1});
    clk.now = 4;
    prof_end(p, "k");
    char *text = lab23_slurp(path);
    cJSON *doc = text ? cJSON_Parse(text) : NULL;
    free(text);
    MPT_REQUIRE(doc, "the trace of a run cut off after one flushed step is not valid JSON");
    cJSON *events = cJSON_GetObjectItem(doc, "traceEvents"), *ev;
    int x = 0;
    double dur_sum = 0;
    cJSON_ArrayForEach(ev, events) if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(ev, "ph")), "X") == 0) {
        x++;
        dur_sum += cJSON_GetObjectItem(ev, "dur")->valuedouble;
    }
    MPT_CHECK_EQ_I64(2, x, "complete events: the flushed step and its kernel only");
    MPT_CHECK_NEAR(1.5e6, dur_sum, 1e-12, 0, "durations (1 s step + 0.5 s kernel) in microseconds");
    cJSON_Delete(doc);
    prof_free(p);
    unlink(path);
}

MPT_TEST(trace_comm_event_has_bytes_and_category) {
    prof_span s = {.name = "allreduce", .tid = 2, .t0 = 0.001, .t1 = 0.003, .total = 0.002, .self = 0.002,
                   .cost = {0, 4096}, .kind = PROF_KIND_COMM};
    cJSON *ev = prof_trace_event(&s, 1);
    MPT_REQUIRE(ev, "prof_trace_event returned NULL");
    const char *cat = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "cat"));
    MPT_CHECK(cat && strcmp(cat, "comm") == 0, "cat: expected \"comm\" (prof_kind_name of the span's kind), got %s",
              cat ? cat : "(missing)");
    cJSON *args = cJSON_GetObjectItem(ev, "args");
    MPT_CHECK_NEAR(4096, cJSON_GetNumberValue(cJSON_GetObjectItem(args, "bytes")), 0, 0, "args.bytes");
    MPT_CHECK_NEAR(1000, cJSON_GetNumberValue(cJSON_GetObjectItem(ev, "ts")), 1e-9, 0, "ts: 1 ms = 1000 us");
    MPT_CHECK_NEAR(2000, cJSON_GetNumberValue(cJSON_GetObjectItem(ev, "dur")), 1e-9, 0, "dur: 2 ms = 2000 us");
    MPT_CHECK_NEAR(2, cJSON_GetNumberValue(cJSON_GetObjectItem(ev, "tid")), 0, 0, "tid");
    cJSON_Delete(ev);
}

/* ------------------------------------------------------------------ part C */

MPT_TEST(roofline_random_points_against_the_formula) {
    mp_rng rng;
    mp_rng_seed(&rng, mpt_seed() ^ 23);
    for (int i = 0; i < 200; i++) {
        prof_roof roof = {ldexp(1 + mp_rng_uniform(&rng), 30 + (int)(mp_rng_u32(&rng) % 14)),
                          ldexp(1 + mp_rng_uniform(&rng), 30 + (int)(mp_rng_u32(&rng) % 6))};
        double bytes = ldexp(1 + mp_rng_uniform(&rng), 10 + (int)(mp_rng_u32(&rng) % 20));
        double flops = bytes * ldexp(1 + mp_rng_uniform(&rng), (int)(mp_rng_u32(&rng) % 16) - 6);
        double secs = fmax(flops / roof.peak_flops, bytes / roof.bandwidth) * (1 + 9 * mp_rng_uniform(&rng));
        double I = flops / bytes, ridge = roof.peak_flops / roof.bandwidth;
        double att = fmin(roof.peak_flops, I * roof.bandwidth);
        double frac = fmax(flops / roof.peak_flops, bytes / roof.bandwidth) / secs;
        if (!CHECK_POINT(flops, bytes, secs, &roof, I, att, frac, I >= ridge ? PROF_COMPUTE_BOUND : PROF_MEMORY_BOUND,
                         "a random kernel"))
            return;
    }
}

MPT_TEST(roofline_fraction_is_achieved_over_attainable) {
    const prof_roof roof = {1e11, 2e10}; /* ridge 5 */
    prof_roofline pt;
    MPT_REQUIRE(prof_roofline_point(3e9, 1e9, 0.5, &roof, &pt, NULL, 0), "a valid kernel was rejected");
    MPT_CHECK_NEAR(pt.achieved / pt.attainable, pt.fraction, 1e-12, 0,
                   "fraction: for a kernel with FLOPs, the achieved FLOP/s over the attainable");
    MPT_CHECK_NEAR(6e9, pt.achieved, 1e-12, 0, "achieved: 3e9 FLOPs in 0.5 s");
    MPT_CHECK_NEAR(6e10, pt.attainable, 1e-12, 0, "attainable: 3 FLOP/B x 2e10 B/s");
    MPT_OBSERVE(pt.bound);
}
