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
 *     tests --list          names of its tests, one per line
 *     tests --run NAME      run one test in this process (the grader isolates it)
 *     tests                 run all, each in its own child process with a time limit
 *
 * Grader protocol: the grader passes a random token on file descriptor 4 and reads the verdict on file
 * descriptor 3. Only a test that returns normally with no failed check writes "PASS <token>", so a
 * test whose code calls exit(0), crashes, or prints "PASS" itself does not pass. */

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

void mpt_check_u64(const char *file, int line, uint64_t expected, uint64_t got, int hex, const char *what);
void mpt_check_i64(const char *file, int line, int64_t expected, int64_t got, const char *what);
void mpt_check_near(const char *file, int line, double expected, double got, double rel_tol, double abs_tol,
                    const char *what);
void mpt_check_float_bits(const char *file, int line, float expected, float got, const char *what);

/* MPT_CHECK(cond, "fp16 of %g should be finite", x) */
#define MPT_CHECK(cond, ...) \
    do { \
        if (!(cond)) mpt_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
/* MPT_REQUIRE: like MPT_CHECK but stops the test (for preconditions later checks depend on). */
#define MPT_REQUIRE(cond, ...) \
    do { \
        if (!(cond)) mpt_fail_stop(__FILE__, __LINE__, __VA_ARGS__); \
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
