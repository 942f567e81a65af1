/* test_lab23_spans.c: lab 23 visible tests of part A, nested spans (prof_span_close in core/prof/prof.c): total and
 * self time on a fake clock, the totals per name, and one stack per thread. */
#include "lab23_util.h"

#include <pthread.h>

/* step [0, 10] > forward [1, 4] > k1 [1, 2], k2 [2.5, 4]; step > backward [5, 9]. */
MPT_TEST(span_self_plus_children_is_total) {
    fake_clock clk = {0};
    prof *p = prof_create(0, fake_clock_read, &clk);
    prof_begin(p, "step");
    clk.now = 1;
    prof_begin(p, "forward");
    prof_kernel_begin(p, "k1", (prof_cost){100, 40});
    clk.now = 2;
    prof_end(p, "k1");
    clk.now = 2.5;
    prof_kernel_begin(p, "k2", (prof_cost){0, 8});
    clk.now = 4;
    prof_end(p, "k2");
    prof_end(p, "forward");
    clk.now = 5;
    prof_begin(p, "backward");
    clk.now = 9;
    prof_end(p, "backward");
    clk.now = 10;
    prof_end(p, "step");
    CHECK_TIMES(p, "k1", 0, 1, 1, "a kernel with no children: self = total");
    CHECK_TIMES(p, "k2", 0, 1.5, 1.5, "a kernel with no children");
    CHECK_TIMES(p, "forward", 0, 3, 0.5, "3 s, of which k1 and k2 took 2.5");
    CHECK_TIMES(p, "backward", 0, 4, 4, "no children");
    CHECK_TIMES(p, "step", 0, 10, 3, "10 s less forward (3) and backward (4); k1, k2 are inside forward already");
    const prof_span *k1 = lab23_span(p, "k1", 0), *step = lab23_span(p, "step", 0);
    if (k1 && step) {
        MPT_CHECK_EQ_I64(2, k1->depth, "k1's depth (step 0, forward 1, k1 2)");
        MPT_CHECK_EQ_I64(0, step->depth, "step's depth");
        MPT_CHECK(k1->parent && strcmp(k1->parent, "forward") == 0, "k1's parent: expected forward, got %s",
                  k1->parent ? k1->parent : "(none)");
        MPT_CHECK(k1->cost.flops == 100 && k1->cost.bytes == 40, "k1 keeps its cost: got %g FLOPs, %g bytes",
                  k1->cost.flops, k1->cost.bytes);
    }
    prof_free(p);
}

/* The same kernel called 3 times inside 2 blocks: the per-name table sums calls, total and self. */
MPT_TEST(span_stats_sum_calls_total_and_self) {
    fake_clock clk = {0};
    prof *p = prof_create(0, fake_clock_read, &clk);
    for (int b = 0; b < 2; b++) {
        prof_begin(p, "block");
        for (int k = 0; k < (b == 0 ? 1 : 2); k++) {
            clk.now += 0.25;
            prof_kernel_begin(p, "matmul", (prof_cost){64, 16});
            clk.now += 0.5;
            prof_end(p, "matmul");
        }
        clk.now += 0.125;
        prof_end(p, "block");
    }
    const prof_stat *mm = prof_stat_find(p, "matmul"), *block = prof_stat_find(p, "block");
    MPT_REQUIRE(mm && block, "the table has no row for matmul or block: record() adds every finished span");
    MPT_CHECK_EQ_I64(3, mm->calls, "matmul calls");
    MPT_CHECK_NEAR(1.5, mm->total, 0, 1e-12, "matmul total seconds: 3 calls of 0.5 s");
    MPT_CHECK_NEAR(1.5, mm->self, 0, 1e-12, "matmul self seconds");
    MPT_CHECK_NEAR(3 * 64.0, mm->cost.flops, 0, 1e-9, "matmul FLOPs summed over the calls");
    MPT_CHECK_EQ_I64(2, block->calls, "block calls");
    MPT_CHECK_NEAR(0.875 + 1.625, block->total, 0, 1e-12, "block total: 0.875 s and 1.625 s");
    MPT_CHECK_NEAR(2.5 - 1.5, block->self, 0, 1e-12,
                   "block self: its total less the matmuls inside it (self = total - children)");
    prof_free(p);
}

typedef struct {
    prof *p;
    fake_clock *clk;
} thread_arg;

static void *other_thread(void *arg) {
    thread_arg *a = arg;
    prof_begin(a->p, "comm_wait"); /* the clock stands still here: the main thread moves it */
    prof_end(a->p, "comm_wait");
    prof_complete(a->p, "allreduce", PROF_KIND_COMM, 1, 3, (prof_cost){0, 1024});
    return NULL;
}

/* A span on another thread is not a child of the main thread's open span: each thread has its own stack. */
MPT_TEST(span_threads_have_their_own_stacks) {
    fake_clock clk = {0};
    prof *p = prof_create(3, fake_clock_read, &clk);
    prof_begin(p, "backward");
    clk.now = 1;
    pthread_t t;
    thread_arg a = {p, &clk};
    pthread_create(&t, NULL, other_thread, &a);
    pthread_join(t, NULL);
    clk.now = 4;
    prof_end(p, "backward");
    CHECK_TIMES(p, "backward", 0, 4, 4, "the allreduce ran on another thread: backward's self time is all of it");
    CHECK_TIMES(p, "allreduce", 0, 2, 2, "recorded with prof_complete from t0 1 to t1 3");
    const prof_span *bw = lab23_span(p, "backward", 0), *ar = lab23_span(p, "allreduce", 0);
    if (bw && ar) {
        MPT_CHECK(bw->tid != ar->tid, "the two threads got the same tid %d", bw->tid);
        MPT_CHECK_EQ_I64(0, ar->depth, "the allreduce's depth on its own thread (nothing open there)");
    }
    prof_free(p);
}
