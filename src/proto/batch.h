/*
 * batch.h - Kafka record batch v2 ("magic 2"): parse, validate, patch, build.
 *
 * Batch layout (big-endian):
 *   0   8  baseOffset
 *   8   4  batchLength: bytes after this field
 *   12  4  partitionLeaderEpoch
 *   16  1  magic (2)
 *   17  4  crc: CRC-32C of bytes 21..end
 *   21  2  attributes: bits 0-2 codec, 3 timestampType (1 = LogAppendTime),
 *          4 isTransactional, 5 isControl, 6 hasDeleteHorizonMs
 *   23  4  lastOffsetDelta
 *   27  8  baseTimestamp
 *   35  8  maxTimestamp
 *   43  8  producerId (-1 none)
 *   51  2  producerEpoch
 *   53  4  baseSequence
 *   57  4  recordsCount
 *   61  ... records, compressed as a whole when the codec is not none
 *
 * Record: length varint (bytes after it), attributes int8, timestampDelta
 * varlong, offsetDelta varint, keyLength varint (-1 null), key, valueLength
 * varint (-1 null), value, header count varint, then per header keyLength
 * varint (>= 0), key, valueLength varint (-1 null), value.
 *
 * Base offset and leader epoch sit before the CRC'd range, so the log can
 * assign them in place without recomputing the CRC.
 */
#ifndef CN_PROTO_BATCH_H
#define CN_PROTO_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bytes.h"
#include "base/rd.h"
#include "base/wr.h"

#define CN_BATCH_HEADER_BYTES 61 /* fixed header, records follow */
#define CN_BATCH_LOG_OVERHEAD 12 /* baseOffset + batchLength */
#define CN_BATCH_MAGIC 2

#define CN_BATCH_OFF_BASE_OFFSET 0
#define CN_BATCH_OFF_LENGTH 8
#define CN_BATCH_OFF_LEADER_EPOCH 12
#define CN_BATCH_OFF_MAGIC 16
#define CN_BATCH_OFF_CRC 17
#define CN_BATCH_OFF_ATTRIBUTES 21
#define CN_BATCH_OFF_MAX_TIMESTAMP 35

#define CN_BATCH_ATTR_CODEC_MASK 0x07
#define CN_BATCH_ATTR_LOG_APPEND_TIME 0x08
#define CN_BATCH_ATTR_TRANSACTIONAL 0x10
#define CN_BATCH_ATTR_CONTROL 0x20
#define CN_BATCH_ATTR_DELETE_HORIZON 0x40

/* Control record types, the int16 after the version in a control key. */
#define CN_CONTROL_ABORT 0
#define CN_CONTROL_COMMIT 1

struct cn_batch_hdr {
    int64_t base_offset;     /* offset of the first record */
    int32_t batch_length;    /* bytes after the length field */
    int32_t leader_epoch;    /* partition leader epoch at append */
    int8_t magic;            /* always 2 once parsed */
    uint32_t crc;            /* CRC-32C as stored */
    int16_t attributes;      /* CN_BATCH_ATTR_* bits */
    int32_t last_offset_delta; /* last record's offset - base_offset */
    int64_t base_timestamp;  /* ms; first record's timestamp */
    int64_t max_timestamp;   /* ms; largest record timestamp, or append time */
    int64_t producer_id;     /* -1 when not idempotent */
    int16_t producer_epoch;  /* -1 when not idempotent */
    int32_t base_sequence;   /* sequence of the first record, -1 none */
    int32_t records_count;   /* records in the batch */
};

static inline int cn_batch_codec(const struct cn_batch_hdr *h)
{
    return h->attributes & CN_BATCH_ATTR_CODEC_MASK;
}

static inline bool cn_batch_is_transactional(const struct cn_batch_hdr *h)
{
    return (h->attributes & CN_BATCH_ATTR_TRANSACTIONAL) != 0;
}

static inline bool cn_batch_is_control(const struct cn_batch_hdr *h)
{
    return (h->attributes & CN_BATCH_ATTR_CONTROL) != 0;
}

static inline bool cn_batch_is_log_append_time(const struct cn_batch_hdr *h)
{
    return (h->attributes & CN_BATCH_ATTR_LOG_APPEND_TIME) != 0;
}

static inline bool cn_batch_has_producer_id(const struct cn_batch_hdr *h)
{
    return h->producer_id >= 0;
}

/* Bytes the batch occupies in a log or a produce request. */
static inline size_t cn_batch_size(const struct cn_batch_hdr *h)
{
    return (size_t)h->batch_length + CN_BATCH_LOG_OVERHEAD;
}

static inline int64_t cn_batch_last_offset(const struct cn_batch_hdr *h)
{
    return h->base_offset + h->last_offset_delta;
}

/* Sequence of the last record, wrapping at INT32_MAX as Kafka does. */
static inline int32_t cn_batch_last_sequence(const struct cn_batch_hdr *h)
{
    if (h->base_sequence < 0)
        return -1;
    int64_t s = (int64_t)h->base_sequence + h->last_offset_delta;
    return (int32_t)(s > INT32_MAX ? s - INT32_MAX - 1 : s);
}

/*
 * Parses the fixed header of the batch starting at p; len is what is
 * available (it may hold more batches).  Checks only what the header says
 * about itself: CN_ETRUNC if the header or the whole batch is not all in
 * p[0..len) (a torn tail in log recovery), CN_ECORRUPT if batchLength is too
 * small to hold a header, CN_EUNSUPPORTED if magic is not 2.  No CRC check.
 * *out is set only on success.  Runs on: any thread.
 */
int cn_batch_hdr_parse(const uint8_t *p, size_t len, struct cn_batch_hdr *out);

/* CRC-32C over bytes 21..len, the value the crc field should hold. */
uint32_t cn_batch_compute_crc(const uint8_t *batch, size_t len);

/* A NULL limits pointer means no size limits and no control batches. */
struct cn_batch_limits {
    size_t max_batch_bytes;        /* whole batch; 0 = no limit */
    size_t max_uncompressed_bytes; /* decompressed records; 0 = 64 MiB */
    bool allow_control;            /* false for client produce */
};

/*
 * Fully validates ONE batch occupying exactly p[0..len): header, CRC,
 * attributes, and every record (decompressed into scratch first when
 * compressed; scratch may be NULL for a private buffer).  Returns
 *   CN_ECORRUPT      CRC, lengths, or record structure (CORRUPT_MESSAGE)
 *   CN_EINVAL        semantically invalid (INVALID_RECORD): count 0,
 *                    offset deltas, control bit from a client, producer
 *                    fields, timestamps below -1 or past maxTimestamp
 *   CN_ETOOBIG       over a limit (MESSAGE_TOO_LARGE)
 *   CN_EUNSUPPORTED  magic != 2 or codec 5..7
 *                    (UNSUPPORTED_FOR_MESSAGE_FORMAT /
 *                    UNSUPPORTED_COMPRESSION_TYPE; cn_batch_codec() tells)
 *   CN_ENOMEM
 * hdr_out (may be NULL) is filled when the header parsed, even if a later
 * check failed.  Runs on: any thread.
 */
int cn_batch_validate(const uint8_t *p, size_t len,
                      const struct cn_batch_limits *lim,
                      struct cn_batch_hdr *hdr_out, struct cn_wr *scratch);

/*
 * Validates a Produce partition's records blob: one or more batches back to
 * back, with nothing left over.  All batches are validated before cb is
 * called once per batch, in order, so a bad batch anywhere rejects the set
 * before the caller acts on any of it.  cb may be NULL; a non-zero return
 * from cb stops the walk and is returned.  Returns the number of batches
 * (>= 1), or a negative code as cn_batch_validate (bytes after the last
 * batch are CN_ECORRUPT, an empty blob CN_EINVAL).  Kafka requires exactly
 * one batch per partition from produce v3 on; the caller enforces that from
 * the count.
 */
int cn_batch_validate_set(const uint8_t *p, size_t len,
                          const struct cn_batch_limits *lim,
                          struct cn_wr *scratch,
                          int (*cb)(void *arg, const uint8_t *batch,
                                    size_t batch_len,
                                    const struct cn_batch_hdr *hdr),
                          void *arg);

/* In-place patching for append; batch points at byte 0 of a batch. */
void cn_batch_set_base_offset(uint8_t *batch, int64_t base_offset);
void cn_batch_set_leader_epoch(uint8_t *batch, int32_t epoch);
/* Marks the batch LogAppendTime with maxTimestamp ts_ms; recomputes CRC. */
void cn_batch_set_log_append_time(uint8_t *batch, size_t len, int64_t ts_ms);

/* One record; views point into the batch or the scratch buffer. */
struct cn_record {
    int64_t offset;          /* absolute: base_offset + offsetDelta */
    int64_t timestamp;       /* ms; maxTimestamp for LogAppendTime batches */
    int8_t attributes;       /* unused by Kafka so far */
    int32_t offset_delta;    /* as stored */
    int64_t timestamp_delta; /* ms, as stored */
    struct cn_bytes key;     /* len -1 for null */
    struct cn_bytes value;   /* len -1 for null (a tombstone) */
    int32_t header_count;    /* headers in headers_raw */
    struct cn_bytes headers_raw; /* encoded; see cn_record_header_next() */
};

struct cn_record_iter {
    struct cn_rd rd;         /* over the uncompressed records */
    int64_t base_offset;     /* from the batch header */
    int64_t base_timestamp;  /* ms */
    int64_t append_time;     /* ms, or INT64_MIN when CreateTime */
    int32_t left;            /* records still to read */
    int32_t index;           /* records read so far */
};

/*
 * Iterates the uncompressed records region of a batch (records, len: the
 * bytes after the 61-byte header, or its decompressed form).
 */
void cn_record_iter_init(struct cn_record_iter *it,
                         const struct cn_batch_hdr *hdr,
                         const uint8_t *records, size_t len);

/*
 * Parses the header of the batch at batch[0..len) and starts an iterator
 * over its records, decompressing into scratch first when needed (records
 * then point into scratch, so keep it alive and untouched while iterating).
 * max_uncompressed 0 means 64 MiB.  hdr may be NULL; scratch may be NULL
 * for an uncompressed batch (else CN_EINVAL).  Stop at the first error.
 */
int cn_batch_records(const uint8_t *batch, size_t len, size_t max_uncompressed,
                     struct cn_wr *scratch, struct cn_batch_hdr *hdr,
                     struct cn_record_iter *it);

/*
 * Reads the next record: returns 1 and fills *rec, 0 at the end (after
 * exactly records_count records), or CN_ECORRUPT for a malformed record or
 * fewer records than counted.  Bytes after the last record are the
 * caller's to check with cn_rd_left(&it->rd).
 */
int cn_record_iter_next(struct cn_record_iter *it, struct cn_record *rec);

/* Reads one header from a reader over headers_raw: 1, 0 at end, or error. */
int cn_record_header_next(struct cn_rd *rd, struct cn_bytes *key,
                          struct cn_bytes *value);

/* A header for the builder. */
struct cn_record_header {
    struct cn_bytes key;   /* never null */
    struct cn_bytes value; /* len -1 for null */
};

struct cn_batch_params {
    int64_t base_offset;    /* usually 0; the log assigns the real one */
    int32_t leader_epoch;   /* -1 from producers */
    int codec;              /* CN_CODEC_* */
    bool transactional;     /* isTransactional bit */
    bool control;           /* isControl bit */
    bool log_append_time;   /* timestampType bit */
    int64_t producer_id;    /* -1 none */
    int16_t producer_epoch; /* -1 none */
    int32_t base_sequence;  /* -1 none */
};

#define CN_BATCH_PARAMS_INIT                                              \
    {                                                                     \
        .leader_epoch = -1, .producer_id = -1, .producer_epoch = -1,      \
        .base_sequence = -1                                               \
    }

struct cn_batch_builder {
    struct cn_batch_params params; /* as given to init */
    struct cn_wr records;   /* uncompressed records so far */
    int64_t base_timestamp; /* ms; first record's */
    int64_t max_timestamp;  /* ms; largest so far */
    int32_t count;          /* records added */
    int err;                /* first failure, reported by finish */
};

void cn_batch_builder_init(struct cn_batch_builder *b,
                           const struct cn_batch_params *params);
void cn_batch_builder_fini(struct cn_batch_builder *b);
/* Adds a record with the next offset; headers may be NULL when n is 0. */
void cn_batch_builder_add(struct cn_batch_builder *b, int64_t ts_ms,
                          struct cn_bytes key, struct cn_bytes value,
                          const struct cn_record_header *headers,
                          int n_headers);
/*
 * Appends the finished batch to out (compressing if asked) with lengths,
 * lastOffsetDelta, timestamps, count and CRC filled in.  Fails with
 * CN_EINVAL if no record was added, CN_ENOMEM, or a codec error.  The
 * builder may be reset with init after fini.
 */
int cn_batch_builder_finish(struct cn_batch_builder *b, struct cn_wr *out);

/*
 * Appends a transaction marker batch: transactional + control bits, one
 * record with key (int16 version 0, int16 type abort 0 / commit 1) and value
 * (int16 version 0, int32 coordinator epoch).
 */
int cn_batch_build_control(struct cn_wr *out, int64_t producer_id,
                           int16_t producer_epoch, bool commit,
                           int32_t coordinator_epoch, int64_t ts_ms);

/*
 * Appends to out the batch at batch[0..len) (one whole, validated batch)
 * with its records re-encoded in codec at level (CN_LEVEL_DEFAULT for the
 * library's), as Kafka's LogValidator rebuilds a batch whose codec is not
 * the topic's compression.type.  The records' bytes (offset deltas,
 * timestamps, keys, values, headers) and every header field are kept
 * (producer id, epoch, base sequence, transactional bit, timestamps,
 * count); only batchLength, the codec bits and the CRC change.  A control
 * batch is refused (CN_EINVAL): Kafka never compresses control records.
 * scratch holds the decompressed records meanwhile.  Errors as
 * cn_decompress / cn_compress; on failure out->len is unchanged.
 * Runs on: any thread.
 */
int cn_batch_recompress(const uint8_t *batch, size_t len, int codec,
                        int level, size_t max_uncompressed,
                        struct cn_wr *scratch, struct cn_wr *out);

/* Reads a control record's key; returns 0 and the type, or CN_ECORRUPT. */
int cn_control_key_parse(struct cn_bytes key, int16_t *type);

#endif
