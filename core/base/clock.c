/* clock.c: CLOCK_MONOTONIC wrapped as seconds in a double. */
#include "base/clock.h"

#include <time.h>

double mp_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double start = -1.0, start_wall;

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double mp_elapsed(void) {
    double now = mp_now();
    if (start < 0) {
        start = now;
        start_wall = wall_now();
    }
    return now - start;
}

double mp_elapsed_origin_wall(void) {
    mp_elapsed();
    return start_wall;
}
