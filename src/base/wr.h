/*
 * wr.h - growable writer for wire and disk bytes.
 *
 * Writes never fail midway: on allocation failure wr->err is set, later
 * writes do nothing, and the caller checks once.  Slots for a length or CRC
 * are reserved with cn_wr_reserve() and patched once the size is known.
 */
#ifndef CN_BASE_WR_H
#define CN_BASE_WR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bytes.h"

/* A run of bytes that belongs in the output at `pos` but was not copied:
 * see cn_wr_by_reference(). */
struct cn_wr_ref {
    size_t pos;         /* offset in buf the bytes logically follow */
    const uint8_t *ptr; /* the bytes, owned by the caller */
    size_t len;
};

struct cn_wr {
    uint8_t *buf;           /* heap storage, owned */
    size_t len;             /* bytes written */
    size_t cap;             /* bytes allocated */
    int err;                /* 0 or CN_ENOMEM */
    size_t ref_min;         /* cn_wr_bytes() payloads this big are referenced,
                               not copied; 0 = always copy */
    struct cn_wr_ref *refs; /* referenced runs, in output order, owned */
    size_t nrefs, refs_cap;
    size_t ref_bytes;       /* total length of the referenced runs */
};

void cn_wr_init(struct cn_wr *wr, size_t initial_cap);
void cn_wr_fini(struct cn_wr *wr);
/* Gives up ownership of the buffer; the caller frees it with free(). */
uint8_t *cn_wr_steal(struct cn_wr *wr, size_t *len);
void cn_wr_reset(struct cn_wr *wr);
/* Makes room for n more bytes; returns false (and sets err) if it cannot. */
bool cn_wr_ensure(struct cn_wr *wr, size_t n);

void cn_wr_raw(struct cn_wr *wr, const void *p, size_t n);
void cn_wr_i8(struct cn_wr *wr, int8_t v);
void cn_wr_i16(struct cn_wr *wr, int16_t v);
void cn_wr_u16(struct cn_wr *wr, uint16_t v);
void cn_wr_i32(struct cn_wr *wr, int32_t v);
void cn_wr_u32(struct cn_wr *wr, uint32_t v);
void cn_wr_i64(struct cn_wr *wr, int64_t v);
void cn_wr_f64(struct cn_wr *wr, double v);
void cn_wr_bool(struct cn_wr *wr, bool v);
void cn_wr_uuid(struct cn_wr *wr, const struct cn_uuid *u);
void cn_wr_uvarint(struct cn_wr *wr, uint32_t v);
void cn_wr_varint(struct cn_wr *wr, int32_t v);
void cn_wr_varlong(struct cn_wr *wr, int64_t v);
/*
 * From now on, bytes fields (cn_wr_bytes) of at least min_bytes are not
 * copied: their place is recorded in wr->refs and the caller sends buf and
 * the referenced runs interleaved (writev).  The referenced memory must
 * outlive that send.  Fetch responses use this so record data goes from
 * the read buffer to the socket without another copy.
 */
void cn_wr_by_reference(struct cn_wr *wr, size_t min_bytes);
/* Strings and bytes in classic or compact form; len -1 writes null. */
void cn_wr_str(struct cn_wr *wr, bool compact, struct cn_bytes s);
void cn_wr_bytes(struct cn_wr *wr, bool compact, struct cn_bytes b);
/* Array length in classic or compact form; -1 writes null. */
void cn_wr_array_len(struct cn_wr *wr, bool compact, int32_t n);
/* An empty tagged-field section. */
void cn_wr_empty_tags(struct cn_wr *wr);

/* Reserves n bytes to patch later; returns their offset. */
size_t cn_wr_reserve(struct cn_wr *wr, size_t n);
void cn_wr_patch_i32(struct cn_wr *wr, size_t off, int32_t v);
void cn_wr_patch_u32(struct cn_wr *wr, size_t off, uint32_t v);

/* Size of a uvarint / zig-zag varint encoding, for length prefixes. */
size_t cn_uvarint_size(uint32_t v);
size_t cn_varint_size(int32_t v);
size_t cn_varlong_size(int64_t v);

#endif
