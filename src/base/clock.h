/*
 * clock.h - time, reached only through here so tests and a future simulator
 * can control it.
 */
#ifndef CN_BASE_CLOCK_H
#define CN_BASE_CLOCK_H

#include <stdint.h>

/* Wall-clock milliseconds since the epoch (record timestamps, file ages). */
int64_t cn_clock_wall_ms(void);
/* Monotonic microseconds (timeouts, latencies). */
int64_t cn_clock_mono_us(void);
/* Monotonic milliseconds. */
int64_t cn_clock_mono_ms(void);

#endif
