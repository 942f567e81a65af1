/* test_lab10_memory.c: lab 10 visible tests, part C: activation memory by recipe (perf_activation_bytes in
 * core/plan/perf.c), by hand and against the allocator's MEM_ACT peak. */
#include "lab10_util.h"

/* configs/tiny-poetry.json's model (L=4, C=128, NH=4, V=2842 padded to 2880) at its batch, B=16, T=64, in bf16.
 * N = B*T = 1024 positions. Per block: ln1, atty, res2, ln2, res3 (5 C) + qkv (3 C) + fch and fch_act (4 C each)
 * = 16 C = 2048 values per position, 2,097,152 in all, plus the attention maps B * NH * T * T = 262,144: 2,359,296.
 * Outside: encoded and lnf (2 C) and the logits (Vp): 1024 * 3136 = 3,211,264. Kept: (4 * 2,359,296 + 3,211,264)
 * * 2 bytes = 25,296,896. Statistics: (9 norms * 2 (mean, 1/std) + 3 loss values) * 1024 * 4 = 86,016. */
MPT_TEST(activations_kept_and_statistics_by_hand) {
    model_config c = lab10_gpt2(4, 128, 4, 2842, 64);
    perf_activations a;
    perf_activation_bytes(&c, 16, 64, MODEL_COMPUTE_BF16, &a);
    MPT_CHECK_EQ_U64(2, a.storage_bytes, "bytes per stored value in bf16");
    MPT_CHECK_EQ_U64(25296896, a.kept, "kept bytes, tiny GPT in bf16, B=16, T=64 (worked in the comment above)");
    MPT_CHECK_EQ_U64(86016, a.statistics, "fp32 statistics bytes (2 per norm for LayerNorm, 9 norms, 3 loss values)");
    MPT_CHECK_EQ_U64(a.kept + a.statistics + a.working, a.total, "total = kept + statistics + working");

    /* LLaMA-style: RMSNorm (1/std only), SwiGLU (fch holds gate and up: FC = 2F), grouped-query attention (QKV =
     * (NH + 2 KVH) * C/NH). L=3, C=32, NH=4, KVH=1 (QKV = 6 * 8 = 48), F = 96 (FC = 192), V=200, B=1, T=8: N = 8.
     * Per position per block: 5 C + QKV + FC + F = 160 + 48 + 192 + 96 = 496; maps 1 * 4 * 8 * 8 = 256. Kept in
     * bf16: (3 * (8 * 496 + 256) + 8 * (2 * 32 + 200)) * 2 = (12,672 + 2,112) * 2 = 29,568. Statistics: (7 norms * 1
     * + 3) * 8 * 4 = 320. */
    model_config l = {.arch = MODEL_LLAMA, .V = 200, .maxT = 8, .L = 3, .C = 32, .NH = 4, .KVH = 1, .F = 96};
    model_config_complete(&l);
    MPT_REQUIRE(l.Vp == 200 && l.F == 96 && l.KVH == 1, "config completed to Vp %d, F %d, KVH %d", l.Vp, l.F, l.KVH);
    perf_activation_bytes(&l, 1, 8, MODEL_COMPUTE_BF16, &a);
    MPT_CHECK_EQ_U64(29568, a.kept, "kept bytes, LLaMA-style in bf16 (worked in the comment above: qkv is "
                     "(NH + 2 KVH) C/NH wide, fch 2F)");
    MPT_CHECK_EQ_U64(320, a.statistics, "fp32 statistics bytes, LLaMA-style: RMSNorm keeps only 1/std, 1 per norm");
}

/* The 16-bit modes store 2 bytes per value, fp32 and tf32 (a matmul mode: its activations stay fp32) 4. The
 * statistics are fp32 in every mode. */
MPT_TEST(activations_16_bit_recipes_halve_the_kept) {
    model_config c = lab10_gpt2(2, 64, 4, 300, 32);
    static const struct {
        model_compute mode;
        unsigned bytes;
    } modes[] = {{MODEL_COMPUTE_FP32, 4}, {MODEL_COMPUTE_TF32, 4}, {MODEL_COMPUTE_BF16, 2}, {MODEL_COMPUTE_FP16, 2},
                 {MODEL_COMPUTE_FP8, 2}};
    perf_activations fp32;
    perf_activation_bytes(&c, 4, 32, MODEL_COMPUTE_FP32, &fp32);
    for (int i = 0; i < 5; i++) {
        perf_activations a;
        perf_activation_bytes(&c, 4, 32, modes[i].mode, &a);
        char what[96];
        snprintf(what, sizeof what, "bytes per stored value, %s", model_compute_name(modes[i].mode));
        MPT_CHECK_EQ_U64(modes[i].bytes, a.storage_bytes, what);
        snprintf(what, sizeof what, "kept bytes, %s, vs fp32's %llu", model_compute_name(modes[i].mode),
                 (unsigned long long)fp32.kept);
        MPT_CHECK_EQ_U64(fp32.kept / 4 * modes[i].bytes, a.kept, what);
        snprintf(what, sizeof what, "statistics bytes, %s (fp32 in every mode)", model_compute_name(modes[i].mode));
        MPT_CHECK_EQ_U64(fp32.statistics, a.statistics, what);
    }
}

/* The prediction against the allocator, in bf16 and fp32, at the tiny GPT's shape with a small batch. */
MPT_TEST(activations_match_the_allocator) {
    model_config c = lab10_gpt2(4, 128, 4, 2842, 64);
    CHECK_ACT_MEASURED(&c, 4, 64, MODEL_COMPUTE_BF16, 0.01, "tiny GPT");
    CHECK_ACT_MEASURED(&c, 4, 64, MODEL_COMPUTE_FP32, 0.01, "tiny GPT");
}
