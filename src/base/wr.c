/* wr.c - growable writer; see wr.h. */
#include "wr.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

void cn_wr_init(struct cn_wr *wr, size_t initial_cap)
{
    memset(wr, 0, sizeof *wr);
    if (initial_cap)
        cn_wr_ensure(wr, initial_cap);
}

void cn_wr_fini(struct cn_wr *wr)
{
    free(wr->buf);
    free(wr->refs);
    memset(wr, 0, sizeof *wr);
}

uint8_t *cn_wr_steal(struct cn_wr *wr, size_t *len)
{
    uint8_t *b = wr->buf;
    free(wr->refs);
    if (len)
        *len = wr->len;
    memset(wr, 0, sizeof *wr);
    return b;
}

void cn_wr_reset(struct cn_wr *wr)
{
    wr->len = 0;
    wr->err = 0;
    wr->nrefs = 0;
    wr->ref_bytes = 0;
}

void cn_wr_by_reference(struct cn_wr *wr, size_t min_bytes)
{
    wr->ref_min = min_bytes;
}

static bool wr_add_ref(struct cn_wr *wr, const uint8_t *p, size_t n)
{
    if (wr->nrefs == wr->refs_cap) {
        size_t cap = wr->refs_cap ? wr->refs_cap * 2 : 16;
        struct cn_wr_ref *r = realloc(wr->refs, cap * sizeof *r);
        if (!r)
            return false;
        wr->refs = r;
        wr->refs_cap = cap;
    }
    wr->refs[wr->nrefs++] = (struct cn_wr_ref){wr->len, p, n};
    wr->ref_bytes += n;
    return true;
}

bool cn_wr_ensure(struct cn_wr *wr, size_t n)
{
    if (wr->err)
        return false;
    if (wr->cap - wr->len >= n)
        return true;
    size_t want = wr->cap ? wr->cap : 256;
    /* A first reservation is taken at its exact size: doubling a
     * 50 MiB fetch response to 64 MiB wastes memory and pushes it past
     * malloc's mmap threshold. */
    if (wr->len == 0 && n > want)
        want = n;
    while (want - wr->len < n) {
        if (want > SIZE_MAX / 2) {
            wr->err = CN_ENOMEM;
            return false;
        }
        want *= 2;
    }
    uint8_t *nb = realloc(wr->buf, want);
    if (!nb) {
        wr->err = CN_ENOMEM;
        return false;
    }
    wr->buf = nb;
    wr->cap = want;
    return true;
}

void cn_wr_raw(struct cn_wr *wr, const void *p, size_t n)
{
    if (!n || !cn_wr_ensure(wr, n))
        return;
    memcpy(wr->buf + wr->len, p, n);
    wr->len += n;
}

void cn_wr_i8(struct cn_wr *wr, int8_t v)
{
    uint8_t b = (uint8_t)v;
    cn_wr_raw(wr, &b, 1);
}

void cn_wr_u16(struct cn_wr *wr, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    cn_wr_raw(wr, b, 2);
}

void cn_wr_i16(struct cn_wr *wr, int16_t v)
{
    cn_wr_u16(wr, (uint16_t)v);
}

void cn_wr_u32(struct cn_wr *wr, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8),
                    (uint8_t)v};
    cn_wr_raw(wr, b, 4);
}

void cn_wr_i32(struct cn_wr *wr, int32_t v)
{
    cn_wr_u32(wr, (uint32_t)v);
}

void cn_wr_i64(struct cn_wr *wr, int64_t v)
{
    cn_wr_u32(wr, (uint32_t)((uint64_t)v >> 32));
    cn_wr_u32(wr, (uint32_t)v);
}

void cn_wr_f64(struct cn_wr *wr, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    cn_wr_i64(wr, (int64_t)u);
}

void cn_wr_bool(struct cn_wr *wr, bool v)
{
    cn_wr_i8(wr, v ? 1 : 0);
}

void cn_wr_uuid(struct cn_wr *wr, const struct cn_uuid *u)
{
    cn_wr_raw(wr, u->b, 16);
}

static void wr_uleb(struct cn_wr *wr, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    cn_wr_raw(wr, b, n);
}

void cn_wr_uvarint(struct cn_wr *wr, uint32_t v)
{
    wr_uleb(wr, v);
}

void cn_wr_varint(struct cn_wr *wr, int32_t v)
{
    wr_uleb(wr, ((uint32_t)v << 1) ^ -((uint32_t)v >> 31));
}

void cn_wr_varlong(struct cn_wr *wr, int64_t v)
{
    wr_uleb(wr, ((uint64_t)v << 1) ^ -((uint64_t)v >> 63));
}

void cn_wr_str(struct cn_wr *wr, bool compact, struct cn_bytes s)
{
    if (compact)
        cn_wr_uvarint(wr, (uint32_t)(s.len + 1));
    else
        cn_wr_i16(wr, (int16_t)s.len);
    if (s.len > 0)
        cn_wr_raw(wr, s.ptr, (size_t)s.len);
}

void cn_wr_bytes(struct cn_wr *wr, bool compact, struct cn_bytes b)
{
    if (compact)
        cn_wr_uvarint(wr, (uint32_t)(b.len + 1));
    else
        cn_wr_i32(wr, b.len);
    if (b.len <= 0)
        return;
    if (wr->ref_min && (size_t)b.len >= wr->ref_min && !wr->err) {
        if (!wr_add_ref(wr, b.ptr, (size_t)b.len))
            wr->err = CN_ENOMEM;
        return;
    }
    cn_wr_raw(wr, b.ptr, (size_t)b.len);
}

void cn_wr_array_len(struct cn_wr *wr, bool compact, int32_t n)
{
    if (compact)
        cn_wr_uvarint(wr, (uint32_t)(n + 1));
    else
        cn_wr_i32(wr, n);
}

void cn_wr_empty_tags(struct cn_wr *wr)
{
    cn_wr_uvarint(wr, 0);
}

size_t cn_wr_reserve(struct cn_wr *wr, size_t n)
{
    size_t off = wr->len;
    if (cn_wr_ensure(wr, n)) {
        memset(wr->buf + wr->len, 0, n);
        wr->len += n;
    }
    return off;
}

void cn_wr_patch_u32(struct cn_wr *wr, size_t off, uint32_t v)
{
    if (wr->err || off + 4 > wr->len)
        return;
    uint8_t *p = wr->buf + off;
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void cn_wr_patch_i32(struct cn_wr *wr, size_t off, int32_t v)
{
    cn_wr_patch_u32(wr, off, (uint32_t)v);
}

size_t cn_uvarint_size(uint32_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

size_t cn_varint_size(int32_t v)
{
    return cn_uvarint_size(((uint32_t)v << 1) ^ -((uint32_t)v >> 31));
}

size_t cn_varlong_size(int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ -((uint64_t)v >> 63);
    size_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}
