/* rd.c - bounds-checked reader; see rd.h. */
#include "rd.h"

#include <string.h>

#include "err.h"

void cn_rd_fail(struct cn_rd *rd, int err)
{
    if (!rd->err)
        rd->err = err;
    rd->pos = rd->end;
}

static bool take(struct cn_rd *rd, size_t n, const uint8_t **p)
{
    if (rd->err)
        return false;
    if ((size_t)(rd->end - rd->pos) < n) {
        cn_rd_fail(rd, CN_ETRUNC);
        return false;
    }
    *p = rd->pos;
    rd->pos += n;
    return true;
}

int8_t cn_rd_i8(struct cn_rd *rd)
{
    const uint8_t *p;
    return take(rd, 1, &p) ? (int8_t)p[0] : 0;
}

uint16_t cn_rd_u16(struct cn_rd *rd)
{
    const uint8_t *p;
    if (!take(rd, 2, &p))
        return 0;
    return (uint16_t)((p[0] << 8) | p[1]);
}

int16_t cn_rd_i16(struct cn_rd *rd)
{
    return (int16_t)cn_rd_u16(rd);
}

uint32_t cn_rd_u32(struct cn_rd *rd)
{
    const uint8_t *p;
    if (!take(rd, 4, &p))
        return 0;
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8) | p[3];
}

int32_t cn_rd_i32(struct cn_rd *rd)
{
    return (int32_t)cn_rd_u32(rd);
}

int64_t cn_rd_i64(struct cn_rd *rd)
{
    uint64_t hi = cn_rd_u32(rd);
    uint64_t lo = cn_rd_u32(rd);
    return (int64_t)((hi << 32) | lo);
}

double cn_rd_f64(struct cn_rd *rd)
{
    uint64_t u = (uint64_t)cn_rd_i64(rd);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

bool cn_rd_bool(struct cn_rd *rd)
{
    return cn_rd_i8(rd) != 0;
}

void cn_rd_uuid(struct cn_rd *rd, struct cn_uuid *out)
{
    const uint8_t *p;
    if (take(rd, 16, &p))
        memcpy(out->b, p, 16);
    else
        memset(out->b, 0, 16);
}

static uint64_t rd_uleb(struct cn_rd *rd, int max_bytes)
{
    uint64_t v = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        const uint8_t *p;
        if (!take(rd, 1, &p))
            return 0;
        v |= (uint64_t)(p[0] & 0x7f) << shift;
        if (!(p[0] & 0x80))
            return v;
        shift += 7;
    }
    cn_rd_fail(rd, CN_EBADLEN);
    return 0;
}

uint32_t cn_rd_uvarint(struct cn_rd *rd)
{
    uint64_t v = rd_uleb(rd, 5);
    if (v > UINT32_MAX) {
        cn_rd_fail(rd, CN_EBADLEN);
        return 0;
    }
    return (uint32_t)v;
}

int32_t cn_rd_varint(struct cn_rd *rd)
{
    uint32_t u = cn_rd_uvarint(rd);
    return (int32_t)((u >> 1) ^ (~(u & 1) + 1));
}

int64_t cn_rd_varlong(struct cn_rd *rd)
{
    uint64_t u = rd_uleb(rd, 10);
    return (int64_t)((u >> 1) ^ (~(u & 1) + 1));
}

struct cn_bytes cn_rd_raw(struct cn_rd *rd, size_t n)
{
    const uint8_t *p;
    if (!take(rd, n, &p))
        return (struct cn_bytes){NULL, 0};
    return (struct cn_bytes){n ? p : NULL, (int32_t)n};
}

void cn_rd_skip(struct cn_rd *rd, size_t n)
{
    const uint8_t *p;
    take(rd, n, &p);
}

static struct cn_bytes rd_sized(struct cn_rd *rd, int64_t len)
{
    if (rd->err)
        return (struct cn_bytes){NULL, 0};
    if (len < -1 || len > INT32_MAX) {
        cn_rd_fail(rd, CN_EBADLEN);
        return (struct cn_bytes){NULL, 0};
    }
    if (len == -1)
        return CN_BYTES_NULL;
    return cn_rd_raw(rd, (size_t)len);
}

struct cn_bytes cn_rd_str(struct cn_rd *rd, bool compact)
{
    int64_t len = compact ? (int64_t)cn_rd_uvarint(rd) - 1 : cn_rd_i16(rd);
    return rd_sized(rd, len);
}

struct cn_bytes cn_rd_bytes(struct cn_rd *rd, bool compact)
{
    int64_t len = compact ? (int64_t)cn_rd_uvarint(rd) - 1 : cn_rd_i32(rd);
    return rd_sized(rd, len);
}

int32_t cn_rd_array_len(struct cn_rd *rd, bool compact, size_t min_elem_bytes)
{
    int64_t n = compact ? (int64_t)cn_rd_uvarint(rd) - 1 : cn_rd_i32(rd);
    if (rd->err)
        return 0;
    if (n == -1)
        return -1;
    if (n < -1 || n > INT32_MAX) {
        cn_rd_fail(rd, CN_EBADLEN);
        return 0;
    }
    if (min_elem_bytes == 0)
        min_elem_bytes = 1;
    if ((uint64_t)n * min_elem_bytes > (uint64_t)(rd->end - rd->pos)) {
        cn_rd_fail(rd, CN_EBADLEN);
        return 0;
    }
    return (int32_t)n;
}

void cn_rd_skip_tags(struct cn_rd *rd)
{
    uint32_t n = cn_rd_uvarint(rd);
    if (n > cn_rd_left(rd)) {
        cn_rd_fail(rd, CN_EBADLEN);
        return;
    }
    for (uint32_t i = 0; i < n && !rd->err; i++) {
        (void)cn_rd_uvarint(rd); /* tag */
        uint32_t size = cn_rd_uvarint(rd);
        cn_rd_skip(rd, size);
    }
}
