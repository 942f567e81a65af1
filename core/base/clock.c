/* clock.c: CLOCK_MONOTONIC wrapped as seconds in a double. */
#include "base/clock.h"

#include <time.h>

double mp_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double mp_elapsed(void) {
    static double start = -1.0;
    double now = mp_now();
    if (start < 0) start = now;
    return now - start;
}
