/* test_lab04_end_to_end.c: lab 04 visible test, part C: a tiny GPT in fp16. Without a loss scale some of the
 * gradients entering its matmuls flush to zero; with the static scale chosen from its fp32 gradient histogram
 * (your regions: fp_hist_add, amp_scale_choose) none do, and three SGD steps under the static scaler (your
 * update_fixed) are all taken and lower the loss. Needs your lab 02 backward (the model's). */
#include "lab04_util.h"

MPT_TEST(fp16_flushes_without_a_scale_and_not_with_the_chosen_one) {
    lab04_gpt g;
    lab04_gpt_init(&g);
    /* 1. fp32 gradients, their histogram, the scale. */
    lab04_gpt_backward(&g, 1.0f);
    fp_hist h = lab04_grad_hist(&g);
    LAB04_OBSERVE_HIST(&h);
    int lo = 0, hi = 0;
    MPT_REQUIRE(fp_hist_range(&h, &lo, &hi), "the fp32 gradients of the tiny GPT came out all zero or not finite");
    MPT_CHECK(h.target[FP_HIST_FP16].underflow > 0,
              "fp16 underflow counted in the fp32 gradients (binades %d .. %d): expected some (those below 2^-25), "
              "got 0", lo, hi);
    amp_scale_choice c = amp_scale_choose(&h, &FP_FP16, 1);
    LAB04_OBSERVE_CHOICE(&c);
    MPT_CHECK(c.top_after == 14 && c.log2_scale == 14 - hi,
              "chosen scale for gradients up to binade %d: expected k = 14 - %d = %d, got k = %d (top after %d)", hi, hi,
              14 - hi, c.log2_scale, c.top_after);

    /* 2. fp16, no scale: flushes. */
    lab04_use_fp16(&g);
    model_rounding_reset(g.m);
    lab04_gpt_backward(&g, 1.0f);
    lab04_flushes none = lab04_grad_flushes(&g);
    MPT_CHECK(none.flushed > 0 && none.overflowed == 0,
              "fp16 at scale 1: expected some of the %llu nonzero gradients flushed and none overflowed; got %llu flushed, "
              "%llu overflowed", none.nonzero, none.flushed, none.overflowed);

    /* 3. Three steps at the chosen static scale: nothing flushed or overflowed, nothing skipped, the loss falls. */
    amp_scaler s = lab04_static_scaler(c.scale);
    float first_loss = 0, loss = 0;
    for (int step = 0; step < 3; step++) {
        model_rounding_reset(g.m);
        loss = lab04_gpt_backward(&g, amp_scaler_scale(&s));
        if (step == 0) first_loss = loss;
        lab04_flushes f = lab04_grad_flushes(&g);
        MPT_OBSERVE(f.nonzero);
        MPT_CHECK(f.flushed == 0 && f.overflowed == 0,
                  "step %d in fp16 at the chosen scale 2^%d: expected 0 flushed and 0 overflowed of %llu nonzero "
                  "gradients, got %llu flushed, %llu overflowed", step + 1, c.log2_scale, f.nonzero, f.flushed,
                  f.overflowed);
        bool finite = lab04_unscale(&g, amp_scaler_scale(&s));
        amp_update u = amp_scaler_update(&s, !finite);
        MPT_REQUIRE(!u.skipped && u.next_scale == c.scale,
                    "step %d at static scale %g with finite gradients: expected taken at the same scale, got skipped=%s, "
                    "next scale %g", step + 1, (double)c.scale, u.skipped ? "yes" : "no", (double)u.next_scale);
        lab04_sgd(&g, 0.5f);
    }
    MPT_CHECK(loss < first_loss, "loss after three SGD steps in fp16 at the chosen scale: expected below %g, got %g",
              (double)first_loss, (double)loss);
    model_free(g.m);
}
