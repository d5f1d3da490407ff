/* rand.c - see rand.h. */
#include "rand.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/random.h>

static bool fake_on;
static uint64_t fake_state;

/* splitmix64: every seed, zero included, gives a full-period sequence. */
static uint64_t fake_next(void)
{
    uint64_t z = (fake_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int cn_rand_bytes(void *buf, size_t n)
{
    uint8_t *p = buf;
    if (fake_on) {
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)fake_next();
        return 0;
    }
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

void cn_rand_fake(uint64_t seed)
{
    fake_on = true;
    fake_state = seed;
}

void cn_rand_real(void)
{
    fake_on = false;
}
