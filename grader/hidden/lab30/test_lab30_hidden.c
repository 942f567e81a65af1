/* test_lab30_hidden.c: lab 30 hidden tests: random blocks of every format with zeros, subnormals, huge values and
 * non-finite values bit for bit against the specification's formulas; E8M0 at its limits; NVFP4 on random tensors;
 * and the quiz answers against the key. */
#include "../../../labs/lab30-microscaling/tests/lab30_util.h"
#include "course/quiz.h"

#include <ctype.h>
#include <float.h>

MPT_TEST(mx_every_format_random_bit_for_bit) {
    mp_rng r;
    mp_rng_seed(&r, mpt_seed() ^ 0x30);
    enum { N = 32 * 9 + 13 };
    float x[N];
    for (int k = 0; k < MX_NFORMATS; k++) {
        const mx_format *f = &MX_FORMATS[k];
        for (int round = 0; round < 4; round++) {
            int lo = round == 0 ? -140 : round == 1 ? -30 : round == 2 ? 100 : -8;
            for (int i = 0; i < N; i++) x[i] = lab30_random(&r, lo, lo + 1 + (int)(mp_rng_u32(&r) % 24));
            for (int i = 0; i < 32; i++) x[32 + i] = 0; /* a block of zeros */
            x[100] = 0.0f;
            if (round == 3) x[200] = NAN, x[250] = -INFINITY;
            if (!SAME_AS_REFERENCE(f, x, N, "random values")) return;
        }
    }
}

MPT_TEST(mx_e8m0_at_its_limits) {
    CHECK_E8M0(0x1p-119f, 8, 0, "2^-119 in E4M3: -119 - 8 = -127, the smallest scale exactly");
    CHECK_E8M0(0x1p-120f, 8, 0, "2^-120 - 8 = -128: clamped to -127");
    CHECK_E8M0(0x1p-149f, 15, 0, "fp32's smallest subnormal, E5M2: clamped to -127");
    CHECK_E8M0(0x1.8p127f, 8, 127 + 119, "1.5 * 2^127: 127 - 8 = 119");
    CHECK_E8M0(0x1.fffffep-1f, 8, 127 - 9, "just under 1: floor(log2) = -1 (log2f may round it to 0)");
    CHECK_E8M0(0x1.fffffep3f, 2, 127 + 1, "just under 16, E2M1: 3 - 2");
    CHECK_E8M0(0x1p4f, 2, 127 + 2, "16, E2M1: 4 - 2");
    for (int e = -126; e <= 127; e += 7) {
        float a = ldexpf(1.0f + (float)(mp_hash32(mpt_seed(), (uint64_t)(e + 200)) % 1000) / 1000, e);
        uint8_t want = lab30_ref_scale(a, 4);
        CHECK_E8M0(a, 4, want, "random amax, E3M2");
        if (mpt_failures()) return;
    }
}

MPT_TEST(mxint8_steps_and_clamps) {
    const mx_format *f = lab30_fmt("mxint8");
    for (int i = -300; i <= 300; i++) {
        float v = (float)i / 128; /* half steps: every other value is a tie */
        uint8_t c = mx_element_encode(f, v), want = lab30_ref_element(f, v);
        MPT_OBSERVE(c);
        if (c != want) {
            mpt_fail(__FILE__, __LINE__, "MXINT8 element %g: expected code 0x%02x, got 0x%02x", (double)v, want, c);
            return;
        }
    }
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 16) * 0.37f;
    SAME_AS_REFERENCE(f, x, 32, "MXINT8 block");
}

MPT_TEST(nvfp4_random_tensors_bit_for_bit) {
    const mx_format *f = lab30_fmt("nvfp4");
    mp_rng r;
    mp_rng_seed(&r, mpt_seed() ^ 0x4);
    enum { N = 16 * 11 + 5 };
    float x[N];
    for (int round = 0; round < 4; round++) {
        int lo = round == 0 ? -20 : round == 1 ? 10 : round == 2 ? -130 : -3;
        for (int i = 0; i < N; i++) x[i] = lab30_random(&r, lo, lo + 1 + (int)(mp_rng_u32(&r) % 12));
        for (int i = 16; i < 32; i++) x[i] = 0;
        if (round == 3) x[70] = NAN;
        if (!SAME_AS_REFERENCE(f, x, N, "random tensor")) return;
    }
}

/* ---------------------------------------------------------------- the quiz key */

typedef struct {
    const char *id;
    const char *answer; /* a number, or a letter */
    double rel_tol;     /* numbers: relative tolerance */
    double abs_tol;     /* numbers: absolute tolerance */
} quiz_key;

static const quiz_key KEY[] = {
    {"Q01", "16", 1e-3, 0},   {"Q02", "0.8", 1e-3, 0},  {"Q03", "65504", 1e-3, 0}, {"Q04", "-24", 1e-3, 0},
    {"Q05", "2000", 1e-3, 0}, {"Q06", "7", 1e-3, 0},    {"Q07", "B", 0, 0},        {"Q08", "B", 0, 0},
    {"Q09", "0.0009765625", 0, 1e-7},                   {"Q10", "0.5", 1e-3, 0},   {"Q11", "64", 1e-3, 0},
    {"Q12", "1.5", 1e-3, 0},  {"Q13", "25", 1e-3, 0},   {"Q14", "A", 0, 0},        {"Q15", "3", 1e-3, 0},
    {"Q16", "64", 1e-3, 0},   {"Q17", "A", 0, 0},       {"Q18", "2", 1e-3, 0},     {"Q19", "12", 1e-3, 0},
    {"Q19b", "1.875", 1e-2, 0}, {"Q20", "B", 0, 0},     {"Q21", "A", 0, 0},        {"Q22", "A", 0, 0},
    {"Q23", "B", 0, 0},       {"Q24", "A", 0, 0},       {"Q25", "448", 1e-3, 0},   {"Q25b", "256", 1e-3, 0},
    {"Q26", "10.01", 1e-3, 0}, {"Q27", "512", 1e-3, 0}, {"Q28", "0.2", 1e-3, 0},   {"Q29", "4", 1e-3, 0},
    {"Q30", "-8", 1e-3, 0},   {"Q30b", "4.25", 1e-3, 0}, {"Q30c", "4.5", 1e-3, 0},
};

/* The graded questions of chapters [from, to]: each answer right or not (one condition per question). */
static void grade_chapters(int from, int to) {
    quiz_answer a[2 * QUIZ_NQUESTIONS];
    int n = quiz_answers(a, 2 * QUIZ_NQUESTIONS);
    for (size_t k = 0; k < sizeof KEY / sizeof KEY[0]; k++) {
        const quiz_question *q = quiz_question_by_id(KEY[k].id);
        if (!q || q->chapter < from || q->chapter > to) continue;
        const char *given = NULL;
        for (int i = 0; i < n; i++)
            if (a[i].id && strcmp(a[i].id, KEY[k].id) == 0) given = a[i].answer;
        bool right = false;
        if (given && q->kind == QUIZ_CHOICE) {
            right = strlen(given) == 1 && toupper((unsigned char)given[0]) == KEY[k].answer[0];
        } else if (given && q->kind == QUIZ_NUMBER) {
            char *end;
            double got = strtod(given, &end), want = strtod(KEY[k].answer, NULL);
            right = end != given && *end == '\0' &&
                    fabs(got - want) <= fmax(KEY[k].abs_tol, KEY[k].rel_tol * fabs(want));
        }
        MPT_CHECK(right, "%s: %s", KEY[k].id, given ? "wrong answer" : "no answer");
    }
}

MPT_TEST(quiz_chapters_01_05) { grade_chapters(1, 5); }
MPT_TEST(quiz_chapters_06_10) { grade_chapters(6, 10); }
MPT_TEST(quiz_chapters_11_15) { grade_chapters(11, 15); }
MPT_TEST(quiz_chapters_16_20) { grade_chapters(16, 20); }
MPT_TEST(quiz_chapters_21_25) { grade_chapters(21, 25); }
MPT_TEST(quiz_chapters_26_30) { grade_chapters(26, 30); }
