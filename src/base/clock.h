/*
 * clock.h - time, reached only through here so tests and a future simulator
 * can control it.
 *
 * A test may switch to a fake clock: both readings then stand still until
 * the test advances them, so timeouts and expiries are driven by the test
 * instead of by sleeps.  libuv timers still fire on real time; code that a
 * timer drives reads the time here, so a test calls it directly instead.
 *
 * Runs on: any thread.  The fake is for single-threaded unit tests.
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

/* Switches to the fake clock, reading wall_ms and mono_ms. */
void cn_clock_fake(int64_t wall_ms, int64_t mono_ms);
/* Moves both fake readings forward by ms (the wall clock may also be set
 * back with cn_clock_fake: wall time can jump, monotonic time not). */
void cn_clock_advance_ms(int64_t ms);
/* Back to the system's clocks. */
void cn_clock_real(void);

#endif
