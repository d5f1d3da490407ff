/*
 * rd.h - bounds-checked reader for wire and disk bytes.
 *
 * Every read checks bounds.  After the first failure rd->err is set, reads
 * return 0 and move nothing, so a decoder reads everything and tests once at
 * the end.  Integers are big-endian as Kafka sends them.
 */
#ifndef CN_BASE_RD_H
#define CN_BASE_RD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bytes.h"

struct cn_rd {
    const uint8_t *pos; /* next byte to read */
    const uint8_t *end; /* one past the last readable byte */
    int err;            /* 0, or the first CN_E* that occurred */
};

static inline void cn_rd_init(struct cn_rd *rd, const void *p, size_t len)
{
    rd->pos = (const uint8_t *)p;
    rd->end = rd->pos + len;
    rd->err = 0;
}

static inline size_t cn_rd_left(const struct cn_rd *rd)
{
    return rd->err ? 0 : (size_t)(rd->end - rd->pos);
}

void cn_rd_fail(struct cn_rd *rd, int err);
int8_t cn_rd_i8(struct cn_rd *rd);
int16_t cn_rd_i16(struct cn_rd *rd);
uint16_t cn_rd_u16(struct cn_rd *rd);
int32_t cn_rd_i32(struct cn_rd *rd);
uint32_t cn_rd_u32(struct cn_rd *rd);
int64_t cn_rd_i64(struct cn_rd *rd);
double cn_rd_f64(struct cn_rd *rd);
bool cn_rd_bool(struct cn_rd *rd);
void cn_rd_uuid(struct cn_rd *rd, struct cn_uuid *out);
/* Unsigned LEB128 varint of at most 5 bytes (32 bits). */
uint32_t cn_rd_uvarint(struct cn_rd *rd);
/* Zig-zag varint (32 bits) and varlong (64 bits), as in record batches. */
int32_t cn_rd_varint(struct cn_rd *rd);
int64_t cn_rd_varlong(struct cn_rd *rd);
/* Takes n raw bytes as a view; fails if fewer remain. */
struct cn_bytes cn_rd_raw(struct cn_rd *rd, size_t n);
void cn_rd_skip(struct cn_rd *rd, size_t n);

/*
 * Strings and bytes.  Classic: int16 (string) or int32 (bytes) length, -1
 * null.  Compact: uvarint length+1, 0 null.  A null where the schema does
 * not allow one is for the caller to reject.
 */
struct cn_bytes cn_rd_str(struct cn_rd *rd, bool compact);
struct cn_bytes cn_rd_bytes(struct cn_rd *rd, bool compact);

/*
 * Array length: classic int32 (-1 null), compact uvarint n+1 (0 null).
 * Returns -1 for null.  A count passes only if count * min_elem_bytes fits in
 * what remains, so a lying count cannot make the caller allocate much.
 */
int32_t cn_rd_array_len(struct cn_rd *rd, bool compact, size_t min_elem_bytes);

/* Tagged-field section: reads and discards all fields. */
void cn_rd_skip_tags(struct cn_rd *rd);

#endif
