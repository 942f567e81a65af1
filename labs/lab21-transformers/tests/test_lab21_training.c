/* test_lab21_training.c: lab 21 visible tests of parts B, C and D, what a transformer's training loop adds around the
 * block: warmup + cosine (core/optim/schedule.c), weight-decay groups (core/optim/decay.c), perplexity
 * (core/train/eval.c). */
#include "lab21_util.h"

/* GPT-style: peak 6e-4 after 100 warmup steps, cosine to 6e-5 at step 1000. The defining steps, exactly. */
MPT_TEST(schedule_warmup_cosine_at_exact_steps) {
    const long W = 100, T = 1000;
    const double peak = 6e-4, end = 6e-5;
    CHECK_LR(0, W, T, 0, peak, end, "t = 0: warmup starts at start (0)");
    CHECK_LR(50, W, T, 0, peak, end, "halfway through the warmup: peak / 2");
    CHECK_LR(99, W, T, 0, peak, end, "the last warmup step: 99/100 of the peak");
    CHECK_LR(100, W, T, 0, peak, end, "t = W: the peak");
    CHECK_LR(550, W, T, 0, peak, end, "the middle of the cosine: (peak + end) / 2");
    CHECK_LR(1000, W, T, 0, peak, end, "t = T: end");
    CHECK_LR(1500, W, T, 0, peak, end, "beyond T: stays at end");
    MPT_CHECK_NEAR(3.3e-4, lr_warmup_cosine(550, W, T, 0, peak, end), 1e-12, 0,
                   "cosine midpoint (6e-4 + 6e-5) / 2 = 3.3e-4");
    MPT_CHECK_NEAR(6e-4, lr_warmup_cosine(100, W, T, 0, peak, end), 1e-12, 0, "the peak at t = W");
}

/* A warmup that starts above 0, and the whole curve against the formula at steps from this grade's seed; the
 * lr never rises after the peak. */
MPT_TEST(schedule_whole_curve_and_monotone_decay) {
    const long W = 37, T = 400;
    const double start = 1e-5, peak = 3e-3, end = 3e-4;
    for (int k = 0; k < 20; k++) {
        long t = (long)(mp_hash32(mpt_seed(), (uint64_t)k) % 450);
        CHECK_LR(t, W, T, start, peak, end, "a step drawn from the seed");
    }
    double prev = INFINITY;
    long rose_at = -1;
    for (long t = W; t <= T + 10; t++) {
        double lr = lr_warmup_cosine(t, W, T, start, peak, end);
        if (lr > prev + 1e-18 && rose_at < 0) rose_at = t;
        prev = lr;
    }
    MPT_CHECK_EQ_I64(-1, rose_at, "first step after the peak where the lr rose (-1: none): cosine decay only falls");
}

/* The groups of every tensor of real models: GPT-2 (biases, LayerNorm gains and biases, wte, wpe, a tied head) and
 * LLaMA-style (RMSNorm gains only, no biases, no wpe, an untied head). */
MPT_TEST(decay_groups_of_real_models) {
    model_config gpt2 = {.arch = MODEL_GPT2, .V = 97, .maxT = 16, .L = 2, .C = 32, .NH = 4, .tied = true};
    lab21_check_decay_groups(&gpt2, "GPT-2, L=2");
    model_config llama = {.arch = MODEL_LLAMA, .V = 97, .maxT = 16, .L = 3, .C = 32, .NH = 4, .KVH = 2, .tied = false};
    lab21_check_decay_groups(&llama, "LLaMA-style, L=3, untied head");
}

/* The rules built on the groups: GPT-2's (2-D tensors decay) is no_decay = {norm, bias}; the LLaMA-style one adds
 * the embeddings. Counted on a GPT-2 model of 2 blocks with its head tied to wte: 26 tensors. */
MPT_TEST(decay_rules_gpt2_and_llama_style) {
    model_config cfg = {.arch = MODEL_GPT2, .V = 97, .maxT = 16, .L = 2, .C = 32, .NH = 4, .tied = true};
    model *m = model_create(&cfg);
    int n, gpt2_rule = 0, llama_rule = 0, agree_with_ndim = 0;
    const model_tensor *t = model_tensors(m, &n);
    unsigned gpt2 = decay_groups_parse("norm,bias"), llama = decay_groups_parse("norm, bias, embedding");
    for (int i = 0; i < n; i++) {
        bool g = decay_applies(t[i].name, t[i].ndim, gpt2);
        gpt2_rule += g;
        llama_rule += decay_applies(t[i].name, t[i].ndim, llama);
        agree_with_ndim += g == (t[i].ndim >= 2);
    }
    MPT_CHECK_EQ_I64(n, agree_with_ndim, "tensors where no_decay = {norm, bias} agrees with GPT-2's 2-D rule (all)");
    MPT_CHECK_EQ_I64(10, gpt2_rule, "decayed under {norm, bias}: wte, wpe and 4 matrices per block");
    MPT_CHECK_EQ_I64(8, llama_rule, "decayed under {norm, bias, embedding}: the 4 matrices of each block");
    model_free(m);
}

/* Perplexity is exp of the mean loss per counted token: with ignored positions (target -1), a batch counts fewer. */
MPT_TEST(perplexity_is_exp_of_the_mean_token_loss) {
    const float uniform[4] = {2.0f, 2.0f, 2.0f, 2.0f};
    const int all[4] = {3, 1, 4, 1};
    lab21_check_perplexity(uniform, all, 4, "four tokens of loss 2: perplexity e^2");
    enum { N = 64 };
    float losses[N];
    int targets[N];
    lab21_fill(losses, N, 3.0f, 1.0f, 41);
    for (int i = 0; i < N; i++) {
        if (losses[i] < 0) losses[i] = -losses[i];
        targets[i] = mp_hash32(mpt_seed(), (uint64_t)i + 100) % 4 == 0 ? -1 : i; /* a quarter masked */
        if (targets[i] < 0) losses[i] = 0;                                      /* as crossentropy_forward leaves them */
    }
    lab21_check_perplexity(losses, targets, N, "64 positions, about a quarter masked");
}

/* Two batches of different counted lengths: the perplexity of the two together weighs every token once, which is
 * not the mean of the two batches' means. */
MPT_TEST(perplexity_counts_tokens_not_batches) {
    const float a[4] = {1.0f, 1.0f, 1.0f, 1.0f}, b[4] = {5.0f, 0, 0, 0};
    const int ta[4] = {1, 2, 3, 4}, tb[4] = {7, -1, -1, -1};
    eval_totals tot = {0};
    eval_add_losses(&tot, a, ta, 4);
    eval_add_losses(&tot, b, tb, 4);
    MPT_CHECK_EQ_I64(5, tot.tokens, "tokens over both batches: 4 + 1 (three padded positions)");
    MPT_CHECK_NEAR(exp(9.0 / 5.0), eval_perplexity(&tot), 1e-12, 0,
                   "perplexity e^((4 * 1 + 5) / 5 tokens) = e^1.8, not e^((1 + 5) / 2) = e^3 (the mean of batch means)");
    /* and from the real loss: uniform logits over V tokens give loss ln V and perplexity V */
    enum { V = 50, M = 6 };
    float logits[M * V], loss[M], lse[M];
    int tg[M] = {0, 7, -1, 49, 3, -1};
    for (int i = 0; i < M * V; i++) logits[i] = 0.25f;
    crossentropy_forward(loss, lse, logits, tg, M, V, V);
    eval_totals u = {0};
    eval_add_losses(&u, loss, tg, M);
    MPT_CHECK_NEAR((double)V, eval_perplexity(&u), 1e-5, 0, "a model uniform over 50 tokens: perplexity 50");
    /* a batch of padding only: nothing counted, so no perplexity (not exp(0) = 1, a perfect model) */
    const int pad[4] = {-1, -1, -1, -1};
    eval_totals none = {0};
    eval_add_losses(&none, a, pad, 4);
    double empty = eval_perplexity(&none);
    MPT_CHECK(none.tokens == 0 && isnan(empty),
              "four ignored positions (target -1)\n      expected: 0 tokens, perplexity NaN (no token counted)\n"
              "      got:      %lld tokens, perplexity %g\n      likely mistake: %s", (long long)none.tokens, empty,
              none.tokens ? "counting positions whose target is < 0" : "returning exp(0) = 1 or 0 when nothing was counted");
}
