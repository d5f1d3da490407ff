/*
 * batch.c - record batch v2 parse, validation, patching and building; see
 * batch.h for the byte layout.
 *
 * Everything here reads untrusted bytes (produce requests, segment files),
 * so failures return codes rather than going through cn_corrupt(): a bad
 * client batch is not our corruption.  The log calls cn_corrupt() itself
 * when a stored batch fails.
 */
#include "batch.h"

#include <limits.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "compress.h"

#define DEFAULT_MAX_UNCOMPRESSED ((size_t)64 << 20)
/* length, attributes, timestampDelta, offsetDelta, keyLength, valueLength,
 * header count: one byte each at least. */
#define MIN_RECORD_BYTES 7

static const struct cn_batch_limits default_limits = {0, 0, false};

static uint32_t get_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8) | p[3];
}

static void put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void put_be64(uint8_t *p, uint64_t v)
{
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

/* Wrapping add: offsets and timestamps from the wire must not be UB. */
static int64_t add_wrap(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

int cn_batch_hdr_parse(const uint8_t *p, size_t len, struct cn_batch_hdr *out)
{
    struct cn_batch_hdr h;
    struct cn_rd rd;

    if (len < CN_BATCH_LOG_OVERHEAD)
        return CN_ETRUNC;
    int32_t bl = (int32_t)get_be32(p + CN_BATCH_OFF_LENGTH);
    if (bl < CN_BATCH_HEADER_BYTES - CN_BATCH_LOG_OVERHEAD)
        return CN_ECORRUPT;
    if (len > CN_BATCH_OFF_MAGIC && p[CN_BATCH_OFF_MAGIC] != CN_BATCH_MAGIC)
        return CN_EUNSUPPORTED;
    if (len < CN_BATCH_HEADER_BYTES ||
        (size_t)bl > len - CN_BATCH_LOG_OVERHEAD)
        return CN_ETRUNC;

    cn_rd_init(&rd, p, CN_BATCH_HEADER_BYTES);
    h.base_offset = cn_rd_i64(&rd);
    h.batch_length = cn_rd_i32(&rd);
    h.leader_epoch = cn_rd_i32(&rd);
    h.magic = cn_rd_i8(&rd);
    h.crc = cn_rd_u32(&rd);
    h.attributes = cn_rd_i16(&rd);
    h.last_offset_delta = cn_rd_i32(&rd);
    h.base_timestamp = cn_rd_i64(&rd);
    h.max_timestamp = cn_rd_i64(&rd);
    h.producer_id = cn_rd_i64(&rd);
    h.producer_epoch = cn_rd_i16(&rd);
    h.base_sequence = cn_rd_i32(&rd);
    h.records_count = cn_rd_i32(&rd);
    if (rd.err)
        return CN_ETRUNC; /* cannot happen: 61 bytes are there */
    *out = h;
    return 0;
}

uint32_t cn_batch_compute_crc(const uint8_t *batch, size_t len)
{
    if (len < CN_BATCH_OFF_ATTRIBUTES)
        return 0;
    return cn_crc32c(0, batch + CN_BATCH_OFF_ATTRIBUTES,
                     len - CN_BATCH_OFF_ATTRIBUTES);
}

/* varint length then bytes; -1 is null, other negatives fail. */
static struct cn_bytes rd_varbytes(struct cn_rd *rd)
{
    int32_t n = cn_rd_varint(rd);
    if (rd->err)
        return (struct cn_bytes){NULL, 0};
    if (n == -1)
        return CN_BYTES_NULL;
    if (n < -1) {
        cn_rd_fail(rd, CN_EBADLEN);
        return (struct cn_bytes){NULL, 0};
    }
    return cn_rd_raw(rd, (size_t)n);
}

void cn_record_iter_init(struct cn_record_iter *it,
                         const struct cn_batch_hdr *hdr,
                         const uint8_t *records, size_t len)
{
    cn_rd_init(&it->rd, records, len);
    it->base_offset = hdr->base_offset;
    it->base_timestamp = hdr->base_timestamp;
    it->append_time = cn_batch_is_log_append_time(hdr) ? hdr->max_timestamp
                                                       : INT64_MIN;
    it->left = hdr->records_count > 0 ? hdr->records_count : 0;
    it->index = 0;
}

int cn_record_header_next(struct cn_rd *rd, struct cn_bytes *key,
                          struct cn_bytes *value)
{
    if (rd->err)
        return CN_ECORRUPT;
    if (cn_rd_left(rd) == 0)
        return 0;
    int32_t klen = cn_rd_varint(rd);
    if (!rd->err && klen < 0)
        cn_rd_fail(rd, CN_EBADLEN); /* header keys are never null */
    *key = cn_rd_raw(rd, klen > 0 ? (size_t)klen : 0);
    *value = rd_varbytes(rd);
    return rd->err ? CN_ECORRUPT : 1;
}

int cn_record_iter_next(struct cn_record_iter *it, struct cn_record *rec)
{
    struct cn_rd *rd = &it->rd;
    struct cn_rd r;

    if (it->left == 0)
        return 0;
    int32_t len = cn_rd_varint(rd);
    if (rd->err || len < 0 || (size_t)len > cn_rd_left(rd))
        return CN_ECORRUPT;
    cn_rd_init(&r, rd->pos, (size_t)len);
    cn_rd_skip(rd, (size_t)len);

    rec->attributes = cn_rd_i8(&r);
    rec->timestamp_delta = cn_rd_varlong(&r);
    rec->offset_delta = cn_rd_varint(&r);
    rec->key = rd_varbytes(&r);
    rec->value = rd_varbytes(&r);
    int32_t nh = cn_rd_varint(&r);
    if (!r.err && (nh < 0 || (size_t)nh > cn_rd_left(&r) / 2))
        cn_rd_fail(&r, CN_EBADLEN); /* a header takes two bytes at least */
    const uint8_t *hstart = r.pos;
    for (int32_t i = 0; i < nh && !r.err; i++) {
        struct cn_bytes k, v;
        if (cn_record_header_next(&r, &k, &v) != 1)
            cn_rd_fail(&r, CN_EBADLEN);
    }
    if (r.err || cn_rd_left(&r) != 0)
        return CN_ECORRUPT; /* record length and contents disagree */
    rec->header_count = nh;
    rec->headers_raw = cn_bytes_of(nh ? hstart : NULL,
                                   (int32_t)(r.pos - hstart));
    rec->offset = add_wrap(it->base_offset, rec->offset_delta);
    rec->timestamp = it->append_time != INT64_MIN
                         ? it->append_time
                         : add_wrap(it->base_timestamp, rec->timestamp_delta);
    it->left--;
    it->index++;
    return 1;
}

static int batch_records(const uint8_t *batch, const struct cn_batch_hdr *h,
                         size_t max_uncompressed, struct cn_wr *scratch,
                         struct cn_record_iter *it)
{
    const uint8_t *recs = batch + CN_BATCH_HEADER_BYTES;
    size_t rlen = cn_batch_size(h) - CN_BATCH_HEADER_BYTES;
    int codec = cn_batch_codec(h);

    if (codec > CN_CODEC_MAX)
        return CN_EUNSUPPORTED;
    if (codec != CN_CODEC_NONE) {
        cn_wr_reset(scratch);
        int rc = cn_decompress(codec, recs, rlen,
                               max_uncompressed ? max_uncompressed
                                                : DEFAULT_MAX_UNCOMPRESSED,
                               scratch);
        if (rc)
            return rc;
        /* An empty output leaves buf NULL; readers want a real pointer. */
        recs = scratch->buf ? scratch->buf : (const uint8_t *)"";
        rlen = scratch->len;
    }
    cn_record_iter_init(it, h, recs, rlen);
    return 0;
}

int cn_batch_records(const uint8_t *batch, size_t len, size_t max_uncompressed,
                     struct cn_wr *scratch, struct cn_batch_hdr *hdr,
                     struct cn_record_iter *it)
{
    struct cn_batch_hdr h;
    int rc = cn_batch_hdr_parse(batch, len, &h);
    if (rc)
        return rc;
    if (cn_batch_codec(&h) != CN_CODEC_NONE && !scratch)
        return CN_EINVAL;
    rc = batch_records(batch, &h, max_uncompressed, scratch, it);
    if (rc)
        return rc;
    if (hdr)
        *hdr = h;
    return 0;
}

/* Header checks that need no record bytes; see cn_batch_validate. */
static int validate_header(const struct cn_batch_hdr *h,
                           const struct cn_batch_limits *lim)
{
    if (cn_batch_codec(h) > CN_CODEC_MAX)
        return CN_EUNSUPPORTED;
    if (cn_batch_is_control(h) && !lim->allow_control)
        return CN_EINVAL;
    if (cn_batch_is_transactional(h) && h->producer_id < 0)
        return CN_EINVAL;
    /* Idempotent data batches carry a sequence; markers do not. */
    if (h->producer_id >= 0 && h->base_sequence < 0 && !cn_batch_is_control(h))
        return CN_EINVAL;
    if (h->records_count <= 0 ||
        h->last_offset_delta != h->records_count - 1)
        return CN_EINVAL;
    if (h->base_timestamp < -1 || h->max_timestamp < -1)
        return CN_EINVAL;
    return 0;
}

static int validate_records(const struct cn_batch_hdr *h,
                            struct cn_record_iter *it)
{
    bool create_time = !cn_batch_is_log_append_time(h);
    struct cn_record rec;
    int rc;

    for (int32_t i = 0; i < h->records_count; i++) {
        rc = cn_record_iter_next(it, &rec);
        if (rc != 1)
            return CN_ECORRUPT; /* malformed, or fewer than counted */
        if (rec.offset_delta != i)
            return CN_EINVAL;
        int64_t ts;
        if (__builtin_add_overflow(h->base_timestamp, rec.timestamp_delta,
                                   &ts) ||
            ts < -1)
            return CN_EINVAL;
        if (create_time && ts > h->max_timestamp)
            return CN_EINVAL;
    }
    if (cn_rd_left(&it->rd) != 0)
        return CN_ECORRUPT; /* bytes after the last counted record */
    return 0;
}

int cn_batch_validate(const uint8_t *p, size_t len,
                      const struct cn_batch_limits *lim,
                      struct cn_batch_hdr *hdr_out, struct cn_wr *scratch)
{
    struct cn_batch_hdr h;
    struct cn_record_iter it;
    struct cn_wr own;
    int rc;

    if (!lim)
        lim = &default_limits;
    if (lim->max_batch_bytes && len > lim->max_batch_bytes)
        return CN_ETOOBIG;
    rc = cn_batch_hdr_parse(p, len, &h);
    if (rc)
        return rc == CN_ETRUNC ? CN_ECORRUPT : rc;
    if (hdr_out)
        *hdr_out = h;
    if (cn_batch_size(&h) != len)
        return CN_ECORRUPT;
    if (cn_batch_compute_crc(p, len) != h.crc)
        return CN_ECORRUPT;
    rc = validate_header(&h, lim);
    if (rc)
        return rc;
    /* Cheap bound before decoding anything: counted records must fit. */
    if (cn_batch_codec(&h) == CN_CODEC_NONE &&
        (size_t)h.records_count > (len - CN_BATCH_HEADER_BYTES) /
                                      MIN_RECORD_BYTES)
        return CN_ECORRUPT;

    if (!scratch) {
        cn_wr_init(&own, 0);
        scratch = &own;
    }
    rc = batch_records(p, &h, lim->max_uncompressed_bytes, scratch, &it);
    if (!rc)
        rc = validate_records(&h, &it);
    if (scratch == &own)
        cn_wr_fini(&own);
    return rc;
}

int cn_batch_validate_set(const uint8_t *p, size_t len,
                          const struct cn_batch_limits *lim,
                          struct cn_wr *scratch,
                          int (*cb)(void *arg, const uint8_t *batch,
                                    size_t batch_len,
                                    const struct cn_batch_hdr *hdr),
                          void *arg)
{
    struct cn_batch_hdr h;
    size_t off = 0;
    int n = 0, rc;

    if (!lim)
        lim = &default_limits;
    if (len == 0)
        return CN_EINVAL;
    while (off < len) {
        size_t left = len - off;
        /* A size over the limit is MESSAGE_TOO_LARGE even when the bytes
         * are not all there, as in Kafka. */
        if (left >= CN_BATCH_LOG_OVERHEAD && lim->max_batch_bytes) {
            int32_t bl = (int32_t)get_be32(p + off + CN_BATCH_OFF_LENGTH);
            if (bl > 0 && (size_t)bl + CN_BATCH_LOG_OVERHEAD >
                              lim->max_batch_bytes)
                return CN_ETOOBIG;
        }
        rc = cn_batch_hdr_parse(p + off, left, &h);
        if (rc)
            return rc == CN_ETRUNC ? CN_ECORRUPT : rc;
        rc = cn_batch_validate(p + off, cn_batch_size(&h), lim, NULL,
                               scratch);
        if (rc)
            return rc;
        off += cn_batch_size(&h);
        if (n == INT_MAX)
            return CN_ETOOBIG;
        n++;
    }
    if (!cb)
        return n;
    for (off = 0; off < len; off += cn_batch_size(&h)) {
        rc = cn_batch_hdr_parse(p + off, len - off, &h);
        if (!rc)
            rc = cb(arg, p + off, cn_batch_size(&h), &h);
        if (rc)
            return rc;
    }
    return n;
}

void cn_batch_set_base_offset(uint8_t *batch, int64_t base_offset)
{
    put_be64(batch + CN_BATCH_OFF_BASE_OFFSET, (uint64_t)base_offset);
}

void cn_batch_set_leader_epoch(uint8_t *batch, int32_t epoch)
{
    put_be32(batch + CN_BATCH_OFF_LEADER_EPOCH, (uint32_t)epoch);
}

void cn_batch_set_log_append_time(uint8_t *batch, size_t len, int64_t ts_ms)
{
    uint16_t attr = (uint16_t)((batch[CN_BATCH_OFF_ATTRIBUTES] << 8) |
                               batch[CN_BATCH_OFF_ATTRIBUTES + 1]);
    put_be16(batch + CN_BATCH_OFF_ATTRIBUTES,
             attr | CN_BATCH_ATTR_LOG_APPEND_TIME);
    put_be64(batch + CN_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)ts_ms);
    put_be32(batch + CN_BATCH_OFF_CRC, cn_batch_compute_crc(batch, len));
}

void cn_batch_builder_init(struct cn_batch_builder *b,
                           const struct cn_batch_params *params)
{
    memset(b, 0, sizeof *b);
    b->params = *params;
    cn_wr_init(&b->records, 0);
    b->base_timestamp = -1;
    b->max_timestamp = -1;
}

void cn_batch_builder_fini(struct cn_batch_builder *b)
{
    cn_wr_fini(&b->records);
}

static size_t varbytes_size(struct cn_bytes v)
{
    return v.len < 0 ? 1 : cn_varint_size(v.len) + (size_t)v.len;
}

static void wr_varbytes(struct cn_wr *wr, struct cn_bytes v)
{
    cn_wr_varint(wr, v.len < 0 ? -1 : v.len);
    if (v.len > 0)
        cn_wr_raw(wr, v.ptr, (size_t)v.len);
}

void cn_batch_builder_add(struct cn_batch_builder *b, int64_t ts_ms,
                          struct cn_bytes key, struct cn_bytes value,
                          const struct cn_record_header *headers,
                          int n_headers)
{
    if (b->err)
        return;
    if (b->count == INT32_MAX || n_headers < 0) {
        b->err = CN_EINVAL;
        return;
    }
    if (b->count == 0 || ts_ms > b->max_timestamp)
        b->max_timestamp = ts_ms;
    if (b->count == 0)
        b->base_timestamp = ts_ms;
    int64_t ts_delta = add_wrap(ts_ms, -b->base_timestamp);
    int32_t off_delta = b->count;

    size_t body = 1 + cn_varlong_size(ts_delta) + cn_varint_size(off_delta) +
                  varbytes_size(key) + varbytes_size(value) +
                  cn_varint_size(n_headers);
    for (int i = 0; i < n_headers; i++) {
        if (headers[i].key.len < 0) {
            b->err = CN_EINVAL;
            return;
        }
        body += varbytes_size(headers[i].key) +
                varbytes_size(headers[i].value);
    }
    if (body > INT32_MAX) {
        b->err = CN_ETOOBIG;
        return;
    }
    struct cn_wr *wr = &b->records;
    cn_wr_varint(wr, (int32_t)body);
    cn_wr_i8(wr, 0);
    cn_wr_varlong(wr, ts_delta);
    cn_wr_varint(wr, off_delta);
    wr_varbytes(wr, key);
    wr_varbytes(wr, value);
    cn_wr_varint(wr, n_headers);
    for (int i = 0; i < n_headers; i++) {
        wr_varbytes(wr, headers[i].key);
        wr_varbytes(wr, headers[i].value);
    }
    if (wr->err)
        b->err = wr->err;
    b->count++;
}

int cn_batch_builder_finish(struct cn_batch_builder *b, struct cn_wr *out)
{
    const struct cn_batch_params *pm = &b->params;
    size_t start = out->len;
    int rc;

    if (b->err)
        return b->err;
    if (b->count == 0 || pm->codec < 0 || pm->codec > CN_CODEC_MAX)
        return CN_EINVAL;
    if (out->err)
        return CN_ENOMEM;
    int attr = pm->codec;
    if (pm->log_append_time)
        attr |= CN_BATCH_ATTR_LOG_APPEND_TIME;
    if (pm->transactional)
        attr |= CN_BATCH_ATTR_TRANSACTIONAL;
    if (pm->control)
        attr |= CN_BATCH_ATTR_CONTROL;

    cn_wr_i64(out, pm->base_offset);
    size_t len_slot = cn_wr_reserve(out, 4);
    cn_wr_i32(out, pm->leader_epoch);
    cn_wr_i8(out, CN_BATCH_MAGIC);
    size_t crc_slot = cn_wr_reserve(out, 4);
    cn_wr_i16(out, (int16_t)attr);
    cn_wr_i32(out, b->count - 1);
    cn_wr_i64(out, b->base_timestamp);
    cn_wr_i64(out, b->max_timestamp);
    cn_wr_i64(out, pm->producer_id);
    cn_wr_i16(out, pm->producer_epoch);
    cn_wr_i32(out, pm->base_sequence);
    cn_wr_i32(out, b->count);
    if (out->err) {
        rc = CN_ENOMEM;
        goto out_truncate;
    }
    rc = cn_compress(pm->codec, b->records.buf, b->records.len, out);
    if (rc)
        goto out_truncate;
    size_t total = out->len - start;
    if (total - CN_BATCH_LOG_OVERHEAD > INT32_MAX) {
        rc = CN_ETOOBIG;
        goto out_truncate;
    }
    cn_wr_patch_i32(out, len_slot, (int32_t)(total - CN_BATCH_LOG_OVERHEAD));
    cn_wr_patch_u32(out, crc_slot,
                    cn_batch_compute_crc(out->buf + start, total));
    return 0;

out_truncate:
    out->len = start;
    out->err = 0;
    return rc;
}

int cn_batch_build_control(struct cn_wr *out, int64_t producer_id,
                           int16_t producer_epoch, bool commit,
                           int32_t coordinator_epoch, int64_t ts_ms)
{
    struct cn_batch_params pm = CN_BATCH_PARAMS_INIT;
    struct cn_batch_builder b;
    uint8_t key[4], value[6];
    int rc;

    pm.transactional = true;
    pm.control = true;
    pm.producer_id = producer_id;
    pm.producer_epoch = producer_epoch;
    put_be16(key, 0);
    put_be16(key + 2, commit ? CN_CONTROL_COMMIT : CN_CONTROL_ABORT);
    put_be16(value, 0);
    put_be32(value + 2, (uint32_t)coordinator_epoch);
    cn_batch_builder_init(&b, &pm);
    cn_batch_builder_add(&b, ts_ms, cn_bytes_of(key, 4),
                         cn_bytes_of(value, 6), NULL, 0);
    rc = cn_batch_builder_finish(&b, out);
    cn_batch_builder_fini(&b);
    return rc;
}

int cn_control_key_parse(struct cn_bytes key, int16_t *type)
{
    struct cn_rd rd;
    if (key.len < 4)
        return CN_ECORRUPT;
    cn_rd_init(&rd, key.ptr, (size_t)key.len);
    int16_t version = cn_rd_i16(&rd);
    int16_t t = cn_rd_i16(&rd);
    if (rd.err || version < 0)
        return CN_ECORRUPT;
    *type = t;
    return 0;
}

int cn_batch_recompress(const uint8_t *batch, size_t len, int codec,
                        int level, size_t max_uncompressed,
                        struct cn_wr *scratch, struct cn_wr *out)
{
    struct cn_batch_hdr h;
    int rc = cn_batch_hdr_parse(batch, len, &h);
    if (rc)
        return rc;
    if (cn_batch_size(&h) != len || codec < 0 || codec > CN_CODEC_MAX)
        return CN_EINVAL;
    if (cn_batch_is_control(&h))
        return CN_EINVAL; /* Kafka never compresses control records */
    const uint8_t *recs = batch + CN_BATCH_HEADER_BYTES;
    size_t rlen = len - CN_BATCH_HEADER_BYTES;
    if (cn_batch_codec(&h) != CN_CODEC_NONE) {
        cn_wr_reset(scratch);
        rc = cn_decompress(cn_batch_codec(&h), recs, rlen,
                           max_uncompressed ? max_uncompressed
                                            : DEFAULT_MAX_UNCOMPRESSED,
                           scratch);
        if (rc)
            return rc;
        recs = scratch->buf ? scratch->buf : (const uint8_t *)"";
        rlen = scratch->len;
    }
    size_t start = out->len;
    cn_wr_raw(out, batch, CN_BATCH_HEADER_BYTES);
    if (out->err) {
        rc = CN_ENOMEM;
        goto out_truncate;
    }
    rc = cn_compress_level(codec, level, recs, rlen, out);
    if (rc)
        goto out_truncate;
    size_t total = out->len - start;
    if (total - CN_BATCH_LOG_OVERHEAD > INT32_MAX) {
        rc = CN_ETOOBIG;
        goto out_truncate;
    }
    cn_wr_patch_i32(out, start + CN_BATCH_OFF_LENGTH,
                    (int32_t)(total - CN_BATCH_LOG_OVERHEAD));
    uint8_t *nb = out->buf + start;
    uint16_t attr = (uint16_t)(((uint16_t)h.attributes &
                                ~(uint16_t)CN_BATCH_ATTR_CODEC_MASK) |
                               (uint16_t)codec);
    nb[CN_BATCH_OFF_ATTRIBUTES] = (uint8_t)(attr >> 8);
    nb[CN_BATCH_OFF_ATTRIBUTES + 1] = (uint8_t)attr;
    cn_wr_patch_u32(out, start + CN_BATCH_OFF_CRC,
                    cn_batch_compute_crc(nb, total));
    return 0;

out_truncate:
    out->len = start;
    out->err = 0;
    return rc;
}
