/* test_viz_trace.c: Criterion tests of `mixpar trace` (viz/trace.c): the file it writes parses with cJSON as
 * a Chrome trace: every span and step of the shipped sample is there, times are microseconds and ordered, and
 * a crafted two-rank run with comm calls and a resumed rank gets one process per rank, a comm thread with
 * bytes and bus bandwidth, and a clock that continues across the resume. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../viz/cli.h"

static const char SAMPLE[] = "viz/samples/tiny-poetry"; /* make test runs from the repository root */

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot read %s (run the tests from the repository root)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

static int count_lines_with(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++) n++;
    return n;
}

static cJSON *run_trace(const char *dir, const char *out) {
    char *argv[] = {(char *)dir, "-o", (char *)out, NULL};
    cr_assert_eq(vz_cmd_trace(3, argv), 0);
    char *text = slurp(out);
    cJSON *trace = cJSON_Parse(text);
    cr_assert_not_null(trace, "the trace is not JSON (near: %.80s)", cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "?");
    free(text);
    return trace;
}

/* Checks the shape every trace event must have; returns the number of events of phase ph on (pid, tid). */
static int count_events(const cJSON *events, const char *ph, int pid, int tid, const char *name) {
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const cJSON *p = cJSON_GetObjectItem(e, "ph"), *nm = cJSON_GetObjectItem(e, "name");
        cr_assert(cJSON_IsString(p) && cJSON_IsString(nm) && cJSON_IsNumber(cJSON_GetObjectItem(e, "pid")),
                  "every event has name, ph and pid");
        if (strchr("XCi", p->valuestring[0])) cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(e, "ts")), "%s has ts", nm->valuestring);
        if (strcmp(p->valuestring, "X") == 0) {
            double dur = cJSON_GetObjectItem(e, "dur")->valuedouble;
            cr_assert(dur >= 0 && isfinite(dur), "durations are not negative");
        }
        if (strcmp(p->valuestring, ph) != 0 || cJSON_GetObjectItem(e, "pid")->valueint != pid) continue;
        if (tid >= 0 && cJSON_GetObjectItem(e, "tid")->valueint != tid) continue;
        if (name && strcmp(nm->valuestring, name) != 0) continue;
        n++;
    }
    return n;
}

Test(viz_trace, the_sample_exports_every_span_and_step) {
    char out[] = "/tmp/viz_trace_XXXXXX";
    int fd = mkstemp(out);
    cr_assert_geq(fd, 0);
    close(fd);
    cJSON *trace = run_trace(SAMPLE, out);
    const cJSON *events = cJSON_GetObjectItem(trace, "traceEvents");
    cr_assert(cJSON_IsArray(events));
    cr_expect_str_eq(cJSON_GetObjectItem(trace, "displayTimeUnit")->valuestring, "ms");
    char path[256];
    snprintf(path, sizeof path, "%s/events.rank0.jsonl", SAMPLE);
    char *src = slurp(path);
    cr_expect_eq(count_events(events, "X", 0, 1, NULL), count_lines_with(src, "\"kind\":\"span\""), "one slice per span");
    cr_expect_eq(count_events(events, "C", 0, -1, "loss"), count_lines_with(src, "\"kind\":\"step\""), "one loss sample per step");
    cr_expect_eq(count_events(events, "C", 0, -1, "val loss"), count_lines_with(src, "\"kind\":\"eval\""));
    cr_expect_eq(count_events(events, "M", 0, -1, "process_name"), 1);
    /* slices on the compute thread follow each other: forward, backward, optimizer, forward, ... */
    double last_end = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X") != 0) continue;
        double ts = cJSON_GetObjectItem(e, "ts")->valuedouble, dur = cJSON_GetObjectItem(e, "dur")->valuedouble;
        cr_expect_geq(ts, last_end - 1e-3, "a slice starts after the previous one ended (%g < %g us)", ts, last_end);
        last_end = ts + dur;
    }
    cr_expect_gt(last_end, 1e6, "times are microseconds: the sample ran for over a second");
    free(src);
    cJSON_Delete(trace);
    unlink(out);
}

Test(viz_trace, two_ranks_with_comm_and_a_resume) {
    char dir[] = "/tmp/viz_trace_run_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/events.rank0.jsonl", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"ddp\",\"world\":2,\"resumed_at\":0}\n"
          "{\"v\":1,\"kind\":\"span\",\"rank\":0,\"t\":2,\"name\":\"backward\",\"step\":1,\"t0\":1,\"t1\":2}\n"
          "{\"v\":1,\"kind\":\"comm\",\"rank\":0,\"t\":2.1,\"op\":\"allreduce\",\"algorithm\":\"ring\",\"bytes\":2000000,"
          "\"peer\":-1,\"t0\":1.5,\"t1\":1.501,\"ranks\":2,\"bucket\":0}\n"
          "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"ddp\",\"world\":2,\"resumed_at\":1}\n"
          "{\"v\":1,\"kind\":\"span\",\"rank\":0,\"t\":1,\"name\":\"forward\",\"step\":2,\"t0\":0.5,\"t1\":1}\n"
          "{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":1.2,\"step\":2,\"loss\":\"nan\"}\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/events.rank1.jsonl", dir);
    f = fopen(path, "w");
    fputs("{\"v\":1,\"kind\":\"comm\",\"rank\":1,\"t\":2.1,\"op\":\"allreduce\",\"algorithm\":\"ring\",\"bytes\":2000000,"
          "\"peer\":-1,\"t0\":1.5,\"t1\":1.502,\"ranks\":2}\n", f);
    fclose(f);
    char out[160];
    snprintf(out, sizeof out, "%s/trace.json", dir);
    cJSON *trace = run_trace(dir, out);
    const cJSON *events = cJSON_GetObjectItem(trace, "traceEvents");
    cr_expect_eq(count_events(events, "M", 1, -1, "process_name"), 1, "rank 1 is its own process");
    cr_expect_eq(count_events(events, "X", 0, 2, "allreduce"), 1, "rank 0's allreduce is on its comm thread");
    cr_expect_eq(count_events(events, "X", 1, 2, "allreduce"), 1);
    cr_expect_eq(count_events(events, "C", 0, -1, "loss"), 0, "a nan loss is not a counter sample");
    const cJSON *e;
    double forward_ts = -1, backward_ts = -1;
    cJSON_ArrayForEach(e, events) {
        const char *name = cJSON_GetObjectItem(e, "name")->valuestring;
        if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X") != 0) continue;
        if (strcmp(name, "forward") == 0) forward_ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
        if (strcmp(name, "backward") == 0) backward_ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
        if (strcmp(name, "allreduce") == 0 && cJSON_GetObjectItem(e, "pid")->valueint == 0) {
            const cJSON *args = cJSON_GetObjectItem(e, "args");
            cr_expect_float_eq(cJSON_GetObjectItem(args, "bytes")->valuedouble, 2e6, 0);
            cr_expect_str_eq(cJSON_GetObjectItem(args, "algorithm")->valuestring, "ring");
            cr_expect_float_eq(cJSON_GetObjectItem(args, "busbw_GBps")->valuedouble, 2.0, 1e-6, "2 MB in 1 ms, 2 ranks");
            cr_expect_float_eq(cJSON_GetObjectItem(e, "dur")->valuedouble, 1000, 1e-6, "1 ms is 1000 us");
        }
    }
    cr_expect_float_eq(backward_ts, 1e6, 1e-6);
    cr_expect_float_eq(forward_ts, (2.1 + 0.5) * 1e6, 1e-3, "after the resume the clock continues from 2.1 s");
    cJSON_Delete(trace);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}
