/* mptest.h: the lab test harness: named tests, checks that print expected/got, and a grader protocol. */
#ifndef MIXPAR_MPTEST_H
#define MIXPAR_MPTEST_H

/* A lab test file looks like this:
 *
 *     #include "mptest.h"
 *     #include "fp/half.h"
 *
 *     MPT_TEST(fp16_encode_one) {
 *         MPT_CHECK_EQ_HEX(0x3c00, fp16_from_float(1.0f), "fp16 bits of 1.0");
 *     }
 *
 * Every test binary understands:
 *     tests --list                 names of its tests, one per line
 *     tests --run NAME             run one test in this process; it judges itself (for working on a lab)
 *     tests --observe NAME SEED    run one test for the grader: observations on descriptor 3, no verdict
 *     tests                        run all, each in its own child process with a time limit
 *
 * Grading is differential (grader/README.md): with --observe, every check writes what the code under test
 * produced (a value, a near-value with its tolerance, a condition, a reported failure) as one record on
 * descriptor 3, and the test's end as a last record. The process never decides its own verdict: the grader
 * runs the same test built from the reference regions with the same SEED and compares the two streams. So
 * a check is worth something only if it records a value the code under test computed: prefer
 * MPT_CHECK_EQ_* / MPT_CHECK_NEAR / MPT_OBSERVE over MPT_CHECK(cond), and draw random inputs from
 * mpt_seed(), which the grader picks fresh for every grade (with --run it is fixed, or $MPTEST_SEED). */

#include <stdint.h>

typedef void (*mpt_fn)(void);
void mpt_register(const char *name, mpt_fn fn, const char *file);

#define MPT_TEST(name) \
    static void mpt_test_##name(void); \
    __attribute__((constructor)) static void mpt_register_##name(void) { \
        mpt_register(#name, mpt_test_##name, __FILE__); \
    } \
    static void mpt_test_##name(void)

/* Report a failed check; the test goes on (so one run shows several problems) but will fail. */
void mpt_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Report a failed check and end the test now. */
_Noreturn void mpt_fail_stop(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int mpt_failures(void);
/* The seed for this run's random inputs: fresh per grade under --observe; MPTEST_SEED or 1 otherwise. */
uint64_t mpt_seed(void);
/* Record a value the code under test produced, for the grader to compare with the reference's (exactly).
 * It is no check: use it where a test decides by hand (if (got != want) mpt_fail(...)). */
void mpt_observe(const char *file, int line, uint64_t value);
#define MPT_OBSERVE(value) mpt_observe(__FILE__, __LINE__, (uint64_t)(value))

/* Record a number the code under test produced, to be compared with the reference's within
 * abs_tol + rel_tol * |reference's value| (for results that correct codes may round differently). */
void mpt_observe_near(const char *file, int line, double value, double rel_tol, double abs_tol);
#define MPT_OBSERVE_NEAR(value, rel_tol, abs_tol) mpt_observe_near(__FILE__, __LINE__, (double)(value), (rel_tol), (abs_tol))

/* Record a whole array of results as one near value, for the grader: sum_i w_i * got[i] against
 * sum_i w_i * want[i], with weights w_i in [0.5, 1.5) drawn from this grade's seed and the tolerance that the
 * per-element one (|got - want| <= abs_tol + rel_tol * |want|) adds up to (twice: the reference's answer is
 * itself within it). It is no check: use it beside one that compares element by element, where the results
 * may differ in the last bits between correct codes (a sum in another order). Elements whose want is not
 * finite are left out. want is float (mpt_observe_near_f32) or double (mpt_observe_near_f64). */
void mpt_observe_near_f32(const char *file, int line, const float *got, const float *want, long n, double rel_tol,
                          double abs_tol);
void mpt_observe_near_f64(const char *file, int line, const float *got, const double *want, long n, double rel_tol,
                          double abs_tol);
#define MPT_OBSERVE_NEAR_F32(got, want, n, rel_tol, abs_tol) \
    mpt_observe_near_f32(__FILE__, __LINE__, (got), (want), (n), (rel_tol), (abs_tol))
#define MPT_OBSERVE_NEAR_F64(got, want, n, rel_tol, abs_tol) \
    mpt_observe_near_f64(__FILE__, __LINE__, (got), (want), (n), (rel_tol), (abs_tol))

void mpt_check_u64(const char *file, int line, uint64_t expected, uint64_t got, int hex, const char *what);
void mpt_check_i64(const char *file, int line, int64_t expected, int64_t got, const char *what);
void mpt_check_near(const char *file, int line, double expected, double got, double rel_tol, double abs_tol,
                    const char *what);
void mpt_check_float_bits(const char *file, int line, float expected, float got, const char *what);

/* MPT_CHECK(cond, "fp16 of %g should be finite", x) */
void mpt_check_cond(const char *file, int line, int ok);
#define MPT_CHECK(cond, ...) \
    do { \
        int mpt_ok_ = !!(cond); \
        mpt_check_cond(__FILE__, __LINE__, mpt_ok_); \
        if (!mpt_ok_) mpt_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
/* MPT_REQUIRE: like MPT_CHECK but stops the test (for preconditions later checks depend on). */
#define MPT_REQUIRE(cond, ...) \
    do { \
        int mpt_ok_ = !!(cond); \
        mpt_check_cond(__FILE__, __LINE__, mpt_ok_); \
        if (!mpt_ok_) mpt_fail_stop(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
#define MPT_CHECK_EQ_U64(expected, got, what) mpt_check_u64(__FILE__, __LINE__, (expected), (got), 0, (what))
#define MPT_CHECK_EQ_HEX(expected, got, what) mpt_check_u64(__FILE__, __LINE__, (expected), (got), 1, (what))
#define MPT_CHECK_EQ_I64(expected, got, what) mpt_check_i64(__FILE__, __LINE__, (expected), (got), (what))
/* |got - expected| <= abs_tol + rel_tol * |expected| */
#define MPT_CHECK_NEAR(expected, got, rel_tol, abs_tol, what) \
    mpt_check_near(__FILE__, __LINE__, (expected), (got), (rel_tol), (abs_tol), (what))
/* same float bit pattern (so -0 != +0 and NaN == NaN only with the same payload) */
#define MPT_CHECK_FLOAT_BITS(expected, got, what) mpt_check_float_bits(__FILE__, __LINE__, (expected), (got), (what))

#endif
