/* clock.h: a monotonic clock for step timing, spans and events. */
#ifndef MIXPAR_BASE_CLOCK_H
#define MIXPAR_BASE_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC); differences are what matter. */
double mp_now(void);
/* Seconds since the first call of mp_now/mp_elapsed in this process: small numbers for event logs. */
double mp_elapsed(void);
/* Unix time (seconds, CLOCK_REALTIME) at the moment mp_elapsed counts from: ranks on one machine, or on
 * machines with synchronised clocks, line their event times up with it. */
double mp_elapsed_origin_wall(void);

#endif
