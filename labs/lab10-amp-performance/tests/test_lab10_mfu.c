/* test_lab10_mfu.c: lab 10 visible tests, part B: throughput and MFU (perf_throughput_of in core/plan/perf.c). */
#include "lab10_util.h"

/* 2,048 tokens in 0.5 s: 4,096 tokens/s. At 1e9 FLOPs per token that is 4.096e12 FLOP/s; on a 1e13 FLOP/s machine
 * MFU = 0.4096. */
MPT_TEST(throughput_and_mfu_arithmetic) {
    perf_throughput t = perf_throughput_of(2048, 0.5, 1e9, 1e13);
    MPT_CHECK_NEAR(4096.0, t.tokens_per_s, 1e-12, 0, "tokens/s = tokens / seconds");
    MPT_CHECK_NEAR(4.096e12, t.flops_per_s, 1e-12, 0, "model FLOP/s = FLOPs per token * tokens/s");
    MPT_CHECK_NEAR(0.4096, t.mfu, 1e-12, 0, "MFU = model FLOP/s / peak FLOP/s, a fraction (not a percentage)");
    t = perf_throughput_of(2048, 1.0, 1e9, 1e13);
    MPT_CHECK_NEAR(0.2048, t.mfu, 1e-12, 0, "twice the step time halves the MFU");
}

/* make lab10's measurement by hand: GPT-2 124M, B=4, T=64 (256 tokens) in a 4 s step, on a CPU whose sgemm peak is
 * 100 GFLOP/s: 64 tokens/s, 748,270,080 * 64 = 47.89 GFLOP/s of model FLOPs, MFU 47.9%. */
MPT_TEST(mfu_for_gpt2_124m_on_a_cpu_step) {
    plan_model m;
    MPT_REQUIRE(plan_preset_find("gpt2-124m", &m), "preset gpt2-124m");
    perf_flops f;
    perf_train_flops_per_token(&m, 64, &f);
    perf_throughput t = perf_throughput_of(4 * 64, 4.0, (double)f.total, 100e9);
    MPT_CHECK_NEAR(64.0, t.tokens_per_s, 1e-12, 0, "tokens/s of a 256-token step taking 4 s");
    MPT_CHECK_NEAR(47889285120.0, t.flops_per_s, 1e-12, 0, "model FLOP/s: 748,270,080 FLOPs per token * 64 tokens/s");
    MPT_CHECK_NEAR(0.4788928512, t.mfu, 1e-9, 0, "MFU against a 100 GFLOP/s peak");
}
