/*
 * crc32c_sse42.c - CRC-32C with the SSE4.2 crc32 instruction.
 *
 * The only file built with -msse4.2; nothing here runs unless
 * cn_crc32c_hw_available() said yes.  One crc32 has a latency of three
 * cycles but a throughput of one, so long inputs run as three streams over
 * adjacent blocks of BLOCK bytes and the three CRCs are joined afterwards.
 * Joining uses linearity: crc(A || B) = shift(crc(A), |B|) ^ crc0(B), where
 * shift() advances a CRC register over |B| zero bytes.  shift() for the
 * fixed BLOCK is linear in the 32 register bits, so four 256-entry tables
 * hold it.
 */
#include "crc32c.h"

#include <nmmintrin.h>
#include <pthread.h>
#include <string.h>

#define BLOCK 1024 /* bytes per stream per round; multiple of 8 */

static uint32_t shift_table[4][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

static uint32_t zeros_crc(uint32_t c, size_t n)
{
    for (size_t i = 0; i < n; i += 8)
        c = (uint32_t)_mm_crc32_u64(c, 0);
    return c;
}

static void shift_init(void)
{
    uint32_t basis[32];
    for (int b = 0; b < 32; b++)
        basis[b] = zeros_crc(1u << b, BLOCK);
    for (int k = 0; k < 4; k++) {
        for (uint32_t v = 0; v < 256; v++) {
            uint32_t r = 0;
            for (int b = 0; b < 8; b++)
                if (v & (1u << b))
                    r ^= basis[8 * k + b];
            shift_table[k][v] = r;
        }
    }
}

static inline uint32_t shift_block(uint32_t c)
{
    return shift_table[0][c & 0xff] ^ shift_table[1][(c >> 8) & 0xff] ^
           shift_table[2][(c >> 16) & 0xff] ^ shift_table[3][c >> 24];
}

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8); /* x86 is little-endian, as the instruction wants */
    return v;
}

uint32_t cn_crc32c_hw(uint32_t crc, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    uint64_t c = ~crc;

    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    if (n >= 3 * BLOCK) {
        pthread_once(&shift_once, shift_init);
        do {
            uint64_t c1 = 0, c2 = 0;
            for (size_t i = 0; i < BLOCK; i += 8) {
                c = _mm_crc32_u64(c, load64(p + i));
                c1 = _mm_crc32_u64(c1, load64(p + BLOCK + i));
                c2 = _mm_crc32_u64(c2, load64(p + 2 * BLOCK + i));
            }
            c = shift_block((uint32_t)c) ^ (uint32_t)c1;
            c = shift_block((uint32_t)c) ^ (uint32_t)c2;
            p += 3 * BLOCK;
            n -= 3 * BLOCK;
        } while (n >= 3 * BLOCK);
    }
    while (n >= 8) {
        c = _mm_crc32_u64(c, load64(p));
        p += 8;
        n -= 8;
    }
    while (n--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
