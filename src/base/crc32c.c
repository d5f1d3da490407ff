/*
 * crc32c.c - CRC-32C table path and run-time dispatch; see crc32c.h.
 *
 * Slicing-by-8: table[0] is the classic byte table for the reflected
 * polynomial 0x82F63B78; table[k][b] is the CRC of byte b followed by k zero
 * bytes, so eight input bytes cost eight independent lookups.
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t sw_table[8][256];
static pthread_once_t sw_once = PTHREAD_ONCE_INIT;

static void sw_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        sw_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = sw_table[0][i];
        for (int k = 1; k < 8; k++) {
            c = sw_table[0][c & 0xff] ^ (c >> 8);
            sw_table[k][i] = c;
        }
    }
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

uint32_t cn_crc32c_sw(uint32_t crc, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    uint32_t c = ~crc;

    pthread_once(&sw_once, sw_init);
    while (n && ((uintptr_t)p & 7)) {
        c = sw_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w = load_le64(p) ^ c;
        c = sw_table[7][w & 0xff] ^ sw_table[6][(w >> 8) & 0xff] ^
            sw_table[5][(w >> 16) & 0xff] ^ sw_table[4][(w >> 24) & 0xff] ^
            sw_table[3][(w >> 32) & 0xff] ^ sw_table[2][(w >> 40) & 0xff] ^
            sw_table[1][(w >> 48) & 0xff] ^ sw_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = sw_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

bool cn_crc32c_hw_available(void)
{
#if defined(__x86_64__) || defined(__i386__)
    static int have = -1; /* -1 unknown; racing writers store the same */
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    return h == 1;
#else
    return false;
#endif
}

uint32_t cn_crc32c(uint32_t crc, const void *p, size_t n)
{
    if (cn_crc32c_hw_available())
        return cn_crc32c_hw(crc, p, n);
    return cn_crc32c_sw(crc, p, n);
}
