/*
 * bytes.h - views of bytes owned by someone else.
 *
 * A struct cn_bytes never owns its memory: decoded strings and byte fields
 * point into the request frame and live as long as it does.  len == -1 is
 * the protocol's null (a null string, null bytes, null records).
 */
#ifndef CN_BASE_BYTES_H
#define CN_BASE_BYTES_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

struct cn_bytes {
    const uint8_t *ptr; /* first byte, NULL when len <= 0 */
    int32_t len;        /* bytes, or -1 for null */
};

struct cn_uuid {
    uint8_t b[16]; /* big-endian, as on the wire */
};

#define CN_BYTES_NULL ((struct cn_bytes){NULL, -1})

static inline struct cn_bytes cn_bytes_of(const void *p, int32_t len)
{
    return (struct cn_bytes){(const uint8_t *)p, len};
}

static inline struct cn_bytes cn_bytes_str(const char *s)
{
    if (!s)
        return CN_BYTES_NULL;
    return (struct cn_bytes){(const uint8_t *)s, (int32_t)strlen(s)};
}

static inline bool cn_bytes_is_null(struct cn_bytes b)
{
    return b.len < 0;
}

static inline bool cn_bytes_eq(struct cn_bytes a, struct cn_bytes b)
{
    if (a.len != b.len)
        return false;
    return a.len <= 0 || memcmp(a.ptr, b.ptr, (size_t)a.len) == 0;
}

static inline bool cn_bytes_eq_str(struct cn_bytes a, const char *s)
{
    return cn_bytes_eq(a, cn_bytes_str(s));
}

static inline bool cn_uuid_is_zero(const struct cn_uuid *u)
{
    static const struct cn_uuid zero;
    return memcmp(u->b, zero.b, 16) == 0;
}

#endif
