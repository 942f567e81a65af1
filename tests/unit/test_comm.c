/* test_comm.c: Criterion tests of core/comm without mpirun: the chunk arithmetic, names and tables, the
 * one-rank self backend (every collective, messages to itself, split and group names, stats, events, timeouts, bad
 * arguments), the dp x tp x pp mesh on one rank, backend choice from the environment, and the mpirun
 * command the launcher builds. */
#include "base/events.h"
#include "comm/algo.h"
#include "comm/comm.h"
#include "comm/launch.h"
#include "dist/mesh.h"
#include "dist/tp.h"
#include "fp/convert.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Tests start the self backend: none of mpirun's variables may leak in from the environment. */
static comm_t *self_world(void) {
    static const char *const VARS[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MIXPAR_COMM", "MIXPAR_ALLREDUCE",
                                       "MIXPAR_COMM_TIMEOUT", "MIXPAR_COMM_DEBUG", "WORLD_SIZE", "RANK"};
    for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) unsetenv(VARS[i]);
    return comm_init(NULL, NULL);
}

/* ---------------------------------------------------------------- chunk arithmetic */

Test(chunks, cover_the_buffer_in_order_with_sizes_one_apart) {
    for (size_t count = 0; count <= 300; count++)
        for (int parts = 1; parts <= 9; parts++) {
            size_t total = 0, lo = (size_t)-1, hi = 0;
            cr_assert_eq(comm_chunk_offset(count, parts, 0), 0);
            cr_assert_eq(comm_chunk_offset(count, parts, parts), count, "offset of the end is the count");
            for (int i = 0; i < parts; i++) {
                size_t n = comm_chunk_count(count, parts, i);
                cr_assert_eq(comm_chunk_offset(count, parts, i), total, "chunks are contiguous");
                cr_assert_eq(n, count / (size_t)parts + ((size_t)i < count % (size_t)parts),
                             "the first count %% parts chunks are one longer");
                total += n;
                lo = n < lo ? n : lo;
                hi = n > hi ? n : hi;
            }
            cr_assert_eq(total, count);
            cr_assert_leq(hi - lo, 1, "count %zu parts %d: sizes %zu..%zu", count, parts, lo, hi);
        }
}

Test(chunks, worked_example_from_the_header) {
    size_t want_off[] = {0, 3, 6, 8}, want_n[] = {3, 3, 2, 2};
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(comm_chunk_offset(10, 4, i), want_off[i]);
        cr_expect_eq(comm_chunk_count(10, 4, i), want_n[i]);
    }
}

Test(chunks, spans_of_consecutive_chunks) {
    float buf[10];
    comm_chunks b = comm_chunks_of(buf, 10, 4, COMM_FP32);
    cr_expect_eq(chunk_at(&b, 2), (char *)&buf[6]);
    cr_expect_eq(chunks_len(&b, 1, 3), 5);
    cr_expect_eq(chunk_len(&b, 3), 2);
    cr_expect_eq(chunks_len(&b, 0, 4), 10);
}

Test(chunks, large_counts_do_not_overflow) {
    size_t count = (size_t)1 << 40;
    cr_expect_eq(comm_chunk_offset(count + 5, 7, 7), count + 5);
    cr_expect_eq(comm_chunk_count(count + 5, 7, 6), (count + 5) / 7);
}

Test(chunks, negative_index_is_bad_input_naming_comm_mod, .exit_code = 2) { comm_chunk_offset(10, 4, -1); }
Test(chunks, index_past_the_end_is_bad_input, .exit_code = 2) { comm_chunk_offset(10, 4, 5); }

Test(chunks, comm_mod_is_never_negative) {
    cr_expect_eq(comm_mod(-1, 4), 3);
    cr_expect_eq(comm_mod(-9, 4), 3);
    cr_expect_eq(comm_mod(7, 4), 3);
    cr_expect_eq(comm_mod(0, 1), 0);
}

/* ---------------------------------------------------------------- names and tables */

Test(names, round_trip) {
    for (int i = 0; i < COMM_NDTYPES; i++) cr_expect_eq(comm_dtype_from_name(comm_dtype_name((comm_dtype)i)), i);
    for (int i = 0; i < COMM_NREDOPS; i++) cr_expect_eq(comm_redop_from_name(comm_redop_name((comm_redop)i)), i);
    for (int i = 0; i < COMM_NALGOS; i++) cr_expect_eq(comm_algo_from_name(comm_algo_name((comm_algo)i)), i);
    for (int i = 0; i < COMM_NOPS; i++) cr_expect_eq(comm_op_from_name(comm_op_name((comm_op)i)), i);
    cr_expect_eq(comm_dtype_from_name("fp64"), -1);
    cr_expect_eq(comm_algo_from_name(NULL), -1);
    cr_expect_eq(comm_dtype_size(COMM_BF16), 2);
    cr_expect_eq(comm_dtype_size(COMM_INT64), 8);
}

Test(names, algorithms_per_collective) {
    cr_expect(comm_algo_supported(COMM_OP_ALLREDUCE, COMM_ALGO_RING));
    cr_expect(comm_algo_supported(COMM_OP_ALLREDUCE, COMM_ALGO_TREE));
    cr_expect(comm_algo_supported(COMM_OP_ALLREDUCE, COMM_ALGO_RHD));
    cr_expect(comm_algo_supported(COMM_OP_BROADCAST, COMM_ALGO_TREE));
    cr_expect_not(comm_algo_supported(COMM_OP_BROADCAST, COMM_ALGO_RING));
    cr_expect_not(comm_algo_supported(COMM_OP_ALLGATHER, COMM_ALGO_RHD));
    cr_expect(comm_algo_supported(COMM_OP_SCATTER, COMM_ALGO_NATIVE));
    cr_expect_not(comm_algo_supported(COMM_OP_SCATTER, COMM_ALGO_TREE));
    for (int op = 0; op < COMM_NOPS; op++) cr_expect(comm_algo_supported((comm_op)op, COMM_ALGO_DEFAULT));
}

/* ---------------------------------------------------------------- the self backend */

Test(self, one_rank_no_mpi) {
    comm_t *c = self_world();
    cr_expect_eq(comm_rank(c), 0);
    cr_expect_eq(comm_size(c), 1);
    cr_expect_str_eq(comm_backend_name(c), "self");
    cr_expect_eq(comm_default_algo(c, COMM_OP_ALLREDUCE), COMM_ALGO_NATIVE, "native unless MIXPAR_ALLREDUCE says");
    comm_finalize(c);
}

Test(self, every_allreduce_algorithm_is_the_identity) {
    comm_t *c = self_world();
    for (int a = 0; a < COMM_NALGOS; a++)
        for (int op = 0; op < COMM_NREDOPS; op++) {
            float in[7] = {1.5f, -2, 3, 0, -0.0f, 1e30f, 7}, out[7] = {0};
            comm_allreduce(c, in, out, 7, COMM_FP32, (comm_redop)op, (comm_algo)a);
            cr_expect_arr_eq(out, in, sizeof in, "%s %s", comm_algo_name((comm_algo)a), comm_redop_name((comm_redop)op));
            comm_allreduce(c, in, in, 7, COMM_FP32, (comm_redop)op, (comm_algo)a); /* in place */
            cr_expect_arr_eq(out, in, sizeof in);
        }
    int64_t big[2] = {1LL << 40, -3}, got[2];
    comm_allreduce(c, big, got, 2, COMM_INT64, COMM_MAX, COMM_ALGO_RING);
    cr_expect_arr_eq(got, big, sizeof big);
    comm_finalize(c);
}

Test(self, bf16_and_fp16_come_back_bit_for_bit) {
    comm_t *c = self_world();
    float x[5] = {0.1f, -3.3e38f, 1e-40f, 65504, 0.333f};
    uint16_t b[5], f[5], out[5];
    fp_f32_to_bf16(b, x, 5);
    fp_f32_to_f16(f, x, 5);
    comm_allreduce(c, b, out, 5, COMM_BF16, COMM_SUM, COMM_ALGO_RING);
    cr_expect_arr_eq(out, b, sizeof b);
    comm_allreduce(c, f, out, 5, COMM_FP16, COMM_AVG, COMM_ALGO_TREE);
    cr_expect_arr_eq(out, f, sizeof f);
    comm_finalize(c);
}

Test(self, the_other_collectives_copy) {
    comm_t *c = self_world();
    int32_t in[4] = {1, 2, 3, 4}, out[4] = {0};
    comm_allgather(c, in, out, 4, COMM_INT32, COMM_ALGO_RING);
    cr_expect_arr_eq(out, in, sizeof in);
    memset(out, 0, sizeof out);
    comm_reduce_scatter(c, in, out, 4, COMM_INT32, COMM_SUM, COMM_ALGO_NATIVE);
    cr_expect_arr_eq(out, in, sizeof in);
    memset(out, 0, sizeof out);
    comm_reduce(c, in, out, 4, COMM_INT32, COMM_MIN, 0, COMM_ALGO_TREE);
    cr_expect_arr_eq(out, in, sizeof in);
    memset(out, 0, sizeof out);
    comm_scatter(c, in, out, 4, COMM_INT32, 0);
    cr_expect_arr_eq(out, in, sizeof in);
    memset(out, 0, sizeof out);
    comm_gather(c, in, out, 4, COMM_INT32, 0);
    cr_expect_arr_eq(out, in, sizeof in);
    comm_broadcast(c, in, 4, COMM_INT32, 0, COMM_ALGO_TREE);
    comm_barrier(c);
    comm_finalize(c);
}

Test(self, count_zero_takes_null_buffers) {
    comm_t *c = self_world();
    comm_allreduce(c, NULL, NULL, 0, COMM_FP32, COMM_SUM, COMM_ALGO_RING);
    comm_allgather(c, NULL, NULL, 0, COMM_BF16, COMM_ALGO_RING);
    comm_reduce_scatter(c, NULL, NULL, 0, COMM_FP16, COMM_AVG, COMM_ALGO_RING);
    comm_broadcast(c, NULL, 0, COMM_FP32, 0, COMM_ALGO_TREE);
    comm_reduce(c, NULL, NULL, 0, COMM_FP32, COMM_SUM, 0, COMM_ALGO_TREE);
    comm_send(c, NULL, 0, COMM_FP32, 0, 1);
    comm_recv(c, NULL, 0, COMM_FP32, 0, 1);
    comm_finalize(c);
}

Test(self, messages_to_itself_match_by_tag_in_order) {
    comm_t *c = self_world();
    float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, got[3];
    comm_send(c, a, 3, COMM_FP32, 0, 1);
    comm_send(c, b, 3, COMM_FP32, 0, 2);
    comm_send(c, b, 3, COMM_FP32, 0, 1);
    comm_recv(c, got, 3, COMM_FP32, 0, 2);
    cr_expect_arr_eq(got, b, sizeof b, "tag 2 is matched past the tag 1 message before it");
    comm_recv(c, got, 3, COMM_FP32, 0, 1);
    cr_expect_arr_eq(got, a, sizeof a, "same tag: first sent, first received");
    comm_recv(c, got, 3, COMM_FP32, 0, 1);
    cr_expect_arr_eq(got, b, sizeof b);
    comm_finalize(c);
}

Test(self, irecv_before_the_send_and_test) {
    comm_t *c = self_world();
    int64_t x = 0, y = -25;
    comm_request *r = comm_irecv(c, &x, 1, COMM_INT64, 0, 5);
    cr_expect_not(comm_test(&r), "nothing sent yet");
    cr_expect_not_null(r);
    comm_request *s = comm_isend(c, &y, 1, COMM_INT64, 0, 5);
    cr_expect(comm_test(&r));
    cr_expect_null(r, "a completed request is cleared");
    cr_expect_eq(x, -25);
    comm_wait(&s);
    cr_expect_null(s);
    comm_wait(&s); /* waiting on NULL is fine */
    cr_expect(comm_test(&s));
    comm_finalize(c);
}

Test(self, receive_of_the_wrong_size_is_an_error, .exit_code = 2) {
    comm_t *c = self_world();
    float a[4] = {0}, b[2];
    comm_send(c, a, 4, COMM_FP32, 0, 0);
    comm_recv(c, b, 2, COMM_FP32, 0, 0);
}

Test(self, receive_that_never_comes_times_out, .exit_code = 2) {
    comm_t *c = self_world();
    comm_set_timeout(c, 0.2);
    float x;
    comm_recv(c, &x, 1, COMM_FP32, 0, 0);
}

Test(self, timeout_from_the_environment, .exit_code = 2) {
    comm_t *c = self_world();
    comm_finalize(c);
    setenv("MIXPAR_COMM_TIMEOUT", "0.1", 1);
    c = comm_init(NULL, NULL);
    float x;
    comm_recv(c, &x, 1, COMM_FP32, 0, 0);
}

Test(self, split_gives_one_rank_or_nothing) {
    comm_t *c = self_world();
    comm_t *sub = comm_split(c, 3, 0);
    cr_assert_not_null(sub);
    cr_expect_eq(comm_size(sub), 1);
    float x = 4, y = 0;
    comm_allreduce(sub, &x, &y, 1, COMM_FP32, COMM_SUM, COMM_ALGO_RING);
    cr_expect_eq(y, 4);
    comm_free(sub);
    cr_expect_null(comm_split(c, COMM_UNDEFINED, 0));
    comm_finalize(c);
}

Test(self, split_names_its_group_and_its_world_ranks) {
    comm_t *c = self_world();
    cr_expect_str_eq(comm_name(c), "world");
    cr_expect_eq(comm_world_rank_of(c, 0), 0);
    cr_expect_eq(comm_world_rank_of(c, 1), -1, "rank 1 is not in a one-rank world");
    comm_t *sub = comm_split(c, 0, 5);
    cr_assert_not_null(sub);
    cr_expect_str_eq(comm_name(sub), "split", "an unnamed sub-communicator");
    comm_set_name(sub, "tp");
    cr_expect_str_eq(comm_name(sub), "tp");
    cr_expect_eq(comm_world_rank_of(sub, 0), 0);
    /* A sub-communicator of a sub-communicator still knows the world ranks. */
    comm_t *subsub = comm_split(sub, 7, 0);
    cr_assert_not_null(subsub);
    cr_expect_eq(comm_rank(subsub), 0);
    cr_expect_eq(comm_world_rank_of(subsub, 0), 0);
    comm_free(subsub);
    comm_free(sub);
    comm_finalize(c);
}

Test(self, sub_communicator_events_carry_the_group) {
    comm_t *c = self_world();
    char dir[] = "/tmp/mixpar-comm-unit-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    ev_writer *w = ev_open(dir, 0);
    comm_set_events(c, w);
    comm_t *tp = comm_split(c, 0, 0);
    comm_set_name(tp, "tp");
    float x[2] = {1, 2};
    comm_allreduce(c, x, x, 2, COMM_FP32, COMM_SUM, COMM_ALGO_NATIVE);
    comm_allreduce(tp, x, x, 2, COMM_FP32, COMM_SUM, COMM_ALGO_RING);
    comm_request *r = comm_irecv(tp, x, 2, COMM_FP32, 0, 4);
    comm_send(tp, x + 0, 0, COMM_FP32, 0, 5); /* an empty message on another tag is no match */
    comm_recv(tp, x, 0, COMM_FP32, 0, 5);
    comm_send(tp, x, 2, COMM_FP32, 0, 4);
    comm_wait(&r);
    comm_set_events(c, NULL);
    comm_free(tp);
    char path[512];
    snprintf(path, sizeof path, "%s", ev_path(w));
    ev_close(w);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[6][1024];
    for (int i = 0; i < 6; i++) cr_assert_not_null(fgets(line[i], sizeof line[i], f), "six events");
    fclose(f);
    cr_expect(strstr(line[0], "\"group\":\"world\"") && !strstr(line[0], "\"members\""), "world: %s", line[0]);
    cr_expect(strstr(line[1], "\"group\":\"tp\"") && strstr(line[1], "\"group_rank\":0") &&
              strstr(line[1], "\"members\":[0]") && strstr(line[1], "\"algorithm\":\"ring\""), "tp allreduce: %s", line[1]);
    cr_expect(strstr(line[2], "\"op\":\"send\"") && strstr(line[2], "\"group\":\"tp\"") &&
              strstr(line[2], "\"peer_world\":0"), "tp send: %s", line[2]);
    unlink(path);
    rmdir(dir);
    comm_finalize(c);
}

Test(mesh, one_rank_is_a_1x1x1_mesh_of_named_groups) {
    comm_t *c = self_world();
    mesh_t *m = mesh_create(c, 1, 1, 1);
    cr_expect_eq(m->dp_rank + m->tp_rank + m->pp_rank, 0);
    cr_expect_str_eq(comm_name(m->tp), "tp");
    cr_expect_str_eq(comm_name(m->dp), "dp");
    cr_expect_str_eq(comm_name(m->pp), "pp");
    cr_expect_str_eq(comm_name(m->mp), "mp");
    cr_assert_not_null(m->embed, "one stage is the first and the last: it holds the embeddings");
    cr_expect_str_eq(comm_name(m->embed), "embed");
    cr_expect_eq(mesh_pp_next(m), -1, "one stage: no next");
    cr_expect_eq(mesh_pp_prev(m), -1, "one stage: no previous");
    float x[4] = {1, 2, 3, 4};
    tp_reduce_from_region_forward(m->tp, x, 4);
    cr_expect_eq(x[3], 4, "an allreduce over one rank is the identity");
    mesh_free(m);
    comm_finalize(c);
}

Test(mesh, coordinates_in_megatron_order_tp_fastest_then_dp_then_pp) {
    /* 16 ranks as dp=2, tp=4, pp=2: rank = pp*8 + dp*4 + tp. */
    int d, t, p;
    mesh_coords(2, 4, 2, 13, &d, &t, &p);
    cr_expect(d == 1 && t == 1 && p == 1, "rank 13 = 1*8 + 1*4 + 1, got dp %d tp %d pp %d", d, t, p);
    mesh_coords(2, 4, 2, 6, &d, &t, &p);
    cr_expect(d == 1 && t == 2 && p == 0, "rank 6 = 0*8 + 1*4 + 2, got dp %d tp %d pp %d", d, t, p);
    for (int r = 0; r < 16; r++) {
        mesh_coords(2, 4, 2, r, &d, &t, &p);
        cr_expect_eq(mesh_world_rank(2, 4, 2, d, t, p), r);
    }
}

Test(mesh, shape_that_is_not_the_world_size, .exit_code = 2) {
    comm_t *c = self_world();
    mesh_create(c, 1, 2, 1);
}

Test(mesh, size_zero, .exit_code = 2) {
    comm_t *c = self_world();
    mesh_create(c, 1, 0, 1);
}

Test(errors, group_name_with_a_space, .exit_code = 2) {
    comm_t *c = self_world();
    comm_t *sub = comm_split(c, 0, 0);
    comm_set_name(sub, "tensor parallel");
}

Test(self, stats_count_calls_and_bytes_sent) {
    comm_t *c = self_world();
    float x[10] = {0};
    comm_allreduce(c, x, x, 10, COMM_FP32, COMM_SUM, COMM_ALGO_RING);
    comm_allreduce(c, x, x, 10, COMM_FP32, COMM_SUM, COMM_ALGO_NATIVE);
    comm_send(c, x, 10, COMM_FP32, 0, 0);
    comm_recv(c, x, 10, COMM_FP32, 0, 0);
    comm_stats_t s;
    comm_stats(c, &s);
    cr_expect_eq(s.calls[COMM_OP_ALLREDUCE], 2);
    cr_expect_eq(s.bytes_sent[COMM_OP_ALLREDUCE], 0, "one rank: nothing crosses a link");
    cr_expect_eq(s.calls[COMM_OP_SEND], 1);
    cr_expect_eq(s.bytes_sent[COMM_OP_SEND], 40);
    cr_expect_eq(s.calls[COMM_OP_RECV], 1);
    cr_expect_eq(s.bytes_sent[COMM_OP_RECV], 0);
    comm_stats_reset(c);
    comm_stats(c, &s);
    cr_expect_eq(s.calls[COMM_OP_ALLREDUCE], 0);
    comm_finalize(c);
}

Test(self, one_comm_event_per_call) {
    comm_t *c = self_world();
    char dir[] = "/tmp/mixpar-comm-unit-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    ev_writer *w = ev_open(dir, 0);
    comm_set_events(c, w);
    float x[3] = {0};
    comm_allreduce(c, x, x, 3, COMM_FP32, COMM_SUM, COMM_ALGO_RHD);
    comm_send(c, x, 3, COMM_FP32, 0, 0);
    comm_recv(c, x, 3, COMM_FP32, 0, 0);
    comm_set_events(c, NULL);
    char path[512];
    snprintf(path, sizeof path, "%s", ev_path(w));
    ev_close(w);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[3][1024];
    for (int i = 0; i < 3; i++) cr_assert_not_null(fgets(line[i], sizeof line[i], f), "three events");
    cr_expect_null(fgets(line[0], sizeof line[0], f), "and no more");
    fclose(f);
    cr_expect(strstr(line[0], "\"kind\":\"comm\",") && strstr(line[0], "\"op\":\"allreduce\"") &&
              strstr(line[0], "\"algorithm\":\"rhd\"") && strstr(line[0], "\"bytes\":12,") &&
              strstr(line[0], "\"peer\":-1"), "%s", line[0]);
    cr_expect(strstr(line[1], "\"op\":\"send\"") && strstr(line[1], "\"peer\":0") && strstr(line[1], "\"bytes_sent\":12"),
              "%s", line[1]);
    cr_expect(strstr(line[2], "\"op\":\"recv\"") && strstr(line[2], "\"t0\":") && strstr(line[2], "\"t1\":"), "%s", line[2]);
    unlink(path);
    rmdir(dir);
    comm_finalize(c);
}

/* ---------------------------------------------------------------- bad calls */

Test(errors, avg_of_integers, .exit_code = 2) {
    comm_t *c = self_world();
    int32_t x = 1;
    comm_allreduce(c, &x, &x, 1, COMM_INT32, COMM_AVG, COMM_ALGO_RING);
}

Test(errors, algorithm_a_collective_lacks, .exit_code = 2) {
    comm_t *c = self_world();
    float x = 1;
    comm_broadcast(c, &x, 1, COMM_FP32, 0, COMM_ALGO_RHD);
}

Test(errors, root_out_of_range, .exit_code = 2) {
    comm_t *c = self_world();
    float x = 1;
    comm_broadcast(c, &x, 1, COMM_FP32, 1, COMM_ALGO_NATIVE);
}

Test(errors, peer_out_of_range, .exit_code = 2) {
    comm_t *c = self_world();
    float x = 1;
    comm_send(c, &x, 1, COMM_FP32, 1, 0);
}

Test(errors, negative_tag, .exit_code = 2) {
    comm_t *c = self_world();
    float x = 1;
    comm_send(c, &x, 1, COMM_FP32, 0, -1);
}

Test(errors, null_buffer_with_elements, .exit_code = 2) {
    comm_t *c = self_world();
    comm_allreduce(c, NULL, NULL, 3, COMM_FP32, COMM_SUM, COMM_ALGO_NATIVE);
}

Test(errors, unknown_dtype, .exit_code = 2) {
    comm_t *c = self_world();
    float x = 1;
    comm_allreduce(c, &x, &x, 1, (comm_dtype)17, COMM_SUM, COMM_ALGO_NATIVE);
}

/* ---------------------------------------------------------------- the environment */

Test(env, allreduce_choice_sets_the_defaults) {
    comm_t *c = self_world();
    comm_finalize(c);
    setenv("MIXPAR_ALLREDUCE", "rhd", 1);
    c = comm_init(NULL, NULL);
    cr_expect_eq(comm_default_algo(c, COMM_OP_ALLREDUCE), COMM_ALGO_RHD);
    cr_expect_eq(comm_default_algo(c, COMM_OP_BROADCAST), COMM_ALGO_TREE, "the other collectives use mixpar's too");
    cr_expect_eq(comm_default_algo(c, COMM_OP_ALLGATHER), COMM_ALGO_RING);
    cr_expect_eq(comm_default_algo(c, COMM_OP_SCATTER), COMM_ALGO_NATIVE, "scatter has only the native one");
    comm_set_default_algo(c, COMM_OP_ALLREDUCE, COMM_ALGO_TREE);
    cr_expect_eq(comm_default_algo(c, COMM_OP_ALLREDUCE), COMM_ALGO_TREE);
    comm_finalize(c);
}

Test(env, unknown_allreduce_choice, .exit_code = 2) {
    self_world();
    setenv("MIXPAR_ALLREDUCE", "butterfly", 1);
    comm_init(NULL, NULL);
}

Test(env, unknown_backend, .exit_code = 2) {
    self_world();
    setenv("MIXPAR_COMM", "tcp", 1);
    comm_init(NULL, NULL);
}

Test(env, nccl_backend_not_built_in, .exit_code = 2) {
    self_world();
    setenv("MIXPAR_COMM", "nccl", 1);
    comm_init(NULL, NULL);
}

Test(env, torchrun_style_launch_is_refused_with_an_explanation, .exit_code = 2) {
    self_world();
    setenv("WORLD_SIZE", "4", 1);
    setenv("RANK", "2", 1);
    comm_init(NULL, NULL);
}

Test(env, torchrun_style_single_rank_is_fine) {
    self_world();
    setenv("WORLD_SIZE", "1", 1);
    comm_t *c = comm_init(NULL, NULL);
    cr_expect_eq(comm_size(c), 1);
    comm_finalize(c);
}

Test(env, debug_flag_must_be_0_or_1, .exit_code = 2) {
    self_world();
    setenv("MIXPAR_COMM_DEBUG", "yes", 1);
    comm_init(NULL, NULL);
}

/* ---------------------------------------------------------------- the launcher's command */

static bool has_arg(char **argv, const char *arg) {
    for (int i = 0; argv[i]; i++)
        if (strcmp(argv[i], arg) == 0) return true;
    return false;
}

Test(launch, mpirun_command) {
    if (!comm_launch_mpirun()) cr_skip_test("mpirun is not on PATH");
    char *prog[] = {"build/mixpar", "comm-bench", NULL}, *argv[128];
    setenv("MIXPAR_UNIT_PROBE", "1", 1);
    comm_launch_opts o = {.ranks = comm_launch_cores() + 1};
    int n = comm_launch_argv(&o, prog, argv, 128);
    cr_expect(strstr(argv[0], "mpirun") != NULL);
    cr_expect_str_eq(argv[1], "-n");
    cr_expect_eq(atoi(argv[2]), comm_launch_cores() + 1);
    cr_expect(has_arg(argv, "--oversubscribe"), "more ranks than cores");
    cr_expect_eq(has_arg(argv, "--allow-run-as-root"), geteuid() == 0);
    cr_expect(has_arg(argv, "MIXPAR_UNIT_PROBE"), "MIXPAR_ variables are exported with -x");
    cr_expect_str_eq(argv[n - 2], "build/mixpar");
    cr_expect_str_eq(argv[n - 1], "comm-bench");
    cr_expect_null(argv[n]);
    o = (comm_launch_opts){.ranks = comm_launch_cores() + 1, .hostfile = "hosts.txt"};
    comm_launch_argv(&o, prog, argv, 128);
    cr_expect_not(has_arg(argv, "--oversubscribe"), "a hostfile says where the slots are");
    cr_expect(has_arg(argv, "hosts.txt"));
    o = (comm_launch_opts){.ranks = 1, .quiet = true};
    comm_launch_argv(&o, prog, argv, 128);
    cr_expect_not(has_arg(argv, "--oversubscribe"));
    cr_expect(has_arg(argv, "-q"));
}
