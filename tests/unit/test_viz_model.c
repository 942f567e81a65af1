/* test_viz_model.c: Criterion tests of the visualizer's model (viz/model.c): steps through a resume,
 * histograms, comm statistics and bus bandwidth, memory; the format table checked against core/fp/format.h;
 * the ring allreduce step by step; the ring buffer. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../viz/allreduce.h"
#include "../../viz/formats.h"
#include "../../viz/model.h"
#include "fp/format.h"

static void apply(vz_model *m, int rank, const char *json) {
    cJSON *ev = cJSON_Parse(json);
    cr_assert_not_null(ev, "test event is not JSON: %s", json);
    vz_model_apply(m, rank, ev);
    cJSON_Delete(ev);
}

static void step(vz_model *m, int step, double loss) {
    char buf[256];
    snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":%d,\"step\":%d,\"loss\":%g,\"lr\":0.001,"
                              "\"scale\":1,\"skipped\":false,\"grad_norm\":1,\"tokens_per_s\":1000}", step, step, loss);
    apply(m, 0, buf);
}

Test(viz_model, run_header_gives_name_world_plan_precision_and_layers) {
    vz_model m;
    vz_model_init(&m);
    apply(&m, 0, "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"demo\",\"world\":4,\"params\":1000,\"resumed_at\":0,"
                 "\"plan\":{\"param\":4000,\"grad\":4000,\"master\":0,\"optim\":8000,\"act\":100,\"comm\":0,\"other\":0},"
                 "\"config\":{\"fp16\":{\"enabled\":true},\"bf16\":{\"enabled\":false},\"model\":{\"layers\":12},"
                 "\"train\":{\"steps\":300}}}");
    cr_expect_str_eq(m.name, "demo");
    cr_expect_eq(m.world, 4);
    cr_expect_str_eq(m.precision, "fp16");
    cr_expect_eq(m.layers, 12);
    cr_expect_eq(m.total_steps, 300);
    cr_expect(m.have_plan);
    cr_expect_float_eq(m.plan[VZ_TAG_OPTIM], 8000, 1e-9);
    char name[32];
    cr_expect_str_eq(vz_model_layer_name(&m, -1, name, sizeof name), "embeddings");
    cr_expect_str_eq(vz_model_layer_name(&m, 3, name, sizeof name), "block 3");
    cr_expect_str_eq(vz_model_layer_name(&m, 12, name, sizeof name), "head");
    vz_model_free(&m);
}

Test(viz_model, a_resumed_run_rewinds_its_steps_to_the_checkpoint) {
    vz_model m;
    vz_model_init(&m);
    apply(&m, 0, "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"r\",\"world\":1,\"resumed_at\":0}");
    for (int s = 1; s <= 5; s++) step(&m, s, 10 - s);
    apply(&m, 0, "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"r\",\"world\":1,\"resumed_at\":3}");
    cr_expect_eq(vz_model_nsteps(&m), 3, "steps 4 and 5 are about to be written again");
    step(&m, 4, 1.25);
    step(&m, 5, 1.5);
    cr_assert_eq(vz_model_nsteps(&m), 5);
    for (size_t i = 0; i < 5; i++) cr_expect_eq(vz_model_step(&m, i)->step, (long long)i + 1);
    cr_expect_float_eq(vz_model_last_step(&m)->loss, 1.5, 1e-12, "the rewritten step replaces the old one");
    vz_model_free(&m);
}

Test(viz_model, non_finite_losses_and_skipped_steps) {
    vz_model m;
    vz_model_init(&m);
    apply(&m, 0, "{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":1,\"step\":1,\"loss\":\"nan\",\"scale\":65536,\"skipped\":true}");
    apply(&m, 0, "{\"v\":1,\"kind\":\"step\",\"rank\":0,\"t\":2,\"step\":2,\"loss\":3,\"scale\":32768,\"skipped\":false}");
    apply(&m, 1, "{\"v\":1,\"kind\":\"step\",\"rank\":1,\"t\":2,\"step\":2,\"loss\":4}"); /* charts follow rank 0 */
    cr_expect_eq(vz_model_nsteps(&m), 2);
    cr_expect(isnan(vz_model_step(&m, 0)->loss));
    cr_expect_eq(m.skipped_steps, 1);
    cr_expect_float_eq(m.min_scale, 32768, 0);
    cr_expect_float_eq(m.max_scale, 65536, 0);
    vz_model_free(&m);
}

Test(viz_model, hist_events_fill_per_layer_histograms) {
    vz_model m;
    vz_model_init(&m);
    apply(&m, 0, "{\"v\":1,\"kind\":\"hist\",\"rank\":0,\"t\":1,\"step\":20,\"tensor\":\"grad\",\"layer\":2,\"format\":\"fp32\","
                 "\"scale\":1,\"count\":100,\"zero\":4,\"nonfinite\":0,\"first_binade\":-30,\"bins\":[1,0,5,90],"
                 "\"targets\":{\"fp16\":{\"subnormal\":6,\"underflow\":1,\"overflow\":0},"
                 "\"e4m3\":{\"subnormal\":0,\"underflow\":96,\"overflow\":0}}}");
    const vz_hist *h = vz_model_hist(&m, 2);
    cr_assert_not_null(h);
    cr_expect_null(vz_model_hist(&m, 1));
    cr_expect_eq(h->first_binade, -30);
    cr_expect_eq(h->nbins, 4);
    cr_expect_float_eq(h->bins[3], 90, 0, "bins[3] is binade -27");
    cr_expect_float_eq(h->underflow[VZ_TARGET_E4M3], 96, 0);
    cr_expect_float_eq(h->subnormal[VZ_TARGET_FP16], 6, 0);
    cr_expect_float_eq(h->underflow[VZ_TARGET_BF16], 0, 0, "a format the event leaves out counts nothing");
    cr_expect_eq(m.hist_lo, 2);
    cr_expect_eq(m.hist_hi, 2);
    /* bins outside fp32's binades are cut, not written past the array */
    apply(&m, 0, "{\"v\":1,\"kind\":\"hist\",\"rank\":0,\"t\":1,\"step\":20,\"layer\":-1,\"first_binade\":126,\"bins\":[1,2,3,4]}");
    cr_expect_eq(vz_model_hist(&m, -1)->nbins, 2);
    vz_model_free(&m);
}

Test(viz_model, comm_statistics_and_bus_bandwidth) {
    cr_expect_float_eq(vz_busbw_factor("allreduce", 4), 1.5, 1e-12, "2(n-1)/n");
    cr_expect_float_eq(vz_busbw_factor("allgather", 4), 0.75, 1e-12, "(n-1)/n");
    cr_expect_float_eq(vz_busbw_factor("reduce_scatter", 8), 0.875, 1e-12);
    cr_expect_float_eq(vz_busbw_factor("broadcast", 8), 1, 1e-12);
    cr_expect_float_eq(vz_busbw_factor("allreduce", 1), 1, 1e-12);
    vz_model m;
    vz_model_init(&m);
    for (int r = 0; r < 4; r++) {
        char buf[256];
        snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"comm\",\"rank\":%d,\"t\":2,\"op\":\"allreduce\",\"algorithm\":\"ring\","
                                  "\"bytes\":1000000,\"peer\":-1,\"t0\":1.0,\"t1\":1.001,\"ranks\":4,\"bucket\":%d}", r, r % 2);
        apply(&m, r, buf);
    }
    cr_assert_eq(m.nops, 1);
    const vz_opstat *o = &m.ops[0];
    cr_expect_eq(o->calls, 4);
    cr_expect_float_eq(o->bus_bytes / o->seconds / 1e9, 1.5, 1e-6, "1 MB in 1 ms over 4 ranks: busbw 1.5 GB/s");
    cr_expect_eq(m.ranks[3].comms.count, 1);
    cr_expect_eq(((vz_comm *)vz_ring_last(&m.ranks[3].comms))->bucket, 1);
    cr_expect_eq(vz_model_world(&m), 4);
    vz_model_free(&m);
}

Test(viz_model, mem_events_per_rank) {
    vz_model m;
    vz_model_init(&m);
    apply(&m, 1, "{\"v\":1,\"kind\":\"mem\",\"rank\":1,\"t\":1,\"step\":10,\"current\":{\"param\":10,\"act\":5},"
                 "\"peak\":{\"param\":10,\"act\":20},\"peak_total\":30}");
    cr_expect(!m.ranks[0].mem.valid);
    cr_expect(m.ranks[1].mem.valid);
    cr_expect_float_eq(m.ranks[1].mem.peak[VZ_TAG_ACT], 20, 0);
    cr_expect_float_eq(m.ranks[1].mem.current[VZ_TAG_GRAD], 0, 0, "a tag the event leaves out is 0");
    cr_expect_float_eq(m.ranks[1].mem.peak_total, 30, 0);
    vz_model_free(&m);
}

/* The viewer keeps its own table of format limits (it links no fp/ code); it must agree with the formats. */
Test(viz_formats, binade_limits_match_core_fp_formats) {
    const fp_format *core[VZ_NFORMATS] = {&FP_FP32, &FP_BF16, &FP_FP16, &FP_E4M3, &FP_E5M2};
    for (int i = 0; i < VZ_NFORMATS; i++) {
        const vz_format *f = &VZ_FORMATS[i];
        cr_expect_str_eq(f->name, core[i]->name);
        cr_expect_eq(f->min_subnormal, (int)log2(fp_min_subnormal(core[i])), "%s smallest subnormal", f->name);
        cr_expect_eq(f->min_normal, (int)log2(fp_min_normal(core[i])), "%s smallest normal", f->name);
        cr_expect_eq(f->max_binade, (int)floor(log2(fp_max(core[i]))), "%s largest binade", f->name);
        cr_expect_float_eq(f->max, fp_max(core[i]), 0, "%s max", f->name);
    }
}

Test(viz_formats, zones_at_the_fp16_and_e4m3_edges) {
    const vz_format *fp16 = vz_format_by_name("fp16"), *e4m3 = vz_format_by_name("e4m3");
    cr_assert_not_null(fp16);
    cr_assert_not_null(e4m3);
    cr_expect_null(vz_format_by_name("fp8"));
    struct {
        const vz_format *f;
        int binade;
        vz_zone zone;
    } cases[] = {
        {fp16, -25, VZ_ZONE_UNDERFLOW}, {fp16, -24, VZ_ZONE_SUBNORMAL}, {fp16, -15, VZ_ZONE_SUBNORMAL},
        {fp16, -14, VZ_ZONE_NORMAL},    {fp16, 15, VZ_ZONE_NORMAL},     {fp16, 16, VZ_ZONE_OVERFLOW},
        {e4m3, -10, VZ_ZONE_UNDERFLOW}, {e4m3, -9, VZ_ZONE_SUBNORMAL},  {e4m3, -7, VZ_ZONE_SUBNORMAL},
        {e4m3, -6, VZ_ZONE_NORMAL},     {e4m3, 8, VZ_ZONE_NORMAL},      {e4m3, 9, VZ_ZONE_OVERFLOW},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(vz_format_zone(cases[i].f, cases[i].binade), cases[i].zone, "%s binade %d: expected %s, got %s",
                     cases[i].f->name, cases[i].binade, VZ_ZONE_NAMES[cases[i].zone],
                     VZ_ZONE_NAMES[vz_format_zone(cases[i].f, cases[i].binade)]);
}

Test(viz_allreduce, reduce_scatter_then_allgather_for_every_ring_size) {
    for (int n = 2; n <= VZ_ALLREDUCE_MAX_RANKS; n++) {
        vz_allreduce a;
        vz_allreduce_reset(&a, n);
        cr_assert_eq(vz_allreduce_steps(n), 2 * (n - 1));
        for (int s = 0; s < n - 1; s++) {
            cr_expect(!vz_allreduce_in_allgather(n, s));
            /* every rank sends a different chunk: the ring's links all carry S/N bytes at once */
            uint32_t chunks = 0;
            for (int r = 0; r < n; r++) chunks |= 1u << vz_allreduce_send_chunk(n, r, s);
            cr_expect_eq(chunks, (1u << n) - 1, "n=%d step %d", n, s);
            vz_allreduce_advance(&a);
        }
        for (int r = 0; r < n; r++) {
            int owned = (r + 1) % n;
            cr_expect_eq(vz_allreduce_count(&a, r, owned), n, "n=%d: after reduce-scatter rank %d owns chunk %d", n, r, owned);
            for (int c = 0; c < n; c++)
                if (c != owned) cr_expect_lt(vz_allreduce_count(&a, r, c), n, "n=%d rank %d chunk %d", n, r, c);
        }
        while (a.step < vz_allreduce_steps(n)) vz_allreduce_advance(&a);
        for (int r = 0; r < n; r++)
            for (int c = 0; c < n; c++) cr_expect_eq(a.holds[r][c], (1u << n) - 1, "n=%d rank %d chunk %d", n, r, c);
        cr_expect_eq(vz_allreduce_send_chunk(n, 0, 2 * (n - 1)), -1, "nothing is sent after the last step");
    }
}

Test(viz_allreduce, alpha_beta_model_time) {
    /* 2(n-1) steps of alpha + S/(n beta): 4 ranks, 100 MB, 5 us, 10 GB/s -> 6 * (5e-6 + 2.5e-3) */
    cr_expect_float_eq(vz_allreduce_model_seconds(4, 100e6, 5e-6, 10e9), 6 * (5e-6 + 2.5e-3), 1e-15);
    cr_expect_float_eq(vz_allreduce_model_seconds(1, 100e6, 5e-6, 10e9), 0, 0);
}

Test(viz_ringbuf, keeps_the_newest_and_counts_what_it_drops) {
    vz_ring r;
    vz_ring_init(&r, sizeof(int), 3);
    cr_expect_null(vz_ring_last(&r));
    for (int i = 1; i <= 5; i++) *(int *)vz_ring_push(&r) = i;
    cr_expect_eq(r.count, 3);
    cr_expect_eq(r.dropped, 2);
    cr_expect_eq(*(int *)vz_ring_at(&r, 0), 3);
    cr_expect_eq(*(int *)vz_ring_last(&r), 5);
    cr_expect_null(vz_ring_at(&r, 3));
    vz_ring_pop_last(&r);
    cr_expect_eq(*(int *)vz_ring_last(&r), 4);
    *(int *)vz_ring_push(&r) = 6;
    cr_expect_eq(*(int *)vz_ring_at(&r, 0), 3);
    cr_expect_eq(*(int *)vz_ring_at(&r, 2), 6);
    vz_ring_free(&r);
}

Test(viz_model, rank_clocks_align_at_the_first_collective) {
    vz_model m;
    vz_model_init(&m);
    cr_expect(!vz_model_clocks_aligned(&m));
    /* rank 1 started 0.6 s after rank 0: its clock reads 0.6 s less at every instant */
    apply(&m, 1, "{\"v\":1,\"kind\":\"comm\",\"rank\":1,\"t\":0.3,\"op\":\"send\",\"algorithm\":\"native\",\"bytes\":8,"
                 "\"peer\":0,\"t0\":0.2,\"t1\":0.3}"); /* point to point: not a common instant */
    apply(&m, 1, "{\"v\":1,\"kind\":\"comm\",\"rank\":1,\"t\":0.4,\"op\":\"allreduce\",\"algorithm\":\"ring\",\"bytes\":8,"
                 "\"peer\":-1,\"t0\":0.35,\"t1\":0.4}");
    cr_expect_float_eq(vz_model_clock_offset(&m, 1), 0, 0, "unknown until rank 0 has made the collective too");
    apply(&m, 0, "{\"v\":1,\"kind\":\"comm\",\"rank\":0,\"t\":1.0,\"op\":\"allreduce\",\"algorithm\":\"ring\",\"bytes\":8,"
                 "\"peer\":-1,\"t0\":0.9,\"t1\":1.0}");
    apply(&m, 1, "{\"v\":1,\"kind\":\"comm\",\"rank\":1,\"t\":0.9,\"op\":\"allreduce\",\"algorithm\":\"ring\",\"bytes\":8,"
                 "\"peer\":-1,\"t0\":0.8,\"t1\":0.9}"); /* a later call does not move the anchor */
    cr_expect(vz_model_clocks_aligned(&m));
    cr_expect_float_eq(vz_model_clock_offset(&m, 1), 0.6, 1e-12);
    cr_expect_float_eq(vz_model_clock_offset(&m, 0), 0, 0);
    cr_expect_float_eq(vz_model_clock_offset(&m, 2), 0, 0, "a rank without a collective stays on its own clock");
    vz_model_free(&m);
}

Test(viz_model, rounding_events_keep_per_layer_step_counts_and_run_totals) {
    vz_model m;
    vz_model_init(&m);
    cr_expect(!vz_model_has_rounding(&m));
    for (int s = 10; s <= 20; s += 10)
        for (int layer = -1; layer <= 2; layer++) {
            char buf[400];
            /* the embeddings round nothing (no matmul input gradient); block 0 flushes s of 1000 */
            snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"rounding\",\"rank\":0,\"t\":%d,\"step\":%d,\"layer\":%d,"
                     "\"compute\":\"fp16\",\"grads\":{\"values\":%d,\"nonzero\":1000,\"flushed\":%d,\"overflowed\":0,"
                     "\"saturated\":0},\"acts\":{\"values\":0,\"nonzero\":0,\"flushed\":0,\"overflowed\":0,\"saturated\":0}}",
                     s, s, layer, layer < 0 ? 0 : 1000, layer == 0 ? s : 0);
            apply(&m, 0, buf);
        }
    apply(&m, 1, "{\"v\":1,\"kind\":\"rounding\",\"rank\":1,\"t\":1,\"step\":10,\"layer\":0,\"grads\":{\"values\":9,\"nonzero\":9,\"flushed\":9}}");
    cr_assert(vz_model_has_rounding(&m));
    cr_expect_eq(m.round_lo, 0, "layers with rounded values start at block 0, got %d", m.round_lo);
    cr_expect_eq(m.round_hi, 2);
    cr_expect_str_eq(m.round_compute, "fp16");
    cr_expect_eq(vz_model_nroundings(&m), 8, "rank 0's 8 events, not rank 1's: %zu", vz_model_nroundings(&m));
    const vz_rounding_total *t = vz_model_rounding_total(&m, 0);
    cr_assert_not_null(t);
    cr_expect_float_eq(vz_share_pct(t->flushed, t->nonzero), 1.5, 1e-12, "30 of 2000 flushed: 1.5%%");
    cr_expect(!t->subnormal_known, "today's events do not count subnormals");
    cr_expect_null(vz_model_rounding_total(&m, -1), "the embeddings rounded nothing");
    const vz_rounding *r = vz_model_rounding_at(&m, 5);
    cr_expect(r->step == 20 && r->layer == 0 && r->flushed == 20);
    vz_model_free(&m);
}

Test(viz_model, rank_clocks_align_by_the_run_headers_wall_clock) {
    vz_model m;
    vz_model_init(&m);
    /* rank 1 started 0.15 s after rank 0; its first collective would say 0.6 s (a slow first call): wall wins */
    apply(&m, 0, "{\"v\":1,\"kind\":\"run\",\"rank\":0,\"t\":0,\"name\":\"w\",\"world\":2,\"wall\":1700000000.25}");
    apply(&m, 1, "{\"v\":1,\"kind\":\"run\",\"rank\":1,\"t\":0,\"name\":\"w\",\"world\":2,\"wall\":1700000000.40}");
    apply(&m, 0, "{\"v\":1,\"kind\":\"comm\",\"rank\":0,\"t\":1.0,\"op\":\"allreduce\",\"algorithm\":\"ring\",\"bytes\":8,"
                 "\"peer\":-1,\"t0\":0.9,\"t1\":1.0}");
    apply(&m, 1, "{\"v\":1,\"kind\":\"comm\",\"rank\":1,\"t\":0.4,\"op\":\"allreduce\",\"algorithm\":\"ring\",\"bytes\":8,"
                 "\"peer\":-1,\"t0\":0.3,\"t1\":0.4}");
    cr_expect(vz_model_clocks_aligned(&m));
    cr_expect_str_eq(vz_model_clock_alignment(&m), "by wall clock");
    cr_expect_float_eq(vz_model_clock_offset(&m, 1), 0.15, 1e-6, "rank 1's t + 0.15 s is rank 0's clock: %g",
                       vz_model_clock_offset(&m, 1));
    /* a header without wall (an older run) falls back on the first collective */
    apply(&m, 1, "{\"v\":1,\"kind\":\"run\",\"rank\":1,\"t\":0,\"name\":\"w\",\"world\":2,\"resumed_at\":0}");
    cr_expect_str_eq(vz_model_clock_alignment(&m), "");
    vz_model_free(&m);
}

Test(viz_model, exposed_communication_is_comm_time_with_no_compute_running) {
    vz_model m;
    vz_model_init(&m);
    /* forward 0..1, backward 1..2, a bucket 1.5..2.1 (0.1 s of it after backward), optimizer 2.1..2.2; a data
     * wait 2.2..2.4 and nothing 2.4..2.5 */
    const char *evs[] = {
        "{\"v\":1,\"kind\":\"span\",\"rank\":0,\"t\":1,\"name\":\"forward\",\"step\":1,\"t0\":0,\"t1\":1}",
        "{\"v\":1,\"kind\":\"span\",\"rank\":0,\"t\":2,\"name\":\"backward\",\"step\":1,\"t0\":1,\"t1\":2}",
        "{\"v\":1,\"kind\":\"comm\",\"rank\":0,\"t\":2.1,\"op\":\"allreduce\",\"algorithm\":\"ring\",\"bytes\":8,\"peer\":-1,\"t0\":1.5,\"t1\":2.1,\"bucket\":0,\"ranks\":2}",
        "{\"v\":1,\"kind\":\"span\",\"rank\":0,\"t\":2.2,\"name\":\"optimizer\",\"step\":1,\"t0\":2.1,\"t1\":2.2}",
        "{\"v\":1,\"kind\":\"span\",\"rank\":0,\"t\":2.4,\"name\":\"data\",\"step\":2,\"t0\":2.2,\"t1\":2.4}",
    };
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) apply(&m, 0, evs[i]);
    vz_busy b = vz_model_busy(&m, 0, 0, 2.5);
    cr_expect_float_eq(b.comm, 0.6, 1e-9, "comm %g", b.comm);
    cr_expect_float_eq(b.exposed_comm, 0.1, 1e-9, "only 2.0..2.1 is not under backward: %g", b.exposed_comm);
    cr_expect_float_eq(b.compute, 2.1, 1e-9, "forward, backward, optimizer: %g", b.compute);
    cr_expect_float_eq(b.idle, 0.3, 1e-9, "the data wait and the empty end: 2.5 - 2.2 busy = %g", b.idle);
    b = vz_model_busy(&m, 0, 1.8, 2.05); /* a window clips every interval */
    cr_expect_float_eq(b.exposed_comm, 0.05, 1e-9, "%g", b.exposed_comm);
    vz_model_free(&m);
}

/* A pp span event of `stage` (rank == stage): forward or backward of micro-batch `micro` in step `step`. */
static void pp_span(vz_model *m, int stage, int step, bool forward, int micro, double t0) {
    char buf[320];
    snprintf(buf, sizeof buf, "{\"v\":1,\"kind\":\"span\",\"rank\":%d,\"t\":%g,\"name\":\"%s\",\"step\":%d,\"t0\":%g,\"t1\":%g,"
                              "\"stage\":%d,\"stages\":2,\"micro\":%d,\"micro_batches\":2,\"schedule\":\"1f1b\"}",
             stage, t0 + 1, forward ? "pp_forward" : "pp_backward", step, t0, t0 + 0.5, stage, micro);
    apply(m, stage, buf);
}

Test(viz_model, pipeline_spans_give_each_stage_its_schedule_and_the_newest_whole_step) {
    vz_model m;
    vz_model_init(&m);
    /* step 1, 1F1B on 2 stages with 2 micro-batches: stage 0 F0 F1 B0 B1, stage 1 F0 B0 F1 B1 */
    pp_span(&m, 0, 1, true, 0, 0), pp_span(&m, 0, 1, true, 1, 1);
    pp_span(&m, 1, 1, true, 0, 1), pp_span(&m, 1, 1, false, 0, 2), pp_span(&m, 1, 1, true, 1, 3);
    cr_expect_eq(vz_model_pipeline_step(&m, -1), -1, "stage 0 has not written its backwards yet: no whole step");
    pp_span(&m, 0, 1, false, 0, 3), pp_span(&m, 0, 1, false, 1, 5), pp_span(&m, 1, 1, false, 1, 4);
    cr_expect_eq(m.pp_stages, 2);
    cr_expect_eq(m.pp_micro_batches, 2);
    cr_expect_str_eq(m.pp_schedule, "1f1b");
    cr_expect_eq(vz_model_stage_rank(&m, 1), 1);
    cr_expect_eq(vz_model_pipeline_step(&m, -1), 1);
    pp_span(&m, 0, 2, true, 0, 10); /* step 2 begun on stage 0 only: step 1 stays the newest whole one */
    cr_expect_eq(vz_model_pipeline_step(&m, -1), 1);
    size_t idx[8];
    int n = vz_model_pipeline_spans(&m, 1, 1, idx, 8);
    cr_assert_eq(n, 4);
    const char want[] = "FBFB";
    const int micro[] = {0, 0, 1, 1};
    for (int i = 0; i < n; i++) {
        const vz_span *s = vz_ring_at(&m.ranks[1].spans, idx[i]);
        cr_expect_eq(s->kind == VZ_SPAN_FORWARD ? 'F' : 'B', want[i], "stage 1's span %d", i);
        cr_expect_eq(s->micro, micro[i], "stage 1's span %d", i);
    }
    apply(&m, 1, "{\"v\":1,\"kind\":\"step\",\"rank\":1,\"t\":6,\"step\":1,\"loss\":2,\"pipeline\":{\"bubble\":0.4,"
                 "\"bubble_schedule\":0.33,\"bubble_formula\":0.3333,\"in_flight\":1}}");
    const vz_pipeline_step *p = vz_model_stage_pipeline(&m, 1, 1);
    cr_assert_not_null(p, "rank 1's step event gives stage 1's bubble");
    cr_expect_float_eq(p->bubble, 0.4, 1e-12);
    cr_expect_float_eq(p->bubble_formula, 0.3333, 1e-12);
    cr_expect_null(vz_model_stage_pipeline(&m, 1, 2), "no step 2 event yet");
    vz_model_free(&m);
}

Test(viz_model, pipeline_spans_on_the_raw_monotonic_clock_are_moved_onto_the_event_clock) {
    double t0, t1;
    cJSON *ev = cJSON_Parse("{\"kind\":\"span\",\"t\":9.7,\"name\":\"pp_forward\",\"t0\":22938.5,\"t1\":22939.2}");
    cr_assert(vz_span_times(ev, &t0, &t1));
    cr_expect_float_eq(t1, 9.7, 1e-9, "a span ends when its event is written: t1 %g, expected t 9.7", t1);
    cr_expect_float_eq(t1 - t0, 0.7, 1e-9, "and keeps its length: %g", t1 - t0);
    cJSON_Delete(ev);
    ev = cJSON_Parse("{\"kind\":\"span\",\"t\":0.2506,\"name\":\"forward\",\"t0\":0.2276,\"t1\":0.2396}");
    cr_assert(vz_span_times(ev, &t0, &t1));
    cr_expect_float_eq(t0, 0.2276, 1e-12, "a span on the event clock is left as written");
    cr_expect_float_eq(t1, 0.2396, 1e-12);
    cJSON_Delete(ev);
    ev = cJSON_Parse("{\"kind\":\"span\",\"t\":1,\"t0\":0.5}");
    cr_expect_not(vz_span_times(ev, &t0, &t1), "no t1: not a span to draw");
    cJSON_Delete(ev);
}
