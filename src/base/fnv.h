/*
 * fnv.h - FNV-1a, 32 bits, unkeyed: for in-memory hash tables of names.
 *
 * Names are short, and colliding names chosen by a client only lengthen
 * chains (time, not correctness).  Not for anything on disk or the wire.
 */
#ifndef CN_BASE_FNV_H
#define CN_BASE_FNV_H

#include <stddef.h>
#include <stdint.h>

static inline uint32_t cn_fnv1a(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 16777619u;
    }
    return h;
}

/* Of a NUL-terminated string, without its NUL. */
static inline uint32_t cn_fnv1a_str(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s) {
        h ^= (uint8_t)*s++;
        h *= 16777619u;
    }
    return h;
}

#endif
