/* test_lab23_trace.c: lab 23 visible tests of part B, the Chrome trace (prof_trace_event in core/prof/prof.c): one
 * event's fields and units, and a whole trace file parsed back with cJSON: valid after each flush, children inside
 * their parents by ts and dur. */
#include "lab23_util.h"

static double num(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(obj, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}
static const char *str(const cJSON *obj, const char *key) {
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(obj, key));
    return s ? s : "(missing)";
}

MPT_TEST(trace_event_fields_in_microseconds) {
    prof_span s = {.name = "matmul_fwd:qkv", .parent = "block_fwd", .tid = 2, .depth = 3, .t0 = 1.5, .t1 = 1.75,
                   .total = 0.25, .self = 0.125, .cost = {2e9, 3e6}, .kind = PROF_KIND_KERNEL};
    cJSON *ev = prof_trace_event(&s, 5);
    MPT_REQUIRE(ev, "prof_trace_event returned NULL");
    char *text = cJSON_PrintUnformatted(ev);
    MPT_CHECK(strcmp(str(ev, "name"), "matmul_fwd:qkv") == 0, "name: got %s", str(ev, "name"));
    MPT_CHECK(strcmp(str(ev, "ph"), "X") == 0, "ph: expected \"X\" (a complete event: start and duration), got %s",
              str(ev, "ph"));
    MPT_CHECK(strcmp(str(ev, "cat"), "kernel") == 0, "cat: expected \"kernel\" (prof_kind_name), got %s", str(ev, "cat"));
    MPT_CHECK_NEAR(1.5e6, num(ev, "ts"), 1e-12, 0, "ts: microseconds (t0 1.5 s); a trace counts microseconds");
    MPT_CHECK_NEAR(0.25e6, num(ev, "dur"), 1e-12, 0, "dur: microseconds (0.25 s)");
    MPT_CHECK_NEAR(5, num(ev, "pid"), 0, 0, "pid: the rank passed in");
    MPT_CHECK_NEAR(2, num(ev, "tid"), 0, 0, "tid: the span's thread");
    cJSON *args = cJSON_GetObjectItem(ev, "args");
    MPT_CHECK_NEAR(2e9, num(args, "flops"), 0, 0, "args.flops");
    MPT_CHECK_NEAR(3e6, num(args, "bytes"), 0, 0, "args.bytes");
    MPT_CHECK_NEAR(3, num(args, "depth"), 0, 0, "args.depth");
    MPT_CHECK_NEAR(0.125e6, num(args, "self_us"), 1e-12, 0, "args.self_us: self time in microseconds");
    if (mpt_failures()) fprintf(stderr, "      the event: %s\n", text ? text : "(none)");
    free(text);
    cJSON_Delete(ev);
}

/* The spans of two "steps", flushed after each: the file parses after each flush, holds the metadata and every
 * span, and each child lies inside its parent ([ts, ts + dur] contained). */
MPT_TEST(trace_file_parses_and_nests) {
    char path[128];
    lab23_temp_path(path, sizeof path, "trace");
    fake_clock clk = {100};
    prof *p = prof_create(1, fake_clock_read, &clk);
    prof_open_trace(p, path);
    prof_name_thread(p, "compute");
    int spans_written = 0;
    for (int stepno = 0; stepno < 2; stepno++) {
        prof_begin(p, "step");
        clk.now += 0.125;
        prof_begin(p, "forward");
        for (int k = 0; k < 3; k++) {
            clk.now += 0.125;
            prof_kernel_begin(p, "kernel", (prof_cost){8, 4});
            clk.now += 0.25;
            prof_end(p, "kernel");
        }
        prof_end(p, "forward");
        clk.now += 0.5;
        prof_end(p, "step");
        spans_written += 5;
        prof_flush(p);
        char *text = lab23_slurp(path);
        cJSON *doc = text ? cJSON_Parse(text) : NULL;
        free(text);
        MPT_REQUIRE(doc, "after flush %d the trace %s is not valid JSON", stepno + 1, path);
        cJSON *events = cJSON_GetObjectItem(doc, "traceEvents");
        MPT_REQUIRE(cJSON_IsArray(events), "no traceEvents array");
        int x = 0, meta = 0;
        cJSON *ev;
        cJSON_ArrayForEach(ev, events) {
            const char *ph = str(ev, "ph");
            if (strcmp(ph, "M") == 0) meta++;
            if (strcmp(ph, "X") == 0) x++;
        }
        MPT_CHECK_EQ_I64(spans_written, x, "complete (X) events in the file: every span flushed so far");
        MPT_CHECK_EQ_I64(2, meta, "metadata events: process_name and thread_name");
        if (stepno == 1) {
            /* every kernel inside a forward, every forward inside a step, all on pid 1 */
            int contained = 0;
            cJSON *a, *b;
            cJSON_ArrayForEach(a, events) {
                if (strcmp(str(a, "ph"), "X") != 0) continue;
                MPT_CHECK_NEAR(1, num(a, "pid"), 0, 0, "pid: the profiler's rank");
                const char *want_parent = strcmp(str(a, "name"), "kernel") == 0 ? "forward"
                                          : strcmp(str(a, "name"), "forward") == 0 ? "step" : NULL;
                if (!want_parent) continue;
                cJSON_ArrayForEach(b, events) {
                    if (strcmp(str(b, "name"), want_parent) != 0) continue;
                    double a0 = num(a, "ts"), a1 = a0 + num(a, "dur"), b0 = num(b, "ts"), b1 = b0 + num(b, "dur");
                    if (a0 >= b0 && a1 <= b1) {
                        contained++;
                        break;
                    }
                }
            }
            MPT_CHECK_EQ_I64(8, contained, "children (6 kernels, 2 forwards) lying inside a parent by ts and dur: "
                                           "ts = t0 * 1e6 and dur = (t1 - t0) * 1e6, both in microseconds");
            const cJSON *first_x = NULL;
            cJSON_ArrayForEach(ev, events) if (!first_x && strcmp(str(ev, "ph"), "X") == 0) first_x = ev;
            MPT_CHECK_NEAR(100.125e6 + 0.125e6, num(first_x, "ts"), 1e-12, 0,
                           "the first event written is the first span to end (a kernel, at t0 100.25 s), in us");
        }
        cJSON_Delete(doc);
    }
    prof_free(p);
    unlink(path);
}
