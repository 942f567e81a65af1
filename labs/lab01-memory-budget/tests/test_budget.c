/* test_budget.c: lab 01 part D: the compute budget (plan_training_budget): 6 N D + 12 L s h D FLOPs, Chinchilla's
 * 20 tokens per parameter, and the time on G GPUs at a peak and an MFU, against sums written out by hand. */
#include "lab01_models.h"
#include "mptest.h"

#include <math.h>

static const char *const BUDGET_MISTAKE =
    "dense = 6 N D (N = plan_model_params, every parameter), attention = 12 L s h D, seconds = (dense + attention) "
    "/ (G * peak * MFU), gpu_hours = seconds * G / 3600, days = seconds / 86400";

/* LLaMA-7B on 1T tokens (its paper's run): N = 6,738,415,616, s = 2048, on 2048 A100s (312 TFLOP/s bf16) at
 * MFU 0.5:
 *   dense      6 * 6,738,415,616 * 1e12                   = 4.0430493696e22
 *   attention  12 * 32 * 2048 * 4096 * 1e12               = 3.221225472e21
 *   seconds    4.36517e22 / (2048 * 312e12 * 0.5)         = 136,630 s = 1.58 days, 77,727 GPU-hours
 * (the LLaMA paper reports 82,432 GPU-hours for this run: an MFU of about 0.47). */
MPT_TEST(budget_llama_7b_one_trillion_tokens) {
    plan_model m = lab01_llama_7b();
    plan_budget_in in = {.tokens = 1e12, .gpus = 2048, .peak_flops = 312e12, .mfu = 0.5};
    plan_budget b;
    plan_training_budget(&m, 2048, &in, &b);
    MPT_CHECK_EQ_U64(6738415616ULL, b.params, "N: plan_model_params(llama-7b)");
    MPT_CHECK_NEAR(1e12, b.tokens, 1e-12, 0, "D: the tokens given");
    MPT_CHECK_NEAR(4.0430493696e22, b.dense_flops, 1e-9, 0,
                   "dense FLOPs 6 N D (2 per parameter and token forward, 4 backward)");
    MPT_CHECK_NEAR(3.221225472e21, b.attention_flops, 1e-9, 0,
                   "attention FLOPs 12 L s h D (Q K^T and P V, forward and backward)");
    MPT_CHECK_NEAR(4.0430493696e22 + 3.221225472e21, b.total_flops, 1e-9, 0, "total FLOPs: dense + attention");
    double seconds = (4.0430493696e22 + 3.221225472e21) / (2048 * 312e12 * 0.5);
    MPT_CHECK_NEAR(seconds, b.seconds, 1e-9, 0, "seconds = total / (G * peak * MFU)");
    MPT_CHECK_NEAR(seconds * 2048 / 3600, b.gpu_hours, 1e-9, 0, "GPU-hours = seconds * G / 3600");
    MPT_CHECK_NEAR(seconds / 86400, b.days, 1e-9, 0, "days = seconds / 86400");
    if (fabs(b.seconds - seconds) > 1e-6 * seconds)
        MPT_CHECK(0, "  likely mistake: %s%s", BUDGET_MISTAKE,
                  fabs(b.seconds * 0.5 - seconds) < 1e-6 * seconds ? " (the MFU divides: at 50% it takes twice as "
                                                                     "long as at peak)" : "");
}

/* GPT-2 small without a token count: Chinchilla's 20 tokens per parameter, D = 2,488,796,160; s = 1024:
 *   dense      6 * 124,439,808 * 2,488,796,160   = 1.858...e18
 *   attention  12 * 12 * 1024 * 768 * D          = 2.818...e17
 * and on 8 GPUs instead of 1 the time is 8 times shorter, the GPU-hours the same. */
MPT_TEST(budget_chinchilla_tokens_when_none_given) {
    plan_model m = lab01_gpt2_124m();
    plan_budget_in in = {.tokens = 0, .gpus = 1, .peak_flops = 312e12, .mfu = 0.4};
    plan_budget one, eight;
    plan_training_budget(&m, 1024, &in, &one);
    double D = 20.0 * 124439808;
    MPT_CHECK_NEAR(D, one.tokens, 1e-12, 0, "D without --tokens: 20 tokens per parameter (Chinchilla)");
    MPT_CHECK_NEAR(6.0 * 124439808 * D, one.dense_flops, 1e-9, 0, "dense FLOPs 6 N D with D = 20 N");
    MPT_CHECK_NEAR(12.0 * 12 * 1024 * 768 * D, one.attention_flops, 1e-9, 0, "attention FLOPs 12 L s h D, s = 1024");
    in.gpus = 8;
    plan_training_budget(&m, 1024, &in, &eight);
    MPT_CHECK_NEAR(one.seconds / 8, eight.seconds, 1e-9, 0, "8 GPUs: an eighth of the time");
    MPT_CHECK_NEAR(one.gpu_hours, eight.gpu_hours, 1e-9, 0, "8 GPUs: the same GPU-hours");
}
