/* test_lab05_answers.c: the values answers.md's questions about your own runs expect (lab.json "questions",
 * "from_test"): the grader runs these on your code, so a question is right when it matches what your run showed.
 * They are not tests worth points themselves; each records its value as a near observation. */
#include "lab05_util.h"

#include <math.h>

/* The pattern of answers.md's questions on `build/mixpar amp scaler-trace` (+inf = O, clean = C), run through
 * your dynamic scaler (PyTorch's defaults) as that command runs it. */
static const struct {
    bool overflow;
    int count;
} TRACE[] = {{true, 3}, {false, 2000}, {true, 2}, {false, 4000}, {true, 1}, {false, 10}};

MPT_TEST(answer_scaler_trace_skips_and_final_scale) {
    amp_scaler s = lab05_scaler(AMP_SCALER_PYTORCH);
    int skipped = 0;
    for (size_t k = 0; k < sizeof TRACE / sizeof TRACE[0]; k++)
        for (int i = 0; i < TRACE[k].count; i++) skipped += amp_scaler_update(&s, TRACE[k].overflow).skipped;
    printf("%d steps skipped; final scale 2^%g\n", skipped, log2(amp_scaler_scale(&s)));
    MPT_OBSERVE_NEAR(skipped, 0, 0);
    MPT_OBSERVE_NEAR(log2(amp_scaler_scale(&s)), 0, 0);
}
