/* test_lab27_hidden.c: lab 27 hidden tests: fusion off (threshold 0), random size lists against a plain model of the
 * rule, pack/unpack of scattered entries; Megatron's unknown arguments skip their value, flags take none. */
#include "../../../labs/lab27-frameworks/tests/lab27_util.h"
#include "base/rng.h"

MPT_TEST(fusion_threshold_zero_sends_each_tensor_alone) {
    const size_t sizes[] = {1, 5, 2, 9};
    const int want[] = {0, 1, 2, 3};
    CHECK_PLAN(sizes, 4, 0, want, "HOROVOD_FUSION_THRESHOLD=0: no fusion, every tensor its own allreduce");
}

MPT_TEST(fusion_random_sizes_against_the_rule) {
    mp_rng rng;
    mp_rng_seed(&rng, 27 ^ mpt_seed());
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + (int)(mp_rng_u32(&rng) % 40);
        size_t threshold = mp_rng_u32(&rng) % 64, sizes[LAB27_MAX_TENSORS];
        int want[LAB27_MAX_TENSORS], b = -1;
        size_t filled = 0;
        for (int i = 0; i < n; i++) {
            sizes[i] = 1 + mp_rng_u32(&rng) % 48;
            if (b < 0 || filled + sizes[i] > threshold) b++, filled = 0;
            if (filled == 0 || filled + sizes[i] <= threshold) filled += sizes[i];
            want[i] = b;
        }
        if (!CHECK_PLAN(sizes, n, threshold, want, "a random list against the rule written out")) return;
    }
}

MPT_TEST(fusion_pack_scattered_entries) {
    float grads[100], buffer[100];
    for (int i = 0; i < 100; i++) grads[i] = (float)(i * 3) - 7.25f;
    fusion_entry e[4] = {{.offset = 90, .count = 10}, {.offset = 10, .count = 1}, {.offset = 50, .count = 20},
                         {.offset = 0, .count = 5}};
    size_t packed = fusion_pack(grads, e, 4, buffer);
    MPT_CHECK_EQ_I64(36, (int64_t)packed, "elements packed: 10 + 1 + 20 + 5");
    MPT_CHECK(e[3].at == 31 && buffer[31] == grads[0] && buffer[10] == grads[10] && buffer[11] == grads[50],
              "entries packed one after another in entry order (at 0, 10, 11, 31); got at %zu %zu %zu %zu", e[0].at,
              e[1].at, e[2].at, e[3].at);
    for (int i = 0; i < 36; i++) buffer[i] = -1;
    fusion_unpack(grads, e, 4, buffer);
    int minus = 0;
    for (int i = 0; i < 100; i++) minus += grads[i] == -1;
    MPT_CHECK_EQ_I64(36, minus, "after unpack, exactly the 36 packed elements come back from the buffer");
}

MPT_TEST(megatron_unknown_argument_skips_its_value_and_flags_take_none) {
    static const char *const args[] = {"--make-vocab-size-divisible-by", "128", "--bf16", "--num-layers", "2",
                                       "--sequence-parallel", "--seed", "7", NULL};
    tr_result r;
    lab27_megatron(&r, args);
    MPT_CHECK(lab27_noted(&r, "--make-vocab-size-divisible-by") && !lab27_noted(&r, "128"),
              "an unknown argument is reported once and its value (128) skipped with it");
    MPT_CHECK(lab27_number(&r, "bf16.enabled") == 1 && lab27_number(&r, "model.layers") == 2 &&
                  lab27_number(&r, "sequence_parallel") == 1 && lab27_number(&r, "train.seed") == 7,
              "--bf16 and --sequence-parallel are flags (no value): got bf16.enabled %g, model.layers %g, "
              "sequence_parallel %g, train.seed %g", lab27_number(&r, "bf16.enabled"), lab27_number(&r, "model.layers"),
              lab27_number(&r, "sequence_parallel"), lab27_number(&r, "train.seed"));
    MPT_OBSERVE(r.mapped);
    tr_result_free(&r);
}
