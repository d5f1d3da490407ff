/* clock.c - see clock.h. */
#include "clock.h"

#include <stdbool.h>
#include <time.h>

static bool fake_on;
static int64_t fake_wall_ms, fake_mono_us;

int64_t cn_clock_wall_ms(void)
{
    if (fake_on)
        return fake_wall_ms;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t cn_clock_mono_us(void)
{
    if (fake_on)
        return fake_mono_us;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t cn_clock_mono_ms(void)
{
    return cn_clock_mono_us() / 1000;
}

void cn_clock_fake(int64_t wall_ms, int64_t mono_ms)
{
    fake_on = true;
    fake_wall_ms = wall_ms;
    fake_mono_us = mono_ms * 1000;
}

void cn_clock_advance_ms(int64_t ms)
{
    fake_wall_ms += ms;
    fake_mono_us += ms * 1000;
}

void cn_clock_real(void)
{
    fake_on = false;
}
